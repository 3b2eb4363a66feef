"""parameters_to_vector and vector_to_parameters (ember/nn/utils/convert_parameters.py) against
torch: the order and values of the flat vector, writing it back, and the errors."""
import numpy as np
import pytest

import ember
from ember.nn.utils import parameters_to_vector, vector_to_parameters

torch = pytest.importorskip("torch")


def _pair():
    e = ember.nn.Sequential(ember.nn.Conv2d(2, 3, 2), ember.nn.Linear(4, 5)).double()
    t = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 2), torch.nn.Linear(4, 5)).double()
    for pe, pt in zip(e.parameters(), t.parameters()):
        with torch.no_grad():
            pt.copy_(torch.tensor(pe.detach().numpy()))
    return e, t


def test_parameters_to_vector_matches_torch():
    e, t = _pair()
    ve, vt = parameters_to_vector(e.parameters()), torch.nn.utils.parameters_to_vector(
        t.parameters())
    assert tuple(ve.shape) == (3 * 2 * 2 * 2 + 3 + 4 * 5 + 5,) == tuple(vt.shape)
    np.testing.assert_array_equal(ve.detach().numpy(), vt.detach().numpy())


def test_vector_to_parameters_writes_each_slice_back():
    e, t = _pair()
    v = np.arange(52, dtype=np.float64)
    vector_to_parameters(ember.tensor(v), e.parameters())
    torch.nn.utils.vector_to_parameters(torch.tensor(v), t.parameters())
    for pe, pt in zip(e.parameters(), t.parameters()):
        np.testing.assert_array_equal(pe.detach().numpy(), pt.detach().numpy())
    np.testing.assert_array_equal(parameters_to_vector(e.parameters()).detach().numpy(), v)


def test_a_vector_that_is_not_a_tensor_is_refused():
    e, _ = _pair()
    with pytest.raises(TypeError):
        vector_to_parameters(np.zeros(52), e.parameters())
