"""Per-thread workspace buffers reused across convolution calls.

Each Python thread owns a dict of grow-only flat buffers, one per (slot name, dtype). ``buffer``
returns a view of the first prod(shape) elements; the contents are undefined. A slot is used for
one purpose inside one call, so different slots never alias, and other threads never see it.
Results handed back to callers are never workspace views.
"""
import threading

import numpy as np

_local = threading.local()


def _buffers():
    pool = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = {}
    return pool


def buffer(slot, shape, dtype):
    """Return a C-contiguous array of ``shape`` and ``dtype`` backed by this thread's ``slot``."""
    dtype = np.dtype(dtype)
    size = 1
    for n in shape:
        size *= n
    pool = _buffers()
    flat = pool.get((slot, dtype))
    if flat is None or flat.size < size:
        flat = np.empty(max(size, 1), dtype)
        pool[(slot, dtype)] = flat
    return flat[:size].reshape(shape)


def owned(view):
    """A C-contiguous copy of ``view`` (of a workspace buffer) that the caller owns: results
    are never workspace views. (``np.ascontiguousarray`` returns the buffer itself when the view
    is already contiguous -- an unpadded crop, a single channel -- and the next call overwrote
    the caller's result.)"""
    return np.array(view, order="C")


def padded(x, padding, slot):
    """Return ``x`` (N, C, H, W) zero-padded by (top, bottom, left, right) in workspace ``slot``.

    Returns ``x`` itself when no padding is needed and ``x`` is C-contiguous.
    """
    pt, pb, pl, pr = padding
    if not (pt or pb or pl or pr) and x.flags.c_contiguous:
        return x
    N, C, H, W = x.shape
    out = buffer(slot, (N, C, H + pt + pb, W + pl + pr), x.dtype)
    zero_border(out, padding)
    out[:, :, pt:pt + H, pl:pl + W] = x
    return out


def zero_border(a, padding):
    """Set the padding border of a padded (..., Hp, Wp) array to zero."""
    pt, pb, pl, pr = padding
    Hp, Wp = a.shape[-2:]
    if pt:
        a[..., :pt, :] = 0
    if pb:
        a[..., Hp - pb:, :] = 0
    if pl:
        a[..., :, :pl] = 0
    if pr:
        a[..., :, Wp - pr:] = 0


def nbytes():
    """Bytes held by the calling thread's workspace."""
    return sum(a.nbytes for a in _buffers().values())


def clear():
    """Release the calling thread's workspace buffers."""
    _buffers().clear()
