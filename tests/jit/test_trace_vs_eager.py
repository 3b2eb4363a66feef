"""Every public ``ember.nn.functional`` entry point, traced on one set of inputs and run on
another (new values, new integer targets and indices, same shapes), gives what eager mode gives
on those inputs, or the trace warned (``TracerWarning``) that it froze a value.

``CASES`` holds one or more sample factories per public name; ``test_every_public_function_has
_a_case`` fails when a public function has none. ``WARNS`` names the cases whose result depends
on data in a way a static graph cannot follow (they must warn); every other case must trace
without any TracerWarning and match eager. ``test_trace_on_new_shapes_is_right_or_warns`` runs the
same cases with every size > 1 grown by one: eager's answer, or a TracerWarning naming the line
(ember.jit.guards).
"""
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import jit

# public callables of ember.nn.functional that are not functions of tensors (name -> reason)
NOT_TENSOR_FUNCTIONS = {}

# cases a trace cannot represent at all: tracing raises (case id -> (error class, message part))
CANNOT_TRACE = {}

# cases whose result's shape or values depend on data a trace cannot represent: they must warn
WARNS = {
    "one_hot[num_classes=-1]": "the number of classes is read from the data (output shape)",
    "ctc_loss[tensor_lengths]": "the input and target lengths are read from the data (the "
                                "alignment lattice is built from them)",
}


# ---------------------------------------------------------------------------- input makers
GROW = [0]  # added to every size > 1 the makers draw (test_trace_on_new_shapes sets it)


def _g(shape):
    return tuple(s + GROW[0] if s > 1 else s for s in shape)


def f(r, *shape):
    return ember.tensor(r.standard_normal(_g(shape)).astype(np.float32))


def pos(r, *shape):
    return ember.tensor((r.random(_g(shape)) * 2 + 0.1).astype(np.float32))


def prob(r, *shape):
    return ember.tensor((r.random(_g(shape)) * 0.9 + 0.05).astype(np.float32))


def idx(r, high, *shape):
    return ember.tensor(r.integers(0, high, _g(shape)).astype(np.int64))


def pm1(r, *shape):
    return ember.tensor(np.where(r.random(_g(shape)) < 0.5, -1.0, 1.0).astype(np.float32))


def bits(r, *shape):
    return ember.tensor((r.random(_g(shape)) < 0.5).astype(np.float32))


def offsets(r, n, bags):
    cut = np.sort(r.choice(np.arange(1, n), bags - 1, replace=False))
    return ember.tensor(np.concatenate([[0], cut]).astype(np.int64))


def offsets_with_empty(r, n, bags):
    """Sorted offsets from 0 that may repeat or reach ``n`` (empty bags)."""
    return ember.tensor(np.concatenate([[0], np.sort(r.integers(0, n + 1, bags - 1))])
                        .astype(np.int64))


def _nll_target(r, ignore):
    t = r.integers(0, 5, (6,))
    t[r.integers(0, 6)] = ignore  # the ignored class moves between draws
    return ember.tensor(t.astype(np.int64))


CASES = {}  # case id -> (public name, fn of tensors, maker(rng) -> tuple of tensors)


def case(name, fn, maker, tag=None):
    cid = name if tag is None else f"{name}[{tag}]"
    assert cid not in CASES, cid
    CASES[cid] = (name, fn, maker)


# ---------------------------------------------------------------------------- convolution, pooling
case("conv2d", lambda x, w, b: F.conv2d(x, w, b, padding=1),
     lambda r: (f(r, 2, 3, 6, 6), f(r, 4, 3, 3, 3), f(r, 4)))
case("conv2d", lambda x, w: F.conv2d(x, w, padding="same", dilation=2),
     lambda r: (f(r, 1, 2, 5, 5), f(r, 3, 2, 2, 2)), "same")
case("conv1d", lambda x, w, b: F.conv1d(x, w, b, stride=2),
     lambda r: (f(r, 2, 3, 8), f(r, 4, 3, 3), f(r, 4)))
case("conv_transpose2d", lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1),
     lambda r: (f(r, 2, 3, 4, 4), f(r, 3, 4, 3, 3), f(r, 4)))
case("conv_transpose1d", lambda x, w: F.conv_transpose1d(x, w, stride=2),
     lambda r: (f(r, 2, 3, 5), f(r, 3, 2, 3)))
case("max_pool2d", lambda x: F.max_pool2d(x, 2, return_indices=True),
     lambda r: (f(r, 2, 3, 6, 6),))
case("max_pool2d_with_indices", lambda x: F.max_pool2d_with_indices(x, 3, 2, 1, True),
     lambda r: (f(r, 1, 2, 7, 7),))
case("max_pool1d", lambda x: F.max_pool1d(x, 3, 2, return_indices=True),
     lambda r: (f(r, 2, 3, 9),))
case("avg_pool2d", lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
     lambda r: (f(r, 2, 3, 6, 6),))
case("avg_pool1d", lambda x: F.avg_pool1d(x, 2), lambda r: (f(r, 2, 3, 8),))
case("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
     lambda r: (f(r, 2, 3, 5, 7),))
case("adaptive_avg_pool1d", lambda x: F.adaptive_avg_pool1d(x, 3), lambda r: (f(r, 2, 3, 7),))
case("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, 2, True),
     lambda r: (f(r, 2, 3, 5, 5),))
case("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 3, True),
     lambda r: (f(r, 2, 3, 7),))
case("lp_pool2d", lambda x: F.lp_pool2d(x, 2, 2), lambda r: (f(r, 1, 2, 4, 4),))

# ---------------------------------------------------------------------------- normalisation
case("batch_norm", lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=True),
     lambda r: (f(r, 4, 3, 2, 2), f(r, 3), pos(r, 3), f(r, 3), f(r, 3)))
case("batch_norm", lambda x, m, v: F.batch_norm(x, m, v),
     lambda r: (f(r, 4, 3), f(r, 3), pos(r, 3)), "eval")
case("instance_norm", lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
     lambda r: (f(r, 2, 3, 4, 4), f(r, 3), f(r, 3)))
case("layer_norm", lambda x, w, b: F.layer_norm(x, (6,), w, b),
     lambda r: (f(r, 3, 6), f(r, 6), f(r, 6)))
case("rms_norm", lambda x, w: F.rms_norm(x, 6, w), lambda r: (f(r, 3, 6), f(r, 6)))
case("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b),
     lambda r: (f(r, 2, 4, 3, 3), f(r, 4), f(r, 4)))
case("local_response_norm", lambda x: F.local_response_norm(x, 3), lambda r: (f(r, 2, 5, 4, 4),))
case("local_response_norm", lambda x: F.local_response_norm(x, 2), lambda r: (f(r, 2, 5, 4),),
     "3d")
case("normalize", lambda x: F.normalize(x, 2.0, 1), lambda r: (f(r, 3, 5),))

# ---------------------------------------------------------------------------- dropout (seeded)
case("dropout", lambda x: F.dropout(x, 0.4, True), lambda r: (f(r, 4, 5),))
case("dropout1d", lambda x: F.dropout1d(x, 0.5, True), lambda r: (f(r, 2, 6, 5),))
case("dropout2d", lambda x: F.dropout2d(x, 0.5, True), lambda r: (f(r, 2, 6, 3, 3),))
case("dropout3d", lambda x: F.dropout3d(x, 0.5, True), lambda r: (f(r, 2, 6, 2, 2, 2),))
case("alpha_dropout", lambda x: F.alpha_dropout(x, 0.3, True), lambda r: (f(r, 4, 5),))

# ---------------------------------------------------------------------------- sparse / linear
case("embedding", lambda i, w: F.embedding(i, w, padding_idx=0),
     lambda r: (idx(r, 10, 2, 5), f(r, 10, 4)))
case("embedding", lambda i, w: F.embedding(i, w, max_norm=1.0),
     lambda r: (idx(r, 10, 2, 5), f(r, 10, 4)), "max_norm")
case("embedding", lambda i, w: F.embedding(i, w, max_norm=1.5, norm_type=1.0),
     lambda r: (idx(r, 10, 7), f(r, 10, 4)), "max_norm_l1")
case("embedding_bag", lambda i, w: F.embedding_bag(i, w, mode="sum"),
     lambda r: (idx(r, 10, 3, 4), f(r, 10, 4)))
case("embedding_bag", lambda i, w, o: F.embedding_bag(i, w, o, mode="mean"),
     lambda r: (idx(r, 10, 9), f(r, 10, 4), offsets(r, 9, 4)), "offsets_mean")
case("embedding_bag", lambda i, w, o: F.embedding_bag(i, w, o, mode="sum"),
     lambda r: (idx(r, 10, 9), f(r, 10, 4), offsets(r, 9, 3)), "offsets_sum")
case("embedding_bag", lambda i, w, o: F.embedding_bag(i, w, o, mode="max"),
     lambda r: (idx(r, 10, 9), f(r, 10, 4), offsets(r, 9, 3)), "offsets_max")
case("embedding_bag",
     lambda i, w, o, s: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=s,
                                        include_last_offset=True),
     lambda r: (idx(r, 10, 9), f(r, 10, 4),
                ember.cat([offsets(r, 9, 3), ember.tensor([9])]), f(r, 9)), "weights_last")
case("linear", lambda x, w, b: F.linear(x, w, b), lambda r: (f(r, 3, 4), f(r, 5, 4), f(r, 5)))
case("bilinear", lambda a, b, w, c: F.bilinear(a, b, w, c),
     lambda r: (f(r, 3, 4), f(r, 3, 5), f(r, 2, 4, 5), f(r, 2)))
case("one_hot", lambda t: F.one_hot(t, 5), lambda r: (idx(r, 5, 6),))
case("one_hot", lambda t: F.one_hot(t), lambda r: (idx(r, 3, 6) + idx(r, 4, 1),),
     "num_classes=-1")

# ---------------------------------------------------------------------------- activations
for _n in ("relu", "relu_", "relu6", "elu", "selu", "celu", "silu", "mish", "hardtanh",
           "hardtanh_", "hardsigmoid", "hardswish", "hardshrink", "softshrink", "tanhshrink",
           "sigmoid", "tanh", "logsigmoid", "softplus", "softsign", "gelu"):
    case(_n, getattr(F, _n), lambda r: (f(r, 3, 4) * 3,))
case("gelu", lambda x: F.gelu(x, approximate="tanh"), lambda r: (f(r, 3, 4),), "tanh")
case("leaky_relu", lambda x: F.leaky_relu(x, 0.2), lambda r: (f(r, 3, 4),))
case("elu", lambda x: F.elu(x, 0.5, inplace=True), lambda r: (f(r, 3, 4),), "inplace")
case("prelu", F.prelu, lambda r: (f(r, 2, 3, 4), f(r, 3)))
case("rrelu", lambda x: F.rrelu(x), lambda r: (f(r, 3, 4),))
case("rrelu", lambda x: F.rrelu(x, training=True), lambda r: (f(r, 3, 4),), "training")
case("threshold", lambda x: F.threshold(x, 0.1, 20.0), lambda r: (f(r, 3, 4),))
case("glu", lambda x: F.glu(x, 1), lambda r: (f(r, 3, 4),))
case("softmax", lambda x: F.softmax(x, 1), lambda r: (f(r, 3, 4),))
case("softmin", lambda x: F.softmin(x, 0), lambda r: (f(r, 3, 4),))
case("log_softmax", lambda x: F.log_softmax(x, -1), lambda r: (f(r, 3, 4),))
case("gumbel_softmax", lambda x: F.gumbel_softmax(x, 0.5), lambda r: (f(r, 3, 4),))
case("gumbel_softmax", lambda x: F.gumbel_softmax(x, hard=True), lambda r: (f(r, 3, 4),), "hard")
case("gumbel_softmax", lambda x: F.gumbel_softmax(x, hard=True, dim=0), lambda r: (f(r, 3, 4),),
     "hard_dim0")

# ---------------------------------------------------------------------------- shape helpers
case("pad", lambda x: F.pad(x, (1, 2)), lambda r: (f(r, 2, 3),))
case("pad", lambda x: F.pad(x, (1, 1, 2, 0), "reflect"), lambda r: (f(r, 1, 2, 4, 4),), "reflect")
case("pixel_shuffle", lambda x: F.pixel_shuffle(x, 2), lambda r: (f(r, 1, 8, 2, 3),))
case("pixel_unshuffle", lambda x: F.pixel_unshuffle(x, 2), lambda r: (f(r, 1, 2, 4, 6),))
case("interpolate", lambda x: F.interpolate(x, size=(5, 7)), lambda r: (f(r, 1, 2, 3, 4),))
case("interpolate", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear",
                                            align_corners=False),
     lambda r: (f(r, 1, 2, 3, 4),), "bilinear")
case("interpolate", lambda x: F.interpolate(x, size=6, mode="linear", align_corners=True),
     lambda r: (f(r, 1, 2, 4),), "linear")
case("upsample", lambda x: F.upsample(x, scale_factor=2), lambda r: (f(r, 1, 2, 3, 3),))
case("upsample_nearest", lambda x: F.upsample_nearest(x, size=5), lambda r: (f(r, 1, 2, 3, 3),))
case("upsample_bilinear", lambda x: F.upsample_bilinear(x, scale_factor=2),
     lambda r: (f(r, 1, 2, 3, 3),))
case("unfold", lambda x: F.unfold(x, 2, padding=1), lambda r: (f(r, 1, 2, 4, 4),))
case("cosine_similarity", F.cosine_similarity, lambda r: (f(r, 3, 5), f(r, 3, 5)))
case("pairwise_distance", F.pairwise_distance, lambda r: (f(r, 3, 5), f(r, 3, 5)))

# ---------------------------------------------------------------------------- losses
case("cross_entropy", lambda x, t: F.cross_entropy(x, t, ignore_index=1),
     lambda r: (f(r, 6, 5), _nll_target(r, 1)))
case("cross_entropy", lambda x, t, w: F.cross_entropy(x, t, w, label_smoothing=0.1),
     lambda r: (f(r, 6, 5), idx(r, 5, 6), pos(r, 5)), "weight_smoothing")
case("cross_entropy", lambda x, t: F.cross_entropy(x, t, reduction="none"),
     lambda r: (f(r, 2, 5, 3), idx(r, 5, 2, 3)), "spatial")
case("cross_entropy", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.2),
     lambda r: (f(r, 4, 5), F.softmax(f(r, 4, 5), 1)), "probs")
case("nll_loss", lambda x, t, w: F.nll_loss(x, t, w),
     lambda r: (f(r, 6, 5), _nll_target(r, -100), pos(r, 5)))
case("nll_loss", lambda x, t: F.nll_loss(x, t, ignore_index=2, reduction="sum"),
     lambda r: (f(r, 6, 5), idx(r, 5, 6)), "sum")
case("mse_loss", F.mse_loss, lambda r: (f(r, 3, 4), f(r, 3, 4)))
case("mse_loss", lambda x, y, w: F.mse_loss(x, y, weight=w),
     lambda r: (f(r, 3, 4), f(r, 3, 4), pos(r, 3, 4)), "weight")
case("l1_loss", F.l1_loss, lambda r: (f(r, 3, 4), f(r, 3, 4)))
case("smooth_l1_loss", lambda x, y: F.smooth_l1_loss(x, y, beta=0.5),
     lambda r: (f(r, 3, 4), f(r, 3, 4)))
case("huber_loss", lambda x, y: F.huber_loss(x, y, delta=0.7), lambda r: (f(r, 3, 4), f(r, 3, 4)))
case("binary_cross_entropy", lambda x, y, w: F.binary_cross_entropy(x, y, w),
     lambda r: (prob(r, 3, 4), prob(r, 3, 4), pos(r, 3, 4)))
case("binary_cross_entropy_with_logits",
     lambda x, y, pw: F.binary_cross_entropy_with_logits(x, y, pos_weight=pw),
     lambda r: (f(r, 3, 4), bits(r, 3, 4), pos(r, 4)))
case("kl_div", lambda x, y: F.kl_div(x, y, reduction="batchmean"),
     lambda r: (F.log_softmax(f(r, 3, 4), 1), F.softmax(f(r, 3, 4), 1)))
case("poisson_nll_loss", F.poisson_nll_loss, lambda r: (f(r, 3, 4), pos(r, 3, 4) * 2))
case("poisson_nll_loss", lambda x, t: F.poisson_nll_loss(x, t, log_input=False, full=True),
     lambda r: (pos(r, 3, 4), ember.tensor(r.integers(0, 5, (3, 4)).astype(np.float32))), "full")
case("gaussian_nll_loss", lambda x, t, v: F.gaussian_nll_loss(x, t, v, full=True),
     lambda r: (f(r, 3, 4), f(r, 3, 4), pos(r, 3, 4)))
case("margin_ranking_loss", lambda a, b, t: F.margin_ranking_loss(a, b, t, 0.3),
     lambda r: (f(r, 6), f(r, 6), pm1(r, 6)))
case("hinge_embedding_loss", F.hinge_embedding_loss, lambda r: (f(r, 3, 4), pm1(r, 3, 4)))
case("soft_margin_loss", F.soft_margin_loss, lambda r: (f(r, 3, 4), pm1(r, 3, 4)))
case("cosine_embedding_loss", lambda a, b, t: F.cosine_embedding_loss(a, b, t, 0.2),
     lambda r: (f(r, 4, 5), f(r, 4, 5), pm1(r, 4)))
case("multilabel_soft_margin_loss", lambda x, t, w: F.multilabel_soft_margin_loss(x, t, w),
     lambda r: (f(r, 3, 4), bits(r, 3, 4), pos(r, 4)))
case("multi_margin_loss", F.multi_margin_loss, lambda r: (f(r, 6, 5), idx(r, 5, 6)))
case("multi_margin_loss", lambda x, t, w: F.multi_margin_loss(x, t, p=2, margin=0.5, weight=w),
     lambda r: (f(r, 6, 5), idx(r, 5, 6), pos(r, 5)), "p2_weight")
case("multi_margin_loss", lambda x, t: F.multi_margin_loss(x, t, reduction="none"),
     lambda r: (f(r, 5), idx(r, 5)), "1d")
case("triplet_margin_loss", lambda a, p, n: F.triplet_margin_loss(a, p, n, swap=True),
     lambda r: (f(r, 4, 5), f(r, 4, 5), f(r, 4, 5)))

# ---------------------------------------------------------------------------- attention
case("scaled_dot_product_attention", F.scaled_dot_product_attention,
     lambda r: (f(r, 2, 3, 4), f(r, 2, 5, 4), f(r, 2, 5, 4)))
case("scaled_dot_product_attention",
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     lambda r: (f(r, 2, 4, 4), f(r, 2, 4, 4), f(r, 2, 4, 4)), "causal")
case("scaled_dot_product_attention",
     lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m > 0),
     lambda r: (f(r, 2, 3, 4), f(r, 2, 5, 4), f(r, 2, 5, 4), f(r, 3, 5)), "bool_mask")
case("scaled_dot_product_attention",
     lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
     lambda r: (f(r, 2, 3, 4), f(r, 2, 5, 4), f(r, 2, 5, 4), f(r, 3, 5)), "float_mask")


def _mha(q, k, v, w, b, ow, ob, kpm):
    return F.multi_head_attention_forward(q, k, v, 8, 2, w, b, None, None, False, 0.0, ow, ob,
                                          training=False, key_padding_mask=kpm > 1.0)


case("multi_head_attention_forward", _mha,
     lambda r: (f(r, 4, 2, 8), f(r, 5, 2, 8), f(r, 5, 2, 8), f(r, 24, 8), f(r, 24), f(r, 8, 8),
                f(r, 8), f(r, 2, 5)))


# ---------------------------------------------------------------------------- more variants
case("dropout", lambda x: F.dropout(x, 0.3, True, inplace=True), lambda r: (f(r, 4, 5),),
     "inplace")
case("dropout2d", lambda x: F.dropout2d(x, 1.0, True), lambda r: (f(r, 2, 3, 2, 2),), "p1")
case("relu", lambda x: F.relu(x, inplace=True), lambda r: (f(r, 3, 4),), "inplace")
case("threshold", lambda x: F.threshold(x, 0.0, -1.0, inplace=True), lambda r: (f(r, 3, 4),),
     "inplace")
case("max_pool2d", lambda x: F.max_pool2d(x, 3, 2, ceil_mode=True), lambda r: (f(r, 1, 2, 6, 6),),
     "ceil")
case("batch_norm", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
     lambda r: (f(r, 4, 3, 5), f(r, 3), f(r, 3)), "no_stats")
case("embedding_bag", lambda i, w: F.embedding_bag(i, w, mode="max", padding_idx=1),
     lambda r: (idx(r, 10, 3, 4), f(r, 10, 4)), "2d_max")
case("embedding_bag", lambda i, w: F.embedding_bag(i, w, max_norm=0.5),
     lambda r: (idx(r, 10, 3, 4), f(r, 10, 4)), "2d_max_norm")
case("one_hot", lambda t: F.one_hot(t, 4), lambda r: (idx(r, 4, 2, 3),), "2d")
case("interpolate", lambda x: F.interpolate(x, size=(2, 3), mode="area"),
     lambda r: (f(r, 1, 2, 4, 6),), "area")
case("nll_loss", lambda x, t: F.nll_loss(x, t, reduction="none"),
     lambda r: (f(r, 2, 4, 3, 3), idx(r, 4, 2, 3, 3)), "4d")
case("cross_entropy", lambda x, t, w: F.cross_entropy(x, t, w, ignore_index=0, label_smoothing=0.3),
     lambda r: (f(r, 6, 5), idx(r, 5, 6), pos(r, 5)), "ignore_smoothing_weight")
case("binary_cross_entropy", lambda x, y: F.binary_cross_entropy(x, y, reduction="sum"),
     lambda r: (prob(r, 5), bits(r, 5)), "bits")
case("poisson_nll_loss", lambda x, t: F.poisson_nll_loss(x, t, full=True, reduction="none"),
     lambda r: (f(r, 3, 4), ember.tensor(r.integers(0, 4, (3, 4)).astype(np.float32))),
     "full_log")
case("gaussian_nll_loss", lambda x, t, v: F.gaussian_nll_loss(x, t, v, reduction="none"),
     lambda r: (f(r, 3, 4), f(r, 3, 4), pos(r, 3, 1)), "broadcast_var")
case("hinge_embedding_loss", lambda x, t: F.hinge_embedding_loss(x, t, 0.5, reduction="none"),
     lambda r: (f(r, 6), pm1(r, 6)), "none")
case("scaled_dot_product_attention",
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
     lambda r: (f(r, 1, 4, 3, 2), f(r, 1, 2, 3, 2), f(r, 1, 2, 3, 2)), "gqa")


def _mha_full(q, k, v, w, b, ow, ob, bk, bv, m):
    return F.multi_head_attention_forward(q, k, v, 8, 2, w, b, bk, bv, True, 0.0, ow, ob,
                                          training=False, attn_mask=m,
                                          average_attn_weights=False)


case("multi_head_attention_forward", _mha_full,
     lambda r: (f(r, 4, 2, 8), f(r, 5, 2, 8), f(r, 5, 2, 8), f(r, 24, 8), f(r, 24), f(r, 8, 8),
                f(r, 8), f(r, 1, 1, 8), f(r, 1, 1, 8), f(r, 4, 5)), "bias_kv_zero_attn")
case("multi_head_attention_forward",
     lambda q, w, b, ow, ob: F.multi_head_attention_forward(
         q, q, q, 8, 2, w, b, None, None, False, 0.0, ow, ob, need_weights=False,
         is_causal=True)[0],
     lambda r: (f(r, 4, 8), f(r, 24, 8), f(r, 24), f(r, 8, 8), f(r, 8)), "unbatched_causal")


case("embedding_bag", lambda i, w, o: F.embedding_bag(i, w, o, mode="mean"),
     lambda r: (idx(r, 10, 6), f(r, 10, 3), offsets_with_empty(r, 6, 5)), "empty_bags_mean")
case("embedding_bag", lambda i, w, o: F.embedding_bag(i, w, o, mode="max"),
     lambda r: (idx(r, 10, 6), f(r, 10, 3), offsets_with_empty(r, 6, 5)), "empty_bags_max")



# ---------------------------------------------------------------------------- 3-d and more pooling
def _pooled(pool, x, *a):
    """(pooled values, argmax indices) of a fresh input: new values give new indices. (The
    unpool cases that grow keep their spatial sizes: grown ones give indices past the default
    output size, which eager rejects; a trace warns (its output size is frozen) and raises.)"""
    y, i = pool(x, *a, return_indices=True)
    return y.detach(), i


def ft(r, grown, tail):
    """Standard normal of shape ``grown`` (grown like every maker's sizes) + ``tail`` (kept:
    sizes fixed by the op, a grid's coordinates, an affine matrix, channel groups)."""
    return ember.tensor(r.standard_normal(_g(grown) + tail).astype(np.float32))


def _ml_target(r, n, c):
    """multilabel_margin_loss targets: class lists ended by a -1 that moves between draws."""
    n, c = _g((n, c))
    t = np.stack([r.permutation(c) for _ in range(n)])
    for row in t:
        row[r.integers(0, c + 1):] = -1   # may list every class, or none
    return ember.tensor(t.astype(np.int64))


case("conv3d", lambda x, w, b: F.conv3d(x, w, b, padding=1),
     lambda r: (f(r, 1, 2, 3, 4, 3), f(r, 3, 2, 2, 2, 2), f(r, 3)))
case("conv_transpose3d", lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2, padding=1),
     lambda r: (f(r, 1, 2, 3, 2, 3), f(r, 2, 3, 2, 2, 2), f(r, 3)))
case("conv_tbc", lambda x, w, b: F.conv_tbc(x, w, b, 1),
     lambda r: (f(r, 5, 2, 3), f(r, 3, 3, 4), f(r, 4)))
case("avg_pool3d", lambda x: F.avg_pool3d(x, 2, 1, 1, count_include_pad=False),
     lambda r: (f(r, 1, 2, 3, 4, 3),))
case("max_pool3d", lambda x: F.max_pool3d(x, 2, return_indices=True),
     lambda r: (f(r, 1, 2, 4, 4, 4),))
case("max_pool3d_with_indices", lambda x: F.max_pool3d_with_indices(x, 3, 2, 1, True),
     lambda r: (f(r, 1, 2, 5, 4, 5),))
case("max_pool1d_with_indices", lambda x: F.max_pool1d_with_indices(x, 3, 2, 1, True),
     lambda r: (f(r, 2, 3, 9),))
case("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)),
     lambda r: (f(r, 1, 2, 5, 4, 3),))
case("adaptive_max_pool3d", lambda x: F.adaptive_max_pool3d(x, (2, 1, 3), True),
     lambda r: (f(r, 1, 2, 5, 4, 4),))
case("adaptive_max_pool3d_with_indices", lambda x: F.adaptive_max_pool3d_with_indices(x, 2),
     lambda r: (f(r, 1, 2, 3, 5, 4),))
case("adaptive_max_pool2d_with_indices", lambda x: F.adaptive_max_pool2d_with_indices(x, (2, 3)),
     lambda r: (f(r, 2, 3, 5, 7),))
case("adaptive_max_pool1d_with_indices", lambda x: F.adaptive_max_pool1d_with_indices(x, 3),
     lambda r: (f(r, 2, 3, 7),))
case("lp_pool1d", lambda x: F.lp_pool1d(x, 2, 3, 2), lambda r: (f(r, 2, 3, 8),))
case("lp_pool3d", lambda x: F.lp_pool3d(x, 3, 2), lambda r: (pos(r, 1, 2, 4, 4, 4),))
case("fractional_max_pool2d", lambda x: F.fractional_max_pool2d(x, 2, output_size=3),
     lambda r: (f(r, 2, 3, 6, 6),))
case("fractional_max_pool2d",
     lambda x, s: F.fractional_max_pool2d(x, (2, 3), output_ratio=0.5, return_indices=True,
                                          _random_samples=s),
     lambda r: (f(r, 2, 3, 7, 8), prob(r, 2, 3, 1) * ember.ones(2)), "samples_ratio")
case("fractional_max_pool2d_with_indices",
     lambda x: F.fractional_max_pool2d_with_indices(x, 2, (3, 4)),
     lambda r: (f(r, 1, 2, 6, 7),))
case("fractional_max_pool3d", lambda x: F.fractional_max_pool3d(x, 2, output_size=(2, 3, 2)),
     lambda r: (f(r, 1, 2, 5, 6, 4),))
case("fractional_max_pool3d_with_indices",
     lambda x, s: F.fractional_max_pool3d_with_indices(x, 2, output_ratio=(0.5, 0.6, 0.5),
                                                       _random_samples=s),
     lambda r: (f(r, 2, 2, 5, 6, 4), F.sigmoid(ft(r, (2, 2), (3,)))))
case("max_unpool1d", lambda y, i: F.max_unpool1d(y, i, 2, 1),
     lambda r: _pooled(F.max_pool1d, ft(r, (2, 3), (8,)), 2, 1))
case("max_unpool1d", lambda y, i: F.max_unpool1d(y, i, 3, 2, 1, output_size=(9,)),
     lambda r: _pooled(F.max_pool1d, f(r, 2, 3, 9), 3, 2, 1), "output_size")
case("max_unpool2d", lambda y, i: F.max_unpool2d(y, i, 2),
     lambda r: _pooled(F.max_pool2d, f(r, 2, 3, 4, 6), 2), "stride2")
case("max_unpool2d", lambda y, i: F.max_unpool2d(y, i, (2, 3), 1),
     lambda r: _pooled(F.max_pool2d, ft(r, (2, 3), (4, 5)), (2, 3), 1))
case("max_unpool2d", lambda y, i: F.max_unpool2d(y, i, 3, 2, 1),
     lambda r: _pooled(F.max_pool2d, f(r, 3, 5, 5), 3, 2, 1), "unbatched_padded")
case("max_unpool3d", lambda y, i: F.max_unpool3d(y, i, 2),
     lambda r: _pooled(F.max_pool3d, f(r, 1, 2, 4, 2, 4), 2), "stride2")
case("max_unpool3d", lambda y, i: F.max_unpool3d(y, i, 2, 1),
     lambda r: _pooled(F.max_pool3d, ft(r, (2, 2), (3, 4, 3)), 2, 1))
case("fold", lambda x: F.fold(x, (4, 5), 2, padding=1, stride=2),
     lambda r: (f(r, 2, 8, 9),))
case("fold", lambda x: F.fold(x, 4, 3, dilation=1), lambda r: (f(r, 18, 4),), "unbatched")
case("channel_shuffle", lambda x: F.channel_shuffle(x, 3),
     lambda r: (ft(r, (2,), (6, 1, 1)) * f(r, 1, 1, 2, 3),))
case("native_channel_shuffle", lambda x: F.native_channel_shuffle(x, 2),
     lambda r: (ft(r, (3,), (4,)).unsqueeze(-1) * f(r, 1, 1, 3),))
case("affine_grid", lambda t: F.affine_grid(t, (2, 3, 4, 5), align_corners=False),
     lambda r: (f(r, 2, 2, 3),))
case("affine_grid", lambda t: F.affine_grid(t, (1, 2, 3, 4, 2), align_corners=True),
     lambda r: (f(r, 1, 3, 4),), "3d")
case("affine_grid", lambda t, x: F.affine_grid(t, x.shape, align_corners=False),
     lambda r: (ft(r, (2,), (2, 3)), f(r, 2, 1, 3, 4)), "size_of_input")
case("grid_sample", lambda x, g: F.grid_sample(x, g, align_corners=False),
     lambda r: (f(r, 2, 3, 4, 5), ft(r, (2, 3, 2), (2,)) * 0.8))
case("grid_sample", lambda x, g: F.grid_sample(x, g, "nearest", "border", align_corners=True),
     lambda r: (f(r, 1, 2, 4, 5), ft(r, (1, 3, 3), (2,))), "nearest_border")
case("grid_sample", lambda x, g: F.grid_sample(x, g, padding_mode="reflection",
                                               align_corners=False),
     lambda r: (f(r, 1, 2, 3, 4, 3), ft(r, (1, 2, 2, 3), (3,)) * 1.5), "3d_reflection")

# ---------------------------------------------------------------------------- more in-place / random
for _n in ("elu_", "selu_", "celu_", "leaky_relu_"):
    case(_n, getattr(F, _n), lambda r: (f(r, 3, 4) * 3,))
case("celu_", lambda x: F.celu_(x, 0.5), lambda r: (f(r, 3, 4),), "alpha")
case("threshold_", lambda x: F.threshold_(x, 0.2, -3.0), lambda r: (f(r, 3, 4),))
case("rrelu_", lambda x: F.rrelu_(x), lambda r: (f(r, 3, 4),))
case("rrelu_", lambda x: F.rrelu_(x, 0.1, 0.4, training=True), lambda r: (f(r, 3, 4),),
     "training")
case("feature_alpha_dropout", lambda x: F.feature_alpha_dropout(x, 0.4, True),
     lambda r: (f(r, 3, 5, 2, 2),))
case("feature_alpha_dropout", lambda x: F.feature_alpha_dropout(x, 0.5, True, inplace=True),
     lambda r: (f(r, 2, 6, 3),), "inplace")

# ---------------------------------------------------------------------------- more losses, distances
case("pdist", F.pdist, lambda r: (f(r, 5, 3),))
case("pdist", lambda x: F.pdist(x, 1.0), lambda r: (f(r, 4, 6),), "p1")
case("triplet_margin_with_distance_loss",
     lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, swap=True),
     lambda r: (f(r, 4, 5), f(r, 4, 5), f(r, 4, 5)))
case("triplet_margin_with_distance_loss",
     lambda a, p, n: F.triplet_margin_with_distance_loss(
         a, p, n, distance_function=lambda u, v: 1.0 - F.cosine_similarity(u, v), margin=0.5,
         reduction="none"),
     lambda r: (f(r, 4, 5), f(r, 4, 5), f(r, 4, 5)), "cosine_none")
case("multilabel_margin_loss", F.multilabel_margin_loss,
     lambda r: (f(r, 4, 5), _ml_target(r, 4, 5)))
case("multilabel_margin_loss", lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"),
     lambda r: (f(r, 6), _ml_target(r, 1, 6)[0]), "1d_none")
case("linear_cross_entropy", lambda x, w, t, b: F.linear_cross_entropy(x, w, t, linear_bias=b),
     lambda r: (f(r, 4, 3), f(r, 5, 3), idx(r, 5, 4), f(r, 5)))
case("linear_cross_entropy",
     lambda x, w, t, cw: F.linear_cross_entropy(x, w, t, weight=cw, ignore_index=1,
                                                label_smoothing=0.2),
     lambda r: (f(r, 6, 3), f(r, 5, 3), _nll_target(r, 1), pos(r, 5)), "ignore_smoothing")
case("linear_cross_entropy", lambda x, w, t: F.linear_cross_entropy(x, w, t, reduction="sum"),
     lambda r: (f(r, 2, 3), f(r, 4, 2, 3), idx(r, 4, 2, 2)), "kdim")


def _ctc_inputs(r, t, n, c, s):
    return F.log_softmax(f(r, t, n, c), 2), idx(r, c - 1, n, s) + 1


case("ctc_loss", lambda lp, tg: F.ctc_loss(lp, tg, [lp.shape[0]] * lp.shape[1],
                                           [tg.shape[1]] * tg.shape[1]),
     lambda r: _ctc_inputs(r, 6, 2, 4, 2))
case("ctc_loss", lambda lp, tg: F.ctc_loss(lp, tg, (6, 5), (3, 2), reduction="sum"),
     lambda r: _ctc_inputs(r, 6, 2, 4, 3), "lengths_sum")
case("ctc_loss", lambda lp, tg: F.ctc_loss(lp, tg, [5], [2], reduction="none", blank=3),
     lambda r: (F.log_softmax(f(r, 5, 4), 1), idx(r, 3, 2)), "unbatched_blank")
case("ctc_loss", lambda lp, tg, il, tl: F.ctc_loss(lp, tg, il, tl),
     lambda r: _ctc_inputs(r, 6, 2, 4, 3) + (ember.tensor([6, 4]), idx(r, 3, 2) + 1),
     "tensor_lengths")


# ---------------------------------------------------------------------------- the checks
def _public():
    return sorted(n for n in F.__all__ if callable(getattr(F, n)))


def test_every_public_function_has_a_case():
    covered = {name for name, _, _ in CASES.values()}
    missing = [n for n in _public() if n not in covered and n not in NOT_TENSOR_FUNCTIONS]
    assert not missing, f"nn.functional entry points without a trace-vs-eager case: {missing}"
    stale = [n for n in covered | set(NOT_TENSOR_FUNCTIONS) if not callable(getattr(F, n, None))]
    assert not stale, f"cases for names that nn.functional does not have: {stale}"
    assert set(WARNS) <= set(CASES) and set(CANNOT_TRACE) <= set(CASES)


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in _flat(o)]
    return [] if out is None else [out]


def _run(fn, args, seed):
    ember.manual_seed(seed)
    return [o._data.copy() for o in _flat(fn(*args))] + [a._data.copy() for a in args]


@pytest.mark.parametrize("cid", sorted(CASES))
def test_trace_matches_eager_on_new_inputs(cid):
    name, fn, make = CASES[cid]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        ember.manual_seed(1)
        if cid in CANNOT_TRACE:
            err, part = CANNOT_TRACE[cid]
            with pytest.raises(err, match=part):
                jit.trace(fn, make(np.random.default_rng(1)), check_trace=False)
            return
        traced = jit.trace(fn, make(np.random.default_rng(1)), check_trace=False)
    warned = [str(w.message) for w in rec if issubclass(w.category, jit.TracerWarning)]
    if cid in WARNS:
        assert warned, f"{cid}: {WARNS[cid]}, but tracing it gave no TracerWarning"
        assert all(__file__ in m for m in warned), warned  # the warning names the user's line
        return
    assert not warned, f"{cid}: unexpected TracerWarning {warned}"
    for seed in (2, 3):
        want = _run(fn, make(np.random.default_rng(seed)), seed)
        got = _run(traced, make(np.random.default_rng(seed)), seed)
        assert len(got) == len(want)
        for k, (a, b) in enumerate(zip(got, want)):
            assert a.shape == b.shape and a.dtype == b.dtype, (cid, k, a.shape, b.shape)
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{cid}: output/input {k} on new inputs")


def test_multi_margin_loss_follows_a_new_target():
    x = ember.tensor(np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32))
    t1, t2 = ember.tensor([0, 1, 2, 3]), ember.tensor([4, 4, 0, 1])
    traced = jit.trace(F.multi_margin_loss, (x, t1))
    assert float(traced(x, t2)) == pytest.approx(float(F.multi_margin_loss(x, t2)), rel=1e-6)
    assert float(traced(x, t2)) != pytest.approx(float(F.multi_margin_loss(x, t1)), rel=1e-3)


def test_one_hot_warning_names_the_op_and_the_user_line():
    with pytest.warns(jit.TracerWarning) as rec:
        jit.trace(lambda t: F.one_hot(t), (ember.tensor([0, 2, 1]),), check_trace=False)
    msg = str(rec[0].message)
    assert "one_hot" in msg and "num_classes=-1" in msg
    assert rec[0].filename == __file__ and "F.one_hot(t)" in msg


def test_traced_embedding_max_norm_renormalises_new_rows_with_autograd():
    ember.manual_seed(0)
    eager, traced_m = ember.nn.Embedding(10, 4, max_norm=1.0), ember.nn.Embedding(10, 4,
                                                                                  max_norm=1.0)
    traced_m.load_state_dict(eager.state_dict())
    first, new = ember.tensor([[1, 2, 3]]), ember.tensor([[7, 8, 9], [0, 1, 2]])
    traced = jit.trace(traced_m, (first,))
    eager(first)
    want, got = eager(new), traced(new)   # grad mode on: the trace runs through dispatch
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(traced_m.weight.detach().numpy(), eager.weight.detach().numpy(),
                               rtol=1e-6)
    assert float(ember.norm(traced_m.weight[7])) <= 1.0 + 1e-5
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_array_equal(traced_m.weight.grad.numpy(), eager.weight.grad.numpy())


def test_causal_masks_follow_a_new_sequence_length():
    def attn(q):
        return F.scaled_dot_product_attention(q, q, q, is_causal=True)
    traced = jit.trace(attn, (ember.randn(2, 4, 3),))
    x = ember.randn(2, 6, 3)
    np.testing.assert_allclose(traced(x).numpy(), attn(x).numpy(), rtol=1e-5, atol=1e-6)


def test_constant_sharing_a_traced_tensors_memory_warns():
    def f(x):
        return x + ember.Tensor._make(x._data[::-1])   # frozen view of the input's values
    with pytest.warns(jit.TracerWarning, match="memory of a traced tensor"):
        jit.trace(f, (ember.randn(3),), check_trace=False)


@pytest.mark.parametrize("conv", [lambda a, b: a.allclose(b), lambda a, b: a.equal(b)])
def test_allclose_and_equal_of_traced_tensors_warn(conv):
    with pytest.warns(jit.TracerWarning):
        jit.trace(lambda x: x * 2 if conv(x, x) else x, (ember.randn(3),), check_trace=False)


def _data_reads(src):
    """Lines of ``src`` that read a tensor's values (``._data`` not followed by .dtype, .shape,
    .ndim or .size) or draw random numbers outside the spec ops."""
    import re
    bad = []
    for k, line in enumerate(src.splitlines(), 1):
        code = line.split("#")[0]
        if re.search(r"\._data\b(?!\.(dtype|shape|ndim|size)\b)", code) or \
                re.search(r"resolve\([^)]*\)\.", code):
            bad.append((k, line.strip()))
    return bad


def test_nn_functional_reads_data_only_through_the_tracer_aware_helpers():
    import inspect
    from ember.ops import loss as ops_loss, nn as ops_nn
    src = inspect.getsource(F)
    helpers = {inspect.getsource(F._read), inspect.getsource(F._check_read)}
    for h in helpers:
        src = src.replace(h, "")
    assert not _data_reads(src), f"nn.functional reads tensor data outside _read: " \
                                 f"{_data_reads(src)}"
    for family in (ops_nn, ops_loss):   # the nn and loss composites trace through their spec ops
        assert not _data_reads(inspect.getsource(family)), _data_reads(inspect.getsource(family))
    assert _data_reads("m = np.ones(3)\nnp.put_along_axis(m, t._data[:, None], 0.0, 1)\n"
                       "u = resolve(None).random((2,))\nd = x._data.dtype\n") == [
        (2, "np.put_along_axis(m, t._data[:, None], 0.0, 1)"),
        (3, "u = resolve(None).random((2,))")]


def test_traced_batchnorm_counts_batches_and_warns_for_cumulative_momentum():
    m = ember.nn.BatchNorm2d(3)
    traced = jit.trace(m, (ember.randn(4, 3, 2, 2),))
    before = int(m.num_batches_tracked)
    traced(ember.randn(4, 3, 2, 2))
    traced(ember.randn(4, 3, 2, 2))
    assert int(m.num_batches_tracked) == before + 2
    with pytest.warns(jit.TracerWarning, match="float"):
        jit.trace(ember.nn.BatchNorm2d(3, momentum=None), (ember.randn(4, 3, 2, 2),),
                  check_trace=False)


@pytest.mark.parametrize("read", [
    lambda x: x.numpy().sum(), lambda x: np.asarray(x).sum(), lambda x: [1, 2, 3][x[0]],
    lambda x: bool(x[1] > 0), lambda x: x.tolist()[0], lambda x: x[0].item(), int, float])
def test_every_python_read_of_traced_data_warns_at_the_user_line(read):
    x = ember.tensor([1]) if read in (int, float) else ember.tensor([1, 0, 2])
    with pytest.warns(jit.TracerWarning) as rec:
        jit.trace(lambda x: x * read(x), (x,), check_trace=False)
    w = rec[0]   # the innermost frame outside ember: the line of the read itself
    assert w.filename == __file__ and f"{__file__}:{w.lineno}:" in str(w.message)


def test_traced_masks_export_to_onnx():
    ort = pytest.importorskip("onnxruntime")
    import io
    import ember.onnx
    cases = [(lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True),
              (ember.randn(2, 4, 3),)),
             (lambda x, t: F.multi_margin_loss(x, t),
              (ember.randn(4, 5), ember.tensor([0, 4, 2, 1]))),
             (lambda x, t: F.poisson_nll_loss(x, t, full=True, reduction="none"),
              (ember.randn(3, 4), ember.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4))))]
    for fn, args in cases:
        buf = io.BytesIO()
        ember.onnx.export(fn, args, buf)
        sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
        feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
        np.testing.assert_allclose(sess.run(None, feeds)[0], fn(*args).numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_embedding_bag_max_over_large_bags_loops_and_warns_when_traced(monkeypatch):
    r = np.random.default_rng(0)
    i, w, o = idx(r, 10, 7), f(r, 10, 3), ember.tensor([0, 3, 3, 5])
    dense = F.embedding_bag(i, w, o, mode="max")
    monkeypatch.setattr(F, "_BAG_MAX_DENSE", 0)
    np.testing.assert_array_equal(F.embedding_bag(i, w, o, mode="max").numpy(), dense.numpy())
    with pytest.warns(jit.TracerWarning, match="embedding_bag: mode='max'"):
        jit.trace(lambda i, w, o: F.embedding_bag(i, w, o, mode="max"), (i, w, o),
                  check_trace=False)


def test_embedding_bag_1d_input_needs_offsets():
    with pytest.raises(ValueError, match="embedding_bag: .*offsets None"):
        F.embedding_bag(ember.tensor([1, 2]), ember.randn(5, 3))


# ---------------------------------------------------------------------------- new shapes
@pytest.mark.parametrize("cid", sorted(CASES))
def test_trace_on_new_shapes_is_right_or_warns(cid):
    """The same cases with every size > 1 grown by one (where eager mode accepts the grown
    inputs): the trace gives eager's result, or it warns (TracerWarning) that its shapes were
    frozen (or raises, as the shapes no longer fit)."""
    name, fn, make = CASES[cid]
    if cid in CANNOT_TRACE or cid in WARNS:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ember.manual_seed(1)
        traced = jit.trace(fn, make(np.random.default_rng(1)), check_trace=False)
    GROW[0] = 1
    try:
        try:
            want = _run(fn, make(np.random.default_rng(2)), 2)
        except Exception:  # noqa: BLE001 - eager rejects the grown inputs: nothing to compare
            pytest.skip("eager mode rejects the grown inputs")
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            try:
                got = _run(traced, make(np.random.default_rng(2)), 2)
            except Exception:  # noqa: BLE001 - an error says the trace does not fit
                got = None
    finally:
        GROW[0] = 0
    warned = [str(w.message) for w in rec if issubclass(w.category, jit.TracerWarning)]
    if warned:
        assert all(__file__ in m for m in warned), warned  # the warning names the user's line
        return
    assert got is not None, f"{cid}: the trace raised on new shapes without a TracerWarning"
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape and a.dtype == b.dtype, (cid, k, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{cid}: output/input {k} on new shapes, no warning")
