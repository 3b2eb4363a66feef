"""The per-call work a batch-of-one layer skips: remembered convolution geometries and pooling
arguments (never hiding an error), and no BLAS lock for the Numba-only convolutions of one
image."""
import numpy as np
import pytest

from ember.kernels import conv as C
from ember.kernels import pool
from ember.kernels.conv import parallel, selector


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


@pytest.mark.parametrize("bad", [{"kernel_size": True}, {"kernel_size": 2.0}, {"stride": 0},
                                 {"padding": 2}, {"dilation": 1.0}])
def test_remembered_pool_arguments_never_hide_an_error(bad):
    x = np.zeros((1, 2, 6, 6), np.float32)
    args = dict(kernel_size=2, stride=2, padding=0, dilation=1)
    pool.max_pool2d_forward(x, args["kernel_size"], args["stride"], args["padding"],
                            args["dilation"], False)
    args.update(bad)
    with pytest.raises((ValueError, TypeError)):
        pool.max_pool2d_forward(x, args["kernel_size"], args["stride"], args["padding"],
                                args["dilation"], False)


def test_remembered_pool_arguments_give_the_same_result():
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 7)).astype(np.float32)
    first = pool.max_pool2d_forward(x, (3, 2), (2, 1), (1, 0), 1, True)
    again = pool.max_pool2d_forward(x, (3, 2), (2, 1), (1, 0), 1, True)
    listed = pool.max_pool2d_forward(x, [3, 2], [2, 1], [1, 0], [1, 1], True)
    for a, b in ((first, again), (first, listed)):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize("name", ["thin", "direct"])
def test_a_batch_of_one_runs_numba_only_algorithms_without_the_blas_lock(name, monkeypatch):
    """``thin`` and ``direct`` call no BLAS and run one image serially under any policy, so a
    batch of one skips ``parallel.policy`` (its BLAS lock and thread-count changes); bigger
    batches still take it."""
    from ember.backends import conv as settings
    mod = selector.ALGORITHMS[name]
    if not mod.supports(C.geometry("conv2d", (1, 6, 14, 14), (16, 6, 5, 5), 1, 0, 1, 1),
                        "forward"):
        pytest.skip("needs Numba")
    entered = []
    real = parallel.policy

    class Counting(real):
        def __enter__(self):
            entered.append(self.own)
            return super().__enter__()
    monkeypatch.setattr(parallel, "policy", Counting)
    monkeypatch.setattr(settings, "algorithm", name)
    rng = np.random.default_rng(1)
    w = rng.standard_normal((16, 6, 5, 5)).astype(np.float32)
    x = rng.standard_normal((3, 6, 14, 14)).astype(np.float32)
    one = C.conv2d_forward(x[:1], w, None, 1, 0, 1, 1)
    assert entered == []
    many = C.conv2d_forward(x, w, None, 1, 0, 1, 1)
    assert entered
    np.testing.assert_allclose(one, many[:1], rtol=1e-5, atol=1e-5)


def test_a_batch_of_one_in_directs_territory_runs_thin():
    """One image, stride 1: ``thin`` (no per-call weight repacking) instead of ``direct``; a
    batch keeps ``direct``, and a strided layer (thin is stride-1 only) too."""
    from ember.kernels.conv import thin
    one = C.geometry("conv2d", (1, 6, 14, 14), (16, 6, 5, 5), 1, 0, 1, 1)
    if not thin.supports(one, "forward"):
        pytest.skip("needs Numba")
    assert selector.heuristic("forward", one) == "thin"
    assert selector.heuristic("forward", one, thin_ok=False) == "direct"   # thin compiling
    assert selector.heuristic("weight", one) == "direct"
    assert selector.heuristic("forward", C.geometry("conv2d", (64, 6, 14, 14), (16, 6, 5, 5), 1,
                                                    0, 1, 1)) == "direct"
    assert selector.heuristic("forward", C.geometry("conv2d", (1, 6, 14, 14), (16, 6, 5, 5), 2,
                                                    0, 1, 1)) == "direct"
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 6, 14, 14))
    w = rng.standard_normal((16, 6, 5, 5))
    expected = selector.ALGORITHMS["im2col"].forward(x, w, one)
    np.testing.assert_allclose(C.conv2d_forward(x, w, None, 1, 0, 1, 1), expected, rtol=1e-12,
                               atol=1e-12)


def test_the_2x2_pool_split_over_threads_equals_one_chunk(monkeypatch):
    """The 2x2 forward runs in one chunk below ``POOL_2X2_PARALLEL_SIZE`` outputs (a pool
    hand-over costs more than LeNet's pools) and split from there: same values and indices."""
    if pool._kernels() is None:
        pytest.skip("needs Numba")
    from ember.kernels.runtime.threads import get_num_threads, set_num_threads
    x = np.random.default_rng(3).standard_normal((4, 6, 12, 12)).astype(np.float32)
    x[0, 0, :2, :2] = np.nan
    one = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    before = get_num_threads()
    monkeypatch.setattr(pool, "POOL_2X2_PARALLEL_SIZE", 0)
    set_num_threads(2)
    try:
        split = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    finally:
        set_num_threads(before)
    np.testing.assert_array_equal(one[0], split[0])
    np.testing.assert_array_equal(one[1], split[1])
