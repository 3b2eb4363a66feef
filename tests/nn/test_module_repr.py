"""print(model) as torch prints it: every module class's repr (SPECS), and a ModuleList shows a
run of children that print the same once, as ``(0-1): 2 x Layer(...)`` (nn.TransformerEncoder's
layers)."""
import pytest

import ember

torch = pytest.importorskip("torch")


def _build(nn):
    return nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2),
                          nn.Sequential(nn.Linear(2, 3), nn.Tanh()),
                          nn.Sequential(nn.Linear(2, 3), nn.Tanh())])


def test_module_list_repr_matches_torch():
    assert repr(_build(ember.nn)) == repr(_build(torch.nn))
    assert repr(ember.nn.ModuleList()) == repr(torch.nn.ModuleList()) == "ModuleList()"
    one = ember.nn.ModuleList([ember.nn.ReLU()])
    assert repr(one) == repr(torch.nn.ModuleList([torch.nn.ReLU()]))


def test_transformer_encoder_repr_matches_torch():
    e = ember.nn.TransformerEncoder(ember.nn.TransformerEncoderLayer(8, 2, 16), 3,
                                    enable_nested_tensor=False)
    t = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16), 3,
                                    enable_nested_tensor=False)
    assert repr(e) == repr(t)
    assert "(0-2): 3 x TransformerEncoderLayer(" in repr(e)


# Every torch.nn module class that ember has, built with typical and non-default arguments
# (evaluated as ``nn.<spec>`` with ``nn`` / ``m`` the library's nn / top-level module).
SPECS = [
    'AdaptiveAvgPool1d(3)', 'AdaptiveAvgPool2d((3, 4))', 'AdaptiveAvgPool2d((None, 4))',
    'AdaptiveAvgPool3d(2)', 'AdaptiveLogSoftmaxWithLoss(16, 10, [4, 8])',
    'AdaptiveLogSoftmaxWithLoss(16, 10, [4, 8], div_value=2.0, head_bias=True)',
    'AdaptiveMaxPool1d(3)', 'AdaptiveMaxPool1d(3, return_indices=True)',
    'AdaptiveMaxPool2d((2, 3))', 'AdaptiveMaxPool3d(2, return_indices=True)', 'AlphaDropout()',
    'AlphaDropout(0.2, inplace=True)', 'AvgPool1d(3)',
    'AvgPool1d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)', 'AvgPool2d(3)',
    'AvgPool2d((2, 3), stride=(1, 2), padding=1, ceil_mode=True, count_include_pad=False, '
     'divisor_override=2)',
    'AvgPool3d(2)',
    'AvgPool3d(2, stride=1, padding=1, ceil_mode=True, count_include_pad=False, '
     'divisor_override=3)',
    'BCELoss()', "BCELoss(reduction='sum')", 'BCEWithLogitsLoss()',
    "BCEWithLogitsLoss(pos_weight=m.ones(3), reduction='none')", 'BatchNorm1d(4)',
    'BatchNorm1d(4, eps=1e-3, momentum=None, affine=False, track_running_stats=False)',
    'BatchNorm2d(4, momentum=0.2)', 'BatchNorm3d(4)', 'Bilinear(2, 3, 4)',
    'Bilinear(2, 3, 4, bias=False)', 'CELU()', 'CELU(2.0, inplace=True)', 'CTCLoss()',
    "CTCLoss(blank=1, reduction='sum', zero_infinity=True)", 'ChannelShuffle(2)',
    'CircularPad1d(2)', 'CircularPad2d((1, 2, 3, 4))', 'CircularPad3d(1)', 'ConstantPad1d(2, 3.5)',
    'ConstantPad1d((1, 2), 0.0)', 'ConstantPad2d(1, 2)', 'ConstantPad3d((1, 2, 3, 4, 5, 6), -1.0)',
    'Conv1d(2, 4, 3)',
    'Conv1d(2, 4, 3, stride=2, padding=1, dilation=2, groups=2, bias=False, '
     "padding_mode='reflect')",
    "Conv1d(2, 4, 3, padding='same')", 'Conv2d(2, 4, 3)',
    "Conv2d(2, 4, (3, 5), stride=(2, 1), padding=(1, 2), padding_mode='circular')",
    "Conv2d(2, 4, 3, padding='valid')", 'Conv3d(2, 4, 3, bias=False)',
    "Conv3d(2, 4, 3, padding_mode='replicate', padding=1)", 'ConvTranspose1d(2, 4, 3)',
    'ConvTranspose1d(2, 4, 3, stride=2, padding=1, output_padding=1, groups=2, bias=False, '
     'dilation=2)',
    'ConvTranspose2d(2, 4, 3, stride=2)', 'ConvTranspose3d(2, 4, 3, output_padding=0)',
    'CosineEmbeddingLoss()', "CosineEmbeddingLoss(margin=0.5, reduction='sum')",
    'CosineSimilarity()', 'CosineSimilarity(dim=0, eps=1e-6)', 'CrossEntropyLoss()',
    "CrossEntropyLoss(weight=m.ones(3), ignore_index=1, reduction='sum', label_smoothing=0.1)",
    'Dropout()', 'Dropout(0.3, inplace=True)', 'Dropout1d(0.2)', 'Dropout2d()',
    'Dropout3d(0.1, True)', 'ELU()', 'ELU(alpha=0.5, inplace=True)', 'Embedding(5, 2)',
    'Embedding(5, 2, padding_idx=0, max_norm=1.0, norm_type=3.0, scale_grad_by_freq=True, '
     'sparse=True)',
    'Embedding(5, 2, max_norm=1.0, sparse=True)', 'Embedding(5, 2, padding_idx=-1)',
    'EmbeddingBag(5, 2)',
    "EmbeddingBag(5, 2, max_norm=1.0, norm_type=3.0, scale_grad_by_freq=True, mode='sum', "
     'sparse=True, include_last_offset=True, padding_idx=0)',
    "EmbeddingBag(5, 2, mode='max')", 'FeatureAlphaDropout()', 'FeatureAlphaDropout(0.3)',
    'Flatten()', 'Flatten(0, 2)', 'Fold((4, 5), 2)',
    'Fold(output_size=(4, 5), kernel_size=(2, 3), dilation=2, padding=1, stride=(1, 2))',
    'FractionalMaxPool2d(2, output_size=3)',
    'FractionalMaxPool2d(3, output_ratio=0.5, return_indices=True)',
    'FractionalMaxPool3d(2, output_size=(3, 3, 3))', 'GELU()', "GELU(approximate='tanh')", 'GLU()',
    'GLU(dim=1)', 'GRU(3, 4)',
    'GRU(3, 4, num_layers=2, bias=False, batch_first=True, dropout=0.5, bidirectional=True)',
    'GRUCell(3, 4)', 'GRUCell(3, 4, bias=False)', 'GaussianNLLLoss()',
    "GaussianNLLLoss(full=True, eps=1e-3, reduction='sum')", 'GroupNorm(2, 4)',
    'GroupNorm(2, 4, eps=1e-3, affine=False)', 'Hardshrink()', 'Hardshrink(0.3)', 'Hardsigmoid()',
    'Hardsigmoid(inplace=True)', 'Hardswish()', 'Hardswish(inplace=True)', 'Hardtanh()',
    'Hardtanh(-2.0, 3.0, inplace=True)', 'HingeEmbeddingLoss()',
    "HingeEmbeddingLoss(margin=2.0, reduction='none')", 'HuberLoss()',
    "HuberLoss(reduction='sum', delta=0.5)", 'Identity()', 'Identity(3, foo=2)',
    'InstanceNorm1d(4)',
    'InstanceNorm1d(4, eps=1e-3, momentum=0.2, affine=True, track_running_stats=True)',
    'InstanceNorm2d(4)', 'InstanceNorm3d(4, affine=True)', 'KLDivLoss()',
    "KLDivLoss(reduction='batchmean', log_target=True)", 'L1Loss()', "L1Loss(reduction='sum')",
    'LPPool1d(2, 3, stride=2)', 'LPPool1d(2, 3)', 'LPPool1d(1.5, 3, ceil_mode=True)',
    'LPPool2d(2, 3)', 'LPPool2d(2, (2, 3), stride=1, ceil_mode=True)', 'LPPool3d(2, 2)',
    'LSTM(3, 4)',
    'LSTM(3, 4, num_layers=2, bias=False, batch_first=True, dropout=0.5, '
     'bidirectional=True, proj_size=2)',
    'LSTMCell(3, 4)', 'LSTMCell(3, 4, bias=False)', 'LayerNorm(4)',
    'LayerNorm((3, 4), eps=1e-3, elementwise_affine=False)', 'LayerNorm(4, bias=False)',
    'LazyBatchNorm1d()', 'LazyBatchNorm2d(eps=1e-3, momentum=0.2, affine=False)',
    'LazyBatchNorm3d()', 'LazyConv1d(4, 3)', 'LazyConv2d(4, 3, stride=2, padding=1, bias=False)',
    'LazyConv3d(4, 3)', 'LazyConvTranspose1d(4, 3)', 'LazyConvTranspose2d(4, 3, stride=2)',
    'LazyConvTranspose3d(4, 3)', 'LazyInstanceNorm1d()', 'LazyInstanceNorm2d(affine=True)',
    'LazyInstanceNorm3d()', 'LazyLinear(4)', 'LazyLinear(4, bias=False)', 'LeakyReLU()',
    'LeakyReLU(0.2, inplace=True)', 'Linear(3, 4)', 'Linear(3, 4, bias=False)',
    'LocalResponseNorm(2)', 'LocalResponseNorm(3, alpha=1e-3, beta=0.5, k=2.0)', 'LogSigmoid()',
    'LogSoftmax()', 'LogSoftmax(dim=1)', 'MSELoss()', "MSELoss(reduction='sum')",
    'MarginRankingLoss()', 'MarginRankingLoss(margin=0.5)', 'MaxPool1d(3)',
    'MaxPool1d(3, stride=2, padding=1, dilation=2, return_indices=True, ceil_mode=True)',
    'MaxPool2d(2)', 'MaxPool2d((2, 3), stride=1, padding=(1, 1), dilation=(1, 2), ceil_mode=True)',
    'MaxPool3d(2)', 'MaxPool3d(2, return_indices=True)', 'MaxUnpool1d(2)',
    'MaxUnpool1d(3, stride=2, padding=1)', 'MaxUnpool2d(2)', 'MaxUnpool2d((2, 3), stride=(1, 2))',
    'MaxUnpool3d(2)', 'Mish()', 'Mish(inplace=True)', 'Module()',
    "ModuleDict({'a': nn.ReLU(), 'b': nn.Linear(1, 2)})", 'ModuleList([nn.ReLU(), nn.ReLU()])',
    'MultiLabelMarginLoss()', "MultiLabelMarginLoss(reduction='sum')",
    'MultiLabelSoftMarginLoss()', 'MultiLabelSoftMarginLoss(weight=m.ones(3))',
    'MultiMarginLoss()', "MultiMarginLoss(p=2, margin=0.5, reduction='sum')",
    'MultiheadAttention(8, 2)',
    'MultiheadAttention(8, 2, dropout=0.1, bias=False, add_bias_kv=True, '
     'add_zero_attn=True, kdim=4, vdim=6, batch_first=True)',
    'NLLLoss()', "NLLLoss(ignore_index=2, reduction='sum')", 'PReLU()', 'PReLU(3, init=0.1)',
    'PairwiseDistance()', 'PairwiseDistance(p=1.0, eps=1e-3, keepdim=True)',
    "ParameterDict({'a': nn.Parameter(m.ones(3))})", 'ParameterList([nn.Parameter(m.ones(2, 2))])',
    'PixelShuffle(2)', 'PixelUnshuffle(3)', 'PoissonNLLLoss()',
    "PoissonNLLLoss(log_input=False, full=True, eps=1e-6, reduction='sum')", 'RMSNorm(4)',
    'RMSNorm((3, 4), eps=1e-3, elementwise_affine=False)', 'RNN(3, 4)',
    "RNN(3, 4, num_layers=2, nonlinearity='relu', bias=False, batch_first=True, "
     'dropout=0.5, bidirectional=True)',
    "RNNBase('LSTM', 3, 4)", 'RNNCell(3, 4)', "RNNCell(3, 4, bias=False, nonlinearity='relu')",
    'RReLU()', 'RReLU(0.1, 0.2, inplace=True)', 'ReLU()', 'ReLU(inplace=True)', 'ReLU6()',
    'ReLU6(True)', 'ReflectionPad1d(2)', 'ReflectionPad2d((1, 0, 2, 1))', 'ReflectionPad3d(1)',
    'ReplicationPad1d((1, 2))', 'ReplicationPad2d(2)', 'ReplicationPad3d(1)', 'SELU()',
    'SELU(inplace=True)', 'Sequential(nn.Linear(1, 2), nn.ReLU())', 'Sequential()', 'SiLU()',
    'SiLU(inplace=True)', 'Sigmoid()', 'SmoothL1Loss()', "SmoothL1Loss(reduction='sum', beta=0.5)",
    'SoftMarginLoss()', 'Softmax()', 'Softmax(dim=-1)', 'Softmax2d()', 'Softmin(dim=1)',
    'Softmin()', 'Softplus()', 'Softplus(beta=2.0, threshold=10.0)', 'Softshrink()',
    'Softshrink(0.3)', 'Softsign()', 'SyncBatchNorm(4)',
    'SyncBatchNorm(4, eps=1e-3, momentum=0.2, affine=False, track_running_stats=False)', 'Tanh()',
    'Tanhshrink()', 'Threshold(0.1, 20.0)', 'Threshold(0.1, 20, inplace=True)',
    'Transformer(8, 2, 1, 1, 16)',
    "Transformer(8, 2, 1, 1, 16, dropout=0.0, activation='gelu', batch_first=True, "
     'norm_first=True, bias=False)',
    'TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16), 2)',
    'TransformerDecoderLayer(8, 2, 16)',
    "TransformerDecoderLayer(8, 2, 16, dropout=0.0, activation='gelu', "
     'layer_norm_eps=1e-3, batch_first=True, norm_first=True, bias=False)',
    'TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2, enable_nested_tensor=False)',
    'TransformerEncoderLayer(8, 2, 16)',
    "TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation='gelu', "
     'layer_norm_eps=1e-3, batch_first=True, norm_first=True, bias=False)',
    'TripletMarginLoss()',
    "TripletMarginLoss(margin=2.0, p=1.0, eps=1e-3, swap=True, reduction='sum')",
    'TripletMarginWithDistanceLoss()',
    "TripletMarginWithDistanceLoss(margin=2.0, swap=True, reduction='sum')",
    'Unflatten(1, (2, 3))', 'Unflatten(-1, [2, 3])', 'Unfold(2)',
    'Unfold((2, 3), dilation=2, padding=1, stride=(1, 2))', 'Upsample(scale_factor=2)',
    "Upsample(size=(4, 5), mode='bilinear', align_corners=True)",
    "Upsample(scale_factor=2.0, mode='nearest')",
    "Upsample(scale_factor=(2, 3), mode='bicubic', align_corners=False)",
    "Upsample(size=4, mode='linear')", 'UpsamplingBilinear2d(scale_factor=2)',
    'UpsamplingBilinear2d(size=(3, 4))', 'UpsamplingNearest2d(scale_factor=2)',
    'UpsamplingNearest2d(size=5)', 'ZeroPad1d(2)', 'ZeroPad1d((1, 2))', 'ZeroPad2d(1)',
    'ZeroPad2d((1, 2, 3, 4))', 'ZeroPad3d(1)', 'ZeroPad3d((1, 2, 3, 4, 5, 6))',
    'LinearCrossEntropyLoss(4, 3)', 'DataParallel(nn.Linear(1, 2))', 'RNNCellBase(3, 4, True, 1)',
    'ELU(alpha=1)', 'LeakyReLU(negative_slope=1)', 'Hardtanh(min_val=-2, max_val=2)',
    'Softplus(beta=1, threshold=20)', 'CELU(alpha=1)', 'RReLU(lower=0, upper=1)',
    'Threshold(1, 2)', 'Softmax(0)', 'Softmin(-1)', 'LogSoftmax(dim=None)',
    'PReLU(num_parameters=3)', 'Dropout(p=0)', 'Dropout1d(p=0.5, inplace=True)',
    'AlphaDropout(p=0.0)', 'MaxPool2d(kernel_size=2, stride=None, padding=0)',
    'AvgPool2d(kernel_size=[2, 3])', 'AvgPool1d(kernel_size=[2])', 'AdaptiveAvgPool2d([2, 3])',
    'AdaptiveAvgPool3d((None, 2, None))', 'AdaptiveMaxPool2d(1)',
    'Conv2d(2, 4, [3, 3], stride=[2, 2])',
    "Conv2d(2, 4, 3, padding_mode='zeros', dilation=(1, 1))",
    'Conv1d(2, 4, kernel_size=(3,), padding=(1,))',
    'ConvTranspose2d(2, 4, (3, 2), stride=(2, 1), padding=(1, 0), output_padding=(1, 0), '
     'dilation=(1, 2))',
    'BatchNorm1d(4, affine=True, track_running_stats=True, momentum=0.1)', 'BatchNorm2d(4, eps=1)',
    'GroupNorm(1, 4, eps=1e-5)', 'LayerNorm([4])', 'LayerNorm(4, eps=1)',
    'LocalResponseNorm(2, alpha=1, beta=1, k=1)', 'Fold(4, 2)', 'Flatten(start_dim=1, end_dim=-1)',
    "Upsample(scale_factor=2, mode='bilinear')", 'Upsample(size=(4,))',
    "Upsample(scale_factor=0.5, mode='area')",
    "Upsample(scale_factor=2, mode='trilinear', align_corners=True)",
    "Upsample(size=4, mode='nearest-exact')", 'Upsample()',
    'Upsample(scale_factor=2, recompute_scale_factor=True)', 'PixelShuffle(upscale_factor=2)',
    'Embedding(5, 2, norm_type=2)', 'Embedding(5, 2, scale_grad_by_freq=True)',
    'Embedding(5, 2, norm_type=1.0)', 'EmbeddingBag(5, 2, padding_idx=-1)',
    "EmbeddingBag(5, 2, norm_type=2, mode='sum')", 'EmbeddingBag(5, 2, max_norm=2)',
    'EmbeddingBag.from_pretrained(m.ones(3, 2))',
    "EmbeddingBag.from_pretrained(m.ones(3, 2), freeze=False, max_norm=1.0, mode='max', "
     'padding_idx=1)',
    'Embedding.from_pretrained(m.ones(3, 2), padding_idx=1)',
    'Embedding.from_pretrained(m.ones(3, 2), sparse=True, max_norm=2.0)',
    'MultiheadAttention(8, 2, kdim=8, vdim=8)', 'MultiheadAttention(8, 1, dropout=0.5)',
    "RNN(3, 4, nonlinearity='tanh')", 'LSTM(3, 4, 1, True, False, 0.0, False, 0)',
    'GRU(input_size=3, hidden_size=4)', 'LSTM(3, 4, dropout=0)',
    'RNN(3, 4, bias=True, batch_first=False, dropout=0.25)', 'GRU(3, 4, 3)',
    'CosineSimilarity(dim=2)', 'ChannelShuffle(groups=3)',
    'MaxUnpool2d(2, stride=None, padding=0)', 'MaxUnpool1d(kernel_size=2, stride=1, padding=1)',
    'FractionalMaxPool2d(kernel_size=2, output_ratio=(0.5, 0.5))',
    'FractionalMaxPool3d(2, output_ratio=0.5)', 'LPPool1d(norm_type=2.0, kernel_size=2)',
    "LPPool2d(float('inf'), 2)", 'LPPool3d(3, (1, 2, 2), stride=(1, 2, 2))',
    'ConstantPad2d((1, 2, 3, 4), value=1)', 'CircularPad1d((1, 2))',
    'ZeroPad2d(padding=(1, 2, 3, 4))', 'ReflectionPad1d([1, 2])',
    'ConstantPad1d(padding=1, value=-0.5)', 'ReplicationPad3d((1, 1, 2, 2, 0, 0))',
    'Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(inplace=True), '
     'nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 2))',
    'ModuleDict()',
    "ModuleDict({'x': nn.ModuleList([nn.Linear(1, 1)]), 'y': nn.Sequential(nn.Tanh())})",
    'ParameterList([nn.Parameter(m.ones(3)), nn.Parameter(m.ones(2, 2, dtype=m.float64))])',
    "ParameterDict({'a': nn.Parameter(m.ones(3)), 'b': nn.Parameter(m.ones(2, 2, "
     "dtype=m.float16)), 'c': nn.Parameter(m.ones((), dtype=m.int64), requires_grad=False)})",
    'Sequential(nn.ParameterList([nn.Parameter(m.ones(1))]), '
     "nn.ParameterDict({'w': nn.Parameter(m.ones(2))}))",
    'Unfold(kernel_size=3)', 'CTCLoss(blank=0)', "GELU('tanh')", 'Hardshrink(lambd=1)',
    'Softshrink(lambd=0)',
    'TripletMarginWithDistanceLoss(distance_function=nn.PairwiseDistance(p=1.0))',
    "RNNCell(3, 4, nonlinearity='tanh')", 'GRUCell(3, 4, bias=True)',
    'Bilinear(in1_features=2, in2_features=3, out_features=4)', 'Linear(0, 0)',
    "LinearCrossEntropyLoss(4, 3, out_features=(2,), bias=True, reduction='sum', "
     'ignore_index=1, label_smoothing=0.1)',
    'InstanceNorm2d(4, eps=1e-3, momentum=None)', 'SyncBatchNorm(4, momentum=None)',
    'LazyBatchNorm1d(momentum=None)', 'Hardtanh(min_val=-1.5)', 'ReLU6(inplace=False)',
    'Threshold(threshold=0, value=0.5)',
]


def _make(lib, spec):
    lib.manual_seed(0)
    return eval("nn." + spec, {"nn": lib.nn, "m": lib})


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("spec", SPECS)
def test_module_repr_matches_torch(spec):
    assert repr(_make(ember, spec)).replace("ember.", "torch.") == repr(_make(torch, spec))


def test_sweep_covers_every_shared_module_class():
    covered = {s.split("(")[0].split(".")[0] for s in SPECS}
    shared = {n for n in dir(torch.nn) if isinstance(getattr(torch.nn, n), type)
              and issubclass(getattr(torch.nn, n), torch.nn.Module) and hasattr(ember.nn, n)}
    assert shared - covered == set()
