"""Convolution kernels: every algorithm forced in turn against a direct float64 reference and
torch, shape errors, selection, autotuning, thread safety."""
import threading

import numpy as np
import pytest

from ember.backends import conv as settings
from ember.kernels import conv as C
from ember.kernels.conv import im2col, parallel, selector, winograd
from ember.kernels.runtime.threads import get_num_threads, set_num_threads

rng = np.random.default_rng(1)
ALGORITHMS = settings.ALGORITHMS

# (N, C, H, W, K, R, S, stride, padding, dilation, groups)
CASES = [
    (3, 4, 9, 8, 6, 3, 3, (1, 1), (1, 1), (1, 1), 1),
    (1, 4, 9, 8, 6, 3, 3, (1, 1), (1, 1), (1, 1), 1),
    (2, 4, 11, 7, 4, 3, 3, (1, 1), (2, 0, 1, 2), (1, 1), 2),
    (3, 6, 9, 10, 6, 3, 2, (2, 1), (1, 2, 0, 1), (1, 2), 3),
    (2, 4, 10, 9, 8, 3, 3, (1, 1), (2, 0, 1, 1), (2, 1), 4),
    (2, 4, 8, 8, 4, 3, 3, (2, 2), (1, 1), (1, 1), 4),
    (3, 6, 7, 7, 6, 1, 1, (2, 2), (1, 1), (1, 1), 3),
    (3, 5, 7, 6, 7, 1, 1, (1, 1), (0, 0), (1, 1), 1),
    (2, 3, 13, 12, 5, 5, 5, (1, 1), (2, 2), (1, 1), 1),
    (1, 2, 5, 6, 3, 5, 4, (3, 2), (0, 0), (1, 1), 1),
    (2, 3, 11, 10, 5, 5, 4, (2, 2), (1, 2, 0, 1), (1, 1), 1),
]


def padded(x, pad):
    pt, pb, pl, pr = pad if len(pad) == 4 else (pad[0], pad[0], pad[1], pad[1])
    return np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr))), (pt, pb, pl, pr)


def taps(case):
    N, Ci, H, W, K, R, S, st, pad, dil, g = case
    _, (pt, pb, pl, pr) = padded(np.zeros((1, 1, 1, 1)), pad)
    Ho = (H + pt + pb - dil[0] * (R - 1) - 1) // st[0] + 1
    Wo = (W + pl + pr - dil[1] * (S - 1) - 1) // st[1] + 1
    for r in range(R):
        for s in range(S):
            rows = slice(r * dil[0], r * dil[0] + st[0] * (Ho - 1) + 1, st[0])
            cols = slice(s * dil[1], s * dil[1] + st[1] * (Wo - 1) + 1, st[1])
            yield r, s, rows, cols, (N, K, Ho, Wo)


def ref_forward(x, w, case):
    """Direct convolution: one einsum per (tap, group), in float64."""
    g = case[-1]
    xp, _ = padded(x.astype(np.float64), case[8])
    y = None
    for r, s, rows, cols, shape in taps(case):
        y = np.zeros(shape) if y is None else y
        for gi, (xs, ws) in enumerate(zip(np.split(xp[:, :, rows, cols], g, 1), np.split(w, g))):
            y[:, gi * ws.shape[0]:(gi + 1) * ws.shape[0]] += np.einsum("nchw,kc->nkhw", xs,
                                                                       ws[:, :, r, s])
    return y


def ref_input_grad(gy, w, case):
    N, Ci, H, W, K, R, S, st, pad, dil, g = case
    gxp, (pt, pb, pl, pr) = padded(np.zeros((N, Ci, H, W)), pad)
    for r, s, rows, cols, _ in taps(case):
        for gi, (gs, ws) in enumerate(zip(np.split(gy, g, 1), np.split(w, g))):
            cs = slice(gi * ws.shape[1], (gi + 1) * ws.shape[1])
            gxp[:, cs, rows, cols] += np.einsum("nkhw,kc->nchw", gs, ws[:, :, r, s])
    return gxp[:, :, pt:pt + H, pl:pl + W]


def ref_weight_grad(gy, x, case):
    N, Ci, H, W, K, R, S, st, pad, dil, g = case
    xp, _ = padded(x.astype(np.float64), pad)
    gw = np.zeros((K, Ci // g, R, S))
    for r, s, rows, cols, _ in taps(case):
        for gi, (gs, xs) in enumerate(zip(np.split(gy, g, 1), np.split(xp[:, :, rows, cols], g, 1))):
            gw[gi * (K // g):(gi + 1) * (K // g), :, r, s] = np.einsum("nkhw,nchw->kc", gs, xs)
    return gw


def problem(case, dtype):
    N, Ci, H, W, K, R, S, st, pad, dil, g = case
    x = rng.standard_normal((N, Ci, H, W)).astype(dtype)
    w = rng.standard_normal((K, Ci // g, R, S)).astype(dtype)
    y = ref_forward(x, w, case)
    gy = rng.standard_normal(y.shape).astype(dtype)
    return x, w, gy


@pytest.fixture
def avx2_rules(monkeypatch):
    """The heuristic as an AVX2 host runs it: the choices a test names are that host's (on an
    AVX-512 host the wide layers run ``direct``, see ``test_avx512_heuristic_runs_direct``)."""
    from ember.kernels.runtime import compiler
    monkeypatch.setattr(selector, "_isa", lambda: "avx2")
    compiler.forget_tiers()
    yield
    compiler.forget_tiers()


@pytest.fixture
def force():
    def set_algorithm(name):
        settings.algorithm = name
    yield set_algorithm
    settings.algorithm = None
    settings.benchmark = False


def check(out, ref, dtype):
    assert out.dtype == dtype and out.flags.c_contiguous and out.shape == ref.shape
    tol = 1e-4 if dtype == np.float32 else 1e-10
    scale = max(np.abs(ref).max(), 1e-30)
    assert np.abs(out - ref).max() <= tol * scale


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("algorithm", ALGORITHMS + (None,))
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in range(len(CASES))])
def test_every_algorithm_every_direction_matches_reference(case, algorithm, dtype, force):
    x, w, gy = problem(case, dtype)
    st, pad, dil, g = case[7:]
    b = rng.standard_normal(w.shape[0]).astype(dtype)
    force(algorithm)
    g64 = gy.astype(np.float64)
    ran = 0
    for direction, call, ref in [
        ("forward", lambda: C.conv2d_forward(x, w, b, st, pad, dil, g),
         lambda: ref_forward(x, w, case) + b[:, None, None]),
        ("input", lambda: C.conv2d_input_grad(gy, w, x.shape, st, pad, dil, g),
         lambda: ref_input_grad(g64, w, case)),
        ("weight", lambda: C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g),
         lambda: ref_weight_grad(g64, x, case)),
    ]:
        geometry = C.geometry("conv2d", x.shape, w.shape, st, pad, dil, g)
        if algorithm is not None and algorithm not in selector.capable(direction, geometry):
            with pytest.raises(ValueError, match=f"algorithm '{algorithm}' cannot"):
                call()
            continue
        check(call(), ref(), dtype)
        ran += 1
    assert algorithm is not None or ran == 3


def test_capabilities_cover_each_algorithm():
    seen = set()
    for case in CASES:
        geometry = C.geometry("conv2d", case[:2] + case[2:4], (case[4], case[1] // case[-1])
                              + case[5:7], *case[7:])
        for direction in ("forward", "input", "weight"):
            seen.update(selector.capable(direction, geometry))
    assert seen == set(ALGORITHMS)


def test_winograd_numpy_fallback_matches_reference(force, monkeypatch):
    monkeypatch.setattr(winograd, "USE_NUMBA", False)
    force("winograd")
    for case in (CASES[0], CASES[2]):
        x, w, gy = problem(case, np.float32)
        st, pad, dil, g = case[7:]
        check(C.conv2d_forward(x, w, None, st, pad, dil, g), ref_forward(x, w, case), np.float32)
        check(C.conv2d_input_grad(gy, w, x.shape, st, pad, dil, g),
              ref_input_grad(gy.astype(np.float64), w, case), np.float32)
        check(C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g),
              ref_weight_grad(gy.astype(np.float64), x, case), np.float32)


@pytest.mark.parametrize("n_threads", [2, 3])
@pytest.mark.parametrize("case", [(7, 4, 9, 8, 6, 3, 3, (1, 1), (1, 1), (1, 1), 1),
                                  (6, 4, 11, 7, 4, 3, 3, (1, 1), (2, 0, 1, 2), (1, 1), 2),
                                  (1, 4, 25, 7, 6, 3, 3, (1, 1), (1, 0, 1, 1), (1, 1), 1),
                                  (2, 4, 26, 9, 4, 3, 3, (1, 1), (1, 1), (1, 1), 2)])
def test_winograd_blocked_passes_match_reference(case, n_threads, force, threads, monkeypatch):
    """Blocks transformed and multiplied per thread: one image each for larger batches (forward,
    input and weight gradients; uneven last block, groups), tile rows of each image for batches
    under two images per thread (forward and input gradient)."""
    monkeypatch.setattr(winograd, "BLOCKED_MIN_BYTES", 0)
    monkeypatch.setattr(winograd, "BLOCK_BYTES", 1)            # one image per block
    threads(n_threads)
    force("winograd")
    calls = []
    for name in ("_forward_blocked", "_weight_grad_blocked"):
        def spy(*a, fn=getattr(winograd, name), name=name):
            calls.append((name, a[-1] if name == "_weight_grad_blocked" else
                          {(n1 - n0, ty1 - ty0 < a[3]) for n0, n1, ty0, ty1 in a[-1]}))
            return fn(*a)
        monkeypatch.setattr(winograd, name, spy)
    for dtype in (np.float32, np.float64):
        x, w, gy = problem(case, dtype)
        st, pad, dil, g = case[7:]
        check(C.conv2d_forward(x, w, None, st, pad, dil, g), ref_forward(x, w, case), dtype)
        check(C.conv2d_input_grad(gy, w, x.shape, st, pad, dil, g),
              ref_input_grad(gy.astype(np.float64), w, case), dtype)
        check(C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g),
              ref_weight_grad(gy.astype(np.float64), x, case), dtype)
    if case[0] >= 2 * n_threads:      # one image per block, all its rows
        assert calls == [("_forward_blocked", {(1, False)}), ("_forward_blocked", {(1, False)}),
                         ("_weight_grad_blocked", 1)] * 2
    else:                             # rows of one image per block; weight gradient whole
        assert calls == [("_forward_blocked", {(1, True)})] * 4


def test_winograd_float32_error_on_larger_channels(force):
    force("winograd")
    case = (2, 64, 12, 12, 64, 3, 3, (1, 1), (1, 1), (1, 1), 1)
    x, w, gy = problem(case, np.float32)
    check(C.conv2d_forward(x, w, None, (1, 1), (1, 1), (1, 1), 1), ref_forward(x, w, case),
          np.float32)
    check(C.conv2d_weight_grad(gy, x, w.shape, (1, 1), (1, 1), (1, 1), 1),
          ref_weight_grad(gy.astype(np.float64), x, case), np.float32)


torch_cases = pytest.mark.parametrize("case", CASES, ids=[str(c) for c in range(len(CASES))])


@torch_cases
def test_conv2d_matches_torch(case):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x, w, gy = problem(case, np.float64)
    st, pad, dil, g = case[7:]
    b = rng.standard_normal(w.shape[0])
    xp, p4 = padded(x, pad)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = F.conv2d(F.pad(tx, (p4[2], p4[3], p4[0], p4[1])), tw, torch.tensor(b), st, 0, dil, g)
    ty.backward(torch.tensor(gy))
    np.testing.assert_allclose(C.conv2d_forward(x, w, b, st, pad, dil, g), ty.detach().numpy(),
                               atol=1e-10)
    np.testing.assert_allclose(C.conv2d_input_grad(gy, w, x.shape, st, pad, dil, g),
                               tx.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g),
                               tw.grad.numpy(), atol=1e-10)



@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 64, 24, 24, 64), (1, 128, 28, 28, 128)])
def test_batch_of_one_winograd_layers_match_torch(shape, dtype, avx2_rules):
    """Batch-of-one 3x3 layers of 36-49 tiles (ResNet's layer2) run Winograd
    (they ran im2col): forward, input and weight gradient equal torch's."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    N, Ci, H, W, K = shape
    g = C.geometry("conv2d", (N, Ci, H, W), (K, Ci, 3, 3), 1, 1, 1, 1)
    assert selector.heuristic("forward", g) == "winograd"
    x = rng.standard_normal((N, Ci, H, W)).astype(dtype)
    w = (rng.standard_normal((K, Ci, 3, 3)) / np.sqrt(9 * Ci)).astype(dtype)
    gy = rng.standard_normal((N, K, H, W)).astype(dtype)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = F.conv2d(tx, tw, None, 1, 1)
    ty.backward(torch.tensor(gy))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    y = C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(C.conv2d_input_grad(gy, w, x.shape, 1, 1, 1, 1),
                               tx.grad.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(C.conv2d_weight_grad(gy, x, w.shape, 1, 1, 1, 1),
                               tw.grad.numpy(), rtol=tol, atol=tol * 10)

TRANSPOSE_CASES = [  # (N, C_in, H, W, K, R, S, stride, padding, output_padding, dilation, groups)
    (2, 4, 5, 6, 6, 3, 3, (2, 2), (1, 1), (1, 0), (1, 1), 2),
    (1, 3, 4, 4, 2, 3, 2, (1, 2), (0, 1), (0, 1), (2, 1), 1),
    (2, 4, 3, 5, 4, 2, 3, (3, 1), (0, 2), (2, 0), (1, 3), 4),
    (2, 6, 5, 5, 9, 1, 1, (2, 2), (0, 0), (1, 1), (1, 1), 3),
    (2, 2, 6, 6, 3, 3, 3, (1, 1), (2, 2), (0, 0), (2, 2), 1),
]


@pytest.mark.parametrize("algorithm", [None, "im2col"])
@pytest.mark.parametrize("case", TRANSPOSE_CASES)
def test_conv_transpose2d_matches_torch(case, algorithm, force):
    torch = pytest.importorskip("torch")
    N, Ci, H, W, K, R, S, st, pad, opad, dil, g = case
    force(algorithm)
    x = rng.standard_normal((N, Ci, H, W))
    w = rng.standard_normal((Ci, K // g, R, S))
    b = rng.standard_normal(K)
    ty = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), torch.tensor(b),
                                              st, pad, opad, g, dil)
    y = C.conv_transpose2d(x, w, b, st, pad, opad, g, dil)
    assert y.flags.c_contiguous
    np.testing.assert_allclose(y, ty.numpy(), atol=1e-10)


@pytest.mark.parametrize("call,message", [
    (lambda: C.conv2d_forward(np.zeros((1, 5, 8, 8)), np.zeros((4, 2, 3, 3)), None, 1, 0, 1, 2),
     r"conv2d: Given groups=2, weight of size \[4, 2, 3, 3\], expected input\[1, 5, 8, 8\] to "
     r"have 4 channels, but got 5 channels instead"),
    (lambda: C.conv2d_forward(np.zeros((1, 4, 8, 8)), np.zeros((3, 2, 3, 3)), None, 1, 0, 1, 2),
     "conv2d: .*3 output channels are not divisible by groups=2"),
    (lambda: C.conv2d_forward(np.zeros((1, 1, 4, 4)), np.zeros((1, 1, 7, 3)), None, 1, 1, 1, 1),
     r"conv2d: input \(1, 1, 4, 4\), weight \(1, 1, 7, 3\): kernel size 7x3 .*larger than the "
     r"padded input 6x6"),
    (lambda: C.conv2d_forward(np.zeros((1, 1, 4, 4)), np.zeros((1, 1, 3, 3)), None, 1, 0, 3, 1),
     "conv2d: .*kernel size 7x7"),
    (lambda: C.conv2d_forward(np.zeros((1, 1, 4, 4)), np.zeros((1, 1, 3, 3)), None, 0, 0, 1, 1),
     "conv2d: .*must be positive"),
    (lambda: C.conv2d_forward(np.zeros((1, 1, 4)), np.zeros((1, 1, 3, 3)), None, 1, 0, 1, 1),
     "conv2d: .*expected 4-d"),
    (lambda: C.conv2d_forward(np.zeros((1, 2, 4, 4)), np.zeros((1, 2, 3, 3)), np.zeros(2), 1, 0,
                              1, 1), r"conv2d: bias has shape \(2,\), expected \(1,\)"),
    (lambda: C.conv2d_input_grad(np.zeros((1, 1, 3, 3)), np.zeros((1, 1, 3, 3)), (1, 1, 4, 4), 1,
                                 0, 1, 1), r"conv2d_input_grad: .*grad_output has shape"),
    (lambda: C.conv2d_weight_grad(np.zeros((1, 1, 3, 3)), np.zeros((1, 1, 4, 4)), (1, 1, 3, 3), 1,
                                  0, 1, 1), r"conv2d_weight_grad: .*expected \(1, 1, 2, 2\)"),
    (lambda: C.conv_transpose2d(np.zeros((1, 2, 4, 4)), np.zeros((2, 1, 3, 3)), None, 1,
                                        0, 1, 1, 1), "conv_transpose2d: .*output_padding"),
    (lambda: C.conv_transpose2d(np.zeros((1, 3, 4, 4)), np.zeros((2, 1, 3, 3)), None, 1,
                                        0, 0, 1, 1),
     r"conv_transpose2d: .*expected input\[1, 3, 4, 4\] to have 2 channels, but got 3"),
    (lambda: C.conv_transpose2d(np.zeros((1, 2, 1, 1)), np.zeros((2, 1, 1, 1)), None, 1,
                                        1, 0, 1, 1), "conv_transpose2d: .*output size -1x-1"),
])
def test_shape_errors_name_op_shapes_and_reason(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_dtype_errors():
    with pytest.raises(RuntimeError, match="conv2d: expected float32 or float64"):
        C.conv2d_forward(np.zeros((1, 1, 4, 4), np.float32), np.zeros((1, 1, 3, 3)), None, 1, 0,
                         1, 1)
    with pytest.raises(RuntimeError, match="conv2d: expected float32 or float64"):
        C.conv2d_forward(np.zeros((1, 1, 4, 4), int), np.zeros((1, 1, 3, 3)), None, 1, 0, 1, 1)


def test_integer_convolution_is_exact_int64():
    x, w = np.arange(16).reshape(1, 1, 4, 4), np.ones((1, 1, 3, 3), np.int64)
    out = C.conv2d_forward(x, w, None, 1, 0, 1, 1)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [[[[45, 54], [81, 90]]]])


def test_forced_algorithm_errors(force):
    x, w = np.zeros((1, 2, 6, 6)), np.zeros((2, 2, 3, 3))
    force("direct1x1")
    with pytest.raises(ValueError, match="conv2d: algorithm 'direct1x1' cannot compute the forward"):
        C.conv2d_forward(x, w, None, 1, 0, 1, 1)
    force("winograd")
    with pytest.raises(ValueError, match="conv2d: algorithm 'winograd' cannot.*stride \\(2, 2\\)"):
        C.conv2d_forward(x, w, None, 2, 0, 1, 1)
    force("nnpack")
    with pytest.raises(ValueError, match="unknown algorithm 'nnpack'"):
        C.conv2d_forward(x, w, None, 1, 0, 1, 1)


def test_empty_batch():
    y = C.conv2d_forward(np.zeros((0, 2, 5, 5)), np.ones((3, 2, 3, 3)), None, 1, 1, 1, 1)
    assert y.shape == (0, 3, 5, 5)
    gw = C.conv2d_weight_grad(np.zeros((0, 3, 5, 5)), np.zeros((0, 2, 5, 5)), (3, 2, 3, 3), 1, 1,
                              1, 1)
    assert gw.shape == (3, 2, 3, 3) and not gw.any()


def test_heuristic_choices(avx2_rules):
    def pick(shape, wshape, stride=1, padding=1, groups=1, direction="forward"):
        return selector.heuristic(direction, C.geometry("conv2d", shape, wshape, stride, padding,
                                                        1, groups))
    assert pick((8, 64, 56, 56), (64, 64, 3, 3)) == "winograd"
    assert pick((8, 64, 56, 56), (64, 64, 3, 3), direction="weight") == "winograd"
    assert pick((1, 64, 56, 56), (64, 64, 3, 3), direction="weight") == "winograd"
    assert pick((1, 256, 14, 14), (256, 256, 3, 3), direction="weight") == "winograd2x2"  # 16 tiles
    assert pick((1, 512, 7, 7), (512, 512, 3, 3), direction="weight") == "winograd2x2"
    assert pick((8, 512, 7, 7), (512, 512, 3, 3), direction="weight") == "winograd"  # 32 tiles
    assert pick((1, 512, 7, 7), (512, 512, 3, 3)) == "im2col"
    assert pick((1, 128, 14, 14), (128, 128, 3, 3), direction="weight") == "direct"  # 1152 taps
    assert pick((1, 128, 14, 14), (128, 128, 3, 3)) == "im2col"   # K > 64: forward ties
    assert pick((1, 256, 14, 14), (128, 256, 3, 3), direction="weight") == "im2col"  # 2304 taps
    assert pick((1, 32, 16, 16), (32, 32, 3, 3)) == "direct"      # 288 taps
    assert pick((1, 64, 8, 8), (64, 64, 3, 3)) == "direct"        # 576 taps
    assert pick((1, 96, 8, 8), (64, 96, 3, 3)) == "im2col"        # 864 taps
    assert pick((8, 32, 56, 56), (32, 32, 3, 3), direction="input") == "im2col"
    assert pick((8, 256, 14, 14), (256, 256, 3, 3)) == "winograd"  # 128 tiles, all directions
    assert pick((8, 256, 14, 14), (256, 256, 3, 3), direction="input") == "winograd"
    assert pick((4, 256, 14, 14), (256, 256, 3, 3)) == "winograd"  # 64 tiles
    assert pick((2, 256, 14, 14), (256, 256, 3, 3)) == "im2col"  # 32 tiles
    # ResNet-18/50's layer2 at batch 1: one image's 49 tiles (was im2col, 2x slower)
    assert pick((1, 128, 28, 28), (128, 128, 3, 3)) == "winograd"
    assert pick((1, 128, 28, 28), (128, 128, 3, 3), direction="input") == "winograd"
    assert pick((1, 64, 24, 24), (64, 64, 3, 3)) == "winograd"    # 36 tiles
    assert pick((1, 256, 14, 14), (256, 256, 3, 3)) == "im2col"   # 16 tiles
    assert pick((8, 256, 14, 14), (256, 256, 3, 3), direction="weight") == "winograd"
    assert pick((8, 32, 56, 56), (32, 32, 3, 3)) == "direct"  # 32 channels: not Winograd's
    assert pick((8, 32, 56, 56), (32, 32, 3, 3), direction="weight") == "direct"
    assert pick((8, 64, 28, 28), (64, 64, 3, 3), direction="weight") == "winograd"
    assert pick((32, 3, 32, 32), (32, 3, 5, 5), padding=0) == "direct"  # thin: see test_direct
    assert pick((8, 64, 56, 56), (256, 64, 1, 1), padding=0) == "direct1x1"
    assert pick((8, 64, 56, 56), (256, 64, 1, 1), padding=0, direction="weight") == "direct1x1"
    assert pick((8, 64, 56, 56), (128, 64, 1, 1), 2, 0, direction="weight") == "direct"
    assert pick((8, 64, 56, 56), (128, 64, 1, 1), 2, 0) == "direct1x1"   # 64 channels
    assert pick((64, 16, 32, 32), (32, 16, 1, 1), 2, 0) == "direct"       # strided, 16 channels
    assert pick((64, 16, 32, 32), (32, 16, 1, 1), 1, 0) == "direct1x1"
    assert pick((8, 32, 28, 28), (32, 1, 3, 3), groups=32) == "depthwise"
    assert pick((1, 64, 8, 8), (64, 64, 3, 3)) == "direct"  # batch of one, too few tiles


def test_thin_wide_layers_run_every_direction_on_own_threads(monkeypatch):
    first = C.geometry("conv2d", (32, 3, 32, 32), (32, 3, 5, 5), 1, 0, 1, 1)
    lenet2 = C.geometry("conv2d", (64, 6, 14, 14), (16, 6, 5, 5), 1, 0, 1, 1)
    assert selector._thin_wide(first) and not selector._thin_wide(lenet2)
    seen = []
    real = parallel.policy

    def spy(own):
        seen.append(own)
        return real(own)
    monkeypatch.setattr(parallel, "policy", spy)
    x = rng.standard_normal((2, 3, 12, 12)).astype(np.float32)
    w = rng.standard_normal((32, 3, 5, 5)).astype(np.float32)
    gy = rng.standard_normal((2, 32, 8, 8)).astype(np.float32)
    settings.algorithm = "im2col"   # the heuristic runs these on ``direct`` (own threads)
    try:
        C.conv2d_input_grad(gy, w, x.shape, 1, 0, 1, 1)              # im2col, still own threads
        C.conv2d_input_grad(gy[:, :16], w[:16], x.shape, 1, 0, 1, 1)  # K = 16: BLAS threads
    finally:
        settings.algorithm = None
    assert seen == [True, False]


def test_autotuner_times_once_and_remembers(force):
    settings.benchmark = True
    selector.clear_tuned()
    case = CASES[0]
    x, w, gy = problem(case, np.float64)
    y1 = C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    tuned = selector.tuned()
    assert len(tuned) == 1
    (key, name), = tuned.items()
    assert key[0] == "forward" and name in ALGORITHMS
    y2 = C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    assert selector.tuned() == tuned
    np.testing.assert_allclose(y1, ref_forward(x, w, case), atol=1e-10)
    np.testing.assert_allclose(y2, y1, atol=1e-10)
    C.conv2d_weight_grad(gy, x, w.shape, 1, 1, 1, 1)
    assert len(selector.tuned()) == 2
    selector.clear_tuned()


@pytest.mark.parametrize("algorithm", ["im2col", "implicit_gemm", "winograd", "depthwise"])
def test_concurrent_threads_match_serial(algorithm, force):
    force(algorithm)
    groups = 8 if algorithm == "depthwise" else 1
    problems = [(rng.standard_normal((2, 8, 10 + i, 9)).astype(np.float32),
                 rng.standard_normal((8, 8 // groups, 3, 3)).astype(np.float32)) for i in range(4)]
    serial = [C.conv2d_forward(x, w, None, 1, 1, 1, groups) for x, w in problems]
    results = {}

    def work(t):
        out = []
        for rep in range(6):
            i = (t + rep) % len(problems)
            out.append((i, C.conv2d_forward(*problems[i], None, 1, 1, 1, groups)))
        results[t] = out

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for out in results.values():
        for i, y in out:
            np.testing.assert_array_equal(y, serial[i])


@pytest.fixture
def threads():
    before = get_num_threads()
    yield set_num_threads
    set_num_threads(before)


@pytest.mark.parametrize("algorithm", ["im2col", "implicit_gemm", "winograd", "direct1x1",
                                       "depthwise"])
@pytest.mark.parametrize("own", [("weight",), ("forward", "input", "weight")])
def test_thread_counts_give_matching_results(algorithm, own, force, threads, monkeypatch):
    """ember's own chunking (images, GEMM batches, columns, reductions) for 1, 2 and 3 threads."""
    monkeypatch.setattr(parallel, "OWN_THREADS_DIRECTIONS", own)
    groups = 6 if algorithm == "depthwise" else 1
    R = 1 if algorithm == "direct1x1" else 3
    x = rng.standard_normal((5, 6, 13, 11)).astype(np.float64)
    w = rng.standard_normal((12, 6 // groups, R, R)).astype(np.float64)
    gy = rng.standard_normal((5, 12, 13, 11)).astype(np.float64)
    pad = R // 2
    force(algorithm)
    results = []
    for n in (1, 2, 3):
        threads(n)
        results.append((C.conv2d_forward(x, w, None, 1, pad, 1, groups),
                         C.conv2d_input_grad(gy, w, x.shape, 1, pad, 1, groups),
                         C.conv2d_weight_grad(gy, x, w.shape, 1, pad, 1, groups)))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("per_image_min", [1, 10 ** 9])
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in range(len(CASES))])
def test_im2col_subbatches_and_layouts(case, per_image_min, force, monkeypatch, threads):
    """One image per sub-batch, both column layouts, three threads: still the reference."""
    monkeypatch.setattr(parallel, "OWN_THREADS_DIRECTIONS", ("forward", "input", "weight"))
    monkeypatch.setattr(im2col, "SUBBATCH_BYTES", 1)
    monkeypatch.setattr(im2col, "PER_IMAGE_MIN", per_image_min)
    # thin weights take the per-image layout regardless of PER_IMAGE_MIN unless this is 0
    monkeypatch.setattr(im2col, "PER_IMAGE_MAX_WEIGHT", 8192 if per_image_min == 1 else 0)
    threads(3)
    force("im2col")
    x, w, gy = problem(case, np.float64)
    st, pad, dil, g = case[7:]
    check(C.conv2d_forward(x, w, None, st, pad, dil, g), ref_forward(x, w, case), np.float64)
    check(C.conv2d_input_grad(gy, w, x.shape, st, pad, dil, g), ref_input_grad(gy, w, case),
          np.float64)
    check(C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g), ref_weight_grad(gy, x, case),
          np.float64)


ONE_BY_ONE_CASES = [c for c in CASES if c[5:7] == (1, 1)] + [
    (2, 6, 12, 11, 10, 1, 1, (1, 1), (0, 0), (1, 1), 2),
    (4, 8, 9, 9, 5, 1, 1, (2, 1), (0, 1, 1, 0), (1, 1), 1),
    (1, 3, 5, 5, 4, 1, 1, (1, 1), (0, 0), (1, 1), 1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("case", ONE_BY_ONE_CASES,
                         ids=[str(c) for c in range(len(ONE_BY_ONE_CASES))])
def test_direct1x1_per_image_and_whole_batch_gemms(case, batched, dtype, force, monkeypatch,
                                                   threads):
    """``direct1x1`` with one GEMM per image and with one GEMM over the batch (every output size
    under the limits, or none), every direction, two threads: the reference."""
    from ember.kernels.conv import direct1x1
    limit = 10 ** 9 if batched else 0
    monkeypatch.setattr(direct1x1, "BATCH_MAX_PIXELS", limit)
    monkeypatch.setattr(direct1x1, "BATCH_MAX_PIXELS_GATHER", limit)
    threads(2)
    force("direct1x1")
    x, w, gy = problem(case, dtype)
    st, pad, dil, g = case[7:]
    geometry = C.geometry("conv2d", x.shape, w.shape, st, pad, dil, g)
    assert direct1x1._batched(geometry, "weight") == (batched and case[0] > 1)
    g64 = gy.astype(np.float64)
    check(C.conv2d_forward(x, w, None, st, pad, dil, g), ref_forward(x, w, case), dtype)
    check(C.conv2d_input_grad(gy, w, x.shape, st, pad, dil, g), ref_input_grad(g64, w, case),
          dtype)
    check(C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g), ref_weight_grad(g64, x, case),
          dtype)


@pytest.mark.parametrize("subbatch_bytes", [1, 4 << 20])
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in range(len(CASES))])
def test_im2col_row_paths(case, subbatch_bytes, force, monkeypatch, threads):
    """Forward over rows of the padded width and the stride-1 row col2im, forced for every case
    (thin weights, short rows and the widening limit lifted): still the reference."""
    monkeypatch.setattr(im2col, "SUBBATCH_BYTES", subbatch_bytes)
    monkeypatch.setattr(im2col, "PER_IMAGE_MAX_WEIGHT", 10 ** 9)
    monkeypatch.setattr(im2col, "ROWS_MAX_WO", 10 ** 9)
    monkeypatch.setattr(im2col, "ROWS_MAX_WIDENING", 10 ** 9)
    threads(2)
    force("im2col")
    for dtype in (np.float64, np.float32):
        x, w, gy = problem(case, dtype)
        st, pad, dil, g = case[7:]
        check(C.conv2d_forward(x, w, None, st, pad, dil, g), ref_forward(x, w, case), dtype)
        check(C.conv2d_input_grad(gy, w, x.shape, st, pad, dil, g), ref_input_grad(gy, w, case),
              dtype)
        check(C.conv2d_weight_grad(gy, x, w.shape, st, pad, dil, g),
              ref_weight_grad(gy, x, case), dtype)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_gradcheck_float64_with_each_algorithm_forced(algorithm, force):
    """float64 gradcheck of conv2d through autograd with each algorithm forced, for every input
    whose gradient direction the algorithm computes."""
    import ember
    import ember.nn.functional as F
    from ember.autograd import gradcheck
    k, c, r, groups = {"direct1x1": (3, 2, 1, 1), "depthwise": (4, 4, 3, 4)}.get(algorithm, (3, 2, 3, 1))
    stride = 2 if algorithm == "space_to_depth" else 1   # stride 2 only
    xs, ws = (2, c, 6, 5), (k, c // groups, r, r)
    geometry = C.geometry("conv2d", xs, ws, stride, 1, 1, groups)
    assert algorithm in selector.capable("forward", geometry)
    wrt = [name for name, direction in (("x", "input"), ("w", "weight"))
           if algorithm in selector.capable(direction, geometry)]
    assert wrt
    x = ember.tensor(rng.standard_normal(xs), requires_grad="x" in wrt)
    w = ember.tensor(rng.standard_normal(ws), requires_grad="w" in wrt)
    force(algorithm)

    def conv(*ts):
        args = {"x": x, "w": w}
        args.update(zip(wrt, ts))
        return F.conv2d(args["x"], args["w"], None, stride=stride, padding=1, groups=groups)
    assert gradcheck(conv, tuple(dict(x=x, w=w)[n] for n in wrt))


@pytest.mark.parametrize("algorithm", selector.FUSED_BIAS)
@pytest.mark.parametrize("n", [1, 5])
def test_bias_added_in_the_kernel_is_the_separate_add(algorithm, n, force):
    """Algorithms that add the forward's bias in their kernel give the bits of adding it to the
    result (the other algorithms add it afterwards)."""
    x = rng.standard_normal((n, 6, 14, 13)).astype(np.float32)
    w = rng.standard_normal((20, 6, 3, 3)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    stride = 2 if algorithm == "space_to_depth" else 1   # stride 2 only
    force(algorithm)
    with_bias = C.conv2d_forward(x, w, b, stride, 1, 1, 1)
    np.testing.assert_array_equal(with_bias, C.conv2d_forward(x, w, None, stride, 1, 1, 1)
                                  + b[:, None, None])


@pytest.mark.parametrize("algorithm", ["direct", "im2col"])
@pytest.mark.parametrize("n", [1, 5])
@pytest.mark.parametrize("hw", [(11, 12), (9, 20)])
def test_residual_and_relu_epilogue_is_eagers_order(algorithm, n, hw, force):
    """``selector.run`` with a residual and ReLU: inside the kernel (``FUSED_EPILOGUE``) or
    after it, the bits of ((conv + bias) + residual) then ReLU, NaN kept (rows shorter and
    longer than a vector: ``direct`` transposes a short image whole, a long one row by row)."""
    x = rng.standard_normal((n, 6) + hw).astype(np.float32)
    w = rng.standard_normal((16, 6, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    res = rng.standard_normal((n, 16) + hw).astype(np.float32)
    res[0, 3, 2, 5] = np.nan
    g = C.geometry("conv2d", x.shape, w.shape, 1, 1, 1, 1)
    force(algorithm)
    want = C.conv2d_forward(x, w, b, 1, 1, 1, 1) + res
    want = np.where(want < 0, np.float32(0), want)
    for r, relu in ((res, True), (None, True), (res, False)):
        got = selector.run("conv2d", "forward", g, x, w, b, r, relu)
        expect = C.conv2d_forward(x, w, b, 1, 1, 1, 1) + (r if r is not None else 0)
        if relu:
            expect = np.where(expect < 0, np.float32(0), expect)
        np.testing.assert_array_equal(got, expect)
    assert np.isnan(selector.run("conv2d", "forward", g, x, w, b, res, True)[0, 3, 2, 5])
    np.testing.assert_array_equal(selector.run("conv2d", "forward", g, x, w, b, res, True), want)


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


# ResNet-18's batch-of-one layers: (input shape, weight shape, stride, padding)
RESNET_ONE = [((1, 3, 56, 56), (64, 3, 7, 7), 2, 3), ((1, 64, 28, 28), (128, 64, 3, 3), 2, 1),
              ((1, 64, 28, 28), (128, 64, 1, 1), 2, 0), ((1, 128, 14, 14), (128, 128, 3, 3), 1, 1),
              ((1, 256, 7, 7), (256, 256, 3, 3), 1, 1)]


def test_batch_of_one_forward_runs_on_own_threads(monkeypatch, threads, avx2_rules):
    """A forward pass of one image runs every algorithm on ember's chunks with BLAS at one
    thread (its short GEMMs stalled in OpenBLAS's lock-step threads whenever another process
    held a core); batches and the other directions keep the policy they had. The results are
    torch's."""
    torch = pytest.importorskip("torch")
    from ember.kernels.conv.geometry import geometry
    one = geometry("conv2d", (1, 256, 14, 14), (256, 256, 3, 3), 1, 1, 1, 1)   # 16 tiles
    batch = geometry("conv2d", (8, 128, 28, 28), (128, 128, 3, 3), 1, 1, 1, 1)
    down = geometry("conv2d", (1, 64, 56, 56), (128, 64, 1, 1), 2, 0, 1, 1)
    assert selector.heuristic("forward", one) == "im2col"
    assert selector._own_threads("im2col", "forward", one)
    assert selector._own_threads("direct1x1", "forward", down)
    assert not selector._own_threads("im2col", "forward", batch)
    assert not selector._own_threads("im2col", "input", one)
    threads(2)
    seen = []
    real = parallel.matmul

    def spy(a, b, out):
        seen.append(parallel.parallel_possible())
        return real(a, b, out)
    monkeypatch.setattr(parallel, "matmul", spy)
    for xs, ws, st, pad in RESNET_ONE:
        x = rng.standard_normal(xs).astype(np.float32)
        w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        y = C.conv2d_forward(x, w, None, st, pad, 1, 1)
        ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), None, st, pad).numpy()
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    assert seen and all(seen), seen


@pytest.mark.parametrize("shape", [((8, 64, 56, 56), (64, 64, 3, 3), 1),
                                   ((1, 64, 56, 56), (64, 64, 3, 3), 1),
                                   ((2, 32, 20, 20), (32, 32, 5, 5), 2),
                                   ((1, 64, 28, 28), (128, 64, 1, 1), 0)])
def test_forward_only_and_training_choose_the_same_algorithm(shape, monkeypatch):
    """The forward of an inference call (no gradient, ``no_grad``, eval) and of a
    training call run the same algorithm for the same problem: the selector keys on the geometry,
    dtype and direction only (``requires_grad`` and the grad mode do not reach it)."""
    import ember
    from ember.kernels.runtime import compiler
    xs, ws, pad = shape
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    chosen = []
    real = selector._call

    def spy(name, direction, *args, **kwargs):
        chosen.append((direction, name))
        return real(name, direction, *args, **kwargs)
    monkeypatch.setattr(selector, "_call", spy)
    mode = compiler.compile_mode()
    compiler.set_compile_mode("sync")   # every kernel ready: the heuristic's own choice
    try:
        runs = {}
        for how in ("plain", "no_grad", "eval", "training"):
            compiler.forget_tiers()
            del chosen[:]
            grad = how == "training"
            tx = ember.tensor(x, requires_grad=grad)
            conv = ember.nn.Conv2d(ws[1], ws[0], ws[2], padding=pad, bias=False)
            with ember.no_grad():
                conv.weight.copy_(ember.tensor(w))
            if how == "eval":
                conv.eval()
            if how == "plain":
                conv.weight.requires_grad_(False)
            if how == "no_grad":
                with ember.no_grad():
                    conv(tx)
            else:
                y = conv(tx)
                if grad:
                    y.sum().backward()
            runs[how] = dict(chosen)
    finally:
        compiler.set_compile_mode(mode)
        compiler.forget_tiers()
    g = C.geometry("conv2d", xs, ws, 1, pad, 1, 1)
    expected = selector.heuristic("forward", g)
    assert {how: r["forward"] for how, r in runs.items()} == dict.fromkeys(runs, expected)
    assert set(runs["training"]) == {"forward", "input", "weight"}


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_avx512_heuristic_runs_direct(isa, monkeypatch):
    """With AVX-512 ``direct`` kernels (OpenBLAS runs its AVX2 kernels on some AVX-512 hosts, such
    as Zen 5) the heuristic runs ``direct`` in every direction it supports for groups-1 layers of
    K >= 16 with output rows of >= 14 pixels (3x3 and up at stride 1; in a batch also 1x1 and
    the weight gradient of strided kernels) or >= 28 (1x1 and strided kernels otherwise);
    strided 1x1 layers, 7x7 outputs, thin batches of one (``thin``) and LeNet's K = 6 keep their
    algorithms; an AVX2 host keeps every earlier choice. The host probe's outcome is fixed to
    ``direct`` winning every probe (as on Zen 5)."""
    monkeypatch.setattr(selector, "_isa", lambda: isa)
    monkeypatch.setattr(selector, "_probe", lambda: {"1x1": True, "3x3_channels": 1 << 20})
    wide = isa == "avx512"

    def pick(shape, wshape, stride=1, padding=1, direction="forward", **ok):
        return selector.heuristic(direction, C.geometry("conv2d", shape, wshape, stride, padding,
                                                        1, 1), **ok)
    for d in ("forward", "input", "weight"):
        assert pick((8, 64, 56, 56), (64, 64, 3, 3), direction=d) == \
            ("direct" if wide else "winograd")
        assert pick((1, 128, 28, 28), (128, 128, 3, 3), direction=d) == \
            ("direct" if wide or d == "weight" else "winograd")
        assert pick((8, 64, 56, 56), (256, 64, 1, 1), padding=0, direction=d) == \
            ("direct" if wide else "direct1x1")
    assert pick((8, 256, 14, 14), (256, 256, 3, 3)) == ("direct" if wide else "winograd")
    assert pick((1, 128, 56, 56), (128, 128, 3, 3), 2) == ("direct" if wide else "im2col")
    # strided, the input gradient is not ``direct``'s: the previous choice
    assert pick((1, 128, 56, 56), (128, 128, 3, 3), 2, direction="input") == "im2col"
    assert pick((1, 1024, 14, 14), (256, 1024, 1, 1), padding=0) == "direct1x1"   # 1x1, 14
    for d in ("forward", "input", "weight"):                                       # in a batch
        assert pick((8, 1024, 14, 14), (256, 1024, 1, 1), padding=0, direction=d) == \
            ("direct" if wide else "direct1x1")
    assert pick((8, 256, 28, 28), (256, 256, 3, 3), 2) == "im2col"   # strided to 14x14: weight
    assert pick((8, 256, 28, 28), (256, 256, 3, 3), 2, direction="weight") == \
        ("direct" if wide else "im2col")
    assert pick((1, 256, 56, 56), (512, 256, 1, 1), 2, 0) == "direct1x1"          # 1x1 strided
    assert pick((1, 512, 14, 14), (512, 512, 3, 3), 2) == "im2col"                # 7x7 output
    assert pick((1, 512, 7, 7), (512, 512, 3, 3)) == "im2col"
    assert pick((64, 1, 28, 28), (6, 1, 5, 5), padding=2) == "thin"               # K = 6
    assert pick((1, 3, 32, 32), (32, 3, 5, 5), padding=0) == "thin"               # thin, one
    # while the direct kernels compile: the algorithm an AVX2 host runs
    assert pick((8, 64, 56, 56), (64, 64, 3, 3), direct_ok=False) == "winograd"


WIDE_CASES = [  # (x shape, w shape, stride, padding, dilation)
    ((2, 64, 15, 17), (40, 64, 3, 3), 1, 1, 1),
    ((1, 32, 16, 30), (96, 32, 1, 1), 1, 0, 1),
    ((2, 24, 29, 29), (48, 24, 3, 3), 2, 1, 1),
    ((1, 48, 18, 18), (64, 48, 3, 3), 1, 2, 2),
    ((1, 160, 14, 14), (144, 160, 3, 3), 1, 1, 1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", WIDE_CASES)
def test_direct_on_wide_layers_matches_torch(case, dtype, force):
    """``direct`` on layers wider than its AVX2 territory (K up to 144, C*R*S up to 1440, K not
    a whole number of vectors, strided, dilated) gives torch's forward, input gradient (stride
    1) and weight gradient, whatever the host's ISA."""
    torch = pytest.importorskip("torch")
    xs, ws, st, pad, dil = case
    g = C.geometry("conv2d", xs, ws, st, pad, dil, 1)
    if not selector.direct.supports(g, "forward"):
        pytest.skip("Numba is not installed")
    x = rng.standard_normal(xs).astype(dtype)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    gy = rng.standard_normal(g.output_shape).astype(dtype)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, tb, st, pad, dil)
    ty.backward(torch.tensor(gy))
    tol = 2e-4 if dtype == np.float32 else 1e-10
    force("direct")
    y = C.conv2d_forward(x, w, b, st, pad, dil, 1)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(C.conv2d_weight_grad(gy, x, ws, st, pad, dil, 1), tw.grad.numpy(),
                               rtol=tol, atol=tol * 10)
    if st == 1:
        np.testing.assert_allclose(C.conv2d_input_grad(gy, w, xs, st, pad, dil, 1),
                                   tx.grad.numpy(), rtol=tol, atol=tol)


def test_strided_forward_consults_the_host_probe_only_where_it_decides(monkeypatch):
    """An AVX2 host (or a layer too narrow for the wide ``direct``) never starts the host probe
    for a strided forward pass (on a cold cache the probe ran its own convolutions inside the
    caller's); on AVX-512 its widest 3x3 win decides."""
    from ember.kernels.conv.geometry import geometry

    def no_probe():
        raise AssertionError("the host probe was consulted")
    g64 = geometry("conv2d", (1, 64, 56, 56), (64, 64, 3, 3), 2, 1, 1, 1)
    g128 = geometry("conv2d", (1, 128, 56, 56), (128, 128, 3, 3), 2, 1, 1, 1)
    monkeypatch.setattr(selector, "_probe", no_probe)
    monkeypatch.setattr(selector, "_isa", lambda: "avx2")
    assert not selector._wide_direct(g128, "forward")
    monkeypatch.setattr(selector, "_isa", lambda: "avx512")
    monkeypatch.setattr(selector, "_probe", lambda: {"1x1": False, "3x3_channels": 64})
    assert selector._wide_direct(g64, "forward")
    assert not selector._wide_direct(g128, "forward")


@pytest.mark.parametrize("n_threads", [1, 2])
def test_batch_of_one_forward_takes_direct_where_the_probe_says_gemm(n_threads, monkeypatch):
    """On an AVX-512 host whose probe gives stride-1 3x3 layers to the GEMM paths (this Xeon's),
    a batch-of-one forward pass of at most 128 channels with output rows of >= 28 pixels runs
    ``direct`` (rows split over TBB) when two or more threads run: Winograd's fan-outs to
    ember's pool cost more there. One thread, a batch, a wider or smaller layer, another
    direction or an AVX2 host keep the earlier choice."""
    from ember.kernels.conv import parallel
    monkeypatch.setattr(selector, "_isa", lambda: "avx512")
    monkeypatch.setattr(selector, "_probe", lambda: {"1x1": False, "3x3_channels": 0})
    monkeypatch.setattr(parallel, "threads", lambda: n_threads)

    def pick(shape, wshape, direction="forward"):
        return selector.heuristic(direction, C.geometry("conv2d", shape, wshape, 1, 1, 1, 1))
    several = n_threads > 1
    assert pick((1, 64, 56, 56), (64, 64, 3, 3)) == ("direct" if several else "winograd")
    assert pick((1, 128, 28, 28), (128, 128, 3, 3)) == ("direct" if several else "winograd")
    assert pick((2, 64, 56, 56), (64, 64, 3, 3)) == "winograd"                 # a batch
    assert pick((1, 256, 28, 28), (256, 256, 3, 3)) == "winograd"              # wider
    assert pick((1, 128, 14, 14), (128, 128, 3, 3)) != "direct"                # rows of 14
    assert pick((1, 64, 56, 56), (64, 64, 3, 3), "input") == "winograd"
    monkeypatch.setattr(selector, "_isa", lambda: "avx2")
    assert pick((1, 64, 56, 56), (64, 64, 3, 3)) == "winograd"
