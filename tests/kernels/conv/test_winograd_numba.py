"""Winograd F(4x4, 3x3) Numba transforms against their definitions (B^T d B, A^T m A, A g A^T) in
float64, for whole batches, for blocks of images and tile rows, and for ranges of (channel, image)
pairs (taken channel-major) that together cover the batch; batches of more pairs than one vector
pass (``CHUNK`` tiles) holds, and images of at least ``PAIR_TILES`` tiles (one pair at a time)."""
import numpy as np
import pytest

from ember.kernels.conv import winograd

nb = pytest.importorskip("ember.kernels.conv.winograd_numba")
rng = np.random.default_rng(3)


def tiles_in(x, pt, pl, th, tw):
    N, C, H, W = x.shape
    xp = np.zeros((N, C, 4 * th + 2, 4 * tw + 2))
    h, w = min(H, 4 * th + 2 - pt), min(W, 4 * tw + 2 - pl)
    xp[:, :, pt:pt + h, pl:pl + w] = x[:, :, :h, :w]
    d = np.stack([np.stack([xp[:, :, 4 * ty:4 * ty + 6, 4 * tx:4 * tx + 6] for tx in range(tw)], 2)
                  for ty in range(th)], 2)                       # N, C, th, tw, 6, 6
    V = np.einsum("ai,bj,nctuij->abcntu", winograd.BT, winograd.BT, d)
    return V.reshape(36, C, N, th, tw)


@pytest.mark.parametrize("N, C, H, W, pt, pl", [(2, 3, 14, 14, 1, 1), (1, 2, 9, 7, 0, 2),
                                                (3, 2, 5, 17, 2, 0), (1, 1, 3, 3, 1, 1),
                                                (3, 50, 7, 7, 1, 1), (2, 20, 14, 14, 1, 1),
                                                (2, 3, 28, 28, 1, 1), (1, 2, 40, 40, 1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_input_transform_whole_and_blocked(N, C, H, W, pt, pl, dtype):
    th, tw = -(-(H + 2 * pt - 2) // 4), -(-(W + 2 * pl - 2) // 4)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    ref = tiles_in(x.astype(np.float64), pt, pl, th, tw)
    k, tol = np.array([4, 5, 2], dtype), (1e-5 if dtype == np.float32 else 1e-12)
    V = np.full((36, C, N * th * tw), np.nan, dtype)
    nb.input_transform(x, pt, pl, th, tw, V, k, 0, N * C, 0, 0, th)
    np.testing.assert_allclose(V, ref.reshape(V.shape), atol=tol * np.abs(ref).max())
    Vs = np.full(V.shape, np.nan, dtype)                       # in three ranges of pairs
    for lo, hi in _ranges(N * C):
        nb.input_transform(x, pt, pl, th, tw, Vs, k, lo, hi, 0, 0, th)
    np.testing.assert_array_equal(Vs, V)
    n0, ty0, ty1 = N - 1, th // 2, th
    Vb = np.full((36, C, (ty1 - ty0) * tw), np.nan, dtype)
    nb.input_transform(x, pt, pl, th, tw, Vb, k, 0, (N - n0) * C, n0, ty0, ty1)
    np.testing.assert_allclose(Vb, ref[:, :, n0, ty0:ty1].reshape(Vb.shape),
                               atol=tol * np.abs(ref).max())


def _ranges(pairs):
    """Three consecutive ranges covering range(pairs) (some empty for few pairs)."""
    a, b = pairs // 3, 2 * pairs // 3 + 1
    return [(0, a), (a, min(b, pairs)), (min(b, pairs), pairs)]


SHAPES_OUT = [(2, 3, 14, 14), (1, 2, 9, 7), (3, 2, 5, 17), (1, 1, 1, 2), (3, 50, 7, 7),
              (2, 20, 14, 14), (2, 3, 28, 28), (1, 2, 40, 40)]   # the last two: per pair


@pytest.mark.parametrize("N, K, Ho, Wo", SHAPES_OUT)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_output_transform_whole_and_blocked(N, K, Ho, Wo, dtype):
    th, tw = -(-Ho // 4), -(-Wo // 4)
    M = rng.standard_normal((36, K, N * th * tw)).astype(dtype)
    Y = np.einsum("ai,bj,ijkntu->nktaub", winograd.AT, winograd.AT,
                  M.astype(np.float64).reshape(6, 6, K, N, th, tw))
    ref = Y.reshape(N, K, 4 * th, 4 * tw)[:, :, :Ho, :Wo]
    k, tol = np.array([2, 4, 8], dtype), (1e-5 if dtype == np.float32 else 1e-12)
    y = np.full((N, K, Ho, Wo), np.nan, dtype)
    nb.output_transform(M, th, tw, y, k, 0, N * K, 0, 0, th)
    np.testing.assert_allclose(y, ref, atol=tol * np.abs(ref).max())
    ys = np.full(y.shape, np.nan, dtype)
    for lo, hi in _ranges(N * K):
        nb.output_transform(M, th, tw, ys, k, lo, hi, 0, 0, th)
    np.testing.assert_array_equal(ys, y)
    n0, ty0, ty1 = N - 1, th // 2, th
    Mb = np.ascontiguousarray(M.reshape(36, K, N, th, tw)[:, :, n0, ty0:ty1].reshape(36, K, -1))
    yb = np.full((N, K, Ho, Wo), np.nan, dtype)
    nb.output_transform(Mb, th, tw, yb, k, 0, (N - n0) * K, n0, ty0, ty1)
    rows = slice(4 * ty0, Ho)
    np.testing.assert_allclose(yb[n0, :, rows], ref[n0, :, rows], atol=tol * np.abs(ref).max())
    assert np.isnan(yb[:n0]).all() and np.isnan(yb[n0, :, :4 * ty0]).all()


@pytest.mark.parametrize("N, K, Ho, Wo", SHAPES_OUT)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_grad_output_transform_whole_blocked_and_in_ranges(N, K, Ho, Wo, dtype):
    th, tw = -(-Ho // 4), -(-Wo // 4)
    gy = rng.standard_normal((N, K, Ho, Wo)).astype(dtype)
    gyp = np.zeros((N, K, 4 * th, 4 * tw))
    gyp[:, :, :Ho, :Wo] = gy
    tiles = gyp.reshape(N, K, th, 4, tw, 4).transpose(0, 1, 2, 4, 3, 5)   # N, K, th, tw, 4, 4
    ref = np.einsum("ia,jb,nktuij->abkntu", winograd.AT, winograd.AT, tiles).reshape(36, K, N,
                                                                                     th * tw)
    k, tol = np.array([2, 4, 8], dtype), (1e-5 if dtype == np.float32 else 1e-12)
    GY = np.full((36, K, N * th * tw), np.nan, dtype)
    nb.grad_output_transform(gy, th, tw, GY, k, 0, N * K, 0)
    np.testing.assert_allclose(GY, ref.reshape(GY.shape), atol=tol * np.abs(ref).max())
    GYs = np.full(GY.shape, np.nan, dtype)
    for lo, hi in _ranges(N * K):
        nb.grad_output_transform(gy, th, tw, GYs, k, lo, hi, 0)
    np.testing.assert_array_equal(GYs, GY)
    n0 = N // 2                                                  # images n0 .. N-1
    GYb = np.full((36, K, (N - n0) * th * tw), np.nan, dtype)
    nb.grad_output_transform(gy, th, tw, GYb, k, 0, (N - n0) * K, n0)
    np.testing.assert_array_equal(GYb, GY.reshape(36, K, N, -1)[:, :, n0:].reshape(GYb.shape))


def _flipped(w, groups):
    """The input gradient's weight by its definition: row g*C/g + c, column q is
    w[g*K/g + q, c] turned by 180 degrees."""
    K, Cg = w.shape[:2]
    Kg = K // groups
    return np.array([[w[(r // Cg) * Kg + q, r % Cg, ::-1, ::-1] for q in range(Kg)]
                     for r in range(groups * Cg)])


@pytest.mark.parametrize("K, Cg, groups", [(5, 3, 1), (6, 2, 3), (1, 1, 1)])
@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_weight_transform_and_adjoint(K, Cg, groups, flip, dtype):
    w = rng.standard_normal((K, Cg, 3, 3)).astype(dtype)
    v = _flipped(w.astype(np.float64), groups) if flip else w.astype(np.float64)
    R, Q = v.shape[:2]
    ref = np.einsum("ai,rqij,bj->abrq", winograd.G, v, winograd.G).reshape(36, R * Q)
    k, tol = np.array([1 / 4, 1 / 6, 1 / 12, 1 / 24], dtype), (1e-6 if dtype == np.float32 else 1e-14)
    U = np.full((36, R * Q), np.nan, dtype)
    nb.weight_transform(w, U, groups, flip, k, 0, R)
    np.testing.assert_allclose(U, ref, atol=tol * np.abs(ref).max())
    Ub = np.full((36, R * Q), np.nan, dtype)                  # rows [1, R) only
    nb.weight_transform(w, Ub, groups, flip, k, 1, R)
    assert np.isnan(Ub[:, :Q]).all()
    np.testing.assert_array_equal(Ub[:, Q:], U[:, Q:])
    if flip:
        return
    M = rng.standard_normal((36, K * Cg)).astype(dtype)
    ref = np.einsum("ai,abrq,bj->rqij", winograd.G, M.astype(np.float64).reshape(6, 6, K, Cg),
                    winograd.G)
    gw = np.full((K, Cg, 3, 3), np.nan, dtype)
    nb.weight_transform_adjoint(M, gw, k, 0, K)
    np.testing.assert_allclose(gw, ref, atol=tol * np.abs(ref).max())
