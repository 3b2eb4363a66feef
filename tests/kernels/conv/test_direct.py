"""The register-blocked direct convolution (``direct``) forced: forward, weight gradient and
(stride 1) input gradient against a float64 reference and torch, over strides, paddings,
dilations, odd sizes and batch sizes;
gradcheck through ember.nn.functional.conv2d; selection and the no-Numba fallback."""
import numpy as np
import pytest

from ember.backends import conv as settings
from ember.kernels import conv as C
from ember.kernels.conv import direct, parallel, selector
from ember.kernels.runtime.threads import get_num_threads, set_num_threads
from tests.kernels.numba_threads import require_numba_threads, with_and_without_drivers


pytestmark = pytest.mark.skipif(direct.kernels() is None, reason="needs Numba")
rng = np.random.default_rng(7)

# (N, C, H, W, K, R, S, stride, padding, dilation, groups)
CASES = [
    (32, 3, 32, 32, 32, 5, 5, (1, 1), (0, 0), (1, 1), 1),   # the first-layer benchmark shape
    (3, 1, 28, 28, 6, 5, 5, (1, 1), (2, 2), (1, 1), 1),     # LeNet conv1 (C = 1)
    (4, 6, 14, 14, 16, 5, 5, (1, 1), (0, 0), (1, 1), 1),    # LeNet conv2
    (1, 3, 13, 11, 35, 3, 3, (1, 1), (1, 1), (1, 1), 1),    # batch 1, K not a multiple of 16
    (2, 4, 9, 8, 6, 3, 3, (2, 1), (1, 2, 0, 1), (1, 2), 1),  # stride, asymmetric pad, dilation
    (3, 2, 17, 19, 40, 5, 4, (3, 2), (2, 0, 1, 3), (1, 1), 1),
    (2, 5, 13, 12, 17, 5, 4, (1, 1), (2, 2), (2, 1), 1),
    (1, 2, 5, 6, 3, 5, 4, (3, 2), (0, 0), (1, 1), 1),       # output rows shorter than 5
    (5, 7, 10, 23, 33, 2, 3, (2, 3), (1, 0), (2, 2), 1),
    (2, 3, 9, 9, 8, 1, 1, (1, 1), (0, 0), (1, 1), 1),       # 1x1
    (2, 5, 12, 13, 12, 3, 3, (1, 1), (1, 1), (1, 1), 1),    # sliding forward of width 3
    (1, 4, 18, 20, 20, 3, 3, (1, 1), (1, 1), (1, 1), 1),    # one image, rows of 20
    (1, 3, 40, 37, 24, 3, 3, (2, 2), (1, 2, 0, 1), (1, 1), 1),
    (1, 4, 5, 55, 20, 3, 3, (1, 1), (1, 1), (1, 1), 1),      # rows of 55: the last block overlaps
    (1, 8, 6, 7, 200, 3, 3, (1, 1), (1, 1), (1, 1), 1),      # short rows, many column panels
]
IDS = [str(i) for i in range(len(CASES))]


def windows(x, case):
    """(N, C, R, S, Ho, Wo) float64 view of the padded input under every tap."""
    N, Ci, H, W, K, R, S, st, pad, dil, g = case
    pt, pb, pl, pr = pad if len(pad) == 4 else (pad[0], pad[0], pad[1], pad[1])
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    Ho = (H + pt + pb - dil[0] * (R - 1) - 1) // st[0] + 1
    Wo = (W + pl + pr - dil[1] * (S - 1) - 1) // st[1] + 1
    return np.stack([np.stack([xp[:, :, r * dil[0]:r * dil[0] + st[0] * (Ho - 1) + 1:st[0],
                                  s * dil[1]:s * dil[1] + st[1] * (Wo - 1) + 1:st[1]]
                               for s in range(S)], 2) for r in range(R)], 2)


def ref_forward(x, w, case):
    return np.einsum("ncrshw,kcrs->nkhw", windows(x, case), w.astype(np.float64))


def ref_weight_grad(gy, x, case):
    return np.einsum("ncrshw,nkhw->kcrs", windows(x, case), gy.astype(np.float64))


def ref_input_grad(gy, w, case):
    """Stride 1: every tap (r, s) adds gy @ w[:, :, r, s] into the padded input under it."""
    N, Ci, H, W, K, R, S, st, pad, dil, g = case
    assert st == (1, 1)
    pt, pb, pl, pr = pad if len(pad) == 4 else (pad[0], pad[0], pad[1], pad[1])
    Ho, Wo = gy.shape[2:]
    gxp = np.zeros((N, Ci, H + pt + pb, W + pl + pr))
    for r in range(R):
        for s in range(S):
            gxp[:, :, r * dil[0]:r * dil[0] + Ho, s * dil[1]:s * dil[1] + Wo] += np.einsum(
                "nkhw,kc->nchw", gy.astype(np.float64), w[:, :, r, s].astype(np.float64))
    return gxp[:, :, pt:pt + H, pl:pl + W]


@pytest.fixture
def force():
    settings.algorithm = "direct"
    yield
    settings.algorithm = None


def problem(case, dtype):
    N, Ci, H, W, K, R, S = case[:7]
    x = rng.standard_normal((N, Ci, H, W)).astype(dtype)
    w = rng.standard_normal((K, Ci, R, S)).astype(dtype)
    gy = rng.standard_normal(ref_forward(x, w, case).shape).astype(dtype)
    return x, w, gy


def close(out, ref, dtype):
    assert out.dtype == dtype and out.flags.c_contiguous and out.shape == ref.shape
    tol = 1e-4 if dtype == np.float32 else 1e-10
    assert np.abs(out - ref).max() <= tol * np.abs(ref).max()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_and_weight_grad_match_reference(case, dtype, force):
    x, w, gy = problem(case, dtype)
    st, pad, dil, g = case[7:]
    b = rng.standard_normal(w.shape[0]).astype(dtype)
    close(C.conv2d_forward(x, w, b, st, pad, dil, g), ref_forward(x, w, case) + b[:, None, None],
          dtype)
    close(C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g),
          ref_weight_grad(gy.astype(np.float64), x, case), dtype)
    if st == (1, 1):
        close(C.conv2d_input_grad(gy, w, x.shape, st, pad, dil, g), ref_input_grad(gy, w, case),
              dtype)


# (N, C, H, W, K, R, S, stride, padding, dilation, groups), stride 1: input-gradient blocks of one
# and two rows (H = 1, odd H), rows of one or two vectors and wider (shifted last segment), channel
# blocks with remainders, padding wider than the kernel, rows without any tap
INPUT_CASES = [
    (1, 1, 1, 1, 2, 1, 1, (1, 1), (0, 0), (1, 1), 1),
    (2, 7, 1, 9, 3, 1, 3, (1, 1), (0, 1), (1, 1), 1),
    (2, 17, 5, 30, 9, 3, 5, (1, 1), (0, 3), (1, 1), 1),
    (3, 2, 7, 7, 4, 5, 5, (1, 1), (4, 4), (1, 1), 1),
    (2, 10, 40, 3, 3, 2, 2, (1, 1), (0, 0), (1, 2), 1),
    (1, 9, 6, 41, 5, 3, 3, (1, 1), (2, 0, 0, 3), (2, 3), 1),
    (2, 13, 11, 8, 20, 4, 2, (1, 1), (3, 3), (1, 1), 1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", INPUT_CASES, ids=[str(i) for i in range(len(INPUT_CASES))])
def test_input_grad_matches_reference(case, dtype, force):
    x, w, gy = problem(case, dtype)
    st, pad, dil, g = case[7:]
    close(C.conv2d_input_grad(gy, w, x.shape, st, pad, dil, g), ref_input_grad(gy, w, case),
          dtype)


def test_input_grad_plan_fits_registers():
    """Every (rows, vectors, channels) block the plan picks is one the kernel is compiled for."""
    k = direct.kernels()
    for case in CASES + INPUT_CASES:
        N, Ci, H, W, K, R, S, st, pad, dil, g = case
        if st != (1, 1):
            continue
        geo = C.geometry("conv2d", (N, Ci, H, W), (K, Ci, R, S), st, pad, dil, g)
        for dtype in (np.float32, np.float64):
            P, VX, CB = direct._input_plan(geo, dtype)[:3]
            assert P in k.INPUT_ROWS and P <= H and VX in k.INPUT_VECTORS
            assert 1 <= CB <= min(Ci, k.input_channels(P, VX))
            assert P * VX * CB + P * VX + 1 <= k.REGISTERS


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_torch(case, force):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x, w, gy = problem(case, np.float32)
    st, pad, dil, g = case[7:]
    pt, pb, pl, pr = pad if len(pad) == 4 else (pad[0], pad[0], pad[1], pad[1])
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = F.conv2d(F.pad(tx, (pl, pr, pt, pb)), tw, None, st, 0, dil, g)
    ty.backward(torch.tensor(gy))
    close(C.conv2d_forward(x, w, None, st, pad, dil, g), ty.detach().numpy(), np.float32)
    close(C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g), tw.grad.numpy(), np.float32)
    if st == (1, 1):
        close(C.conv2d_input_grad(gy, w, x.shape, st, pad, dil, g), tx.grad.numpy(), np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("i", [2, 10])
def test_sliding_forward_gives_the_plain_kernels_bits(i, dtype, force, monkeypatch):
    """The sliding variant (each input broadcast once for its S taps) runs the same products in
    the same order as the plain kernel."""
    case = CASES[i]
    x, w, _ = problem(case, dtype)
    st, pad, dil, g = case[7:]
    geo = C.geometry("conv2d", x.shape, w.shape, st, pad, dil, g)
    slide = direct._slide(geo, direct._vectors(geo.K, dtype))
    if not slide:
        pytest.skip("no sliding variant fits this host's registers here")
    y = C.conv2d_forward(x, w, None, st, pad, dil, g)
    monkeypatch.setattr(direct, "SLIDE", False)
    np.testing.assert_array_equal(C.conv2d_forward(x, w, None, st, pad, dil, g), y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("i", [1, 2, 10])
def test_sliding_weight_grad_gives_the_plain_kernels_bits(i, dtype, force, monkeypatch):
    """The sliding weight kernel (a window of S broadcasts carried from pixel to pixel, groups
    of runs with a remainder block: 25 = 3*5 + 2*5 taps at AVX-512) sums the same products in
    the same order as the plain one."""
    case = CASES[i]
    x, w, gy = problem(case, dtype)
    st, pad, dil, g = case[7:]
    geo = C.geometry("conv2d", x.shape, w.shape, st, pad, dil, g)
    if not direct._weight_slide(geo, direct._vectors(geo.K, dtype)):
        pytest.skip("no sliding weight variant for this host and dtype")
    gw = C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g)
    monkeypatch.setattr(direct, "SLIDE", False)
    np.testing.assert_array_equal(C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g), gw)


def test_pixel_blocks_weigh_blocks_against_their_width(monkeypatch):
    """Output pixels per block (``direct._pixels``), for AVX-512's 32 vector registers: the
    least work per row, counting each block's overhead; fewest wasted pixels alone took 5
    (10 accumulators) for a row of 55, where 14 ran 79 against 68 GFLOP/s."""
    from ember.kernels.conv import direct_numba
    monkeypatch.setattr(direct_numba, "REGISTERS", 32)
    assert direct._pixels(55, 2) == 14      # 4 blocks, the last overlapping: not 11 of 5
    assert direct._pixels(13, 2) == 7       # 2 blocks of 7 rather than one of 10 and one of 5
    assert direct._pixels(14, 2) == 14
    assert direct._pixels(10, 1) == 10      # LeNet conv2: not two blocks of 5
    assert direct._pixels(4, 2) == 1
    # a runtime stride takes at most MAX_STRIDED_PIXELS (LLVM spills 14 pixel pointers)
    assert direct._pixels(29, 2, stride=2) == 10
    assert direct._pixels(112, 2, stride=2) <= direct.MAX_STRIDED_PIXELS
    assert direct._pixels(112, 2, stride=1) == 14
    monkeypatch.setattr(direct_numba, "REGISTERS", 16)   # AVX2: at most 6 pixels at V = 2
    assert direct._pixels(55, 2) in direct_numba.forward_pixels(2)


def test_strided_input_gradient_and_groups_are_not_supported(force):
    g = C.geometry("conv2d", (2, 4, 8, 8), (4, 4, 3, 3), 1, 1, 1, 1)
    assert direct.supports(g, "forward") and direct.supports(g, "weight")
    assert direct.supports(g, "input")
    assert not direct.supports(C.geometry("conv2d", (2, 4, 8, 8), (4, 4, 3, 3), 2, 1, 1, 1),
                               "input")
    assert not direct.supports(C.geometry("conv2d", (2, 4, 8, 8), (4, 2, 3, 3), 1, 1, 1, 2),
                               "forward")
    with pytest.raises(ValueError, match="algorithm 'direct' cannot compute the input"):
        C.conv2d_input_grad(np.zeros((2, 4, 4, 4)), np.zeros((4, 4, 3, 3)), (2, 4, 8, 8), 2, 1, 1,
                            1)


def test_gradcheck_through_functional_conv2d(force):
    """Weight gradient at stride 2 (with ``direct`` forced the strided input gradient would
    raise), input and weight gradient at stride 1."""
    import ember
    from ember.autograd import gradcheck
    import ember.nn.functional as F
    x = ember.tensor(rng.standard_normal((2, 3, 7, 6)))  # float64 (ember.Tensor(...) is float32)
    w = ember.tensor(rng.standard_normal((5, 3, 3, 2)), requires_grad=True)
    assert gradcheck(lambda w: F.conv2d(x, w, None, stride=(2, 1), padding=1, dilation=(1, 2)),
                     (w,))
    x.requires_grad_(True)
    assert gradcheck(lambda x, w: F.conv2d(x, w, None, padding=(1, 2), dilation=(1, 2)), (x, w))
    assert gradcheck(lambda x, w: F.conv2d(x, w, None), (x, w))


@pytest.mark.parametrize("case", [CASES[2], CASES[10]], ids=["unpadded", "padded"])
@pytest.mark.parametrize("tbb", [False, True])
def test_thread_counts_give_matching_results(tbb, case, force, monkeypatch):
    """Images split over ember's pool, or (when Numba's layer is TBB) over a prange; each run
    pads its own images."""
    from ember.kernels.conv import direct
    from ember.kernels.runtime import threads
    if tbb and threads.parallel_layer() != "tbb":
        pytest.skip("Numba's TBB threading layer is not available")
    if tbb:
        require_numba_threads(3)
    monkeypatch.setattr(direct, "TBB", tbb)
    calls = []
    for name in ("forward_parallel", "weight_parallel", "input_grad_parallel"):
        def spy(*a, fn=getattr(direct.kernels(), name)):
            calls.append(fn)
            return fn(*a)
        monkeypatch.setattr(direct.kernels(), name, spy)
    before = get_num_threads()
    x, w, gy = problem(case, np.float64)
    pad = case[8]
    results = []
    try:
        for n in (1, 2, 3):
            set_num_threads(n)
            results.append((C.conv2d_forward(x, w, None, 1, pad, 1, 1),
                            C.conv2d_weight_grad(gy, x, w.shape, 1, pad, 1, 1),
                            C.conv2d_input_grad(gy, w, x.shape, 1, pad, 1, 1)))
    finally:
        set_num_threads(before)
    assert len(calls) == (6 if tbb else 0)   # the prange drivers, at 2 and 3 threads
    close(results[1][0], ref_forward(x, w, case), np.float64)
    close(results[1][1], ref_weight_grad(gy, x, case), np.float64)
    for other in results[1:]:
        np.testing.assert_array_equal(other[0], results[0][0])  # images are independent
        np.testing.assert_array_equal(other[2], results[0][2])
        np.testing.assert_allclose(other[1], results[0][1], rtol=1e-12, atol=1e-12)
    assert "direct" in parallel.OWN_THREADS_ALGORITHMS


@pytest.mark.parametrize("case", [CASES[2], CASES[10]], ids=["unpadded", "padded"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_while_a_prange_driver_compiles_the_pool_runs_its_runs_with_its_bits(case, dtype, force,
                                                                             monkeypatch):
    """Until its ``prange`` driver is compiled (several seconds more than the one-thread kernel
    it calls), a call on TBB runs the one-thread kernel over ember's pool in the driver's runs:
    the weight gradient's partial sums (an empty run's zeros included) in the driver's order,
    so the switch to the driver keeps the bits."""
    from ember.kernels.runtime import threads
    if threads.parallel_layer() != "tbb":
        pytest.skip("Numba's TBB threading layer is not available")
    require_numba_threads(2)
    x, w, gy = problem(case, dtype)
    x, gy = np.concatenate([x] * 5)[:9], np.concatenate([gy] * 5)[:9]   # 9 images: 8 runs
    # (two threads, 4 runs each) of 2, 2, 2, 2, 1 images and three empty ones
    pad = case[8]

    def run():
        return (C.conv2d_forward(x, w, None, 1, pad, 1, 1),
                C.conv2d_weight_grad(gy, x, w.shape, 1, pad, 1, 1),
                C.conv2d_input_grad(gy, w, x.shape, 1, pad, 1, 1))
    drivers, pool, asked, runs = with_and_without_drivers(monkeypatch, run)
    assert asked == ["forward_parallel", "input_grad_parallel", "weight_parallel"]
    assert runs == [(9, 8)]   # the weight gradient's partial sums in the driver's runs
    for a_, b_ in zip(drivers, pool):
        np.testing.assert_array_equal(a_, b_)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("i", [0, 3, 13, 14])
def test_weight_row_padding_keeps_the_bits(i, dtype, force, monkeypatch):
    """The packed weight's rows are one vector longer than its column blocks
    (``WEIGHT_ROW_PADDING``: a power-of-two row fell into a fraction of the cache sets); the
    kernels step by that stride and compute only the blocks: the bits of unpadded rows."""
    case = CASES[i]
    x, w, _ = problem(case, dtype)
    st, pad, dil, g = case[7:]
    geo = C.geometry("conv2d", x.shape, w.shape, st, pad, dil, g)
    bias = rng.standard_normal(w.shape[0]).astype(dtype)
    wp, bp, (V, Kp, off, S, P) = direct.pack(w, bias, geo, dtype)
    assert wp.shape == (geo.C * geo.R * geo.S, Kp + direct._lanes(dtype))
    assert not wp[:, geo.K:].any()
    want = direct.forward(x, w, geo, bias, relu=True)
    monkeypatch.setattr(direct, "WEIGHT_ROW_PADDING", 0)
    assert direct.pack(w, bias, geo, dtype)[0].shape[1] == Kp
    np.testing.assert_array_equal(direct.forward(x, w, geo, bias, relu=True), want)
    close(want, np.maximum(ref_forward(x, w, case) + bias[:, None, None], 0), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("i", [3, 4, 11, 12, 13, 14])
def test_one_image_split_over_rows_gives_the_one_thread_bits(i, dtype, force, monkeypatch):
    """One image's forward with its output rows in runs over TBB's threads
    (``forward_rows_split``; rows shorter than a vector: ``forward_image_split``, in runs of
    column panels when there are enough), with bias, residual and ReLU, asymmetric padding,
    stride and dilation, more runs than rows: the bits of the one-thread kernel. ``row_parts``
    offers it only from ``SPLIT_MIN_FLOPS`` on one image."""
    from ember.kernels.runtime import compiler, threads
    threads.parallel_layer()   # ember starts Numba's layer first, as ``row_parts`` does
    case = CASES[i]
    x, w, _ = problem((1,) + case[1:], dtype)
    st, pad, dil, g = case[7:]
    geo = C.geometry("conv2d", x.shape, w.shape, st, pad, dil, g)
    bias = rng.standard_normal(w.shape[0]).astype(dtype)
    res = rng.standard_normal(geo.output_shape).astype(dtype)
    x[0, 0, 0, :2] = np.nan
    want = direct.forward(x, w, geo, bias, res, relu=True)
    calls = []
    for name in ("forward_rows_split", "forward_image_split"):
        def spy(*a, fn=getattr(direct.kernels(), name)):
            calls.append(a[-1])
            return fn(*a)
        monkeypatch.setattr(direct.kernels(), name, spy)
    monkeypatch.setattr(direct, "row_parts", lambda g, P, threads: 7)
    direct._split_ready(geo, dtype)
    compiler.wait_compiles()
    got = direct.forward(x, w, geo, bias, res, relu=True)
    assert calls == [7]
    np.testing.assert_array_equal(got, want)
    assert np.isnan(want).any()
    monkeypatch.undo()
    big = C.geometry("conv2d", (1, 16, 56, 56), (64, 16, 3, 3), 1, 1, 1, 1)
    assert direct.row_parts(geo, 1, 2) == 0 or geo.flops() >= direct.SPLIT_MIN_FLOPS
    assert direct.row_parts(big, 8, 1) == 0
    assert direct.row_parts(C.geometry("conv2d", (2, 16, 56, 56), (64, 16, 3, 3), 1, 1, 1, 1),
                            8, 2) == 0
    monkeypatch.setattr(direct, "SPLIT_MIN_FLOPS", float("inf"))
    assert direct.row_parts(big, 8, 2) == 0


def test_one_image_through_the_selector_splits_on_two_threads(force, monkeypatch):
    """A batch of one runs ``direct`` outside ``parallel.policy`` (``_SERIAL_FOR_ONE``): from
    ``SPLIT_MIN_FLOPS`` on two threads of Numba's TBB layer it still takes the split kernel,
    with one thread the one-thread kernel; the same bits."""
    from ember.kernels.runtime import compiler, threads
    if threads.parallel_layer() != "tbb":
        pytest.skip("Numba's TBB threading layer is not available")
    require_numba_threads(2)
    x = rng.standard_normal((1, 16, 40, 40)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    geo = C.geometry("conv2d", x.shape, w.shape, 1, 1, 1, 1)
    assert geo.flops() >= direct.SPLIT_MIN_FLOPS
    direct._split_ready(geo, np.float32)
    compiler.wait_compiles()
    calls = []

    def spy(*a, fn=direct.kernels().forward_rows_split):
        calls.append(a[-1])
        return fn(*a)
    monkeypatch.setattr(direct.kernels(), "forward_rows_split", spy)
    before = get_num_threads()
    try:
        set_num_threads(1)
        one = C.conv2d_forward(x, w, None, 1, 1, 1, 1)
        assert calls == []
        set_num_threads(2)
        two = C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    finally:
        set_num_threads(before)
    assert calls and calls[0] >= 2
    np.testing.assert_array_equal(two, one)


def test_heuristic_picks_direct_for_thin_layers(monkeypatch):
    monkeypatch.setattr(selector, "_isa", lambda: "avx2")   # (AVX-512: wider, test_selector)
    def pick(shape, wshape, padding=0, direction="forward"):
        return selector.heuristic(direction, C.geometry("conv2d", shape, wshape, 1, padding, 1, 1))
    assert pick((32, 3, 32, 32), (32, 3, 5, 5)) == "direct"
    assert pick((32, 3, 32, 32), (32, 3, 5, 5), direction="weight") == "direct"
    assert pick((64, 6, 14, 14), (16, 6, 5, 5)) == "direct"
    assert pick((64, 6, 14, 14), (16, 6, 5, 5), direction="weight") == "direct"
    # K = 6: 10 of 16 lanes idle in direct; 150 multiply-adds per pixel: thin
    assert pick((64, 1, 28, 28), (6, 1, 5, 5), 2) == "thin"
    assert selector.heuristic("forward", C.geometry("conv2d", (64, 1, 28, 28), (6, 1, 5, 5), 1,
                                                    2, 1, 1), thin_ok=False) == "im2col"
    assert pick((64, 3, 32, 32), (6, 3, 5, 5)) == "im2col"   # 450 multiply-adds per pixel
    assert pick((64, 1, 28, 28), (6, 1, 5, 5), 2, direction="weight") == "thin"
    # stride-1 input gradient of thin layers with K >= 16: direct
    assert pick((32, 3, 32, 32), (32, 3, 5, 5), direction="input") == "direct"
    assert pick((64, 6, 14, 14), (16, 6, 5, 5), direction="input") == "direct"
    assert pick((8, 64, 56, 56), (64, 64, 3, 3)) == "winograd"


def test_without_numba_direct_is_unsupported(monkeypatch):
    monkeypatch.setattr(direct, "_kernels", False)
    g = C.geometry("conv2d", (32, 3, 32, 32), (32, 3, 5, 5), 1, 0, 1, 1)
    assert not direct.supports(g, "forward")
    assert "direct" not in selector.capable("forward", g)
    assert selector.heuristic("forward", g) == "im2col"
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    w = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    case = (2, 3, 9, 9, 4, 5, 5, (1, 1), (0, 0), (1, 1), 1)
    close(C.conv2d_forward(x, w, None, 1, 0, 1, 1), ref_forward(x, w, case), np.float32)


_VARIANT_SCRIPT = """
import sys, numpy as np
sys.path.insert(0, {tests!r})
from ember.backends import conv as settings
from ember.kernels import conv as C
from ember.kernels.conv import direct
import test_direct as t
k = direct.kernels()
assert k.ISA == {isa!r} and k.VECTOR_BYTES == {width}, (k.ISA, k.VECTOR_BYTES)
settings.algorithm = "direct"
for i in (0, 1, 2, 4, 5, 10):
    case = t.CASES[i]
    for dtype in (np.float32, np.float64):
        x, w, gy = t.problem(case, dtype)
        st, pad, dil, g = case[7:]
        t.close(C.conv2d_forward(x, w, None, st, pad, dil, g), t.ref_forward(x, w, case), dtype)
        t.close(C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g),
                t.ref_weight_grad(gy.astype(np.float64), x, case), dtype)
        if st == (1, 1):
            t.close(C.conv2d_input_grad(gy, w, x.shape, st, pad, dil, g),
                    t.ref_input_grad(gy, w, case), dtype)
for case in t.INPUT_CASES[1:4]:
    x, w, gy = t.problem(case, np.float32)
    st, pad, dil, g = case[7:]
    t.close(C.conv2d_input_grad(gy, w, x.shape, st, pad, dil, g), t.ref_input_grad(gy, w, case),
            np.float32)
print("ok")
"""


def run_forced_isa(isa, script):
    """Run ``script`` (formatted with ``tests``, ``isa`` and ``width``, the forced variant's
    vector bytes) in a fresh process under ``EMBER_CPU_ISA=isa`` and ember's own pool; it must
    print "ok". Skips when the host cannot execute ``isa`` or ``isa`` is the host's own variant
    (which every other test runs)."""
    import os
    import subprocess
    import sys
    from ember.kernels.runtime import cpu
    if isa not in cpu.variants():
        pytest.skip(f"this CPU executes at most {cpu.host_isa()}")
    if isa == cpu.host_isa():
        pytest.skip("the host's own variant: every other test runs it")
    env = dict(os.environ, EMBER_CPU_ISA=isa, EMBER_THREADING_LAYER="pool")
    script = script.format(tests=os.path.dirname(__file__), isa=isa, width=cpu.VECTOR_BYTES[isa])
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


@pytest.mark.parametrize("isa", ["generic", "avx2", "avx512"])
def test_every_isa_variant_the_host_executes_matches_reference(isa):
    """EMBER_CPU_ISA forces a narrower variant (vector width, tap blocks, pixel blocks) in a fresh
    process; the host's own variant is the one every other test runs."""
    run_forced_isa(isa, _VARIANT_SCRIPT)


