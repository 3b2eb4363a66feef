"""``trace`` and the callables it returns (``TracedFunction``, ``TracedModule``)."""
import inspect
import operator
import re
import warnings

import numpy as np

from ember.autograd.state import STATE
from ember.errors import EmberKeyError, EmberRuntimeError, EmberTypeError, EmberValueError
from ember.jit.codegen import compile_graph
from ember.jit.guards import build_guards
from ember.jit.interpreter import Interpreter
from ember.jit.tracer import Tracer, TracingError
from ember.kernels.runtime.fpstate import IGNORE as _FP_IGNORE, enter as _fp_enter, leave as _fp_leave

__all__ = ["trace", "TracedFunction", "TracedModule", "TracingCheckError"]

_shape = operator.attrgetter("shape")


class TracingCheckError(EmberRuntimeError):
    """``check_trace``: running the trace on the example inputs did not reproduce eager mode."""


# ---------------------------------------------------------------------------------- pytrees
_Tensor = None


def _tensor_cls():
    global _Tensor
    if _Tensor is None:
        from ember.tensor import Tensor
        _Tensor = Tensor
    return _Tensor


def flatten(obj, path, out_tensors, out_paths, strict_leaves=None):
    """Flatten tensors/tuples/lists/dicts into ``out_tensors``; returns a JSON-able spec."""
    Tensor = _tensor_cls()
    if isinstance(obj, Tensor):
        out_tensors.append(obj)
        out_paths.append(path)
        return "T"
    if isinstance(obj, (tuple, list)):
        kind = "list" if isinstance(obj, list) else "size" if type(obj) is _size_cls() else \
            "tuple"
        return {kind: [flatten(x, f"{path}.{i}", out_tensors, out_paths, strict_leaves)
                       for i, x in enumerate(obj)]}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)):
                raise EmberTypeError(f"trace: dict keys must be str or int, got "
                                     f"{type(k).__name__}")
            items.append([k, flatten(v, f"{path}.{k}", out_tensors, out_paths, strict_leaves)])
        return {"dict": items}
    if strict_leaves is not None:
        strict_leaves.append((path, obj))
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"const": obj}
    raise EmberTypeError(f"trace: cannot flatten a {type(obj).__name__} at {path!r} (use "
                         "tensors, tuples, lists, dicts and Python scalars)")


def _size_cls():
    from ember.tensor import Size
    return Size


def unflatten(spec, it):
    if spec == "T":
        return next(it)
    if "tuple" in spec:
        return tuple(unflatten(s, it) for s in spec["tuple"])
    if "size" in spec:   # a shape (ember.Size) returned by the traced function stays one
        return _size_cls()(unflatten(s, it) for s in spec["size"])
    if "list" in spec:
        return [unflatten(s, it) for s in spec["list"]]
    if "dict" in spec:
        return {k: unflatten(s, it) for k, s in spec["dict"]}
    return spec["const"]


def _flatten_call(spec, obj, out):
    """Flatten call arguments along a spec, checking the structure."""
    Tensor = _tensor_cls()
    if spec == "T":
        if not isinstance(obj, Tensor):
            raise EmberTypeError(f"traced function expected a Tensor, got {type(obj).__name__}")
        out.append(obj)
    elif "tuple" in spec or "list" in spec or "size" in spec:
        sub = spec.get("tuple", spec.get("list", spec.get("size")))
        if not isinstance(obj, (tuple, list)) or len(obj) != len(sub):
            raise EmberTypeError(f"traced function expected a sequence of {len(sub)} items, "
                                 f"got {type(obj).__name__}")
        for s, o in zip(sub, obj):
            _flatten_call(s, o, out)
    elif "dict" in spec:
        if not isinstance(obj, dict):
            raise EmberTypeError(f"traced function expected a dict, got {type(obj).__name__}")
        for k, s in spec["dict"]:
            _flatten_call(s, obj[k], out)


def _clean(name):
    name = re.sub(r"[^A-Za-z0-9_.]", "_", str(name))
    return name or "input"


# ---------------------------------------------------------------------------------- callables
class TracedFunction:
    """A traced callable: ``graph`` (the IR), ``code`` (the Python it runs), called like the
    original. Runs the generated kernel-level code when no gradient is needed and no tracer is
    active; otherwise the dispatch-level code (autograd records, enclosing traces see the ops)."""

    def __init__(self, graph, in_spec, out_spec, n_inputs, bindings, name="forward"):
        self.graph = graph
        self._in_spec = in_spec
        self._out_spec = out_spec
        self._n_inputs = n_inputs
        self._bindings = list(bindings)  # tensors bound to graph.inputs[n_inputs:]
        self.name = name
        self._fast = self._slow = None
        self._code = None
        self._simple_in = isinstance(in_spec, dict) and "tuple" in in_spec and \
            all(s == "T" for s in in_spec["tuple"])
        self._single_out = out_spec == "T"
        self._ndims = tuple(len(v.shape) for v in graph.inputs[:n_inputs])
        self._dtypes = tuple(v.dtype for v in graph.inputs[:n_inputs])
        self._guards = None  # ShapeGuards: sizes the trace froze, re-checked on new shapes
        self._planner = None
        # calls without a gradient run an inference plan (``ember.jit.plan``; set by optimize,
        # load and ember.compile): over the graph itself when it has no state formals, else
        # over the graph frozen on the state's current values (``ember.jit.plan_live``)
        self.inference_plan = False

    @property
    def shape_guards(self):
        """The trace's ``ShapeGuards`` (None when it froze no input-dependent size): the
        shapes it read into Python values, checked when it is called with other shapes."""
        return self._guards

    # ---- compilation ---------------------------------------------------------------------
    def _compile(self):
        self._fast, self._code = compile_graph(self.graph, "array", self.name)
        self._slow, _ = compile_graph(self.graph, "tensor", self.name)

    @property
    def code(self):
        """The generated Python source (runs with op names bound to kernels or to dispatch)."""
        if self._code is None:
            self._compile()
        return self._code

    def recompile(self):
        """Regenerate the code after editing ``graph`` in place."""
        self.graph.lint()
        self._fast = self._slow = self._code = None
        self._planner = None
        self._ndims = tuple(len(v.shape) for v in self.graph.inputs[:self._n_inputs])
        self._dtypes = tuple(v.dtype for v in self.graph.inputs[:self._n_inputs])

    def state_tensors(self):
        """The tensors bound to the parameter/buffer formals, in formal order."""
        return self._bindings

    # ---- calling -------------------------------------------------------------------------
    def _flat_inputs(self, args):
        if self._simple_in:
            if len(args) != self._n_inputs:
                raise EmberTypeError(f"{self.name}: expected {self._n_inputs} inputs, got "
                                     f"{len(args)}")
            flat = args
            Tensor = _tensor_cls()
            for i, t in enumerate(flat):
                if not isinstance(t, Tensor):
                    raise EmberTypeError(f"{self.name}: input {i} must be a Tensor, got "
                                         f"{type(t).__name__}")
        else:
            flat = []
            _flatten_call(self._in_spec, args, flat)
        for t, nd in zip(flat, self._ndims):
            if t._data.ndim != nd:
                raise EmberValueError(f"{self.name}: the trace was recorded for a {nd}-d input, "
                                      f"got shape {list(t._data.shape)}")
        return flat

    def __call__(self, *args):
        fast_fn = self._fast
        if fast_fn is None:
            self._compile()
            fast_fn = self._fast
        if self._simple_in and STATE.tracer is not None or not self._simple_in:
            return self._call_general(args)
        if len(args) != self._n_inputs:
            raise EmberTypeError(f"{self.name}: expected {self._n_inputs} inputs, got "
                                 f"{len(args)}")
        grad = STATE.grad_enabled
        arrays = []
        for t, nd, dt in zip(args, self._ndims, self._dtypes):
            d = getattr(t, "_data", None)   # None: not a Tensor, named by _flat_inputs
            if d is None or d.dtype != dt or d.ndim != nd or (grad and t._requires_grad):
                return self._call_general(args)
            arrays.append(d)
        guards = self._guards
        if guards is not None and tuple(map(_shape, arrays)) not in guards.ok:
            guards.check(arrays)
        state = self._bindings
        if state and grad:
            for t in state:
                if t._requires_grad:
                    return self._call_general(args)
        fp = _fp_enter(_FP_IGNORE)   # the kernels' inf and nan: values, no NumPy warning
        try:
            res = None
            if self.inference_plan:
                planner = self._planner
                if state:   # live parameters: the plan of the graph frozen on their values
                    if planner is None:
                        from ember.jit.plan_live import LivePlanner
                        planner = self._planner = LivePlanner(self.graph, self._n_inputs)
                    res = planner.run(tuple(arrays), state)
                else:
                    if planner is None:
                        from ember.jit.plan import Planner
                        planner = self._planner = Planner(self.graph)
                    res = planner.run(arrays)
            if res is None:
                if state:
                    arrays += [t._data for t in state]
                res = fast_fn(*arrays)
        except Exception:  # noqa: BLE001 - reported as eager mode would report it
            return self._explain_failure(args)
        finally:
            _fp_leave(fp)
        make = _tensor_cls()._make
        if self._single_out:
            o = res[0]
            return make(o if o.__class__ is np.ndarray else np.asarray(o))
        outs = [make(o if o.__class__ is np.ndarray else np.asarray(o)) for o in res]
        return unflatten(self._out_spec, iter(outs))

    def _call_general(self, args):
        if self._fast is None:
            self._compile()
        flat = self._flat_inputs(args)
        self._check_shapes(flat)
        state = self.state_tensors()
        if STATE.tracer is not None and self._guards is not None:
            self._guards.forward_to(STATE.tracer, flat)
        fast = STATE.tracer is None
        for t, dt in zip(flat, self._dtypes):
            if t._data.dtype != dt:
                fast = False  # the fast code is specialised on the traced dtypes
        if fast and STATE.grad_enabled:
            for t in flat:
                if t._requires_grad:
                    fast = False
                    break
            else:
                for t in state:
                    if t._requires_grad:
                        fast = False
                        break
        if fast:
            Tensor = _tensor_cls()
            fp = _fp_enter(_FP_IGNORE)
            try:
                res = self._fast(*[t._data for t in flat], *[t._data for t in state])
            except Exception:  # noqa: BLE001 - reported as eager mode would report it
                return self._explain_failure(args)
            finally:
                _fp_leave(fp)
            outs = [Tensor._make(o if o.__class__ is np.ndarray else np.asarray(o)) for o in res]
        else:
            outs = self._slow(*flat, *state)
        if self._single_out:
            return outs[0]
        return unflatten(self._out_spec, iter(outs))

    forward = __call__

    def _check_shapes(self, flat):
        guards = self._guards
        if guards is not None:
            arrays = [t._data for t in flat]
            if tuple(map(_shape, arrays)) not in guards.ok:
                guards.check(arrays)

    def _explain_failure(self, args):
        """The fast (kernel-level) code raised: run the dispatch-level code, whose ops raise
        ember's errors naming the op, the shapes and dtypes, as eager mode does. Should that
        run succeed, its result is returned."""
        outs = self._slow(*self._flat_inputs(args), *self.state_tensors())
        if self._single_out:
            return outs[0]
        return unflatten(self._out_spec, iter(outs))

    def run_interpreter(self, *args, free=True, mode="tensor"):
        """Run with the reference interpreter instead of the generated code."""
        flat = self._flat_inputs(args)
        self._check_shapes(flat)
        state = self.state_tensors()
        if mode == "array":
            formals = [t._data for t in flat] + [t._data for t in state]
        else:
            formals = list(flat) + list(state)
        outs = Interpreter(self.graph, mode).run(*formals, free=free)
        if mode == "array":
            Tensor = _tensor_cls()
            outs = [Tensor._make(o) for o in outs]
        return unflatten(self._out_spec, iter(outs))

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}: {len(self.graph.nodes)} nodes>"


class TracedModule(TracedFunction):
    """A traced Module: its parameters and buffers stay live (formals bound by state-dict name),
    so an optimizer step or ``load_state_dict`` on the module is seen by the trace."""

    def __init__(self, module, graph, in_spec, out_spec, n_inputs, names, name="forward"):
        self.module = module
        self._names = list(names)
        super().__init__(graph, in_spec, out_spec, n_inputs, self._lookup(), name)

    def _lookup(self):
        state = dict(self.module.named_parameters())
        state.update(dict(self.module.named_buffers()))
        missing = [n for n in self._names if n not in state]
        if missing:
            raise EmberKeyError(f"traced module lost state {missing}")
        return [state[n] for n in self._names]

    def refresh(self):
        """Re-read the module's tensors (after assigning new Parameter objects to it)."""
        self._bindings = self._lookup()

    def named_parameters(self, *a, **k):
        return self.module.named_parameters(*a, **k)

    def parameters(self, *a, **k):
        return self.module.parameters(*a, **k)

    def state_dict(self, *a, **k):
        return self.module.state_dict(*a, **k)

    @property
    def training(self):
        return self.module.training


# ---------------------------------------------------------------------------------- trace
def _is_module(obj):
    return hasattr(obj, "named_parameters") and hasattr(obj, "named_buffers") and callable(obj)


def _arg_names(fn, n):
    target = fn.forward if _is_module(fn) else fn
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            names += [f"{p.name}{i}" for i in range(n - len(names))]
            break
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
    names += [f"input{i}" for i in range(len(names), n)]
    return names[:n]


def _outputs_close(a, b, rtol, atol):
    """Whether the trace's output ``a`` reproduces the eager output ``b``: element by element
    within ``atol + rtol * |b|``, or, for floats, within ``atol + rtol * max |b|`` everywhere
    with the same non-finite entries. ember picks convolution and GEMM algorithms per call (the
    autotuner), so two runs of one model may round differently by a few units in the last place
    of the output's largest magnitude: an imported ResNet-50's logits (up to ~5e3) differed by
    1.7e-3 between two eager calls, which the element test fails at entries near zero."""
    a = a._data
    b = b._data
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        fp = _fp_enter(_FP_IGNORE)   # inf - inf, a tiny product: the check's, not the user's
        try:
            if np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
                return True
            finite = np.isfinite(b)
            if not (np.array_equal(finite, np.isfinite(a))
                    and np.array_equal(a[~finite], b[~finite], equal_nan=True)):
                return False
            if not finite.any():
                return True
            return bool(np.max(np.abs(a[finite] - b[finite]))
                        <= atol + rtol * np.max(np.abs(b[finite])))
        finally:
            _fp_leave(fp)
    return np.array_equal(a, b)


def trace(fn, example_inputs, check_trace=True, strict=True, optimize=False, name=None,
          check_tolerance=1e-5):
    """Run ``fn(*example_inputs)`` once with a tracer and return a traced callable.

    ``fn``: a function of tensors (tensors it captures become parameters when they require grad,
    else constants) or a Module (a ``TracedModule`` whose parameters and buffers stay live).
    ``example_inputs``: a tensor or a tuple of arguments (tensors, tuples, lists, dicts).
    ``check_trace``: re-run the trace on the examples and compare with the eager outputs.
    ``strict``: outputs must be tensors (no Python numbers in the output structure) and a
    failed check raises ``TracingCheckError`` (else both are warnings).
    ``optimize``: return ``ember.jit.optimize(traced)``.
    """
    from ember.random import default_generator
    if not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,)
    gen_state = default_generator.get_state()
    traced, _, flat_out, _ = record(fn, example_inputs, Tracer, strict, name)
    if check_trace:
        _check(traced, example_inputs, flat_out, gen_state, strict, check_tolerance)
    if optimize:
        from ember.jit.passes import optimize as _optimize
        traced = _optimize(traced)
    return traced


def record(fn, example_inputs, tracer_cls=Tracer, strict=True, name=None, after=None):
    """Run ``fn(*example_inputs)`` (a tuple) once under a ``tracer_cls`` tracer: returns the
    traced callable, the run's own (eager) result, its flattened tensors and the tracer. ``trace``
    and ``ember.compile`` (whose first call returns that eager result) share it.
    ``after(tracer, out)``, called while the tracer still records, returns ``(inputs, outputs)``:
    tensors made formals after the call's inputs and tensors appended to the graph's outputs
    (``ember.compile`` traces the backward pass there), or None when the run is not kept (no
    graph is built from it; the traced callable returned is None)."""
    module = fn if _is_module(fn) else None
    if name is None:
        name = type(fn).__name__ if module is not None else getattr(fn, "__name__", "forward")
        name = re.sub(r"\W", "_", name)
        if not name or name[0].isdigit() or name == "lambda":
            name = "forward"
    state, order = {}, {}
    if module is not None:
        for i, (n, p) in enumerate(module.named_parameters()):
            state.setdefault(id(p), (p, n, "param"))
            order.setdefault(n, i)
        for i, (n, b) in enumerate(module.named_buffers()):
            if b is not None:
                state.setdefault(id(b), (b, n, "buffer"))
                order.setdefault(n, 10 ** 6 + i)
        try:
            for i, n in enumerate(module.state_dict(keep_vars=True)):
                order[n] = i
        except Exception:  # noqa: BLE001 - ordering only
            pass
    argnames = _arg_names(fn, len(example_inputs))
    flat, paths = [], []
    in_spec = {"tuple": [flatten(a, argnames[i], flat, paths) for i, a in
                         enumerate(example_inputs)]}
    tracer = tracer_cls(name, state)
    for t, p in zip(flat, paths):
        tracer.add_input(t, _clean(p))
    extra = ([], [])
    with tracer:
        out = fn(*example_inputs)
        if after is not None:
            extra = after(tracer, out)
    flat_out, leaves = [], []
    out_spec = flatten(out, "output", flat_out, [], leaves)
    if leaves and strict:
        raise TracingError(f"trace: the output holds non-tensor values {leaves} (they would be "
                           "frozen); return tensors only, or pass strict=False")
    if extra is None:
        return None, out, flat_out, tracer
    extra_in, extra_out = extra
    g = tracer.graph
    g.outputs = [tracer.value_of(t) for t in flat_out + list(extra_out)]
    # formals: inputs, then module state in state-dict order, then captured tensors needing grad
    n_in = len(flat)
    inputs = g.inputs[:n_in] + [tracer.known(t) for t in extra_in]
    key = {id(t): n for t, n, _ in tracer.state.values()}   # formal -> its state-dict key
    bound = sorted(tracer.bound, key=lambda vt: order.get(key[id(vt[1])], 0))
    g.inputs = inputs + [v for v, _ in bound] + [v for v, _ in tracer.extra]
    guard_table = tracer.guard_table()  # records the guarded sizes' nodes (dead in g)
    pre_dce = g.copy() if guard_table else None
    from ember.jit.passes import dce
    dce(g)
    keep = {id(v) for v in inputs} | {id(v) for v in g.inputs if v.uses or v in g.outputs}
    bound = [(v, t) for v, t in bound if id(v) in keep]
    extra = [(v, t) for v, t in tracer.extra if id(v) in keep]
    g.inputs = inputs + [v for v, _ in bound] + [v for v, _ in extra]
    g.lint()
    if module is not None and not extra:
        traced = TracedModule(module, g, in_spec, out_spec, n_in,
                              [key[id(t)] for _, t in bound], name)
    else:
        traced = TracedFunction(g, in_spec, out_spec, n_in, [t for _, t in bound + extra], name)
        traced.module = module
    traced.traced_random = tracer.random
    traced._guards = build_guards(name, pre_dce, guard_table, [v.name for v in g.inputs],
                                  tuple(t._data.shape for t in flat), traced.state_tensors())
    return traced, out, flat_out, tracer


def _check(traced, example_inputs, expected, gen_state, strict, tol):
    from ember.autograd.grad_mode import no_grad
    from ember.random import default_generator
    after = default_generator.get_state()
    saved = [(t, t._data.copy()) for t in traced.state_tensors()]
    prev = STATE.tracer
    STATE.tracer = None
    try:
        if traced.traced_random:
            default_generator.set_state(gen_state)
        with no_grad():
            got = traced(*example_inputs)
    finally:
        STATE.tracer = prev
        default_generator.set_state(after)
        for t, d in saved:
            np.copyto(t._data, d)
    flat_got = []
    flatten(got, "output", flat_got, [], [])
    bad = [i for i, (a, b) in enumerate(zip(flat_got, expected))
           if not _outputs_close(a, b, tol, tol)]
    if bad or len(flat_got) != len(expected):
        msg = (f"check_trace: running the trace of '{traced.name}' on the example inputs does not "
               f"reproduce the eager outputs {bad} (the traced code may depend on Python values "
               "or on state the trace froze)")
        if strict and not traced.traced_random:
            raise TracingCheckError(msg)
        warnings.warn(msg, stacklevel=3)
