"""nn utilities: gradient clipping and parameter <-> vector conversion."""
from ember.nn.utils.clip_grad import (clip_grad_norm, clip_grad_norm_, clip_grad_value_,
                                      get_total_norm)
from ember.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from ember.nn.utils import rnn
from ember.errors import public as _public

# raise ember's errors naming the function (ember.errors.public)
clip_grad_norm_, clip_grad_norm, clip_grad_value_, get_total_norm, parameters_to_vector, \
    vector_to_parameters = (_public(f) for f in (
        clip_grad_norm_, clip_grad_norm, clip_grad_value_, get_total_norm, parameters_to_vector,
        vector_to_parameters))

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters", "rnn"]
