"""``as_strided``: a view of a tensor's storage with any sizes and strides (in elements), as
torch's. An ember tensor's storage is the NumPy array at the root of its ``.base`` chain; the
view is checked to stay inside it."""
import numpy as np
from numpy.lib.stride_tricks import as_strided as _np_as_strided

from .errors import KernelError


def storage(a):
    """``(flat storage, offset of a's first element in it)``, both in elements of a's dtype."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root.dtype != a.dtype or not (root.flags.c_contiguous or root.flags.f_contiguous):
        raise KernelError(f"as_strided: the tensor's memory is not a plain {a.dtype} storage "
                          f"(a view through another dtype or layout)")
    flat = root.reshape(-1, order="A")
    if a.size == 0:
        return flat, 0
    offset = (a.__array_interface__["data"][0] - flat.__array_interface__["data"][0])
    return flat, offset // a.itemsize


def storage_offset(a):
    """The element offset of ``a`` in its storage (Tensor.storage_offset)."""
    return storage(a)[1]


def geometry(size, stride, storage_offset, op="as_strided"):
    """Checked ``(size, stride, offset)`` tuples of ints."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise KernelError(f"{op}: mismatch in length of strides and shape: size {list(size)}, "
                          f"stride {list(stride)}")
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise KernelError(f"{op}: sizes and strides must be non-negative, got size "
                          f"{list(size)}, stride {list(stride)}")
    if storage_offset is not None and int(storage_offset) < 0:
        raise KernelError(f"{op}: storage_offset must be non-negative, got {storage_offset}")
    return size, stride


def flat_indices(size, stride, offset):
    """The storage index of every element of the view, in its C order (int64, shape ``size``)."""
    idx = np.full(size, offset, np.int64)
    for d, (n, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        idx = idx + (np.arange(n, dtype=np.int64) * st).reshape(shape)
    return idx


def as_strided(a, size, stride, storage_offset=None):
    size, stride = geometry(size, stride, storage_offset)
    flat, own = storage(a)
    offset = own if storage_offset is None else int(storage_offset)
    if all(size):
        last = offset + sum((n - 1) * st for n, st in zip(size, stride))
        if last >= flat.size:
            raise KernelError(f"as_strided: size {list(size)}, stride {list(stride)} and "
                              f"storage offset {offset} reach element {last}, out of bounds "
                              f"for a storage of {flat.size} elements")
    return _np_as_strided(flat[offset:], shape=size,
                          strides=tuple(st * a.itemsize for st in stride))


def scatter_indices(input_shape, size, stride, storage_offset):
    """For as_strided_scatter: the flat positions (into a contiguous copy of the input) that
    ``input.as_strided(size, stride, storage_offset)`` covers."""
    size, stride = geometry(size, stride, storage_offset, "as_strided_scatter")
    offset = 0 if storage_offset is None else int(storage_offset)
    numel = int(np.prod(input_shape))
    idx = flat_indices(size, stride, offset)
    if idx.size and int(idx.max()) >= numel:
        raise KernelError(f"as_strided_scatter: size {list(size)}, stride {list(stride)} and "
                          f"storage offset {offset} reach element {int(idx.max())}, out of "
                          f"bounds for an input of {numel} elements")
    return idx
