"""The sparse COO tensor: int64 ``indices`` of shape ``(sparse_dim, nnz)``, a dense ``values``
Tensor of shape ``(nnz, *dense_shape)`` and a size, as ``torch.sparse_coo_tensor``.

Autograd runs through the values: every sparse op is written in differentiable dense ops on the
values tensor (the indices are constants computed in NumPy by ``ember.kernels.sparse``), so the
gradient of a sparse operand is a sparse tensor with its pattern, and double backward works.
A sparse tensor has no strided storage: a Tensor method that needs one raises UnsupportedError
naming the method instead of reading garbage."""
import sys

import numpy as np

import ember
from ember import _dtype
from ember.autograd.function import Function
from ember.errors import (EmberIndexError, EmberRuntimeError, EmberTypeError,
                          UnsupportedError)
from ember.kernels import sparse as _k
from ember.tensor import Size, Tensor, check_device

sparse_coo = _dtype.sparse_coo


class SparseCooTensorWithDimsAndTensors(Function):
    """Identity on the values, so a sparse tensor built from values that require grad has a
    node of its own (torch's SparseCooTensorWithDimsAndTensorsBackward0)."""

    @staticmethod
    def forward(ctx, values):
        return values

    @staticmethod
    def backward(ctx, grad):
        return grad


def _caller():
    """The name of the ember function the user called that reached a sparse tensor's storage:
    the outermost public function among the calling frames inside ember (``save``, ``trace``,
    ``item``), else the innermost name without its leading underscores."""
    frame = sys._getframe(2)
    first, found = frame.f_code.co_name, None
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("ember."):
        name = frame.f_code.co_name
        if (not name.startswith("_") or name.endswith("__")) and name != "checked":
            found = name
        frame = frame.f_back
    return found or first.lstrip("_")


def _unsupported(what):
    return UnsupportedError(f"{what}: sparse COO tensors (layout=ember.sparse_coo) have no "
                            f"strided storage, and {what} is not implemented for them; "
                            f"convert with .to_dense() first (docs/sparse.md lists the sparse "
                            f"ops)")


class SparseTensor(Tensor):
    """A sparse COO tensor (``layout == ember.sparse_coo``). Make one with
    ``ember.sparse_coo_tensor`` or ``Tensor.to_sparse()``."""

    is_sparse = True
    layout = sparse_coo

    @property
    def _data(self):
        raise _unsupported(_caller())

    @property
    def _requires_grad(self):
        raise UnsupportedError(f"{_caller()}: autograd with respect to a sparse COO tensor itself "
                               f"is not supported; differentiate with respect to the values it "
                               f"was built from, or read its .grad after backward()")

    @property
    def T(self):
        """The transpose of a sparse tensor of at most 2 dimensions (``t()``)."""
        return self.t()

    @property
    def mT(self):
        """The last two dimensions swapped."""
        return self.transpose(-2, -1)

    @classmethod
    def _build(cls, indices, values, size, coalesced):
        """A sparse tensor of int64 ndarray ``indices``, values Tensor ``values`` and ``size``
        (trusted: callers have checked them)."""
        t = object.__new__(cls)
        t._grad_fn = None
        t._idx = indices
        t._v = values
        t._size = tuple(int(s) for s in size)
        t._coalesced = bool(coalesced)
        return t

    # ---- metadata ----------------------------------------------------------------------
    @property
    def shape(self):
        return Size(self._size)

    def size(self, dim=None):
        """The shape, or the size of dimension ``dim``."""
        if dim is None:
            return self.shape
        return self._size[_dim(dim, len(self._size), "size")]

    @property
    def dtype(self):
        return self._v.dtype

    @property
    def ndim(self):
        return len(self._size)

    def dim(self):
        """Number of dimensions (sparse plus dense)."""
        return len(self._size)

    ndimension = dim

    def numel(self):
        """Number of elements of the dense equivalent."""
        return int(np.prod(self._size, dtype=np.int64))

    nelement = numel

    def __len__(self):
        if not self._size:
            raise EmberTypeError("len() of a 0-d tensor")
        return self._size[0]

    def element_size(self):
        """Bytes per element of the values."""
        return self._v.element_size()

    def is_floating_point(self):
        return self._v.is_floating_point()

    def is_complex(self):
        return self._v.is_complex()

    def is_contiguous(self, memory_format=None):
        raise _unsupported("is_contiguous")

    def sparse_dim(self):
        """Number of sparse dimensions (rows of ``indices``)."""
        return self._idx.shape[0]

    def dense_dim(self):
        """Number of dense dimensions (the values' dimensions after the first)."""
        return len(self._size) - self._idx.shape[0]

    def _nnz(self):
        """Number of specified entries (duplicates counted while uncoalesced)."""
        return self._idx.shape[1]

    def is_coalesced(self):
        """Whether the indices are sorted and unique (set by ``coalesce``; torch's flag)."""
        return self._coalesced

    def _coalesced_(self, coalesced):
        """Set the coalesced flag (torch's ``_coalesced_``: the caller vouches); returns self."""
        if coalesced and not _k.is_sorted_unique(self._idx, self._size[:self.sparse_dim()]):
            raise EmberRuntimeError("_coalesced_: the indices are not sorted and unique")
        self._coalesced = bool(coalesced)
        return self

    # ---- parts -------------------------------------------------------------------------
    def _indices(self):
        """The indices as an int64 Tensor ``(sparse_dim, nnz)``, coalesced or not."""
        return Tensor._make(self._idx)

    def _values(self):
        """The values Tensor ``(nnz, *dense_shape)``, coalesced or not, detached from autograd
        as torch's ``_values()``."""
        return self._v.detach()

    def indices(self):
        """The indices of a coalesced tensor. Raises EmberRuntimeError when uncoalesced."""
        if not self._coalesced:
            raise EmberRuntimeError("indices: Cannot get indices on an uncoalesced tensor, "
                                    "please call .coalesce() first")
        return Tensor._make(self._idx)

    def values(self):
        """The values of a coalesced tensor, differentiable (gradients reach this sparse
        tensor's values). Raises EmberRuntimeError when uncoalesced."""
        if not self._coalesced:
            raise EmberRuntimeError("values: Cannot get values on an uncoalesced tensor, "
                                    "please call .coalesce() first")
        return self._v

    # ---- autograd state (that of the values) -------------------------------------------
    @property
    def requires_grad(self):
        return self._v.requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad=True):
        """Make this leaf's values require grad; returns self (rules of Tensor.requires_grad_)."""
        self._v.requires_grad_(requires_grad)
        return self

    @property
    def grad_fn(self):
        return self._v.grad_fn

    @grad_fn.setter
    def grad_fn(self, node):
        raise EmberRuntimeError("grad_fn: cannot set the grad_fn of a sparse tensor")

    @property
    def is_leaf(self):
        return self._v.grad_fn is None

    @property
    def grad(self):
        """The gradient of a leaf: a sparse tensor with this tensor's pattern, or None."""
        g = self._v.grad
        if g is None:
            return None
        if self._coalesced:
            return SparseTensor._build(self._idx, g, self._size, True)
        # uncoalesced: one entry per index (the duplicates of an index hold the same gradient,
        # that of the entry their sum makes), as torch's gradient of the coalesced pattern
        uniq, inverse = _k.coalesce(self._idx, self._size[:self.sparse_dim()])
        first = np.zeros(uniq.shape[1], np.int64)
        first[inverse[::-1]] = np.arange(inverse.size - 1, -1, -1)
        return SparseTensor._build(uniq, Tensor._make(g.detach().numpy()[first]), self._size,
                                   True)

    @grad.setter
    def grad(self, value):
        if value is None:
            self._v.grad = None
            return
        if not (getattr(value, "is_sparse", False) is True and
                np.array_equal(value._idx, self._idx) and value._size == self._size):
            raise EmberRuntimeError("grad: assigned grad must be a sparse COO tensor with the "
                                    "indices and size of this tensor")
        self._v.grad = value._v

    def detach(self):
        """The same sparse tensor outside autograd (values shared)."""
        return SparseTensor._build(self._idx, self._v.detach(), self._size, self._coalesced)

    def clone(self, *, memory_format=None):
        """A copy (indices and values), differentiable."""
        return SparseTensor._build(self._idx.copy(), self._v.clone(), self._size,
                                   self._coalesced)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        raise _unsupported("backward")

    def register_hook(self, hook):
        raise _unsupported("register_hook")

    def detach_(self):
        raise _unsupported("detach_")

    def retain_grad(self):
        raise _unsupported("retain_grad")

    # ---- conversion --------------------------------------------------------------------
    def coalesce(self):
        """Sorted unique indices, the values of duplicates summed (differentiable); self when
        already coalesced."""
        if self._coalesced:
            return self
        sd = self.sparse_dim()
        uniq, inverse = _k.coalesce(self._idx, self._size[:sd])
        v = self._v
        out = _zeros((uniq.shape[1],) + tuple(v.shape[1:]), v).index_add(
            0, Tensor._make(inverse), v)
        return SparseTensor._build(uniq, out, self._size, True)

    def to_dense(self, dtype=None, *, masked_grad=None):
        """The dense (strided) tensor, duplicates summed; differentiable."""
        sd = self.sparse_dim()
        sp = self._size[:sd]
        v = self._v if dtype is None else self._v.to(dtype)
        flat = _k.flat_index(self._idx, sp)
        n = int(np.prod(sp, dtype=np.int64))
        out = _zeros((n,) + self._size[sd:], v).index_add(0, Tensor._make(flat), v)
        return out.reshape(self._size)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        """Self (already sparse COO); another ``sparse_dim`` or layout raises as torch."""
        if layout is not None and layout is not sparse_coo:
            raise UnsupportedError(f"to_sparse: layout {layout} is not supported; ember has "
                                   f"sparse COO (ember.sparse_coo) only")
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise EmberRuntimeError(f"to_sparse: conversion from Sparse to Sparse with "
                                    f"sparse_dim argument ({sparse_dim}) != self.sparse_dim() "
                                    f"({self.sparse_dim()}) is not supported")
        return self

    def to(self, *args, **kwargs):
        """A copy with other values' dtype (``to(dtype)``, ``to("cpu")``, ``to(other)``)."""
        v = self._v.to(*[a._v if getattr(a, "is_sparse", False) is True else a for a in args],
                       **kwargs)
        if v is self._v:
            return self
        return SparseTensor._build(self._idx, v, self._size, self._coalesced)

    def type(self, dtype=None, non_blocking=False, **kwargs):
        if dtype is None:
            return "ember.sparse." + self._v.type().split(".")[-1]
        return self.to(dtype)

    def float(self, memory_format=None):
        return self.to(_dtype.float32)

    def double(self, memory_format=None):
        return self.to(_dtype.float64)

    def half(self, memory_format=None):
        return self.to(_dtype.float16)

    def long(self, memory_format=None):
        return self.to(_dtype.int64)

    def int(self, memory_format=None):
        return self.to(_dtype.int32)

    def cpu(self, memory_format=None):
        return self

    def __deepcopy__(self, memo):
        out = SparseTensor._build(self._idx.copy(), self._v.__deepcopy__({}), self._size,
                                  self._coalesced)
        memo[id(self)] = out
        return out

    def __repr__(self):
        from ember._tensor_str import add_suffixes, tensor_str

        def part(name, a, floating):   # torch: "name=tensor(...)", the size when empty
            text = tensor_str(a, 7 + len(name) + 8, floating)
            return f"{name}=tensor({text}" + (f", size={tuple(a.shape)})" if a.size == 0
                                                else ")")
        v = self._v._data
        if self.dtype.name == "bfloat16":
            v = v.astype(np.float32)
        body = (part("indices", self._idx, False) + ",\n" + " " * 7 +
                part("values", v, self.dtype.is_floating_point))
        suffixes = [f"size={self._size}", f"nnz={self._nnz()}"]
        if self.dtype not in (_dtype.get_default_dtype(), _dtype.default_complex(), _dtype.int64,
                              _dtype.bool_):   # torch's defaults go unnamed
            suffixes.append(f"dtype=ember.{self.dtype.name}")
        suffixes.append("layout=ember.sparse_coo")
        fn = self._v.grad_fn
        if fn is not None:
            suffixes.append(f"grad_fn=<{fn.name()}>")
        elif self._v.requires_grad:
            suffixes.append("requires_grad=True")
        return add_suffixes("tensor(" + body, suffixes, 7, force_newline=True)

    __str__ = __repr__

    def __format__(self, spec):
        return repr(self)

    def __iter__(self):
        raise _unsupported("__iter__")

    def __bool__(self):
        raise _unsupported("__bool__")

    def __reduce_ex__(self, proto):
        raise _unsupported("pickling")


def _zeros(shape, like):
    """Zeros of the dtype of Tensor ``like`` (a Tensor outside autograd)."""
    return Tensor._make(np.zeros(shape, like.detach().numpy().dtype))


def _dim(dim, nd, who):
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise EmberTypeError(f"{who}(): argument 'dim' must be an int, not {type(dim).__name__}")
    if not -nd <= dim < max(nd, 1):
        raise EmberIndexError(f"{who}: dimension {dim} out of range for a {nd}-d tensor")
    return int(dim) % max(nd, 1)


def _as_index_array(indices, who):
    """int64 ndarray of ``indices`` (a Tensor, ndarray or nested lists; integer or float)."""
    if isinstance(indices, Tensor):
        if indices.is_sparse:
            raise EmberTypeError(f"{who}: indices must be a dense tensor, got a sparse one")
        a = indices.detach().numpy()
    else:
        try:
            a = np.asarray(indices)
        except (TypeError, ValueError) as e:
            raise EmberTypeError(f"{who}: cannot read indices from "
                                 f"{type(indices).__name__}: {e}") from None
    if a.dtype.kind not in "iuf" and not (a.size == 0 and a.dtype.kind in "OU"):
        raise EmberTypeError(f"{who}: indices must be an integer tensor, got {a.dtype}")
    if a.dtype.kind == "f" and a.size and not np.all(np.isfinite(a)):
        raise EmberRuntimeError(f"{who}: indices must be finite")
    return a.astype(np.int64)


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """A sparse COO tensor with ``values`` at ``indices`` (``(sparse_dim, nnz)``), as
    ``torch.sparse_coo_tensor``. ``size`` defaults to the smallest that holds the indices.
    Values of shape ``(nnz, *dense)`` make a hybrid tensor with ``dense_dim = len(dense)``.

    Raises EmberRuntimeError for indices that are not 2-d, an nnz that differs between
    indices and values, a size of the wrong length, and (always, as torch with
    ``check_invariants=True``) an index outside ``size``; EmberTypeError for non-integer
    indices."""
    who = "sparse_coo_tensor"
    check_device(device, who)
    idx = _as_index_array(indices, who)
    if isinstance(values, Tensor):
        if values.is_sparse:
            raise EmberTypeError(f"{who}: values must be a dense tensor, got a sparse one")
        v = values if dtype is None else values.to(dtype)
    else:
        v = ember.tensor(values, dtype=dtype)
    if idx.ndim != 2:
        raise EmberRuntimeError(f"{who}: indices must be sparse_dim x nnz, but got: "
                                f"{list(idx.shape)}")
    if v.ndim == 0:
        raise EmberRuntimeError(f"{who}: values must have at least one dimension (nnz), got "
                                f"a 0-d tensor")
    nnz = idx.shape[1]
    if v.shape[0] != nnz:
        raise EmberRuntimeError(f"{who}: indices and values must have same nnz, but got nnz "
                                f"from indices: {nnz}, nnz from values: {v.shape[0]}")
    sd = idx.shape[0]
    dense = tuple(v.shape[1:])
    if size is None:
        sp = tuple(int(m) + 1 for m in idx.max(axis=1)) if nnz else (0,) * sd
        size = sp + dense
    else:
        size = tuple(int(s) for s in size)
        if len(size) != sd + len(dense):
            raise EmberRuntimeError(
                f"{who}: 'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = "
                f"{len(size)}, sparse_dim = {sd}, dense_dim = {len(dense)}")
        if any(s < 0 for s in size):
            raise EmberRuntimeError(f"{who}: negative size {size}")
        if size[sd:] != dense:
            raise EmberRuntimeError(f"{who}: the dense dimensions of size {size} must be the "
                                    f"values' trailing shape {list(dense)}")
        for d in range(sd):
            row = idx[d]
            if nnz and (row.min() < 0 or row.max() >= size[d]):
                bad = int(row.min() if row.min() < 0 else row.max())
                raise EmberRuntimeError(f"{who}: index {bad} in dimension {d} is out of bounds "
                                        f"for size {size[d]} (size {list(size)})")
    if v.requires_grad:
        v = SparseCooTensorWithDimsAndTensors.apply(v)
    else:
        v = Tensor._make(v.detach().numpy())
        if requires_grad:
            v.requires_grad_(True)
    if is_coalesced is None:
        coalesced = nnz <= 1
    elif is_coalesced:
        if not _k.is_sorted_unique(idx, size[:sd]):
            raise EmberRuntimeError(f"{who}: is_coalesced=True but the indices are not sorted "
                                    f"and unique")
        coalesced = True
    else:
        coalesced = False
    return SparseTensor._build(idx, v, size, coalesced)


def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """The sparse COO form of dense ``self`` (``Tensor.to_sparse``): the entries (or, with
    ``sparse_dim < ndim``, the slices) that are not all zero, coalesced; differentiable.

    Raises UnsupportedError for another layout (CSR, CSC, BSR, BSC) and EmberRuntimeError for
    a ``sparse_dim`` outside ``[0, ndim]``."""
    if layout is not None and layout is not sparse_coo:
        raise UnsupportedError(f"to_sparse: layout {layout} is not supported; ember has sparse "
                               f"COO (ember.sparse_coo) only")
    if blocksize is not None or dense_dim is not None:
        raise UnsupportedError("to_sparse: blocksize and dense_dim are for compressed layouts, "
                               "which ember does not support")
    nd = self.ndim
    sd = nd if sparse_dim is None else sparse_dim
    if isinstance(sd, bool) or not isinstance(sd, (int, np.integer)) or not 0 <= sd <= nd:
        raise EmberRuntimeError(f"to_sparse: sparse_dim argument must be in [0, {nd}] but got "
                                f"{sparse_dim!r}")
    a = self.detach().numpy()
    sp = a.shape[:sd]
    mask = a.reshape(sp + (-1,)).any(axis=-1) if sd < nd else a != 0
    idx = np.stack(np.nonzero(mask)).astype(np.int64).reshape(sd, -1) if sd else \
        np.zeros((0, int(mask)), np.int64)
    flat = _k.flat_index(idx, sp)
    n = int(np.prod(sp, dtype=np.int64))
    v = self.reshape((n,) + a.shape[sd:]).index_select(0, Tensor._make(flat))
    return SparseTensor._build(idx, v, a.shape, True)


def to_dense(self, dtype=None, *, masked_grad=None):
    """A strided tensor's dense form: itself (``dtype`` casts), as torch."""
    return self if dtype is None else self.to(dtype)


class check_sparse_tensor_invariants:
    """torch.sparse.check_sparse_tensor_invariants: the switch torch reads for its sparse
    constructors' index checks (``enable()``, ``disable()``, ``is_enabled()``; as a context
    manager or decorator, ``enable=True`` on entry, the previous state restored on exit). ember
    checks a COO tensor's indices whatever the switch says (an index outside ``size`` always
    raises); the switch is kept so that programs which set or read it run."""

    _enabled = False

    @staticmethod
    def is_enabled():
        return check_sparse_tensor_invariants._enabled

    @staticmethod
    def enable():
        check_sparse_tensor_invariants._enabled = True

    @staticmethod
    def disable():
        check_sparse_tensor_invariants._enabled = False

    def __init__(self, enable=True):
        self.state = enable
        self.saved = None

    def __enter__(self):
        if self.saved is not None:
            raise EmberRuntimeError("This context manager instance is already activated. Use a "
                                    "different context manager instance for context nesting.")
        self.saved = check_sparse_tensor_invariants._enabled
        check_sparse_tensor_invariants._enabled = self.state
        return self

    def __exit__(self, *exc):
        check_sparse_tensor_invariants._enabled = self.saved
        self.saved = None

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with check_sparse_tensor_invariants(self.state):
                return fn(*args, **kwargs)
        return wrapped
