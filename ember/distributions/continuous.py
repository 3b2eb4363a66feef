"""Exponential and Cauchy distributions (the bases of Weibull, Pareto and HalfCauchy)."""
import math

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.normal import _LocScale
from ember.distributions.utils import broadcast_params


class Exponential(Distribution):
    """Exponential(rate): density ``rate * exp(-rate * x)`` on x >= 0."""
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,), batch = broadcast_params(rate)
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_attrs(Exponential, batch_shape, _instance, ("rate",))

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return ember.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        """``-log(1 - U) / rate``: differentiable in rate."""
        u = ember.rand(*self._extended_shape(sample_shape), dtype=self.rate.dtype)
        return -ember.log1p(-u) / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - ember.exp(-self.rate * value)

    def icdf(self, value):
        return -ember.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()


class Cauchy(_LocScale):
    """Cauchy(loc, scale): density ``1 / (pi scale (1 + ((x - loc) / scale)^2))``; no mean or
    variance (NaN and inf, as torch)."""

    def expand(self, batch_shape, _instance=None):
        return self._expand_attrs(Cauchy, batch_shape, _instance, ("loc", "scale"))

    @property
    def mean(self):
        return ember.full(self._extended_shape(), math.nan, dtype=self.loc.dtype)

    @property
    def variance(self):
        return ember.full(self._extended_shape(), math.inf, dtype=self.loc.dtype)

    def rsample(self, sample_shape=()):
        """``loc + scale * tan(pi (U - 1/2))``: differentiable in loc and scale."""
        u = ember.rand(*self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + ember.tan(math.pi * (u - 0.5)) * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (-math.log(math.pi) - self.scale.log()
                - (((value - self.loc) / self.scale) ** 2).log1p())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ember.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return ember.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
