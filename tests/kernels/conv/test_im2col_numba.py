"""The Numba stride-1 col2im kernel ``add_runs`` against the same sum written in NumPy: taps'
runs added at their offsets of each flattened padded plane, then the crop at (pt, pl)."""
import numpy as np
import pytest

pytest.importorskip("numba")
from ember.kernels.conv import im2col_numba  # noqa: E402

rng = np.random.default_rng(7)


def _reference(taps, offsets, Wp, pt, pl, H, W, size):
    P, T, Lp = taps.shape
    acc = np.zeros((P, size))
    for t in range(T):
        acc[:, offsets[t]:offsets[t] + Lp] += taps[:, t]
    return np.stack([acc[p, (pt + h) * Wp + pl:(pt + h) * Wp + pl + W] for p in range(P)
                     for h in range(H)]).reshape(P, H, W)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("R, S, pt, pl, H, W", [(3, 3, 1, 1, 6, 5), (5, 5, 2, 2, 8, 8),
                                                (2, 3, 0, 2, 4, 7), (1, 1, 0, 0, 3, 3)])
def test_add_runs_is_the_sum_of_shifted_runs_cropped(R, S, pt, pl, H, W, dtype):
    # a stride-1 convolution's padded input plane of rows Wp; every tap (r, s) adds a run of
    # Ho*Wp products starting at r*Wp + s
    pb, pr = R - 1 - pt, S - 1 - pl
    Hp, Wp = H + pt + pb, W + pl + pr
    Ho = Hp - R + 1
    Lp = Ho * Wp
    offsets = np.array([r * Wp + s for r in range(R) for s in range(S)], np.int64)
    P = 3
    taps = rng.standard_normal((P, R * S, Lp)).astype(dtype)
    size = int(offsets.max()) + Lp
    acc = np.full(size + 5, np.nan, dtype)              # dirty scratch: the kernel zeroes it
    out = np.full((P, H, W), np.nan, dtype)
    im2col_numba.add_runs(taps, offsets, Wp, pt, pl, acc, out)
    ref = _reference(taps.astype(np.float64), offsets, Wp, pt, pl, H, W, size)
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("groups, Kg, Cg, T", [(1, 70, 45, 9), (2, 33, 3, 25), (3, 1, 1, 1),
                                               (1, 64, 64, 9)])
def test_flip_transpose_reverses_taps_and_transposes_each_group(groups, Kg, Cg, T, dtype):
    w = rng.standard_normal((groups, Kg, Cg, T)).astype(dtype)
    out = np.full((groups, Cg, Kg, T), np.nan, dtype)
    im2col_numba.flip_transpose(w, out)
    np.testing.assert_array_equal(out, w[:, :, :, ::-1].transpose(0, 2, 1, 3))
