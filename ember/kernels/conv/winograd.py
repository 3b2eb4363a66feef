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
(``immutable``: memory owned by a ``bytes`` object, which no array over it can make writeable
again, as the JIT's frozen and folded constants are): then U is kept, keyed by the weight array,
until that array is freed (``weight_transform``).
"""
import weakref

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import parallel
from .grad_as_forward import flipped_transposed, input_grad_input
from .workspace import buffer, owned, zero_border

USE_NUMBA = True
BLOCKED = True             # forward in blocks of images (``_forward_blocked``) when possible
BLOCK_BYTES = 4 << 20      # V and M of one block at most this
BLOCKED_MIN_BYTES = 16 << 20

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
G_MAGNITUDES = (1 / 4, 1 / 6, 1 / 12, 1 / 24)   # the constants of G's rows (the Numba kernels' k)

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


_signatures = {}


def ready(direction, dtype):
    """Whether the Numba transforms ``direction`` uses can run for ``dtype`` now
    (``compiler.ready``: compiled or loaded from the disk cache; else, under background
    compilation, queued and False, so the selector picks another algorithm meanwhile). True
    without Numba (the NumPy transforms run); False while Numba's first import runs on the
    compile thread."""
    from ember.kernels.runtime import compiler
    if USE_NUMBA and compiler.importing(__name__ + "_numba"):
        return False
    nb = kernels()
    if nb is None:
        return True
    names = (("input_transform", "grad_output_transform", "weight_transform_adjoint")
             if direction == "weight" else
             ("input_transform", "output_transform", "weight_transform"))
    ok = True
    for name in names:
        ok = compiler.ready(getattr(nb, name), _signature(name, dtype)) and ok
    return ok


def _signature(name, dtype):
    """Numba argument types of the calls this module makes to transform ``name``."""
    key = (name, np.dtype(dtype).str)
    sig = _signatures.get(key)
    if sig is None:
        from ember.kernels.runtime import compiler
        a1, a2, a3, a4 = (np.empty((0,) * n, dtype) for n in (1, 2, 3, 4))
        args = {"input_transform": (a4, 0, 0, 0, 0, a3, a1, 0, 0, 0, 0, 0),
                "output_transform": (a3, 0, 0, a4, a1, 0, 0, 0, 0, 0),
                "grad_output_transform": (a4, 0, 0, a3, a1, 0, 0, 0),
                "weight_transform": (a4, a2, 0, False, a1, 0, 0),
                "weight_transform_adjoint": (a2, a4, a1, 0, 0)}[name]
        sig = _signatures[key] = compiler.signature(*args)
    return sig


_cache = {}   # id(weight) -> (weakref to it, groups, U) for immutable weights


def immutable(a):
    """True when nothing can ever write ``a``'s memory: every array down ``a``'s ``base`` chain is
    read-only and owns no memory, and the chain ends in a ``bytes`` object (NumPy refuses
    ``setflags(write=True)`` on arrays over it; ``runtime.memory.frozen_copy`` makes one).
    A read-only array that owns its memory is not immutable: ``setflags(write=True)`` makes it
    writeable again, and so is any view of it."""
    while isinstance(a, np.ndarray):
        if a.flags.writeable or a.flags.owndata:
            return False
        a = a.base
    return type(a) is bytes


def _forget(key, ref):
    # The weakref callback runs wherever the weight is freed, which may be a garbage collection
    # started inside this module (so it takes no lock: each dict operation is atomic); the
    # weight's id cannot be reused before its callbacks have run.
    hit = _cache.get(key)
    if hit is not None and hit[0] is ref:
        _cache.pop(key, None)


def weight_transform(w, g, flipped=False):
    """U (36, groups, K/groups, C/groups) = G v G^T per (k, c) for the weights v of the forward
    geometry ``g``: ``w``'s own or, when ``flipped``, those of ``flipped_transposed(w)`` (the
    input gradient's problem; ``w`` is then the original weight, (C, K/g) of ``g``'s K and C),
    in the workspace; for an ``immutable`` weight, computed once and kept while ``w`` lives."""
    if immutable(w):
        key = (id(w), flipped)
        hit = _cache.get(key)
        if hit is not None and hit[0]() is w and hit[1] == g.groups:
            return hit[2]
        U = _weight_transform(w, g, flipped, np.empty((36, g.K * g.Cg), w.dtype))
        U.setflags(write=False)
        _cache[key] = (weakref.ref(w, lambda ref, key=key: _forget(key, ref)), g.groups, U)
        return U
    return _weight_transform(w, g, flipped, buffer("winograd.U", (36, g.K * g.Cg), w.dtype))


def _weight_transform(w, g, flipped, U):
    """``weight_transform`` into U (36, K*C/g): the Numba kernel over rows of U split over
    ember's threads (8x256x14x14, two threads: 0.94 ms as one GEMM with kron(G, G), whose
    9-deep reduction over a transposed view left OpenBLAS streaming), else that GEMM."""
    nb = kernels()
    if nb is not None:
        wc, k = np.ascontiguousarray(w), np.array(G_MAGNITUDES, w.dtype)
        parallel.run(lambda lo, hi: nb.weight_transform(wc, U, g.groups, flipped, k, lo, hi),
                     g.K)
    else:
        v = flipped_transposed(w, g.groups) if flipped else w
        parallel.matmul(GG.astype(w.dtype), v.reshape(g.K * g.Cg, 9).T, U)
    return U.reshape(36, g.groups, g.Kg, g.Cg)


def transformed_input(x, g, th, tw):
    """V (36, C, N*th*tw) = B^T d B of every input tile, in the workspace."""
    nb = kernels()
    V = buffer("winograd.V", (36, g.C, g.N * th * tw), x.dtype)
    if nb is not None:
        xc, k = np.ascontiguousarray(x), np.array([4, 5, 2], x.dtype)
        parallel.run(lambda lo, hi: nb.input_transform(xc, g.padding[0], g.padding[2], th, tw,
                                                       V, k, lo, hi, 0, 0, th), g.N * g.C)
    else:
        V[...] = input_tiles(x, g, th, tw).reshape(V.shape)
    return V


def images_per_block(g, th, tw, itemsize):
    """Images per block of the blocked passes, or 0 when they do not apply: the whole batch's
    transforms (V and M) must exceed BLOCKED_MIN_BYTES (smaller ones stay in cache anyway:
    8x256x14x14, 9 MiB, ran 9.9 ms whole vs 10.1-13.1 ms in blocks of 4-1 images) and the batch
    must give two blocks per thread; a block's V and M stay under BLOCK_BYTES."""
    n_threads = parallel.threads()
    per_image = 36 * (g.C + g.K) * th * tw * itemsize
    if (not BLOCKED or not parallel.parallel_possible() or g.N < 2 * n_threads
            or per_image * g.N < BLOCKED_MIN_BYTES):
        return 0
    return max(1, min(BLOCK_BYTES // per_image, g.N // (2 * n_threads)))


def row_blocks(g, th):
    """Tile-row blocks ``(ty0, ty1)`` that split each image for the blocked forward pass of a batch
    too small to split by images (under two images per thread), or () when that does not apply
    (larger batch, too few rows, one thread)."""
    n_threads = parallel.threads()
    if (not BLOCKED or not parallel.parallel_possible() or g.N >= 2 * n_threads
            or th < 2 * n_threads):
        return ()
    step = -(-th // (2 * n_threads))
    return tuple((r, min(th, r + step)) for r in range(0, th, step))


def _forward_blocked(x, U, g, th, tw, nb, blocks):
    """Forward pass over ``blocks`` ``(n0, n1, ty0, ty1)`` (images n0..n1-1, tile rows ty0..ty1-1
    of each), each transformed, multiplied and transformed back by one thread while its V and M
    are still in cache: one fan-out per call and, for large batches, about a third of the memory
    traffic of the whole-batch phases."""
    dtype = x.dtype
    xc = np.ascontiguousarray(x)
    y = np.empty(g.output_shape, dtype)
    kin, kout = np.array([4, 5, 2], dtype), np.array([2, 4, 8], dtype)
    pt, pl = g.padding[0], g.padding[2]

    def run(lo, hi):
        for n0, n1, ty0, ty1 in blocks[lo:hi]:
            T = (n1 - n0) * (ty1 - ty0) * tw
            V = buffer("winograd.Vblock", (36, g.C, T), dtype)
            nb.input_transform(xc, pt, pl, th, tw, V, kin, 0, (n1 - n0) * g.C, n0, ty0, ty1)
            M = buffer("winograd.Mblock", (36, g.K, T), dtype)
            np.matmul(U, V.reshape(36, g.groups, g.Cg, T), out=M.reshape(36, g.groups, g.Kg, T))
            nb.output_transform(M, th, tw, y, kout, 0, (n1 - n0) * g.K, n0, ty0, ty1)
    parallel.run(run, len(blocks))
    return y


def forward(x, w, g, flipped=False):
    """The convolution of geometry ``g``; ``flipped``: of the weight ``flipped_transposed(w)``
    (see ``weight_transform``)."""
    th, tw = -(-g.Ho // 4), -(-g.Wo // 4)
    T = g.N * th * tw
    dtype = x.dtype
    U = weight_transform(w, g, flipped)
    nb = kernels()
    if nb is not None:
        per_block = images_per_block(g, th, tw, x.itemsize)
        if per_block:
            blocks = [(n, min(g.N, n + per_block), 0, th) for n in range(0, g.N, per_block)]
        else:
            blocks = [(n, n + 1, r0, r1) for n in range(g.N) for r0, r1 in row_blocks(g, th)]
        if blocks:
            return _forward_blocked(x, U, g, th, tw, nb, blocks)
    V = transformed_input(x, g, th, tw)
    M = buffer("winograd.M", (36, g.K, T), dtype)
    parallel.matmul(U, V.reshape(36, g.groups, g.Cg, T), M.reshape(36, g.groups, g.Kg, T))
    if nb is not None:
        y = np.empty(g.output_shape, dtype)
        k = np.array([2, 4, 8], dtype)
        parallel.run(lambda lo, hi: nb.output_transform(M, th, tw, y, k, lo, hi, 0, 0, th),
                     g.N * g.K)
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


def _weight_grad_blocked(gy, x, g, th, tw, nb, per_block):
    """sum over tiles of GY V^T (36, groups, K/g, C/g) in blocks of ``per_block`` images, each
    block's transforms made and multiplied by one thread while in cache. Each block's product goes
    to its own slot of one buffer in the calling thread's workspace (reused across calls), and the
    slots are added in block order: the same bits for any thread count or schedule."""
    dtype, per_image = gy.dtype, th * tw
    xc, gyc = np.ascontiguousarray(x), np.ascontiguousarray(gy)
    kin, kout = np.array([4, 5, 2], dtype), np.array([2, 4, 8], dtype)
    pt, pl = g.padding[0], g.padding[2]
    n_blocks = -(-g.N // per_block)
    parts = buffer("winograd.gwblocks", (n_blocks, 36, g.groups, g.Kg, g.Cg), dtype)

    def blocks(lo, hi):
        for b in range(lo, hi):
            n0 = b * per_block
            n1 = min(g.N, n0 + per_block)
            T = (n1 - n0) * per_image
            V = buffer("winograd.Vblock", (36, g.C, T), dtype)
            nb.input_transform(xc, pt, pl, th, tw, V, kin, 0, (n1 - n0) * g.C, n0, 0, th)
            GY = buffer("winograd.Mblock", (36, g.K, T), dtype)
            nb.grad_output_transform(gyc, th, tw, GY, kout, 0, (n1 - n0) * g.K, n0)
            np.matmul(GY.reshape(36, g.groups, g.Kg, T),
                      V.reshape(36, g.groups, g.Cg, T).transpose(0, 1, 3, 2), out=parts[b])
    parallel.run(blocks, n_blocks)
    M = buffer("winograd.gwM", parts.shape[1:], dtype)
    np.copyto(M, parts[0])
    for p in parts[1:]:
        M += p
    return M


def weight_grad(gy, x, g):
    """The adjoint of ``forward`` in w: gw = G^T [sum over tiles (A gy A^T) * (B^T d B)] G."""
    th, tw = -(-g.Ho // 4), -(-g.Wo // 4)
    T = g.N * th * tw
    nb = kernels()
    per_block = images_per_block(g, th, tw, gy.itemsize) if nb is not None else 0
    if per_block:
        return _weight_transform_adjoint(_weight_grad_blocked(gy, x, g, th, tw, nb, per_block), g)
    V = transformed_input(x, g, th, tw)
    GY = buffer("winograd.M", (36, g.K, T), gy.dtype)
    if nb is not None:
        gyc, k = np.ascontiguousarray(gy), np.array([2, 4, 8], gy.dtype)
        parallel.run(lambda lo, hi: nb.grad_output_transform(gyc, th, tw, GY, k, lo, hi, 0),
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
    return _weight_transform_adjoint(M, g)


def _weight_transform_adjoint(M, g):
    """gw (K, C/g, 3, 3) = G^T M G per (k, c) for M (36, groups, K/g, C/g): the Numba kernel
    over the rows of gw split over ember's threads, else one GEMM with kron(G, G)^T."""
    nb = kernels()
    if nb is not None:
        gw = np.empty(g.weight_shape, M.dtype)
        Mc, k = M.reshape(36, g.K * g.Cg), np.array(G_MAGNITUDES, M.dtype)
        parallel.run(lambda lo, hi: nb.weight_transform_adjoint(Mc, gw, k, lo, hi), g.K)
        return gw
    # gw^T (9, K*C/g) = kron(G, G)^T M: a wide GEMM split over ember's threads (the (K*C/g x 36) @
    # (36 x 9) form ran single-threaded at ~18 GFLOP/s: 2.3 of 12 ms on 8x256x14x14)
    gwt = parallel.matmul(np.ascontiguousarray(GG.T, dtype=M.dtype), M.reshape(36, g.K * g.Cg),
                          buffer("winograd.gwT", (9, g.K * g.Cg), M.dtype))
    return owned(gwt.T).reshape(g.weight_shape)


def input_grad(gy, w, g):
    """The stride-1 input gradient as the forward pass of the flipped, transposed problem
    (``grad_as_forward``), its weight transform read from ``w`` itself."""
    gy, g2 = input_grad_input(gy, g)
    return forward(gy, w, g2, flipped=True)
