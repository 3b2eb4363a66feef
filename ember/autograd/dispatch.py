"""The one dispatch path every op takes.

``dispatch(op, tensors, consts)`` runs ``op.kernel`` on the arrays of ``tensors`` followed by the
constants, wraps the results in Tensors, links a backward node when grad mode is on and an input
requires grad, and reports the call to the active tracer.

Tracer protocol (installed in ``ember.autograd.state.STATE.tracer`` by the JIT):
  ``record(op, tensors, consts, outputs)`` after every op (outputs is a tuple of Tensors);
  ``record_inplace(target, result)`` after an in-place op wrote ``result`` into ``target``;
  ``size(tensor, dim)`` when Python reads a shape (returns the int, possibly a traced one);
  ``python_value(tensor, what)`` when a tensor is converted to a Python value.

While a profiler records (``ember.autograd.profiler``), ``_profile`` is its op hook: dispatch
and dispatch_inplace hand it the op, which it times and runs by calling them back with
``_profiled=True``; otherwise that one global check is all they pay for profiling.
"""
import numpy as np

from ember._dtype import BFLOAT16 as _BFLOAT16
from ember.autograd import bfloat16 as _bf16
from ember.autograd import autocast as _autocast
from ember.autograd import complex_support as _complex
from ember.autograd import views as _views
from ember.autograd.node import grad_accumulator
from ember.autograd.state import STATE
from ember.errors import (DimensionError, EmberError, EmberOverflowError, EmberRuntimeError,
                          EmberTypeError, EmberValueError, ember_class, named)
from ember.kernels import elementwise as _elementwise
from ember.kernels.dtypes import can_cast
from ember.kernels.errors import KernelDimensionError, KernelError, KernelValueError
from ember.kernels.runtime.fpstate import IGNORE as _FP_IGNORE, enter as _fp_enter, leave as _fp_leave

Tensor = None  # bound by ember.tensor at import (avoids an import cycle)
_make = None  # Tensor._make, bound with it
ndarray = np.ndarray
_new = object.__new__
_SCALARS = frozenset((float, int, bool, complex))
_C64, _C128 = np.dtype(np.complex64), np.dtype(np.complex128)
_I64_MIN, _I64_MAX = -2 ** 63, 2 ** 63 - 1
# set once a base that did not require grad got history through an in-place op on a view: its
# other views may then require grad through it, which dispatch checks from then on
_views_gained_grad = False
# the recording profiler's hook(op, tensors, consts, inplace) (ember.autograd.profiler) or None
_profile = None
# what a kernel raises for arguments it cannot take is reported as an ember error (NumPy's and
# Numba's included); these, ember's own bugs, pass through unchanged
_BUGS = (NameError, AssertionError, RecursionError, SyntaxError, ImportError, SystemError,
         Warning)  # a warning raised as an error (-W error) stays what it is


class Op:
    """Static description of one spec op, built by the generated records
    (``ember.autograd._generated.records``). ``optional``: the tensor inputs that may be None
    (``Tensor?`` in the spec); ``refuses_grad``: the indices of tensor inputs that must not
    require grad when autograd records (``refuses_grad`` in the spec, torch's
    ``check_no_requires_grad``)."""

    __slots__ = ("name", "kernel", "backward", "tensor_names", "const_names", "view", "multi",
                 "list_input", "diff_outputs", "scalar_ok", "saves_self", "random",
                 "optional", "refuses_grad", "complex_ok", "scan_complex")

    def __init__(self, name, kernel, backward, tensor_names, const_names, *, view=False,
                 multi=False, list_input=False, diff_outputs=(True,), scalar_ok=False,
                 saves_self=True, random=False, optional=(),
                 refuses_grad=()):
        self.name = name
        self.kernel = kernel
        self.backward = backward
        self.tensor_names = tensor_names
        self.const_names = const_names
        self.view = view
        self.multi = multi
        self.list_input = list_input
        self.diff_outputs = diff_outputs
        self.scalar_ok = scalar_ok
        self.saves_self = saves_self
        self.random = random
        self.optional = optional
        self.refuses_grad = refuses_grad
        # may return complex results (complex_support.FORWARD): the others' results are checked
        self.complex_ok = name in _complex.FORWARD
        # whether a complex input can give a real result, so _link must look at the inputs
        self.scan_complex = not self.complex_ok or name in _complex.REAL_RESULTS

    def __repr__(self):
        return f"<op {self.name}>"


def _describe(op, tensors):
    parts = []
    names = op.tensor_names
    for i, t in enumerate(tensors):
        name = names[i] if i < len(names) and not op.list_input else f"tensors[{i}]"
        if isinstance(t, Tensor):
            parts.append(f"{name}: {t._data.dtype}{list(t._data.shape)}")
        elif t is not None:
            parts.append(f"{name}: {type(t).__name__} {t!r}")
    return ", ".join(parts)


def _mismatch(shapes):
    """torch's words for the first dimension (from the right) where two shapes do not
    broadcast, and ': '; nothing for other than two shapes."""
    if len(shapes) != 2:
        return ""
    a, b = shapes
    n = max(len(a), len(b))
    for i in range(1, min(len(a), len(b)) + 1):
        if a[-i] != b[-i] and a[-i] != 1 and b[-i] != 1:
            return (f"The size of tensor a ({a[-i]}) must match the size of tensor b ({b[-i]}) "
                    f"at non-singleton dimension {n - i}: ")
    return ""


def kernel_error(op, tensors, err):
    """Turn a kernel's, NumPy's or Numba's exception into ember's own, naming the op (once), the
    input shapes and dtypes; an ember error a kernel raised keeps its class and gets the name."""
    if isinstance(err, _BUGS):
        return err
    msg = str(err) if not isinstance(err, KeyError) else f"invalid value {err}"
    if isinstance(err, EmberError):
        err.args = (named(op.name, msg),)
        return err
    if isinstance(err, KernelError):
        cls = DimensionError if isinstance(err, KernelDimensionError) else \
            EmberValueError if isinstance(err, KernelValueError) else EmberRuntimeError
        return cls(named(op.name, msg))
    if "broadcast" in msg and isinstance(err, ValueError):
        shapes = [tuple(t._data.shape) for t in tensors if isinstance(t, Tensor)]
        return EmberRuntimeError(f"{op.name}: {_mismatch(shapes)}shapes "
                                 f"{' and '.join(map(str, shapes))} cannot be broadcast")
    if isinstance(err, AttributeError):
        cls = EmberTypeError
    elif isinstance(err, (IndexError, TypeError, OverflowError, NotImplementedError)):
        cls = ember_class(err)
    else:  # a kernel's ValueError, KeyError, ZeroDivisionError, ...: RuntimeError, as in torch
        cls = EmberRuntimeError
    if not msg:
        msg = type(err).__name__
    described = _describe(op, tensors)
    return cls(named(op.name, msg) + (f" ({described})" if described else ""))


def named_by_dispatch(name, fn):
    """Whether public function or Tensor method ``fn`` (called ``name``: ``add``, ``add_``,
    ``__radd__``) is the generated entry of the spec op of that name, whose errors dispatch names
    (so it needs no ember.errors.public wrapper)."""
    from ember.autograd._generated import functions, methods, records
    if getattr(fn, "__module__", None) not in (functions.__name__, methods.__name__):
        return False
    for n in (name, fn.__name__):  # the attribute's name, and the generated function's own
        base = n.strip("_")
        for candidate in (base, base[1:] if n.startswith("__") and base[:1] in "ri" else None,
                          _DUNDER_OPS.get(base.lstrip("ri") if n.startswith("__") else None)):
            op = records.OPS.get(candidate)
            if op is not None:
                return not op.list_input
    return False


_DUNDER_OPS = {"truediv": "div", "floordiv": "div", "mod": "remainder", "and": "bitwise_and",
               "or": "bitwise_or", "xor": "bitwise_xor", "nvert": "bitwise_not"}


def _check_slot(op, i, value):
    name = op.tensor_names[i] if i < len(op.tensor_names) and not op.list_input else f"tensors[{i}]"
    if value is None:
        if op.list_input or name in op.optional:
            return value
    elif op.scalar_ok and isinstance(value, (int, float, bool, np.number)):
        return value
    elif op.scalar_ok and isinstance(value, np.bool_):
        return float(value)   # torch's argument parser reads a NumPy bool as a float scalar
    raise EmberTypeError(f"{op.name}(): argument '{name}' must be a Tensor, not "
                         f"{type(value).__name__}")


def _arrays_as_tensors(tensors):
    """``tensors`` with each NumPy array of numbers in a Tensor's place wrapped as one (sharing
    its memory, as ``from_numpy``): ``t + np.ones(2)`` is ``t + from_numpy(np.ones(2))``, as
    torch's argument parser converts it."""
    return [Tensor._make(t) if t.__class__ is ndarray and t.dtype.kind in "biufc" else t
            for t in tensors]


def _edge(t):
    fn = t.grad_fn   # a view's regenerated one
    if fn is not None:
        return (fn, t._output_nr)
    return (grad_accumulator(t), 0)


def dispatch(op, tensors, consts, _profiled=False):
    """Run ``op`` on ``tensors`` (Tensors, or scalars where allowed) and constant args ``consts``.
    ``_profiled``: the recording profiler's own call (see the module docstring)."""
    if _profile is not None and not _profiled:
        return _profile(op, tensors, consts, False)
    if STATE.autocast is not None:   # an ember.amp.autocast region (ember.autograd.autocast)
        tensors = _autocast.cast_inputs(op, tensors)
    arrays = []
    need_grad = False
    for t in tensors:
        cls = t.__class__
        if cls is Tensor:
            arrays.append(t._data)
            if t._requires_grad:
                need_grad = True
            continue
        if cls in _SCALARS:
            if cls is int and not _I64_MIN <= t <= _I64_MAX:
                raise EmberOverflowError(f"{op.name}: Python int {t} is outside the int64 range "
                                         f"[{_I64_MIN}, {_I64_MAX}] ({_describe(op, tensors)})")
            arrays.append(t if op.scalar_ok else _check_slot(op, len(arrays), t))
            continue
        if getattr(cls, "is_sparse", False) is True:   # a sparse COO tensor: ember.sparse
            return sparse_dispatch(op, tensors, consts)
        try:
            arrays.append(t._data)
            if t._requires_grad:
                need_grad = True
        except AttributeError:
            if cls is ndarray and t.dtype.kind in "biufc":   # torch takes a NumPy array
                return dispatch(op, _arrays_as_tensors(tensors), consts, _profiled)  # as one
            arrays.append(_check_slot(op, len(arrays), t))
    if not need_grad and _views_gained_grad and STATE.grad_enabled:
        need_grad = _views.refresh_inputs(tensors)
    back = False
    if _BFLOAT16[0] is not None:
        arrays, back, consts = _bf16.upcast(op, arrays, consts)
    fp = _fp_enter(_FP_IGNORE)   # inf, nan: values, no NumPy warning (kernels/runtime/fpstate.py)
    try:
        if op.list_input:
            out = op.kernel(arrays, *consts)
        else:
            out = op.kernel(*arrays, *consts)
    except Exception as e:  # noqa: BLE001 - converted to ember's error by kernel_error
        raise kernel_error(op, tensors, e) from None
    finally:
        _fp_leave(fp)
    if back:
        out = _bf16.round_back(out)
    if op.multi:
        return _finish_multi(op, tensors, consts, out, need_grad)
    res = _new(Tensor)
    res._data = out if out.__class__ is ndarray else np.asarray(out)
    if not op.complex_ok:
        dt = res._data.dtype
        if dt is _C64 or dt is _C128:
            _complex.check_result(op, res._data)
    res._requires_grad = False
    res._grad_fn = None
    if STATE.inference:
        res._inference = True
    if op.view:
        if tensors[0]._inference:   # a view of an inference tensor is one
            res._inference = True
        _views.link_view(op, tensors[0], consts, (res,), False)
    if need_grad and op.backward is not None and STATE.grad_enabled:
        _link(op, tensors, consts, (res,))
    tracer = STATE.tracer
    if tracer is not None:
        tracer.record(op, tensors, consts, (res,))
    return res


# op name -> handler(op, tensors, consts) for calls with a sparse COO operand; filled by
# ember.sparse when it loads (a sparse tensor exists only after that)
SPARSE_OPS = {}


def sparse_dispatch(op, tensors, consts):
    """Run ``op`` with a sparse COO tensor among ``tensors`` through its ember.sparse handler.

    Raises UnsupportedError naming the op when ember has no sparse COO implementation of it."""
    handler = SPARSE_OPS.get(op.name)
    if handler is None:
        from ember.errors import UnsupportedError
        raise UnsupportedError(
            f"{op.name}: sparse COO tensors (layout=ember.sparse_coo) are not supported by this "
            f"op ({_describe_sparse(op, tensors)}); convert with .to_dense() first "
            f"(docs/sparse.md lists the sparse ops)")
    return handler(op, tensors, consts)


def _describe_sparse(op, tensors):
    parts = []
    for i, t in enumerate(tensors):
        name = op.tensor_names[i] if i < len(op.tensor_names) and not op.list_input \
            else f"tensors[{i}]"
        if getattr(t, "is_sparse", False) is True:
            parts.append(f"{name}: sparse_coo {t.dtype.name}{list(t.shape)}")
        elif isinstance(t, Tensor):
            parts.append(f"{name}: {t._data.dtype}{list(t._data.shape)}")
    return ", ".join(parts)


def _finish_multi(op, tensors, consts, out, need_grad):
    outs = tuple(_make(o if o.__class__ is ndarray else np.asarray(o)) for o in out)
    if not op.complex_ok:
        for o in outs:
            if o._data.dtype.kind == "c":
                _complex.check_result(op, o._data)
    if op.view:
        _views.link_view(op, tensors[0], consts, outs, True)
    if need_grad and op.backward is not None and STATE.grad_enabled:
        _link(op, tensors, consts, outs)
    tracer = STATE.tracer
    if tracer is not None:
        tracer.record(op, tensors, consts, outs)
    return outs   # a tuple, ``Tensor[]`` results too (split, chunk, unbind: torch's tuples)


def _refuse_grad(op, tensors):
    for i in op.refuses_grad:
        t = tensors[i] if i < len(tensors) else None
        if getattr(t, "_requires_grad", False):
            raise EmberRuntimeError(
                f"The function '{op.name}' is not differentiable with respect to argument "
                f"'{op.tensor_names[i]}'. This input cannot have requires_grad True.")


def _link(op, tensors, consts, outs):
    if op.refuses_grad:
        _refuse_grad(op, tensors)
    needs = []
    edges = []
    cx = False
    scan = op.scan_complex
    for t in tensors:
        try:
            if t._requires_grad:
                fn = t._grad_fn if t._view is None else t.grad_fn
                edges.append((fn, t._output_nr) if fn is not None else (grad_accumulator(t), 0))
                needs.append(True)
                if scan:
                    d = t._data.dtype
                    if d is _C64 or d is _C128:
                        cx = True
                continue
        except AttributeError:
            pass
        needs.append(False)
        edges.append(None)
    needs = tuple(needs)
    node = op.backward(tensors, consts, outs, needs)
    node.needs = needs
    node.next_functions = tuple(edges)
    if _BFLOAT16[0] is not None and op.name in _autocast.LOWER and \
            outs[0]._data.dtype.kind == "V":   # a bfloat16 product: engine._apply
        node._grad_dtypes = tuple(o._data.dtype for o in outs)
    if STATE.anomaly:
        import traceback
        node._trace = "".join(traceback.format_stack()[:-3])
    if not op.multi:
        o = outs[0]
        kind = o._data.dtype.kind
        if kind == "f" or kind == "V":   # "V": bfloat16, the one such dtype a tensor holds
            o._grad_fn = node
            o._requires_grad = True
            if cx:
                _complex.link(op, tensors, outs, node)
        elif kind == "c":
            _complex.link(op, tensors, outs, node)
            o._grad_fn = node
            o._requires_grad = True
        return
    if cx or any(o._data.dtype.kind == "c" for o in outs):
        _complex.link(op, tensors, outs, node)
    diff = op.diff_outputs
    # (shape, dtype) of the outputs a gradient can reach (the engine fills a missing one with
    # zeros); None for the others (indices, masks, workspaces), whose gradient stays None
    node._out_meta = [(o._data.shape, o._data.dtype)
                      if (diff[i] if i < len(diff) else diff[-1]) else None
                      for i, o in enumerate(outs)]
    for i, o in enumerate(outs):
        if (diff[i] if i < len(diff) else diff[-1]) and o._data.dtype.kind in "fcV":
            o._grad_fn = node
            o._requires_grad = True
            if i:
                o._output_nr = i


# In-place arithmetic that needs no autograd record and no trace writes into self's memory
# (``_write_through``): on a (512, 784) float32 tensor ``mul_(0.999)`` took 208 us out of place
# (a fresh temporary, page faults, then a copy), 27 us as one ufunc, and
# ``p.data.add_(p.grad, alpha=-lr)`` 435 us (two temporaries), 56 us in one engine pass
_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide}


def _put_through(tensors, consts):
    """``self[key] = values`` (``index_put_``, ``setitem``) written into self's indexed elements
    only, as torch: the general path's copy of the whole result back into self rewrote every
    element, undoing other processes' writes made meanwhile into a shared tensor (a fork Pool's
    workers each setting one element lost some). False where the general path must run: values
    sharing self's memory, read-only memory, or anything the kernel refuses (its errors)."""
    self, values = tensors
    dst = self._data
    if not dst.flags.writeable or len(tensors) != 2:
        return False
    key, accumulate = consts
    if accumulate:   # np.add.at may add part before it raises for a bad index: general path
        return False
    v = values._data if values.__class__ is Tensor else values
    if v.__class__ is np.ndarray and np.may_share_memory(v, dst):
        return False
    from ember.kernels.indexing import index_put_into
    fp = _fp_enter(_FP_IGNORE)
    try:
        index_put_into(dst, v, key, accumulate)
    except Exception:   # nothing written (NumPy checks before it writes): the general path raises
        return False
    finally:
        _fp_leave(fp)
    return True


def _scatter_through(tensors, consts):
    """``scatter_`` written into self's memory (``indexing.scatter_into``), not computed out of
    place and copied back: a one-hot built as ``zeros(...).scatter_(-1, idx, 1)`` copied its
    whole tensor twice. A plain write only (a ``reduce`` goes the general path), and False where
    the general path must run: an index or source sharing self's memory, read-only memory, or
    anything the kernel refuses (it checks before it writes: its errors)."""
    self, index, src = tensors
    dst = self._data
    dim, reduce = consts
    if reduce is not None or not dst.flags.writeable or index.__class__ is not Tensor:
        return False
    v = src._data if isinstance(src, Tensor) else src
    if np.may_share_memory(index._data, dst) or \
            (v.__class__ is np.ndarray and np.may_share_memory(v, dst)):
        return False
    from ember.kernels.indexing import scatter_into
    fp = _fp_enter(_FP_IGNORE)
    try:
        scatter_into(dst, index._data, v, dim)
    except Exception:   # nothing written (checked before the write): the general path raises
        return False
    finally:
        _fp_leave(fp)
    return True


def _write_through(op, tensors, consts):
    """``tensors[0]`` op= ``tensors[1]`` with one ufunc into self's memory when that gives the
    out-of-place result exactly: add, sub (alpha applied to other first, as the kernels do), mul,
    div (true division only) of a numeric, writeable self by a tensor of self's dtype that
    broadcasts to self's shape, or by a Python number of self's kind (float or complex self; an
    int for an int self, not for div). Returns True once written (the caller bumps the version),
    False where the general path must run (its checks raise the errors)."""
    ufunc = _UFUNCS.get(op.name)
    if ufunc is None or len(tensors) != 2:
        return (op.name == "index_put" and _put_through(tensors, consts)) or \
            (op.name == "scatter" and len(tensors) == 3 and _scatter_through(tensors, consts))
    self, other = tensors
    dst = self._data
    kind = dst.dtype.kind
    if kind not in "iufc" or not dst.flags.writeable:
        return False
    alpha = 1
    if op.name in ("add", "sub"):
        alpha = consts[0]
        if alpha.__class__ is not int and alpha.__class__ is not float:
            return False     # bool, complex, a tensor...: the general path checks it
    elif op.name == "div" and (consts[0] is not None or kind in "iu"):
        return False
    cls = other.__class__
    if cls is Tensor:
        b = other._data
        if b.dtype != dst.dtype or b.ndim > dst.ndim or \
                any(m != 1 and m != n for m, n in zip(b.shape[::-1], dst.shape[::-1])):
            return False
    elif cls is float or cls is int or (cls is complex and kind == "c"):
        if kind in "iu" and cls is not int or cls is int and not _I64_MIN <= other <= _I64_MAX:
            return False
        b = other
    else:
        return False
    if alpha != 1:
        if kind != "f":
            return False
        if op.name == "sub":
            alpha = -alpha
        from ember.kernels.pointwise import add_scaled   # not at import: it loads the engine
        if cls is Tensor and add_scaled.usable(dst, b):
            add_scaled.add_scaled_(dst, b, alpha)       # one pass, no temporary
            return True
    if alpha == 1 and dst.size >= _elementwise.THREADED_MIN_SIZE and \
            _elementwise.threaded_into(op.name, dst, b):
        return True
    fp = _fp_enter(_FP_IGNORE)   # as a kernel: inf - inf is nan, no NumPy warning
    try:
        if alpha != 1:
            b = b * alpha if cls is not Tensor else np.multiply(b, dst.dtype.type(alpha))
            ufunc = np.add
        ufunc(dst, b, out=dst)
    except (OverflowError, TypeError, ValueError):   # before any write (a number out of the
        return False                                 # dtype's range): the general path's error
    finally:
        _fp_leave(fp)
    return True


def _any_requires_grad(tensors):
    for t in tensors:
        if isinstance(t, Tensor) and (t._requires_grad or
                                      (t._view is not None and t._view[0]._requires_grad)):
            return True
    return False


def _check_inputs(op, self, tensors, consts):
    """torch's refusal of an input that partially overlaps the written memory (for
    ``index_put_``: the indexed region, or with advanced indices any of self's memory)."""
    dst = self._data
    name = op.name
    whole = False
    if name == "index_put":
        region = _views.basic_region(dst, consts[0])
        if region is None:
            whole = True
        else:
            dst = region
    elif name == "masked_fill":   # its value is read once, as a number
        return
    for t in tensors:
        if t is not self and isinstance(t, Tensor):
            b = t._data
            if b is not dst and (b.base is not None or dst.base is not None):
                _views.check_overlap(op, dst, b, whole)


def _set_history(self, info, result):
    """Make ``result``'s history (that of the out-of-place op) ``self``'s after the write; on a
    view, rebase its base's history (views.rebase)."""
    if info is None:
        self._grad_fn = result._grad_fn
        self._requires_grad = True
        if result._output_nr or self._output_nr:
            self._output_nr = result._output_nr
        if self._retains_grad:
            self._move_retain_grad()
    elif _views.rebase(self, info, result._grad_fn):
        global _views_gained_grad
        _views_gained_grad = True


def _relu_into(a):
    from ember.kernels import elementwise
    elementwise.relu(a, out=True)


# in-place ops computed in self's memory, without autograd and, as their backward keeps only the
# result (self's new values), with it (torchvision's ``ReLU(inplace=True)``: no out-of-place
# result copied back into self; (8, 64, 112, 112) float32, thread CPU 25.4 -> 6.0 ms)
_INTO_SELF = {"relu": _relu_into}


def _compute_into(op, self):
    """``op`` computed in ``self``'s memory (an ``_INTO_SELF`` op); bumps self's version."""
    fp = _fp_enter(_FP_IGNORE)
    try:
        _INTO_SELF[op.name](self._data)
    finally:
        _fp_leave(fp)
    self._bump()
    return self


def _into_self(op, self, tensors, consts):
    """``op`` written into ``self`` (not a view) with autograd on: the saved result shares
    self's array and version counter, so a later in-place change of self makes backward raise
    (as torch) instead of reading changed values."""
    _compute_into(op, self)
    res = _new(Tensor)
    res._data, res._requires_grad, res._grad_fn = self._data, False, None
    res._vc = self._get_vc()
    _link(op, tensors, consts, (res,))
    _set_history(self, None, res)
    return self


def dispatch_inplace(op, tensors, consts, _profiled=False):
    """Run ``op`` out of place, then write the result into ``tensors[0]`` and rebase its history
    (without autograd or a trace, arithmetic writes into self directly: ``_write_through``).
    On a view, the base's history is rebased (ember.autograd.views).

    Raises EmberRuntimeError for a leaf that requires grad, or a view of one (outside no_grad),
    for a view made in no_grad mode or as one of several outputs (with autograd on), for an
    input that partially overlaps self's memory, and when the result dtype cannot be cast to
    self's. ``_profiled``: the recording profiler's own call (see the module docstring).
    """
    if _profile is not None and not _profiled:
        return _profile(op, tensors, consts, True)
    self = tensors[0]
    if self._inference and not STATE.inference:
        raise EmberRuntimeError(
            f"{op.name}_: Inplace update to inference tensor outside InferenceMode is not "
            f"allowed.You can make a clone to get a normal tensor before doing inplace update."
            f"See https://github.com/pytorch/rfcs/pull/17 for more details.")
    if self.__class__ is not Tensor and getattr(self.__class__, "is_sparse", False) is True:
        from ember.errors import UnsupportedError
        raise UnsupportedError(f"{op.name}_: in-place ops on sparse COO tensors are not "
                               f"supported ({_describe_sparse(op, tensors)}); use the "
                               f"out-of-place {op.name}")
    if len(tensors) > 1:
        _check_inputs(op, self, tensors, consts)
    grad_on = STATE.grad_enabled and _any_requires_grad(tensors)
    if not grad_on and STATE.tracer is None and self.__class__ is Tensor:
        if _write_through(op, tensors, consts):
            self._bump()
            return self
        if op.name in _INTO_SELF and STATE.autocast is None and \
                self._data.dtype.kind == "f" and self._data.flags.writeable:
            return _compute_into(op, self)   # nothing to record: no result to copy back
    info = self._view
    if grad_on:
        _views.refresh_inputs(tensors)
        if info is not None:
            _views.check_inplace(op, self)
            self.grad_fn  # noqa: B018 - brings the view's history up to date
        elif self._grad_fn is None and self._requires_grad:
            raise EmberRuntimeError(
                f"{op.name}_: a leaf Variable that requires grad is being used in an in-place "
                "operation.")
        if op.name in _UFUNCS and STATE.tracer is None and self.__class__ is Tensor and \
                op.backward is not None and not op.backward._saved and \
                self._data.dtype.kind == "f" and _write_through(op, tensors, consts):
            # a backward that keeps no operand (add, sub) is linked as for the out-of-place
            # result, whose values are now self's: (8, 64, 56, 56) float32 ``out += x`` with
            # grad 1.19 -> 0.46 ms, torch 0.26 (no temporary, no copy back)
            res = _new(Tensor)
            res._data, res._requires_grad, res._grad_fn = self._data, False, None
            _link(op, tensors, consts, (res,))
            self._bump()
            _set_history(self, info, res)
            return self
        if op.name in _INTO_SELF and info is None and STATE.tracer is None and \
                STATE.autocast is None and self.__class__ is Tensor and \
                self._data.dtype.kind == "f" and self._data.flags.writeable:
            return _into_self(op, self, tensors, consts)
        if op.saves_self:
            old = Tensor._make(self._data.copy())
            old._grad_fn = self.grad_fn
            old._requires_grad = self._requires_grad
            if self._output_nr:
                old._output_nr = self._output_nr
            tensors = (old,) + tuple(old if t is self else t for t in tensors[1:])
    tracer = STATE.tracer
    if tracer is None:
        result = dispatch(op, tensors, consts)
    else:
        # record the op on the caller's tensors (not the private copy of self made above), then
        # the write into self
        STATE.tracer = None
        try:
            result = dispatch(op, tensors, consts)
        finally:
            STATE.tracer = tracer
        tracer.record(op, (self,) + tuple(tensors[1:]), consts, (result,))
    res = result._data
    dst = self._data
    if res.dtype != dst.dtype and not can_cast(res.dtype, dst.dtype):
        raise EmberRuntimeError(f"{op.name}_: result type {res.dtype} can't be cast to the "
                                f"desired output type {dst.dtype}")
    if res.shape != dst.shape:
        raise EmberRuntimeError(f"{op.name}_: output with shape {list(dst.shape)} doesn't match "
                                f"the broadcast shape {list(res.shape)}")
    if not dst.flags.writeable:
        raise EmberRuntimeError(_views.internal_overlap_message(op, dst) or
                                f"{op.name}_: the tensor's memory is read-only")
    np.copyto(dst, res, casting="unsafe")
    self._bump()
    if grad_on:
        _set_history(self, info, result)
    if tracer is not None:
        tracer.record_inplace(self, result)
    return self
