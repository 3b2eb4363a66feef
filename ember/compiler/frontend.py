"""``ember.compile``: torch.compile's API over the tracing JIT.

A compiled callable traces the function (or Module's forward) on its first call with given
*guards* — input structure, shapes, dtypes and ``requires_grad``, Python scalar arguments, grad
mode, autocast, and for a Module every submodule's training flag and every parameter's and
buffer's identity — optimises the trace (``ember.jit.passes``, parameters kept live) and reuses
it while the guards hold. The first call's result is the tracing run's own eager result.

* Parameters are formals read at every call, so optimizer steps (in-place updates) are seen.
* With no gradient needed the trace runs its array-mode code (kernels on ndarrays). When one is
  needed, the first call also traces the backward pass into the same (joint) graph, which is
  split into a forward and a backward program (``CompiledAutograd``), checked once against eager
  autograd; where that is not possible the forward trace's tensor-mode code runs, every op
  through autograd. Either way ``loss.backward()`` and ``.grad`` accumulation are eager's.
* Python reading a traced tensor as a value it can be guarded on (``bool(t)`` in
  ``if x.sum() > 0``, ``.item()``, ``.tolist()``, ``int(t)``) splits the trace there: the code
  before and after the read runs as compiled segments, the value read guarding what follows
  (``ember.compiler.segments``). Another *graph break* — a tensor index, NumPy conversion, an
  op reading values in Python, a backward pass or optimizer step the capture cannot take, a read
  inside a captured training step — makes the function run eagerly for those guards, with a
  warning naming the user's line. ``fullgraph=True``: either is a ``GraphBreakError``.
* At most ``config.cache_size_limit`` traces per function; further guard sets run eagerly with
  a warning naming the guard that failed.
"""
import builtins
import contextlib
import functools
import gc
import inspect
import warnings

import numpy as np

from ember.autograd.state import STATE
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError
from ember.compiler.step import StepCapture, WholeStep, creates_state
from ember.jit.tracer import Tracer, user_frame
from ember.kernels.runtime.compiler import foreground as _foreground

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



# Whether the collector pauses while a call is traced and compiled: the IR's graphs (values and
# nodes pointing at each other) are many young objects, and the collections they trigger walk
# the whole heap (a GPT step's trace and compile: ~0.2 s of its ~0.5 s in three full
# collections). What the trace leaves unreachable is collected by the next full collection.
PAUSE_GC = True


@contextlib.contextmanager
def _gc_paused():
    """The cyclic collector off for the block (left as it was when already off, or nested)."""
    was = PAUSE_GC and gc.isenabled()
    if was:
        gc.disable()
    try:
        yield
    finally:
        if was:
            # what the block allocated and kept (the graphs, the program) goes to the oldest
            # generation unwalked: a young collection right after would walk all of it
            # (4-6 ms after each first call of a small step); unreachable cycles it left wait
            # for the next full collection (a caller's own frozen objects stay frozen)
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


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
    graph break; ``len()`` is not one (the trace is specialised on the input shapes). Printing
    a traced tensor is one too: a compiled call prints on every call, as eager (and torch)."""

    jit_trace = False   # torch.jit.is_tracing() is False under torch.compile

    breaks_on_display = True

    def __init__(self, name="trace", state=None, parent=None):
        super().__init__(name, state, parent)
        self.breaks = []
        self.captured = []  # (tensor, version) of captured tensors the graph holds as constants
        self.cuts = []      # ember.compiler.segments.Cut: reads the graph is split at
        self.stamps = {}    # id(node) -> the segment (the number of cuts before it)
        self._stamped = 0
        self.grad_mode = STATE.grad_enabled   # the call's grad mode

    segments = False         # True: a read of a value Python can be guarded on is a cut

    def record(self, op, tensors, consts, outputs):
        """An op run under ``no_grad`` inside a function traced with grad mode on, on a tensor
        that requires grad: its outputs are ``detach``ed in the graph (they require no grad in
        eager; the tensor-mode code, whose ops record autograd, would otherwise backpropagate
        through them)."""
        super().record(op, tensors, consts, outputs)
        if STATE.grad_enabled or not self.grad_mode or self.joint_backward or \
                op.name == "detach":
            return
        cap = self.step_capture
        if cap is not None and cap.used:   # an optimizer's update: a step program's writes
            return
        flat = tensors[0] if op.list_input else tensors
        if not any(getattr(t, "_requires_grad", False) for t in flat):
            return
        for o in outputs:
            v = self.env[id(o)][1]
            if v.dtype.kind in "fc":
                d = self.graph.add_node("detach", [v], {}, [(v.dtype, v.shape)]).output
                self.env[id(o)] = (o, d)

    def python_value(self, tensor, what):
        """A read of a traced tensor as a Python value: with ``segments`` on, a ``bool``,
        ``item``, ``tolist``, ``int``, ``float`` or ``index`` read is a cut (the graph is split
        there, the value read guards what follows; ``ember.compiler.segments``), else a
        graph break."""
        from ember.compiler.segments import CUT_READS, Cut, observe
        cap = self.step_capture
        if not (self.segments and what in CUT_READS and not self.joint_backward and
                self._traced(tensor) and not (cap is not None and (cap.used or cap.warmup))):
            return super().python_value(tensor, what)
        for n in self.graph.nodes[self._stamped:]:
            self.stamps[id(n)] = len(self.cuts)
        self._stamped = len(self.graph.nodes)
        alias = self._Tensor._make(tensor._data)
        value = self.known(tensor)
        self.env[id(alias)] = (alias, value)
        brk = GraphBreak(f"converting a tensor to a Python value ({what}())", user_frame())
        self.cuts.append(Cut(what, observe(tensor._data, what), brk, value, alias))
        if self.parent is not None:
            self.parent.python_value(tensor, what)

    def cuts_to_breaks(self):
        """The cuts as graph breaks (the function then runs eagerly for these guards)."""
        self.breaks.extend(c.brk for c in self.cuts)
        self.cuts = []

    def warn(self, what, key):
        if key == "len":
            return
        self.graph_break(what)

    joint_backward = False   # True while ember.compile itself traces the backward pass
    step_capture = None      # ember.compiler.step.StepCapture: backward/step/zero_grad traced

    def capture_backward(self, tensors, grad_tensors, retain_graph, create_graph):
        """None when ``loss.backward()`` was traced into the graph, else why not."""
        cap = self.step_capture
        if cap is None or self.joint_backward:
            return "a backward pass (loss.backward() or autograd.grad)"
        return cap.backward(self, tensors, grad_tensors, retain_graph, create_graph)

    def capture_step(self, opt, closure=None):
        """None when ``opt.step()`` was traced, "" to run it eagerly unrecorded (its state's
        first step: the trace is then discarded), else why it breaks the graph."""
        if self.step_capture is None:
            return f"{type(opt).__name__}.step()"
        return self.step_capture.step(self, opt, closure)

    def capture_zero_grad(self, opt, set_to_none=True):
        if self.step_capture is None:
            return f"{type(opt).__name__}.zero_grad()"
        return self.step_capture.zero_grad(self, opt, set_to_none)

    def untraceable(self, what, cls=None):
        """An op no trace can record: a graph break; the op runs (the trace is discarded)."""
        self.graph_break(what)

    def graph_break(self, reason):
        """Record a break at the user's current line (also called by the autograd engine and
        by optimizers' ``step`` while a compiled function is traced)."""
        if self.joint_backward and reason.startswith("a backward pass"):
            return
        self.breaks.append(GraphBreak(reason, user_frame()))

    def _outside(self, t):
        if self.joint_backward and (self.state.get(id(t)) or (None,))[0] is not t:
            # a saved forward result, unpacked by the engine as a new Tensor over its array
            for known, kv in list(self.env.values()):
                if getattr(known, "_data", None) is t._data and kv.role != "buffer" and \
                        not (kv.node is not None and kv.node.kind == "constant"):
                    self.env[id(t)] = (t, kv)
                    return kv
        n_extra = len(self.extra)
        v = super()._outside(t)
        if v.node is not None and v.node.kind == "constant":
            self.captured.append((t, t._version))
        elif len(self.extra) > n_extra and id(t) in self.param_names:
            # a parameter the function reaches through a Module it names: its path
            # (model.fc1.weight), not "param0"
            g = self.graph
            g._names.discard(v.name)
            v.name = g._fresh(self.param_names[id(t)])
        return v

    param_names = {}   # id(parameter) -> "<variable>.<module path>" (_param_names)


# ---------------------------------------------------------------------------------- guards
_Tensor = None


def _tensor_cls():
    global _Tensor
    if _Tensor is None:
        from ember.tensor import Tensor
        _Tensor = Tensor
    return _Tensor


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


def _all_tensors(args):
    Tensor = _tensor_cls()
    return all(isinstance(a, Tensor) for a in args)


def _aliasing(args):
    """For each tensor among ``args`` (containers walked), the index of its first occurrence,
    when one tensor occurs twice; else None."""
    Tensor = _tensor_cls()
    ids = []

    def walk(x):
        if isinstance(x, Tensor):
            ids.append(id(x))
        elif isinstance(x, (tuple, list)):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)
    walk(args)
    if len(set(ids)) == len(ids):
        return None
    first = {}
    return tuple(first.setdefault(i, k) for k, i in enumerate(ids))


def _walk_key(module):
    """Training flags of every submodule and whether it has hooks, identity and
    requires_grad of every parameter, identity of every buffer (an assigned new Parameter
    retraces; in-place updates do not), walking the tree; and the unique submodules. The first
    item: whether a global module hook is registered (a call of any Module then runs it)."""
    out, seen, stack = [any(_global_hooks())], {}, [module]
    while stack:   # every submodule (a shared one twice: the key only needs to be stable)
        m = stack.pop()
        seen[id(m)] = m
        d = m.__dict__
        stack.extend(c for c in reversed(d["_modules"].values()) if c is not None)
        out.append(m.__class__)
        out.append(d["training"])
        out.append(bool(d["_forward_pre_hooks"] or d["_forward_hooks"] or
                        d.get("_backward_hooks") or d.get("_backward_pre_hooks")))
        for t in d["_parameters"].values():
            out.append(None if t is None else (id(t), t._requires_grad))
        for t in d["_buffers"].values():
            out.append(None if t is None else id(t))
    return tuple(out), list(seen.values())


def _modules_mod():
    from ember.nn.modules import module as m
    return m


def _global_hooks():
    """The dicts of module hooks registered for every Module (``register_module_forward_hook``
    and the like): while one is set, a Module call runs hooks the trace does not hold."""
    m = _modules_mod()
    return (m._global_forward_pre_hooks, m._global_forward_hooks, m._global_backward_pre_hooks,
            m._global_backward_hooks)


_HOOK_FIELDS = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks")


def _unchanged_source(modules):
    """The source of ``unchanged()`` for a module tree and the objects it names: True while
    every module in ``modules`` holds the same class, ``__dict__``, training flag, hook dicts
    (the same objects, each holding hooks or not), children (the same dict, entries and
    order), parameters (the same dict and objects, the same ``requires_grad``) and buffers
    (the same dict and objects) as now, and a global module hook is registered exactly when
    one was. One straight-line function, so that a call reads the tree without walking it in
    Python."""
    names, env = {}, {}

    def ref(obj):
        k = id(obj)
        if k not in names:
            names[k] = f"o{len(names)}"
            env[names[k]] = obj
        return names[k]

    lines = ["def unchanged():", "    try:"]
    env["g"] = _global_hooks()
    lines.append(f"        if {'not ' if any(env['g']) else ''}"
                 f"(g[0] or g[1] or g[2] or g[3]): return False")

    def fail_if(conds):
        for i in range(0, len(conds), 8):
            lines.append(f"        if {' or '.join(conds[i:i + 8])}: return False")

    for m in modules:
        d = m.__dict__
        dn = ref(d)
        hooks = bool(d["_forward_pre_hooks"] or d["_forward_hooks"] or
                     d.get("_backward_hooks") or d.get("_backward_pre_hooks"))
        conds = [f"{ref(m)}.__dict__ is not {dn}",
                 f"{ref(m)}.__class__ is not {ref(m.__class__)}",
                 f'{dn}["training"] is not {d["training"] is True}']
        # the hook dicts by identity (so that a replaced one is seen, and whether the tree's
        # dicts are the counting kind is asked again), then whether any holds a hook
        conds += [f'{dn}["{k}"] is not {ref(d[k])}' if k in d else f'"{k}" in {dn}'
                  for k in _HOOK_FIELDS]
        any_hook = f"({' or '.join(ref(d[k]) for k in _HOOK_FIELDS if k in d)})"
        conds.append(f"not {any_hook}" if hooks else any_hook)
        fail_if(conds)
        for field in ("_modules", "_parameters", "_buffers"):
            items = d[field]
            lines.append(f'        s = {dn}["{field}"]')
            conds = [f"s is not {ref(items)}", f"len(s) != {len(items)}" if items else "s"]
            if field == "_modules" and len(items) > 1:   # a Sequential runs them in order
                conds.append(f"tuple(s) != {tuple(items)!r}")
            for k, v in items.items():
                conds.append(f"s[{k!r}] is not {'None' if v is None else ref(v)}")
                if field == "_parameters" and v is not None:
                    conds.append(f"{ref(v)}._requires_grad is not {v._requires_grad is True}")
            fail_if(conds)
    lines += ["    except (KeyError, TypeError, AttributeError):", "        return False",
              "    return True"]
    return "\n".join(lines), env


def _tracked(modules):
    """Whether every change of the tree that ``_unchanged_source`` reads, but the parameters'
    ``requires_grad``, advances ``ember.nn.modules.module.tree_epoch``: each module's
    ``__dict__``, children, parameter, buffer and hook dicts are the Module's own counting
    kinds (not, say, a plain dict assigned to ``_modules`` or a module built without
    ``Module.__init__``)."""
    mm = _modules_mod()
    attrs, tracked = mm._ModuleAttrs, mm._TrackedDict
    for m in modules:
        d = m.__dict__
        if d.__class__ is not attrs:
            return False
        for field in ("_modules", "_parameters", "_buffers", *_HOOK_FIELDS):
            v = d.get(field)
            if v.__class__ is not tracked and (v is not None or field in
                                               ("_modules", "_parameters", "_buffers")):
                return False
    return all(g.__class__ is tracked for g in _global_hooks())


def _fast_source(params):
    """The source of ``fast(tree)``: True while the tree's change counter stands where the
    last check saw it and each parameter's ``requires_grad`` is what it was (these flags are
    also written by autograd itself, in place, so they are read at every call)."""
    env = {"m": _modules_mod()}
    lines = ["def fast(tree):", "    return (m.tree_epoch == tree.epoch"]
    for i, p in enumerate(params):
        env[f"p{i}"] = p
        lines.append(f"            and p{i}._requires_grad is {p._requires_grad is True}")
    lines[-1] += ")"
    return "\n".join(lines), env


class _ModuleTree:
    """A module's guard key (``_walk_key``), kept while the tree is unchanged and recomputed
    by a walk when it changed. A call first compares ``ember.nn.modules.module.tree_epoch``
    (advanced by every change of a module's fields the key reads, anywhere) with the value the
    last check saw, and the parameters' ``requires_grad`` with theirs (``fast``); only when
    one differs does the generated check run (``unchanged``: no Python loop over the
    submodules), and only when that finds a change is the key rebuilt. A tree that holds a dict
    the counter does not watch (``_tracked``) runs the generated check at every call."""

    __slots__ = ("module", "key", "unchanged", "fast", "epoch", "tracked")

    def __init__(self, module):
        self.module = module
        self._build()

    def _build(self):
        epoch = _modules_mod().tree_epoch   # read before the walk: a change during it counts
        self.key, modules = _walk_key(self.module)
        src, env = _unchanged_source(modules)
        exec(builtins.compile(src, "<ember.compile module guard>", "exec"), env)  # noqa: S102
        self.unchanged = env["unchanged"]
        params = [p for m in modules for p in m.__dict__["_parameters"].values()
                  if p is not None]
        src, env = _fast_source(params)
        exec(builtins.compile(src, "<ember.compile module guard>", "exec"), env)  # noqa: S102
        self.fast = env["fast"]
        self.tracked = _tracked(modules)
        self.epoch = epoch if self.tracked else -1   # the counter never reads -1

    def holds(self):
        """Whether the tree is as the key says (the key is not rebuilt here)."""
        if self.fast(self):
            return True
        epoch = _modules_mod().tree_epoch
        if not self.unchanged():
            return False
        if self.tracked:
            self.epoch = epoch
        return True

    def current(self):
        """The guard key of the module as it is now."""
        if not self.holds():
            self._build()
        return self.key


_TREES_MAX = 64   # module trees a compiled function keeps (object arguments: one per Module)


def _module_key(module, out, trees):
    """Append ``module``'s guard key (``_ModuleTree``); ``trees`` ({id: tree}) keeps the tree
    of each module seen."""
    tree = trees.get(id(module))
    if tree is None or tree.module is not module:
        if len(trees) >= _TREES_MAX:
            trees.clear()
        tree = trees[id(module)] = _ModuleTree(module)
    out.append(tree.current())


_PART_NAMES = ("the grad mode", "the autocast state", "the argument structure",
               "a module's training flag, hooks or a parameter's identity")


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
    __slots__ = ("key", "traced", "captured", "breaks", "eager_reason", "objects", "batch")

    def __init__(self, key, traced=None, captured=(), breaks=(), eager_reason=None):
        self.key = key
        self.traced = traced
        self.captured = list(captured)
        self.breaks = list(breaks)
        self.eager_reason = eager_reason
        self.objects = ()
        self.batch = None   # the batch size it was traced for, when it runs at any batch size

    def valid(self):
        for t, v in self.captured:
            if t._version != v:
                return False
        stale = getattr(self.traced, "stale", None)
        return stale is None or stale() is None


def _is_object(a):
    return not _arg_key(a, [])


def _strip(args, kwargs):
    """The call's arguments with top-level objects (not tensors, containers or scalars)
    replaced by None, and {position or keyword: object}."""
    objects = {}
    if any(_is_object(a) for a in (*args, *kwargs.values())):
        objects = {i: a for i, a in enumerate(args) if _is_object(a)}
        objects.update({k: a for k, a in kwargs.items() if _is_object(a)})
        args = tuple(None if i in objects else a for i, a in enumerate(args))
        kwargs = {k: None if k in objects else a for k, a in kwargs.items()}
    return args, kwargs, objects


def _positional(target):
    def call(*a):
        return target(a)
    call.__name__ = target.__name__
    return call


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


class _Hit:
    """The previous call's guards, checked without building its key: a call with positional
    tensor arguments only whose key equals ``entry.key`` (same classes, shapes, dtypes and
    ``requires_grad``, no tensor passed twice, the same grad mode and autocast state, the
    compiled Module's tree unchanged) runs ``entry`` with no key tuple built, hashed or
    looked up (LeNet-5 at batch 1: ~61k instructions a call before). Anything else takes
    the keyed path, which makes a new one on a hit."""

    __slots__ = ("entry", "n", "grad", "autocast", "sig", "tree", "valid")

    def __init__(self, entry, args, tree):
        self.entry = entry
        self.n = len(args)
        self.grad = STATE.grad_enabled
        self.autocast = STATE.autocast
        self.sig = tuple((a.__class__, a._data.shape, a._data.dtype, a._requires_grad)
                         for a in args)
        self.tree = tree
        # the entry's own check, where it has something to check (captured tensors' versions,
        # a whole step's staleness): its empty form costs a failed attribute lookup per call
        self.valid = entry.valid if entry.captured or \
            getattr(entry.traced, "stale", None) is not None else None

    def holds(self, args):
        if len(args) != self.n or STATE.grad_enabled is not self.grad or \
                STATE.autocast is not self.autocast:
            return False
        for a, (cls, shape, dtype, rg) in zip(args, self.sig):
            if a.__class__ is not cls:
                return False
            d = a._data
            if d.shape != shape or d.dtype is not dtype or a._requires_grad is not rg:
                return False
        if self.n > 1 and len(set(map(id, args))) != self.n:
            return False
        tree, valid = self.tree, self.valid
        return (tree is None or tree.fast(tree) or tree.holds()) and (valid is None or valid())


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
        self._trees = {}     # id(module) -> _ModuleTree of the modules the guard key reads
        self._dynamic = {}   # batch-erased guard key -> entry that runs at any batch size
        self._dynamic_why = None
        self.dynamic_fallbacks = []   # why a trace could not make the batch size symbolic
        self._last = None
        self._hit = None     # _Hit: the previous call's guards, when it ran a plain trace
        self._over_limit = set()
        self.breaks = []          # graph breaks that make the function run eagerly
        self.segment_breaks = []  # graph breaks the trace is split at (compiled segments)
        self._extend = None       # the entry a retrace at a changed read adds its path to
        self.recompiles = []
        self.recompile_limit = None   # compile(recompile_limit=): this function's own limit
        self.backward_fallbacks = []
        self.traces = 0    # traces kept (compiled programs made)
        self.warmups = 0   # calls that ran an optimizer's first step eagerly
        self._warm_eager = False   # a call ran untraced because an optimizer's state was missing
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        _registry().add(self)

    def reset(self):
        self._hit = None
        self._entries.clear()
        self._dynamic.clear()
        self.dynamic_fallbacks.clear()
        self._last = None
        self._over_limit.clear()
        self.breaks.clear()
        self.segment_breaks.clear()
        self.recompiles.clear()

    @property
    def graphs(self):
        out = []
        for e in self._entries.values():
            if isinstance(e.traced, _segments().Segmented):
                out += e.traced.graphs
            elif e.traced is not None:
                out.append(e.traced.graph)
        return out

    @property
    def graph(self):
        e = self._last
        return None if e is None or e.traced is None else e.traced.graph

    @property
    def code(self):
        e = self._last
        return None if e is None or e.traced is None else e.traced.code

    def _key(self, args, kwargs):
        if not kwargs:   # tensors only (the common call): the key _key_general makes, sooner
            Tensor = _tensor_cls()
            parts = []
            for a in args:
                if not isinstance(a, Tensor):
                    return self._key_general(args, kwargs)
                d = a._data
                parts.append((d.shape, d.dtype.str, a._requires_grad))
            parts.append(())
            if len(args) > 1 and len(set(map(id, args))) != len(args):
                parts.append(("aliasing", _aliasing(args)))
            mod = []
            if self.module is not None:
                _module_key(self.module, mod, self._trees)
            return (STATE.grad_enabled, repr(STATE.autocast), tuple(parts), tuple(mod))
        return self._key_general(args, kwargs)

    def _key_general(self, args, kwargs):
        parts, mod = [], []
        ok = True
        for a in (*args, *kwargs.values()):
            n = len(parts)
            if not _arg_key(a, parts):
                if isinstance(a, (tuple, list, dict)):
                    ok = False
                    break
                del parts[n:]   # an object (a Module, an optimizer): guarded by identity
                parts.append(("object", id(a)))
                if isinstance(a, _module_base()):
                    _module_key(a, mod, self._trees)
        parts.append(tuple(kwargs))
        if ok:
            same = _aliasing((*args, *kwargs.values()))
            if same:   # f(a, a): the trace reads one formal for both (f(a, b) must retrace)
                parts.append(("aliasing", same))
        if self.module is not None:
            _module_key(self.module, mod, self._trees)
        return (STATE.grad_enabled, repr(STATE.autocast), tuple(parts) if ok else None,
                tuple(mod))

    def __call__(self, *args, **kwargs):
        if STATE.tracer is not None:   # inside another trace: its tracer records the ops
            return self.fn(*args, **kwargs)
        hit = self._hit
        if hit is not None and not kwargs and hit.holds(args):
            entry = hit.entry
            out = entry.traced(*args)
            if entry.captured:   # the trace's own in-place writes are not a change
                entry.captured = [(t, t._version) for t, _ in entry.captured]
            return out
        # every change of the entries happens below: a hit is kept only where one is found
        self._hit = None
        key = self._key(args, kwargs)
        entry = self._entries.get(key)
        if entry is None and self._dynamic:
            entry = self._dynamic_entry(key, args, kwargs)
        if entry is not None and entry.valid():
            self._last = entry
            if entry.traced is None:
                return self.fn(*args, **kwargs)
            if isinstance(entry.traced, _segmented_cls()):
                return self._run_segmented(entry, args, kwargs)
            if getattr(entry.traced, "verified", True) is False:
                with _foreground():
                    return self._check_step(entry, args, kwargs)
            if entry.objects:
                args, kwargs, _ = _strip(args, kwargs)
            elif not kwargs and key[2] is not None and key[2][-1:] == ((),) and \
                    len(key[2]) == len(args) + 1 and _all_tensors(args):   # no aliasing
                self._hit = _Hit(entry, args, None if self.module is None else
                                 self._trees[id(self.module)])
            out = entry.traced(args, kwargs) if kwargs else entry.traced(*args)
            if entry.captured:   # the trace's own in-place writes are not a change
                entry.captured = [(t, t._version) for t, _ in entry.captured]
            return out
        return self._miss(key, entry, args, kwargs)

    # ---- tracing ------------------------------------------------------------------------
    def _miss(self, key, stale, args, kwargs):
        if stale is not None:
            why = getattr(stale.traced, "stale", None)
            reason = (why and why()) or "a captured tensor was modified in place"
        elif self._dynamic_why is not None:
            reason, self._dynamic_why = self._dynamic_why, None
        elif self._last is not None:
            reason = _describe_change(self._last.key, key, None)
        else:
            reason = None
        if key[2] is None:
            return self._eager(key, "a container argument holding an object that is not a "
                               "tensor, container or Python scalar", args, kwargs)
        limit = config.limit() if self.recompile_limit is None else \
            min(config.limit(), self.recompile_limit)
        if stale is None and len(self._entries) >= limit:
            if key not in self._over_limit:
                self._over_limit.add(key)
                warnings.warn(f"ember.compile: '{self.__name__}' reached the cache size limit "
                              f"({limit}, ember._dynamo.config.cache_size_limit) and "
                              f"runs eagerly for these inputs; the last retrace was because "
                              f"{reason}", RecompileWarning, stacklevel=3)
            return self.fn(*args, **kwargs)
        if reason is not None:
            self.recompiles.append(reason)
            if self.debug:
                print(f"[ember.compile] recompiling '{self.__name__}': {reason}")
        with _gc_paused(), _foreground():
            return self._trace(key, args, kwargs)

    # ---- dynamic batch size ---------------------------------------------------------------
    def _dynamic_entry(self, key, args, kwargs):
        """The entry that runs this call at its batch size without a retrace: one traced for
        the same guards but the batch size (``_make_dynamic``) whose shape guards hold for
        these shapes; None (the reason kept for the recompile) otherwise."""
        b = _key_batch(key)
        if b is None or b < 2 or self.dynamic is False:
            return None
        entry = self._dynamic.get(_batch_key(key))
        if entry is None:
            return None
        sargs, skwargs, _ = _strip(args, kwargs) if entry.objects else (args, kwargs, None)
        for traced, guards in _guarded(entry.traced):
            flat = traced._flat_inputs((sargs, skwargs) if skwargs else sargs)
            arrays = [t._data for t in flat]
            sig = tuple(a.shape for a in arrays)
            if sig in guards.ok:
                continue
            bad = _violations(guards, arrays)
            if bad:
                c, now = bad[0]
                fn, line, src = c[5]
                what = "changed with" if now is not None else "could not be re-checked at"
                self._dynamic_why = (f"a size the trace read in Python {what} the batch "
                                     f"size {b} (traced for {entry.batch}): {c[6]} at {fn}:"
                                     f"{line}: `{src}`")
                return None
            guards.ok.add(sig)
        return entry

    def _make_dynamic(self, entry):
        """Let ``entry`` run at any batch size (the leading dimension of every tensor input)
        when ``dynamic=True`` (its programs must not hold the batch size as a constant) or, with
        ``dynamic=None``, when an entry for the same guards at another batch size exists (torch's
        automatic dynamic): the two traces must be the same program but for the batch size,
        which becomes a ``size`` of a batch input where an attribute holds it (a reshape in a
        backward pass). Otherwise each batch size keeps its own trace and the reason is kept
        in ``dynamic_fallbacks`` (warned once)."""
        if self.dynamic is False or entry.traced is None:
            return
        key = entry.key
        b = _key_batch(key)
        if b is None or b < 2:
            return
        bkey = _batch_key(key)
        if bkey in self._dynamic:
            return
        why = None
        if self.dynamic:
            why = _frozen_batch(entry.traced, b)
        if self.dynamic is None or why is not None:
            prev = [e for e in self._entries.values() if e is not entry and
                    e.traced is not None and e.key[2] is not None and
                    _batch_key(e.key) == bkey and _key_batch(e.key) not in (None, b)]
            if not prev:   # dynamic=None: the first batch size specialises, as torch's;
                return     # dynamic=True: the second one compares the two traces
            else:
                why = _generalise(prev[-1].traced, entry.traced, _key_batch(prev[-1].key), b)
        if why is not None:
            self.dynamic_fallbacks.append(why)
            if len(self.dynamic_fallbacks) == 1 and self.dynamic:   # asked for: say why not
                warnings.warn(f"ember.compile: '{self.__name__}' cannot make the batch size "
                              f"dynamic: {why}; each batch size is traced again",
                              RecompileWarning, stacklevel=4)
            if self.debug:
                print(f"[ember.compile] '{self.__name__}': batch size stays static: {why}")
            return
        entry.batch = b
        self._dynamic[bkey] = entry
        if self.debug:
            print(f"[ember.compile] '{self.__name__}': the batch size is dynamic (traced at {b})")

    def _note_backward(self, why):
        self.backward_fallbacks.append(why)
        if self.debug:
            print(f"[ember.compile] '{self.__name__}': backward runs through eager autograd: "
                  f"{why}")

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
        sargs, skwargs, objects = _strip(args, kwargs)
        if self.module is not None and objects:
            return self._eager(key, "a Module called with an argument that is not a tensor, "
                               "container or Python scalar", args, kwargs)
        if self.module is None and not self._warm_eager and STATE.grad_enabled and \
                self.options.get("whole_step", True) and \
                creates_state(o for _, o in _reached(self.fn, objects)):
            # an optimizer the function reaches has no state yet: its first step would run
            # eagerly (StepCapture.warmup) and the trace be thrown away, so the call runs
            # untraced (once: an optimizer the function does not step keeps no state)
            self._warm_eager = True
            self.warmups += 1
            if self.debug:
                print(f"[ember.compile] '{self.__name__}': an optimizer's state is not created "
                      "yet: this call runs eagerly; the next call traces the whole step")
            return self.fn(*args, **kwargs)
        if self.module is not None:
            target = _KwargsCall(self.module) if kwargs else self.module
        elif objects:   # object arguments are the trace's Python values (guarded by identity)
            fn = self.fn

            def target(a, k=None):
                a = tuple(objects.get(i, x) for i, x in enumerate(a))
                k = {n: objects.get(n, x) for n, x in (k or {}).items()}
                return fn(*a, **k)
            target.__name__ = self.__name__
            args, kwargs = sargs, skwargs
            if not kwargs:
                target = _positional(target)
        else:
            fn = self.fn
            target = (lambda a, k: fn(*a, **k)) if kwargs else fn
        example = (tuple(args), dict(kwargs)) if kwargs else tuple(args)
        name = self.__name__ if self.module is None else type(self.module).__name__
        joint = _JointRecorder() if STATE.grad_enabled and self.options.get(
            "compiled_backward", True) else None
        if joint is not None:
            joint.nondiff = bool(self.options.get("nondiff_outputs", False))
        cap = StepCapture() if self.options.get("whole_step", True) else None

        names, buffers = _param_names(self.fn, objects) if self.module is None else ({}, {})

        segments = not self.fullgraph and self.options.get("segments", True)

        def make_tracer(name, state, *a):
            # a compiled function's captured buffers (batch norm's running statistics) are
            # state formals as a compiled Module's: read and written at every call, restored
            # with the parameters by the step's check, never frozen constants
            for k, v in buffers.items():
                state.setdefault(k, v)
            t = CompileTracer(name, state, *a)
            t.step_capture = cap
            t.param_names = names
            t.segments = segments
            return t

        def after(tracer, out):
            if tracer.cuts:
                if tracer.breaks or (cap is not None and (cap.used or cap.warmup)):
                    # a training step with a read in it, or another break: eager, reported
                    tracer.cuts_to_breaks()
                else:   # the graph is split at the reads: no joint backward
                    return [], [c.alias for c in tracer.cuts]
            if cap is not None and (cap.used or cap.warmup):
                got = cap.finish(tracer, out)
                # the optimizer's first step ran eagerly: nothing of this run is kept
                return None if cap.warmup and not tracer.breaks else got
            return joint(tracer, out) if joint is not None else ([], [])
        traced, out, flat_out, tracer = record(target, example, make_tracer, strict=False,
                                               name=name, after=after)
        if tracer.cuts and tracer.breaks:
            tracer.cuts_to_breaks()
        if tracer.breaks:
            self._record_breaks(key, tracer.breaks)
            return out
        if tracer.cuts:
            return self._segmented(key, traced, tracer, len(flat_out), objects, out)
        if cap is not None and cap.warmup:   # the optimizer's state was just created
            self.warmups += 1
            if self.debug:
                print(f"[ember.compile] '{self.__name__}': first optimizer step ran eagerly "
                      "(its state created); the next call traces the whole step")
            return out
        if cap is not None and cap.used:
            return self._whole_step(key, traced, cap, len(flat_out), tracer, objects, out)
        self.traces += 1
        backward = None
        if joint is not None and joint.ok:
            try:
                backward, why = joint.split(traced, self.__name__)
            except Exception as e:  # noqa: BLE001 - the backward stays eager's
                backward, why = None, f"splitting the joint graph failed ({type(e).__name__}: " \
                    f"{e})"
            if backward is None:
                self._note_backward(why)
        elif joint is not None and joint.why:
            self._note_backward(joint.why)
        if joint is not None:   # the forward alone: outputs past the call's own are the joint's
            traced = _forward_only(traced, joint)
        fast = optimize(traced, freeze_params=False)
        # calls that need no gradient run the inference plan of the graph frozen on the state's
        # current values (ember.jit.plan_live: rebuilt after a parameter or buffer changes)
        fast.inference_plan = bool(self.options.get("inference_plan", True))
        if backward is not None:
            backward.fallback = fast
            backward._diff = joint.diff
            why = _verify(backward, args, kwargs)
            if why is None:
                fast = backward
            else:
                self._note_backward(why)
        entry = self._entries[key] = self._last = _Entry(
            key, fast, [(t, t._version) for t, _ in tracer.captured])  # after the run's writes
        entry.objects = list(objects.values())   # alive: their ids stay theirs
        self._make_dynamic(entry)
        if self.debug:
            groups = fast.graph.find_nodes("fusion_group")
            print(f"[ember.compile] traced '{self.__name__}': {len(fast.graph.nodes)} nodes, "
                  f"{len(groups)} fusion groups\n{fast.graph}")
        return out

    # ---- graph breaks as compiled segments ---------------------------------------------
    def _segmented(self, key, traced, tracer, n_out, objects, out):
        """Keep the trace split at the values Python read (``ember.compiler.segments``): a new
        entry for ``key``, or one more path of its entry."""
        seg = _segments()
        cuts = tracer.cuts
        try:
            path = seg.Path(traced, tracer.stamps, cuts, n_out, self.__name__)
        except Exception as e:  # noqa: BLE001 - the function runs eagerly, reported
            self._record_breaks(key, [c.brk for c in cuts] + [GraphBreak(
                f"splitting the trace at its graph breaks failed ({type(e).__name__}: {e})",
                (cuts[0].brk.filename, cuts[0].brk.lineno, cuts[0].brk.source))])
            return out
        entry, self._extend = self._extend, None
        if entry is None or entry.key != key or self._entries.get(key) is not entry:
            # a first trace, or the paths' captured constants changed: the old paths go
            entry = self._entries[key] = _Entry(key, seg.Segmented())
        # the versions after this run's own writes (the other paths' included)
        entry.captured = [(t, t._version) for t, _ in entry.captured + tracer.captured]
        entry.objects = list(objects.values())
        entry.traced.paths.insert(0, path)
        self._last = entry
        self.traces += 1
        self.segment_breaks.extend(c.brk for c in cuts)
        if self.debug:
            for c in cuts:
                print(f"[ember.compile] graph break in '{self.__name__}': {c.brk} (the code "
                      f"before and after it runs compiled; {c.what}() read {c.key!r})")
            print(f"[ember.compile] traced '{self.__name__}' as {len(path.graphs)} compiled "
                  "segments\n" + "\n".join(str(g) for g in path.graphs))
        return out

    def _run_segmented(self, entry, args, kwargs):
        """A call of a split trace: a path whose reads all agree, else a new path traced (the
        state a tried path changed restored first), or eager beyond the cache size limit."""
        seg = entry.traced
        sargs, skwargs, _ = _strip(args, kwargs) if entry.objects else (args, kwargs, None)
        call_args = (sargs, skwargs) if skwargs else sargs
        ok, got = seg.run(call_args)
        if ok:
            if entry.captured:
                entry.captured = [(t, t._version) for t, _ in entry.captured]
            return got
        where = next((p.cuts[len(got) - 1] for p in seg.paths
                      if p.keys[:len(got) - 1] == got[:-1] and len(p.keys) >= len(got)), None)
        reason = (f"a value Python read changed: {got[-1]!r} (traced for {where.key!r}) at "
                  f"{where.brk.filename}:{where.brk.lineno}: `{where.brk.source}`"
                  if where is not None else "a value Python read changed")
        limit = config.limit() if self.recompile_limit is None else \
            min(config.limit(), self.recompile_limit)
        if len(seg.paths) >= limit:
            if entry.key not in self._over_limit:
                self._over_limit.add(entry.key)
                warnings.warn(f"ember.compile: '{self.__name__}' reached the cache size limit "
                              f"({limit}, ember._dynamo.config.cache_size_limit) of paths "
                              f"through its graph breaks and runs eagerly for these values; "
                              f"the last retrace was because {reason}", RecompileWarning,
                              stacklevel=3)
            return self.fn(*args, **kwargs)
        self.recompiles.append(reason)
        if self.debug:
            print(f"[ember.compile] recompiling '{self.__name__}': {reason}")
        self._extend = entry    # the new path joins this entry's
        try:
            return self._trace(entry.key, args, kwargs)
        finally:
            self._extend = None

    def _check_step(self, entry, args, kwargs):
        """The first run of a captured step: the program, then (state restored) the function
        eagerly; their outputs, parameters, optimizer state and gradients must agree, else the
        step runs eagerly from now on (Python code changed tensors outside the traced ops,
        e.g. scaling ``.grad`` through its array). Eager's results are kept."""
        runner = entry.traced
        snap = runner.snapshot()
        sargs, skwargs, _ = _strip(args, kwargs) if entry.objects else (args, kwargs, None)
        try:
            got = runner.observe(runner(sargs, skwargs) if skwargs else runner(*sargs))
        except Exception as e:  # noqa: BLE001 - reported as a break below
            got, why = None, f"running it failed ({type(e).__name__}: {e})"
        runner.restore(snap)
        out = self.fn(*args, **kwargs)
        runner.verified = True
        if got is not None:
            why = runner.differ(got, runner.observe(out, copy=False))
        if why is not None:
            self._record_breaks(entry.key, [GraphBreak(
                f"the captured training step differs from eager ({why}): Python code changed "
                "tensors outside the traced ops (e.g. scaling .grad through its array)",
                (self.fn.__code__.co_filename if hasattr(self.fn, "__code__") else "<unknown>",
                 getattr(getattr(self.fn, "__code__", None), "co_firstlineno", 0),
                 self.__name__))])
        return out

    def _whole_step(self, key, traced, cap, n_out, tracer, objects, out):
        """Keep the traced training step (backward and optimizer update in the graph) as one
        program (``ember.compiler.step.WholeStep``)."""
        try:
            runner = WholeStep(traced, cap, n_out, self.__name__)
        except Exception as e:  # noqa: BLE001 - the step stays eager's, reported as a break
            self._record_breaks(key, [GraphBreak(
                f"compiling the captured training step failed ({type(e).__name__}: {e})",
                user_frame())])
            return out
        self.traces += 1
        entry = self._entries[key] = self._last = _Entry(
            key, runner, [(t, t._version) for t, _ in tracer.captured])
        entry.objects = list(objects.values())
        self._make_dynamic(entry)
        if self.debug:
            groups = runner.graph.find_nodes("fusion_group")
            print(f"[ember.compile] traced the training step '{self.__name__}': "
                  f"{len(runner.graph.nodes)} nodes, {len(groups)} fusion groups\n"
                  f"{runner.graph}")
        return out


# ---------------------------------------------------------------------------- dynamic batch
def _is_tensor_part(p):
    return isinstance(p, tuple) and len(p) == 3 and isinstance(p[0], tuple) and \
        isinstance(p[1], str)


def _key_batch(key):
    """The leading dimension every tensor argument of guard key ``key`` shares; None when
    there is no tensor argument, a 0-d one, or their leading dimensions differ."""
    if key[2] is None:
        return None
    dims = {p[0][0] if p[0] else None for p in key[2] if _is_tensor_part(p)}
    return dims.pop() if len(dims) == 1 else None


def _batch_key(key):
    """``key`` with every tensor argument's leading dimension erased."""
    parts = tuple(((None,) + p[0][1:], p[1], p[2]) if _is_tensor_part(p) else p
                  for p in key[2])
    return key[0], key[1], parts, key[3]


def _guarded(runner):
    """[(traced callable, its ShapeGuards)] behind a compiled entry, each guard set once."""
    out = []
    for t in (runner, getattr(runner, "fallback", None), getattr(runner, "_traced", None)):
        g = getattr(t, "_guards", None)
        if g is not None and all(g is not o for _, o in out):
            out.append((t, g))
    return out


def _violations(guards, arrays):
    """``guards.violations`` for a call's input arrays: formals of the guard graph between the
    inputs and the state (a joint trace's cotangents) get placeholders when no guard reads
    them; a guard that reads one counts as violated (the call retraces)."""
    g = guards.graph
    if g is not None:
        extra = g.inputs[len(arrays):len(g.inputs) - len(guards.state)]
        if any(v.uses for v in extra):
            return [(c, None) for c in guards.checks]
        arrays = list(arrays) + [np.empty((0,))] * len(extra)
    return guards.violations(arrays)


def _programs(runner):
    """[(label, graph, recompile)] of a compiled entry's generated programs."""
    if isinstance(runner, CompiledAutograd):   # (both programs: one shared arena)
        return [("the forward", runner.graph, runner.compile),
                ("the backward", runner.backward_graph, runner.compile)] + \
            _programs(runner.fallback)
    if isinstance(runner, WholeStep):
        return [("the training step", runner.graph, runner.compile)]
    return [("the forward (no gradient)", runner.graph, runner.recompile)]


def _all_nodes(g):
    for n in g.nodes:
        yield g, n
        sub = n.attrs.get("graph") if n.kind == "fusion_group" else None
        if sub is not None:
            yield from _all_nodes(sub)


def _holds(x, b):
    """Whether attribute ``x`` holds ``b`` or a multiple of it."""
    if isinstance(x, (list, tuple)):
        return any(_holds(y, b) for y in x)
    return type(x) is int and x != 0 and x % b == 0


def _where(n):
    return f" (from {n.source})" if n.source else ""


def _frozen_batch(runner, b):
    """Why ``runner``'s programs, traced at batch size ``b``, may hold it as a constant (an
    int attribute equal to ``b`` or a multiple of it, a constant array with such a dimension);
    None when none does (a size Python read as a number is a shape guard, checked per call).
    Conservative: a feature size equal to ``b`` counts too (the next batch size then compares
    two traces instead)."""
    for label, g, _ in _programs(runner):
        for owner, n in _all_nodes(g):
            if n.kind == "constant":
                arr = owner.constants.get(n.attrs.get("name"))
                if arr is not None and _holds(arr.shape, b):
                    return (f"{label} holds a constant of shape {list(arr.shape)} at batch "
                            f"size {b}{_where(n)}")
                continue
            for k, v in n.attrs.items():
                if k != "graph" and _holds(v, b):
                    return f"{label}'s {n.kind}({k}={v!r}) holds the batch size {b}{_where(n)}"
    return None


def _generalise(old, new, b1, b2):
    """None when compiled entry ``new`` (traced at batch size ``b2``) runs at every batch size:
    its programs equal ``old``'s (traced at ``b1``) but for the batch size; an attribute that
    is ``b1`` in one and ``b2`` in the other (a reshape's shape in a backward pass) becomes the
    ``size`` of a batch formal, and the program is regenerated. Else why not, in words."""
    from ember.jit.ir import SymRef
    if type(old) is not type(new):
        return f"the traces at batch sizes {b1} and {b2} differ in kind"
    po, pn = _programs(old), _programs(new)
    if len(po) != len(pn):
        return f"the traces at batch sizes {b1} and {b2} differ"
    plan = []
    for (label, go, _), (_, gn, regen) in zip(po, pn):
        edits = []
        why = _diff_graph(go, gn, b1, b2, edits, label)
        if why is not None:
            return why
        if edits:   # an input whose leading dimension is the batch in both traces
            formal = next((v for u, v in zip(go.inputs, gn.inputs) if v.role == "input" and
                           v.shape and v.shape[0] == b2 and u.shape[0] == b1), None)
            if formal is None:
                n, k, _ = edits[0]
                return (f"{label}'s {n.kind}({k}=...) holds the batch size and no input of it "
                        f"has the batch as its leading dimension")
            plan.append((gn, formal, edits, regen))
    for gn, formal, edits, regen in plan:
        size = gn.create_node("size", [formal], {"dim": 0}, [(np.dtype(np.int64), ())])
        gn.insert(size, index=0)
        sv = size.output
        for n, k, pairs in edits:
            n.attrs[k] = _symbolise(n.attrs[k], pairs, SymRef(sv))
            sv.uses.append(n)
        gn.lint()
    for regen in dict.fromkeys(regen for *_, regen in plan):   # (one per runner)
        regen()
    return None


def _diff_graph(go, gn, b1, b2, edits, label):
    """Compare two traces node by node (``edits``: the attributes to make symbolic)."""
    if len(go.inputs) != len(gn.inputs) or len(go.nodes) != len(gn.nodes) or \
            len(go.outputs) != len(gn.outputs):
        return f"{label} differs between batch sizes {b1} and {b2} (other ops)"
    for vo, vn in zip(go.inputs, gn.inputs):
        if vo.name != vn.name or vo.dtype != vn.dtype or len(vo.shape) != len(vn.shape) or \
                any(x != y and (x, y) != (b1, b2) for x, y in zip(vo.shape, vn.shape)):
            return (f"{label}'s input {vn.ref} is {vn.type_str} at batch size {b2} and "
                    f"{vo.type_str} at {b1}")
    if [v.name for v in go.outputs] != [v.name for v in gn.outputs]:
        return f"{label} differs between batch sizes {b1} and {b2} (other outputs)"
    for no, nn in zip(go.nodes, gn.nodes):
        if no.kind != nn.kind or [o.name for o in no.outputs] != [o.name for o in nn.outputs] \
                or _args_key(no.args) != _args_key(nn.args) or set(no.attrs) != set(nn.attrs):
            return (f"{label} differs between batch sizes {b1} and {b2}: `{_fmt_node(no)}` "
                    f"at {b1}, `{_fmt_node(nn)}` at {b2}{_where(nn)}")
        if nn.kind == "constant":
            a = go.constants.get(no.attrs.get("name"))
            c = gn.constants.get(nn.attrs.get("name"))
            if a is None or c is None or a.shape != c.shape or a.dtype != c.dtype or \
                    not np.array_equal(a, c, equal_nan=True):
                return (f"{label} holds a constant that depends on the batch size (shape "
                        f"{list(c.shape) if c is not None else '?'} at batch size {b2}){_where(nn)}")
            continue
        for k in nn.attrs:
            x, y = no.attrs[k], nn.attrs[k]
            if k == "graph" and nn.kind == "fusion_group":
                inner = []
                why = _diff_graph(x, y, b1, b2, inner, label)
                if why is None and inner:
                    why = (f"{label}'s fused {inner[0][0].kind}({inner[0][1]}=...) holds the "
                           f"batch size{_where(nn)}")
                if why is not None:
                    return why
                continue
            if _attr_key(x) == _attr_key(y):
                continue
            pairs = _batch_positions(x, y, b1, b2)
            if pairs is None:
                return (f"{label}'s {nn.kind}({k}=...) is {y!r} at batch size {b2} and {x!r} "
                        f"at {b1}{_where(nn)}")
            edits.append((nn, k, pairs))
    return None


def _fmt_node(n):
    from ember.jit.ir import _fmt_node as fmt
    return fmt(n, "fusion_group" if n.kind == "fusion_group" else None)


def _args_key(args):
    from ember.jit.ir import SymRef, Value
    if isinstance(args, Value):
        return ("%", args.name)
    if isinstance(args, SymRef):
        return ("int", args.value.name)
    if isinstance(args, (list, tuple)):
        return (type(args).__name__, tuple(_args_key(a) for a in args))
    return repr(args)


_attr_key = _args_key


def _batch_positions(x, y, b1, b2, path=()):
    """The paths inside attribute ``y`` where ``x`` holds ``b1`` and ``y`` ``b2`` (every other
    element equal); None when they differ otherwise."""
    if type(x) is int and type(y) is int:
        if x == y:
            return []
        return [path] if (x, y) == (b1, b2) else None
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)) and \
            type(x) is type(y) and len(x) == len(y):
        out = []
        for i, (p, q) in enumerate(zip(x, y)):
            sub = _batch_positions(p, q, b1, b2, path + (i,))
            if sub is None:
                return None
            out.extend(sub)
        return out
    return [] if _attr_key(x) == _attr_key(y) else None


def _symbolise(v, paths, ref):
    if () in paths:
        return ref
    if isinstance(v, (list, tuple)):
        items = [_symbolise(x, [p[1:] for p in paths if p and p[0] == i], ref)
                 for i, x in enumerate(v)]
        return type(v)(items)
    return v


def _param_names(fn, objects):
    """({id(parameter): name}, {id(buffer): (buffer, name, "buffer")}) for the Modules a
    compiled function reaches by name — its globals, closure cells, default arguments and
    object arguments —, each parameter and buffer named ``<variable>.<path in the module>``
    (``model.fc1.weight``), so that a captured parameter's formal reads as what it is rather
    than ``param0``; the buffers become the trace's state formals (``record``'s ``state``)."""
    Module = _module_base()
    out, buffers = {}, {}
    for var, obj in _reached(fn, objects):
        if isinstance(obj, Module):
            for path, p in obj.named_parameters():
                out.setdefault(id(p), f"{var}.{path}")
            for path, b in obj.named_buffers():
                if b is not None:
                    buffers.setdefault(id(b), (b, f"{var}.{path}", "buffer"))
    return out, buffers


def _reached(fn, objects):
    """[(name, object)]: what a compiled function reaches by name (its globals, closure cells,
    default arguments) and its object arguments (``objects``)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    found = []
    glob = getattr(fn, "__globals__", {})
    found += [(n, glob.get(n)) for n in code.co_names]
    for n, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            found.append((n, cell.cell_contents))
        except ValueError:   # an empty cell
            pass
    argnames = code.co_varnames[:code.co_argcount]
    defaults = getattr(fn, "__defaults__", None) or ()
    found += list(zip(argnames[len(argnames) - len(defaults):], defaults))
    found += list((getattr(fn, "__kwdefaults__", None) or {}).items())
    found += [(argnames[k] if isinstance(k, int) and k < len(argnames) else str(k), o)
              for k, o in objects.items()]
    return found


def _segments():
    from ember.compiler import segments
    return segments


_Segmented = None


def _segmented_cls():
    global _Segmented
    if _Segmented is None:
        _Segmented = _segments().Segmented
    return _Segmented


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
    for arg, value, kinds in (("fullgraph", fullgraph, (bool,)), ("disable", disable, (bool,)),
                              ("mode", mode, (str, type(None))),
                              ("dynamic", dynamic, (bool, type(None)))):
        if not isinstance(value, kinds):
            raise EmberTypeError(f"ember.compile: {arg} must be {_kind_names(kinds)}, got "
                                 f"{type(value).__name__}")
    if recompile_limit is not None and (not isinstance(recompile_limit, int) or
                                        isinstance(recompile_limit, bool) or
                                        recompile_limit < 1):
        raise EmberTypeError(f"ember.compile: recompile_limit must be a positive int, got "
                             f"{recompile_limit!r}")
    if callable(backend) and not isinstance(backend, str):
        raise InvalidBackend(f"ember.compile: backend={backend!r}: ember compiles with its own "
                             f"backend only (one of {', '.join(BACKENDS)})")
    if not isinstance(backend, str) or backend not in BACKENDS:
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
    kw = dict(fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
              options=options, disable=disable, recompile_limit=recompile_limit)
    if model is None:
        return functools.partial(_compile_one, **kw)
    return _compile_one(model, **kw)


def _kind_names(kinds):
    return " or ".join("None" if k is type(None) else k.__name__ for k in kinds)


def _compile_one(model, *, fullgraph, dynamic, backend, mode, options, disable,
                 recompile_limit):
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
        cf.recompile_limit = recompile_limit
        return _optimized_module_cls()(model, cf)
    cf = CompiledFunction(model, None, fullgraph, dynamic, mode, options)
    cf.recompile_limit = recompile_limit
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
    ``graph_count``, ``graph_break_count``, ``break_reasons``, ``op_count``, ``ops_per_graph``."""

    def __init__(self, graphs, breaks, ops):
        self.graphs = graphs
        self.graph_count = len(graphs)
        self.graph_break_count = len(breaks)
        self.break_reasons = breaks
        self.ops_per_graph = ops
        self.op_count = sum(len(o) for o in ops)

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}",
                 f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}"]
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
    return ExplainOutput(graphs, list(cf.segment_breaks) + list(cf.breaks), ops)


# ---------------------------------------------------------------------------------- backward
class _JointRecorder:
    """``record``'s ``after`` hook: with the forward traced, run the autograd engine over it
    with the tracer still on (``create_graph=True``, so every gradient sum is a dispatched op),
    seeded by cotangent formals: the backward pass becomes IR in the same (joint) graph."""

    def __init__(self):
        self.ok = False
        self.why = None
        self.diff = None       # with nondiff: which outputs require grad (None: all)

    nondiff = False   # True: outputs that do not require grad may stand beside ones that do

    def __call__(self, tracer, out):
        from ember.autograd import grad
        from ember.jit.traced import flatten
        Tensor = _tensor_cls()
        flat_out = []
        try:
            flatten(out, "output", flat_out, [], [])
        except Exception:  # noqa: BLE001 - the forward trace reports it
            return [], []
        self.n_out = len(flat_out)
        if tracer.breaks or not flat_out:
            return [], []
        diff = [o._requires_grad for o in flat_out]
        if not all(diff):
            if any(diff) and not self.nondiff:
                self.why = "an output that does not require grad beside one that does"
            if not any(diff) or not self.nondiff:
                return [], []
            self.diff = diff   # the outputs that get a gradient (the others none)
            flat_out = [o for o, d in zip(flat_out, diff) if d]
        if any(o._data.dtype.kind != "f" for o in flat_out):
            self.why = "an output that is not real floating point"
            return [], []
        g = tracer.graph
        for t, v in list(tracer.env.values()):
            if v.node is None or v.node.kind == "constant":
                continue
            fn = getattr(t, "grad_fn", None)
            if getattr(t, "_hooks", None) or (fn is not None and fn._pre_hooks):
                tracer.graph_break("a hook registered on a tensor the function computes (the "
                                   "trace does not record hooks)")
                return [], []
        by_value = {id(v): t for t, v in tracer.env.values() if v.node is None}
        needs = [(v, by_value[id(v)]) for v in g.inputs
                 if id(v) in by_value and by_value[id(v)]._requires_grad]
        if not needs:
            return [], []
        rng = np.random.default_rng(0)
        cot = [Tensor._make(rng.standard_normal(o._data.shape).astype(o._data.dtype))
               for o in flat_out]
        for i, c in enumerate(cot):
            tracer.add_input(c, f"grad_out{i}")
        self.fwd_nodes = {id(n) for n in g.nodes}
        n_breaks = len(tracer.breaks)
        tracer.joint_backward = True
        quiet = _quiet_hooks([t for _, t in needs])
        try:
            grads = grad(flat_out, [t for _, t in needs], cot, create_graph=True,
                         allow_unused=True)
        except Exception as e:  # noqa: BLE001 - the backward stays eager's
            self.why = f"tracing the backward pass failed ({type(e).__name__}: {e})"
            return [], []
        finally:
            tracer.joint_backward = False
            quiet()
        if len(tracer.breaks) > n_breaks:
            self.why = "the backward pass " + "; ".join(str(b) for b in tracer.breaks[n_breaks:])
            del tracer.breaks[n_breaks:]
            return [], []
        kept = [(v, gr) for (v, _), gr in zip(needs, grads) if gr is not None]
        self.grad_formals = [v for v, _ in kept]
        self.cot_values = [tracer.known(c) for c in cot]
        self.ok = True
        return cot, [gr for _, gr in kept]

    def split(self, traced, name):
        """(runner, None) or (None, why): the joint graph split into a forward program (the
        call's outputs, then the values the backward reads) and a backward program
        (cotangents and saved values -> gradients of the formals that require grad)."""
        from ember.compiler.partition import partition
        from ember.jit.passes import dce, run_passes
        g = traced.graph
        n_out = self.n_out
        cot = {id(v) for v in self.cot_values}
        fwd = [n for n in g.nodes if id(n) in self.fwd_nodes]
        bwd = [n for n in g.nodes if id(n) not in self.fwd_nodes]
        if any(n.kind in ("copy_", "python_function") or _is_random(n) for n in bwd):
            return None, "the backward pass writes in place, draws random numbers or calls a " \
                         "custom Function"
        fwd_ids = {id(n) for n in fwd}
        saved, seen = [], set()

        def note(v):
            if id(v) in seen or id(v) in cot:
                return
            if v.node is None or id(v.node) in fwd_ids:
                seen.add(id(v))
                saved.append(v)
        for n in bwd:
            for v in n.inputs:
                note(v)
        grad_outs = g.outputs[n_out:]
        for v in grad_outs:
            note(v)
        formals = g.inputs
        saved, recompute, rebuilt = partition(fwd, saved,
                                              [v for v in formals if id(v) not in cot])
        saved = [v for v in saved if v.node is None] + [v for v in saved if v.node is not None]
        pos = {id(v): i for i, v in enumerate(v for v in formals if id(v) not in cot)}
        fnames, bnames = _names(fwd) - _names(recompute), _names(bwd)
        # forward program: formals without the cotangents -> outputs + saved node values
        gf = g.copy()
        fmap = {v.name: v for v in gf.values()}
        saved_nodes = [v for v in saved if v.node is not None]
        gf.outputs = [fmap[v.name] for v in g.outputs[:n_out]] + \
            [fmap[v.name] for v in saved_nodes]
        _drop(gf, bnames)
        gf.inputs = [fmap[v.name] for v in formals if id(v) not in cot]
        dce(gf)
        gf.lint()
        # backward program: cotangents + saved -> gradients
        gb = g.copy()
        bmap = {v.name: v for v in gb.values()}
        new = {}
        for v in saved:
            # a saved parameter 2.weight is %saved_self.2.weight (not %saved_2.weight
            # beside the saved value %saved_2), as the forward prints it (Value.ref)
            nv = gb.add_input("saved_" + v.ref[1:], v.dtype, v.shape)
            bmap[v.name].replace_all_uses_with(nv)
            new[v.name] = nv
        gb.outputs = [new.get(v.name, bmap[v.name]) for v in grad_outs]
        again = _names(recompute)
        for v, kind, args in rebuilt:   # computed from its node's other values (at its node)
            w = bmap[v.name]
            args = [new.get(a.name, bmap[a.name]) for a in args]
            m = gb.add_node(kind, args, out_types=[(w.dtype, w.shape)], after=w.node)
            w.replace_all_uses_with(m.outputs[0])
            again.add(m.outputs[0].name)
        _drop(gb, fnames)
        _sink_recomputed(gb, again)
        gb.inputs = [bmap[v.name] for v in self.cot_values] + [new[v.name] for v in saved]
        dce(gb)
        gb.lint()
        gf = run_passes(gf)
        gb = run_passes(gb)
        runner = CompiledAutograd(traced, gf, gb, n_out,
                                  [pos[id(v)] for v in saved if v.node is None],
                                  len(saved_nodes), [pos[id(v)] for v in self.grad_formals],
                                  len(self.cot_values))
        return runner, None


def _quiet_hooks(tensors):
    """Detach the user's hooks from ``tensors`` (leaf hooks, their grad_fn's pre-hooks) while
    ember.compile runs its own backward passes; returns the function that restores them."""
    saved = []
    for t in tensors:
        saved.append((t, "_hooks", t._hooks))
        t._hooks = None
        fn = t.grad_fn
        if fn is not None and fn._pre_hooks:
            saved.append((fn, "_pre_hooks", fn._pre_hooks))
            fn._pre_hooks = type(fn._pre_hooks)()

    def restore():
        for obj, attr, val in saved:
            setattr(obj, attr, val)
    return restore


def _is_random(n):
    try:
        return bool(getattr(n.op, "random", False))
    except Exception:  # noqa: BLE001 - constant, fusion_group, ...: not an op record
        return False


def _names(nodes):
    return {o.name for n in nodes for o in n.outputs}


def _sink_recomputed(g, names):
    """Move the nodes of ``g`` defining ``names`` (the forward nodes a backward program
    recomputes, first in its order) each to just before its first reader, so a recomputed
    value lives only while the backward needs it."""
    if not names:
        return
    later = {id(n): n for n in g.nodes if any(o.name in names for o in n.outputs)}
    order = []

    def place(n):
        if later.pop(id(n), None) is None:
            return
        for v in n.inputs:
            if v.node is not None:
                place(v.node)
        order.append(n)
    for n in list(g.nodes):
        if id(n) in later:
            continue
        for v in n.inputs:
            if v.node is not None:
                place(v.node)
        order.append(n)
    order.extend(later.values())   # read by nothing: dce removes them
    g.nodes[:] = order


def _drop(g, names):
    """Remove the nodes of ``g`` defining ``names`` (last first: each one's readers go first)."""
    for n in reversed(list(g.nodes)):
        if any(o.name in names for o in n.outputs):
            g.remove(n)


def _forward_only(traced, joint):
    """The joint trace without the backward: outputs the call's own, cotangent formals gone."""
    from ember.jit.passes import dce
    from ember.jit.traced import TracedFunction, TracedModule
    g = traced.graph.copy()
    n_out = getattr(joint, "n_out", len(g.outputs))
    g.outputs = g.outputs[:n_out]
    cot = {v.name for v in getattr(joint, "cot_values", ())}
    if cot:
        _drop(g, _names(n for n in traced.graph.nodes if id(n) not in joint.fwd_nodes))
        n_in = traced._n_inputs
        g.inputs = g.inputs[:n_in] + [v for v in g.inputs[n_in:] if v.name not in cot]
    dce(g)
    g.lint()
    if isinstance(traced, TracedModule):
        out = TracedModule(traced.module, g, traced._in_spec, traced._out_spec, traced._n_inputs,
                           traced._names, traced.name)
    else:
        out = TracedFunction(g, traced._in_spec, traced._out_spec, traced._n_inputs,
                             traced.state_tensors(), traced.name)
        out.module = getattr(traced, "module", None)
    out.traced_random = getattr(traced, "traced_random", False)
    out._guards = getattr(traced, "_guards", None)
    return out


class CompiledAutograd:
    """A compiled forward whose backward is compiled too: the forward program runs in array
    mode inside an autograd Function whose backward runs the backward program (``graph`` /
    ``backward_graph``; ``code`` / ``backward_code``). Calls that need no gradient, run
    inside another trace or under ``create_graph`` needs take ``fallback`` (the forward-only
    trace: array-mode code, or tensor-mode code with eager autograd)."""

    def __init__(self, traced, gf, gb, n_out, saved_formals, n_saved, grad_pos, n_cot):
        self.graph = gf
        self.backward_graph = gb
        self.name = traced.name
        self.compile()
        self._n_out = n_out
        self._saved_formals = saved_formals   # formal positions the backward reads
        self._n_saved = n_saved
        self._grad_pos = grad_pos             # formal position of each gradient output
        self._traced = traced                 # the joint trace: call structure, bindings
        self.fallback = None
        self._diff = None   # which outputs get a gradient, when not all (segments' outputs)

    def compile(self):
        """(Re)generate the two programs (``code``, ``backward_code``) with their memory plans
        (``plan``, ``backward_plan``: ``ember.jit.arena``)."""
        from ember.jit.arena import compile_programs
        (self._fwd, self.code, self.plan), (self._bwd, self.backward_code, self.backward_plan) = \
            compile_programs([(self.graph, f"{self.name}_forward"),
                              (self.backward_graph, f"{self.name}_backward")])

    def __call__(self, *args):
        fb = self.fallback
        if not STATE.grad_enabled or STATE.tracer is not None:
            return fb(*args)
        flat = fb._flat_inputs(args)
        for t, dt in zip(flat, fb._dtypes):
            if t._data.dtype != dt:
                return fb(*args)
        formals = list(flat) + list(fb.state_tensors())
        outs = _CompiledStep.apply(self, *formals)
        if not isinstance(outs, tuple):
            outs = (outs,)
        from ember.jit.traced import unflatten
        if fb._single_out:
            return outs[0]
        return unflatten(fb._out_spec, iter(outs))


class _LazyStep:
    """``_CompiledStep``: the autograd Function, defined on first use (ember.autograd is
    imported by then)."""

    cls = None

    def apply(self, runner, *formals):
        if _LazyStep.cls is None:
            _LazyStep.cls = _make_step()
        return _LazyStep.cls.apply(runner, *formals)


def _make_step():
    from ember.autograd.function import Function

    class CompiledStep(Function):
        @staticmethod
        def forward(ctx, runner, *formals):
            Tensor = _tensor_cls()
            arrays = [t._data for t in formals]
            res = runner._fwd(*arrays)
            n = runner._n_out
            ctx.runner = runner
            ctx.n_formals = len(formals)
            ctx.saved_arrays = [arrays[i] for i in runner._saved_formals] + \
                [r if r.__class__ is np.ndarray else np.asarray(r) for r in res[n:]]
            ctx.versions = [(formals[i], formals[i]._version) for i in runner._saved_formals]
            outs = tuple(Tensor._make(r if r.__class__ is np.ndarray else np.asarray(r))
                         for r in res[:n])
            if runner._diff is not None:
                ctx.mark_non_differentiable(*[o for o, d in zip(outs, runner._diff) if not d])
            return outs

        @staticmethod
        def backward(ctx, *grads):
            Tensor = _tensor_cls()
            runner = ctx.runner
            if STATE.grad_enabled:
                raise EmberRuntimeError(
                    f"ember.compile: '{runner.name}': double backward (create_graph=True) "
                    "through a compiled backward is not supported; compile with "
                    "options={'compiled_backward': False}")
            for t, v in ctx.versions:
                if t._version != v:
                    raise EmberRuntimeError(
                        f"one of the variables needed for gradient computation has been "
                        f"modified by an inplace operation: [{t._data.dtype} "
                        f"{list(t._data.shape)}] is at version {t._version}; expected "
                        f"version {v} instead (ember.compile: '{runner.name}')")
            if runner._diff is not None:
                grads = [g for g, d in zip(grads, runner._diff) if d]
            res = runner._bwd(*[g._data for g in grads], *ctx.saved_arrays)
            out = [None] * (1 + ctx.n_formals)
            for p, r in zip(runner._grad_pos, res):
                out[1 + p] = Tensor._make(r if r.__class__ is np.ndarray else np.asarray(r))
            return tuple(out)

    return CompiledStep


_CompiledStep = _LazyStep()


def _verify(runner, args, kwargs):
    """None when the compiled forward and backward give eager autograd's outputs and gradients
    (over the forward trace's tensor-mode code) on inputs other than the traced ones (floats
    scaled, integer and bool elements permuted) — a value the backward read outside the traced
    ops would show as a frozen constant here; else why not. State tensors and random generators are restored after each run."""
    from ember.autograd import grad
    from ember.jit.traced import flatten
    from ember.random import default_generator
    Tensor = _tensor_cls()
    fb = runner.fallback

    def perturb(a):
        if isinstance(a, Tensor):
            d = a._data
            if d.dtype.kind in "iub" and d.size > 1:
                # integer and bool inputs (indices, targets, masks) with their elements
                # permuted: a backward formula that read their values in Python shows
                return Tensor._make(np.random.default_rng(d.size).permutation(
                    d.reshape(-1)).reshape(d.shape))
            if d.dtype.kind != "f":
                return a
            t = Tensor._make(d * 1.0625)
            t.requires_grad_(a._requires_grad)
            return t
        if isinstance(a, (tuple, list)):
            return type(a)(perturb(x) for x in a)
        if isinstance(a, dict):
            return {k: perturb(v) for k, v in a.items()}
        return a
    pargs = perturb(tuple(args))
    pkw = perturb(dict(kwargs))
    call_args = (pargs, pkw) if kwargs else pargs
    flat_in = []
    flatten(call_args, "in", flat_in, [], [])
    needs = [t for t in flat_in if t._requires_grad] + \
        [t for t in fb.state_tensors() if t._requires_grad]
    state = [(t, t._data.copy()) for t in fb.state_tensors()]
    quiet = _quiet_hooks(needs)
    gens = [default_generator] + list(fb.graph.generators.values())
    gstate = [g.get_state() for g in gens]
    results = []
    try:
        for fn in (lambda *a: fb._call_general(a), runner):
            for g, st in zip(gens, gstate):
                g.set_state(st)
            out = fn(*call_args)
            flat_out = []
            flatten(out, "out", flat_out, [], [])
            rng = np.random.default_rng(1)
            diff_out = flat_out if runner._diff is None else \
                [o for o, d in zip(flat_out, runner._diff) if d]
            cot = [Tensor._make(rng.standard_normal(o._data.shape).astype(o._data.dtype))
                   for o in diff_out]
            gr = grad(diff_out, needs, cot, allow_unused=True)
            results.append([o._data for o in flat_out] +
                           [None if x is None else x._data for x in gr])
            for t, d in state:
                np.copyto(t._data, d)
    except Exception as e:  # noqa: BLE001 - the compiled backward is not used
        return f"checking the compiled backward failed ({type(e).__name__}: {e})"
    finally:
        quiet()
        for g, st in zip(gens, gstate):
            g.set_state(st)
        for t, d in state:
            np.copyto(t._data, d)
    for a, b in zip(*results):
        if (a is None) != (b is None):
            return "the compiled backward's gradients differ from eager autograd's"
        if a is None:
            continue
        tol = 1e-9 if a.dtype == np.float64 else 1e-3
        scale = max(1.0, float(np.max(np.abs(a))) if a.size else 1.0)
        if a.shape != b.shape or not np.allclose(a, b, rtol=tol, atol=tol * scale,
                                                 equal_nan=True):
            return "the compiled backward's gradients differ from eager autograd's"
    return None
