"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""
import operator
from collections import OrderedDict

from ember.nn.modules.module import Module, _TrackedDict, _addindent
from ember.nn.parameter import Parameter
from ember.errors import EmberIndexError
from ember.tensor import Tensor


class _ModuleSequence(Module):
    """What Sequential and ModuleList share: positions checked against the length, iteration
    over the modules, append/extend/pop, and renumbering the keys "0", "1", ..."""

    def _position(self, idx):
        """``idx`` (an int, negative from the end) as a position; EmberIndexError outside."""
        n = len(self._modules)
        idx = operator.index(idx)
        if not -n <= idx < n:
            raise EmberIndexError(f"index {idx} is out of range")
        return idx % n

    def _renumber(self, mods):
        # a counted dict (module.tree_epoch), as Module.__init__ makes: ember.compile's tree
        # guard then keeps trusting its last check while nothing changes
        self.__dict__["_modules"] = _TrackedDict((str(i), m) for i, m in enumerate(mods))

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def pop(self, key):
        """Remove and return the module at position ``key``."""
        v = self[key]
        del self[key]
        return v


class Sequential(_ModuleSequence):
    """Modules called in order, each on the previous one's output. Takes modules or one
    OrderedDict of them; keys are "0", "1", ... (or the dict's)."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for k, m in args[0].items():
                self.add_module(k, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def _idx(self, idx):
        return list(self._modules)[self._position(idx)]

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._idx(idx)]

    def __setitem__(self, idx, module):
        setattr(self, self._idx(idx), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in list(self._modules)[idx]:
                delattr(self, k)
        else:
            delattr(self, self._idx(idx))
        self._renumber(list(self._modules.values()))

    def insert(self, index, module):
        """Insert ``module`` before position ``index`` (keys renumbered "0", "1", ...)."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise EmberIndexError(f"Index out of range: {index}")
        mods = list(self._modules.values())
        mods.insert(index % (n + 1) if index < 0 else index, module)
        self._renumber(mods)
        return self

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        return Sequential(*self, *other)

    def __iadd__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        return self.extend(other)

    def __mul__(self, other):
        if not isinstance(other, int) or other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        return Sequential(*(list(self) * other))

    __rmul__ = __mul__

    def __imul__(self, other):
        if not isinstance(other, int) or other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        return self.extend(list(self) * (other - 1))

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input


class ModuleList(_ModuleSequence):
    """A list of modules, registered as "0", "1", ..."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _idx(self, idx):
        return str(self._position(idx))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[self._idx(idx)]

    def __setitem__(self, idx, module):
        setattr(self, self._idx(idx), module)

    def __delitem__(self, idx):
        mods = list(self._modules.values())
        del mods[idx]
        self._renumber(mods)

    def __iadd__(self, modules):
        return self.extend(modules)

    def insert(self, index, module):
        """Insert ``module`` before position ``index``."""
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._renumber(mods)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def __repr__(self):
        """As torch: consecutive children that print the same are shown once,
        ``(2-5): 4 x Layer(...)``."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []  # [first index, last index, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [_addindent(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}", 2)
                 for a, b, r in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class _DictContainer(Module):
    """The mapping methods of ModuleDict and ParameterDict, over the registry named by
    ``_registry`` (``"_modules"`` or ``"_parameters"``); ``__setitem__`` registers."""
    _registry = None

    def _entries(self):
        return self.__dict__[self._registry]

    def _update(self, entries):
        items = entries.items() if hasattr(entries, "items") else entries
        for k, v in items:
            self[k] = v

    def __getitem__(self, key):
        return self._entries()[key]

    def __delitem__(self, key):
        del self._entries()[key]

    def __len__(self):
        return len(self._entries())

    def __iter__(self):
        return iter(self._entries())

    def __contains__(self, key):
        return key in self._entries()

    def keys(self):
        return self._entries().keys()

    def items(self):
        return self._entries().items()

    def values(self):
        return self._entries().values()


class ModuleDict(_DictContainer):
    """An ordered dict of modules."""
    _registry = "_modules"

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def clear(self):
        self._modules.clear()

    def update(self, modules):
        self._update(modules)


class ParameterList(Module):
    """A list of parameters, registered as "0", "1", ..."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(self._size)[idx]])
        n = self._size
        if not -n <= idx < n:
            raise EmberIndexError(f"index {idx} is out of range")
        return getattr(self, str(idx % n))

    def __setitem__(self, idx, param):
        idx = idx % self._size
        if not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, str(idx), param)

    def __len__(self):
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(self._size))

    def __iadd__(self, params):
        return self.extend(params)

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return "\n".join(_param_line(i, p, str(p.dtype) if isinstance(p, Tensor) else None)
                         for i, p in enumerate(self))


class ParameterDict(_DictContainer):
    """An ordered dict of parameters."""
    _registry = "_parameters"

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key, value):
        if not isinstance(value, Parameter):
            value = Parameter(value)
        self.register_parameter(key, value)

    def update(self, parameters):
        self._update(parameters)

    def extra_repr(self):
        return "\n".join(_param_line(k, p, p.type() if isinstance(p, Tensor) else None)
                          for k, p in self.items())


def _param_line(key, p, type_name):
    """One entry of a ParameterList / ParameterDict repr, as torch writes it (its list names
    the dtype, its dict the tensor type)."""
    if type_name is None:
        return f"  ({key}): Object of type: {type(p).__name__}"
    kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
    size = "x".join(str(n) for n in p.shape)
    return f"  ({key}): {kind} containing: [{type_name} of size {size}]"
