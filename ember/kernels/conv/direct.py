"""Register-blocked direct convolution (no im2col, no GEMM) for thin layers, groups == 1.

Forward: the weight is repacked once per call to (C*R*S, Kp), K padded with zeros to whole
vector blocks; for each block of P output pixels of a row and Kp-block of V vectors a Numba
micro-kernel (``direct_numba``) keeps P*V vector accumulators in registers and, per tap (c, r, s),
broadcasts P input pixels against V weight vectors (one FMA each), then stores them to a row
buffer (pixels, Kp); each finished output row is transposed into NCHW in register tiles.
Weight gradient: gy of each image is transposed to (Ho*Wo, Kp) in register tiles; per block of T
taps (12 or 24, the remainder in powers of two: no padding taps) and Kp-block a micro-kernel holds
the T*V accumulators (a block of dW^T) in registers over the whole image. Any stride, padding and
dilation: taps are offsets into each zero-padded image.

Work is split over images with ``parallel.run`` (ember's threads; the kernels release the GIL);
weight-gradient partial sums are added in chunk order, so a given thread count gives the same
bits. Needs Numba: without it ``supports`` is False and the selector falls back.
"""
import numpy as np

from . import parallel
from .workspace import padded

_kernels = None
TBB = True   # run on Numba's TBB layer when it is the threading layer (``_tbb_parts``)


def kernels():
    """The Numba kernel module, or None when Numba is unavailable."""
    global _kernels
    if _kernels is None:
        try:
            from . import direct_numba
        except ImportError:
            _kernels = False
        else:
            _kernels = direct_numba
    return _kernels or None


def supports(g, direction):
    """Whether the direct kernels can compute ``direction`` for ``g`` (Numba installed; not
    imported here: ``ready`` says whether the kernel can run now)."""
    from ember.kernels.pointwise import numba_runtime
    return g.groups == 1 and direction in ("forward", "weight") and _kernels is not False \
        and numba_runtime.available()


_signatures = {}


def ready(direction, g, dtype, force=False):
    """Whether the kernel ``forward`` / ``weight_grad`` would call for ``g`` and ``dtype`` can run
    now (``numba_runtime.ready``: compiled or loaded from the disk cache; else, under background
    compilation, queued and False, so the selector picks a NumPy / BLAS algorithm meanwhile)."""
    from ember.kernels.pointwise import numba_runtime
    if not force and numba_runtime.importing(__name__ + "_numba"):
        return False   # Numba's first import runs on the compile thread
    if kernels() is None:
        return False
    kernel, sig = _signature(direction, g, dtype)
    return numba_runtime.ready(kernel, sig, force)


def _signature(direction, g, dtype):
    """(dispatcher, Numba argument types) of the call ``forward`` / ``weight_grad`` makes."""
    from ember.kernels.pointwise import numba_runtime
    parallel_ = bool(_tbb_parts(g.N))
    key = (direction, np.dtype(dtype).str, parallel_)
    sig = _signatures.get(key)
    if sig is None:
        a2, a4 = np.empty((0, 0), dtype), np.empty((0, 0, 0, 0), dtype)
        off = np.empty(0, np.int64)
        if direction == "forward":
            args = (a2, a2, off, a4) + (0,) * (6 if parallel_ else 7)
        else:
            args = (a4, a2, off) + (0,) * (6 if parallel_ else 7)
        sig = _signatures[key] = numba_runtime.signature(*args)
    name = ("forward" if direction == "forward" else "weight") + ("_parallel" if parallel_ else "")
    return getattr(kernels(), name), sig


def _lanes(dtype):
    return kernels().lanes(np.dtype(dtype).itemsize)


def _vectors(K, dtype):
    """Vectors per K block: 2 when K fills more than one vector, else 1."""
    return 2 if K > _lanes(dtype) else 1


def _pixels(Wo, V=1):
    """Output pixels per block: the P in (8, 7, 6, 5) whose P*V accumulators, V weight vectors and
    a broadcast fit the host's vector registers (``direct_numba.REGISTERS``: with 16, P <= 6 at
    V = 2) with the fewest blocks per row, then the fewest wasted (recomputed) pixels; 1 for
    rows shorter than 5."""
    if Wo < 5:
        return 1
    regs = kernels().REGISTERS
    fits = [p for p in (8, 7, 6, 5) if p * V + V + 1 <= regs]
    return min(fits, key=lambda p: (-(-Wo // p) * p - Wo, -p))


def _offsets(g):
    """Offset of each tap (c, r, s) in one flattened zero-padded image."""
    dh, dw = g.dilation
    c = np.arange(g.C)[:, None, None] * (g.Hp * g.Wp)
    r = np.arange(g.R)[None, :, None] * (dh * g.Wp)
    s = np.arange(g.S)[None, None, :] * dw
    return (c + r + s).reshape(-1).astype(np.int64)


def _images(x, g, lo, hi, slot):
    """Images [lo, hi) zero-padded and flattened to (n, C*Hp*Wp)."""
    xp = padded(x[lo:hi], g.padding, slot)
    if not xp.flags.c_contiguous:
        xp = np.ascontiguousarray(xp)
    return xp.reshape(hi - lo, -1)


def _tbb_parts(n_images):
    """Runs of images for the ``prange`` drivers when Numba's threading layer is TBB and more
    than one thread may run (its workers take work within microseconds; ember's pool costs ~100
    us per hand-over on this VM), else 0 (split over ember's pool with ``parallel.run``)."""
    from ember.kernels.pointwise import numba_runtime
    if not TBB or not parallel.parallel_possible():
        return 0
    return numba_runtime.tbb_parts(n_images, parallel.threads(), parallel.CHUNKS_PER_THREAD)


def forward(x, w, g):
    k = kernels()
    ready("forward", g, x.dtype, force=True)
    V = _vectors(g.K, x.dtype)
    KB = V * _lanes(x.dtype)
    Kp = -(-g.K // KB) * KB
    wp = np.zeros((g.C * g.R * g.S, Kp), x.dtype)
    wp[:, :g.K] = w.reshape(g.K, -1).T
    off = _offsets(g)
    P = _pixels(g.Wo, V)
    y = np.empty(g.output_shape, x.dtype)
    sh, sw = g.stride

    parts = _tbb_parts(g.N)
    if parts:
        k.forward_parallel(_images(x, g, 0, g.N, "direct.pad"), wp, off, y, g.Wp, sh, sw, P, V,
                           parts)
        return y

    def chunk(lo, hi):
        k.forward(_images(x, g, lo, hi, "direct.pad"), wp, off, y, g.Wp, sh, sw, P, V, lo, hi)
    parallel.run(chunk, g.N)
    return y


def weight_grad(gy, x, g):
    k = kernels()
    ready("weight", g, x.dtype, force=True)
    V = _vectors(g.K, x.dtype)
    KB = V * _lanes(x.dtype)
    Kp = -(-g.K // KB) * KB
    off = _offsets(g)
    gy = np.ascontiguousarray(gy)
    sh, sw = g.stride

    parts = _tbb_parts(g.N)
    if parts:
        gw = k.weight_parallel(gy, _images(x, g, 0, g.N, "direct.pad"), off, g.Wp, sh, sw, Kp, V,
                               parts)
        return np.ascontiguousarray(gw[:, :g.K].T).reshape(g.weight_shape)

    def chunk(lo, hi):
        return k.weight(gy[lo:hi], _images(x, g, lo, hi, "direct.pad"), off, g.Wp, sh, sw, Kp, V,
                        0, hi - lo)
    parts = parallel.run(chunk, g.N)
    gw = parts[0]
    for p in parts[1:]:
        gw += p
    return np.ascontiguousarray(gw[:, :g.K].T).reshape(g.weight_shape)
