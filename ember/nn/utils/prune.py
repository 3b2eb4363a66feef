"""Pruning, as torch.nn.utils.prune: pruning ``module.<name>`` moves the parameter to
``<name>_orig``, adds a buffer ``<name>_mask`` of 0s and 1s and makes ``module.<name>`` the plain
attribute ``<name>_orig * <name>_mask``, recomputed before every forward by a pre-hook (the
pruning method itself), so ``state_dict()`` keys equal torch's and gradients reach
``<name>_orig`` masked. Pruning a tensor again combines the masks in a ``PruningContainer``: a
new method only considers the units still unpruned. ``remove`` makes the pruning permanent.

``amount`` is a count (an int) or a fraction (a float in [0, 1], rounded as Python's ``round``).
L1 and Ln methods prune the units of smallest magnitude (which of equal ones may differ from
torch's); the random methods draw from ember's generator."""
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

from ember.autograd.grad_mode import no_grad
from ember.errors import EmberIndexError, EmberRuntimeError, EmberTypeError, EmberValueError
from ember.nn.utils.convert_parameters import parameters_to_vector
from ember.ops import creation

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


def _find_hook(module, name):
    """``(key, hook)`` of the pruning method registered on ``module`` for ``name``, or
    ``(None, None)``."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            return key, hook
    return None, None


def _check_scores(scores, t, what):
    if scores.shape != t.shape:
        raise EmberRuntimeError(f"importance_scores should have the same shape as {what}, got "
                                f"{scores.shape} vs {t.shape}")


class BasePruningMethod(ABC):
    """A way of pruning one tensor: ``compute_mask`` says which entries stay (1) and go (0);
    the object, once applied, is the module's forward pre-hook that recomputes the tensor."""

    _tensor_name = None

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The mask of ``t`` (same shape), pruning on top of ``default_mask``."""

    def apply_mask(self, module):
        """``<name>_orig * <name>_mask`` of ``module``, the pruned tensor."""
        if self._tensor_name is None:
            raise EmberRuntimeError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)``, on top of any earlier pruning
        of it (the methods then sit in one PruningContainer); returns the module's hook."""
        method = cls(*args, **kwargs)
        method._tensor_name = name
        # the tensor as it is now (pruned already, where it was) is what is pruned further
        orig = getattr(module, name)
        if importance_scores is None:
            importance_scores = orig
        else:
            _check_scores(importance_scores, orig, f"parameter {name} of {module}")
        old_key, old = _find_hook(module, name)
        if old is None:
            hook = method
        elif isinstance(old, PruningContainer):
            old.add_pruning_method(method)
            hook = old
        else:
            hook = PruningContainer(old)
            hook.add_pruning_method(method)
        first = old is None
        if first:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = creation.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            with no_grad():
                mask = hook.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, hook.apply_mask(module))
        except Exception:
            # leave the module as it was
            if first:
                module._buffers.pop(name + "_mask", None)
                module.__dict__.pop(name, None)
                module.register_parameter(name, module._parameters.pop(name + "_orig"))
            elif hook is old:
                old._pruning_methods = old._pruning_methods[:-1]
            raise
        if old_key is not None:
            del module._forward_pre_hooks[old_key]
        module.register_forward_pre_hook(hook)
        return hook

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` times its mask (computed from ``importance_scores``, default ``t``)."""
        if importance_scores is None:
            importance_scores = t
        else:
            _check_scores(importance_scores, t, "tensor t")
        if default_mask is None:
            default_mask = creation.ones_like(t)
        with no_grad():
            mask = self.compute_mask(importance_scores, default_mask=default_mask)
        return t * mask

    def remove(self, module):
        """Make the pruning permanent: ``<name>`` becomes the parameter ``<name>_orig`` holding
        the pruned values; ``<name>_orig`` and ``<name>_mask`` go (the hook stays: ``remove``
        the function takes it off)."""
        if self._tensor_name is None:
            raise EmberRuntimeError(f"Module {module} has to be pruned before pruning can be "
                                    f"removed")
        name = self._tensor_name
        weight = self.apply_mask(module)
        if hasattr(module, name):
            delattr(module, name)
        orig = module._parameters[name + "_orig"]
        orig.data = weight.data
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


class PruningContainer(BasePruningMethod):
    """The sequence of pruning methods applied, in turn, to one tensor; its mask is the last
    method's, computed on the units the earlier ones left."""

    def __init__(self, *methods):
        self._pruning_methods = ()
        if methods and methods[0] is not None:
            self._tensor_name = methods[0]._tensor_name
        for method in methods:
            self.add_pruning_method(method)

    def add_pruning_method(self, method):
        """Append ``method``, which must act on the same tensor."""
        if method is not None and not isinstance(method, BasePruningMethod):
            raise EmberTypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise EmberValueError(
                f"Can only add pruning methods acting on the parameter named "
                f"'{self._tensor_name}' to PruningContainer {self}. Found "
                f"'{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """``default_mask`` with the last method's mask written over the part of ``t`` still
        unpruned: the entries where it is 1 (unstructured), the channels along the method's
        ``dim`` not all 0 (structured) or all of ``t`` (global)."""
        method = self._pruning_methods[-1]
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            slc = default_mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have '
                                     'the attribute `dim` defined.')
            _validate_structured_pruning(t)
            ndim = t.dim()
            dim = method.dim + ndim if method.dim < 0 else method.dim
            if dim < 0:
                raise EmberIndexError(f"Index is out of bounds for tensor with dimensions {ndim}")
            _validate_pruning_dim(t, dim)
            keep = default_mask.sum(dim=[d for d in range(ndim) if d != dim]) != 0
            slc = tuple(keep if d == dim else slice(None) for d in range(ndim))
        elif kind == "global":
            slc = (slice(None),) * t.dim()
        else:
            raise EmberValueError(f"Unrecognized PRUNING_TYPE {kind}")
        new_mask = default_mask.to(dtype=t.dtype)
        partial = method.compute_mask(t[slc], default_mask=default_mask[slc])
        new_mask[slc] = partial.to(dtype=new_mask.dtype)
        return new_mask


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all 1s (or the earlier mask)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class _Unstructured(BasePruningMethod):
    """Prunes ``amount`` entries, those ``_chosen`` picks among the flattened tensor."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        k = _units_to_prune(self.amount, t.nelement())
        mask = default_mask.clone()
        if k:
            mask.view(-1)[self._chosen(t.detach().reshape(-1), k)] = 0
        return mask


class RandomUnstructured(_Unstructured):
    """Prunes ``amount`` entries chosen at random."""

    def _chosen(self, flat, k):
        return creation.rand_like(flat).topk(k).indices

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_Unstructured):
    """Prunes the ``amount`` entries of smallest absolute value."""

    def _chosen(self, flat, k):
        return flat.abs().topk(k, largest=False).indices

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _channel_mask(t, dim, index):
    """A mask of ``t``'s shape, 1 on the channels ``index`` (indices or bools) along ``dim``."""
    mask = creation.zeros_like(t)
    mask[tuple(index if d == dim else slice(None) for d in range(t.dim()))] = 1
    return mask


class _Structured(BasePruningMethod):
    """Prunes ``amount`` channels along ``dim``: all but those ``_kept`` keeps."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        channels = t.shape[self.dim]
        k = _units_to_prune(self.amount, channels)
        if not k:
            return default_mask
        dim = self.dim % t.dim()
        mask = _channel_mask(t, dim, self._kept(t, dim, channels, k))
        mask *= default_mask.to(dtype=mask.dtype)
        return mask


class RandomStructured(_Structured):
    """Prunes ``amount`` channels along ``dim``, chosen at random."""

    def _kept(self, t, dim, channels, k):
        drawn = creation.rand(channels)
        return drawn > drawn.kthvalue(k).values

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_Structured):
    """Prunes the ``amount`` channels along ``dim`` of smallest ``n``-norm (``n`` as
    ``Tensor.norm``'s ``p``: a number, ``inf``, ``-inf``, ``'fro'``, ``'nuc'``)."""

    def __init__(self, amount, n, dim=-1):
        super().__init__(amount, dim)
        self.n = n

    def _kept(self, t, dim, channels, k):
        norm = t.detach().norm(p=self.n, dim=[d for d in range(t.dim()) if d != dim])
        return norm.topk(channels - k, largest=True).indices

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where the given ``mask`` is 0."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise EmberRuntimeError(f"default_mask shape {default_mask.shape} must match "
                                    f"self.mask shape {self.mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    """Reparametrise ``module.<name>`` as pruned, with a mask of 1s; returns the module."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune ``amount`` random entries of ``module.<name>``; returns the module."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the ``amount`` entries of ``module.<name>`` of smallest absolute value (of
    ``importance_scores``, when given); returns the module."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune ``amount`` random channels of ``module.<name>`` along ``dim``; returns the
    module."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the ``amount`` channels of ``module.<name>`` along ``dim`` of smallest ``n``-norm
    (of ``importance_scores``, when given); returns the module."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the ``(module, name)`` tensors of ``parameters`` as one: ``pruning_method`` (an
    unstructured method class, built with ``**kwargs``) on all their entries together, each
    tensor then pruned with its part of the mask (CustomFromMask). ``importance_scores`` maps
    ``(module, name)`` to the scores of that tensor."""
    if not isinstance(parameters, Iterable):
        raise EmberTypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = {} if importance_scores is None else importance_scores
    if not isinstance(importance_scores, dict):
        raise EmberTypeError("global_unstructured(): importance_scores must be of type dict")
    with no_grad():
        scores = parameters_to_vector([importance_scores.get((m, name), getattr(m, name))
                                       for m, name in parameters])
        default_mask = parameters_to_vector([
            getattr(m, name + "_mask") if hasattr(m, name + "_mask")
            else creation.ones_like(getattr(m, name)) for m, name in parameters])
    method = pruning_method(**kwargs)
    if method.PRUNING_TYPE != "unstructured":
        raise EmberTypeError(f'Only "unstructured" PRUNING_TYPE supported for the '
                             f'`pruning_method`. Found method {pruning_method} of type '
                             f'{method.PRUNING_TYPE}')
    method._tensor_name = "temp"
    container = PruningContainer(method)
    with no_grad():
        final_mask = container.compute_mask(scores, default_mask)
    start = 0
    for m, name in parameters:
        param = getattr(m, name)
        n = param.numel()
        custom_from_mask(m, name, mask=final_mask[start:start + n].view_as(param))
        start += n


def custom_from_mask(module, name, mask):
    """Prune ``module.<name>`` where ``mask`` is 0; returns the module."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name):
    """Make the pruning of ``module.<name>`` permanent: it becomes a plain parameter holding
    the pruned values, without ``<name>_orig``, ``<name>_mask`` or the hook; returns the
    module."""
    key, hook = _find_hook(module, name)
    if key is None:
        raise EmberValueError(f"Parameter '{name}' of module {module} has to be pruned before "
                              f"pruning can be removed")
    hook.remove(module)
    del module._forward_pre_hooks[key]
    return module


def is_pruned(module):
    """Whether ``module`` or any of its submodules holds a pruning hook."""
    return any(isinstance(hook, BasePruningMethod)
               for _, m in module.named_modules() for hook in m._forward_pre_hooks.values())


def _validate_pruning_amount_init(amount):
    if not isinstance(amount, numbers.Real):
        raise EmberTypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if isinstance(amount, numbers.Integral):
        bad = amount < 0
    else:
        bad = not 0.0 <= float(amount) <= 1.0
    if bad:
        raise EmberValueError(f"amount={amount} should either be a float in the range [0, 1] or "
                              f"a non-negative integer")


def _units_to_prune(amount, size):
    """How many of ``size`` units ``amount`` prunes; EmberValueError for more than there are."""
    if not isinstance(amount, numbers.Integral):
        return round(amount * size)
    if amount > size:
        raise EmberValueError(f"amount={amount} should be smaller than the number of parameters "
                              f"to prune={size}")
    return int(amount)


def _validate_structured_pruning(t):
    if t.dim() <= 1:
        raise EmberValueError(f"Structured pruning can only be applied to multidimensional "
                              f"tensors. Found tensor of shape {t.shape} with {t.dim()} dims")


def _validate_pruning_dim(t, dim):
    if not -t.dim() <= dim < t.dim():
        raise EmberIndexError(f"Invalid index {dim} for tensor of size {t.shape}")
