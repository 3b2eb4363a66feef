"""Parametrizations, as torch.nn.utils.parametrize: ``module.weight`` computed on access from
unconstrained originals by a chain of modules (``register_parametrization``), stored under
``module.parametrizations.weight.original`` (``original0``, ``original1``, ... when the first
module's ``right_inverse`` returns several tensors), so ``state_dict()`` keys equal torch's.

The module's class is swapped for a subclass ``Parametrized<Class>`` holding one property per
parametrized name, as torch does; ``remove_parametrizations`` restores it."""
import contextlib

from ember.autograd.grad_mode import no_grad
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError
from ember.nn.modules.container import ModuleDict, ModuleList
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor

__all__ = ["register_parametrization", "remove_parametrizations", "is_parametrized", "cached",
           "type_before_parametrizations", "ParametrizationList"]

_cache_enabled = 0
_cache = {}


@contextlib.contextmanager
def cached():
    """Inside the block each parametrized tensor is computed once, on first access."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def check_module(module, op):
    """``module`` itself, or an EmberTypeError naming ``op`` when it is not an nn.Module."""
    if not isinstance(module, Module):
        raise EmberTypeError(f"{op}: expected an nn.Module, got {type(module).__name__}")
    return module


def find_hook(module, cls, name):
    """``(key, hook)`` of the ``cls`` forward pre-hook for parameter ``name`` (the legacy
    weight_norm / spectral_norm), or ``(None, None)``."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, cls) and hook.name == name:
            return key, hook
    return None, None


def legacy_target(module, cls, name, op):
    """The parameter ``name`` that the legacy ``op`` (weight_norm / spectral_norm, hook class
    ``cls``) is to take over; EmberValueError when it already has or there is no such one."""
    if find_hook(module, cls, name)[0] is not None:
        raise EmberValueError(f"{op}: cannot register two {op} hooks on the same parameter "
                              f"{name}")
    weight = module._parameters.get(name)
    if weight is None:
        raise EmberValueError(f"{op}: module {type(module).__name__} has no parameter "
                              f"'{name}'")
    return weight


def legacy_remove(module, cls, name, op, compute, parameters=(), buffers=()):
    """Undo the legacy ``op`` on ``name``: its value ``compute(hook)`` (detached) becomes the
    plain parameter ``name`` again; the parameters and buffers ``name + suffix`` of the
    suffixes given and the hook go. EmberValueError when there is no such hook."""
    key, hook = find_hook(module, cls, name)
    if key is None:
        raise EmberValueError(f"{op} of '{name}' not found in {type(module).__name__}")
    weight = compute(hook).detach()
    delattr(module, name)
    for suffix in parameters:
        del module._parameters[name + suffix]
    for suffix in buffers:
        del module._buffers[name + suffix]
    module.register_parameter(name, Parameter(weight))
    del module._forward_pre_hooks[key]
    return module


def _set_value(original, value):
    """Replace ``original``'s values (and shape) by ``value``, keeping the object (torch's set_)."""
    with no_grad():
        original.data = value.detach().clone() if isinstance(value, Tensor) else value


class ParametrizationList(ModuleList):
    """The chain of parametrizations of one tensor, with its original(s)."""

    def __init__(self, modules, original, unsafe=False):
        if not modules:
            raise EmberValueError("ParametrizationList requires one or more modules")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = tuple(original.shape), original.dtype
        with no_grad():
            new = original
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    new = m.right_inverse(new)
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if not unsafe and (tuple(new.shape) != shape or new.dtype != dtype):
                raise EmberValueError(f"register_parametrization: right_inverse changed the "
                                      f"tensor from {list(shape)} {dtype} to "
                                      f"{list(new.shape)} {new.dtype}; pass unsafe=True to allow")
            _set_value(original, new)
            _register_like(self, "original", original, original)
        else:
            for i, t in enumerate(new):
                if not isinstance(t, Tensor):
                    raise EmberValueError(f"register_parametrization: right_inverse returned a "
                                          f"{type(t).__name__} in position {i}, expected tensors")
                if isinstance(original, Parameter):
                    t = Parameter(t.detach().clone(), original.requires_grad)
                _register_like(self, f"original{i}", t, original)
        if not unsafe:
            z = self()
            if not isinstance(z, Tensor) or tuple(z.shape) != shape or z.dtype != dtype:
                raise EmberValueError(f"register_parametrization: the parametrization maps the "
                                      f"original {list(shape)} {dtype} to "
                                      f"{type(z).__name__} {list(getattr(z, 'shape', []))} "
                                      f"{getattr(z, 'dtype', '')}; pass unsafe=True to allow")

    def right_inverse(self, value):
        """Set the originals so that the parametrized tensor becomes ``value``."""
        with no_grad():
            for m in reversed(list(self)):
                if not hasattr(m, "right_inverse"):
                    raise EmberRuntimeError(f"parametrization {type(m).__name__} has no "
                                            f"right_inverse: the tensor cannot be assigned")
                value = m.right_inverse(value)
            if self.is_tensor:
                _set_value(self.original, value)
            else:
                if len(value) != self.ntensors:
                    raise EmberValueError(f"right_inverse returned {len(value)} tensors, "
                                          f"expected {self.ntensors}")
                for i, t in enumerate(value):
                    _set_value(getattr(self, f"original{i}"), t)

    def forward(self):
        x = self[0](self.original) if self.is_tensor else \
            self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in list(self)[1:]:
            x = m(x)
        return x


def _register_like(owner, name, value, like):
    if isinstance(like, Parameter):
        owner.register_parameter(name, value if isinstance(value, Parameter)
                                 else Parameter(value, like.requires_grad))
    else:
        owner.register_buffer(name, value)


def _inject_new_class(module):
    cls = module.__class__

    def getstate(self):
        raise EmberRuntimeError("serializing parametrized modules by pickle is not supported; "
                                "save its state_dict()")

    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,),
                            {"__getstate__": getstate, "_ember_parametrized_base": cls})


def _inject_property(module, tensor_name):
    def get_parametrized(self):
        p = self.parametrizations[tensor_name]
        if _cache_enabled:
            key = (id(self), tensor_name)
            if key not in _cache:
                _cache[key] = p()
            return _cache[key]
        return p()

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def is_parametrized(module, tensor_name=None):
    """Whether ``module`` has parametrizations (for ``tensor_name``, if given)."""
    p = module.__dict__.get("_modules", {}).get("parametrizations")
    if p is None or not isinstance(p, ModuleDict):
        return False
    return len(p) > 0 if tensor_name is None else tensor_name in p


def type_before_parametrizations(module):
    """The module's class before any parametrization was registered."""
    return getattr(type(module), "_ember_parametrized_base", type(module)) \
        if is_parametrized(module) else type(module)


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Make ``module.<tensor_name>`` the output of ``parametrization`` applied to an original
    tensor (registered again if the name is already parametrized: the chain grows)."""
    check_module(module, "register_parametrization")
    if not isinstance(parametrization, Module):
        raise EmberValueError(f"register_parametrization: the parametrization must be an "
                              f"nn.Module, got {type(parametrization).__name__}")
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            y = getattr(module, tensor_name)
            z = parametrization(y)
            if not isinstance(z, Tensor) or tuple(z.shape) != tuple(y.shape) or \
                    z.dtype != y.dtype:
                raise EmberValueError(f"register_parametrization: the new parametrization "
                                      f"changes {tensor_name} from {list(y.shape)} {y.dtype}; "
                                      f"pass unsafe=True to allow")
        plist.append(parametrization)
        plist.unsafe = plist.unsafe or unsafe
        return module
    if tensor_name in module._parameters or tensor_name in module._buffers:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
        return module
    raise EmberValueError(f"register_parametrization: module {type(module).__name__} has no "
                          f"parameter, buffer or parametrized element named '{tensor_name}'")


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo ``register_parametrization`` for ``tensor_name``: the tensor becomes a plain
    parameter again, holding its parametrized value (or its original when
    ``leave_parametrized=False``)."""
    check_module(module, "remove_parametrizations")
    if not is_parametrized(module, tensor_name):
        raise EmberValueError(f"remove_parametrizations: module {type(module).__name__} does "
                              f"not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            _set_value(original, getattr(module, tensor_name))
    else:
        if not leave_parametrized:
            raise EmberValueError("Cannot leave unparametrized (`leave_parametrized=False`) a "
                                  "tensor that is parametrized in terms of a sequence of "
                                  "tensors.")
        with no_grad():
            t = getattr(module, tensor_name).detach().clone()
        original = Parameter(t, plist.original0.requires_grad) \
            if isinstance(plist.original0, Parameter) else t
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_like(module, tensor_name, original, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__._ember_parametrized_base
    return module
