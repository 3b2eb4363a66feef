"""Distributions of counts: Poisson, Binomial, Geometric, NegativeBinomial and Multinomial."""
import math

import ember
from ember.distributions import constraints
from ember.distributions.discrete import Categorical, _BinaryParams, _one_of
from ember.distributions.distribution import Distribution
from ember.distributions.gamma import Gamma
from ember.distributions.utils import broadcast_all, broadcast_params, finfo, lazy_property
from ember.errors import EmberValueError, UnsupportedError

__all__ = ["Poisson", "Binomial", "Geometric", "NegativeBinomial", "Multinomial"]


class Poisson(Distribution):
    """Poisson(rate): ``k`` with probability ``rate^k e^(-rate) / k!``. No closed-form entropy
    (NotImplementedError, as torch)."""
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,), batch = broadcast_params(rate)
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_attrs(Poisson, batch_shape, _instance, ("rate",))

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        """Draws of shape ``sample_shape + batch_shape`` in rate's dtype (ember's generator)."""
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            return ember.poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return ember.xlogy(value, rate) - rate - (value + 1).lgamma()


class _CountParams(_BinaryParams):
    """``total_count`` with ``probs`` or ``logits`` (exactly one), broadcast together in the
    parameter's dtype."""

    def _set_count_params(self, total_count, probs, logits):
        _one_of(probs, logits)
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self._param = self.probs
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self._param = self.logits
        self.total_count = self.total_count.to(self._param.dtype)
        return self._param.shape

    def _expand_count(self, cls, batch_shape, _instance):
        new = self._expand_binary(cls, batch_shape, _instance)
        new.total_count = self.total_count.expand(ember.Size(batch_shape))
        return new


def _clamp_by_zero(x):
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(_CountParams, Distribution):
    """Binomial(total_count=1, probs=None, logits=None): successes in ``total_count``
    Bernoulli trials of probability ``probs`` (``sigmoid(logits)``)."""
    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        batch = self._set_count_params(total_count, probs, logits)
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_count(Binomial, batch_shape, _instance)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with ember.no_grad():
            return ember.binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        normalize = (n * _clamp_by_zero(logits) + n * ember.log1p(ember.exp(-logits.abs()))
                     - (n + 1).lgamma())
        return value * logits - (value + 1).lgamma() - (n - value + 1).lgamma() - normalize

    def _homogeneous_count(self, what):
        total = int(self.total_count.max())
        if not int(self.total_count.min()) == total:
            raise UnsupportedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total

    def entropy(self):
        """Exact, by summing over the support (needs one total_count for the whole batch)."""
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        total = self._homogeneous_count("enumerate_support")
        values = ember.arange(1 + total, dtype=self._param.dtype)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values


class Geometric(_BinaryParams, Distribution):
    """Geometric(probs=None, logits=None): the number of failures ``k = 0, 1, ...`` before
    the first success, probability ``(1 - p)^k p``."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        batch = self._set_binary_params(probs, logits)
        super().__init__(batch, validate_args=validate_args)
        if self._validate_args and probs is not None:
            value = self.probs
            if not bool((value > 0).all()):
                raise EmberValueError(
                    f"Expected parameter probs ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to be positive but found "
                    f"invalid values:\n{value[~(value > 0)]}")

    def expand(self, batch_shape, _instance=None):
        return self._expand_binary(Geometric, batch_shape, _instance)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return ember.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        """``floor(log U / log(1 - p))`` with U uniform in [tiny, 1)."""
        shape = self._extended_shape(sample_shape)
        tiny = float(finfo(self.probs).tiny)
        with ember.no_grad():
            u = ember.rand(*shape, dtype=self.probs.dtype).clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = ember.where((probs == 1) & (value == 0), 0.0, probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        from ember.nn.functional import binary_cross_entropy_with_logits
        return binary_cross_entropy_with_logits(self.logits, self.probs,
                                                reduction="none") / self.probs


class NegativeBinomial(_CountParams, Distribution):
    """NegativeBinomial(total_count, probs=None, logits=None): the number of successes (each
    of probability ``probs``) before ``total_count`` failures; a Gamma-Poisson mixture."""
    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        batch = self._set_count_params(total_count, probs, logits)
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_count(NegativeBinomial, batch_shape, _instance)

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / ember.sigmoid(-self.logits)

    @lazy_property
    def _gamma(self):
        return Gamma(concentration=self.total_count, rate=ember.exp(-self.logits),
                     validate_args=False)

    def sample(self, sample_shape=()):
        """Poisson draws at Gamma(total_count, exp(-logits)) rates."""
        with ember.no_grad():
            return ember.poisson(self._gamma.sample(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        from ember.nn.functional import logsigmoid
        n = self.total_count
        unnormalized = n * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        normalization = -(n + value).lgamma() + (1.0 + value).lgamma() + n.lgamma()
        normalization = normalization.masked_fill(n + value == 0.0, 0.0)
        return unnormalized - normalization


class Multinomial(Distribution):
    """Multinomial(total_count=1, probs=None, logits=None): the counts of each of ``K``
    categories in ``total_count`` (an int) Categorical draws; event shape ``(K,)``.
    ``log_prob`` does not need ``total_count`` (any total is scored)."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise UnsupportedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = ember.Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = self._binomial.expand(tuple(batch_shape) + tuple(self.event_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        """Count vectors of shape ``sample_shape + batch_shape + (K,)`` in probs' dtype."""
        sample_shape = ember.Size(sample_shape)
        with ember.no_grad():
            draws = self._categorical.sample(ember.Size((self.total_count,)) + sample_shape)
            order = list(range(1, draws.dim())) + [0]
            draws = draws.permute(*order)
            counts = ember.zeros(*self._extended_shape(sample_shape), dtype=ember.int64)
            counts = counts.scatter_add(-1, draws, ember.ones_like(draws))
            return counts.to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        logits = ember.where((value == 0) & (logits == -math.inf), 0.0, logits)
        log_factorial_n = (value.sum(-1) + 1).lgamma()
        log_factorial_xs = (value + 1).lgamma().sum(-1)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)

    def entropy(self):
        """``n H(Categorical) - log n! + sum_i E[log x_i!]`` with binomial marginals x_i."""
        n = self.total_count
        term1 = n * self._categorical.entropy() - math.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        weights = (support + 1).lgamma()
        return term1 + (binomial_probs * weights).sum((0, -1))
