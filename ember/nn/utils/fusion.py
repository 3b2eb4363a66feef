"""Folding an eval-mode batch norm into the convolution or linear layer before it
(torch.nn.utils.fusion): ``w' = w * s``, ``b' = (b - mean) * s + beta`` with
``s = gamma / sqrt(var + eps)`` over the layer's output channels (its input channels for a
transposed convolution), new Parameters of the layer's dtypes. The JIT does the same fold on
traced graphs (``ember.jit.passes.batchnorm``)."""
import copy

from ember.errors import EmberRuntimeError
from ember.nn.parameter import Parameter
from ember.ops.creation import ones_like, zeros_like

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]


def _check_eval(layer, bn):
    if layer.training or bn.training:
        raise EmberRuntimeError(f"fusing {type(layer).__name__} and {type(bn).__name__}: fusion "
                                f"only for eval (call .eval() on both first)")
    if bn.running_mean is None or bn.running_var is None:
        raise EmberRuntimeError(f"fusing {type(layer).__name__} and {type(bn).__name__}: the "
                                f"batch norm has no running statistics (track_running_stats)")


def _scale_and_shift(bias, rm, rv, eps, gamma, beta, like):
    """``(s, b')`` of the fold, with the missing bias, gamma and beta as 0, 1 and 0."""
    bias = zeros_like(rm) if bias is None else bias
    gamma = ones_like(rm) if gamma is None else gamma
    beta = zeros_like(rm) if beta is None else beta
    s = gamma * (rv + eps).rsqrt()
    return s, ((bias - rm) * s + beta).to(like)


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """The fused convolution's (weight, bias) as Parameters (of ``conv_w``'s dtype, and of
    ``conv_b``'s or the weight's); ``transpose``: the weight of a transposed convolution
    (in, out, ...)."""
    s, b = _scale_and_shift(conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b,
                            conv_b.dtype if conv_b is not None else conv_w.dtype)
    shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.dim() - 2)
    w = (conv_w * s.reshape(shape)).to(conv_w.dtype)
    # a bias the layer did not have is a new one without gradient, as torch's
    return (Parameter(w, conv_w.requires_grad),
            Parameter(b, conv_b is not None and conv_b.requires_grad))


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A new convolution (a deep copy of ``conv``) computing ``bn(conv(x))`` of the eval-mode
    pair. RuntimeError unless both are in eval mode with running statistics."""
    _check_eval(conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean,
                                                    bn.running_var, bn.eps, bn.weight, bn.bias,
                                                    transpose)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The fused linear layer's (weight, bias) as Parameters (a batch norm of one feature
    scales every output)."""
    s, b = _scale_and_shift(linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b,
                            linear_b.dtype if linear_b is not None else linear_w.dtype)
    w = (linear_w * s.unsqueeze(-1)).to(linear_w.dtype)
    return (Parameter(w, linear_w.requires_grad),
            Parameter(b, linear_b is not None and linear_b.requires_grad))


def fuse_linear_bn_eval(linear, bn):
    """A new linear layer computing ``bn(linear(x))`` of the eval-mode pair: the batch norm's
    features must be the layer's outputs (or one). RuntimeError otherwise."""
    _check_eval(linear, bn)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise EmberRuntimeError(f"To fuse, linear.out_features == bn.num_features or "
                                f"bn.num_features == 1, got linear.out_features="
                                f"{linear.out_features} and bn.num_features={bn.num_features}")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean,
                                                      bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused
