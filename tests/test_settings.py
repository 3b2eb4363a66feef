"""ember's copies of torch's process-wide switches (ember/_settings.py) and the anomaly-mode
switches of ember.autograd.grad_mode, as torch 2.13."""
import pytest

import ember

torch = pytest.importorskip("torch")


def test_process_wide_switches_match_torch():
    assert ember.get_default_device() == ember.device("cpu")
    ember.set_default_device("cpu")
    ember.set_default_device(None)
    with pytest.raises(Exception, match="CPU"):
        ember.set_default_device("cuda")
    try:
        for mode, warn_only, debug in [(True, False, 2), (True, True, 1), (False, False, 0)]:
            ember.use_deterministic_algorithms(mode, warn_only=warn_only)
            assert ember.are_deterministic_algorithms_enabled() is mode
            assert ember.is_deterministic_algorithms_warn_only_enabled() is warn_only
            assert ember.get_deterministic_debug_mode() == debug
        for value, debug in [("warn", 1), ("error", 2), ("default", 0), (2, 2), (0, 0)]:
            ember.set_deterministic_debug_mode(value)
            assert ember.get_deterministic_debug_mode() == debug
        with pytest.raises(RuntimeError, match="expected one of"):
            ember.set_deterministic_debug_mode("bad")
        with pytest.raises(RuntimeError, match="0, 1, or 2"):
            ember.set_deterministic_debug_mode(5)
        with pytest.raises(TypeError, match="must be bool"):
            ember.use_deterministic_algorithms(1)
    finally:
        ember.use_deterministic_algorithms(False)
    assert ember.get_float32_matmul_precision() == "highest"
    try:
        ember.set_float32_matmul_precision("medium")
        assert ember.get_float32_matmul_precision() == "medium"
        with pytest.warns(UserWarning, match="no effect"):
            ember.set_float32_matmul_precision("bad")
        assert ember.get_float32_matmul_precision() == "medium"
    finally:
        ember.set_float32_matmul_precision("highest")
    assert ember.is_warn_always_enabled() is False
    ember.set_warn_always(True)
    assert ember.is_warn_always_enabled() is True
    ember.set_warn_always(False)
    assert ember.get_num_interop_threads() >= 1
    with pytest.raises(RuntimeError, match="positive"):
        ember.set_num_interop_threads(0)
    assert ember.set_flush_denormal(False) is False
    with pytest.raises(RuntimeError, match="bool"):
        ember.set_flush_denormal("x")


def test_anomaly_switches_drive_detect_anomaly():
    assert ember.is_anomaly_enabled() is torch.is_anomaly_enabled() is False
    try:
        ember.set_anomaly_enabled(True)
        assert ember.is_anomaly_enabled() and ember.is_anomaly_check_nan_enabled()
        x = ember.tensor([0.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="nan|NaN"):   # what detect_anomaly raises
            (x / x).sum().backward()
        ember.set_anomaly_enabled(True, False)
        assert ember.is_anomaly_enabled() and not ember.is_anomaly_check_nan_enabled()
    finally:
        ember.set_anomaly_enabled(False)
    assert not ember.is_anomaly_enabled()
    with ember.autograd.detect_anomaly():
        assert ember.is_anomaly_enabled()
    with pytest.raises(TypeError):
        ember.set_anomaly_enabled(1)
