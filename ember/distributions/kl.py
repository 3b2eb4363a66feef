"""``kl_divergence(p, q)`` and ``register_kl``: closed forms looked up by the most specific
(type(p), type(q)) pair registered."""
import math

import ember
from ember.distributions.continuous import Exponential
from ember.distributions.discrete import Bernoulli, Categorical
from ember.distributions.gamma import Beta, Dirichlet, Gamma
from ember.distributions.multivariate_normal import (Independent, MultivariateNormal,
                                                     _batch_mahalanobis)
from ember.distributions.normal import Normal, Uniform
from ember.distributions.transformed_distribution import Gumbel, TransformedDistribution
from ember.distributions.utils import euler_constant, sum_rightmost
from ember.errors import EmberTypeError, UnsupportedError

_KL_REGISTRY = {}


def register_kl(type_p, type_q):
    """Decorator: ``@register_kl(P, Q) def kl(p, q): ...`` registers KL(P || Q)."""
    if not (isinstance(type_p, type) and isinstance(type_q, type)):
        raise EmberTypeError("register_kl expects two Distribution subclasses, got "
                             f"{type_p!r} and {type_q!r}")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        return fn
    return decorator


def _dispatch(type_p, type_q):
    matches = [(tp, tq) for tp, tq in _KL_REGISTRY
               if issubclass(type_p, tp) and issubclass(type_q, tq)]
    if not matches:
        return None
    # the closest match: smallest MRO distance on both sides
    return _KL_REGISTRY[min(matches, key=lambda m: (type_p.__mro__.index(m[0])
                                                    + type_q.__mro__.index(m[1])))]


def kl_divergence(p, q):
    """KL(p || q) per batch element. Raises NotImplementedError for an unregistered pair."""
    fn = _dispatch(type(p), type(q))
    if fn is None:
        raise UnsupportedError(f"No KL(p || q) is implemented for p type "
                               f"{type(p).__name__} and q type {type(q).__name__}")
    return fn(p, q)


def _inf_where(cond, value):
    return ember.where(cond, math.inf, value)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    from ember.nn.functional import softplus
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = ember.where(p.probs == 0, 0.0, _inf_where(q.probs == 0, t1))
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = ember.where(p.probs == 1, 0.0, _inf_where(q.probs == 1, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _inf_where((q.probs == 0).expand(tuple(t.shape)), t)
    t = ember.where((p.probs == 0).expand(tuple(t.shape)), 0.0, t)
    return t.sum(-1)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _inf_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    width = p.high - p.low
    t1 = (math.sqrt(2 * math.pi) * q.scale / width).log()
    t2 = width.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sp = p.concentration1 + p.concentration0
    sq = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sp.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sq.lgamma()
    t3 = (p.concentration1 - q.concentration1) * p.concentration1.digamma()
    t4 = (p.concentration0 - q.concentration0) * p.concentration0.digamma()
    t5 = (sq - sp) * sp.digamma()
    return t1 - t2 + t3 + t4 + t5


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = q.concentration.lgamma() - p.concentration.lgamma()
    t3 = (p.concentration - q.concentration) * p.concentration.digamma()
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sp = p.concentration.sum(-1)
    sq = q.concentration.sum(-1)
    t1 = sp.lgamma() - sq.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sp.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ember.errors.EmberValueError(
            "KL-divergence between two Multivariate Normals with different event shapes "
            "cannot be computed")
    pL, qL = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = (qL.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                  - pL.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    shape = ember.broadcast_shapes(tuple(qL.shape[:-2]), tuple(pL.shape[:-2]))
    n = p.event_shape[0]
    qLb = qL.expand(tuple(shape) + (n, n))
    pLb = pL.expand(tuple(shape) + (n, n))
    term2 = ember.linalg.solve_triangular(qLb, pLb, upper=False).pow(2).sum((-2, -1))
    term3 = _batch_mahalanobis(qL, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise UnsupportedError("KL between Independent distributions with different "
                               "reinterpreted_batch_ndims is not implemented")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    """KL is invariant under a shared bijection: the base distributions' KL."""
    if p.transforms != q.transforms or tuple(p.event_shape) != tuple(q.event_shape):
        raise UnsupportedError("KL between TransformedDistributions is implemented only for "
                               "equal transforms and event shapes")
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1, ct2, ct3 = p.scale / q.scale, q.loc / q.scale, p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t3 = (ct2 + (1 + ct1).lgamma() - ct3).exp()
    return t1 + ct1 * euler_constant + t3 - (1 + euler_constant)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    ratio = q.rate / p.rate
    return -ratio.log() + ratio - 1
