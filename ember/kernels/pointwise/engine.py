"""Run a typed pointwise expression over strided, broadcast ndarrays: output allocation, overlap
handling, dimension collapsing, and the choice between the compiled kernel and NumPy."""
import threading

import numpy as np

from . import codegen, diskcache, numba_runtime, numpy_eval
from .collapse import collapse_dims, iteration_order
from .expr import Expr, infer_typed
from .promotion import SCALAR, check_dtype, typed_operand

# Below this many elements the NumPy path runs: compile and launch overhead would dominate.
MIN_COMPILED_SIZE = 1 << 14
# Below this many elements the compiled kernel runs on one thread.
MIN_PARALLEL_SIZE = 1 << 16
# Smallest chunk of the innermost dimension one parallel task takes.
MIN_CHUNK = 4096

_lock = threading.RLock()
_kernels = {}


def _operand_typed(x):
    if isinstance(x, (bool, int, float)) or (isinstance(x, type) and x in (bool, int, float)):
        return typed_operand(x)
    if isinstance(x, np.ndarray) or isinstance(x, np.generic):
        return typed_operand(x)
    return typed_operand(np.asarray(x))


def compile_pointwise(expr, in_types):
    """The ``PointwiseKernel`` of ``expr`` for inputs typed by ``in_types`` (cached in memory).

    Each entry of ``in_types`` is an example operand or a type: an ndarray or dtype-like (an input
    array of that dtype; a 0-d ndarray or NumPy scalar ranks below arrays with dimensions in
    promotion, as in torch), or a Python scalar or one of ``bool``, ``int``, ``float`` (a Python
    scalar input passed at call time). Raises ValueError/TypeError as ``infer_types``.
    """
    if isinstance(expr, str):
        expr = Expr.single(expr, len(in_types))
    typed = tuple(_operand_typed(t) for t in in_types)
    key = (expr.key(), tuple((dt.str, prio) for dt, prio in typed))
    with _lock:
        kernel = _kernels.get(key)
        if kernel is None:
            kernel = _kernels[key] = PointwiseKernel(expr, typed)
    return kernel


def apply(expr, *operands, out=None, backend=None):
    """Evaluate ``expr`` (an ``Expr`` or a single op's name) on ``operands``; see
    ``PointwiseKernel.__call__``. Returns the tuple of outputs."""
    return compile_pointwise(expr, operands)(*operands, out=out, backend=backend)


def _element_strides(a, shape):
    """Strides of ``a`` broadcast to ``shape``, in elements (0 on broadcast and size-1 dims)."""
    lead = len(shape) - a.ndim
    item = a.itemsize
    return tuple(0 if d < lead or a.shape[d - lead] == 1 else a.strides[d - lead] // item
                 for d in range(len(shape)))


def _needs_copy(a):
    return not a.flags.aligned or any(s % a.itemsize for s in a.strides)


def _flat(a):
    """``(buffer, offset)``: a 1-d view over the memory ``a`` spans, and the element index of
    ``a[0, ..., 0]`` in it."""
    if a.flags.c_contiguous:
        return a.reshape(-1), 0
    if a.flags.f_contiguous:
        return a.T.reshape(-1), 0
    item = a.itemsize
    neg = [d for d in range(a.ndim) if a.strides[d] < 0]
    low = a[tuple(slice(None, None, -1) if d in neg else slice(None) for d in range(a.ndim))] if neg else a
    span = 1 + sum((n - 1) * abs(s) // item for n, s in zip(a.shape, a.strides))
    offset = sum((a.shape[d] - 1) * -a.strides[d] // item for d in neg)
    return np.lib.stride_tricks.as_strided(low, shape=(span,), strides=(item,)), offset


def _overlaps(a, b):
    if not np.may_share_memory(a, b):
        return False
    try:
        return np.shares_memory(a, b, max_work=1000)
    except np.exceptions.TooHardError:
        return True


def _same_walk(a, o, shape):
    """True when ``a`` and ``o`` put every index of ``shape`` at the same address."""
    return (a.itemsize == o.itemsize
            and a.__array_interface__["data"][0] == o.__array_interface__["data"][0]
            and _element_strides(a, shape) == _element_strides(o, shape))


def _has_internal_overlap(o):
    return any(n > 1 and s == 0 for n, s in zip(o.shape, o.strides))


class PointwiseKernel:
    """An expression specialised to input dtypes; call it on arrays (see ``__call__``).

    Attributes: ``expr``, ``typing`` (per-step dtypes), ``out_dtypes``.
    """

    def __init__(self, expr, typed_inputs):
        self.expr = expr
        self.typing = infer_typed(expr, typed_inputs)
        self.out_dtypes = tuple(dt for _, dt in self.typing.outputs)
        self._scalar = tuple(prio == SCALAR for _, _, prio in self.typing.inputs)
        self._variants = {}

    def __repr__(self):
        ins = ", ".join(f"{n}: {'scalar ' if p == SCALAR else ''}{d}" for n, d, p in self.typing.inputs)
        return f"PointwiseKernel({ins}) -> {tuple(d.name for d in self.out_dtypes)}\n{self.expr}"

    def __call__(self, *operands, out=None, backend=None):
        """Evaluate on ``operands``, broadcasting them together; return a tuple of outputs.

        Arrays must have the dtypes the kernel was compiled for; scalar inputs take Python scalars.
        ``out`` is None (outputs are allocated in the inputs' memory order), an array, or a tuple
        of arrays of the broadcast shape whose dtypes the results can be cast to ('same_kind');
        they may be inputs or overlap inputs. ``backend`` is None (the compiled kernel from
        ``MIN_COMPILED_SIZE`` elements when Numba is present, else NumPy), ``"numba"`` or
        ``"numpy"``. Raises TypeError for wrong dtypes, ValueError for shapes that do not
        broadcast, bad or self-overlapping outputs, and RuntimeError for ``"numba"`` without Numba.
        """
        inputs = self._check_inputs(operands)
        arrays = [a for a, s in zip(inputs, self._scalar) if not s]
        try:
            shape = np.broadcast_shapes(*(a.shape for a in arrays))
        except ValueError:
            raise ValueError("pointwise: operand shapes " + ", ".join(str(a.shape) for a in arrays)
                             + " do not broadcast") from None
        outs = self._check_outs(out, shape)
        size = int(np.prod(shape))
        if backend is None:
            backend = "numba" if size >= MIN_COMPILED_SIZE and numba_runtime.has_compiler() else "numpy"
        elif backend == "numba" and not numba_runtime.has_compiler():
            raise RuntimeError("pointwise: backend='numba' asked for but numba cannot be imported")
        elif backend not in ("numba", "numpy"):
            raise ValueError(f"pointwise: backend must be None, 'numba' or 'numpy', got {backend!r}")
        if outs is None:
            order = iteration_order(shape, *(_element_strides(a, shape) for a in arrays))
            outs = tuple(np.empty(tuple(shape[d] for d in order), dt).transpose(np.argsort(order))
                         for dt in self.out_dtypes)
        if size == 0:
            return outs
        if backend == "numpy":
            inputs = [x if s or not any(np.may_share_memory(x, o) for o in outs) else x.copy()
                      for x, s in zip(inputs, self._scalar)]
            return numpy_eval.evaluate(self.typing, inputs, outs)
        self._run_compiled(inputs, outs, shape)
        return outs

    def _check_inputs(self, operands):
        if len(operands) != len(self._scalar):
            raise TypeError(f"pointwise: kernel takes {len(self._scalar)} operands, got {len(operands)}")
        inputs = []
        for x, (name, dtype, prio) in zip(operands, self.typing.inputs):
            if prio == SCALAR:
                if not isinstance(x, (bool, int, float, np.generic)) or np.ndim(x):
                    raise TypeError(f"pointwise: input {name} is a scalar input, got {type(x).__name__}")
                x = codegen.scalar_register(dtype).type(x).item()
            else:
                x = np.asarray(x)
                if x.dtype != dtype:
                    raise TypeError(f"pointwise: input {name} must be {dtype}, got {x.dtype}")
            inputs.append(x)
        return inputs

    def _check_outs(self, out, shape):
        if out is None:
            return None
        outs = (out,) if isinstance(out, np.ndarray) else tuple(out)
        if len(outs) != len(self.out_dtypes):
            raise ValueError(f"pointwise: expression has {len(self.out_dtypes)} outputs, out= gives {len(outs)}")
        for o, dt in zip(outs, self.out_dtypes):
            if not isinstance(o, np.ndarray) or o.shape != tuple(shape):
                raise ValueError(f"pointwise: out must be arrays of shape {tuple(shape)}, got "
                                 f"{getattr(o, 'shape', type(o).__name__)}")
            if not o.flags.writeable:
                raise ValueError("pointwise: out array is read-only")
            if not np.can_cast(dt, o.dtype, "same_kind"):
                raise TypeError(f"pointwise: result dtype {dt} can't be cast to the out dtype {o.dtype}")
            check_dtype(o.dtype)
            if _has_internal_overlap(o):
                raise ValueError("pointwise: out has elements that share memory (a broadcast view)")
        for i, a in enumerate(outs):
            for b in outs[i + 1:]:
                if _overlaps(a, b):
                    raise ValueError("pointwise: two outputs share memory")
        return outs

    def _run_compiled(self, inputs, outs, shape):
        arrays = []
        for x, s in zip(inputs, self._scalar):
            if s:
                continue
            if _needs_copy(x) or any(_overlaps(x, o) and not _same_walk(x, o, shape) for o in outs):
                x = x.copy()
            arrays.append(x)
        writes = []
        targets = []
        for o in outs:
            if _needs_copy(o):
                tmp = np.empty(o.shape, o.dtype)
                writes.append((o, tmp))
                o = tmp
            targets.append(o)
        operands = arrays + targets
        strides = [_element_strides(a, shape) for a in operands]
        order = iteration_order(shape, *(strides[len(arrays):] + strides[:len(arrays)]))
        shape_p = tuple(shape[d] for d in order)
        collapsed = collapse_dims(shape_p, *(tuple(st[d] for d in order) for st in strides))
        cshape, cstrides = collapsed.shape, collapsed.strides
        if not cshape:
            cshape, cstrides = (1,), tuple((0,) for _ in operands)
        classes = tuple("c" if st[-1] == 1 else ("b" if st[-1] == 0 else "s") for st in cstrides)
        fn = self._variant(tuple(o.dtype for o in targets), len(cshape), classes)
        args = []
        for a, st in zip(operands, cstrides):
            buf, off = _flat(a)
            if a.dtype == np.float16:
                buf = buf.view(np.uint16)
            args += [buf, off, st]
        args += [x for x, s in zip(inputs, self._scalar) if s]
        threads = numba_runtime.sync_threads()
        size = int(np.prod(cshape))
        inner = cshape[-1]
        rows = size // inner
        serial = threads == 1 or size < MIN_PARALLEL_SIZE
        nchunks = 1
        if not serial and rows < 4 * threads:
            nchunks = max(1, min(-(-4 * threads // rows), inner // MIN_CHUNK))
        chunk = -(-inner // nchunks)
        fn(cshape, chunk, nchunks, rows * nchunks, serial, *args)
        for o, tmp in writes:
            o[...] = tmp

    def _variant(self, out_dtypes, rank, classes):
        key = (out_dtypes, rank, classes)
        fn = self._variants.get(key)
        if fn is None:
            with _lock:
                fn = self._variants.get(key)
                if fn is None:
                    numba = numba_runtime.numba_module()
                    source = codegen.kernel_source(self.typing, out_dtypes, rank, classes)
                    fn = diskcache.load_source(source, numba.__version__).kernel
                    self._variants[key] = fn
        return fn

