"""Custom differentiable functions: subclass ``Function`` with static ``forward``/``backward``.

Also the registry of named Functions: a traced graph holds the Function class itself, and a
saved graph names it; ``ember.jit.load`` finds a name only here (``register_function``), never by
importing a module the file names."""
import threading

from ember.autograd.dispatch import _edge
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError
from ember.autograd.node import Node, SavedTensor
from ember.autograd.state import STATE
from ember.autograd.views import CUSTOM as IN_CUSTOM_FUNCTION
from ember.kernels.runtime.fpstate import IGNORE as _FP_IGNORE, enter as _fp_enter, leave as _fp_leave


class FunctionCtx:
    """The ``ctx`` passed to a custom Function's forward and backward."""

    def __init__(self):
        self._saved = ()
        self.needs_input_grad = ()
        self._non_diff = set()
        self._materialize = True

    def save_for_backward(self, *tensors):
        """Keep tensors for backward (checked against in-place modification)."""
        self._saved = tuple(SavedTensor(t, f"saved[{i}]") if t is not None else None
                            for i, t in enumerate(tensors))

    @property
    def saved_tensors(self):
        from ember.autograd.node import _RELEASED
        if self._saved is _RELEASED:
            from ember.autograd.node import _FREED
            raise EmberRuntimeError(_FREED)
        return tuple(s.unpack(self._node) if s is not None else None for s in self._saved)

    def mark_non_differentiable(self, *tensors):
        """Outputs that get no gradient."""
        self._non_diff.update(id(t) for t in tensors)

    def set_materialize_grads(self, value):
        """Whether missing output gradients are passed as zeros (default) or None."""
        self._materialize = value

    def mark_dirty(self, *tensors):
        """Accepted for compatibility; in-place inputs are tracked by version counters."""


def ember_own(cls):
    """Whether Function subclass ``cls`` is one of ember's own (the compiler's compiled step):
    its forward and backward run with NumPy's floating-point errors ignored, as kernels do
    (``kernels/runtime/fpstate.py``); a user's run under the user's own error state."""
    return cls.__module__.startswith("ember.")


class _FunctionNode(Node):
    __slots__ = ("ctx", "fn_cls", "n_inputs")

    def name(self):
        return f"{self.fn_cls.__name__}Backward"

    def apply(self, grads):
        ctx = self.ctx
        from ember.tensor import Tensor
        import numpy as np
        if ctx._materialize:
            grads = [g if g is not None else Tensor._make(np.zeros(s, d))
                     for g, (s, d) in zip(grads, self._out_meta)]
        res = self.fn_cls.backward(ctx, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        return tuple(r if n else None for r, n in zip(res, self.needs))

    def release(self):
        from ember.autograd.node import _RELEASED
        self.ctx._saved = _RELEASED


class Function:
    """Base class for custom ops: ``MyFn.apply(*args)`` runs ``forward`` without recording and
    links ``backward`` into the graph. A ``symbolic`` staticmethod is used by the ONNX exporter."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("Function.forward must be overridden")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("Function.backward must be overridden")

    @classmethod
    def apply(cls, *args):
        from ember.tensor import Tensor
        ctx = FunctionCtx()
        tensors = [a for a in args if isinstance(a, Tensor)]
        needs = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        ctx.needs_input_grad = needs
        prev = STATE.grad_enabled
        STATE.grad_enabled = False
        fp = _fp_enter(_FP_IGNORE) if ember_own(cls) else None
        try:
            out = cls.forward(ctx, *args)
        finally:
            STATE.grad_enabled = prev
            if fp is not None:
                _fp_leave(fp)
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        outs = tuple(Tensor._make(o._data) if isinstance(o, Tensor) and any(o is a for a in tensors)
                     else o for o in outs)
        out = outs[0] if single else outs
        if prev and builtins_any(needs):
            node = _FunctionNode()
            node.ctx = ctx
            node.fn_cls = cls
            node.needs = needs
            node.n_inputs = len(args)
            node.next_functions = tuple(_edge(a) if n else None for a, n in zip(args, needs))
            node._out_meta = [(o._data.shape, o._data.dtype) for o in outs
                              if isinstance(o, Tensor)]
            ctx._node = node
            for i, o in enumerate(outs):
                if isinstance(o, Tensor) and id(o) not in ctx._non_diff and \
                        o._data.dtype.kind in "fc":
                    o.grad_fn = node
                    o._requires_grad = True
                    o._output_nr = i
                    if o._view is not None:   # a view made in forward: torch's CreationMeta
                        o._view = o._view[:2] + (IN_CUSTOM_FUNCTION,)
                        o._view_v = o._vc.v
        tracer = STATE.tracer
        if tracer is not None and hasattr(tracer, "record_function"):
            tracer.record_function(cls, args, outs)
        return out


# ---------------------------------------------------------------------------- named Functions
_NAMED = {}  # registered name -> Function class
_named_lock = threading.Lock()


def register_function(cls, name=None):
    """Register the custom ``Function`` subclass ``cls`` under ``name`` (default
    ``"<module>.<qualname>"``), the name ``ember.jit.save`` writes for it and the only way
    ``ember.jit.load`` finds it. Returns ``cls``, so it also works as a decorator.

    Registering the same class under the same name again does nothing. Raises EmberTypeError
    when ``cls`` is not a Function subclass or ``name`` not a non-empty string, and
    EmberValueError when ``name`` belongs to another class (two classes made by one factory
    share a qualname: give each its own ``name``) or ``cls`` already has another name.
    """
    if not (isinstance(cls, type) and issubclass(cls, Function)) or cls is Function:
        raise EmberTypeError(f"register_function: expected a subclass of "
                             f"ember.autograd.Function, got {cls!r}")
    if name is None:
        name = f"{cls.__module__}.{cls.__qualname__}"
    if not isinstance(name, str) or not name or not name.isprintable():
        raise EmberTypeError(f"register_function: name must be a non-empty printable string, "
                             f"got {name!r}")
    with _named_lock:
        held = _NAMED.get(name)
        if held is cls:
            return cls
        if held is not None:
            raise EmberValueError(f"register_function: the name {name!r} is already registered "
                                  f"for another class ({held!r}); pass name='...' to give "
                                  f"{cls.__qualname__} a name of its own")
        old = function_name(cls)
        if old is not None:
            raise EmberValueError(f"register_function: {cls.__qualname__} is already "
                                  f"registered as {old!r}")
        _NAMED[name] = cls
    return cls


def function_name(cls):
    """The name ``cls`` was registered under, or None."""
    for name, c in list(_NAMED.items()):
        if c is cls:
            return name
    return None


def lookup_function(name):
    """The Function class registered as ``name``, or None (nothing is imported)."""
    return _NAMED.get(name)


def registered_functions():
    """A copy of the registry: name -> Function class."""
    return dict(_NAMED)


def builtins_any(xs):
    for x in xs:
        if x:
            return True
    return False


class _DelayedError(Function):
    """The outputs of a ``once_differentiable`` backward: their gradient raises."""

    @staticmethod
    def forward(ctx, *outputs):
        return outputs[0] if len(outputs) == 1 else outputs

    @staticmethod
    def backward(ctx, *grads):
        raise EmberRuntimeError("trying to differentiate twice a function that was marked with "
                                "@once_differentiable")


def once_differentiable(fn):
    """Decorator of a custom Function's ``backward``: it runs without recording, and a gradient
    of what it returns (a double backward, ``create_graph=True``) raises, as torch's."""
    import functools
    from ember.tensor import Tensor

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        prev = STATE.grad_enabled
        STATE.grad_enabled = False
        try:
            outputs = fn(ctx, *args)
        finally:
            STATE.grad_enabled = prev
        if not prev or not builtins_any(isinstance(a, Tensor) and a._requires_grad
                                        for a in args):
            return outputs
        single = not isinstance(outputs, tuple)

        def marked(v):
            return v.detach().requires_grad_() if isinstance(v, Tensor) else v
        out = _DelayedError.apply(*(marked(v) for v in ((outputs,) if single else outputs)))
        return out
    return wrapper
