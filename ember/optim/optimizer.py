"""``Optimizer``: parameter groups, per-parameter state, zero_grad and torch-format state dicts.

Updates run on the parameters' NumPy storage, in place and outside autograd (no graph is
built); each write bumps the parameter's version counter.
"""
import copy
import functools
from collections import OrderedDict, defaultdict

import numpy as np

from ember.autograd.state import STATE
from ember.kernels.runtime import fpstate
from ember.tensor import Tensor
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError
from ember.utils.hooks import RemovableHandle

# hooks run around every optimizer's step (register_optimizer_step_pre_hook / _post_hook)
_global_optimizer_pre_hooks = OrderedDict()
_global_optimizer_post_hooks = OrderedDict()


def register_optimizer_step_pre_hook(hook):
    """Run ``hook(optimizer, args, kwargs)`` before every optimizer's ``step``, before the
    optimizer's own pre hooks; it may return ``(new_args, new_kwargs)``."""
    handle = RemovableHandle(_global_optimizer_pre_hooks)
    _global_optimizer_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook):
    """Run ``hook(optimizer, args, kwargs)`` after every optimizer's ``step``, after the
    optimizer's own post hooks."""
    handle = RemovableHandle(_global_optimizer_post_hooks)
    _global_optimizer_post_hooks[handle.id] = hook
    return handle


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    """Base class: ``params`` is an iterable of Tensors or of dicts (parameter groups)."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise EmberTypeError("params argument given to the optimizer should be an iterable of "
                                 f"Tensors or dicts, but got {type(params).__name__}")
        groups = list(params)
        if not groups:
            raise EmberValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __repr__(self):
        """torch's text: the class name, then for each group a blank line, ``Parameter Group
        i`` and its options other than ``params``, sorted (``AdamW ()`` without groups)."""
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for k in sorted(group):
                if k != "params":
                    s += f"    {k}: {group[k]}\n"
        return s + ")"

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def add_param_group(self, param_group):
        """Add a group (a dict with 'params' and optional per-group options).

        Raises ValueError for a parameter already in another group or a missing required option.
        """
        if not isinstance(param_group, dict):
            raise EmberTypeError("param_group must be a dict, but got "
                                 f"{type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise EmberTypeError("optimizer parameters need to be organized in ordered "
                                 "collections, but the ordering of tensors in sets will change "
                                 "between runs. Please use a list instead.")
        params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise EmberTypeError("optimizer can only optimize Tensors, but one of the "
                                     f"params is {type(p).__name__}")
            if not p.is_leaf:
                raise EmberValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group)
        group["params"] = params
        for k, v in self.defaults.items():
            if v is required and k not in group:
                raise EmberValueError(f"parameter group didn't specify a value of required "
                                      f"optimization parameter {k}")
            group.setdefault(k, v)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise EmberValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of every optimized parameter (to None by default)."""
        tracer = STATE.tracer
        if tracer is not None and hasattr(tracer, "graph_break"):  # ember.compile
            why = tracer.capture_zero_grad(self, set_to_none) if hasattr(
                tracer, "capture_zero_grad") else f"{type(self).__name__}.zero_grad()"
            if why is None:   # captured: the compiled step sets the gradients
                return
            tracer.graph_break(why)
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad._data[...] = 0
                        p.grad._bump()

    def __init_subclass__(cls, **kwargs):
        """An optimizer's ``step`` inside a function being compiled is offered to the
        compiler (``ember.compiler.step``), which traces the update into the graph; any other
        step is a graph break naming why. ember's own optimizers update with NumPy's
        floating-point errors ignored (``kernels.runtime.fpstate``: an inf or NaN gradient gives torch's
        values and no warning); a closure runs under the caller's state."""
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None:
            own = cls.__module__.startswith("ember.")

            @functools.wraps(step)
            def checked_step(self, *args, **kw):
                hooked = _global_optimizer_pre_hooks or _global_optimizer_post_hooks or \
                    self.__dict__.get("_optimizer_step_pre_hooks") or \
                    self.__dict__.get("_optimizer_step_post_hooks")
                if not hooked or self.__dict__.get("_stepping"):   # (a subclass's super().step())
                    return run_step(self, *args, **kw)
                self._stepping = True
                try:
                    return self._hooked_step(run_step, (self,) + args, kw)
                finally:
                    self._stepping = False

            def run_step(self, *args, **kw):
                self._opt_called = True    # (an LR scheduler stepped before it warns)
                tracer = STATE.tracer
                if tracer is not None and hasattr(tracer, "graph_break"):
                    # ember.compile: None when the update was traced, "" to run it eagerly
                    # unrecorded (the state's first step), else why it breaks the graph
                    why = tracer.capture_step(self, *args, **kw) if hasattr(
                        tracer, "capture_step") else f"{type(self).__name__}.step()"
                    if why is None:
                        return None
                    if why:
                        tracer.graph_break(why)
                if not own:
                    return step(self, *args, **kw)
                prev, self._caller_fp = self._caller_fp, fpstate.current()
                token = fpstate.enter(fpstate.IGNORE)
                try:
                    return step(self, *args, **kw)
                finally:
                    fpstate.leave(token)
                    self._caller_fp = prev
            cls.step = checked_step

    def step(self, closure=None):
        raise NotImplementedError(f"{type(self).__name__} must implement step(closure=None)")

    # ---- hooks (torch's names and call signatures) -----------------------------------------
    def _hooks(self, name):
        return self.__dict__.setdefault(name, OrderedDict())

    def _register(self, name, hook, prepend=False):
        hooks = self._hooks(name)
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def _hooked_step(self, run_step, args, kw):
        """``run_step(*args, **kw)`` (``args[0]`` is the optimizer, as torch passes them to the
        hooks) between the step pre hooks (global ones first; each may return new ``(args,
        kwargs)``) and post hooks (global ones last)."""
        for hook in (*_global_optimizer_pre_hooks.values(),
                     *self._hooks("_optimizer_step_pre_hooks").values()):
            changed = hook(self, args, kw)
            if changed is not None:
                if not (isinstance(changed, tuple) and len(changed) == 2):
                    raise EmberRuntimeError(f"optimizer step pre hook must return None or a "
                                            f"tuple of (new_args, new_kwargs), but got "
                                            f"{changed!r}")
                args, kw = changed
        out = run_step(*args, **kw)
        for hook in (*self._hooks("_optimizer_step_post_hooks").values(),
                     *_global_optimizer_post_hooks.values()):
            hook(self, args, kw)
        return out

    def register_step_pre_hook(self, hook):
        """Run ``hook(optimizer, args, kwargs)`` before ``step`` (``args`` starts with the
        optimizer, as torch's); it may return ``(new_args, new_kwargs)``. Returns a handle
        whose ``remove()`` unregisters it."""
        return self._register("_optimizer_step_pre_hooks", hook)

    def register_step_post_hook(self, hook):
        """Run ``hook(optimizer, args, kwargs)`` after ``step``."""
        return self._register("_optimizer_step_post_hooks", hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """Run ``hook(optimizer)`` before ``state_dict`` builds the dict."""
        return self._register("_optimizer_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """Run ``hook(optimizer, state_dict)`` on the built dict; it may return a new one."""
        return self._register("_optimizer_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """Run ``hook(optimizer, state_dict)`` before loading; it may return the dict to
        load instead."""
        return self._register("_optimizer_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """Run ``hook(optimizer)`` after loading."""
        return self._register("_optimizer_load_state_dict_post_hooks", hook, prepend)

    _caller_fp = None   # the caller's floating-point state while ``step`` runs

    def _closure(self, closure):
        if closure is None:
            return None
        from ember.autograd.grad_mode import enable_grad
        token = fpstate.enter(self._caller_fp) if self._caller_fp is not None else None
        try:
            with enable_grad():
                return closure()
        finally:
            if token is not None:
                fpstate.leave(token)

    # ---- state dict ----------------------------------------------------------------------
    def state_dict(self):
        """{'state': {index: {name: Tensor or number}}, 'param_groups': [{..., 'params':
        [indices]}]} — torch's layout, with parameters numbered across groups in order."""
        for hook in self._hooks("_optimizer_state_dict_pre_hooks").values():
            hook(self)
        index = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            ids = []
            for p in g["params"]:
                if id(p) not in index:
                    index[id(p)] = len(index)
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {}
        for g in self.param_groups:
            for p in g["params"]:
                if p in self.state and self.state[p]:
                    state[index[id(p)]] = {k: (Tensor._make(v._data.copy())
                                               if isinstance(v, Tensor) else copy.deepcopy(v))
                                           for k, v in self.state[p].items()}
        out = {"state": state, "param_groups": groups}
        for hook in self._hooks("_optimizer_state_dict_post_hooks").values():
            changed = hook(self, out)
            if changed is not None:
                out = changed
        return out

    def load_state_dict(self, state_dict):
        """Restore from ``state_dict`` (as returned by state_dict, or torch's). Raises
        ValueError when the groups or their sizes differ."""
        for hook in self._hooks("_optimizer_load_state_dict_pre_hooks").values():
            changed = hook(self, state_dict)
            if changed is not None:
                state_dict = changed
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise EmberValueError("loaded state dict has a different number of parameter groups")
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise EmberValueError("loaded state dict contains a parameter group that doesn't "
                                      "match the size of optimizer's group")
        id_map = {}
        for mine, theirs in zip(self.param_groups, groups):
            for p, i in zip(mine["params"], theirs["params"]):
                id_map[i] = p
        saved = state_dict["state"]
        self.state = defaultdict(dict)
        for k, st in saved.items():
            key = int(k)
            if key not in id_map:
                continue
            p = id_map[key]
            self.state[p] = {name: _cast_state(name, v, p) for name, v in st.items()}
        for mine, theirs in zip(self.param_groups, groups):
            for k, v in theirs.items():
                if k != "params":
                    mine[k] = tuple(v) if k == "betas" and isinstance(v, list) else v
        for hook in self._hooks("_optimizer_load_state_dict_post_hooks").values():
            hook(self)


def _cast_state(name, value, param):
    """A loaded state value as this optimizer keeps it, with torch's policy: floating-point
    state takes a floating-point parameter's dtype; a complex parameter's state is not cast.
    A complex parameter's state is complex, of the parameter's shape (torch's layout; the
    updates read its real view, ``algorithms._real``); a real view (..., 2) of it is read back
    as complex."""
    if hasattr(value, "detach") and hasattr(value, "numpy") and not isinstance(value, Tensor):
        value = Tensor._make(value.detach().cpu().numpy().copy())
    if isinstance(value, Tensor):
        if name == "step":
            return float(value._data)
        value = value._data
    if not isinstance(value, np.ndarray):
        return value
    kind = param._data.dtype.kind
    if kind == "f" and value.dtype.kind == "f":
        value = value.astype(param._data.dtype)
    elif kind == "c" and value.dtype.kind == "f" and value.shape == param._data.shape + (2,):
        value = value[..., 0] + 1j * value[..., 1]
    return Tensor._make(np.array(value, copy=True))
