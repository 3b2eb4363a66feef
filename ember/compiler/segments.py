"""Graph breaks as compiled segments: the code before and after a break stays compiled.

While ``ember.compile`` traces a function, Python reading a traced tensor as a Python value
(``bool(t)`` in ``if x.sum() > 0:``, ``.item()``, ``.tolist()``, ``int(t)``, ``float(t)``,
``t.__index__()``) is a *cut*: the tracer keeps recording, and notes where the read happened
(the user's line), which value was read and what Python saw (``Cut``). The one trace (a
*path*) is then split at its cuts into segments (``Path``), each an optimised ``TracedFunction``
over the values it reads from the call's formals and from earlier segments, returning the values
later segments, the reads and the call's outputs need.

A call runs a path's segments in order; after each one the value read at that cut is computed
from the segment's outputs exactly as Python read it (``Cut.observe``) and must be what the
path was traced with — the read's value is a guard of everything after it. When it is not (the
other branch, another trip count, another ``.item()``), the writes the segments made to the
call's tensors and the random generators are restored, and the path whose reads so far match
runs from the start; with none, the function is traced again from the start (its eager run is
the call's result) and the new path is kept beside the others. Python's control flow is thus
never replayed from a trace that does not hold for this call: a result is a compiled path's
whose every read agreed, or eager's.

Segments run as any trace does: their array-mode code when no gradient is needed, otherwise
their tensor-mode code, whose ops record autograd — a tensor one segment returns that requires
grad backpropagates through it into the segments that computed its inputs.
"""
import numpy as np

from ember.autograd.state import STATE
from ember.jit.ir import Graph, SymRef, Value, map_arg
from ember.kernels.runtime.fpstate import IGNORE as _FP_IGNORE, enter as _fp_enter, \
    leave as _fp_leave
from ember.tensor import Tensor

_make = Tensor._make

__all__ = ["Cut", "Path", "Segmented", "CUT_READS"]

# Tensor conversions whose Python value can guard the code after them (the others, e.g.
# ``numpy()`` or an op reading values internally, hand Python arrays it may keep: breaks)
CUT_READS = ("bool", "item", "tolist", "int", "float", "index", "complex")


def observe(data, what):
    """What Python saw reading array ``data`` by ``what`` (``Tensor.item`` and the like), as a
    hashable key (floats by ``repr``: -0.0 and nan are themselves)."""
    if what == "tolist":
        return repr(data.tolist())
    v = data.reshape(()).item()
    if what == "bool":
        return bool(v)
    if what in ("int", "index"):
        return int(v)
    if what == "float":
        return repr(float(v))
    if what == "complex":
        return repr(complex(v))
    return (type(v).__name__, repr(v))


class Cut:
    """One read of a traced tensor by Python: ``what`` (``bool``, ``item``, ...), the value
    Python saw (``key``), where (``break_``: a ``GraphBreak`` naming the user's line) and the
    traced ``value`` read."""

    __slots__ = ("what", "key", "brk", "value", "alias", "name")

    def __init__(self, what, key, brk, value, alias):
        self.what = what
        self.key = key
        self.brk = brk
        self.value = value
        self.alias = alias   # a Tensor the tracer maps to ``value`` (kept as a graph output)
        self.name = None


def _sub(x, vmap):
    def leaf(y):
        if isinstance(y, Value):
            return vmap[id(y)]
        if isinstance(y, SymRef):
            return SymRef(vmap[id(y.value)])
        return y
    return map_arg(x, leaf)


def _constants_used(g):
    """Names of ``g.constants`` its nodes read (constant nodes, ``ArrayRef``s; fused groups'
    too)."""
    from ember.jit.ir import ArrayRef
    out = set()

    def walk(x):
        if isinstance(x, ArrayRef):
            out.add(x.name)
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
    for n in g.nodes:
        if n.kind == "constant":
            out.add(n.attrs.get("name"))
        elif n.kind == "fusion_group":
            out |= _constants_used(n.attrs["graph"])
        for a in (*n.args, *n.attrs.values()):
            walk(a)
    return out


def _is_random(n):
    try:
        return bool(getattr(n.op, "random", False))
    except Exception:  # noqa: BLE001 - constant and other non-op nodes
        return False


class Path:
    """One traced run split at its cuts: ``segments`` (``TracedFunction`` or None where no op
    ran between two reads), ``cuts``, ``graphs`` (the segments' optimised IR)."""

    def __init__(self, traced, stamps, cuts, n_out, name):
        from ember.jit.passes import optimize
        from ember.jit.traced import TracedFunction
        g = traced.graph
        self.traced = traced            # call structure (_flat_inputs, out spec), bindings
        self.formals = [v.name for v in g.inputs]
        self.cuts = list(cuts)
        self.keys = [c.key for c in cuts]
        for c, v in zip(self.cuts, g.outputs[n_out:]):
            c.name = v.name
            c.alias = None   # (the traced array it held is not needed any more)
        self.out_names = [v.name for v in g.outputs[:n_out]]
        k_last = len(cuts)
        seg_of = {id(n): stamps.get(id(n), k_last) for n in g.nodes}
        nodes = [[] for _ in range(k_last + 1)]
        for n in g.nodes:
            nodes[seg_of[id(n)]].append(n)
        defined = {id(o): seg_of[id(n)] for n in g.nodes for o in n.outputs}
        # the last segment that needs each value (a node reading it, a read, an output)
        last_use = {}
        for n in g.nodes:
            for v in n.inputs:
                last_use[id(v)] = max(last_use.get(id(v), -1), seg_of[id(n)])
        for k, v in enumerate(g.outputs[n_out:]):
            last_use[id(v)] = max(last_use.get(id(v), -1), k)
        for v in g.outputs[:n_out]:
            last_use[id(v)] = k_last + 1
        self.writes = any(n.kind == "copy_" for n in g.nodes)
        self.random = any(_is_random(n) for n in g.nodes)
        self.segments, self.graphs = [], []
        self._shares = {}   # (id(other path), n) -> (other, shares)
        self._grad_fns = []  # per segment: (its TracedFunction, its CompiledFunction) or None
        for k, seg_nodes in enumerate(nodes):
            if not seg_nodes:
                self.segments.append(None)
                self._grad_fns.append(None)
                continue
            gs = Graph()
            gs.constants = dict(g.constants)
            gs.generators = dict(g.generators)
            vmap, ins = {}, []
            for n in seg_nodes:
                for v in n.inputs:
                    if id(v) in vmap or defined.get(id(v)) == k:
                        continue
                    if v.node is not None and v.node.kind == "constant":
                        c = v.node   # a constant of an earlier segment: its own copy here
                        nc = gs.add_node("constant", (), dict(c.attrs),
                                         [(v.dtype, v.shape)])
                        vmap[id(v)] = nc.output
                        continue
                    vmap[id(v)] = gs.add_input(v.name, v.dtype, v.shape, v.role or "input")
                    ins.append(v.name)
                nn = gs.create_node(n.kind, _sub(n.args, vmap),
                                    {a: _sub(x, vmap) for a, x in n.attrs.items()},
                                    [(o.dtype, o.shape) for o in n.outputs],
                                    names=[o.name for o in n.outputs])
                nn.source = n.source
                gs.insert(nn)
                for o, no in zip(n.outputs, nn.outputs):
                    vmap[id(o)] = no
            outs = [o for n in seg_nodes for o in n.outputs if last_use.get(id(o), -1) > k or
                    (last_use.get(id(o), -1) == k and any(c.value is o for c in
                                                          self.cuts[k:k + 1]))]
            gs.outputs = [vmap[id(o)] for o in outs]
            gs.lint()
            tf = TracedFunction(gs, {"tuple": ["T"] * len(ins)},
                                {"tuple": ["T"] * len(outs)}, len(ins), [], f"{name}_{k}")
            fast = optimize(tf, freeze_params=False)
            fast.inference_plan = False
            self.segments.append((fast, ins, [o.name for o in outs]))
            self.graphs.append(fast.graph)
            # with a gradient, a segment that neither writes nor draws runs as a compiled
            # function of its own (compiled forward and backward, checked once against eager
            # autograd); the others run their tensor-mode code
            pure = not any(n.kind in ("copy_", "python_function") or _is_random(n)
                           for n in seg_nodes)
            self._grad_fns.append((tf, None) if pure else None)

    def run(self, call_args, resume=None):
        """(True, the call's result, None) when every read agrees with the trace; else
        (False, the reads seen up to and including the first that differs, the values computed
        so far). ``resume``: (values, reads seen) of a path whose segments up to those reads are
        this one's: the run goes on after them."""
        from ember.jit.traced import unflatten
        traced = self.traced
        flat = traced._flat_inputs(call_args)
        formals = zip(self.formals, list(flat) + list(traced.state_tensors()))
        if resume is None:
            env, seen, start = dict(formals), [], 0
        else:   # the other path's values, and this one's formals (its parameters)
            env, seen = resume
            env, seen, start = dict(env), list(seen), len(seen)
            env.update(formals)
        grad = STATE.grad_enabled
        for k, seg in enumerate(self.segments):
            if k < start:
                continue
            if seg is not None:
                fn, ins, outs = seg
                ts = [env[n] for n in ins]
                res = None
                fast = fn._fast
                if fast is not None and not (grad and any(t._requires_grad for t in ts)):
                    # no gradient: the array-mode code straight on the arrays
                    fp = _fp_enter(_FP_IGNORE)
                    try:
                        res = [_make(r if r.__class__ is np.ndarray else np.asarray(r))
                               for r in fast(*[t._data for t in ts])]
                    except Exception:  # noqa: BLE001 - the call below reports it as eager
                        res = None
                    finally:
                        _fp_leave(fp)
                if res is None:
                    res = self._with_grad(k, fn, ts)
                env.update(zip(outs, res))
            if k < len(self.cuts):
                c = self.cuts[k]
                key = observe(env[c.name]._data, c.what)
                seen.append(key)
                if key != c.key:
                    return False, seen, env
        return True, unflatten(traced._out_spec, iter(env[n] for n in self.out_names)), None

    def _with_grad(self, k, fn, ts):
        """Segment ``k`` on tensors that may need a gradient: its compiled forward and backward
        (an ``ember.compile`` of its tensor-mode code) when it neither writes in place nor draws,
        else its tensor-mode code (every op records autograd)."""
        entry = self._grad_fns[k]
        if entry is None or not STATE.grad_enabled:
            return fn(*ts)
        tf, cf = entry
        if cf is None:
            from ember.compiler.frontend import CompiledFunction

            def segment(*a):
                return tf._call_general(a)
            segment.__name__ = tf.name
            cf = CompiledFunction(segment, None, dynamic=False, options={
                "segments": False, "whole_step": False, "nondiff_outputs": True})
            self._grad_fns[k] = (tf, cf)
            # traced (and its backward checked) on leaves over the same arrays: the tracing
            # backward pass must not reach into the segments before (it runs nothing else,
            # the segment neither writes nor draws); the call below runs the programs
            leaves = {}
            for t in ts:
                if id(t) not in leaves:
                    leaf = leaves[id(t)] = _make(t._data)
                    if t._requires_grad:
                        leaf.requires_grad_(True)
            cf(*[leaves[id(t)] for t in ts])
        return cf(*ts)

    def shares(self, other, n):
        """Whether this path's first ``n`` segments are ``other``'s (same programs over the
        same names: the values ``other`` computed there are this path's); computed once."""
        key = (id(other), n)
        got = self._shares.get(key)
        if got is None:
            got = self._shares[key] = (other, self._same_start(other, n))
        return got[1]

    def _same_start(self, other, n):
        if len(self.segments) < n or len(other.segments) < n:
            return False
        for a, b in zip(self.segments[:n], other.segments[:n]):
            if (a is None) != (b is None):
                return False
            if a is None:
                continue
            if a[1] != b[1] or a[2] != b[2] or str(a[0].graph) != str(b[0].graph):
                return False   # (the text: a fused group's compiled kernel is not compared)
            ca, cb = a[0].graph.constants, b[0].graph.constants
            for k in _constants_used(a[0].graph):
                x, y = ca.get(k), cb.get(k)
                if x is None or y is None or not (x is y or (
                        x.shape == y.shape and x.dtype == y.dtype and
                        np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))):
                    return False
        return True

    def tensors(self, call_args):
        """The tensors bound to the formals for ``call_args``."""
        return list(self.traced._flat_inputs(call_args)) + list(self.traced.state_tensors())


class Segmented:
    """The compiled paths of one guard key (most recently used first); ``runs``: calls a path
    served, ``switches``: reads that sent a call to another path or to a retrace."""

    def __init__(self):
        self.paths = []
        self.runs = 0
        self.switches = 0

    @property
    def graphs(self):
        return [g for p in self.paths for g in p.graphs]

    @property
    def graph(self):
        gs = self.paths[0].graphs if self.paths else []
        return gs[0] if gs else None

    @property
    def code(self):
        segs = [s for s in (self.paths[0].segments if self.paths else []) if s is not None]
        return "\n".join(s[0].code for s in segs)

    def snapshot(self, call_args):
        """What a path's run may change that a retry must undo: the arrays of the call's
        tensors when a segment writes in place (a view's write reaches its base), and the
        random generators' states when one draws."""
        p = self.paths[0]
        if len(self.paths) == 1 and not p.writes and not p.random:
            return (), ()
        from ember.random import default_generator
        arrays = []
        if any(q.writes for q in self.paths):
            arrays = [(t._data, t._data.copy()) for t in p.tensors(call_args)]
            seen = {id(a) for a, _ in arrays}
            for q in self.paths:   # captured tensors held as constants (written in place)
                for n in q.traced.graph.nodes:
                    a = q.traced.graph.constants.get(n.attrs.get("name")) \
                        if n.kind == "constant" else None
                    if a is not None and id(a) not in seen:
                        seen.add(id(a))
                        arrays.append((a, a.copy()))
        gens = []
        if any(q.random for q in self.paths):
            gens = [default_generator] + [x for q in self.paths
                                          for x in q.traced.graph.generators.values()]
            gens = [(g, g.get_state()) for g in gens]
        return arrays, gens

    @staticmethod
    def restore(snap):
        arrays, gens = snap
        for a, d in arrays:
            np.copyto(a, d)
        for g, st in gens:
            g.set_state(st)

    def run(self, call_args):
        """(True, result) from the first path whose reads all agree (tried most recently used
        first, each from a restored state); else (False, (reads seen, snapshot restored))."""
        snap = self.snapshot(call_args)
        seen, last, env = [], None, None
        for p in list(self.paths):
            if p.keys[:len(seen)] != seen:
                continue
            resume = None
            if last is not None:
                if p.shares(last, len(seen)):
                    resume = (env, seen)     # go on from the segments already run
                else:
                    self.restore(snap)       # run this path from the start
            ok, got, env = p.run(call_args, resume)
            if ok:
                if p is not self.paths[0]:
                    self.paths.remove(p)
                    self.paths.insert(0, p)
                self.runs += 1
                return True, got
            self.switches += 1
            seen, last = got, p
        if last is not None:
            self.restore(snap)
        return False, seen
