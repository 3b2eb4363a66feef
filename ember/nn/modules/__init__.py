"""All nn layer classes."""
from ember.nn.modules.activation import (CELU, ELU, GELU, GLU, SELU, Hardshrink, Hardsigmoid,
                                         Hardswish, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax,
                                         Mish, PReLU, ReLU, ReLU6, RReLU, Sigmoid, SiLU, Softmax,
                                         Softmax2d, Softmin, Softplus, Softshrink, Softsign, Tanh,
                                         Tanhshrink, Threshold)
from ember.nn.modules.adaptive import AdaptiveLogSoftmaxWithLoss
from ember.nn.modules.container import (ModuleDict, ModuleList, ParameterDict, ParameterList,
                                        Sequential)
from ember.nn.modules.conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d,
                                   ConvTranspose3d)
from ember.nn.modules.dropout import (AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d,
                                      FeatureAlphaDropout)
from ember.nn.modules.linear import Bilinear, Flatten, Identity, Linear, Unflatten
from ember.nn.modules.lazy import (LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d,
                                   LazyConv2d, LazyConv3d, LazyConvTranspose1d,
                                   LazyConvTranspose2d, LazyConvTranspose3d, LazyInstanceNorm1d,
                                   LazyInstanceNorm2d, LazyInstanceNorm3d, LazyLinear,
                                   LazyModuleMixin)
from ember.nn.modules.loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss,
                                   CrossEntropyLoss, GaussianNLLLoss, HingeEmbeddingLoss,
                                   HuberLoss, KLDivLoss, L1Loss, MarginRankingLoss, MSELoss,
                                   MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss,
                                   PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss,
                                   TripletMarginLoss,
                                   MultiLabelMarginLoss, TripletMarginWithDistanceLoss, CTCLoss,
                                   LinearCrossEntropyLoss)
from ember.nn.modules.channelshuffle import ChannelShuffle
from ember.nn.modules.distance import CosineSimilarity, PairwiseDistance
from ember.nn.modules.fold import Fold, Unfold
from ember.nn.modules.padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d,
                                      ConstantPad2d, ConstantPad3d, ReflectionPad1d,
                                      ReflectionPad2d, ReflectionPad3d, ReplicationPad1d,
                                      ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d,
                                      ZeroPad3d)
from ember.nn.modules.pixelshuffle import PixelShuffle, PixelUnshuffle
from ember.nn.modules.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from ember.nn.modules.module import Module, _guard_device_kwargs
from ember.nn.modules.normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm,
                                            InstanceNorm1d, InstanceNorm2d, LayerNorm,
                                            LocalResponseNorm, RMSNorm, InstanceNorm3d)
from ember.nn.modules.pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d,
                                      AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d,
                                      AvgPool1d, AvgPool2d, AvgPool3d, LPPool1d, LPPool2d,
                                      LPPool3d, MaxPool1d, MaxPool2d, MaxPool3d,
                                      MaxUnpool1d, MaxUnpool2d, MaxUnpool3d, FractionalMaxPool2d,
                                      FractionalMaxPool3d)
from ember.nn.modules.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from ember.nn.modules.sparse import Embedding, EmbeddingBag
from ember.nn.modules.transformer import (MultiheadAttention, Transformer, TransformerDecoder,
                                          TransformerDecoderLayer, TransformerEncoder,
                                          TransformerEncoderLayer)
# torch.nn.modules.<name> paths torch code reaches classes through (re-exports)
from ember.nn.modules import (batchnorm, channelshuffle, distance, flatten, fold,  # noqa: F401,E402
                              instancenorm, lazy, padding, pixelshuffle, upsampling)


def _check_forwards():
    """Every layer's forward raises ember's errors, named by the layer's class unless an op
    already names itself (ember.errors.public). Containers and TransformerEncoder run modules the
    user may have written, whose errors stay theirs."""
    from ember.errors import public
    runs_user_modules = (Module, Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict,
                         TransformerEncoder, TransformerDecoder, Transformer)
    todo, seen = [Module], set()
    while todo:
        cls = todo.pop()
        todo.extend(c for c in cls.__subclasses__() if c not in seen)
        seen.add(cls)
        if cls.__module__.startswith(__name__ + ".") and cls not in runs_user_modules \
                and "forward" in vars(cls):
            cls.forward = public(vars(cls)["forward"], "class", prefix="unnamed")


_check_forwards()
_guard_device_kwargs(__name__)  # device="cuda" raises UnsupportedError naming the layer
