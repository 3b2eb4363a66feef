"""Grad modes (ember/autograd/grad_mode.py): no_grad, enable_grad, set_grad_enabled and
inference_mode as contexts and decorators, the mode queries, and detect_anomaly reporting a NaN
gradient."""
import pytest

import ember


def test_no_grad_enable_grad_set_grad_enabled_inference_mode():
    x = ember.ones(2, requires_grad=True)
    with ember.no_grad():
        assert not (x * 2).requires_grad
        with ember.enable_grad():
            assert (x * 2).requires_grad
    with ember.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert ember.is_grad_enabled()
    with ember.inference_mode():
        assert not (x * 2).requires_grad and ember.is_inference_mode_enabled()

    @ember.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad


def test_detect_anomaly_reports_nan_and_forward_trace():
    x = ember.tensor([0.0], requires_grad=True)
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        anomaly = ember.autograd.detect_anomaly()
    with anomaly:
        y = (x.sqrt() * 0).sum()
        with pytest.raises(RuntimeError, match="returned nan values in its 0th output"):
            y.backward()


def test_set_grad_enabled_as_a_call_and_anomaly_switches():
    x = ember.ones(2, requires_grad=True)
    try:
        ember.set_grad_enabled(False)
        assert not ember.is_grad_enabled() and not (x * 2).requires_grad
    finally:
        ember.set_grad_enabled(True)
    assert ember.is_grad_enabled()
    assert not ember.autograd.grad_mode.is_anomaly_enabled()
    with pytest.warns(UserWarning), ember.autograd.detect_anomaly(check_nan=False):
        assert ember.autograd.grad_mode.is_anomaly_enabled()
        assert not ember.autograd.grad_mode.is_anomaly_check_nan_enabled()
    assert not ember.autograd.grad_mode.is_anomaly_enabled()


def test_inference_mode_false_turns_gradients_on_as_torch():
    torch = pytest.importorskip("torch")
    seen = []
    for m in (torch, ember):
        v = m.ones(2, requires_grad=True)
        got = []
        for outer in (m.inference_mode, m.no_grad):
            with outer():
                with m.inference_mode(False):
                    got.append((m.is_grad_enabled(), m.is_inference_mode_enabled(),
                                (v * 2).requires_grad))
                got.append((m.is_grad_enabled(), m.is_inference_mode_enabled()))
        seen.append(got)
    assert seen[0] == seen[1]
