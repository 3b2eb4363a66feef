"""LowRankMultivariateNormal: a multivariate normal whose covariance is
``cov_factor @ cov_factor.T + diag(cov_diag)``, scored through the small "capacitance" matrix
``I + cov_factor.T @ inv(cov_diag) @ cov_factor`` (Woodbury identity and matrix determinant
lemma), as torch.distributions."""
import math

import ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.multivariate_normal import _batch_mahalanobis, _batch_mv
from ember.distributions.utils import lazy_property
from ember.errors import EmberValueError

__all__ = ["LowRankMultivariateNormal"]


def _add_identity(K):
    return K + ember.eye(K.shape[-1], dtype=K.dtype)


def _batch_capacitance_tril(W, D):
    """Cholesky factor of the capacitance ``I + W.T @ inv(D) @ W`` (batches of ``W`` and
    ``D``)."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    return ember.linalg.cholesky(_add_identity(Wt_Dinv @ W))


def _batch_lowrank_logdet(W, D, capacitance_tril):
    """``log|W @ W.T + D| = log|C| + log|D|`` (matrix determinant lemma)."""
    return (2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
            + D.log().sum(-1))


def _batch_lowrank_mahalanobis(W, D, x, capacitance_tril):
    """``x.T @ inv(W @ W.T + D) @ x`` through the Woodbury identity
    ``inv(W @ W.T + D) = inv(D) - inv(D) @ W @ inv(C) @ W.T @ inv(D)``."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    Wt_Dinv_x = _batch_mv(Wt_Dinv, x)
    mahalanobis_term1 = (x.pow(2) / D).sum(-1)
    mahalanobis_term2 = _batch_mahalanobis(capacitance_tril, Wt_Dinv_x)
    return mahalanobis_term1 - mahalanobis_term2


def _batch_trace_XXT(bmat):
    """``trace(X @ X.T)`` over a batch of matrices."""
    return bmat.pow(2).sum((-2, -1))


class LowRankMultivariateNormal(Distribution):
    """LowRankMultivariateNormal(loc, cov_factor, cov_diag): covariance
    ``cov_factor @ cov_factor.mT + diag_embed(cov_diag)``; ``loc`` of shape
    ``batch_shape + (n,)``, ``cov_factor`` of shape ``batch_shape + (n, rank)``, ``cov_diag`` of
    shape ``batch_shape + (n,)`` (the three broadcast together)."""
    arg_constraints = {"loc": constraints.real_vector,
                       "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise EmberValueError("loc must be at least one-dimensional.")
        event_shape = tuple(loc.shape[-1:])
        if cov_factor.dim() < 2:
            raise EmberValueError("cov_factor must be at least two-dimensional, with optional "
                                  "leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise EmberValueError(f"cov_factor must be a batch of matrices with shape "
                                  f"{event_shape[0]} x m")
        if tuple(cov_diag.shape[-1:]) != event_shape:
            raise EmberValueError(f"cov_diag must be a batch of vectors with shape "
                                  f"{ember.Size(event_shape)}")
        try:
            batch = ember.broadcast_shapes(tuple(loc.shape[:-1]), tuple(cov_factor.shape[:-2]),
                                           tuple(cov_diag.shape[:-1]))
        except (RuntimeError, ValueError) as e:
            raise EmberValueError(f"Incompatible batch shapes: loc {loc.shape}, cov_factor "
                                  f"{cov_factor.shape}, cov_diag {cov_diag.shape}") from e
        batch = tuple(batch)
        self.loc = loc.expand(batch + event_shape)
        self.cov_factor = cov_factor.expand(batch + tuple(cov_factor.shape[-2:]))
        self.cov_diag = cov_diag.expand(batch + event_shape)
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(batch, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = tuple(ember.Size(batch_shape))
        loc_shape = batch_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _full_matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1)
                + self._unbroadcasted_cov_diag).expand(tuple(self._batch_shape)
                                                       + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self):
        """``sqrt(D) @ cholesky(I + D^-1/2 W W.T D^-1/2)``: a well-conditioned Cholesky (its
        matrix has eigenvalues >= 1), as torch."""
        cov_diag_sqrt_unsqueeze = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        Dinvsqrt_W = self._unbroadcasted_cov_factor / cov_diag_sqrt_unsqueeze
        K = _add_identity(Dinvsqrt_W @ Dinvsqrt_W.mT)
        scale_tril = cov_diag_sqrt_unsqueeze * ember.linalg.cholesky(K)
        return scale_tril.expand(self._full_matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        W = self._unbroadcasted_cov_factor
        cov = W @ W.mT + ember.diag_embed(self._unbroadcasted_cov_diag)
        return cov.expand(self._full_matrix_shape())

    @lazy_property
    def precision_matrix(self):
        """Woodbury: ``inv(D) - inv(D) @ W @ inv(C) @ W.T @ inv(D)`` with ``C`` the
        capacitance."""
        Wt_Dinv = (self._unbroadcasted_cov_factor.mT
                   / self._unbroadcasted_cov_diag.unsqueeze(-2))
        A = ember.linalg.solve_triangular(self._capacitance_tril, Wt_Dinv, upper=False)
        precision = ember.diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - A.mT @ A
        return precision.expand(self._full_matrix_shape())

    def rsample(self, sample_shape=()):
        """``loc + cov_factor @ eps_W + sqrt(cov_diag) * eps_D`` with standard normal
        ``eps_W`` (shape ``sample_shape + batch_shape + (rank,)``, drawn first) and ``eps_D``:
        differentiable in all three parameters."""
        shape = tuple(self._extended_shape(sample_shape))
        W_shape = shape[:-1] + tuple(self.cov_factor.shape[-1:])
        eps_W = ember.randn(*W_shape, dtype=self.loc.dtype)
        eps_D = ember.randn(*shape, dtype=self.loc.dtype)
        return (self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_W)
                + self._unbroadcasted_cov_diag.sqrt() * eps_D)

    def _log_det(self):
        return _batch_lowrank_logdet(self._unbroadcasted_cov_factor,
                                     self._unbroadcasted_cov_diag, self._capacitance_tril)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor,
                                       self._unbroadcasted_cov_diag, diff,
                                       self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._log_det() + M)

    def entropy(self):
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return H if len(self._batch_shape) == 0 else H.expand(tuple(self._batch_shape))
