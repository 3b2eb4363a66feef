"""``space_to_depth``: stride-2 convolutions as stride-1 ones over the input's four phases,
every direction against torch, the split/merge pair as adjoints, gradcheck, selection."""
import numpy as np
import pytest

from ember.backends import conv as settings
from ember.kernels import conv as C
from ember.kernels.conv import selector, space_to_depth
from ember.kernels.conv.geometry import geometry

from ._torch_reference import assert_directions_match, assert_refused

# (x shape, w shape, stride, padding): the stem's 7x7/2 pad 3, odd and even sizes, asymmetric
# and no padding, kernels of odd and even sizes (input rows no output reads: 12x11 by 4x3)
CASES = [
    ((2, 3, 30, 30), (16, 3, 7, 7), 2, 3),
    ((1, 3, 29, 31), (20, 3, 7, 7), 2, 3),
    ((1, 2, 13, 11), (5, 2, 5, 3), 2, (2, 1)),
    ((3, 4, 12, 11), (6, 4, 4, 3), 2, (1, 0, 2, 1)),
    ((2, 5, 9, 10), (7, 5, 3, 3), 2, 0),
    ((1, 1, 8, 8), (3, 1, 3, 5), 2, (0, 2, 1, 0)),
]


@pytest.fixture
def force():
    yield lambda name: setattr(settings, "algorithm", name)
    settings.algorithm = None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_every_direction_matches_torch(case, dtype):
    assert_directions_match(space_to_depth, case, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES[:3], ids=["stem", "odd", "asymmetric"])
def test_forced_through_conv2d_with_bias_matches_torch(case, dtype, force):
    torch = pytest.importorskip("torch")
    from ._torch_reference import problem, torch_directions
    x, w, gy, g = problem(*case, dtype=dtype)
    b = np.random.default_rng(3).standard_normal(g.K).astype(dtype)
    y, gx, gw = torch_directions(x, w, gy, g)
    force("space_to_depth")
    pad = case[3]
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(C.conv2d_forward(x, w, b, 2, pad, 1, 1),
                               y + b[:, None, None], **tol)
    np.testing.assert_allclose(C.conv2d_input_grad(gy, w, x.shape, 2, pad, 1, 1), gx, **tol)
    np.testing.assert_allclose(C.conv2d_weight_grad(gy, x, w.shape, 2, pad, 1, 1), gw, **tol)
    del torch


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_split_and_merge_are_adjoint(case):
    """<split(x), X> == <x, merge(X)> for the input and the weight (what makes the gradients
    right), and the split puts each padded pixel in its phase."""
    rng = np.random.default_rng(0)
    xs, ws, st, pad = case
    g = geometry("conv2d", xs, ws, st, pad, 1, 1)
    g2 = space_to_depth.inner_geometry(g)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    X = rng.standard_normal((g.N, 4 * g.C, g2.H, g2.W))
    W = rng.standard_normal((g.K, 4 * g.C, g2.R, g2.S))
    sx, sw = space_to_depth.split_input(x, g, g2), space_to_depth.split_weight(w, g2)
    assert np.isclose(np.vdot(sx, X), np.vdot(x, space_to_depth.merge_input(X, g, g2)))
    assert np.isclose(np.vdot(sw, W), np.vdot(w, space_to_depth.merge_weight(W, g, g2)))
    pt, pb, pl, pr = g.padding
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    for a in range(2):
        for b in range(2):
            phase = xp[:, :, a::2, b::2][:, :, :g2.H, :g2.W]
            got = sx.reshape(g.N, g.C, 2, 2, g2.H, g2.W)[:, :, a, b]
            np.testing.assert_array_equal(got[:, :, :phase.shape[2], :phase.shape[3]], phase)
    np.testing.assert_array_equal(space_to_depth.merge_weight(sw, g, g2), w)


def test_refuses_other_strides_dilation_groups_and_small_kernels():
    assert_refused(space_to_depth, ((1, 3, 16, 16), (8, 3, 7, 7), 1, 3, 1, 1))
    assert_refused(space_to_depth, ((1, 3, 16, 16), (8, 3, 7, 7), (2, 1), 3, 1, 1))
    assert_refused(space_to_depth, ((1, 3, 16, 16), (8, 3, 3, 3), 2, 2, 2, 1))
    assert_refused(space_to_depth, ((1, 4, 16, 16), (8, 2, 3, 3), 2, 1, 1, 2))
    assert_refused(space_to_depth, ((1, 4, 16, 16), (8, 4, 1, 1), 2, 0, 1, 1))
    assert_refused(space_to_depth, ((1, 4, 16, 16), (8, 4, 2, 2), 2, 0, 1, 1))


def test_gradcheck_float64(force):
    import ember
    import ember.nn.functional as F
    from ember.autograd import gradcheck
    rng = np.random.default_rng(4)
    x = ember.tensor(rng.standard_normal((2, 2, 9, 8)), requires_grad=True)
    w = ember.tensor(rng.standard_normal((4, 2, 5, 5)), requires_grad=True)
    b = ember.tensor(rng.standard_normal(4), requires_grad=True)
    force("space_to_depth")
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=(2, 1)), (x, w, b))


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_heuristic_runs_the_stems_forward_through_it(isa, monkeypatch):
    """ResNet's stem (7x7/2, three channels) runs its forward pass as the stride-1 problem when
    that runs ``direct``, at batch 1 and 8, on AVX-512 and AVX2 hosts; its weight gradient, wide
    strided layers, and every direction while ``direct`` is compiling keep their algorithms."""
    from ember.kernels.conv import direct
    stem = geometry("conv2d", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3, 1, 1)
    if not direct.supports(stem, "forward"):
        pytest.skip("needs Numba")
    monkeypatch.setattr(selector, "_isa", lambda: isa)
    monkeypatch.setattr(selector, "_probe", lambda: {"1x1": False, "3x3_channels": 64})
    for n in (1, 8):
        g = geometry("conv2d", (n, 3, 224, 224), (64, 3, 7, 7), 2, 3, 1, 1)
        assert selector.heuristic("forward", g) == "space_to_depth"
        assert selector.heuristic("forward", g, direct_ok=False) == "im2col"
        assert selector.heuristic("weight", g) == "direct"
        assert selector.heuristic("input", g) == "im2col"
    wide = geometry("conv2d", (8, 16, 56, 56), (64, 16, 7, 7), 2, 3, 1, 1)   # 64 phase channels
    assert selector.heuristic("forward", wide) != "space_to_depth"
    small = geometry("conv2d", (8, 3, 56, 56), (64, 3, 3, 3), 2, 1, 1, 1)    # 3x3
    assert selector.heuristic("forward", small) != "space_to_depth"


def test_selected_stem_with_bias_residual_relu_matches_torch():
    """The stem through ``selector.run`` (heuristic, kernels compiled at once): bias, residual
    and ReLU in the stride-1 problem's epilogue give torch's result."""
    torch = pytest.importorskip("torch")
    from ember.kernels.runtime import compiler
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 40, 38)).astype(np.float32)
    w = (rng.standard_normal((32, 3, 7, 7)) / 12).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    g = geometry("conv2d", x.shape, w.shape, 2, 3, 1, 1)
    res = rng.standard_normal(g.output_shape).astype(np.float32)
    mode = compiler.compile_mode()
    compiler.set_compile_mode("sync")
    compiler.forget_tiers()
    seen = []
    real = selector._call

    def spy(name, direction, gg, *args, **kwargs):
        seen.append((name, gg.stride))
        return real(name, direction, gg, *args, **kwargs)
    try:
        selector._call = spy
        y = selector.run("conv2d", "forward", g, x, w, b, res, True)
    finally:
        selector._call = real
        compiler.set_compile_mode(mode)
        compiler.forget_tiers()
    ref = torch.relu(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w),
                                                torch.tensor(b), 2, 3) + torch.tensor(res))
    np.testing.assert_allclose(y, ref.numpy(), rtol=1e-4, atol=1e-4)
    if selector.heuristic("forward", g) == "space_to_depth":
        assert seen[0] == ("space_to_depth", (2, 2)) and seen[1][1] == (1, 1), seen
