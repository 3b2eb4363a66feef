"""Constraints (ember/distributions/constraints.py) against torch.distributions.constraints: each
constraint's check on values inside, on and outside its bounds, event_dim, is_discrete, and
dependent properties."""
import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions import constraints as EC

torch = pytest.importorskip("torch")
TC = torch.distributions.constraints

X = np.array([[-2.0, -1.0, 0.0, 0.5], [1.0, 1.5, 3.0, np.nan], [0.0, 0.0, 1.0, 1.0]])
M = np.array([[[1.0, 0.0], [0.5, 2.0]], [[1.0, 0.3], [0.5, 2.0]], [[-1.0, 0.0], [0.5, 2.0]],
              [[2.0, 1.0], [1.0, 2.0]], [[1.0, 2.0], [2.0, 1.0]]])


def _pairs(C, mk):
    return [C.real, C.boolean, C.positive, C.nonnegative, C.unit_interval,
            C.nonnegative_integer, C.greater_than(mk(0.5)), C.greater_than_eq(0.5),
            C.less_than(1.0), C.interval(-1.0, 1.0), C.half_open_interval(0.0, 1.0),
            C.integer_interval(0, 2), C.simplex, C.independent(C.positive, 1), C.real_vector,
            C.independent(C.unit_interval, 2)]


@pytest.mark.parametrize("i", range(16))
def test_check_matches_torch(i):
    ce, ct = _pairs(EC, ember.tensor)[i], _pairs(TC, torch.tensor)[i]
    assert ce.event_dim == ct.event_dim and ce.is_discrete == ct.is_discrete
    if ce.event_dim == 0 or ce is EC.simplex or i in (13, 14):
        data = X if ce is not EC.simplex else np.array([[0.2, 0.3, 0.5], [0.5, 0.6, -0.1],
                                                        [1.0, 0.0, 0.0], [0.5, 0.4, 0.2]])
    else:
        data = X[None]
    got = ce.check(ember.tensor(data)).numpy()
    want = ct.check(torch.tensor(data)).numpy()
    assert got.dtype == np.bool_ and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


SYMMETRIC = np.array([[[2.0, 1.0], [1.0, 2.0]], [[1.0, 2.0], [2.0, 1.0]], [[1.0, 0.0], [0.0, -1.0]],
                      [[1e-3, 0.0], [0.0, 5.0]]])


@pytest.mark.parametrize("name,data", [("lower_cholesky", M), ("positive_definite", SYMMETRIC)])
def test_matrix_constraints_match_torch(name, data):
    got = getattr(EC, name).check(ember.tensor(data)).numpy()
    want = getattr(TC, name).check(torch.tensor(data)).numpy()
    np.testing.assert_array_equal(got, want)
    assert getattr(EC, name).event_dim == 2


def test_a_non_symmetric_matrix_is_not_positive_definite():
    """(torch checks only symmetry when any matrix of the batch is not symmetric)"""
    np.testing.assert_array_equal(EC.positive_definite.check(ember.tensor(M)).numpy(),
                                  [False, False, False, True, False])


def test_dependent_constraints_and_properties():
    assert EC.is_dependent(EC.dependent) and not EC.is_dependent(EC.real)
    with pytest.raises(ValueError, match="Cannot determine validity"):
        EC.dependent.check(ember.zeros(1))
    # Uniform's support depends on its parameters: a dependent property on the class, an
    # interval on the instance
    assert EC.is_dependent(ED.Uniform.support)
    s = ED.Uniform(ember.tensor([0.0]), ember.tensor([2.0])).support
    t = torch.distributions.Uniform(torch.tensor([0.0]), torch.tensor([2.0])).support
    v = [-0.1, 0.0, 1.9, 2.0, 2.1]
    np.testing.assert_array_equal(s.check(ember.tensor(v)).numpy(),
                                  t.check(torch.tensor(v)).numpy())
    assert "Interval" in repr(EC.interval(0.0, 1.0))
