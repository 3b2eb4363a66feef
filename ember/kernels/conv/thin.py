"""Stride-1 forward pass of thin layers by one axpy per tap over rows of the padded width.

For output row i and tap (c, r, s) the inputs of columns j = 0..Wp-1 are one contiguous run of
the flattened, zero-padded plane c starting at (i + r*dh)*Wp + s*dw, so each tap adds one run of
Ho*Wp inputs, scaled by its weight, into each output plane (``thin_numba.rows_forward``), with
no column buffer and no GEMM; the Wp - Wo junk columns of each row are dropped by the crop.
It wins where a GEMM is thin: few multiply-adds per output pixel (K*C*R*S, ``selector``'s
``THIN_MAX_MACS``). LeNet's first layer (64,1,28,28)->6 5x5 pad 2, one thread: im2col 0.95 ms,
this 0.70 ms; a batch of one 59 -> 11 us. Images are split over ember's threads. Needs Numba:
without it ``supports`` is False.
"""
import numpy as np

from . import parallel
from .workspace import buffer, zero_border

_kernels = None
_signatures = {}


def kernels():
    """The Numba kernel module, or None when Numba is unavailable."""
    global _kernels
    if _kernels is None:
        from ember.kernels.pointwise import numba_runtime
        _kernels = False
        if numba_runtime.has_compiler():
            from . import thin_numba
            _kernels = thin_numba
    return _kernels or None


def supports(g, direction):
    from ember.kernels.pointwise import numba_runtime
    return (direction == "forward" and g.groups == 1 and g.stride == (1, 1)
            and _kernels is not False and numba_runtime.available())


def ready(dtype):
    """Whether the kernel can run ``dtype`` now (compiled or in the disk cache); else, under
    background compilation, it is queued and the selector picks another algorithm meanwhile."""
    from ember.kernels.pointwise import numba_runtime
    if numba_runtime.importing(__name__ + "_numba") or kernels() is None:
        return False
    key = np.dtype(dtype).str
    sig = _signatures.get(key)
    if sig is None:
        a3, a2 = np.empty((1, 1, 1), dtype), np.empty((1, 1), dtype)
        sig = _signatures[key] = numba_runtime.signature(
            a3, a3, np.empty(1, np.int64), a2, np.empty((1, 1, 1, 1), dtype), 0, 0)
    return numba_runtime.ready(_kernels.rows_forward, sig)


_offsets = {}


def _tap_offsets(g):
    """Offset of each tap (r, s) into a flattened padded plane (kept per geometry: a batch of
    one spends more on building it than on the kernel)."""
    key = (g.Wp, g.R, g.S, g.dilation)
    off = _offsets.get(key)
    if off is None:
        (dh, dw), Wp = g.dilation, g.Wp
        off = np.array([r * dh * Wp + s * dw for r in range(g.R) for s in range(g.S)], np.int64)
        if len(_offsets) > 256:
            _offsets.clear()
        _offsets[key] = off
    return off


def forward(x, w, g):
    k = kernels()
    ready(x.dtype)
    pt, pl = g.padding[0], g.padding[2]
    Hp, Wp = g.Hp, g.Wp
    plane = Hp * Wp + g.dilation[1] * (g.S - 1)
    offsets = _tap_offsets(g)
    wt = np.ascontiguousarray(w.reshape(g.K, g.C, g.R * g.S))
    y = np.empty(g.output_shape, x.dtype)

    def chunk(lo, hi):
        n = hi - lo
        xp = buffer("thin.xrows", (n, g.C, plane), x.dtype)
        xp[:, :, Hp * Wp:] = 0
        body = xp[:, :, :Hp * Wp].reshape(n, g.C, Hp, Wp)
        zero_border(body, g.padding)
        body[:, :, pt:pt + g.H, pl:pl + g.W] = x[lo:hi]
        acc = buffer("thin.acc", (g.K, g.Ho * Wp), x.dtype)
        k.rows_forward(xp, wt, offsets, acc, y[lo:hi], 0, n)
    if g.N == 1:
        chunk(0, 1)
    else:
        parallel.run(chunk, g.N)
    return y
