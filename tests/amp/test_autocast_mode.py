"""The autocast region (ember/amp/autocast_mode.py) against torch 2.13's CPU autocast: nesting,
enabled=False, decorator use, the state queries, exceptions, unavailable devices and dtypes,
bad device types."""
import warnings

import pytest
import torch

import ember


def test_state_queries_nesting_and_enabled_false_as_torch():
    for m in (torch, ember):
        assert not m.is_autocast_enabled("cpu") and not m.is_autocast_enabled()
        assert m.get_autocast_dtype("cpu") == m.bfloat16
        assert m.get_autocast_dtype("cuda") == m.float16
        with m.autocast("cpu"):
            assert m.is_autocast_enabled("cpu") and not m.is_autocast_enabled()
            assert (m.ones(2, 2) @ m.ones(2, 2)).dtype == m.bfloat16
            with m.autocast("cpu", dtype=m.float16):
                assert m.get_autocast_dtype("cpu") == m.float16
                assert (m.ones(2, 2) @ m.ones(2, 2)).dtype == m.float16
            assert m.get_autocast_dtype("cpu") == m.bfloat16
            with m.autocast("cpu", enabled=False):
                assert not m.is_autocast_enabled("cpu")
                assert (m.ones(2, 2) @ m.ones(2, 2)).dtype == m.float32
            assert m.is_autocast_enabled("cpu")
        assert not m.is_autocast_enabled("cpu")


def test_autocast_as_decorator_and_through_amp_and_cpu_amp():
    for m in (torch, ember):
        @m.autocast("cpu")
        def f(a):
            return a @ a
        assert f(m.ones(2, 2)).dtype == m.bfloat16
        with m.amp.autocast("cpu"):
            assert (m.ones(2, 2) @ m.ones(2, 2)).dtype == m.bfloat16
        with pytest.warns(FutureWarning, match="torch.cpu.amp.autocast"):
            ctx = m.cpu.amp.autocast()
        with ctx:
            assert (m.ones(2, 2) @ m.ones(2, 2)).dtype == m.bfloat16
        assert not m.is_autocast_enabled("cpu")


def test_exception_inside_region_restores_state():
    with pytest.raises(ValueError):
        with ember.autocast("cpu"):
            raise ValueError("boom")
    assert not ember.is_autocast_enabled("cpu")


@pytest.mark.parametrize("device,dtype", [("cuda", None), ("cpu", "float64")])
def test_unavailable_device_or_dtype_warns_and_disables_as_torch(device, dtype):
    for m in (torch, ember):
        kw = {} if dtype is None else {"dtype": getattr(m, dtype)}
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with m.autocast(device, **kw):
                assert not m.is_autocast_enabled("cpu")
                assert (m.ones(2, 2) @ m.ones(2, 2)).dtype == m.float32
        assert any("Disabling autocast" in str(x.message) for x in w)


def test_bad_device_type_errors_as_torch():
    for m, err in ((torch, ValueError), (ember, ember.errors.EmberValueError)):
        with pytest.raises(err, match="device_type"):
            m.autocast(3)
    for m, err in ((torch, RuntimeError), (ember, ember.errors.EmberRuntimeError)):
        with pytest.raises(err, match="device type at start of device string"):
            m.autocast("xpuu")


