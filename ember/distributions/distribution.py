"""``Distribution``: batch and event shapes, argument validation, sampling helpers."""
import ember
from ember.distributions import constraints
from ember.distributions.utils import lazy_property
from ember.errors import EmberValueError
from ember.tensor import Tensor


class Distribution:
    """Base class. ``validate_args`` (default on, as torch) checks parameters against
    ``arg_constraints`` at construction and values against ``support`` in ``log_prob``."""
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError("set_default_validate_args expects a bool")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = ember.Size(batch_shape)
        self._event_shape = ember.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None),
                                                             lazy_property):
                    continue  # a parameter computed from another one is not checked
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise EmberValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def arg_constraints(self):
        return {}

    @property
    def support(self):
        raise NotImplementedError(f"{type(self).__name__} does not define a support")

    @property
    def mean(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def expand(self, batch_shape, _instance=None):
        raise NotImplementedError(f"{type(self).__name__} does not implement expand")

    def sample(self, sample_shape=()):
        """Samples of shape ``sample_shape + batch_shape + event_shape``, without gradient."""
        with ember.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sampler "
                                  "(has_rsample is False)")

    def sample_n(self, n):
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob")

    def cdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def enumerate_support(self, expand=True):
        raise NotImplementedError(f"{type(self).__name__} does not enumerate its support")

    def perplexity(self):
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=()):
        if not isinstance(sample_shape, ember.Size):
            sample_shape = ember.Size(sample_shape)
        return ember.Size(tuple(sample_shape) + tuple(self._batch_shape)
                          + tuple(self._event_shape))

    def _expand_attrs(self, cls, batch_shape, _instance, names, keep=()):
        """The ``expand`` most distributions need: a new ``cls`` instance whose attributes
        ``names`` (those this instance holds: of a lazily paired ``probs``/``logits``, the ones
        computed) are expanded to ``batch_shape`` and whose ``keep`` attributes are shared."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = ember.Size(batch_shape)
        for n in names:
            if n in self.__dict__:
                setattr(new, n, self.__dict__[n].expand(batch_shape))
        for n in keep:
            setattr(new, n, getattr(self, n))
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {type(self).__name__} of {cls.__name__} that "
                                      "defines a custom __init__ method must also define a "
                                      "custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def _validate_sample(self, value):
        """torch's checks: a Tensor, the event shape on the right, broadcastable with
        batch_shape + event_shape, inside the support."""
        if not isinstance(value, Tensor):
            raise EmberValueError("The value argument to log_prob must be a Tensor")
        start = value.dim() - len(self._event_shape)
        if tuple(value.shape[start:]) != tuple(self._event_shape):
            raise EmberValueError("The right-most size of value must match event_shape: "
                                  f"{value.shape} vs {self._event_shape}.")
        actual = value.shape
        expected = self._batch_shape + self._event_shape
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise EmberValueError("Value is not broadcastable with batch_shape+event_shape: "
                                      f"{actual} vs {expected}.")
        try:
            support = self.support
        except NotImplementedError:
            return
        if not bool(support.check(value).all()):
            raise EmberValueError(
                f"Expected value argument ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) to be within the support ({support!r}) of the "
                f"distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{p}: {_arg_repr(self.__dict__[p])}" for p in names)
        return f"{type(self).__name__}({args})"


def _arg_repr(value):
    """A parameter in a repr, as torch shows it: the value when it has one element, else
    its shape."""
    if value.numel() != 1:
        return value.shape
    return value.item() if value.dim() == 0 else value
