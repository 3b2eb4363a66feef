"""``ember.distributions``: torch.distributions' Normal, Uniform, Bernoulli, Categorical, Beta,
Gamma, Dirichlet, MultivariateNormal, Independent and ``kl_divergence`` (sample, rsample with
gradients, log_prob, entropy, mean, variance, validate_args with torch's errors)."""
from ember.distributions import constraints  # noqa: F401
from ember.distributions.discrete import Bernoulli, Categorical
from ember.distributions.distribution import Distribution
from ember.distributions.gamma import Beta, Dirichlet, Gamma
from ember.distributions.kl import kl_divergence, register_kl
from ember.distributions.multivariate_normal import Independent, MultivariateNormal
from ember.distributions.normal import Normal, Uniform

__all__ = ["Distribution", "Normal", "Uniform", "Bernoulli", "Categorical", "Beta", "Gamma",
           "Dirichlet", "MultivariateNormal", "Independent", "kl_divergence", "register_kl",
           "constraints"]
