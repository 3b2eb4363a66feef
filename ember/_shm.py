"""Shared-memory blocks behind ``Tensor.share_memory_()`` and ``ember.multiprocessing``.

A block is a ``MAP_SHARED`` mapping of an anonymous shared-memory file (Linux ``memfd``; an
unlinked temporary file elsewhere) whose descriptor stays open while the block lives, so it can
be sent to another process (torch's "file_descriptor" strategy). The file has no name: nothing
is left in ``/dev/shm``, and the memory is freed when the last process holding a mapping or a
descriptor of it lets go. A leaf module: NumPy and the standard library only.
"""
import ctypes
import mmap
import os
import weakref

import numpy as np

# (st_dev, st_ino) of a block's file -> the block mapped in this process, so a block received
# twice (or sent back to the process that made it) maps once.
_BLOCKS = weakref.WeakValueDictionary()

# libc's mmap rather than the mmap module, which keeps a second descriptor of the file open
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value


class Block(np.ndarray):
    """The bytes of one shared mapping (uint8): ``fd`` is its file, ``size`` its length,
    ``addr`` its address here. Every array over it keeps it alive through ``.base``; the
    mapping is removed and the descriptor closed when it dies."""


def _new_file(size):
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("ember-shared-tensor", os.MFD_CLOEXEC)
    else:  # pragma: no cover - platforms without memfd
        import tempfile
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        fd, path = tempfile.mkstemp(prefix="ember-shared-tensor-", dir=shm)
        os.unlink(path)
    try:
        os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _release(addr, size, fd):
    _libc.munmap(addr, size)
    os.close(fd)


def attach(fd, size):
    """The block of the shared file ``fd`` (``size`` bytes); takes ownership of ``fd`` (closed
    here when the block is already mapped in this process through another descriptor, else
    when the block dies)."""
    try:
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        blk = _BLOCKS.get(key)
        if blk is not None:
            if fd != blk.fd:
                os.close(fd)
            return blk
        addr = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            err = ctypes.get_errno()
            raise OSError(err, f"mmap of a shared block of {size} bytes: {os.strerror(err)}")
    except BaseException:
        os.close(fd)
        raise
    # base: the ctypes view, not an ndarray, so NumPy keeps the Block in every view's chain
    raw = (ctypes.c_uint8 * size).from_address(addr)
    blk = Block.__new__(Block, (size,), np.uint8, buffer=raw)
    blk.fd, blk.key, blk.addr = fd, key, addr  # blk.size: its length, as for any array
    # not at interpreter exit: arrays over the block may still be in use then
    weakref.finalize(blk, _release, addr, size, fd).atexit = False
    _BLOCKS[key] = blk
    return blk


def new_block(nbytes):
    """A new zero-filled block of at least ``nbytes`` bytes (one at least: mmap needs one)."""
    size = max(int(nbytes), 1)
    return attach(_new_file(size), size)


def block_of(arr):
    """The block ``arr``'s memory lies in, or None when it is private memory."""
    b = arr
    while isinstance(b, np.ndarray):
        if type(b) is Block:
            return b
        b = b.base
    return None


def address(arr):
    return arr.__array_interface__["data"][0]


def extent(arr):
    """(low, high): the bytes ``arr`` spans, relative to its first element (low <= 0)."""
    low = sum((n - 1) * s for n, s in zip(arr.shape, arr.strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(arr.shape, arr.strides) if s > 0) + arr.itemsize
    return low, high


def share(arr):
    """A copy of ``arr`` in a new block, with the same shape, dtype and strides."""
    if arr.size == 0:
        return np.ndarray(arr.shape, arr.dtype, buffer=new_block(1))
    low, high = extent(arr)
    out = np.ndarray(arr.shape, arr.dtype, buffer=new_block(high - low), offset=-low,
                     strides=arr.strides)
    out[...] = arr
    return out


def view(blk, shape, dtype, offset, strides):
    """The array of ``shape``/``dtype``/``strides`` starting ``offset`` bytes into ``blk``."""
    if int(np.prod(shape)) == 0:
        return np.ndarray(shape, dtype, buffer=blk)
    return np.ndarray(shape, dtype, buffer=blk, offset=offset, strides=strides)
