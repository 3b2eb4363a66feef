"""OneHotCategorical and its straight-through reparameterised variant: a Categorical whose
values are one-hot vectors along the last dimension."""
import ember
from ember.distributions import constraints
from ember.distributions.discrete import Categorical
from ember.distributions.distribution import Distribution

__all__ = ["OneHotCategorical", "OneHotCategoricalStraightThrough"]


def _one_hot(indices, num_classes, like):
    from ember.nn.functional import one_hot
    return one_hot(indices, num_classes).to(like.dtype)


class OneHotCategorical(Distribution):
    """OneHotCategorical(probs=None, logits=None): a one-hot vector of size ``K`` whose hot
    index is drawn from ``Categorical(probs, logits)``; event shape ``(K,)``."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OneHotCategorical, _instance)
        batch_shape = ember.Size(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self):
        return self._categorical._param

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        probs = self.probs
        return _one_hot(probs.argmax(-1), probs.shape[-1], probs)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        """One-hot draws of shape ``sample_shape + batch_shape + (K,)``, in probs' dtype."""
        indices = self._categorical.sample(sample_shape)
        with ember.no_grad():
            return _one_hot(indices, self._categorical._num_events, self.probs)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        """The ``K`` one-hot vectors, shape ``(K,) + (1,) * len(batch_shape) + (K,)`` (expanded
        over the batch when ``expand``)."""
        n = self.event_shape[0]
        values = ember.eye(n, dtype=self._param.dtype)
        values = values.reshape((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + tuple(self.batch_shape) + (n,))
        return values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical with the straight-through gradient estimator (Bengio et al., 2013):
    ``rsample`` returns the one-hot draw, differentiated as if it were ``probs``."""
    has_rsample = True

    def rsample(self, sample_shape=()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
