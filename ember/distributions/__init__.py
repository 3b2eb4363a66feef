"""``ember.distributions``: torch.distributions' Normal, Uniform, Bernoulli, Categorical, Beta,
Gamma, Dirichlet, MultivariateNormal, LowRankMultivariateNormal, Independent, Exponential,
Cauchy, TransformedDistribution (with LogNormal, Gumbel, HalfNormal, HalfCauchy, Weibull,
Pareto, InverseGamma, Kumaraswamy, LogisticNormal, RelaxedBernoulli, RelaxedOneHotCategorical),
OneHotCategorical (and its StraightThrough variant), Poisson, Binomial, Geometric,
NegativeBinomial, Multinomial, Laplace, StudentT, Chi2, ContinuousBernoulli, MixtureSameFamily,
VonMises, the ``transforms`` module, ``biject_to``/``transform_to`` and ``kl_divergence``
(sample, rsample with gradients, log_prob, entropy, mean, variance, validate_args with torch's
errors)."""
from ember.distributions import constraints  # noqa: F401
from ember.distributions import transforms  # noqa: F401
from ember.distributions.constraint_registry import biject_to, transform_to
from ember.distributions.continuous import (Cauchy, ContinuousBernoulli, Exponential, Laplace,
                                            StudentT)
from ember.distributions.counts import Binomial, Geometric, Multinomial, NegativeBinomial, Poisson
from ember.distributions.discrete import Bernoulli, Categorical
from ember.distributions.distribution import Distribution
from ember.distributions.gamma import Beta, Chi2, Dirichlet, Gamma
from ember.distributions.kl import kl_divergence, register_kl
from ember.distributions.lowrank_multivariate_normal import LowRankMultivariateNormal
from ember.distributions.mixture_same_family import MixtureSameFamily
from ember.distributions.multivariate_normal import Independent, MultivariateNormal
from ember.distributions.normal import Normal, Uniform
from ember.distributions.one_hot_categorical import (OneHotCategorical,
                                                     OneHotCategoricalStraightThrough)
from ember.distributions.transformed_distribution import (
    ExpRelaxedCategorical, Gumbel, HalfCauchy, HalfNormal, InverseGamma, Kumaraswamy,
    LogisticNormal, LogitRelaxedBernoulli, LogNormal, Pareto, RelaxedBernoulli,
    RelaxedOneHotCategorical, TransformedDistribution, Weibull)
from ember.distributions.transforms import (
    AbsTransform, AffineTransform, ComposeTransform, CumulativeDistributionTransform, ExpTransform,
    IndependentTransform, LowerCholeskyTransform, PositiveDefiniteTransform, PowerTransform,
    ReshapeTransform, SigmoidTransform,
    SoftmaxTransform, SoftplusTransform, StickBreakingTransform, TanhTransform, Transform,
    identity_transform)
from ember.distributions.von_mises import VonMises

__all__ = ["Distribution", "Normal", "Uniform", "Bernoulli", "Categorical", "Beta", "Gamma",
           "Dirichlet", "MultivariateNormal", "Independent", "kl_divergence", "register_kl",
           "constraints", "transforms", "TransformedDistribution", "LogNormal", "Gumbel",
           "HalfNormal", "LogisticNormal", "RelaxedBernoulli", "RelaxedOneHotCategorical",
           "Exponential", "Cauchy", "HalfCauchy", "Weibull", "Pareto", "InverseGamma",
           "Kumaraswamy", "OneHotCategorical", "OneHotCategoricalStraightThrough", "Poisson",
           "Binomial", "Geometric", "NegativeBinomial", "Multinomial", "Laplace", "StudentT",
           "Chi2", "ContinuousBernoulli", "MixtureSameFamily", "LowRankMultivariateNormal",
           "biject_to", "transform_to", "Transform", "ComposeTransform", "IndependentTransform",
           "ReshapeTransform", "ExpTransform", "PowerTransform", "SigmoidTransform",
           "SoftplusTransform", "TanhTransform", "AbsTransform", "AffineTransform",
           "SoftmaxTransform", "StickBreakingTransform", "LowerCholeskyTransform",
           "PositiveDefiniteTransform", "CumulativeDistributionTransform", "identity_transform",
           "VonMises"]
