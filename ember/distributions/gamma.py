"""Gamma (and Chi2), Dirichlet and Beta distributions, with reparameterized gamma samples.

``_standard_gamma(alpha)`` draws Gamma(alpha, 1) samples and differentiates them implicitly:
for ``x = F^-1(u; alpha)`` with ``F`` the regularised lower incomplete gamma function,
``dx/dalpha = -(dF/dalpha)(x; alpha) / f(x; alpha)`` (torch's ``_standard_gamma_grad`` is an
approximation of the same quantity). ``dF/dalpha`` is a central difference of
``scipy.special.gammainc`` (needs scipy, like ember.special.gammainc).
"""
from numbers import Number

import numpy as np

import ember
from ember.autograd.function import Function
from ember.distributions import constraints
from ember.distributions.distribution import Distribution, _arg_repr
from ember.distributions.utils import broadcast_all, broadcast_params
from ember.errors import EmberValueError
from ember.random import resolve
from ember.tensor import Tensor


def standard_gamma_grad(alpha, x):
    """d x / d alpha of Gamma(alpha, 1) samples ``x`` (NumPy arrays, float64 inside)."""
    from ember.kernels.special import _sp
    gammainc = _sp("gammainc")
    a = np.asarray(alpha, np.float64)
    xv = np.asarray(x, np.float64)
    h = 1e-5 * np.maximum(a, 1e-3)
    dF = (gammainc(a + h, xv) - gammainc(a - h, xv)) / (2 * h)
    log_pdf = (a - 1) * np.log(xv) - xv - _sp("gammaln")(a)
    grad = -dF / np.exp(log_pdf)
    return np.where(np.isfinite(grad), grad, 0.0)


class _StandardGamma(Function):
    @staticmethod
    def forward(ctx, alpha):
        a = alpha._data
        rng = resolve(None)._rng
        x = rng.standard_gamma(np.asarray(a, np.float64)).astype(a.dtype)
        x = np.maximum(x, np.finfo(a.dtype).tiny)  # as torch: never exactly zero
        out = Tensor._make(np.asarray(x))
        ctx.save_for_backward(alpha, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        g = standard_gamma_grad(alpha._data, x._data).astype(alpha._data.dtype)
        return grad * Tensor._make(np.asarray(g))


def _standard_gamma(alpha):
    return _StandardGamma.apply(alpha)


class Gamma(Distribution):
    """Gamma(concentration, rate): density ``rate^a x^(a-1) e^(-rate x) / Gamma(a)``."""
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        (self.concentration, self.rate), batch = broadcast_params(concentration, rate)
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_attrs(Gamma, batch_shape, _instance, ("concentration", "rate"))

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        """Implicitly reparameterized: differentiable in concentration and rate."""
        shape = tuple(self._extended_shape(sample_shape))
        x = _standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        tiny = float(np.finfo(x._data.dtype).tiny)
        np.maximum(x._data, tiny, out=x._data)
        return x

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = ember.as_tensor(value, dtype=self.rate.dtype)
        c, r = self.concentration, self.rate
        return ember.xlogy(c, r) + ember.xlogy(c - 1, value) - r * value - c.lgamma()

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + c.lgamma() + (1.0 - c) * c.digamma()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ember.special.gammainc(self.concentration, self.rate * value)


class Dirichlet(Distribution):
    """Dirichlet(concentration): points of the simplex along the last dimension."""
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise EmberValueError("`concentration` parameter must be at least "
                                  "one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = ember.Size(batch_shape)
        new.concentration = self.concentration.expand(tuple(batch_shape)
                                                      + tuple(self.event_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        """Normalised reparameterized gamma samples: differentiable in concentration."""
        shape = tuple(self._extended_shape(sample_shape))
        g = _standard_gamma(self.concentration.expand(shape))
        return g / g.sum(-1, keepdim=True)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return ember.xlogy(c - 1.0, value).sum(-1) + c.sum(-1).lgamma() - c.lgamma().sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        cm1 = (self.concentration - 1).clamp(min=0.0)
        total = cm1.sum(-1, keepdim=True)
        mode = cm1 / ember.where(total == 0, 1.0, total)  # those rows are one-hot below
        mask = (self.concentration < 1).all(-1, keepdim=True)
        onehot = ember.nn.functional.one_hot(mode.argmax(-1), cm1.shape[-1]).to(mode.dtype)
        return ember.where(mask, onehot, mode)

    @property
    def variance(self):
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0.pow(2) * (c0 + 1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        a0 = c.sum(-1)
        return (c.lgamma().sum(-1) - a0.lgamma() - (k - a0) * a0.digamma()
                - ((c - 1.0) * c.digamma()).sum(-1))


class Beta(Distribution):
    """Beta(concentration1, concentration0) on [0, 1]: a two-class Dirichlet's first part."""
    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        if isinstance(concentration1, Number) and isinstance(concentration0, Number):
            c = ember.tensor([float(concentration1), float(concentration0)])
        else:
            c1, c0 = broadcast_all(concentration1, concentration0)
            c = ember.stack([c1, c0], -1)
        self._dirichlet = Dirichlet(c, validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_attrs(Beta, batch_shape, _instance, ("_dirichlet",))

    @property
    def concentration1(self):
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self):
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape)[..., 0]

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._dirichlet.log_prob(ember.stack([value, 1.0 - value], -1))

    def entropy(self):
        return self._dirichlet.entropy()

    def __repr__(self):
        return (f"Beta(concentration1: {_arg_repr(self.concentration1)}, "
                f"concentration0: {_arg_repr(self.concentration0)})")


class Chi2(Gamma):
    """Chi2(df): the chi-squared distribution, ``Gamma(df / 2, 1 / 2)``."""
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_attrs(Chi2, batch_shape, _instance, ("concentration", "rate"))

    @property
    def df(self):
        return self.concentration * 2

    def __repr__(self):
        return f"Chi2(df: {_arg_repr(self.df)})"
