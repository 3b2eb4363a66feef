"""nn utilities: gradient clipping, parameter <-> vector conversion, packed sequences,
parametrizations (weight and spectral norm), conv/linear + batch norm fusion, pruning,
``stateless.functional_call`` (deprecated name of ``ember.func.functional_call``)."""
from ember.nn.utils.clip_grad import (clip_grad_norm, clip_grad_norm_, clip_grad_value_,
                                      clip_grads_with_norm_, get_total_norm)
from ember.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from ember.nn.utils import rnn
from ember.nn.utils import fusion, parametrize, parametrizations, prune, stateless
from ember.nn.utils.fusion import (fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval,
                                   fuse_linear_bn_weights)
from ember.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm
from ember.nn.utils.weight_norm import remove_weight_norm, weight_norm
from ember.errors import public as _public

# raise ember's errors naming the function (ember.errors.public)
clip_grad_norm_, clip_grad_norm, clip_grad_value_, clip_grads_with_norm_, get_total_norm, \
    parameters_to_vector, vector_to_parameters, weight_norm, remove_weight_norm, spectral_norm, \
    remove_spectral_norm, fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, \
    fuse_linear_bn_weights = (
        _public(f) for f in (clip_grad_norm_, clip_grad_norm, clip_grad_value_,
                             clip_grads_with_norm_, get_total_norm, parameters_to_vector,
                             vector_to_parameters, weight_norm, remove_weight_norm, spectral_norm,
                             remove_spectral_norm, fuse_conv_bn_eval, fuse_conv_bn_weights,
                             fuse_linear_bn_eval, fuse_linear_bn_weights))

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm", "parameters_to_vector", "vector_to_parameters", "rnn", "parametrize",
           "parametrizations", "prune", "stateless", "weight_norm", "remove_weight_norm",
           "spectral_norm", "remove_spectral_norm", "fusion", "fuse_conv_bn_eval", "fuse_conv_bn_weights",
           "fuse_linear_bn_eval", "fuse_linear_bn_weights"]
