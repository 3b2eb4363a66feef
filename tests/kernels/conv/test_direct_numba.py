"""The direct convolution's Numba kernels called directly: tap blocks, register-tile transposes
(gy for the weight gradient, the forward's masked output tiles), the inference plan's batch-of-one
kernels (``forward_rows``, ``forward_image``, ``linear_rows``) giving ``direct.forward``'s bits,
and the disk cache of a forced ISA variant."""
import os
import subprocess
import sys

import numpy as np
import pytest

from ember.kernels import conv as C
from ember.kernels.conv import direct

pytestmark = pytest.mark.skipif(direct.kernels() is None, reason="needs Numba")
rng = np.random.default_rng(7)


def test_weight_tap_blocks_split_taps_exactly():
    k = direct.kernels()
    for V in (1, 2):
        compiled = k._tap_blocks(V)
        for taps in range(1, 3 * k.MAX_TAPS[V - 1] + 2):
            t0, blocks = 0, []
            while t0 < taps:
                blocks.append(k._tap_block(taps - t0, V))
                t0 += blocks[-1]
            assert t0 == taps and set(blocks) <= set(compiled)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("K, HW", [(1, 7), (6, 100), (17, 16), (35, 41), (16, 784)])
def test_weight_transpose_of_gy(K, HW, dtype):
    """Tiles with K and HW not multiples of the lanes (ragged rows read as zeros, last pixel tile
    shifted), and the scalar path for HW below the lanes."""
    from numba import njit
    k = direct.kernels()
    _transpose, _data = k._transpose, k._data

    @njit
    def transpose(gt, gy, Kp, K, HW, L):  # the kernel takes raw pointers
        _transpose(_data(gt), Kp, _data(gy), K * HW, K, HW, L)
    L = k.lanes(np.dtype(dtype).itemsize)
    Kp = -(-K // (2 * L)) * 2 * L
    gy = rng.standard_normal((2, K, HW)).astype(dtype)
    gt = np.full((HW, Kp), np.nan, dtype)
    gt[:, -(-K // L) * L:] = 0  # columns no tile covers: the kernel's gt starts zeroed
    transpose(gt, gy, Kp, K, HW, L)  # image 1 of 2
    if HW < L:
        gt[:, K:] = 0  # the scalar path writes only k < K
    expected = np.zeros((HW, Kp), dtype)
    expected[:, :K] = gy[1].T
    np.testing.assert_array_equal(gt, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cols, count", [(16, 16), (12, 16), (5, 6), (1, 40), (16, 3)])
def test_forward_row_transpose_writes_only_its_tile(cols, count, dtype):
    """The forward's output tile: ``cols`` pixels of ``count`` channels (both capped at the
    lanes), masked stores leave everything else in y untouched."""
    from numba import njit
    k = direct.kernels()
    _tile, _data = k._transpose_tile_masked, k._data

    @njit
    def transpose(y, dbase, drow, rows, sbase, srow, cols, count):  # raw pointers
        _tile(_data(y), dbase, drow, _data(rows), sbase, srow, cols, count)
    L = k.lanes(np.dtype(dtype).itemsize)
    cols, Kp, HW = min(cols, L), 2 * L, 3 * L + 5
    rows = rng.standard_normal((L, Kp)).astype(dtype)  # pixels x channels, junk past cols
    y = np.full((L + 2, HW), np.nan, dtype)
    transpose(y, HW + 7, HW, rows, 1, Kp, cols, count)
    expected = np.full_like(y, np.nan)
    n = min(count, L)
    expected[1:1 + n, 7:7 + cols] = rows[:cols, 1:1 + n].T
    np.testing.assert_array_equal(y, expected)


def _packed_operands(geo, w, extras, dtype):
    """The plan's packing of a batch-of-one convolution's operands (weights as (taps, Kp), bias
    padded to Kp) with a random bias / residual where ``extras`` names them: (V, Kp, off, S, P,
    wp, bp, b, res, relu)."""
    K = w.shape[0]
    V, Kp, off, S, P = direct._forward_plan(geo, dtype)
    wp = np.zeros((w[0].size, Kp), dtype)
    wp[:, :K] = w.reshape(K, -1).T
    b = rng.standard_normal(K).astype(dtype) if "bias" in extras else None
    bp = np.zeros(Kp if b is not None else 0, dtype)
    if b is not None:
        bp[:K] = b
    res = rng.standard_normal(geo.output_shape).astype(dtype) if "res" in extras else None
    return V, Kp, off, S, P, wp, bp, b, res, "relu" in extras


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("K, st, extras", [(16, 1, "relu"), (35, 1, "bias+res"),
                                           (20, 2, "bias+res+relu"), (8, 1, "")])
def test_forward_rows_on_a_padded_input_gives_forward_bits(K, st, extras, dtype):
    """``forward_rows`` (the inference plan's batch-of-one kernel: input padded by
    ``pad_rows``, operands packed by the caller) over row ranges that split the output gives
    ``forward``'s bits, with bias, residual and ReLU in the same order; NaN propagates."""
    from ember.kernels.conv.geometry import tap_offsets
    k = direct.kernels()
    L = k.lanes(np.dtype(dtype).itemsize)
    H = W = 2 * L + 3
    x = rng.standard_normal((1, 5, H, W)).astype(dtype)
    x[0, 1, 3, 4] = np.nan
    w = rng.standard_normal((K, 5, 3, 3)).astype(dtype)
    geo = C.geometry("conv2d", x.shape, w.shape, (st, st), (1, 1), (1, 1), 1)
    V, Kp, off, S, P, wp, bp, b, res, relu = _packed_operands(geo, w, extras, dtype)
    want = direct.forward(x, w, geo, b, res, relu)
    xp = np.zeros((1, 5, H + 2, W + 2), dtype)
    k.pad_rows(x, 1, 1, xp)
    np.testing.assert_array_equal(xp, np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))))
    rs = res.reshape(1, -1) if res is not None else np.empty((0, 0), dtype)
    Ho, Wo = geo.output_shape[2:]
    rowbuf = np.empty(-(-Wo // L) * L * Kp, dtype)
    y = np.full(geo.output_shape, -7.0, dtype)
    for lo, hi in ((0, 3), (3, Ho)):
        k.forward_rows(xp, wp, bp, rs, tap_offsets(geo), y, st, st, P, V, S, relu, rowbuf, lo,
                       hi)
    np.testing.assert_array_equal(y, want)
    assert np.isnan(y).any()


def _max_pool(y, kh, kw, sh, sw):
    """Max pool without padding, NaN propagating (eager's rule), on a float array."""
    N, K, Ho, Wo = y.shape
    Hy, Wy = (Ho - kh) // sh + 1, (Wo - kw) // sw + 1
    win = np.stack([y[:, :, a:a + sh * (Hy - 1) + 1:sh, c:c + sw * (Wy - 1) + 1:sw]
                    for a in range(kh) for c in range(kw)])
    out = win.max(axis=0)
    out[np.isnan(win).any(axis=0)] = np.nan
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, K, R, st, pad, extras, pool", [
    ((1, 28, 28), 6, 5, 1, 2, "bias+relu", (2, 2, 2, 2)),    # LeNet conv1 + pool
    ((6, 14, 14), 16, 5, 1, 0, "bias+relu", (2, 2, 2, 2)),   # LeNet conv2 + pool (rows of 10)
    ((3, 13, 11), 35, 3, 1, 1, "relu", (3, 2, 2, 2)),        # K over two vectors, other pool
    ((4, 9, 12), 20, 3, 2, 1, "", (2, 3, 1, 2)),             # strided, odd windows
    ((5, 12, 10), 16, 3, 1, 1, "bias+res+relu", None),       # rows of 10, no pool
    ((2, 7, 6), 8, 3, 1, 1, "bias+res", None),               # rows shorter than 5
    ((4, 9, 9), 33, 1, 2, 0, "res+relu", None),              # strided 1x1
])
def test_forward_image_gives_forward_bits(shape, K, R, st, pad, extras, pool, dtype):
    """``forward_image`` (the inference plan's batch-of-one kernel for short rows and pooled
    convolutions, padding its input into a zero-bordered buffer) gives ``forward``'s bits,
    with bias, residual and ReLU in the same order; with a pool, the max pool of ``forward``'s
    result (bias and ReLU follow the window's maximum there: the same values). NaN
    propagates."""
    from ember.kernels.conv.geometry import tap_offsets
    k = direct.kernels()
    L = k.lanes(np.dtype(dtype).itemsize)
    Cin, H, W = shape
    x = rng.standard_normal((1,) + shape).astype(dtype)
    x[0, Cin - 1, H // 4 * 2, W // 4 * 2] = np.nan
    w = rng.standard_normal((K, Cin, R, R)).astype(dtype)
    geo = C.geometry("conv2d", x.shape, w.shape, (st, st), (pad, pad), (1, 1), 1)
    V, Kp, off, S, P, wp, bp, b, res, relu = _packed_operands(geo, w, extras, dtype)
    want = direct.forward(x, w, geo, b, res, relu)
    Ho, Wo = geo.output_shape[2:]
    if pool is not None:
        want = _max_pool(want, *pool)
    xp = np.zeros((1, Cin, H + 2 * pad, W + 2 * pad), dtype) if pad else x
    rs = res.reshape(1, -1) if res is not None else np.empty((0, 0), dtype)
    acc = np.full(-(-Ho * Wo // L) * L * Kp, np.nan, dtype)
    z = np.empty((K, Ho, Wo) if pool is not None else (0, 0, 0), dtype)
    y = np.full(want.shape, -7.0, dtype)
    for _ in range(2):   # the padded buffer's border stays zero
        k.forward_image(x, xp, pad, pad, wp, bp, rs, tap_offsets(geo), acc, z, y, st, st, P, V,
                        S, relu, *(pool or (1, 1, 1, 1)))
        np.testing.assert_array_equal(y, want)
    assert np.isnan(y).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("N, Cin, K", [(64, 40, 32), (17, 23, 10), (5, 7, 48), (33, 19, 16)])
def test_linear_rows_gives_the_forward_kernels_bits(N, Cin, K, dtype):
    """``linear_rows`` (a linear layer as a 1x1 convolution over the rows of x, transposed in
    register tiles first) gives ``forward``'s bits for that convolution -- the same FMAs in
    the same order -- over column blocks split in two calls."""
    k = direct.kernels()
    L = k.lanes(np.dtype(dtype).itemsize)
    V = 2 if K % (2 * L) == 0 else 1
    Kp = -(-K // (V * L)) * V * L
    Np = -(-N // L) * L
    x = rng.standard_normal((N, Cin)).astype(dtype)
    x[N // 2, Cin // 3] = np.nan
    w = rng.standard_normal((K, Cin)).astype(dtype)
    wp = np.zeros((Cin, Kp), dtype)
    wp[:, :K] = w.T
    geo = C.geometry("conv2d", (1, Cin, 1, N), (K, Cin, 1, 1), (1, 1), (0, 0), (1, 1), 1)
    want = direct.forward(np.ascontiguousarray(x.T).reshape(1, Cin, 1, N),
                          w.reshape(K, Cin, 1, 1), geo)[0, :, 0, :].T
    xt = np.full((Cin, Np), np.nan, dtype)
    off = np.arange(Cin, dtype=np.int64) * Np
    y = np.full((N, Kp), -7.0, dtype)
    P = max(p for p in k.forward_pixels(V) if p <= N)
    blocks = Kp // (V * L)
    k.linear_rows(x, xt, wp, off, y, P, V, 0, blocks // 2, True)
    k.linear_rows(x, xt, wp, off, y, P, V, blocks // 2, blocks, False)
    np.testing.assert_array_equal(xt[:, :N], x.T)
    np.testing.assert_array_equal(y[:, :K], want)
    assert np.isnan(y).any()


@pytest.mark.parametrize("features, cached", [("", False), ("+sse2,+avx,+avx2,+fma", True)])
def test_a_forced_variant_is_disk_cached_only_for_its_numba_target(features, cached):
    from ember.kernels.runtime import cpu
    if cpu.host_isa() != "avx512":
        pytest.skip("needs a host wider than the forced avx2 variant")
    env = dict(os.environ, EMBER_CPU_ISA="avx2", NUMBA_CPU_FEATURES=features)
    if not features:
        env.pop("NUMBA_CPU_FEATURES")
    out = subprocess.run([sys.executable, "-c", "from ember.kernels.conv import direct_numba as d; "
                          "print(d.ISA, d.CACHE)"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split() == ["avx2", str(cached)], out.stderr


