"""The stride-1 input gradient rewritten as a forward convolution: torch's conv2d of the
rewritten problem (flipped, per-group transposed weight; padding dilation*(R-1) - padding, a crop
where that is negative) equals torch's input gradient of the original one."""
import os
import sys

import numpy as np
import pytest

from ember.kernels.conv import grad_as_forward as gaf

sys.path.insert(0, os.path.dirname(__file__))
from _torch_reference import problem, torch, torch_directions  # noqa: E402

# (input shape, weight shape, stride, padding, dilation, groups), stride 1
CASES = [
    ((2, 3, 9, 8), (4, 3, 3, 3), 1, 1, 1, 1),
    ((2, 4, 11, 7), (6, 2, 3, 3), 1, (2, 0, 1, 2), 1, 2),
    ((1, 4, 10, 9), (8, 1, 3, 2), 1, (0, 1, 3, 0), (2, 3), 4),
    ((2, 2, 8, 8), (3, 2, 3, 3), 1, 4, 1, 1),          # padding past the kernel: a crop of gy
    ((1, 3, 6, 7), (2, 3, 1, 1), 1, 0, 1, 1),
]
IDS = [str(i) for i in range(len(CASES))]


def test_flipped_transposed_per_group():
    w = np.arange(4 * 3 * 2 * 3, dtype=np.float64).reshape(4, 3, 2, 3)   # K=4, C/g=3, groups 2
    out = gaf.flipped_transposed(w, 2)
    assert out.shape == (6, 2, 2, 3) and out.flags.c_contiguous
    for gi in range(2):
        for k in range(2):
            for c in range(3):
                np.testing.assert_array_equal(out[gi * 3 + c, k], w[gi * 2 + k, c, ::-1, ::-1])


@pytest.mark.parametrize("shape, groups", [((70, 45, 3, 3), 1), ((66, 3, 5, 5), 2),
                                           ((8, 8, 1, 1), 8)])
def test_flipped_transposed_numba_copy_equals_numpy(shape, groups, monkeypatch):
    from ember.kernels.conv import im2col
    pytest.importorskip("numba")
    w = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    ref = w.reshape(groups, shape[0] // groups, *shape[1:])[:, :, :, ::-1, ::-1]
    ref = ref.transpose(0, 2, 1, 3, 4).reshape(groups * shape[1], shape[0] // groups,
                                                *shape[2:])
    assert im2col._numba_kernel("flip_transpose", w.dtype) is not None
    np.testing.assert_array_equal(gaf.flipped_transposed(w, groups), ref)
    monkeypatch.setattr(im2col, "USE_NUMBA", False)
    np.testing.assert_array_equal(gaf.flipped_transposed(w, groups), ref)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_transposed_geometry_maps_back_to_the_input(case):
    _, _, _, g = problem(*case)
    g2 = gaf.transposed_geometry(g)
    assert (g2.N, g2.C, g2.K, g2.R, g2.S, g2.groups) == (g.N, g.K, g.C, g.R, g.S, g.groups)
    assert g2.stride == (1, 1) and g2.dilation == g.dilation
    assert (g2.Ho, g2.Wo) == (g.H, g.W)
    assert min(g2.padding) >= 0


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_rewritten_forward_is_the_input_gradient(case):
    x, w, gy, g = problem(*case)
    _, gx_ref, _ = torch_directions(x, w, gy, g)
    gy2, w2, g2 = gaf.input_grad_problem(gy, w, g)
    assert gy2.shape == g2.input_shape and w2.shape == g2.weight_shape
    pt, pb, pl, pr = g2.padding
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(torch.tensor(gy2), (pl, pr, pt, pb)),
                                   torch.tensor(w2), None, 1, 0, g2.dilation, g2.groups)
    np.testing.assert_allclose(y.numpy(), gx_ref, rtol=1e-12, atol=1e-12)


def test_input_grad_via_forward_calls_the_forward_on_the_rewritten_problem():
    x, w, gy, g = problem(*CASES[1])
    seen = []

    def forward(a, b, geo):
        seen.append((a, b, geo))
        return "result"
    assert gaf.input_grad_via_forward(forward)(gy, w, g) == "result"
    (a, b, geo), = seen
    gy2, w2, g2 = gaf.input_grad_problem(gy, w, g)
    np.testing.assert_array_equal(a, gy2)
    np.testing.assert_array_equal(b, w2)
    assert geo == g2
