"""The Numba transpose kernel (ember.kernels.transpose_numba) on flat runs with row strides,
against NumPy's ``.T``: shapes not multiples of its tile, padded rows on either side."""
import numpy as np
import pytest

pytest.importorskip("numba")

from ember.kernels import transpose_numba  # noqa: E402


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("M,N", [(1, 1), (16, 16), (17, 5), (3, 40), (100, 37), (64, 129)])
@pytest.mark.parametrize("src_pad,dst_pad", [(0, 0), (3, 0), (0, 7), (16, 16)])
def test_transpose_flat_equals_numpy(dtype, M, N, src_pad, dst_pad):
    rng = np.random.default_rng(M * 1000 + N)
    srs, drs = N + src_pad, M + dst_pad
    src = rng.standard_normal(M * srs).astype(dtype)
    dst = np.full(N * drs, np.nan, dtype)
    transpose_numba.transpose_flat(src, M, N, srs, dst, drs)
    a = src.reshape(M, srs)[:, :N]
    got = dst.reshape(N, drs)
    np.testing.assert_array_equal(got[:, :M], a.T)
    assert np.isnan(got[:, M:]).all()   # the destination's padding is not written
