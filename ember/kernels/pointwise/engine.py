"""Run a typed pointwise expression over strided, broadcast ndarrays: output allocation, overlap
handling, dimension collapsing, and the choice between the compiled kernel and NumPy."""
import math
import os
import threading

import numpy as np

from ember.kernels.runtime import compiler, diskcache, threadpool, threads
from ..lru import LRUCache
from . import codegen
from .collapse import collapse_dims, iteration_order
from .expr import Expr, infer_typed
from .numpy_eval import NumpyPlan
from .promotion import SCALAR, check_dtype, typed_operand

# Below this many elements the NumPy path runs, so that small tensors never wait for a compile;
# once a kernel has a compiled variant, from MIN_WARM_SIZE on (below it the call overhead of
# about 10 us dominates either way).
MIN_COMPILED_SIZE = 1 << 14
MIN_WARM_SIZE = 1 << 11
# The compiled kernel runs on several threads only when its estimated single-thread time is at
# least PARALLEL_MIN_NS: handing work to a pool worker costs about 100 us on this project's VM
# (the worker's wake-up), so below that one thread is faster. The estimate per element: ARRAY_NS
# per array operand plus, per step, CHEAP_NS (add, mul, compare, ...), MID_NS (div, sqrt) or
# TRANSCENDENTAL_NS (tanh, exp, ...). Measured at 1e6 float32 elements, one thread vs two:
# bias+ReLU 0.14 vs 0.17 ms (estimate 0.13 ms), Adam 0.44 vs 0.34 ms (0.57), tanh-GELU 1.15
# vs 0.58 ms (1.02); at 2^18: Adam 0.15 vs 0.19 ms, GELU 0.26 vs 0.22 ms.
PARALLEL_MIN_NS = 250_000
# The same threshold on Numba's TBB layer (``threads.parallel_layer``), whose workers take
# work within microseconds: bias+ReLU at 1e6 elements 0.09 ms on one thread, 0.05 on two.
TBB_MIN_NS = 40_000
ARRAY_NS, CHEAP_NS, MID_NS, TRANSCENDENTAL_NS = 0.03, 0.02, 0.06, 0.8
_COST_NS = {"cheap": CHEAP_NS, "mid": MID_NS, "transcendental": TRANSCENDENTAL_NS}  # by Op.cost
_F16 = np.dtype(np.float16)
# Smallest chunk of the innermost dimension one parallel task takes.
MIN_CHUNK = 4096
# Runs of tasks per thread, claimed dynamically (``threadpool.run_chunks``): a thread whose core
# is still busy (another process, BLAS workers after a GEMM) takes fewer runs instead of holding
# up the whole call.
RUNS_PER_THREAD = 4


def _contiguous_inplace(arrays, outs):
    """Overlap handling when every operand is C-contiguous with the broadcast shape (an optimizer's
    in-place update): an input that is an output, or sits at an output's address with its dtype,
    is read through that output (alias); any other overlap is copied first. Returns ``(arrays,
    aliases)``; identity and byte bounds (``np.may_share_memory``, exact for contiguous arrays)
    come before any address lookup."""
    result, aliases = [], []
    for x in arrays:
        alias, clash = -1, False
        for m, o in enumerate(outs):
            if x is o:
                alias = m if alias < 0 else alias
            elif np.may_share_memory(x, o):
                if (x.dtype == o.dtype and x.__array_interface__["data"][0]
                        == o.__array_interface__["data"][0]):
                    alias = m if alias < 0 else alias
                else:
                    clash = True
        if clash:
            x, alias = x.copy(), -1
        result.append(x)
        aliases.append(alias)
    return result, tuple(aliases)


_CASTS = {}


def _can_cast(frm, to):
    """``np.can_cast(frm, to, "same_kind")`` for a supported ``to`` (memoised; TypeError for an
    unsupported output dtype, from ``check_dtype``)."""
    key = (frm, to)
    ok = _CASTS.get(key)
    if ok is None:
        check_dtype(to)
        ok = _CASTS[key] = bool(np.can_cast(frm, to, "same_kind"))
    return ok


_lock = threading.RLock()
# The most PointwiseKernels kept (least recently used dropped first, with their compiled modules):
# a program that keeps making new expressions holds a bounded number of compiled kernels. A
# dropped kernel still works where it is held; asked for again, it is rebuilt (from the disk cache).
MAX_CACHED_KERNELS = 512


def _release(key, kernel):
    for module in kernel._modules:
        diskcache.release(module)


_kernels = LRUCache(MAX_CACHED_KERNELS, on_evict=_release)


def compile_pointwise(expr, in_types):
    """The ``PointwiseKernel`` of ``expr`` for inputs typed by ``in_types`` (cached in memory).

    ``expr`` is an ``Expr`` or the name of one op. Each entry of ``in_types`` is an example
    operand or a type: an ndarray or dtype-like (an input array of that dtype; a 0-d ndarray or
    NumPy scalar ranks below arrays with dimensions in promotion, as in torch), or a Python scalar
    or one of ``bool``, ``int``, ``float`` (a Python scalar input given at call time). Compiling
    itself happens on the first call that needs a given layout. Raises ValueError and
    TypeError as ``infer_types``.
    """
    if isinstance(expr, str):
        expr = Expr.single(expr, len(in_types))
    typed = tuple(typed_operand(t if isinstance(t, (np.ndarray, np.generic, bool, int, float, type, str, np.dtype))
                                else np.asarray(t)) for t in in_types)
    key = (expr.key(), tuple((dt.str, prio) for dt, prio in typed))
    return _kernels.get_or_create(key, lambda: PointwiseKernel(expr, typed))


_forms = {}


def compile_form(form, names, in_types):
    """The ``PointwiseKernel`` of ``form`` (a Python function of symbolic values, ``names`` its
    inputs, returning one value or a tuple) for inputs typed by ``in_types`` (as in
    ``compile_pointwise``): the expression is built once per form and operand dtypes, so a
    caller on a hot path (an optimizer step, a backward) pays one dict lookup per call."""
    key = (form, tuple([(t.dtype, t.ndim == 0) if t.__class__ is np.ndarray else t
                        for t in in_types]))
    k = _forms.get(key)
    if k is None:
        from .expr import Builder
        b = Builder(names)
        outs = form(*b.inputs)
        k = _forms[key] = compile_pointwise(b.expr(*(outs if isinstance(outs, tuple)
                                                     else (outs,))), in_types)
    return k


def apply(expr, *operands, out=None, backend=None):
    """Evaluate ``expr`` (an ``Expr`` or one op's name) on ``operands``: ``compile_pointwise``
    then ``PointwiseKernel.__call__``. Returns the tuple of outputs."""
    return compile_pointwise(expr, operands)(*operands, out=out, backend=backend)


def _element_strides(a, shape):
    """Strides of ``a`` broadcast to ``shape``, in elements (0 on broadcast and size-1 dims)."""
    lead = len(shape) - a.ndim
    item = a.itemsize
    return tuple(0 if d < lead or a.shape[d - lead] == 1 else a.strides[d - lead] // item
                 for d in range(len(shape)))


def _needs_copy(a):
    flags = a.flags
    if flags.c_contiguous:   # its strides are multiples of the item size
        return not flags.aligned
    return not flags.aligned or any(s % a.itemsize for s in a.strides)


_broadcasts = {}


def _broadcast_shape(shapes):
    """``np.broadcast_shapes(*shapes)`` (ValueError when they do not broadcast), kept per
    tuple of shapes: NumPy's makes an empty array per shape (~4 us a call)."""
    shape = _broadcasts.get(shapes)
    if shape is None:
        shape = np.broadcast_shapes(*shapes)
        if len(_broadcasts) >= 1024:
            _broadcasts.clear()
        _broadcasts[shapes] = shape
    return shape


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


def _classes(cstrides):
    """The inner-stride class of each operand (rows of ``cstrides``): 'c' 1, 'b' 0, 's' other."""
    return tuple("c" if st == 1 else ("b" if st == 0 else "s") for st in cstrides[:, -1].tolist())


_flat_layouts = {}


def _flat_layout(n_operands, size):
    """``(cshape, shape array, offsets, strides, classes)`` of ``n_operands`` contiguous operands
    of ``size`` elements walked as one flat loop: made once per pair (read-only arrays, shared
    between calls), so the commonest call allocates no index arrays."""
    key = (n_operands, size)
    layout = _flat_layouts.get(key)
    if layout is None:
        if len(_flat_layouts) >= 256:
            _flat_layouts.clear()
        arrays = (np.array([size], np.int64), np.zeros(n_operands, np.int64),
                  np.ones((n_operands, 1), np.int64))
        for a in arrays:
            a.flags.writeable = False
        layout = _flat_layouts[key] = ((size,),) + arrays + (("c",) * n_operands,)
    return layout


_strided_layouts = {}


def _strided_layout(shape, operands, n_inputs):
    """``(cshape, shape array, offsets, strides, classes)`` of ``operands`` (inputs, then
    outputs) walked over ``shape``: dimensions in memory order (``iteration_order``), merged
    where every operand allows (``collapse_dims``), offsets as ``_flat`` gives them. It depends
    only on the shapes, strides and item sizes, so it is made once per such key (read-only
    arrays, shared between calls): a plan's or a loop's repeated call of one broadcast op
    skips ~50 us of Python (a batch norm + ReLU over (1, 64, 56, 56))."""
    key = (shape, n_inputs, tuple((a.shape, a.strides, a.itemsize) for a in operands))
    layout = _strided_layouts.get(key)
    if layout is None:
        strides = [_element_strides(a, shape) for a in operands]
        order = iteration_order(shape, *(strides[n_inputs:] + strides[:n_inputs]))
        collapsed = collapse_dims(tuple(shape[d] for d in order),
                                  *(tuple(st[d] for d in order) for st in strides))
        cshape = collapsed.shape or (1,)
        cstrides = np.array(collapsed.strides if collapsed.shape else [(0,)] * len(operands),
                            np.int64)
        arrays = (np.array(cshape, np.int64),
                  np.array([_flat(a)[1] for a in operands], np.int64), cstrides)
        for a in arrays:
            a.flags.writeable = False
        if len(_strided_layouts) >= 1024:
            _strided_layouts.clear()
        layout = _strided_layouts[key] = (cshape,) + arrays + (_classes(cstrides),)
    return layout


def _thread_count():
    return threads._working  # working_threads() without its call per launch


class PointwiseKernel:
    """An expression specialised to input dtypes; call it on arrays (see ``__call__``).

    Attributes: ``expr``, ``typing`` (per-step dtypes), ``out_dtypes``, ``ns_per_element`` (the
    estimated single-thread cost that decides whether a call is split over threads).
    """

    def __init__(self, expr, typed_inputs):
        self.expr = expr
        self.typing = infer_typed(expr, typed_inputs)
        self.out_dtypes = tuple(dt for _, dt in self.typing.outputs)
        self._inputs = tuple((dtype, prio == SCALAR, codegen.scalar_register(dtype).type)
                             for _, dtype, prio in self.typing.inputs)
        # a Python float given for a float64 register passes unconverted (the conversion is exact)
        self._float_ok = tuple(s and reg is np.float64 for _, s, reg in self._inputs)
        self._any_scalar = any(s for _, s, _ in self._inputs)
        # a float16 operand: its buffer is passed as uint16 (outputs given by ``out=`` checked
        # per call)
        self._f16 = any(d == _F16 for d, _, _ in self._inputs) or _F16 in self.out_dtypes
        arrays = sum(1 for _, s, _ in self._inputs if not s) + len(self.out_dtypes)
        self.ns_per_element = ARRAY_NS * arrays + sum(
            _COST_NS[st.op.cost] for st in self.typing.steps)
        self._plan = None
        self._variants = {}
        self._modules = []  # the compiled variants' modules (released when this is evicted)

    def __repr__(self):
        ins = ", ".join(f"{n}: {'scalar ' if p == SCALAR else ''}{d}" for n, d, p in self.typing.inputs)
        return f"PointwiseKernel({ins}) -> ({', '.join(d.name for d in self.out_dtypes)})\n{self.expr}"

    def __call__(self, *operands, out=None, backend=None, fallback=True):
        """Evaluate on ``operands``, broadcasting them together; return a tuple of outputs.
        ``fallback=False``: None instead of the NumPy path (below the size threshold, or the
        compiled variant still building), for callers with a NumPy path of their own.

        Arrays must have the dtypes the kernel was compiled for; scalar inputs take Python or
        NumPy scalars. ``out`` is None (outputs are allocated in the inputs' memory order), an
        array, or a sequence of arrays of the broadcast shape whose dtypes the results can be cast
        to ('same_kind'); an output may be an input or overlap one. ``backend`` is None (compiled
        from ``MIN_COMPILED_SIZE`` elements, or ``MIN_WARM_SIZE`` once compiled, when Numba is
        importable, else NumPy), ``"numba"`` or ``"numpy"``. Raises TypeError for a wrong operand
        count or dtype, ValueError for shapes that do not broadcast and for read-only, misshapen or
        self-overlapping outputs, and RuntimeError for ``backend="numba"`` without Numba.
        """
        if len(operands) != len(self._inputs):
            raise TypeError(f"pointwise: kernel takes {len(self._inputs)} operands, got {len(operands)}")
        inputs = []
        arrays = []
        for x, (dtype, scalar, reg), float_ok in zip(operands, self._inputs, self._float_ok):
            if scalar:
                if float_ok and type(x) is float:
                    inputs.append(x)
                    continue
                if not isinstance(x, (bool, int, float, np.generic)) or isinstance(x, np.ndarray):
                    raise TypeError(f"pointwise: a scalar input takes a Python scalar, got {type(x).__name__}")
                x = reg(x).item()
            else:
                if type(x) is not np.ndarray:
                    x = np.asarray(x)
                if x.dtype != dtype:
                    raise TypeError(f"pointwise: expected an input of dtype {dtype}, got {x.dtype}")
                arrays.append(x)
            inputs.append(x)
        shape = arrays[0].shape if arrays else ()
        if any(a.shape != shape for a in arrays):
            try:
                shape = _broadcast_shape(tuple(a.shape for a in arrays))
            except ValueError:
                raise ValueError("pointwise: operand shapes " + ", ".join(str(a.shape) for a in arrays)
                                 + " do not broadcast") from None
        outs = None if out is None else self._check_outs(out, shape)
        size = math.prod(shape)
        tiered = backend is None
        if backend is None:
            threshold = MIN_WARM_SIZE if self._variants else MIN_COMPILED_SIZE
            backend = "numba" if size >= threshold and not compiler.importing("numba") \
                and compiler.has_compiler() else "numpy"
        elif backend == "numba":
            if not compiler.has_compiler():
                raise RuntimeError("pointwise: backend='numba' asked for but numba cannot be imported")
        elif backend != "numpy":
            raise ValueError(f"pointwise: backend must be None, 'numba' or 'numpy', got {backend!r}")
        if backend == "numpy" and not fallback:
            return None
        if outs is None:
            if all(a.flags.c_contiguous for a in arrays):
                outs = tuple(np.empty(shape, dt) for dt in self.out_dtypes)
            else:
                order = iteration_order(shape, *(_element_strides(a, shape) for a in arrays))
                inverse = tuple(np.argsort(order))
                outs = tuple(np.empty(tuple(shape[d] for d in order), dt).transpose(inverse)
                             for dt in self.out_dtypes)
            fresh = True
        else:
            fresh = False
        if size == 0:
            return outs
        if backend == "numba" and self._run_compiled(inputs, arrays, outs, shape, fresh, tiered):
            return outs
        if not fallback:
            return None
        # the NumPy path: asked for, below the size threshold, or the kernel is still compiling
        if not fresh:
            inputs = [x if s or not any(np.may_share_memory(x, o) for o in outs) else x.copy()
                      for x, (_, s, _) in zip(inputs, self._inputs)]
        if self._plan is None:
            self._plan = NumpyPlan(self.typing)
        return self._plan.run(inputs, outs, shape)

    def _check_outs(self, out, shape):
        outs = (out,) if isinstance(out, np.ndarray) else tuple(out)
        if len(outs) != len(self.out_dtypes):
            raise ValueError(f"pointwise: expression has {len(self.out_dtypes)} outputs, out= gives {len(outs)}")
        for o, dt in zip(outs, self.out_dtypes):
            if not isinstance(o, np.ndarray) or o.shape != tuple(shape):
                raise ValueError(f"pointwise: out must be arrays of shape {tuple(shape)}, got "
                                 f"{getattr(o, 'shape', type(o).__name__)}")
            if not o.flags.writeable:
                raise ValueError("pointwise: out array is read-only")
            if not _can_cast(dt, o.dtype):
                raise TypeError(f"pointwise: result dtype {dt} can't be cast to the out dtype {o.dtype}")
            if any(n > 1 and s == 0 for n, s in zip(o.shape, o.strides)):
                raise ValueError("pointwise: out has elements that share memory (a broadcast view)")
        for i, a in enumerate(outs):
            for b in outs[i + 1:]:
                if _overlaps(a, b):
                    raise ValueError("pointwise: two outputs share memory")
        return outs

    def _run_compiled(self, inputs, arrays, outs, shape, fresh, tiered=False):
        """Run the compiled variant for these operands; return False without touching ``outs``
        when ``tiered`` and the variant is not built yet under ``compiler.compile_mode()``
        "background" (its compile is queued) or "off"."""
        writes = []
        aliases = (-1,) * len(arrays)
        if fresh:
            arrays = [x.copy() if _needs_copy(x) else x for x in arrays]
            targets = outs
        elif all(a.flags.c_contiguous and a.flags.aligned and a.shape == shape for a in (*arrays, *outs)):
            arrays, aliases = _contiguous_inplace(arrays, outs)
            targets = outs
        else:
            arrays = [x.copy() if _needs_copy(x) or any(_overlaps(x, o) and not _same_walk(x, o, shape)
                                                        for o in outs) else x
                      for x in arrays]
            targets = []
            for o in outs:
                if _needs_copy(o):
                    tmp = np.empty(o.shape, o.dtype)
                    writes.append((o, tmp))
                    o = tmp
                targets.append(o)
            aliases = tuple(next((m for m, o in enumerate(targets)
                                  if x.dtype == o.dtype and _same_walk(x, o, shape)), -1) for x in arrays)
        operands = arrays + list(targets)
        if all(a.flags.c_contiguous and a.shape == shape for a in operands):
            size = math.prod(shape)
            layout = _flat_layout(len(operands), size)
            buffers = [a.reshape(-1) for a in operands]
        else:
            buffers = [_flat(a)[0] for a in operands]
            layout = _strided_layout(shape, operands, len(arrays))
            size = math.prod(layout[0])
        cshape, shape_arr, offs, cstrides, classes = layout
        if self._f16 or not fresh:
            buffers = [b.view(np.uint16) if b.dtype == _F16 else b for b in buffers]
        if self._any_scalar:
            buffers += [x for x, (_, s, _) in zip(inputs, self._inputs) if s]
        inner = cshape[-1]
        rows = size // inner
        tbb = threads.parallel_layer() == "tbb"
        cost = size * self.ns_per_element
        n_threads = 1 if cost < (TBB_MIN_NS if tbb else PARALLEL_MIN_NS) else _thread_count()
        runs = n_threads * RUNS_PER_THREAD if n_threads > 1 else 1
        nchunks = 1
        if runs > 1 and rows < runs:
            nchunks = max(1, min(-(-runs // rows), inner // MIN_CHUNK))
        ntasks = rows * nchunks
        parallel = runs > 1 and ntasks > 1
        fn = self._variant((tuple(o.dtype for o in targets), classes, aliases, parallel and tbb),
                           compiler.compile_mode() if tiered else "sync")
        if fn is None:
            return False
        common = (shape_arr, offs, cstrides, -(-inner // nchunks), nchunks)
        if not parallel:
            fn(0, ntasks, *common, *buffers)
        elif tbb:
            threads.sync_threads(n_threads)
            fn(*common, ntasks, min(runs, ntasks), *buffers)
        else:
            threadpool.run_chunks(lambda t0, t1: fn(t0, t1, *common, *buffers), ntasks,
                                  min(runs, ntasks), n_threads)
        for o, tmp in writes:
            o[...] = tmp
        return True

    def run_many(self, columns, scalars, aliases):
        """Evaluate on several operand sets in one compiled call on this thread (an optimizer's
        update of every parameter at once), set ``m`` as a call of its own would compute it,
        the sets in order. ``columns``: per array operand (the array inputs, then the outputs)
        a tuple holding that operand of every set as a 1-d C-contiguous array of the kernel's
        dtype (float16 viewed as uint16), a set's arrays of one length; ``scalars``: per scalar
        input a tuple of Python numbers, one per set; ``aliases[k]``: the output that array
        input ``k`` is in every set (its array object in both columns), or -1. True when it
        ran; False, writing nothing, where a set's lengths differ or the kernel is not compiled
        yet (queued under "background"; never compiled under "off"). Raises ValueError for
        aliases the columns do not show, TypeError (Numba's) for arrays of another type."""
        n_in = len(columns) - len(self.out_dtypes)
        for k, j in enumerate(aliases):
            if j >= 0 and any(x is not o for x, o in zip(columns[k], columns[n_in + j])):
                raise ValueError(f"pointwise: input {k} is not output {j} in every set")
        if not compiler.has_compiler():
            return False
        fn = self._variant(("many", self.out_dtypes, tuple(aliases), len(columns[0])),
                           compiler.compile_mode())
        return fn is not None and fn(*columns, *scalars)

    def _variant(self, key, mode):
        """The compiled variant ``key``: built now under ``mode`` "sync"; under "background"
        None, its compile queued unless built; under "off" None unless built."""
        fn = self._variants.get(key)
        if fn is None and mode != "off":
            if mode == "background":
                compiler.submit((id(self), key), "pointwise kernel",
                                lambda: self._compile(key, prebuild=True))
                return None
            fn = self._compile(key)
        return fn

    def _source(self, key):
        if key[0] == "many":
            return codegen.many_kernel_source(self.typing, *key[1:])
        return codegen.kernel_source(self.typing, *key)

    def _compile(self, key, prebuild=False):
        """The variant ``key``, built on first use; ``prebuild``: first by the compile process
        into the disk cache (``compiler.prebuild``), off this process's GIL."""
        if prebuild and key not in self._variants:
            compiler.prebuild({"source": self._source(key)})
        with _lock:
            fn = self._variants.get(key)
            if fn is None:
                source = self._source(key)
                module = diskcache.load_source(source, compiler.numba_module().__version__)
                self._modules.append(module)
                fn = self._variants[key] = module.kernel
        return fn
