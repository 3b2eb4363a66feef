"""Convolution geometry (ember.kernels.conv.geometry): a remembered geometry is the validated
one, never hides an error, and its cache stays bounded; the dtype check."""
import numpy as np
import pytest

from ember.kernels import conv as C


def _geometry_module():
    import sys
    return sys.modules["ember.kernels.conv.geometry"]


def test_a_remembered_geometry_is_the_validated_one():
    g = C.geometry("conv2d", (2, 3, 9, 9), (4, 3, 3, 3), 1, 1, 1, 1)
    again = C.geometry("conv2d", (2, 3, 9, 9), (4, 3, 3, 3), 1, 1, 1, 1)
    assert again is g
    assert g.output_shape == (2, 4, 9, 9) and g.padding == (1, 1, 1, 1)
    # a list argument (unhashable) is validated every time, same result
    assert C.geometry("conv2d", (2, 3, 9, 9), (4, 3, 3, 3), [1, 1], [1, 1], 1, 1) == g


@pytest.mark.parametrize("bad", [{"stride": True}, {"stride": 1.0}, {"padding": True},
                                 {"dilation": 1.0}, {"stride": 0}])
def test_a_remembered_geometry_never_hides_an_error(bad):
    """``True == 1`` and ``1.0 == 1`` hash alike: the cache key tells them apart, so an argument
    the checks refuse is refused after the valid one was remembered."""
    args = dict(stride=1, padding=0, dilation=1)
    C.geometry("conv2d", (1, 2, 8, 8), (3, 2, 3, 3), args["stride"], args["padding"],
               args["dilation"], 1)
    args.update(bad)
    with pytest.raises((ValueError, TypeError)):
        C.geometry("conv2d", (1, 2, 8, 8), (3, 2, 3, 3), args["stride"], args["padding"],
                   args["dilation"], 1)


def test_the_geometry_cache_stays_bounded(monkeypatch):
    mod = _geometry_module()
    monkeypatch.setattr(mod, "_geometries", {})
    for h in range(8, 8 + mod._GEOMETRIES_MAX + 10):
        C.geometry("conv2d", (1, 1, h, 8), (1, 1, 3, 3), 1, 0, 1, 1)
    assert len(mod._geometries) <= mod._GEOMETRIES_MAX


def test_check_dtype_two_arrays():
    a32, a64 = np.zeros(2, np.float32), np.zeros(2, np.float64)
    _geometry_module().check_dtype("conv2d", a32, a32)
    _geometry_module().check_dtype("conv2d", a64, a64)
    for pair in ((a32, a64), (np.zeros(2, np.int32), np.zeros(2, np.int32)),
                 (np.zeros(2, np.float16), np.zeros(2, np.float16))):
        with pytest.raises(RuntimeError, match="conv2d: expected float32 or float64"):
            _geometry_module().check_dtype("conv2d", *pair)
