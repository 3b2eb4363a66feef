"""``Module``: the base class of every layer and model, with torch's registration, traversal,
state-dict and hook semantics (keys such as ``features.0.weight`` match torch's)."""
import warnings
from collections import OrderedDict, namedtuple

import numpy as np

from ember import _dtype
from ember.autograd.function import Function
from ember.autograd.grad_mode import no_grad
from ember.autograd.state import STATE
from ember.nn.parameter import Parameter
from ember.tensor import Tensor, check_device
from ember.utils.hooks import RemovableHandle
from ember.errors import EmberKeyError, EmberRuntimeError, EmberTypeError, EmberValueError

class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """``load_state_dict``'s result, as torch's: ``<All keys matched successfully>`` when both
    lists are empty, else the named tuple."""
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__

# The module-tree change counter: advanced by every change of what ember.compile's module-tree
# guard reads (a module's training flag, hook dicts, children, parameters and buffers, class and
# ``__dict__``, and the global hook dicts), so that the guard trusts its last check while the
# counter stands still (docs/compile.md, "What happens on a call"). Parameters' requires_grad
# flags are not counted: the guard reads them at every call.
tree_epoch = 0

_HOOK_FIELDS = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks")

# the ``__dict__`` keys the tree guard reads
_TREE_FIELDS = frozenset(("training", "_parameters", "_buffers", "_modules", "_forward_pre_hooks",
                          "_forward_hooks", "_backward_hooks", "_backward_pre_hooks", "__dict__",
                          "__class__"))


def _advance():
    """Advance ``tree_epoch``: something the tree guard reads has changed."""
    global tree_epoch
    tree_epoch += 1


class _TrackedDict(OrderedDict):
    """An OrderedDict whose every change advances ``tree_epoch``: a Module's parameters,
    buffers, children and hooks, and the global hooks. (OrderedDict's ``update``,
    ``setdefault`` and ``|=`` store through ``__setitem__``.)"""

    __slots__ = ()

    def __setitem__(self, key, value):
        _advance()
        OrderedDict.__setitem__(self, key, value)

    def __delitem__(self, key):
        _advance()
        OrderedDict.__delitem__(self, key)

    def pop(self, *args):
        _advance()
        return OrderedDict.pop(self, *args)

    def popitem(self, last=True):
        _advance()
        return OrderedDict.popitem(self, last)

    def clear(self):
        _advance()
        OrderedDict.clear(self)

    def move_to_end(self, key, last=True):
        _advance()
        OrderedDict.move_to_end(self, key, last)


class _ModuleAttrs(dict):
    """A Module's ``__dict__``: a write into it by key (``m.__dict__["_modules"] = ...``, as
    containers renumbering their children do) of a field the tree guard reads, and any other
    change but a plain item write, advances ``tree_epoch``. (Attribute assignment goes
    through ``Module.__setattr__``, which advances it for those fields itself.)"""

    __slots__ = ()

    def __setitem__(self, key, value):
        if key in _TREE_FIELDS:
            _advance()
        dict.__setitem__(self, key, value)

    def __delitem__(self, key):
        _advance()
        dict.__delitem__(self, key)

    def pop(self, *args):
        _advance()
        return dict.pop(self, *args)

    def popitem(self):
        _advance()
        return dict.popitem(self)

    def clear(self):
        _advance()
        dict.clear(self)

    def update(self, *args, **kwargs):
        _advance()
        dict.update(self, *args, **kwargs)

    def setdefault(self, key, default=None):
        _advance()
        return dict.setdefault(self, key, default)

    def __ior__(self, other):
        _advance()
        return dict.__ior__(self, other)


# global hooks (nn.modules.module.register_module_*_hook): run for every module, before its own
_global_forward_pre_hooks = _TrackedDict()
_global_forward_hooks = _TrackedDict()
_global_forward_hooks_always_called = set()
_global_backward_pre_hooks = _TrackedDict()
_global_backward_hooks = _TrackedDict()


def _uninitialised(module, name):
    """The error for a Module subclass whose ``__init__`` did not call ``super().__init__()``."""
    cls = type(module).__name__
    return AttributeError(f"'{cls}' object has no attribute '{name}': Module.__init__() was not "
                          f"called; call super().__init__() first thing in {cls}.__init__")


class Module:
    """Base class for all neural-network modules.

    Submodules, parameters and buffers assigned as attributes are registered and found by
    ``parameters()``, ``state_dict()``, ``to()`` and the rest.
    """

    training: bool
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise EmberTypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        _advance()
        d = self.__dict__
        if d.__class__ is not _ModuleAttrs:   # attributes set before this call are kept
            d = _ModuleAttrs(d)
            object.__setattr__(self, "__dict__", d)
        dict.update(d, training=True, _parameters=_TrackedDict(), _buffers=_TrackedDict(),
                    _non_persistent_buffers_set=set(), _modules=_TrackedDict(),
                    _forward_hooks=_TrackedDict(), _forward_hooks_with_kwargs=set(),
                    _forward_pre_hooks=_TrackedDict(), _forward_pre_hooks_with_kwargs=set(),
                    _forward_hooks_always_called=set(), _backward_hooks=_TrackedDict(),
                    _backward_pre_hooks=_TrackedDict(), _state_dict_hooks=OrderedDict(),
                    _state_dict_pre_hooks=OrderedDict(),
                    _load_state_dict_pre_hooks=OrderedDict(),
                    _load_state_dict_post_hooks=OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    # ---- calling -------------------------------------------------------------------------
    # the value of tree_epoch when this module was last seen with no hook of its own and none
    # global, its hook dicts all counted (each hook added or removed advances the counter)
    _no_hooks_at = -1

    def __call__(self, *args, **kwargs):
        if self._no_hooks_at == tree_epoch:   # one read instead of the eight below
            return self.forward(*args, **kwargs)
        d = self.__dict__
        try:
            pre = d["_forward_pre_hooks"]
        except KeyError:
            raise _uninitialised(self, "_forward_pre_hooks") from None
        if not (pre or d["_forward_hooks"] or d.get("_backward_hooks")
                or d.get("_backward_pre_hooks") or _global_forward_pre_hooks
                or _global_forward_hooks or _global_backward_hooks
                or _global_backward_pre_hooks):
            if d.__class__ is _ModuleAttrs and all(
                    d.get(k).__class__ is _TrackedDict for k in _HOOK_FIELDS):
                dict.__setitem__(d, "_no_hooks_at", tree_epoch)
            return self.forward(*args, **kwargs)
        return self._call_impl(args, kwargs)

    def _call_impl(self, args, kwargs):
        d = self.__dict__
        tracer = STATE.tracer
        if tracer is not None and hasattr(tracer, "graph_break"):   # ember.compile
            tracer.graph_break(f"a call of {type(self).__name__} with hooks (module hooks are "
                               "not traced)")
        for hid, hook in list(_global_forward_pre_hooks.items()) + \
                list(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise EmberRuntimeError(f"forward pre-hook must return None or a tuple "
                                                f"of (new_args, new_kwargs), but got {res}.")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        bw_hooks = list(_global_backward_hooks.values()) + \
            list(d.get("_backward_hooks", {}).values())
        bw_pre = list(_global_backward_pre_hooks.values()) + \
            list(d.get("_backward_pre_hooks", {}).values())
        bw = None
        if (bw_hooks or bw_pre) and STATE.grad_enabled:
            bw = _BackwardHook(self, bw_hooks, bw_pre)
            args = bw.setup_input(args)
        result, called = None, set()
        fwd = list(_global_forward_hooks.items()) + list(self._forward_hooks.items())
        always = _global_forward_hooks_always_called | d.get("_forward_hooks_always_called",
                                                              set())
        try:
            result = self.forward(*args, **kwargs)
            for hid, hook in fwd:
                called.add(hid)
                if hid in self._forward_hooks_with_kwargs:
                    res = hook(self, args, kwargs, result)
                else:
                    res = hook(self, args, result)
                if res is not None:
                    result = res
        except Exception:
            for hid, hook in fwd:
                if hid in always and hid not in called:
                    try:
                        if hid in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, result)
                        else:
                            hook(self, args, result)
                    except Exception as e:  # noqa: BLE001 - torch silences these too
                        warnings.warn(f"forward hook with always_call=True raised an exception "
                                      f"that was silenced, as another error was raised in "
                                      f"forward: {e!r}")
            raise
        if bw is not None:
            result = bw.setup_output(result)
        return result

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args)`` (``hook(module, args, kwargs)`` with ``with_kwargs``)
        before forward; it may return replacement args (or ``(args, kwargs)``)."""
        h = RemovableHandle(self._forward_pre_hooks,
                            extra_dict=[self._forward_pre_hooks_with_kwargs])
        self._forward_pre_hooks[h.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(h.id)
        if prepend:
            self._forward_pre_hooks.move_to_end(h.id, last=False)
        return h

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """Call ``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with
        ``with_kwargs``) after forward; it may return a replacement output. ``always_call``:
        run it even when forward raises."""
        h = RemovableHandle(self._forward_hooks, extra_dict=[self._forward_hooks_with_kwargs,
                                                             self._forward_hooks_always_called])
        self._forward_hooks[h.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(h.id)
        if always_call:
            self._forward_hooks_always_called.add(h.id)
        if prepend:
            self._forward_hooks.move_to_end(h.id, last=False)
        return h

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_output)`` when the gradients of the module's outputs are
        ready; it may return replacement grad_output."""
        h = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[h.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(h.id, last=False)
        return h

    def register_full_backward_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_input, grad_output)`` when the gradients of the module's
        positional inputs are computed (None for inputs that need none); it may return
        replacement grad_input."""
        h = RemovableHandle(self._backward_hooks)
        self._backward_hooks[h.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(h.id, last=False)
        return h

    def register_backward_hook(self, hook):
        """torch's deprecated name; same as ``register_full_backward_hook`` here."""
        return self.register_full_backward_hook(hook)

    # ---- registration --------------------------------------------------------------------
    def register_parameter(self, name, param):
        """Add a parameter (or None) under ``name``. Raises KeyError/TypeError for bad names or
        values."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name(self, name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise EmberTypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (ember.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add a buffer (or None); non-persistent buffers are left out of the state dict."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name(self, name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise EmberTypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                                 f"'{name}' (ember Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Add a child module (or None) under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise EmberTypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str):
            raise EmberTypeError(f"module name should be a string. Got {type(name).__name__}")
        if "." in name or name == "":
            raise EmberKeyError(f'module name can\'t contain ".", or be empty, got "{name}"')
        if hasattr(self, name) and name not in self._modules:
            raise EmberKeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        """The submodule at dotted path ``target``; AttributeError if there is none."""
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer `{name}`")
        return mod._buffers[name]

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            _remove_from(self, name, keep="_parameters")
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise EmberTypeError(f"cannot assign '{type(value).__name__}' as parameter "
                                     f"'{name}' (ember.nn.Parameter or None expected)")
            params[name] = None
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            _remove_from(self, name, keep="_modules")
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise EmberTypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (ember.nn.Module or None expected)")
            modules[name] = None
            return
        buffers = d.get("_buffers")
        if isinstance(value, Tensor) and value.__dict__.get("_buffer_persistent") is not None:
            _remove_from(self, name)
            self.register_buffer(name, value, value.__dict__.pop("_buffer_persistent"))
            return
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise EmberTypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(ember Tensor or None expected)")
            buffers[name] = value
            return
        if name in _TREE_FIELDS:   # training, a hook dict or store replaced, __class__, __dict__
            _advance()
        object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        if name.startswith("_") and "_parameters" not in d:
            raise _uninitialised(self, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in ("_parameters", "_buffers", "_modules"):
            s = self.__dict__.get(store)
            if s is not None and name in s:
                del s[name]
                self._non_persistent_buffers_set.discard(name)
                return
        _advance()
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self))
        keys += list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(set(k for k in keys if not k[0].isdigit()))

    # ---- traversal -----------------------------------------------------------------------
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mod_prefix, mod in modules:
            for k, v in get_members(mod):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (mod_prefix + ("." if mod_prefix else "") + k, v)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """Iterate (name, Parameter), each shared parameter once."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                   remove_duplicate)

    def parameters(self, recurse=True):
        """Iterate the parameters (of submodules too when ``recurse``)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                   remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Iterate (dotted name, module) over this module and every submodule, depth first."""
        if memo is None:
            memo = set()
        if id(self) in memo and remove_duplicate:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    # ---- modes and bulk changes ----------------------------------------------------------
    def train(self, mode=True):
        """Set training mode on this module and every submodule; returns self."""
        if not isinstance(mode, bool):
            raise EmberValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        """Same as ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all parameters (to None by default)."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad = Tensor._make(np.zeros_like(p.grad._data))

    def apply(self, fn):
        """Call ``fn`` on every submodule (children first) and on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn):
        for m in self.children():
            m._apply(fn)
        for store in (self._parameters, self._buffers):
            for k, t in store.items():
                if t is None:
                    continue
                new = fn(t._data)
                if new is not t._data:
                    t._data = new
                    t._bump()
                    if t.grad is not None:
                        t.grad = Tensor._make(fn(t.grad._data))
        return self

    def to(self, *args, **kwargs):
        """Cast floating parameters and buffers to a dtype (in place); devices other than cpu
        raise UnsupportedError (a RuntimeError). Returns self."""
        dtype = kwargs.get("dtype")
        device = kwargs.get("device")
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
            elif isinstance(a, (_dtype.dtype, np.dtype, type)):
                dtype = a
            elif a is not None:
                device = a
        check_device(device, "Module.to()")
        if dtype is None:
            return self
        npd = _dtype.to_numpy_dtype(dtype)
        if not _dtype.from_numpy_dtype(npd).is_floating_point:
            raise EmberTypeError(f"nn.Module.to only accepts floating point dtypes, but got "
                            f"desired dtype={dtype}")
        return self._apply(lambda a: a.astype(npd) if _dtype.from_numpy_dtype(
            a.dtype).is_floating_point and a.dtype != npd else a)

    def float(self):
        return self.to(_dtype.float32)

    def double(self):
        return self.to(_dtype.float64)

    def half(self):
        return self.to(_dtype.float16)

    def cpu(self):
        return self

    def cuda(self, device=None):
        """ember runs only on the CPU: raises UnsupportedError naming CUDA."""
        check_device("cuda" if device is None or isinstance(device, int) else device,
                     f"{type(self).__name__}.cuda()")

    def type(self, dst_type):
        return self.to(dst_type)

    def share_memory(self):
        """Move every parameter and buffer into shared memory in place
        (``Tensor.share_memory_``), for Hogwild training with ``ember.multiprocessing``;
        gradients stay private to each process. Returns self."""
        for m in self.modules():
            for store in (m._parameters, m._buffers):
                for t in store.values():
                    if t is not None:
                        t.share_memory_()
        return self

    # ---- state dict ----------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An ordered dict of every parameter and persistent buffer by dotted name (detached
        tensors sharing memory with the module)."""
        if args:
            destination = args[0] if len(args) > 0 else destination
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
        for hook in self.__dict__.get("_state_dict_pre_hooks", {}).values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            res = hook(self, destination, prefix, {})
            if res is not None:
                destination = res
        return destination

    def _local_state(self):
        local = {}
        for name, p in self._parameters.items():
            if p is not None:
                local[name] = p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                local[name] = b
        return local

    def _load_check(self, state_dict, prefix, missing, unexpected_extra, mismatched):
        for name, t in self._local_state().items():
            key = prefix + name
            if key not in state_dict:
                if not self._may_miss(name):
                    missing.append(key)
                continue
            v = state_dict[key]
            shape = tuple(v.shape) if hasattr(v, "shape") else np.shape(v)
            if shape != tuple(t._data.shape):
                mismatched.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{list(shape)} from checkpoint, the shape in current model is "
                                  f"{list(t._data.shape)}.")

    def _may_miss(self, name):
        return False

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy parameters and buffers from ``state_dict`` (ember or torch tensors, ndarrays).

        Checks everything first: with ``strict`` a missing or unexpected key, and always a
        shape mismatch, raises RuntimeError naming every offending key, and nothing changes.
        With ``assign`` the module takes the given tensors themselves instead of copying into
        its own (torch's ``assign=True``). Returns (missing_keys, unexpected_keys).
        """
        if not hasattr(state_dict, "keys"):
            raise EmberTypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, mismatched, expected, hook_errors = [], [], set(), []
        for prefix, mod in self.named_modules():
            p = prefix + "." if prefix else ""
            for hook, with_module in mod._load_state_dict_pre_hooks.values():
                pre_args = (state_dict, p, {}, strict, missing, [], hook_errors)
                hook(mod, *pre_args) if with_module else hook(*pre_args)
            mod._load_check(state_dict, p, missing, None, mismatched)
            expected.update(p + k for k in mod._local_state())
        unexpected = [k for k in state_dict.keys() if k not in expected]
        post = [(m, h) for _, m in self.named_modules()
                for h in m.__dict__.get("_load_state_dict_post_hooks", {}).values()]
        errors = hook_errors + mismatched if post else \
            self._strict_errors(strict, missing, unexpected) + hook_errors + mismatched
        if errors:
            raise EmberRuntimeError(f"Error(s) in loading state_dict for "
                                    f"{type(self).__name__}:\n\t" + "\n\t".join(errors))
        with no_grad():
            for prefix, mod in self.named_modules():
                p = prefix + "." if prefix else ""
                for name, t in mod._local_state().items():
                    if p + name in state_dict:
                        if assign:
                            _assign_state(mod, name, t, state_dict[p + name])
                            continue
                        np.copyto(t._data, _to_array(state_dict[p + name]), casting="unsafe")
                        t._bump()
        if post:  # as torch: after loading; they may edit the incompatible keys strict checks
            keys = _IncompatibleKeys(missing, unexpected)
            for mod, hook in post:
                if hook(mod, keys) is not None:
                    raise EmberRuntimeError("load_state_dict post hooks must return None")
            errors = self._strict_errors(strict, missing, unexpected)
            if errors:
                raise EmberRuntimeError(f"Error(s) in loading state_dict for "
                                        f"{type(self).__name__}:\n\t" + "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    @staticmethod
    def _strict_errors(strict, missing, unexpected):
        errors = []
        if strict:   # torch's order: missing, then unexpected
            if missing:
                errors.append("Missing key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in missing) + ". ")
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing and unexpected and all(k.startswith("module.") for k in unexpected) \
                    and set(missing) <= {k[len("module."):] for k in unexpected}:
                errors.append("(every unexpected key is a missing one prefixed 'module.', as "
                              "DataParallel / DistributedDataParallel save them: load "
                              "{k.removeprefix('module.'): v for k, v in state_dict.items()})")
        return errors

    def register_state_dict_pre_hook(self, hook):
        """Call ``hook(module, prefix, keep_vars)`` before this module's entries are saved."""
        h = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[h.id] = hook
        return h

    def register_state_dict_post_hook(self, hook):
        """Call ``hook(module, state_dict, prefix, local_metadata)`` after this module's
        entries (and its submodules') are saved; it may return a replacement dict."""
        h = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[h.id] = hook
        return h

    _register_state_dict_hook = register_state_dict_post_hook

    def register_load_state_dict_pre_hook(self, hook):
        """Call ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` before this module's entries are loaded."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        h = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[h.id] = (hook, with_module)
        return h

    def register_load_state_dict_post_hook(self, hook):
        """Call ``hook(module, incompatible_keys)`` after ``load_state_dict``; it may edit
        ``incompatible_keys.missing_keys`` / ``unexpected_keys`` in place before strict checks
        them, and must return None."""
        h = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[h.id] = hook
        return h

    # ---- printing ------------------------------------------------------------------------
    def extra_repr(self):
        """Extra text inside this module's repr (layers override it)."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        children = []
        for name, m in self._modules.items():
            mod_str = _addindent(repr(m), 2)
            children.append(f"({name}): {mod_str}")
        lines = lines + children
        main = self._get_name() + "("
        if lines:
            if len(extra.split("\n")) == 1 and not children:
                main += extra
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    def __setstate__(self, state):
        d = self.__dict__
        if d.__class__ is not _ModuleAttrs:
            object.__setattr__(self, "__dict__", _ModuleAttrs(d))
        self.__dict__.update(state)

    def __getstate__(self):
        return self.__dict__


def _assign_state(module, name, current, value):
    """``load_state_dict(assign=True)`` for one entry, as torch: the module takes ``value``
    itself (its dtype, its memory; a tensor loaded as a parameter is wrapped in a Parameter
    sharing its memory, with the replaced parameter's requires_grad), so tied weights untie."""
    if not isinstance(value, Tensor):
        value = Tensor._make(np.ascontiguousarray(_to_array(value)))
    if name in module._parameters:
        if isinstance(value, Parameter):
            value.requires_grad_(current.requires_grad)
        else:
            value = Parameter(value, requires_grad=current.requires_grad)
    setattr(module, name, value)


def _to_array(v):
    if isinstance(v, Tensor):
        return v._data
    if hasattr(v, "detach") and hasattr(v, "numpy"):  # a torch tensor
        return v.detach().cpu().numpy()
    return np.asarray(v)


def _check_name(module, name, what):
    if not isinstance(name, str):
        raise EmberTypeError(f"{what} name should be a string. Got {type(name).__name__}")
    if "." in name:
        raise EmberKeyError(f'{what} name can\'t contain "."')
    if name == "":
        raise EmberKeyError(f'{what} name can\'t be empty string ""')
    stores = {"parameter": "_parameters", "buffer": "_buffers"}
    if hasattr(module, name) and name not in module.__dict__[stores[what]]:
        raise EmberKeyError(f"attribute '{name}' already exists")


def _remove_from(module, name, keep=None):
    """Drop ``name`` from every store but ``keep`` (where assigning replaces it in place, so a
    replaced child keeps its position, as torch)."""
    d = module.__dict__
    for store in ("_parameters", "_buffers", "_modules"):
        s = d.get(store)
        if s is not None and name in s and store != keep:
            del s[name]
    d.pop(name, None)
    nps = d.get("_non_persistent_buffers_set")
    if nps is not None:
        nps.discard(name)


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(" " * n + line for line in lines)


# ---------------------------------------------------------------------------- global hooks
def register_module_forward_pre_hook(hook):
    """Call ``hook(module, args)`` before every module's forward (before its own pre-hooks)."""
    h = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[h.id] = hook
    return h


def register_module_forward_hook(hook, *, always_call=False):
    """Call ``hook(module, args, output)`` after every module's forward (before its own
    hooks); it may return a replacement output."""
    h = RemovableHandle(_global_forward_hooks, extra_dict=[_global_forward_hooks_always_called])
    _global_forward_hooks[h.id] = hook
    if always_call:
        _global_forward_hooks_always_called.add(h.id)
    return h


def register_module_full_backward_pre_hook(hook):
    """``register_full_backward_pre_hook`` for every module."""
    h = RemovableHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[h.id] = hook
    return h


def register_module_full_backward_hook(hook):
    """``register_full_backward_hook`` for every module."""
    h = RemovableHandle(_global_backward_hooks)
    _global_backward_hooks[h.id] = hook
    return h


# ---------------------------------------------------------------------------- backward hooks
class _HookState:
    __slots__ = ("module", "hooks", "pre_hooks", "n_args", "tensor_pos", "grad_output",
                 "inputs_hooked")


class _InputHook(Function):
    """Identity on a module's inputs; its backward sees grad_input and runs the full hooks."""

    @staticmethod
    def forward(ctx, st, *tensors):
        ctx.st = st
        ctx.set_materialize_grads(False)
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        st = ctx.st
        full = [None] * st.n_args
        for pos, g in zip(st.tensor_pos, grads):
            full[pos] = g
        grad_input = tuple(full)
        for hook in st.hooks:
            res = hook(st.module, grad_input, st.grad_output)
            if res is not None:
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                if len(res) != len(grad_input):
                    raise EmberRuntimeError(f"backward hook returned an invalid number of "
                                            f"grad_input, got {len(res)}, but expected "
                                            f"{len(grad_input)}")
                grad_input = res
        return (None,) + tuple(grad_input[p] for p in st.tensor_pos)


class _OutputHook(Function):
    """Identity on a module's outputs; its backward sees grad_output and runs the pre-hooks
    (and the full hooks when no input needs a gradient)."""

    @staticmethod
    def forward(ctx, st, *tensors):
        ctx.st = st
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        st = ctx.st
        for hook in st.pre_hooks:
            res = hook(st.module, grads)
            if res is not None:
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                if len(res) != len(grads):
                    raise EmberRuntimeError(f"backward pre hook returned an invalid number of "
                                            f"grad_output, got {len(res)}, but expected "
                                            f"{len(grads)}")
                grads = res
        st.grad_output = grads
        if not st.inputs_hooked:
            none = (None,) * st.n_args
            for hook in st.hooks:
                res = hook(st.module, none, grads)
                if res is not None and any(r is not None for r in res):
                    raise EmberRuntimeError("Backward hook for Modules where no input requires "
                                            "gradient should always return None or None for "
                                            "all gradients.")
        return (None,) + tuple(grads)


class _BackwardHook:
    def __init__(self, module, hooks, pre_hooks):
        st = self.st = _HookState()
        st.module, st.hooks, st.pre_hooks = module, hooks, pre_hooks
        st.grad_output, st.inputs_hooked = None, False

    def setup_input(self, args):
        st = self.st
        st.n_args = len(args)
        st.tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not any(args[i]._requires_grad for i in st.tensor_pos) or not st.hooks:
            return args
        st.inputs_hooked = True
        new = _InputHook.apply(st, *(args[i] for i in st.tensor_pos))
        args = list(args)
        for i, t in zip(st.tensor_pos, new):
            args[i] = t
        return tuple(args)

    def setup_output(self, result):
        single = isinstance(result, Tensor)
        outs = (result,) if single else result
        if not isinstance(outs, tuple):
            return result
        pos = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o._requires_grad]
        if not pos:
            return result
        new = _OutputHook.apply(self.st, *(outs[i] for i in pos))
        outs = list(outs)
        for i, t in zip(pos, new):
            outs[i] = t
        return outs[0] if single else tuple(outs)


# ---------------------------------------------------------------------------- device= kwargs
def _guard_device_kwargs(package):
    """Make every layer class defined under ``package`` that takes torch's ``device=`` argument
    check it: "cpu" (or None) is accepted, "cuda" and the rest raise UnsupportedError naming
    the class."""
    import functools
    import inspect
    todo, seen = [Module], set()
    while todo:
        cls = todo.pop()
        todo.extend(c for c in cls.__subclasses__() if c not in seen)
        seen.add(cls)
        init = vars(cls).get("__init__")
        if not cls.__module__.startswith(package + ".") or init is None or \
                getattr(init, "_checks_device", False):
            continue
        params = list(inspect.signature(init).parameters.values())[1:]
        names = [p.name for p in params]
        if "device" not in names:
            continue
        pos = names.index("device")
        if any(p.kind in (p.VAR_POSITIONAL, p.KEYWORD_ONLY) for p in params[:pos + 1]):
            pos = None
        cls.__init__ = _device_checked(init, cls.__name__, pos, functools)


def _device_checked(init, name, pos, functools):
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        dev = kwargs.get("device")
        if dev is None and pos is not None and len(args) > pos:
            dev = args[pos]
        check_device(dev, name)
        init(self, *args, **kwargs)
    __init__._checks_device = True
    return __init__
