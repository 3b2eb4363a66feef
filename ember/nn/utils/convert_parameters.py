"""Flatten parameters into one vector and back."""
import numpy as np

from ember.autograd._generated import functions as G
from ember.autograd.grad_mode import no_grad
from ember.tensor import Tensor
from ember.errors import EmberTypeError


def parameters_to_vector(parameters):
    """One 1-d tensor of all parameters, concatenated (differentiable)."""
    return G.cat([G.reshape(p, (-1,)) for p in parameters], 0)


def vector_to_parameters(vec, parameters):
    """Copy slices of the 1-d ``vec`` into ``parameters`` in order. TypeError if vec is not a
    Tensor."""
    if not isinstance(vec, Tensor):
        raise EmberTypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    offset = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            np.copyto(p._data, vec._data[offset:offset + n].reshape(p._data.shape))
            p._bump()
            offset += n
