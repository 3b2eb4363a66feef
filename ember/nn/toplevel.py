"""torch's top-level forms of the nn functions and losses (``torch.conv2d``,
``torch.batch_norm``, ``torch.kl_div``, ...) as ``ember.<name>``: torch's argument order and
defaults, which often differ from ``torch.nn.functional``'s, each calling the one implementation
in ``ember.nn.functional`` or the op spec. ``ember`` loads this module on the first use of one
of these names (``ember.ops.namespace.NN_TOPLEVEL``), so ``import ember`` does not load
``ember.nn``."""
from ember.autograd._generated import functions as G
from ember.errors import EmberRuntimeError, EmberTypeError
from ember.nn import functional as F


# ---------------------------------------------------------------- nn functions
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return F.conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return F.conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return F.conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return F.conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return F.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return F.conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    """torch.convolution: the convolution (or transposed one) of as many spatial dims as
    ``weight`` has beyond its first two (1 to 3)."""
    nd = weight.dim() - 2
    if nd not in (1, 2, 3):
        raise EmberRuntimeError(f"convolution: expected a 3-d, 4-d or 5-d weight, got shape "
                                f"{list(weight.shape)}")
    if transposed:
        fn = getattr(F, f"conv_transpose{nd}d")
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return getattr(F, f"conv{nd}d")(input, weight, bias, stride, padding, dilation, groups)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
                    cudnn_enabled):
    """torch.batch_norm (weight and bias before the running statistics; every argument
    required); ``cudnn_enabled`` changes nothing on the CPU."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                           eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                  cudnn_enabled):
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                              momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return F.group_norm(input, num_groups, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    return F.rms_norm(input, normalized_shape, weight, eps)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """torch.embedding: rows ``indices`` of ``weight`` (weight first; a negative
    ``padding_idx`` means none, as in torch's op)."""
    return F.embedding(indices, weight, None if padding_idx < 0 else padding_idx, None, 2.0,
                          scale_grad_by_freq, sparse)


def _no_stride(stride):
    return None if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else stride


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool1d(input, kernel_size, _no_stride(stride), padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool2d(input, kernel_size, _no_stride(stride), padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool3d(input, kernel_size, _no_stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode=False):
    return tuple(F.max_pool1d(input, kernel_size, _no_stride(stride), padding, dilation,
                                 ceil_mode, True))


def avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode=False,
               count_include_pad=True):
    return F.avg_pool1d(input, kernel_size, _no_stride(stride), padding, ceil_mode,
                           count_include_pad)


def adaptive_avg_pool1d(input, output_size):
    return F.adaptive_avg_pool1d(input, output_size)


def adaptive_max_pool1d(input, output_size):
    """torch.adaptive_max_pool1d: (values, indices), always both."""
    return tuple(F.adaptive_max_pool1d(input, output_size, True))


def channel_shuffle(input, groups):
    return F.channel_shuffle(input, groups)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return F.pairwise_distance(x1, x2, p, eps, keepdim)


def pdist(input, p=2.0):
    return F.pdist(input, p)


def prelu(input, weight):
    return F.prelu(input, weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return F._rrelu(input, lower, upper, training, False, generator)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return F._rrelu(input, lower, upper, training, True, generator)


def celu(input, alpha=1.0):
    return F.celu(input, alpha)


def celu_(input, alpha=1.0):
    return F.celu(input, alpha, True)


def selu_(input):
    return F.selu(input, True)


def threshold(input, threshold, value):
    return F.threshold(input, threshold, value)


def threshold_(input, threshold, value):
    return F.threshold(input, threshold, value, True)


def bilinear(input1, input2, weight, bias=None):
    return F.bilinear(input1, input2, weight, bias)


def conv_tbc(input, weight, bias, pad=0):
    return F.conv_tbc(input, weight, bias, pad)


def dropout_(input, p, train):
    return F.dropout(input, p, train, True)


def alpha_dropout(input, p, train):
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input, p, train):
    return F.alpha_dropout(input, p, train, True)


def feature_alpha_dropout(input, p, train):
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input, p, train):
    return F.feature_alpha_dropout(input, p, train, True)


def feature_dropout(input, p, train):
    F._check_p(p, "feature_dropout")
    return F._feature_dropout(input, p, train, False, "feature_dropout")


def feature_dropout_(input, p, train):
    F._check_p(p, "feature_dropout_")
    return F._feature_dropout(input, p, train, True, "feature_dropout_")


# ---------------------------------------------------------------- losses
# torch's top-level losses take the reduction as an int (torch's Reduction enum: 0 'none',
# 1 'mean', 2 'sum'), and its default there is 0 (torch 2.13's Python binding reads the schema's
# default as 0, so torch.kl_div(x, y) is unreduced); each calls the one implementation in
# ember.nn.functional (loaded on the first call) or the spec op.
def _reduction(op, reduction):
    if isinstance(reduction, bool) or not isinstance(reduction, int):
        raise EmberTypeError(f"{op}(): argument 'reduction' must be int, not "
                             f"{type(reduction).__name__}")
    return ("none", "mean", "sum")[reduction] if reduction in (1, 2) else "none"   # torch's


def kl_div(input, target, reduction=0, *, log_target=False):
    return G.kl_div(input, target, _reduction("kl_div", reduction), log_target)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                          reduction=0):
    return F.binary_cross_entropy_with_logits(
        input, target, weight, reduction=_reduction("binary_cross_entropy_with_logits",
                                                    reduction), pos_weight=pos_weight)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0,
                  zero_infinity=False):
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                         _reduction("ctc_loss", reduction), zero_infinity)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    return F.margin_ranking_loss(input1, input2, target, margin,
                                    reduction=_reduction("margin_ranking_loss", reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    return F.hinge_embedding_loss(input, target, margin,
                                     reduction=_reduction("hinge_embedding_loss", reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                      reduction=_reduction("cosine_embedding_loss", reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6,
                             swap=False, reduction=0):
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                    reduction=_reduction("triplet_margin_loss", reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                                 reduction=_reduction("poisson_nll_loss", reduction))


native_channel_shuffle = channel_shuffle

# the names ember takes from this module (ember.ops.namespace.NN_TOPLEVEL lists the same)
NAMES = tuple(n for n, v in list(globals().items()) if n[0] != "_" and callable(v)
              and getattr(v, "__module__", None) == __name__) + ("native_channel_shuffle",)
