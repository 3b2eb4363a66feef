"""``ember.compile``: torch.compile's API over the tracing JIT.

A compiled callable traces the function (or Module's forward) on its first call with given
*guards* — input structure, shapes, dtypes and ``requires_grad``, Python scalar arguments, grad
mode, autocast, and for a Module every submodule's training flag and every parameter's and
buffer's identity — optimises the trace (``ember.jit.passes``, parameters kept live) and reuses
it while the guards hold. The first call's result is the tracing run's own eager result.

* Parameters are formals read at every call, so optimizer steps (in-place updates) are seen.
* With no gradient needed the trace runs its array-mode code (kernels on ndarrays); when one is
  needed it runs the tensor-mode code, every op through autograd, so ``loss.backward()`` and
  ``.grad`` accumulation are eager's.
* A *graph break* — Python reading a traced tensor's values (``.item()``, ``.tolist()``,
  ``bool(t)``, ``if x.sum() > 0``, a tensor index, NumPy conversion), a backward pass or an
  optimizer step inside the function — makes the function run eagerly for those guards, with a
  warning naming the user's line (``fullgraph=True``: ``GraphBreakError``).
* At most ``config.cache_size_limit`` traces per function; further guard sets run eagerly with
  a warning naming the guard that failed.
"""
import functools
import inspect
import warnings

import numpy as np

from ember.autograd.state import STATE
from ember.errors import EmberRuntimeError, EmberValueError
from ember.jit.tracer import Tracer, user_frame

__all__ = ["compile", "CompiledFunction", "OptimizedModule", "GraphBreakError", "InvalidBackend",
           "reset", "explain", "ExplainOutput", "config", "is_compiling"]

BACKENDS = ("ember", "inductor", "eager", "aot_eager", "cudagraphs")
MODES = ("default", "lite", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs",
         "debug")


class _Config:
    """``ember._dynamo.config``: ``cache_size_limit`` (traces kept per compiled function, as
    torch's ``recompile_limit``), ``suppress_errors`` (accepted, as torch's)."""

    def __init__(self):
        self.cache_size_limit = 8
        self.recompile_limit = 8
        self.suppress_errors = False
        self.verbose = False

    def limit(self):
        return min(self.cache_size_limit, self.recompile_limit)


config = _Config()


class GraphBreakError(EmberRuntimeError):
    """``fullgraph=True`` and the compiled function cannot be captured as one graph."""


class InvalidBackend(EmberRuntimeError):
    """``ember.compile(backend=...)`` names no backend ember has."""


class RecompileWarning(UserWarning):
    """A compiled function hit its cache size limit and runs eagerly for new guards."""


class GraphBreakWarning(UserWarning):
    """A compiled function runs eagerly: Python code read a traced tensor's values."""


_ALL = None  # weakref.WeakSet of CompiledFunction (for reset)


def _registry():
    global _ALL
    if _ALL is None:
        import weakref
        _ALL = weakref.WeakSet()
    return _ALL


def reset():
    """Forget every compiled function's traces (``torch.compiler.reset`` / ``torch._dynamo.reset``);
    the next call of each traces again."""
    for cf in list(_registry()):
        cf.reset()


def is_compiling():
    """Whether a compiled function is being traced now (``torch.compiler.is_compiling``)."""
    t = STATE.tracer
    while t is not None:
        if isinstance(t, CompileTracer):
            return True
        t = getattr(t, "parent", None)
    return False


# ---------------------------------------------------------------------------------- tracer
class GraphBreak:
    """Why a function cannot be one graph: ``reason`` at ``filename:lineno`` (``source``)."""

    __slots__ = ("reason", "filename", "lineno", "source")

    def __init__(self, reason, where):
        self.reason = reason
        self.filename, self.lineno, self.source = where

    def __str__(self):
        return f"{self.reason} at {self.filename}:{self.lineno}: `{self.source}`"

    __repr__ = __str__


class CompileTracer(Tracer):
    """The tracer of ``ember.compile``: what ``Tracer`` warns about (a traced tensor's values
    read in Python, a tensor index frozen, a constant aliasing a traced value) is recorded as a
    graph break; ``len()`` is not one (the trace is specialised on the input shapes)."""

    def __init__(self, name="trace", state=None, parent=None):
        super().__init__(name, state, parent)
        self.breaks = []
        self.captured = []  # (tensor, version) of captured tensors the graph holds as constants

    def warn(self, what, key):
        if key == "len":
            return
        self.graph_break(what)

    def graph_break(self, reason):
        """Record a break at the user's current line (also called by the autograd engine and
        by optimizers' ``step`` while a compiled function is traced)."""
        self.breaks.append(GraphBreak(reason, user_frame()))

    def _outside(self, t):
        v = super()._outside(t)
        if v.node is not None and v.node.kind == "constant":
            self.captured.append((t, t._version))
        return v


# ---------------------------------------------------------------------------------- guards
def _tensor_cls():
    from ember.tensor import Tensor
    return Tensor


def _arg_key(obj, out):
    """Append the guard key of one argument (recursing into containers); False when an
    argument cannot be guarded (an unhashable object that is not a container)."""
    Tensor = _tensor_cls()
    if isinstance(obj, Tensor):
        d = obj._data
        out.append((d.shape, d.dtype.str, obj._requires_grad))
        return True
    if isinstance(obj, (tuple, list)):
        out.append((type(obj), len(obj)))
        return all(_arg_key(x, out) for x in obj)
    if isinstance(obj, dict):
        out.append((dict, tuple(obj)))
        return all(_arg_key(v, out) for v in obj.values())
    if obj is None or isinstance(obj, (bool, int, float, str, complex)):
        out.append((type(obj), obj))
        return True
    return False


def _module_key(module, out):
    """Training flags of every submodule, identity and requires_grad of every parameter and
    buffer (an assigned new Parameter retraces; in-place updates do not)."""
    for m in module.modules():
        d = m.__dict__
        out.append(d["training"])
        for t in d["_parameters"].values():
            out.append(None if t is None else (id(t), t._requires_grad))
        for t in d["_buffers"].values():
            out.append(None if t is None else id(t))


_PART_NAMES = ("the grad mode", "the autocast state", "the argument structure",
               "a module's training flag or a parameter's identity")


def _describe_change(old, new, argnames):
    """The first guard that differs between two keys, in words."""
    for i, (a, b) in enumerate(zip(old, new)):
        if a == b:
            continue
        if i == 2 and len(a) == len(b):
            for j, (x, y) in enumerate(zip(a, b)):
                if x != y:
                    if len(x) == 3 and len(y) == 3 and isinstance(x[0], tuple):
                        what = ("shape", "dtype", "requires_grad")
                        for k in range(3):
                            if x[k] != y[k]:
                                return (f"an input's {what[k]} changed: {_fmt(y[k])} "
                                        f"(traced for {_fmt(x[k])})")
                    return f"an argument changed: {y!r} (traced for {x!r})"
        return f"{_PART_NAMES[min(i, 3)]} changed"
    return "a guard changed"


def _fmt(v):
    if isinstance(v, tuple):
        return str(list(v))
    if isinstance(v, str):
        return str(np.dtype(v))
    return repr(v)


# ---------------------------------------------------------------------------------- entries
class _Entry:
    __slots__ = ("key", "traced", "captured", "breaks", "eager_reason")

    def __init__(self, key, traced=None, captured=(), breaks=(), eager_reason=None):
        self.key = key
        self.traced = traced
        self.captured = list(captured)
        self.breaks = list(breaks)
        self.eager_reason = eager_reason

    def valid(self):
        for t, v in self.captured:
            if t._version != v:
                return False
        return True


class _KwargsCall:
    """A Module called with keyword arguments, as one function of ``(args, kwargs)`` that the
    tracer treats as the module (its parameters and buffers stay live formals)."""

    def __init__(self, module):
        self.module = module

    def named_parameters(self, *a, **k):
        return self.module.named_parameters(*a, **k)

    def named_buffers(self, *a, **k):
        return self.module.named_buffers(*a, **k)

    def state_dict(self, *a, **k):
        return self.module.state_dict(*a, **k)

    def forward(self, args, kwargs):
        return self.module(*args, **kwargs)

    __call__ = forward


class CompiledFunction:
    """What ``ember.compile(fn)`` returns for a function (and what an ``OptimizedModule``
    calls): traces per guard set, ``graphs`` (the optimised IR of each), ``graph`` (the most
    recent), ``breaks`` (the graph breaks seen), ``recompiles`` (why each retrace happened)."""

    def __init__(self, fn, module=None, fullgraph=False, dynamic=None, mode=None, options=None):
        self.fn = fn
        self.module = module
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.mode = mode or "default"
        self.options = dict(options or {})
        self.debug = self.mode == "debug" or bool(self.options.get("trace.enabled"))
        self._entries = {}
        self._last = None
        self._over_limit = set()
        self.breaks = []
        self.recompiles = []
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        _registry().add(self)

    def reset(self):
        self._entries.clear()
        self._last = None
        self._over_limit.clear()
        self.breaks.clear()
        self.recompiles.clear()

    @property
    def graphs(self):
        return [e.traced.graph for e in self._entries.values() if e.traced is not None]

    @property
    def graph(self):
        e = self._last
        return None if e is None or e.traced is None else e.traced.graph

    @property
    def code(self):
        e = self._last
        return None if e is None or e.traced is None else e.traced.code

    def _key(self, args, kwargs):
        parts = []
        ok = _arg_key(args, parts) and _arg_key(kwargs, parts)
        mod = []
        if self.module is not None:
            _module_key(self.module, mod)
        return (STATE.grad_enabled, repr(STATE.autocast), tuple(parts) if ok else None,
                tuple(mod))

    def __call__(self, *args, **kwargs):
        if STATE.tracer is not None:   # inside another trace: its tracer records the ops
            return self.fn(*args, **kwargs)
        key = self._key(args, kwargs)
        entry = self._entries.get(key)
        if entry is not None and entry.valid():
            self._last = entry
            if entry.traced is None:
                return self.fn(*args, **kwargs)
            return entry.traced(args, kwargs) if kwargs else entry.traced(*args)
        return self._miss(key, entry, args, kwargs)

    # ---- tracing ------------------------------------------------------------------------
    def _miss(self, key, stale, args, kwargs):
        if stale is not None:
            reason = "a captured tensor was modified in place"
        elif self._last is not None:
            reason = _describe_change(self._last.key, key, None)
        else:
            reason = None
        if key[2] is None:
            return self._eager(key, "an argument that is not a tensor, container or Python "
                               "scalar", args, kwargs)
        if stale is None and len(self._entries) >= config.limit():
            if key not in self._over_limit:
                self._over_limit.add(key)
                warnings.warn(f"ember.compile: '{self.__name__}' reached the cache size limit "
                              f"({config.limit()}, ember._dynamo.config.cache_size_limit) and "
                              f"runs eagerly for these inputs; the last retrace was because "
                              f"{reason}", RecompileWarning, stacklevel=3)
            return self.fn(*args, **kwargs)
        if reason is not None:
            self.recompiles.append(reason)
            if self.debug:
                print(f"[ember.compile] recompiling '{self.__name__}': {reason}")
        return self._trace(key, args, kwargs)

    def _eager(self, key, reason, args, kwargs):
        brk = GraphBreak(reason, user_frame())
        self._record_breaks(key, [brk])
        return self.fn(*args, **kwargs)

    def _record_breaks(self, key, breaks):
        self.breaks.extend(breaks)
        text = "; ".join(str(b) for b in breaks)
        if self.fullgraph:
            raise GraphBreakError(f"ember.compile(fullgraph=True): '{self.__name__}' cannot be "
                                  f"captured as one graph: {text}")
        self._entries[key] = self._last = _Entry(key, breaks=breaks, eager_reason=text)
        b = breaks[0]
        warnings.warn_explicit(f"ember.compile: graph break in '{self.__name__}': {text}. The "
                               "function runs eagerly for these inputs (results as in eager "
                               "mode).", GraphBreakWarning, b.filename, b.lineno)
        if self.debug:
            print(f"[ember.compile] graph break in '{self.__name__}': {text}")

    def _trace(self, key, args, kwargs):
        from ember.jit.passes import optimize
        from ember.jit.traced import record
        if self.module is not None:
            target = _KwargsCall(self.module) if kwargs else self.module
        else:
            fn = self.fn
            target = (lambda a, k: fn(*a, **k)) if kwargs else fn
        example = (tuple(args), dict(kwargs)) if kwargs else tuple(args)
        name = self.__name__ if self.module is None else type(self.module).__name__
        traced, out, _, tracer = record(target, example, CompileTracer, strict=False, name=name)
        if tracer.breaks:
            self._record_breaks(key, tracer.breaks)
            return out
        fast = optimize(traced, freeze_params=False)
        fast.inference_plan = False
        self._entries[key] = self._last = _Entry(key, fast, tracer.captured)
        if self.debug:
            groups = fast.graph.find_nodes("fusion_group")
            print(f"[ember.compile] traced '{self.__name__}': {len(fast.graph.nodes)} nodes, "
                  f"{len(groups)} fusion groups\n{fast.graph}")
        return out


# ---------------------------------------------------------------------------------- modules
def _module_base():
    from ember.nn.modules.module import Module
    return Module


_OptimizedModule = None


def _optimized_module_cls():
    global _OptimizedModule
    if _OptimizedModule is None:
        Module = _module_base()

        class OptimizedModule(Module):
            """A compiled Module (torch's ``OptimizedModule``): ``_orig_mod`` is the module
            (its parameters are the same tensors; ``state_dict`` keys carry the
            ``_orig_mod.`` prefix, as torch's); calling it runs the compiled forward; other
            attributes are the original module's."""

            def __init__(self, mod, compiled):
                super().__init__()
                self._orig_mod = mod
                self.__dict__["_compiled"] = compiled

            def forward(self, *args, **kwargs):
                return self.__dict__["_compiled"](*args, **kwargs)

            def __getattr__(self, name):
                try:
                    return super().__getattr__(name)
                except AttributeError:
                    return getattr(self.__dict__["_modules"]["_orig_mod"], name)

            @property
            def graph(self):
                return self.__dict__["_compiled"].graph

            @property
            def code(self):
                return self.__dict__["_compiled"].code

        _OptimizedModule = OptimizedModule
    return _OptimizedModule


def __getattr__(name):
    if name == "OptimizedModule":
        return _optimized_module_cls()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------------- compile
def compile(model=None, *, fullgraph=False, dynamic=None, backend="ember", mode=None,
            options=None, disable=False, name=None, recompile_limit=None):
    """Compile a function or Module (``torch.compile``); also a decorator, with or without
    arguments. ``backend``: "ember", or torch's names ("inductor", "eager", "aot_eager",
    "cudagraphs"), all compiled by ember; ``mode``: torch's modes (accepted; one compiler) or
    "debug" (prints the traced graphs, fusion groups, graph breaks and recompiles);
    ``dynamic``: accepted, shapes are specialised (a new shape retraces); ``disable=True``
    returns ``model`` itself."""
    if backend is None:
        backend = "ember"
    if callable(backend) and not isinstance(backend, str):
        raise InvalidBackend(f"ember.compile: backend={backend!r}: ember compiles with its own "
                             f"backend only (one of {', '.join(BACKENDS)})")
    if backend not in BACKENDS:
        raise InvalidBackend(f"ember.compile: invalid backend {backend!r}; ember accepts "
                             f"{', '.join(repr(b) for b in BACKENDS)} (all compiled by ember)")
    if mode is not None and mode not in MODES:
        raise EmberRuntimeError(f"ember.compile: unrecognized mode={mode}, should be one of: "
                                f"{', '.join(MODES)}")
    if mode is not None and options is not None:
        raise EmberRuntimeError("ember.compile: either mode or options can be specified, but "
                                "both can't be specified at the same time.")
    if options is not None and not isinstance(options, dict):
        raise EmberValueError(f"ember.compile: options must be a dict, got "
                              f"{type(options).__name__}")
    if dynamic not in (None, True, False):
        raise EmberValueError(f"ember.compile: dynamic must be None, True or False, got "
                              f"{dynamic!r}")
    if recompile_limit is not None:
        config.recompile_limit = int(recompile_limit)
    kw = dict(fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
              options=options, disable=disable)
    if model is None:
        return functools.partial(_compile_one, **kw)
    return _compile_one(model, **kw)


def _compile_one(model, *, fullgraph, dynamic, backend, mode, options, disable):
    if not callable(model):
        raise EmberRuntimeError(f"ember.compile: model must be callable, got "
                                f"{type(model).__name__}")
    if disable:
        return model
    Module = _module_base()
    if isinstance(model, Module):
        cf = CompiledFunction(model.forward, model, fullgraph, dynamic, mode, options)
        cf.fn = model   # called as the module (hooks run as in eager)
        cf.__name__ = cf.__qualname__ = type(model).__name__
        return _optimized_module_cls()(model, cf)
    cf = CompiledFunction(model, None, fullgraph, dynamic, mode, options)
    if inspect.isfunction(model) or inspect.ismethod(model):
        return functools.update_wrapper(_as_function(cf), model)
    return cf


def _as_function(cf):
    def compiled(*args, **kwargs):
        return cf(*args, **kwargs)
    compiled._compiled = cf
    return compiled


# ---------------------------------------------------------------------------------- explain
class ExplainOutput:
    """``ember.explain``'s result (torch._dynamo's ExplainOutput): ``graphs``,
    ``graph_count``, ``graph_break_count``, ``break_reasons``, ``ops_per_graph``."""

    def __init__(self, graphs, breaks, ops):
        self.graphs = graphs
        self.graph_count = len(graphs)
        self.graph_break_count = len(breaks)
        self.break_reasons = breaks
        self.ops_per_graph = ops

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}",
                 f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {sum(len(o) for o in self.ops_per_graph)}"]
        if self.break_reasons:
            lines.append("Break Reasons:")
            lines += [f"  Break Reason {i + 1}: {b}" for i, b in enumerate(self.break_reasons)]
        return "\n".join(lines) + "\n"

    __repr__ = __str__


def explain(fn, *args, **kwargs):
    """Trace ``fn(*args, **kwargs)`` as ``ember.compile`` would and report the graphs and graph
    breaks (``torch._dynamo.explain``; also ``explain(fn)(*args)``). ``fn`` runs once."""
    if not args and not kwargs:
        return lambda *a, **k: explain(fn, *a, **k)
    Module = _module_base()
    module = fn if isinstance(fn, Module) else None
    cf = CompiledFunction(fn, module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GraphBreakWarning)
        cf(*args, **kwargs)
    graphs = cf.graphs
    ops = [[n.kind for n in g.nodes] for g in graphs]
    return ExplainOutput(graphs, list(cf.breaks), ops)
