"""Stride-1 forward pass of thin layers along rows of the padded width, no im2col, no GEMM.

For output row i and tap (c, r, s) the inputs of columns j = 0..Wp-1 are one contiguous run of
the flattened, zero-padded image starting at c*Hp*Wp + (i + r*dh)*Wp + s*dw, so a strip of
output positions of every channel is a sum over taps of one contiguous input run scaled by the
tap's weight (``thin_numba``: the strip's accumulators stay in vector registers over all taps);
the Wp - Wo junk columns of each row are dropped by the crop. It wins where a GEMM is thin: few
multiply-adds per output pixel (K*C*R*S, ``selector``'s ``THIN_MAX_MACS``). LeNet's first layer
(64,1,28,28)->6 5x5 pad 2, one thread: im2col 0.95 ms, the first version of this (one axpy per
tap through memory) 0.70 ms. Images run in a ``prange`` on Numba's TBB layer (else over ember's
threads; over ember's in the driver's runs while the driver compiles, ``ready``); a batch of one
runs serially. Needs Numba: without it ``supports`` is False.
"""
import numpy as np

from ember.kernels.runtime import threadpool
from ember.kernels.transpose import transposed

from . import parallel
from .geometry import tap_offsets

_kernels = None
_signatures = {}


def kernels():
    """The Numba kernel module, or None when Numba is unavailable."""
    global _kernels
    if _kernels is None:
        from ember.kernels.runtime import compiler
        _kernels = False
        if compiler.has_compiler():
            from . import thin_numba
            _kernels = thin_numba
    return _kernels or None


def supports(g, direction):
    from ember.kernels.runtime import compiler
    return (direction in ("forward", "weight") and g.groups == 1 and g.stride == (1, 1)
            and _kernels is not False and compiler.available())


def _parts(n_images):
    """Runs of images for the ``prange`` driver on Numba's TBB layer (0: run serially)."""
    from .direct import _tbb_parts
    return _tbb_parts(n_images) if n_images > 1 else 0


def ready(dtype, n_images=1, direction="forward"):
    """Whether the one-thread kernel ``forward`` / ``weight_grad`` calls can run ``dtype`` now
    (compiled or in the disk cache); else, under background compilation, it is queued and the
    selector picks another algorithm meanwhile. Where TBB splits the ``n_images`` images, the
    ``prange`` driver is queued once that kernel is ready, and the calls split images over
    ember's pool in its runs until it is compiled (the same bits; see ``direct.ready``)."""
    from ember.kernels.runtime import compiler
    if compiler.importing(__name__ + "_numba") or kernels() is None:
        return False
    if not compiler.ready(*_kernel(direction, dtype, False)):
        return False
    _driver(direction, dtype, n_images)
    return True


def _driver(direction, dtype, n_images):
    """(parts, the ``prange`` driver) when TBB splits ``n_images`` into ``parts`` runs, the
    driver None while it compiles (queued); (0, None) when TBB does not split them."""
    parts = _parts(n_images)
    if not parts:
        return 0, None
    from ember.kernels.runtime import compiler
    kernel, sig = _kernel(direction, dtype, True)
    return parts, (kernel if compiler.ready(kernel, sig, later=True) else None)


def _kernel(direction, dtype, parallel_):
    """(dispatcher, Numba argument types) of ``direction``'s kernel: the ``prange`` driver if
    ``parallel_``, else the one-thread kernel."""
    from ember.kernels.runtime import compiler
    key = (direction, np.dtype(dtype).str, parallel_)
    sig = _signatures.get(key)
    if sig is None:
        a2, a4, off = np.empty((1, 1), dtype), np.empty((1, 1, 1, 1), dtype), np.empty(1, np.int64)
        tail = (0,) * (5 if parallel_ else 6)
        args = ((a4, a2, np.empty(1, dtype), off, a4) + tail if direction == "forward"
                else (a4, a4, off) + tail)
        sig = _signatures[key] = compiler.signature(*args)
    name = ("rows_forward" if direction == "forward" else "rows_weight") + \
        ("_parallel" if parallel_ else "")
    return getattr(_kernels, name), sig


def forward(x, w, g, bias=None):
    """The convolution of x by w, plus ``bias`` (K,) when given (added in the kernel's crop)."""
    k = kernels()
    ready(x.dtype, g.N)
    x = np.ascontiguousarray(x)
    wt = transposed(w.reshape(g.K, -1))
    b = np.zeros(g.K, x.dtype) if bias is None else np.ascontiguousarray(bias, x.dtype)
    y = np.empty(g.output_shape, x.dtype)
    args = (x, wt, b, tap_offsets(g), y, g.padding[0], g.padding[2], g.Hp, g.Wp)
    parts, driver = _driver("forward", x.dtype, g.N)
    if driver is not None:
        driver(*args, parts)
    elif g.N == 1 or not parallel.parallel_possible():
        k.rows_forward(*args, 0, g.N)
    else:
        parallel.run(lambda lo, hi: k.rows_forward(*args, lo, hi), g.N)
    return y


def weight_grad(gy, x, g):
    k = kernels()
    ready(x.dtype, g.N, "weight")
    x, gy = np.ascontiguousarray(x), np.ascontiguousarray(gy)
    args = (gy, x, tap_offsets(g), g.padding[0], g.padding[2], g.Hp, g.Wp)
    parts, driver = _driver("weight", x.dtype, g.N)
    if driver is not None:
        part = driver(*args, parts)
    elif g.N == 1 or not parallel.parallel_possible():
        part = k.rows_weight(*args, 0, g.N)
    else:
        def chunk(lo, hi):
            return k.rows_weight(*args, lo, hi)
        # the driver's runs while it compiles, an empty one adding zeros as the driver's does
        chunks = threadpool.driver_runs(chunk, g.N, parts, parallel.threads()) if parts \
            else parallel.run(chunk, g.N)
        part = chunks[0]
        for c in chunks[1:]:
            part += 0 if c is None else c
    return np.ascontiguousarray(part.sum(-1).T).reshape(g.weight_shape)
