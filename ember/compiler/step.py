"""Whole-step capture for ``ember.compile``: ``loss.backward()``, ``opt.step()`` and
``opt.zero_grad()`` inside a compiled function traced into its one graph.

While the function is traced (``CompileTracer``), the autograd engine and the optimizers offer
these calls to a ``StepCapture`` instead of breaking the graph:

* ``backward``: the engine runs over the traced forward with the tracer on (``create_graph``:
  every derivative formula and gradient sum is a traced op); each leaf's ``.grad`` becomes the
  traced (detached) gradient, added to a ``.grad`` the function computed earlier.
* ``step`` of SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD and
  Rprop: the update math of ``ember.optim._updates`` (the functions the eager step runs on
  arrays) evaluated on traced tensors, then one in-place write (``copy_``) per parameter and
  state tensor. Hyper-parameters (lr, momentum, dampening, betas, eps, weight decay, ...) and
  what the step count determines (bias corrections, NAdam's momentum schedule, ASGD's eta and
  mu) are formals read at every call, so an LR scheduler does not retrace; the runner advances
  the step counts (NAdam's ``mu_product``; after the program ASGD's schedules) as eager does; a
  branch the state chooses (RAdam's rectification, ASGD's averaging) is part of the guard (one
  retrace when it flips).
* ``zero_grad()`` (``set_to_none``): the runner sets those ``.grad`` to None.
* ``autograd.grad`` (without ``create_graph``): traced as ``backward`` is, its gradients
  returned (detached) instead of accumulated into ``.grad``.
* ``clip_grad_norm_`` / ``clip_grad_value_``: their math (``ember.nn.utils.clip_grad``, the
  one the eager path runs on arrays) on the traced gradients; the clipped ones rebind ``.grad``.

``WholeStep`` runs the optimised graph as one array-mode program and applies its effects (the
final ``.grad`` of each leaf, parameter versions). The program has a memory plan
(``WholeStep.plan``, ``ember.jit.arena``): an elementwise result is written into an argument
that dies at its node (never a parameter, an input or anything the call returns or sets as
``.grad``). Anything else is a graph break naming why, and the function then runs eagerly for
those guards.
"""
import math

import numpy as np

from ember.autograd.state import STATE
from ember.compiler import joint_passes

__all__ = ["StepCapture", "WholeStep"]

# Whether a traced optimizer update takes its values from the optimizer's own eager step and
# records its ops from shapes alone (``StepCapture._eager_step``); False: the traced ops compute.
SHAPES_ONLY = True


def _tensor_cls():
    from ember.tensor import Tensor
    return Tensor


def _shape(t):
    return f"[{t._data.dtype} {list(t._data.shape)}]"


def _fn():
    from ember.autograd._generated import functions
    return functions


class _OneOp:
    """Stands in for the tracer while ``_recorded`` runs an op on one-element stand-ins: keeps
    what the dispatcher would have recorded."""

    def __init__(self):
        self.got = []

    def record(self, op, tensors, consts, outputs):
        self.got.append((op, tensors, consts, outputs))


# (function, the operands' kinds) -> (op, consts, the dispatched tensors as operand positions,
# result dtype): what ``_recorded`` learnt from one run on stand-ins
_RECORDED = {}


def _recorded(fn, *operands):
    """``fn(*operands)`` (a generated function of one elementwise op) inside an optimizer's
    traced update. When the capture records shapes only (``StepCapture.shapes_only``: the eager
    step computed the values) the op runs once per operand kinds on one-element stand-ins of
    the operands, for its result dtype and what the dispatcher records, and the tracer records
    it on the real operands with an unwritten result of the broadcast shape; else it runs."""
    tracer = STATE.tracer
    cap = getattr(tracer, "step_capture", None)
    if cap is None or not cap.shapes_only or STATE.autocast is not None:
        return fn(*operands)
    Tensor = _tensor_cls()
    kinds = tuple((o._data.dtype, o._data.ndim) if o.__class__ is Tensor else o.__class__
                  for o in operands)
    key = (fn, kinds)
    known = _RECORDED.get(key)
    if known is None:
        known = _RECORDED[key] = _learn(fn, operands)
    if known is False:   # not one op on its operands: run it
        return fn(*operands)
    op, consts, where, dtype = known
    shape = np.broadcast_shapes(*(o._data.shape for o in operands if o.__class__ is Tensor))
    res = Tensor._make(np.empty(shape, dtype))
    tracer.record(op, tuple(operands[i] for i in where), consts, (res,))
    return res


def _learn(fn, operands):
    """``_recorded``'s entry for ``fn`` on operands like these: the op, its constants, the
    dispatched tensors as positions among the operands and the result dtype, from one run on
    one-element stand-ins; False unless that run dispatched one op on the operands alone."""
    Tensor = _tensor_cls()
    if any(o.__class__ is not Tensor and not isinstance(o, (bool, int, float)) for o in operands):
        return False
    tiny = [Tensor._make(np.ones((1,) * o._data.ndim, o._data.dtype))
            if o.__class__ is Tensor else o for o in operands]
    one = _OneOp()
    tracer, STATE.tracer = STATE.tracer, one
    try:
        small = fn(*tiny)
    finally:
        STATE.tracer = tracer
    if len(one.got) != 1 or one.got[0][3] != (small,) or small.__class__ is not Tensor:
        return False
    op, seen, consts, _ = one.got[0]
    pos = {id(t): i for i, t in enumerate(tiny) if t.__class__ is Tensor}
    where = []
    for t in seen:
        if t.__class__ is Tensor:
            if id(t) not in pos:
                return False
            where.append(pos[id(t)])
        else:   # a Python scalar: the same object as one of the operands
            i = next((i for i, o in enumerate(tiny) if o is t), None)
            if i is None:
                return False
            where.append(i)
    return op, consts, tuple(where), small._data.dtype


class _Sym:
    """A traced tensor with out-of-place arithmetic, so the augmented assignments of
    ``ember.optim._updates`` rebind (as on the pointwise engine's symbolic values)."""

    __slots__ = ("t",)

    def __init__(self, t):
        self.t = t

    def __add__(self, o):
        return _Sym(_recorded(_fn().add, self.t, _raw(o)))

    def __radd__(self, o):
        return _Sym(_recorded(_fn().add, _raw(o), self.t))

    def __sub__(self, o):
        return _Sym(_recorded(_fn().sub, self.t, _raw(o)))

    def __rsub__(self, o):
        return _Sym(_recorded(_fn().sub, _raw(o), self.t))

    def __mul__(self, o):
        return _Sym(_recorded(_fn().mul, self.t, _raw(o)))

    def __rmul__(self, o):
        return _Sym(_recorded(_fn().mul, _raw(o), self.t))

    def __truediv__(self, o):
        return _Sym(_recorded(_fn().div, self.t, _raw(o)))

    def __rtruediv__(self, o):
        return _Sym(_recorded(_fn().div, _raw(o), self.t))

    def __neg__(self):
        return _Sym(_recorded(_fn().neg, self.t))

    def __gt__(self, o):
        return _Sym(_recorded(_fn().gt, self.t, _raw(o)))

    def __lt__(self, o):
        return _Sym(_recorded(_fn().lt, self.t, _raw(o)))


def _raw(o):
    return o.t if isinstance(o, _Sym) else o


class _TracedOps:
    """``_updates``' operations on traced tensors (``maximum_`` keeps its result: the update
    returns ``x, m, v`` only)."""

    def __init__(self):
        self.max = None

    @staticmethod
    def sqrt(s):
        return _Sym(_recorded(_fn().sqrt, s.t))

    @staticmethod
    def abs(s):
        return _Sym(_recorded(_fn().abs, s.t))

    @staticmethod
    def sign(s):
        return _Sym(_recorded(_fn().sign, s.t))

    @staticmethod
    def where(c, a, b):
        return _Sym(_recorded(_fn().where, _raw(c), _raw(a), _raw(b)))

    @staticmethod
    def clamp_(a, lo, hi):
        f = _fn()
        return _Sym(_recorded(f.minimum, _recorded(f.maximum, a.t, _raw(lo)), _raw(hi)))

    @staticmethod
    def assign_(dst, src):
        return src

    def maximum_(self, a, b):
        self.max = _Sym(_recorded(_fn().maximum, a.t, b.t))
        return self.max

    @staticmethod
    def like(t, x):
        return t


def _kind(opt):
    """'sgd' / 'adam' when ``opt``'s step is SGD's or Adam's (AdamW's), 'update' when it is
    the step of an optimizer whose update is one function of ``ember.optim._updates``
    (``algorithms._Traceable``: RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam), else None."""
    from ember.optim.algorithms import SGD, Adam, _Traceable
    step = type(opt).step
    return "sgd" if step is SGD.step else "adam" if step is Adam.step else \
        "update" if step is _Traceable.step else None


def needs_state(opt, kind, group, p):
    """Whether ``opt``'s next step (of kind ``_kind(opt)``) creates state for ``p``: that
    step runs eagerly (``StepCapture.warmup``) and the next call traces."""
    st = opt.state.get(p)
    return (kind in ("adam", "update") and not st) or \
        (kind == "update" and any(k not in st for k in opt._slots(group) if k)) or \
        (kind == "sgd" and group["momentum"] != 0 and not (st and "momentum_buffer" in st))


def creates_state(objects):
    """Whether an optimizer among ``objects`` has a parameter requiring grad whose next
    captured step would create state (``needs_state``)."""
    from ember.optim.optimizer import Optimizer
    for obj in objects:
        if not isinstance(obj, Optimizer):
            continue
        kind = _kind(obj)
        if kind is None:
            continue
        for group in obj.param_groups:
            for p in group["params"]:
                if p._requires_grad and needs_state(obj, kind, group, p):
                    return True
    return False


_CAPTURED = ("SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop "
             "(not LBFGS: its step needs a closure)")


def structure(opt):
    """What the traced update is specialised on: per group its parameters and the options that
    choose a branch of the update; per parameter which state tensors exist."""
    out = []
    flags = getattr(opt, "_flags", None)
    for g in opt.param_groups:
        out.append((tuple(id(p) for p in g["params"]), g.get("momentum", 0) != 0,
                    g.get("weight_decay", 0) != 0, g.get("nesterov"), g.get("maximize"),
                    g.get("amsgrad"), g.get("decoupled_weight_decay"), g.get("centered")))
        out.append(tuple(tuple(opt.state[p]) if p in opt.state else () for p in g["params"]))
        if flags is not None:   # e.g. RAdam's rectification at the next step
            out.append(tuple(tuple(flags(g, opt.state[p], opt.state[p].get("step", 0) + 1)
                                   .items()) for p in g["params"] if opt.state.get(p)))
    return tuple(out)


def _hyper(opt):
    return [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]


class StepCapture:
    """What a traced whole step did besides its ops: the formals it added (optimizer state and
    hyper-parameters, each with the getter that reads it at a call), the step counters it
    advanced, the leaves whose ``.grad`` it sets, and what a later call must still satisfy."""

    def __init__(self):
        self.inputs = []        # (tensor, getter -> ndarray, Value): formals after the inputs
        self.bumps = []         # what a call advances first (the optimizers' step counts)
        self.finishes = []      # what it updates last (ASGD's eta and mu schedules)
        self._scalars = {}
        self.touched = []       # leaves whose final .grad the function determines
        self._touched = set()
        self.require_none = []  # leaves whose .grad must be None when a call starts
        self.optimizers = []    # (optimizer, structure(optimizer))
        self.written = []       # parameters the update writes (versions bumped per call)
        self.hyper = []         # (optimizer, its hyper-parameter values when its step ran)
        self.warmup = False     # an optimizer's state was created: run eagerly, trace again
        self.used = False
        self.shapes_only = False   # an update being recorded whose values eager computed

    def _touch(self, t):
        if id(t) not in self._touched:
            self._touched.add(id(t))
            self.touched.append(t)

    # ---- backward ---------------------------------------------------------------------
    @staticmethod
    def _hooked(tracer, leaves):
        """Why a traced backward cannot stand for eager's (hooks run Python), else None."""
        for t in leaves:
            if t._hooks:
                return "a backward pass into a tensor with hooks (hooks are not traced)"
        for t, v in list(tracer.env.values()):
            fn = getattr(t, "grad_fn", None)
            if v.node is not None and (getattr(t, "_hooks", None) or
                                       (fn is not None and fn._pre_hooks)):
                return "a backward pass through a tensor with hooks (hooks are not traced)"
        return None

    @staticmethod
    def _traced_backward(tracer, run):
        """``run()`` (the engine over the traced forward, ``create_graph``) with the tracer
        recording the derivative ops: (result, None), or (None, why it could not be traced)."""
        from ember.autograd.grad_mode import enable_grad
        tracer.joint_backward = True
        n_breaks = len(tracer.breaks)
        try:
            with enable_grad():
                out = run()
        except Exception as e:  # noqa: BLE001 - eager's backward then runs (and reports it)
            return None, f"a backward pass that could not be traced ({type(e).__name__}: {e})"
        finally:
            tracer.joint_backward = False
        if len(tracer.breaks) > n_breaks:
            why = "; ".join(str(b) for b in tracer.breaks[n_breaks:])
            del tracer.breaks[n_breaks:]
            return None, f"a backward pass that could not be traced ({why})"
        return out, None

    def backward(self, tracer, tensors, grad_tensors, retain_graph, create_graph):
        from ember.autograd import grad
        from ember.autograd.grad_mode import no_grad
        if create_graph:
            return "a backward pass with create_graph=True (double backward is not captured)"
        leaves = [t for t, v in list(tracer.env.values())
                  if v.node is None and t._requires_grad and t.grad_fn is None]
        if not leaves:
            return "a backward pass reaching no parameter or input of the traced function"
        for t in leaves:
            if t.grad is not None and tracer.known(t.grad) is None:
                return (f"a backward pass accumulating into the .grad of a tensor {_shape(t)} "
                        f"that the compiled function did not compute (zero the gradients "
                        f"inside the function, e.g. opt.zero_grad(), or before calling it)")
        why = self._hooked(tracer, leaves)
        if why is not None:
            return why
        grads, why = self._traced_backward(
            tracer, lambda: grad(tensors, leaves, grad_tensors, True, True, allow_unused=True))
        if why is not None:
            return why
        with no_grad():
            for leaf, g in zip(leaves, grads):
                if g is None:
                    continue
                d = g.detach()
                if leaf.grad is None:
                    if id(leaf) not in self._touched:
                        self.require_none.append(leaf)
                    leaf.grad = d
                else:
                    leaf.grad = leaf.grad + d
                self._touch(leaf)
        self.used = True
        return None

    # ---- autograd.grad ----------------------------------------------------------------
    def grad(self, tracer, tensors, grad_tensors, create_graph, capture):
        """``autograd.grad`` (the engine's ``run`` with ``capture``): the gradients traced as
        ``backward``'s, returned detached (``.grad`` untouched): (gradients, None), else (None,
        why not)."""
        from ember.autograd import engine
        from ember.autograd.grad_mode import no_grad
        if create_graph:
            return None, ("autograd.grad(create_graph=True) (double backward is not captured)")
        why = self._hooked(tracer, [t for t, v in list(tracer.env.values()) if v.node is None])
        if why is not None:
            return None, why
        res, why = self._traced_backward(
            tracer, lambda: engine.run(tensors, grad_tensors, True, True, capture, False))
        if why is not None:
            return None, why
        with no_grad():
            res = [None if g is None else g.detach() for g in res]
        self.used = True
        return res, None

    # ---- zero_grad --------------------------------------------------------------------
    def zero_grad(self, tracer, opt, set_to_none=True):
        if not set_to_none:
            return (f"{type(opt).__name__}.zero_grad(set_to_none=False) (gradients zeroed in "
                    f"place are not captured)")
        for g in opt.param_groups:
            for p in g["params"]:
                p.grad = None
                self._touch(p)
        self.used = True
        return None

    # ---- gradient clipping ------------------------------------------------------------
    def clip(self, tracer, what, parameters):
        """``clip_grad_norm_`` / ``clip_grad_value_`` on gradients the trace computed: None
        (``ember.nn.utils.clip_grad`` then runs its math on the traced gradients and rebinds
        ``.grad``; each such leaf's final ``.grad`` is an output), else why not."""
        params = [p for p in parameters if p.grad is not None]
        for p in params:
            if tracer.known(p.grad) is None:
                return (f"{what} on a .grad {_shape(p)} computed outside the compiled function "
                        f"(call loss.backward() inside it)")
        for p in params:
            self._touch(p)
        self.used = True
        return None

    # ---- step -------------------------------------------------------------------------
    def step(self, tracer, opt, closure=None):
        name = type(opt).__name__
        if closure is not None:
            return f"{name}.step(closure) (the closure is not captured)"
        kind = _kind(opt)
        if kind is None:
            return (f"{name}.step(): ember.compile traces the updates of {_CAPTURED}; this "
                    f"optimizer's step runs eagerly")
        work = []
        for gi, group in enumerate(opt.param_groups):
            for p in group["params"]:
                if p.grad is None:
                    continue
                if tracer.known(p.grad) is None:
                    return (f"{name}.step() reading a .grad {_shape(p)} computed outside the "
                            f"compiled function (call loss.backward() inside it)")
                if p._data.dtype.kind != "f":
                    return f"{name}.step() on a {p._data.dtype} parameter (not captured)"
                work.append((gi, group, p))
        for _, group, p in work:
            if needs_state(opt, kind, group, p):
                self.warmup = True   # the first step creates the state: eager, unrecorded
                return ""
        self.optimizers.append((opt, structure(opt)))
        self.hyper.append((opt, _hyper(opt)))
        from ember.autograd.grad_mode import no_grad
        self.shapes_only = SHAPES_ONLY and self._eager_step(tracer, opt, kind, work)
        try:
            with no_grad():
                update = {"sgd": self._sgd, "adam": self._adam, "update": self._update}[kind]
                for gi, group, p in work:
                    update(tracer, opt, gi, group, p)
        finally:
            self.shapes_only = False
        self.used = True
        return None

    @staticmethod
    def _eager_step(tracer, opt, kind, work):
        """The call's values of ``opt.step()``: its own (fused) eager step, untraced. What it
        advanced besides the parameters and the state tensors the update writes (Adam's step
        count, NAdam's mu product, ASGD's eta and mu: bound again, a tensor's values restored)
        is put back for the traced update, which advances it as a call does. True when it ran
        (the update is then recorded from shapes alone)."""
        Tensor = _tensor_cls()
        kept = []
        for _, group, p in work:
            st = opt.state.get(p)
            if st is None:
                continue
            slots = {"sgd": ("momentum_buffer",), "adam": ("exp_avg", "exp_avg_sq",
                                                          "max_exp_avg_sq")}.get(kind) or \
                tuple(k for k in opt._slots(group) if k)
            kept.append((st, [(k, v, v._data.copy() if isinstance(v, Tensor) else None)
                              for k, v in st.items() if k not in slots]))
        STATE.tracer = None
        try:
            opt.step()
        finally:
            STATE.tracer = tracer
        for st, entries in kept:
            for k, v, data in entries:
                st[k] = v
                if data is not None:
                    np.copyto(v._data, data)
        return True

    def _scalar(self, tracer, key, name, fn, dtype):
        """A hyper-parameter formal: ``fn()`` (read again at each call) as a 0-d tensor of the
        parameter's dtype (eager's scalar arithmetic casts a Python float to it the same way)."""
        t = self._scalars.get(key)
        if t is None:
            t = _tensor_cls()._make(np.array(fn(), dtype))
            self.inputs.append((t, lambda: np.array(fn(), dtype), tracer.add_input(t, name)))
            self._scalars[key] = t
        return _Sym(t)

    def _state(self, tracer, opt, p, key):
        t = opt.state[p][key]
        if tracer.known(t) is None:
            v = tracer.add_input(t, f"{tracer.value_of(p).name}_{key}")
            self.inputs.append((t, lambda: opt.state[p][key]._data, v))
        return _Sym(t)

    def _write(self, target, value):
        if value.t is target:
            return
        if not self.shapes_only:
            target.copy_(value.t)
            return
        # what ``copy_`` records (``copy`` of the new value, then the write into the target),
        # without the copies: the eager step already wrote the target's values
        from ember.autograd._generated.records import copy as copy_op
        tracer = STATE.tracer
        new = _tensor_cls()._make(np.empty(target._data.shape, target._data.dtype))
        tracer.record(copy_op, (target, value.t), (), (new,))
        target._bump()
        tracer.record_inplace(target, new)

    def _group_scalars(self, tracer, opt, gi, dtype):
        def s(key, fn=None):
            get = fn or (lambda: opt.param_groups[gi][key])
            return self._scalar(tracer, (id(opt), gi, key, dtype.str), key, get, dtype)
        return s

    def _sgd(self, tracer, opt, gi, group, p):
        from ember.optim._updates import sgd_momentum_update, sgd_update
        s = self._group_scalars(tracer, opt, gi, p._data.dtype)
        x, d = _Sym(p), _Sym(p.grad)
        if group["maximize"]:
            d = -d
        if group["weight_decay"] != 0:
            d = d + s("weight_decay") * x
        if group["momentum"] == 0:
            x = sgd_update(x, d, s("lr"), _TracedOps())
        else:
            buf = self._state(tracer, opt, p, "momentum_buffer")
            x, buf2 = sgd_momentum_update(
                x, d, buf, s("momentum"),
                s("one_m_dampening", lambda: 1 - opt.param_groups[gi]["dampening"]), s("lr"),
                _TracedOps(), group["nesterov"])
            self._write(buf.t, buf2)
        self._write(p, x)
        self.written.append(p)

    def _adam(self, tracer, opt, gi, group, p):
        from ember.optim._updates import adam_update
        dt = p._data.dtype
        s = self._group_scalars(tracer, opt, gi, dt)
        st = opt.state[p]
        x, g = _Sym(p), _Sym(p.grad)
        if group["maximize"]:
            g = -g
        if group["weight_decay"] != 0:
            if group["decoupled_weight_decay"]:
                x = x * s("decay", lambda: 1 - opt.param_groups[gi]["lr"] *
                          opt.param_groups[gi]["weight_decay"])
            else:
                g = g + s("weight_decay") * x
        st["step"] += 1
        self.bumps.append(lambda: opt.state[p].__setitem__("step", opt.state[p]["step"] + 1))

        def b(i):
            return lambda: opt.param_groups[gi]["betas"][i]
        step_size = self._scalar(
            tracer, (id(p), "step_size"), f"{tracer.value_of(p).name}_step_size",
            lambda: opt.param_groups[gi]["lr"] / (1 - opt.param_groups[gi]["betas"][0] **
                                                  opt.state[p]["step"]), dt)
        bc2 = self._scalar(
            tracer, (id(p), "bc2_sqrt"), f"{tracer.value_of(p).name}_bc2_sqrt",
            lambda: math.sqrt(1 - opt.param_groups[gi]["betas"][1] ** opt.state[p]["step"]), dt)
        m = self._state(tracer, opt, p, "exp_avg")
        v = self._state(tracer, opt, p, "exp_avg_sq")
        ops = _TracedOps()
        vmax = self._state(tracer, opt, p, "max_exp_avg_sq") if group["amsgrad"] else None
        x, m2, v2 = adam_update(x, g, m, v, s("one_m_b1", lambda: 1 - b(0)()), s("b2", b(1)),
                                s("one_m_b2", lambda: 1 - b(1)()), bc2, s("eps"), step_size,
                                ops, vmax)
        self._write(m.t, m2)
        self._write(v.t, v2)
        if vmax is not None:
            self._write(vmax.t, ops.max)
        self._write(p, x)
        self.written.append(p)

    def _update(self, tracer, opt, gi, group, p):
        """An ``algorithms._Traceable`` optimizer: its ``update`` on traced tensors, the
        group's scalars (shared formals) and the step count's (this parameter's formals, read
        after the runner advanced the state as eager's step does)."""
        dt = p._data.dtype
        s = self._group_scalars(tracer, opt, gi, dt)
        x, g = _Sym(p), _Sym(p.grad)
        if group["maximize"]:
            g = -g
        if group.get("weight_decay", 0) != 0:
            if group.get("decoupled_weight_decay"):
                x = x * s("decay", lambda: 1 - opt.param_groups[gi]["lr"] *
                          opt.param_groups[gi]["weight_decay"])
            else:
                g = g + s("weight_decay") * x
        opt._advance(group, opt.state[p])
        self.bumps.append(lambda: opt._advance(opt.param_groups[gi], opt.state[p]))
        scalars = {k: s(k, lambda k=k: opt._scalars(opt.param_groups[gi])[k])
                   for k in opt._scalars(group)}
        name = tracer.value_of(p).name
        for k in opt._step_scalars(group, opt.state[p]):
            scalars[k] = self._scalar(
                tracer, (id(p), k), f"{name}_{k}",
                lambda k=k: opt._step_scalars(opt.param_groups[gi], opt.state[p])[k], dt)
        slots = opt._slots(group)
        state = [self._state(tracer, opt, p, k) if k else None for k in slots]
        new = type(opt).update(x, g, *state, **scalars,
                               **opt._flags(group, opt.state[p], opt.state[p]["step"]),
                               ops=_TracedOps())
        for old, value in zip(state, new[1:]):
            if old is not None:
                self._write(old.t, value)
        self._write(p, new[0])
        self.written.append(p)
        opt._finish(group, opt.state[p])
        self.finishes.append(lambda: opt._finish(opt.param_groups[gi], opt.state[p]))

    # ---- end of the trace ---------------------------------------------------------------
    def finish(self, tracer, out):
        """``record``'s ``after`` hook: (formals added, outputs added): the optimizer state and
        hyper-parameter formals, and the final ``.grad`` of each leaf that has one (a graph
        break recorded instead where the trace cannot stand for the step)."""
        for t, _, v in self.inputs:   # the formal, not the value its in-place update made
            tracer.env[id(t)] = (t, v)
        inputs = [t for t, _, _ in self.inputs]
        for opt, values in self.hyper:
            if _hyper(opt) != values:
                tracer.graph_break(f"{type(opt).__name__}'s hyper-parameters changed after its "
                                   f"step inside the function (an LR scheduler's step is not "
                                   f"captured: call it outside the compiled function)")
                return inputs, []
        self.grad_out = [t for t in self.touched if t.grad is not None]
        self.grad_none = [t for t in self.touched if t.grad is None]
        for t in self.grad_out:
            if tracer.known(t.grad) is None:
                tracer.graph_break(f"a .grad {_shape(t)} set from outside the traced ops")
                return inputs, []
        return inputs, [t.grad for t in self.grad_out]


def _close(a, b):
    """``np.allclose(a, b, rtol=tol, atol=tol * scale, equal_nan=True)`` with tol 1e-9 for
    float64 (1e-3 otherwise) and scale the largest ``|b|`` of a float ``b`` (at least 1).
    Float arrays (not 0-d) of one dtype are checked in place first (|a - b| against the bound, two
    buffers instead of allclose's half dozen); a failure there, a NaN, an infinity or an
    infinite largest ``|b|`` decides through allclose itself."""
    tol = 1e-9 if a.dtype == np.float64 else 1e-3
    if b.dtype.kind != "f" or not b.size:
        return bool(np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True))
    bound = np.abs(b)
    scale = max(1.0, float(bound.max()))
    if a.dtype == b.dtype and b.ndim and math.isfinite(scale):
        d = np.subtract(a, b)
        np.abs(d, out=d)
        bound *= tol
        bound += tol * scale
        # NaN in d (a NaN or an inf on either side) fails d <= bound: allclose decides
        if np.less_equal(d, bound).all():
            return True
    return bool(np.allclose(a, b, rtol=tol, atol=tol * scale, equal_nan=True))


class WholeStep:
    """A captured training step: one array-mode program (``graph``, ``code``) over the call's
    inputs, optimizer state, hyper-parameters and parameters; returns the call's outputs and
    sets each leaf's ``.grad`` as the eager step would."""

    def __init__(self, traced, cap, n_out, name):
        from ember.jit.passes import PIPELINE, run_passes
        self._traced = traced
        self._cap = cap
        self._n_out = n_out
        self.name = name
        # no ``decompose``: a bias stays in its linear and ReLU runs in place on the GEMM's
        # output (the codegen's relu_), cheaper than a bias+ReLU fusion group at these sizes
        passes = [n for n, _ in PIPELINE if n != "decompose"]
        # linted once, by _in_place, not after every pass (a GPT step's joint graph: ~0.3 s)
        self.graph = joint_passes.finish(run_passes(joint_passes.prepare(traced.graph.copy()),
                                                    passes, lint=False))
        self.compile()
        self._state = list(traced.state_tensors())
        self._getters = [get for _, get, _ in cap.inputs]
        self.verified = False

    def compile(self):
        """(Re)generate the step program with its memory plan (``plan``: ``ember.jit.arena``)."""
        from ember.compiler.grouped_update import GroupedUpdates
        from ember.jit.arena import compile_programs
        (self._fn, self.code, self.plan), = compile_programs(
            [(self.graph, f"{self.name}_step")], rules=lambda g: [GroupedUpdates(g)])

    # ---- the check against eager on first use ----------------------------------------------
    def snapshot(self):
        from ember.random import default_generator
        cap = self._cap
        gens = [default_generator] + list(self.graph.generators.values())
        return ([(t, t._data.copy()) for t in self._state],
                [(opt, {p: {k: (v._data.copy() if hasattr(v, "_data") else v)
                            for k, v in st.items()} for p, st in opt.state.items()})
                 for opt, _ in cap.optimizers],
                [(t, t.grad) for t in cap.touched + cap.require_none],
                [(g, g.get_state()) for g in gens])

    def restore(self, snap):
        params, opts, grads, gens = snap
        for t, d in params:
            np.copyto(t._data, d)
        for opt, state in opts:
            for p, st in state.items():
                for k, v in st.items():
                    cur = opt.state[p].get(k)
                    if hasattr(cur, "_data"):
                        np.copyto(cur._data, v)
                    else:
                        opt.state[p][k] = v
        for t, g in grads:
            t.grad = g
        for g, st in gens:
            g.set_state(st)

    def observe(self, out, copy=True):
        """The arrays a call leaves: its outputs, the parameters, the optimizer's state, the
        gradients it sets (None where it sets none); copies unless ``copy=False`` (the live
        arrays, for a comparison made before anything writes them again)."""
        from ember.jit.traced import flatten
        flat = []
        flatten(out, "out", flat, [], [])
        cap = self._cap
        take = np.copy if copy else (lambda a: a)
        state = [take(v._data) if hasattr(v, "_data") else np.asarray(v)
                 for opt, _ in cap.optimizers for st in opt.state.values() for v in st.values()]
        return ([take(o._data) for o in flat] + [take(t._data) for t in self._state] + state +
                [None if t.grad is None else take(t.grad._data) for t in cap.touched])

    @staticmethod
    def differ(got, want):
        """Why two ``observe`` results differ beyond rounding (None when they agree)."""
        if len(got) != len(want):
            return "a different number of results"
        for a, b in zip(got, want):
            if (a is None) != (b is None):
                return "a gradient set in one and not the other"
            if a is None:
                continue
            if a.shape != b.shape or not _close(a, b):
                return f"values of shape {list(b.shape)} differ"
        return None

    @property
    def writes(self):
        """{formal: value}: the in-place writes of the program (a fusion group's output stored
        into a parameter's or a state tensor's memory; not part of the graph's text form)."""
        out = {}
        for n in self.graph.find_nodes("fusion_group"):
            for o, i in zip(n.outputs, n.attrs.get("into") or ()):
                if i is not None:
                    out[n.args[i].name] = o.name
        return out

    def stale(self):
        """Why this program no longer applies (None while it does)."""
        for t in self._cap.require_none:
            if t.grad is not None:
                return (f"a .grad {_shape(t)} the step expected to be None (it accumulates "
                        f"into it) is set")
        for opt, st in self._cap.optimizers:
            if structure(opt) != st:
                return (f"the {type(opt).__name__}'s parameter groups, options, state or a branch "
                        f"its state chooses (RAdam's rectification, ASGD's averaging) changed")
        return None

    def __call__(self, *args):
        Tensor = _tensor_cls()
        tr = self._traced
        flat = tr._flat_inputs(args)
        cap = self._cap
        for advance in cap.bumps:
            advance()
        arrays = [t._data for t in flat]
        arrays += [get() for get in self._getters]
        arrays += [t._data for t in self._state]
        res = self._fn(*arrays)
        for finish in cap.finishes:
            finish()
        make = Tensor._make
        n = self._n_out
        for t in cap.grad_none:
            t.grad = None
        for t, r in zip(cap.grad_out, res[n:]):
            t.grad = make(r if r.__class__ is np.ndarray else np.asarray(r))
        for p in cap.written:
            p._bump()
        outs = [make(r if r.__class__ is np.ndarray else np.asarray(r)) for r in res[:n]]
        if tr._single_out:
            return outs[0]
        from ember.jit.traced import unflatten
        return unflatten(tr._out_spec, iter(outs))
