"""Exponential and Cauchy distributions (the bases of Weibull, Pareto and HalfCauchy), Laplace,
StudentT and ContinuousBernoulli."""
import math

import ember
from ember.distributions import constraints
from ember.distributions.discrete import _BinaryParams
from ember.distributions.distribution import Distribution
from ember.distributions.gamma import Chi2
from ember.distributions.normal import _LocScale
from ember.distributions.utils import (broadcast_all, broadcast_params, clamp_probs, finfo,
                                       lazy_property, logits_to_probs)
from ember.errors import EmberValueError


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


class Laplace(_LocScale):
    """Laplace(loc, scale): density ``exp(-|x - loc| / scale) / (2 scale)``."""

    def expand(self, batch_shape, _instance=None):
        return self._expand_attrs(Laplace, batch_shape, _instance, ("loc", "scale"))

    @property
    def mean(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=()):
        """``loc - scale sign(U) log(1 - |U|)`` with U uniform in [eps - 1, 1):
        differentiable in loc and scale."""
        shape = self._extended_shape(sample_shape)
        eps = float(finfo(self.loc).eps)
        u = ember.rand(*shape, dtype=self.loc.dtype) * (2 - eps) + (eps - 1)
        return self.loc - self.scale * u.sign() * ember.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        d = value - self.loc
        return 0.5 - 0.5 * d.sign() * ember.expm1(-d.abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * ember.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + (2 * self.scale).log()


class StudentT(Distribution):
    """StudentT(df, loc=0., scale=1.): ``loc + scale * T`` with T Student's t with ``df``
    degrees of freedom; mean NaN for df <= 1, variance inf for 1 < df <= 2 (as torch)."""
    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df, validate_args=validate_args)
        super().__init__(self.df.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_attrs(StudentT, batch_shape, _instance, ("df", "loc", "scale"))
        new._chi2 = self._chi2.expand(batch_shape)
        return new

    @property
    def mean(self):
        return ember.where(self.df <= 1, math.nan, self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        safe_df = ember.where(df > 2, df, 3.0)
        finite = self.scale.pow(2) * safe_df / (safe_df - 2)
        return ember.where(df > 2, finite, ember.where(df > 1, math.inf, math.nan))

    def rsample(self, sample_shape=()):
        """``loc + scale X / sqrt(Z / df)``, X standard normal, Z ~ Chi2(df) (implicitly
        reparameterized): differentiable in all three parameters."""
        shape = self._extended_shape(sample_shape)
        x = ember.randn(*shape, dtype=self.df.dtype)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * (x * ember.rsqrt(z / self.df))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        df = self.df
        z = (self.scale.log() + 0.5 * df.log() + 0.5 * math.log(math.pi)
             + (0.5 * df).lgamma() - (0.5 * (df + 1.0)).lgamma())
        return -0.5 * (df + 1.0) * ember.log1p(y ** 2.0 / df) - z

    def entropy(self):
        df = self.df
        lbeta = (0.5 * df).lgamma() + math.lgamma(0.5) - (0.5 * (df + 1)).lgamma()
        return (self.scale.log()
                + 0.5 * (df + 1) * ((0.5 * (df + 1)).digamma() - (0.5 * df).digamma())
                + 0.5 * df.log() + lbeta)


class ContinuousBernoulli(_BinaryParams, Distribution):
    """ContinuousBernoulli(probs=None, logits=None, lims=(0.499, 0.501)): density
    proportional to ``probs^x (1 - probs)^(1 - x)`` on [0, 1] (Loaiza-Ganem & Cunningham,
    2019); ``lims`` is the region around 1/2 where Taylor expansions replace the closed forms.
    As torch, ``probs`` is clamped into (0, 1) and checked first only when ``validate_args`` is
    given explicitly."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        batch = self._set_binary_params(probs, logits)
        if probs is not None:
            if validate_args is not None and not bool(
                    self.arg_constraints["probs"].check(self.probs).all()):
                raise EmberValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
            self._param = self.probs
        self._lims = lims
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_binary(ContinuousBernoulli, batch_shape, _instance,
                                   keep=("_lims",))

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return ember.where(self._outside_unstable_region(), self.probs, self._lims[0])

    def _cont_bern_log_norm(self):
        """The log normalising constant as a function of probs."""
        cut = self._cut_probs()
        below = ember.where(cut <= 0.5, cut, 0.0)
        above = ember.where(cut >= 0.5, cut, 1.0)
        log_norm = ((ember.log1p(-cut) - cut.log()).abs().log()
                    - ember.where(cut <= 0.5, ember.log1p(-2.0 * below),
                                  (2.0 * above - 1.0).log()))
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return ember.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / (ember.log1p(-cut) - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return ember.where(self._outside_unstable_region(), mus, taylor)

    @property
    def variance(self):
        cut = self._cut_probs()
        var = (cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2)
               + 1.0 / (ember.log1p(-cut) - cut.log()).pow(2))
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return ember.where(self._outside_unstable_region(), var, taylor)

    def rsample(self, sample_shape=()):
        """``icdf(U)``: differentiable in the parameter."""
        u = ember.rand(*self._extended_shape(sample_shape), dtype=self.probs.dtype)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        from ember.nn.functional import binary_cross_entropy_with_logits
        logits, value = broadcast_all(self.logits, value)
        return (-binary_cross_entropy_with_logits(logits, value, reduction="none")
                + self._cont_bern_log_norm())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = ember.where(self._outside_unstable_region(), cdfs, value)
        return ember.where(value <= 0.0, 0.0, ember.where(value >= 1.0, 1.0, unbounded))

    def icdf(self, value):
        cut = self._cut_probs()
        closed = ((ember.log1p(-cut + value * (2.0 * cut - 1.0)) - ember.log1p(-cut))
                  / (cut.log() - ember.log1p(-cut)))
        return ember.where(self._outside_unstable_region(), closed, value)

    def entropy(self):
        log_probs0 = ember.log1p(-self.probs)
        log_probs1 = self.probs.log()
        return (self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm()
                - log_probs0)
