"""Winograd F(4x4, 3x3) for 3x3, stride-1, dilation-1 convolution (any padding and groups).

Each 4x4 output tile is A^T [(G g G^T) * (B^T d B)] A over a 6x6 input tile d. The 36 transform
components become 36 GEMMs (K/groups x C/groups x tiles per group) done in one batched np.matmul.
Tile gather and the input/output transforms run in Numba kernels writing reused workspace buffers
when Numba is installed (``USE_NUMBA``), else in NumPy (einsum over a strided tile view).
The input gradient is the forward pass of the flipped, transposed problem; the weight gradient is
the exact adjoint of the forward algorithm in w, G^T [sum over tiles (A gy A^T) * (B^T d B)] G,
i.e. 36 GEMMs (K/g x tiles x C/g). Float32 error stays around 1e-5 of the output scale for the
sizes this is selected for.

The weight transform U is computed once per call, or once per weight for an immutable weight
(``immutable``: read-only memory owned by a read-only array, as the JIT's frozen constants are):
then U is kept, keyed by the weight array, until that array is freed (``weight_transform``).
"""
import threading
import weakref

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import parallel
from .transform import input_grad_via_forward
from .workspace import buffer, zero_border

USE_NUMBA = True

BT = np.array([[4, 0, -5, 0, 1, 0],
               [0, -4, -4, 1, 1, 0],
               [0, 4, -4, -1, 1, 0],
               [0, -2, -1, 2, 1, 0],
               [0, 2, -1, -2, 1, 0],
               [0, 4, 0, -5, 0, 1]], dtype=np.float64)
G = np.array([[1 / 4, 0, 0],
              [-1 / 6, -1 / 6, -1 / 6],
              [-1 / 6, 1 / 6, -1 / 6],
              [1 / 24, 1 / 12, 1 / 6],
              [1 / 24, -1 / 12, 1 / 6],
              [0, 0, 1]], dtype=np.float64)
AT = np.array([[1, 1, 1, 1, 1, 0],
               [0, 1, -1, 2, -2, 0],
               [0, 1, 1, 4, 4, 0],
               [0, 1, -1, 8, -8, 1]], dtype=np.float64)

GG = np.kron(G, G)

_numba_kernels = None


def supports(g, direction):
    return g.R == 3 and g.S == 3 and g.stride == (1, 1) and g.dilation == (1, 1)


def kernels():
    """The Numba kernel module, or None when Numba is unavailable or disabled."""
    global _numba_kernels
    if not USE_NUMBA:
        return None
    if _numba_kernels is None:
        try:
            from . import winograd_numba
        except ImportError:
            _numba_kernels = False
        else:
            _numba_kernels = winograd_numba
    return _numba_kernels or None


_cache = {}            # id(weight) -> (weakref to it, groups, U) for immutable weights
_cache_lock = threading.Lock()


def immutable(a):
    """True when nothing can write ``a``'s memory without first making an array writeable again:
    ``a`` is read-only and so is the array that owns the memory (a view of a writeable array
    is not immutable)."""
    while True:
        if a.flags.writeable:
            return False
        base = a.base
        if base is None:
            return a.flags.owndata
        if not isinstance(base, np.ndarray):
            return isinstance(base, bytes)
        a = base


def _uncache(key):
    with _cache_lock:
        _cache.pop(key, None)


def weight_transform(w, g):
    """U (36, groups, K/groups, C/groups) = G w G^T per (k, c), as one GEMM with kron(G, G),
    in the workspace; for an ``immutable`` weight, computed once and kept while ``w`` lives."""
    if immutable(w):
        key = id(w)
        hit = _cache.get(key)
        if hit is not None and hit[0]() is w and hit[1] == g.groups:
            return hit[2]
        U = np.empty((36, g.K * g.Cg), w.dtype)
        parallel.matmul(GG.astype(w.dtype), w.reshape(g.K * g.Cg, 9).T, U)
        U = U.reshape(36, g.groups, g.Kg, g.Cg)
        U.setflags(write=False)
        with _cache_lock:
            _cache[key] = (weakref.ref(w, lambda _, key=key: _uncache(key)), g.groups, U)
        return U
    U = buffer("winograd.U", (36, g.K * g.Cg), w.dtype)
    parallel.matmul(GG.astype(w.dtype), w.reshape(g.K * g.Cg, 9).T, U)
    return U.reshape(36, g.groups, g.Kg, g.Cg)


def transformed_input(x, g, th, tw):
    """V (36, C, N*th*tw) = B^T d B of every input tile, in the workspace."""
    nb = kernels()
    V = buffer("winograd.V", (36, g.C, g.N * th * tw), x.dtype)
    if nb is not None:
        xc, k = np.ascontiguousarray(x), np.array([4, 5, 2], x.dtype)
        parallel.run(lambda lo, hi: nb.input_transform(xc, g.padding[0], g.padding[2], th, tw,
                                                       V, k, lo, hi), g.N * g.C)
    else:
        V[...] = input_tiles(x, g, th, tw).reshape(V.shape)
    return V


def forward(x, w, g):
    th, tw = -(-g.Ho // 4), -(-g.Wo // 4)
    T = g.N * th * tw
    dtype = x.dtype
    U = weight_transform(w, g)
    nb = kernels()
    V = transformed_input(x, g, th, tw)
    M = buffer("winograd.M", (36, g.K, T), dtype)
    parallel.matmul(U, V.reshape(36, g.groups, g.Cg, T), M.reshape(36, g.groups, g.Kg, T))
    if nb is not None:
        y = np.empty(g.output_shape, dtype)
        k = np.array([2, 4, 8], dtype)
        parallel.run(lambda lo, hi: nb.output_transform(M, th, tw, y, k, lo, hi), g.N * g.K)
        return y
    Y = np.einsum("ai,bj,ijkntu->nktaub", AT.astype(dtype), AT.astype(dtype),
                  M.reshape(6, 6, g.K, g.N, th, tw), optimize=True)
    Y = Y.reshape(g.N, g.K, 4 * th, 4 * tw)[:, :, :g.Ho, :g.Wo]
    return np.ascontiguousarray(Y, dtype=dtype)


def input_tiles(x, g, th, tw):
    """B^T d B for every 6x6 tile, as (6, 6, C, N, th, tw), with NumPy."""
    Hb, Wb = 4 * th + 2, 4 * tw + 2
    pt, pl = g.padding[0], g.padding[2]
    xp = buffer("winograd.pad", (g.N, g.C, Hb, Wb), x.dtype)
    zero_border(xp, (pt, Hb - pt - g.H, pl, Wb - pl - g.W))
    xp[:, :, pt:pt + g.H, pl:pl + g.W] = x
    sn, sc, sh, sw = xp.strides
    tiles = as_strided(xp, (g.N, g.C, th, tw, 6, 6), (sn, sc, 4 * sh, 4 * sw, sh, sw),
                       writeable=False)
    bt = BT.astype(x.dtype)
    return np.einsum("ai,bj,nctuij->abcntu", bt, bt, tiles, optimize=True)


def weight_grad(gy, x, g):
    """The adjoint of ``forward`` in w: gw = G^T [sum over tiles (A gy A^T) * (B^T d B)] G."""
    th, tw = -(-g.Ho // 4), -(-g.Wo // 4)
    T = g.N * th * tw
    V = transformed_input(x, g, th, tw)
    GY = buffer("winograd.M", (36, g.K, T), gy.dtype)
    nb = kernels()
    if nb is not None:
        gyc, k = np.ascontiguousarray(gy), np.array([2, 4, 8], gy.dtype)
        parallel.run(lambda lo, hi: nb.grad_output_transform(gyc, th, tw, GY, k, lo, hi),
                     g.N * g.K)
    else:
        gyp = buffer("winograd.gypad", (g.N, g.K, 4 * th, 4 * tw), gy.dtype)
        zero_border(gyp, (0, 4 * th - g.Ho, 0, 4 * tw - g.Wo))
        gyp[:, :, :g.Ho, :g.Wo] = gy
        tiles = gyp.reshape(g.N, g.K, th, 4, tw, 4).transpose(0, 1, 2, 4, 3, 5)
        at = AT.astype(gy.dtype)
        GY[...] = np.einsum("ia,jb,nktuij->abkntu", at, at, tiles, optimize=True).reshape(GY.shape)
    M = parallel.matmul(GY.reshape(36, g.groups, g.Kg, T),
                        V.reshape(36, g.groups, g.Cg, T).transpose(0, 1, 3, 2),
                        buffer("winograd.gwM", (36, g.groups, g.Kg, g.Cg), gy.dtype))
    # gw^T (9, K*C/g) = kron(G, G)^T M: a wide GEMM split over ember's threads (the (K*C/g x 36) @
    # (36 x 9) form ran single-threaded at ~18 GFLOP/s: 2.3 of 12 ms on 8x256x14x14)
    gwt = parallel.matmul(np.ascontiguousarray(GG.T, dtype=gy.dtype), M.reshape(36, g.K * g.Cg),
                          buffer("winograd.gwT", (9, g.K * g.Cg), gy.dtype))
    return np.ascontiguousarray(gwt.T).reshape(g.weight_shape)


input_grad = input_grad_via_forward(forward)
