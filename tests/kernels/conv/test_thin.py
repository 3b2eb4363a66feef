"""The thin-layer kernels (``thin``) forced: forward and weight gradient against a float64
reference over channel and tap counts that leave partial register blocks, paddings, dilations
and batch sizes; every thread route (serial, TBB prange, ember's pool); every ISA variant the
host executes; and the selector's choice for LeNet's first layer."""
import os
import sys

import numpy as np
import pytest

from ember.backends import conv as settings
from ember.kernels import conv as C
from ember.kernels.conv import direct, selector, thin
from ember.kernels.runtime.threads import get_num_threads, set_num_threads
from tests.kernels.numba_threads import require_numba_threads, with_and_without_drivers

sys.path.insert(0, os.path.dirname(__file__))
import test_selector as ref  # noqa: E402  (the float64 references)

pytestmark = pytest.mark.skipif(thin.kernels() is None, reason="needs Numba")
rng = np.random.default_rng(11)

# (N, C, H, W, K, R, S, stride, padding, dilation, groups): K below, at and past one block of
# channels (6 forward, 4 or 2 in the weight kernel), tap counts past one block of taps
CASES = [
    (3, 1, 28, 28, 6, 5, 5, (1, 1), (2, 2), (1, 1), 1),     # LeNet conv1
    (1, 1, 28, 28, 6, 5, 5, (1, 1), (2, 2), (1, 1), 1),     # batch of one
    (2, 1, 20, 17, 17, 3, 3, (1, 1), (1, 2), (1, 1), 1),    # K = 17: two full blocks and five
    (3, 3, 9, 11, 5, 3, 3, (1, 1), (1, 0, 2, 1), (2, 1), 1),  # C = 3, asymmetric pad, dilation
    (2, 2, 7, 9, 1, 2, 3, (1, 1), (0, 0), (1, 2), 1),       # K = 1, six taps
    (4, 1, 6, 5, 7, 5, 4, (1, 1), (2, 1), (1, 1), 1),       # output narrower than a vector
]
IDS = [str(i) for i in range(len(CASES))]


def _run(case, dtype):
    x, w, gy = ref.problem(case, dtype)
    st, pad, dil, g = case[7:]
    y = C.conv2d_forward(x, w, None, st, pad, dil, g)
    gw = C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g)
    return (y, ref.ref_forward(x, w, case)), (gw, ref.ref_weight_grad(gy.astype(np.float64),
                                                                      x, case))


@pytest.fixture
def forced():
    settings.algorithm = "thin"
    yield
    settings.algorithm = None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_and_weight_match_reference(case, dtype, forced):
    for out, expected in _run(case, dtype):
        ref.check(out, expected, dtype)


@pytest.mark.parametrize("route", ["serial", "tbb", "pool"])
def test_every_thread_route_matches_reference(route, forced, monkeypatch):
    """One thread (serial kernel), two over a TBB prange, or two over ember's pool."""
    from ember.kernels.runtime import threads
    if route == "tbb" and threads.parallel_layer() != "tbb":
        pytest.skip("Numba's TBB threading layer is not available")
    if route == "tbb":
        require_numba_threads(2)
    monkeypatch.setattr(direct, "TBB", route == "tbb")
    calls = []
    k = thin.kernels()
    for name in ("rows_forward_parallel", "rows_weight_parallel"):
        def spy(*a, fn=getattr(k, name)):
            calls.append(name)
            return fn(*a)
        monkeypatch.setattr(k, name, spy)
    before = get_num_threads()
    set_num_threads(1 if route == "serial" else 2)
    try:
        for case in (CASES[0], CASES[2]):
            for out, expected in _run(case, np.float64):
                ref.check(out, expected, np.float64)
    finally:
        set_num_threads(before)
    assert len(calls) == (4 if route == "tbb" else 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_while_a_prange_driver_compiles_the_pool_runs_its_runs_with_its_bits(dtype, forced,
                                                                             monkeypatch):
    """Until its ``prange`` driver is compiled, a call on TBB runs the one-thread kernel over
    ember's pool in the driver's runs, the weight gradient's partial sums (an empty run's zeros
    included) in its order: the switch to the driver keeps the bits (``direct``'s test too)."""
    from ember.kernels.runtime import threads
    if threads.parallel_layer() != "tbb":
        pytest.skip("Numba's TBB threading layer is not available")
    require_numba_threads(2)
    x, w, gy = ref.problem(CASES[0], dtype)
    x, gy = np.concatenate([x] * 3)[:9], np.concatenate([gy] * 3)[:9]   # 9 images: 8 runs
    st, pad, dil, g = CASES[0][7:]

    def run():
        return (C.conv2d_forward(x, w, None, st, pad, dil, g),
                C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g))
    drivers, pool, asked, runs = with_and_without_drivers(monkeypatch, run)
    assert asked == ["rows_forward_parallel", "rows_weight_parallel"]
    assert runs == [(9, 8)]   # the weight gradient's partial sums in the driver's runs
    for a_, b_ in zip(drivers, pool):
        np.testing.assert_array_equal(a_, b_)


def test_bias_in_the_kernel_is_the_separate_add():
    """The bias the forward kernel adds in its crop gives the bits of adding it afterwards."""
    x, w, _ = ref.problem(CASES[3], np.float64)
    b = rng.standard_normal(w.shape[0])
    g = C.geometry("conv2d", x.shape, w.shape, *CASES[3][7:])
    np.testing.assert_array_equal(thin.forward(x, w, g, b),
                                  thin.forward(x, w, g) + b[:, None, None])


def test_gradcheck_weight_float64(forced):
    import ember
    import ember.nn.functional as F
    from ember.autograd import gradcheck
    x = ember.tensor(rng.standard_normal((2, 1, 7, 6)))
    w = ember.tensor(rng.standard_normal((7, 1, 3, 2)), requires_grad=True)
    assert gradcheck(lambda w: F.conv2d(x, w, None, padding=(1, 2), dilation=(2, 1)), (w,))


def test_selector_picks_thin_for_lenets_first_layer():
    g = C.geometry("conv2d", (64, 1, 28, 28), (6, 1, 5, 5), 1, 2, 1, 1)
    assert selector.heuristic("forward", g) == "thin"
    assert selector.heuristic("weight", g) == "thin"
    assert selector.heuristic("input", g) != "thin"   # the input gradient is another kernel's
    assert not thin.supports(C.geometry("conv2d", (2, 1, 9, 9), (6, 1, 3, 3), 2, 0, 1, 1),
                             "forward")               # stride 2


_VARIANT_SCRIPT = """
import sys, numpy as np
sys.path.insert(0, {tests!r})
from ember.backends import conv as settings
from ember.kernels.conv import thin
import test_selector as ref, test_thin as t
k = thin.kernels()
assert k.VECTOR_BYTES == {width}, k.VECTOR_BYTES
settings.algorithm = "thin"
for case in t.CASES:
    for dtype in (np.float32, np.float64):
        for out, expected in t._run(case, dtype):
            ref.check(out, expected, dtype)
print("ok")
"""


@pytest.mark.parametrize("isa", ["generic", "avx2"])
def test_every_isa_variant_the_host_executes_matches_reference(isa):
    """EMBER_CPU_ISA forces a narrower variant (vector width, register blocks) in a fresh
    process; the host's own variant is the one the other tests run."""
    from tests.kernels.conv.test_direct import run_forced_isa
    run_forced_isa(isa, _VARIANT_SCRIPT)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 5])
def test_thin_forward_of_lenet_conv1_matches_torch_on_a_view(n, dtype):
    """LeNet's first layer takes ``thin`` (heuristic), on a non-contiguous input, batch of one
    and several images (split over threads)."""
    pytest.importorskip("numba")
    torch = pytest.importorskip("torch")
    import ember.kernels.conv as C
    from ember.kernels.conv import selector
    x = rng.standard_normal((n, 1, 28, 30)).astype(dtype)[..., 1:29]
    w = rng.standard_normal((6, 1, 5, 5)).astype(dtype)
    b = rng.standard_normal(6).astype(dtype)
    assert selector.heuristic("forward", C.geometry("conv2d", x.shape, w.shape, 1, 2, 1, 1)) \
        == "thin"
    y = C.conv2d_forward(x, w, b, 1, 2, 1, 1)
    ref = torch.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), 1, 2).numpy()
    assert y.dtype == dtype and y.flags.c_contiguous
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol)
