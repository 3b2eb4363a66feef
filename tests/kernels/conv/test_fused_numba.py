"""The inference plan's fused convolution kernels called directly: padding and im2col (both
orientations, strided, dilated and the stride-1 copy) with one GEMM, then the epilogues (bias,
residual, ReLU, max pool) against torch's conv2d / relu / max_pool2d; image ranges [n0, n1)
write only their images; the 2x2 pool's NaN rule."""
import numpy as np
import pytest

pytest.importorskip("numba")
torch = pytest.importorskip("torch")
from ember.kernels.conv import fused_numba as F  # noqa: E402

TF = torch.nn.functional
rng = np.random.default_rng(17)


def _conv_problem(N=3, C=2, H=9, W=8, K=4, R=3, S=2, pad=1, stride=(1, 1), dil=(1, 1),
                  dtype=np.float64):
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((K, C, R, S)).astype(dtype)
    b = rng.standard_normal(K).astype(dtype)
    xp = np.zeros((N, C, H + 2 * pad, W + 2 * pad), dtype)
    F.pad_into(x, pad, pad, xp, 0, N)
    ref = TF.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64),
                    None, stride, pad, dil).numpy()
    return x, w, b, xp, ref


def test_pad_into_writes_the_interior_of_the_requested_images():
    x = rng.standard_normal((3, 2, 4, 5))
    xp = np.zeros((3, 2, 8, 7))
    F.pad_into(x, 2, 1, xp, 1, 3)
    expected = np.pad(x, ((0, 0), (0, 0), (2, 2), (1, 1)))
    expected[0] = 0                                     # image 0 is outside [1, 3)
    np.testing.assert_array_equal(xp, expected)


@pytest.mark.parametrize("stride, dil", [((1, 1), (1, 1)), ((2, 1), (1, 2)), ((1, 3), (2, 1))])
def test_im2col_gemm_and_epilogue_is_torchs_conv_bias_residual_relu(stride, dil):
    N, K = 3, 4
    x, w, b, xp, ref = _conv_problem(stride=stride, dil=dil)
    Ho, Wo = ref.shape[2:]
    col = np.full((w[0].size, N, Ho, Wo), np.nan)
    F.im2col(xp, 3, 2, *stride, *dil, col, 0, N)
    z = (w.reshape(K, -1) @ col.reshape(w[0].size, -1)).reshape(K, N, Ho * Wo)
    res = rng.standard_normal((N, K, Ho * Wo))
    bt = torch.tensor(b).view(1, K, 1, 1)
    for has_res in (False, True):
        for relu in (False, True):
            y = np.full((N, K, Ho * Wo), np.nan)
            F.conv_epilogue(z, b, res, y, has_res, relu, 0, N)
            want = torch.tensor(ref) + bt + (torch.tensor(res).view(N, K, Ho, Wo) if has_res
                                             else 0)
            want = TF.relu(want) if relu else want
            np.testing.assert_allclose(y.reshape(N, K, Ho, Wo), want.numpy(), rtol=1e-12,
                                       atol=1e-12)
    if stride == (1, 1) and dil == (1, 1):
        col1 = np.full_like(col, np.nan)
        F.im2col_s1(xp, 3, 2, col1, 0, N)
        np.testing.assert_array_equal(col1, col)


def test_transposed_orientation_matches_the_plain_one():
    N, K, R, S = 2, 5, 3, 3
    x, w, b, xp, ref = _conv_problem(N=N, K=K, R=R, S=S, H=8, W=8, stride=(2, 2), dil=(1, 1))
    Ho, Wo = ref.shape[2:]
    colt = np.full((N * Ho * Wo, w[0].size), np.nan)
    F.im2col_t(xp, R, S, 2, 2, 1, 1, Ho, Wo, colt, 0, N)
    col = np.empty((w[0].size, N, Ho, Wo))
    F.im2col(xp, R, S, 2, 2, 1, 1, col, 0, N)
    np.testing.assert_array_equal(colt, col.reshape(w[0].size, -1).T)
    zt = colt @ w.reshape(K, -1).T                      # (N*Ho*Wo, K)
    res = rng.standard_normal((N, K, Ho * Wo))
    y = np.empty((N, K, Ho * Wo))
    F.t_epilogue(zt, b, res, y, True, True, 0, N)
    want = TF.relu(torch.tensor(ref) + torch.tensor(b).view(1, K, 1, 1)
                   + torch.tensor(res).view(N, K, Ho, Wo))
    np.testing.assert_allclose(y.reshape(N, K, Ho, Wo), want.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("relu", [False, True])
def test_pool_epilogues_are_torchs_max_pool_of_the_activation(relu):
    N, K, Ho, Wo = 2, 3, 8, 6
    z = rng.standard_normal((K, N, Ho, Wo))
    z[1, 0, 2, 3] = np.nan
    b = rng.standard_normal(K)
    act = torch.tensor(z.transpose(1, 0, 2, 3)) + torch.tensor(b).view(1, K, 1, 1)
    act = TF.relu(act) if relu else act
    want2 = TF.max_pool2d(act, 2, 2).numpy()
    for fn, args in ((F.conv_pool2_epilogue, ()), (F.conv_pool_epilogue, (2, 2, 2, 2))):
        y = np.full((N, K, Ho // 2, Wo // 2), -9.0)
        fn(z, b, y, relu, *args, 0, N)
        np.testing.assert_allclose(y, want2, rtol=1e-12, atol=1e-12)
    y = np.full((N, K, 3, 3), -9.0)                     # 3x2 windows, stride (2, 2)
    F.conv_pool_epilogue(z, b, y, relu, 3, 2, 2, 2, 0, N)
    np.testing.assert_allclose(y, TF.max_pool2d(act, (3, 2), 2).numpy(), rtol=1e-12, atol=1e-12)
    zn = np.ascontiguousarray(z.transpose(1, 0, 2, 3))  # (N, K, Ho, Wo)
    for fn in (F.nchw_pool2_epilogue,):
        y = np.full((N, K, Ho // 2, Wo // 2), -9.0)
        fn(zn, b, y, relu, 0, N)
        np.testing.assert_allclose(y, want2, rtol=1e-12, atol=1e-12)
    y = np.full((N, K, Ho // 2, Wo // 2), -9.0)
    F.nchw_pool2_epilogue_runs(zn, b, y, relu, 2)
    np.testing.assert_allclose(y, want2, rtol=1e-12, atol=1e-12)
    y = np.full((N, K, Ho // 2, Wo // 2), -9.0)
    F.t_pool2_epilogue(np.ascontiguousarray(z.transpose(1, 2, 3, 0)), b, y, relu, 0, N)
    np.testing.assert_allclose(y, want2, rtol=1e-12, atol=1e-12)
    assert np.isnan(y[0, 1, 1, 1])


def test_nchw_epilogues_over_image_ranges_and_runs():
    N, K, P = 5, 3, 7
    z = rng.standard_normal((N, K, P)).astype(np.float32)
    b = rng.standard_normal(K).astype(np.float32)
    res = rng.standard_normal((N, K, P)).astype(np.float32)
    want = np.maximum((z + b[:, None]) + res, 0)
    y = np.full((N, K, P), -9.0, np.float32)
    F.nchw_epilogue(z, b, res, y, True, True, 1, 4)
    np.testing.assert_array_equal(y[1:4], want[1:4])
    assert (y[[0, 4]] == -9.0).all()                    # outside [n0, n1): untouched
    for parts in (1, 2, 7):
        y = np.full((N, K, P), -9.0, np.float32)
        F.nchw_epilogue_runs(z, b, res, y, True, True, parts)
        np.testing.assert_array_equal(y, want)
    y = np.empty((N, K, P), np.float32)
    F.nchw_epilogue(z, b, res, y, False, False, 0, N)
    np.testing.assert_array_equal(y, z + b[:, None])


def test_relu_keeps_nan():
    z = np.array([[[np.nan, -1.0, 2.0]]])               # (K=1, N=1, P=3)
    y = np.empty((1, 1, 3))
    F.conv_epilogue(z, np.zeros(1), z, y, False, True, 0, 1)
    np.testing.assert_array_equal(y, [[[np.nan, 0.0, 2.0]]])
