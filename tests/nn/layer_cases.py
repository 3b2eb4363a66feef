"""Layer cases against torch with identical weights (copied by state-dict key): forward outputs,
input and parameter gradients, buffers, in train and eval modes (float64). Shared by the test
file of each module defining the layers (tests/nn/modules/test_<module>.py):
``cases(LIST, module)`` picks the cases whose layer class that module defines."""
import re

import numpy as np
import pytest

import ember
import ember.nn as enn
from tests.nn._parity import assert_close, copy_weights, run_pair

torch = pytest.importorskip("torch")
tnn = torch.nn


def f(*shape):
    return ("f", shape)


def i(high, *shape):
    return ("i", high, shape)


def u(*shape):
    return ("u", shape)


# (id, constructor source evaluated with nn = ember.nn / torch.nn, input specs, modes)
CASES = [
    ("linear", "nn.Linear(5, 4)", [f(3, 5)]),
    ("linear_nobias_3d", "nn.Linear(5, 4, bias=False)", [f(2, 3, 5)]),
    ("bilinear", "nn.Bilinear(3, 4, 5)", [f(6, 3), f(6, 4)]),
    ("conv1d", "nn.Conv1d(3, 4, 3, stride=2, padding=1)", [f(2, 3, 9)]),
    ("conv1d_same_groups", "nn.Conv1d(4, 6, 3, groups=2, padding='same', dilation=2)",
     [f(2, 4, 7)]),
    ("conv2d", "nn.Conv2d(3, 4, 3)", [f(2, 3, 6, 6)]),
    ("conv2d_args", "nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), "
     "groups=2)", [f(2, 4, 7, 8)]),
    ("conv2d_same_even", "nn.Conv2d(3, 4, 4, padding='same')", [f(1, 3, 6, 5)]),
    ("conv2d_valid_nobias", "nn.Conv2d(3, 4, 3, padding='valid', bias=False)", [f(1, 3, 5, 5)]),
    ("conv2d_reflect", "nn.Conv2d(3, 4, 3, padding=1, padding_mode='reflect')", [f(1, 3, 5, 5)]),
    ("conv2d_unbatched", "nn.Conv2d(3, 4, 3, padding=1)", [f(3, 5, 5)]),
    ("convT2d", "nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)",
     [f(2, 4, 4, 4)]),
    ("convT2d_groups", "nn.ConvTranspose2d(4, 6, 3, groups=2, dilation=2)", [f(1, 4, 3, 3)]),
    ("convT1d", "nn.ConvTranspose1d(3, 4, 3, stride=2)", [f(2, 3, 5)]),
    ("maxpool1d", "nn.MaxPool1d(3, 2, 1)", [f(2, 3, 9)]),
    ("maxpool2d", "nn.MaxPool2d(2)", [f(2, 3, 6, 6)]),
    ("maxpool2d_ceil", "nn.MaxPool2d(3, 2, 1, ceil_mode=True)", [f(1, 2, 7, 6)]),
    ("maxpool2d_idx", "nn.MaxPool2d(2, return_indices=True)", [f(1, 2, 4, 4)]),
    ("avgpool1d", "nn.AvgPool1d(3, 2, 1)", [f(2, 3, 9)]),
    ("avgpool2d", "nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False)",
     [f(1, 2, 7, 6)]),
    ("avgpool2d_div", "nn.AvgPool2d(2, divisor_override=3)", [f(1, 2, 4, 4)]),
    ("adaptive_avg", "nn.AdaptiveAvgPool2d((2, 3))", [f(2, 3, 7, 5)]),
    ("adaptive_avg_none", "nn.AdaptiveAvgPool2d((None, 2))", [f(1, 2, 3, 5)]),
    ("adaptive_avg1d", "nn.AdaptiveAvgPool1d(3)", [f(2, 3, 7)]),
    ("adaptive_max", "nn.AdaptiveMaxPool2d(2)", [f(2, 3, 5, 5)]),
    ("bn1d", "nn.BatchNorm1d(4)", [f(5, 4)]),
    ("bn1d_3d", "nn.BatchNorm1d(4)", [f(3, 4, 5)]),
    ("bn2d", "nn.BatchNorm2d(3)", [f(2, 3, 4, 4)]),
    ("bn2d_noaffine", "nn.BatchNorm2d(3, affine=False, momentum=0.3)", [f(2, 3, 4, 4)]),
    ("bn2d_notrack", "nn.BatchNorm2d(3, track_running_stats=False)", [f(2, 3, 4, 4)]),
    ("bn2d_cma", "nn.BatchNorm2d(3, momentum=None)", [f(2, 3, 4, 4)]),
    ("layernorm", "nn.LayerNorm((4, 5))", [f(3, 4, 5)]),
    ("layernorm_noaffine", "nn.LayerNorm(5, elementwise_affine=False)", [f(3, 5)]),
    ("groupnorm", "nn.GroupNorm(2, 4)", [f(2, 4, 3, 3)]),
    ("instancenorm", "nn.InstanceNorm2d(3, affine=True)", [f(2, 3, 4, 4)]),
    ("embedding", "nn.Embedding(10, 4, padding_idx=0)", [i(10, 3, 5)]),
    ("embedding_neg_pad", "nn.Embedding(10, 4, padding_idx=-1)", [i(10, 7)]),
    ("pixelshuffle", "nn.PixelShuffle(2)", [f(2, 8, 3, 3)]),
    ("pixelunshuffle", "nn.PixelUnshuffle(2)", [f(2, 2, 4, 6)]),
    ("upsample_nearest", "nn.Upsample(scale_factor=2, mode='nearest')", [f(1, 2, 3, 4)]),
    ("upsample_nearest_size", "nn.Upsample(size=(5, 7), mode='nearest')", [f(1, 2, 3, 4)]),
    ("upsample_bilinear", "nn.Upsample(size=(5, 7), mode='bilinear')", [f(1, 2, 3, 4)]),
    ("upsample_bilinear_ac", "nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)",
     [f(1, 2, 3, 4)]),
    ("upsample_bicubic", "nn.Upsample(scale_factor=1.7, mode='bicubic')", [f(1, 2, 3, 4)]),
    ("upsample_trilinear", "nn.Upsample(size=(3, 5, 2), mode='trilinear', align_corners=True)",
     [f(1, 2, 2, 3, 4)]),
    ("upsample_nearest_exact", "nn.Upsample(scale_factor=1.5, mode='nearest-exact')",
     [f(1, 2, 5)]),
    ("upsampling_nearest2d", "nn.UpsamplingNearest2d(scale_factor=2)", [f(1, 2, 3, 2)]),
    ("upsampling_bilinear2d", "nn.UpsamplingBilinear2d(size=(5, 3))", [f(1, 2, 3, 2)]),
    ("conv3d", "nn.Conv3d(4, 6, (3, 2, 2), stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, "
     "2), groups=2)", [f(2, 4, 4, 5, 5)]),
    ("conv3d_same", "nn.Conv3d(2, 3, 2, padding='same', bias=False)", [f(1, 2, 3, 3, 4)]),
    ("conv3d_unbatched", "nn.Conv3d(2, 3, 2, padding=1)", [f(2, 3, 3, 3)]),
    ("convT3d", "nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)",
     [f(1, 4, 2, 3, 2)]),
    ("maxpool3d", "nn.MaxPool3d(3, 2, 1, ceil_mode=True)", [f(1, 2, 5, 6, 4)]),
    ("maxpool3d_idx", "nn.MaxPool3d(2, return_indices=True)", [f(1, 2, 4, 4, 4)]),
    ("avgpool3d", "nn.AvgPool3d(3, 2, 1, count_include_pad=False)", [f(1, 2, 5, 6, 4)]),
    ("adaptive_avg3d", "nn.AdaptiveAvgPool3d((2, None, 3))", [f(1, 2, 5, 3, 4)]),
    ("adaptive_max3d", "nn.AdaptiveMaxPool3d(2)", [f(1, 2, 5, 3, 4)]),
    ("lppool1d", "nn.LPPool1d(2, 3, 2)", [u(2, 3, 9)]),
    ("lppool2d", "nn.LPPool2d(3, 2)", [u(1, 2, 4, 5)]),
    ("lppool3d", "nn.LPPool3d(2, 2)", [u(1, 2, 4, 4, 4)]),
    ("fold", "nn.Fold((5, 6), (3, 2), dilation=(1, 2), padding=1, stride=(2, 1))",
     [f(2, 12, 18)]),
    ("unfold", "nn.Unfold((2, 3), padding=1, stride=2)", [f(2, 3, 5, 4)]),
    ("pad3d_reflect", "nn.ReflectionPad3d((1, 2, 0, 1, 2, 1))", [f(1, 2, 3, 4, 3)]),
    ("pad3d_replicate", "nn.ReplicationPad3d(1)", [f(1, 2, 2, 3, 2)]),
    ("pad3d_circular", "nn.CircularPad3d((1, 0, 1, 1, 0, 1))", [f(1, 2, 2, 3, 2)]),
    ("pad3d_constant", "nn.ConstantPad3d(1, 0.5)", [f(1, 2, 2, 3, 2)]),
    ("pad3d_zero", "nn.ZeroPad3d((1, 0, 0, 1, 2, 0))", [f(1, 2, 2, 3, 2)]),
    ("instancenorm3d", "nn.InstanceNorm3d(2, affine=True)", [f(2, 2, 3, 2, 4)]),
    ("flatten", "nn.Flatten()", [f(2, 3, 4)]),
    ("unflatten", "nn.Unflatten(1, (2, 6))", [f(3, 12)]),
    ("identity", "nn.Identity(54, unused='x')", [f(3, 4)]),
    ("dropout_eval_p0", "nn.Dropout(0.0)", [f(3, 4)]),
    ("prelu", "nn.PReLU(3)", [f(2, 3, 4)]),
    ("softmax", "nn.Softmax(dim=1)", [f(3, 4)]),
    ("logsoftmax", "nn.LogSoftmax(dim=-1)", [f(3, 4)]),
    ("softmin", "nn.Softmin(dim=1)", [f(3, 4)]),
    ("glu", "nn.GLU()", [f(3, 4)]),
    ("channelshuffle", "nn.ChannelShuffle(2)", [f(1, 4, 2, 2)]),
    ("zeropad", "nn.ZeroPad2d((1, 2, 0, 1))", [f(1, 2, 3, 3)]),
    ("reflectpad", "nn.ReflectionPad2d(1)", [f(1, 2, 3, 3)]),
    ("cosine", "nn.CosineSimilarity(dim=1)", [f(3, 4), f(3, 4)]),
]
for _name, _extra in [("ReLU", ""), ("ReLU6", ""), ("GELU", ""), ("GELU", "approximate='tanh'"),
                      ("SiLU", ""), ("Tanh", ""), ("Sigmoid", ""), ("LeakyReLU", "0.2"),
                      ("ELU", "alpha=0.5"), ("CELU", ""), ("SELU", ""),
                      ("Hardtanh", "-0.5, 0.5"), ("Hardsigmoid", ""), ("Hardswish", ""),
                      ("Mish", ""), ("Softplus", "beta=2.0"), ("Softsign", ""),
                      ("LogSigmoid", ""), ("Tanhshrink", ""), ("Hardshrink", ""),
                      ("Softshrink", "0.3"), ("Threshold", "0.1, 20.0")]:
    CASES.append((f"act_{_name}_{_extra}", f"nn.{_name}({_extra})", [f(3, 5)]))

RNN_CASES = [
    ("rnn_tanh", "nn.RNN(4, 5)", [f(6, 2, 4)]),
    ("rnn_relu_2l", "nn.RNN(4, 5, num_layers=2, nonlinearity='relu')", [f(6, 2, 4)]),
    ("lstm", "nn.LSTM(4, 5)", [f(6, 2, 4)]),
    ("lstm_2l_bi_bf", "nn.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True)",
     [f(2, 6, 4)]),
    ("lstm_nobias_unbatched", "nn.LSTM(4, 3, bias=False)", [f(5, 4)]),
    ("gru", "nn.GRU(4, 5)", [f(6, 2, 4)]),
    ("gru_2l_bi_bf", "nn.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True)",
     [f(2, 6, 4)]),
    ("gru_nobias", "nn.GRU(3, 4, bias=False)", [f(5, 2, 3)]),
    ("lstmcell", "nn.LSTMCell(4, 5)", [f(3, 4)]),
    ("grucell", "nn.GRUCell(4, 5)", [f(3, 4)]),
    ("rnncell", "nn.RNNCell(4, 5, nonlinearity='relu')", [f(3, 4)]),
    ("mha", "nn.MultiheadAttention(8, 2)", [f(5, 2, 8), f(4, 2, 8), f(4, 2, 8)]),
    ("mha_bf_kv", "nn.MultiheadAttention(8, 2, batch_first=True, kdim=6, vdim=5)",
     [f(2, 5, 8), f(2, 4, 6), f(2, 4, 5)]),
    ("mha_bias_kv", "nn.MultiheadAttention(8, 4, add_bias_kv=True, add_zero_attn=True)",
     [f(3, 2, 8), f(3, 2, 8), f(3, 2, 8)]),
    ("encoder_layer", "nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)",
     [f(5, 2, 8)]),
    ("encoder_layer_prenorm_gelu", "nn.TransformerEncoderLayer(8, 2, 16, 0.0, 'gelu', "
     "batch_first=True, norm_first=True)", [f(2, 5, 8)]),
    ("encoder", "nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0.0), 2)",
     [f(4, 2, 8)]),
]


def _inputs(specs, seed):
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        if s[0] == "f":
            out.append(rng.standard_normal(s[1]))
        elif s[0] == "u":
            out.append(rng.uniform(0.1, 0.9, s[1]))
        else:
            out.append(rng.integers(0, s[1], s[2]).astype(np.int64))
    return out


def _build(src, seed):
    ember.manual_seed(seed)
    em = eval(src, {"nn": enn})
    torch.manual_seed(seed)
    tm = eval(src, {"nn": tnn}).double()
    em.double()
    copy_weights(em, tm)
    return em, tm


def check_against_torch(src, specs, train, nograd=()):
    em, tm = _build(src, 0)
    assert list(em.state_dict()) == list(tm.state_dict())
    for step in range(2):
        inputs = _inputs(specs, step)
        e_out, t_out, e_g, t_g = run_pair(em, tm, inputs, torch, train=train, seed=step,
                                          nograd=nograd)
        for k, (a, b) in enumerate(zip(e_out, t_out)):
            assert a.shape == b.shape, (k, a.shape, b.shape)
            assert_close(a, b, what=f"output {k}")
        assert set(e_g) == set(t_g), (sorted(e_g), sorted(t_g))
        for k in t_g:
            assert_close(e_g[k], t_g[k], rtol=1e-6, atol=1e-8, what=f"grad {k}")
        for k, v in tm.state_dict().items():
            assert_close(em.state_dict()[k].numpy(), v.numpy(), what=f"state {k}")
        em.zero_grad()
        tm.zero_grad()


LOSSES = [
    ("mse", "nn.MSELoss()", [f(3, 4), f(3, 4)]),
    ("mse_sum", "nn.MSELoss(reduction='sum')", [f(3, 4), f(3, 4)]),
    ("l1", "nn.L1Loss(reduction='none')", [f(3, 4), f(3, 4)]),
    ("smoothl1", "nn.SmoothL1Loss(beta=0.5)", [f(3, 4), f(3, 4)]),
    ("huber", "nn.HuberLoss(delta=0.5)", [f(3, 4), f(3, 4)]),
    ("ce", "nn.CrossEntropyLoss()", [f(4, 5), i(5, 4)]),
    ("ce_smooth", "nn.CrossEntropyLoss(label_smoothing=0.1, reduction='sum')",
     [f(4, 5), i(5, 4)]),
    ("ce_probs", "nn.CrossEntropyLoss()", [f(4, 5), u(4, 5)]),
    ("ce_2d", "nn.CrossEntropyLoss(ignore_index=1)", [f(2, 5, 3), i(5, 2, 3)]),
    ("nll", "nn.NLLLoss()", [f(4, 5), i(5, 4)]),
    ("bce", "nn.BCELoss()", [u(3, 4), u(3, 4)]),
    ("bcelogits", "nn.BCEWithLogitsLoss()", [f(3, 4), u(3, 4)]),
    ("kldiv", "nn.KLDivLoss(reduction='batchmean')", [f(3, 4), u(3, 4)]),
    ("kldiv_log", "nn.KLDivLoss(reduction='sum', log_target=True)", [f(3, 4), f(3, 4)]),
    ("softmargin", "nn.SoftMarginLoss()", [f(3, 4), f(3, 4)]),
    ("multilabel", "nn.MultiLabelSoftMarginLoss()", [f(3, 4), u(3, 4)]),
    ("poisson", "nn.PoissonNLLLoss()", [f(3, 4), u(3, 4)]),
    ("multimargin", "nn.MultiMarginLoss()", [f(4, 5), i(5, 4)]),
    ("multilabelmargin", "nn.MultiLabelMarginLoss(reduction='sum')", [f(4, 5), i(3, 4, 5)]),
    ("triplet_distance", "nn.TripletMarginWithDistanceLoss(margin=0.5, swap=True)",
     [f(4, 5), f(4, 5), f(4, 5)]),
    ("linear_ce", "nn.LinearCrossEntropyLoss(4, 5, bias=True)", [f(3, 4), i(5, 3)]),
    ("linear_ce_kdim", "nn.LinearCrossEntropyLoss(4, 3, out_features=(2,), label_smoothing=0.1, "
     "reduction='sum')", [f(3, 4), i(3, 3, 2)]),
]


def cases(entries, module):
    """The entries of ``entries`` whose layer class is defined in ember/nn/modules/<module>.py."""
    return [c for c in entries
            if getattr(enn, re.match(r"nn\.(\w+)\(", c[1]).group(1)).__module__ ==
            f"ember.nn.modules.{module}"]
