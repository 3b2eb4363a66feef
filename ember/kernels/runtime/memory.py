"""Process memory: reuse of freed array memory (glibc malloc tuning), NumPy's huge-page advice,
and immutable arrays.

Autograd keeps every intermediate a backward needs alive until the backward runs, so a training
step allocates and frees many large arrays. With glibc's defaults each large allocation is a fresh
``mmap`` (or heap memory just returned to the OS), and touching it costs one page fault per 4 KiB:
keeping twenty 4 MB arrays alive took 44 ms on this project's machine against 5 ms once freed
memory stays in the process for reuse. PyTorch gets the same effect from its caching allocator.

``set_memory_reuse(True)`` (done by ``import ember`` unless the environment variable
``EMBER_MEMORY_REUSE=0``) raises glibc's mmap and trim thresholds with ``mallopt`` so freed memory
is kept for reuse; the price is that the process's resident memory stays at its peak. This is a
setting of the whole process (the host program's allocations too); see docs/process.md.
``set_memory_reuse(False)`` sets glibc's documented default thresholds again (128 KiB each), but
glibc's *dynamic* mmap threshold (which grows as large blocks are freed) stays off once a
threshold has been set with ``mallopt``: only a process that never enabled reuse
(``EMBER_MEMORY_REUSE=0``) keeps glibc's adaptive behaviour, and ``set_memory_reuse(False)``
there changes nothing. Everything here is a no-op where glibc is not the C library.
"""
import ctypes
import os

import numpy as np

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_GLIBC_DEFAULT_MMAP = 128 * 1024
_GLIBC_DEFAULT_TRIM = 128 * 1024
_REUSE_MMAP = 256 * 1024 * 1024
_REUSE_TRIM = 1024 * 1024 * 1024

_enabled = False
_touched = False   # whether ember has ever called mallopt in this process


def _mallopt():
    try:
        return ctypes.CDLL(None).mallopt  # the process's libc (no ldconfig subprocess)
    except (OSError, AttributeError):
        return None


def set_memory_reuse(enabled):
    """Keep freed array memory in the process for reuse (True) or return it to the OS (False).

    False after True sets glibc's default thresholds (its dynamic mmap threshold stays off, see
    the module docstring); False when reuse was never on leaves glibc untouched. Returns whether
    the setting is in effect (False where glibc's ``mallopt`` is unavailable).
    """
    global _enabled, _touched
    enabled = bool(enabled)
    if not enabled and not _touched:
        _enabled = False
        return _mallopt() is not None
    mallopt = _mallopt()
    if mallopt is None:
        return False
    mmap_t, trim_t = (_REUSE_MMAP, _REUSE_TRIM) if enabled else (_GLIBC_DEFAULT_MMAP,
                                                                 _GLIBC_DEFAULT_TRIM)
    _touched = True
    ok = mallopt(_M_MMAP_THRESHOLD, mmap_t) == 1 and mallopt(_M_TRIM_THRESHOLD, trim_t) == 1
    if ok:
        _enabled = enabled
    return ok


def _madvise_hugepage():
    """NumPy's switch of its ``madvise(MADV_HUGEPAGE)`` on large allocations (private), or
    None."""
    core = getattr(np, "_core", None) or getattr(np, "core", None)   # NumPy 2 / NumPy 1
    return getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)


def set_huge_pages(enabled):
    """Whether NumPy advises the kernel to back its large arrays with transparent huge pages
    (``madvise(MADV_HUGEPAGE)``, NumPy's default on Linux); returns the previous setting, or
    None where NumPy has no such switch.

    ``import ember`` switches the advice off (unless ``NUMPY_MADVISE_HUGEPAGE`` is set: the user's
    choice stands), as PyTorch's allocator gives none by default: where the kernel's THP defrag
    policy is "madvise" (the common default), each first touch of an advised 2 MiB region may
    stall in direct compaction of fragmented memory. minGPT's first training step took 13-15 s
    with the advice against 3.6-3.7 without, ResNet-18's first training step at batch 8 2.0-2.2
    s against 0.82 (2-core AMD EPYC VM, one process each, alternating); the steps after them,
    served from memory the process keeps (``set_memory_reuse``), ran as fast either way."""
    fn = _madvise_hugepage()
    return None if fn is None else bool(fn(bool(enabled)))


def get_memory_reuse():
    """Whether freed array memory is kept for reuse."""
    return _enabled


def configure_from_environment():
    """Apply the defaults: reuse on unless ``EMBER_MEMORY_REUSE`` is ``0``; NumPy's huge-page
    advice off unless ``NUMPY_MADVISE_HUGEPAGE`` is set."""
    if os.environ.get("EMBER_MEMORY_REUSE", "1") != "0":
        set_memory_reuse(True)
    if "NUMPY_MADVISE_HUGEPAGE" not in os.environ:
        set_huge_pages(False)


def frozen_copy(a):
    """Return a read-only copy of ``a`` whose memory belongs to a ``bytes`` object, so that no
    array over it can be made writeable again (``setflags(write=True)`` raises): kernels may keep
    data derived from it for as long as it lives (``conv.winograd.immutable``). Object arrays,
    and the rare copy NumPy finds misaligned, get a plain read-only copy instead."""
    a = np.asarray(a)
    if not a.dtype.hasobject:
        frozen = np.frombuffer(a.tobytes(), a.dtype).reshape(a.shape)
        if frozen.flags.aligned:
            return frozen
    frozen = np.array(a, copy=True)
    frozen.setflags(write=False)
    return frozen
