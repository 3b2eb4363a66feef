"""Small ember.nn models for the export tests (each with an example-input factory). Sizes are kept
small so the whole suite stays fast on two cores."""
import numpy as np

import ember
from ember import nn


def _x(shape, seed=1):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _randomize_bn(model, seed=0):
    """Non-trivial running statistics so eval-mode BatchNorm is really tested."""
    rng = np.random.default_rng(seed)
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            c = m.running_mean.shape[0]
            m.running_mean._data[...] = rng.normal(0, 0.1, c)
            m.running_var._data[...] = rng.uniform(0.5, 1.5, c)
            m.weight._data[...] = rng.uniform(0.5, 1.5, c)
            m.bias._data[...] = rng.uniform(-0.2, 0.2, c)
    return model


class AlexNetish(nn.Module):
    batch_axis = 0

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2),
            nn.Conv2d(16, 24, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(24, 16, 3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, ceil_mode=True))
        self.avgpool = nn.AdaptiveAvgPool2d((2, 2))
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Linear(16 * 4, 32), nn.ReLU(),
                                        nn.Dropout(0.5), nn.Linear(32, 10))

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(ember.flatten(x, 1))

    def example(self, batch=2):
        return _x((batch, 3, 32, 32))


class VGGishBN(nn.Module):
    batch_axis = 0

    def __init__(self):
        super().__init__()
        layers, c = [], 3
        for v in (8, "M", 16, 16, "M"):
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU(True)]
                c = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(16 * 4 * 4, 24), nn.BatchNorm1d(24), nn.ReLU(),
                                        nn.Linear(24, 5))
        _randomize_bn(self)

    def forward(self, x):
        x = self.features(x)
        return self.classifier(x.reshape(x.shape[0], -1))

    def example(self, batch=2):
        return _x((batch, 3, 16, 16))


class Fire(nn.Module):
    def __init__(self, cin, squeeze, e1, e3):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
        self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)

    def forward(self, x):
        x = ember.relu(self.squeeze(x))
        return ember.cat([ember.relu(self.expand1x1(x)), ember.relu(self.expand3x3(x))], 1)


class SqueezeNetish(nn.Module):
    batch_axis = 0

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2), nn.ReLU(True),
                                      nn.MaxPool2d(3, 2, ceil_mode=True), Fire(16, 4, 8, 8),
                                      Fire(16, 4, 8, 8), nn.MaxPool2d(3, 2, ceil_mode=True),
                                      Fire(16, 6, 12, 12))
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(24, 6, 1), nn.ReLU(True),
                                        nn.AdaptiveAvgPool2d((1, 1)))

    def forward(self, x):
        return ember.flatten(self.classifier(self.features(x)), 1)

    def example(self, batch=2):
        return _x((batch, 3, 33, 33))


class SuperResolution(nn.Module):
    """The ONNX tutorial's sub-pixel CNN (PixelShuffle), smaller."""
    batch_axis = 0

    def __init__(self, upscale=3):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, padding=2)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.conv3 = nn.Conv2d(16, upscale ** 2, 3, padding=1)
        self.shuffle = nn.PixelShuffle(upscale)

    def forward(self, x):
        x = ember.relu(self.conv1(x))
        x = ember.relu(self.conv2(x))
        return self.shuffle(self.conv3(x))

    def example(self, batch=1):
        return _x((batch, 1, 12, 12))


class DCGANGenerator(nn.Module):
    batch_axis = 0

    def __init__(self, nz=8, ngf=8):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, 3, 4, 2, 1, bias=False), nn.Tanh())
        _randomize_bn(self)
        self.nz = nz

    def forward(self, z):
        return self.main(z)

    def example(self, batch=2):
        return _x((batch, self.nz, 1, 1))


class DCGANDiscriminator(nn.Module):
    batch_axis = 0

    def __init__(self, ndf=8):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())
        _randomize_bn(self)

    def forward(self, x):
        return self.main(x).reshape(-1, 1).squeeze(1)

    def example(self, batch=2):
        return _x((batch, 3, 16, 16))


class GRUTagger(nn.Module):
    """Embedding -> 2-layer GRU (batch_first) -> linear; returns (logits, final hidden)."""
    batch_axis = 0

    def __init__(self, vocab=30, emb=8, hidden=12):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.gru = nn.GRU(emb, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, 5)
        self.vocab = vocab

    def forward(self, tokens):
        y, h = self.gru(self.emb(tokens))
        return self.out(y), h

    def example(self, batch=2):
        return ember.tensor(np.random.default_rng(2).integers(0, self.vocab, (batch, 6)))


class BiLSTMClassifier(nn.Module):
    """Bidirectional 2-layer LSTM with a given initial state (h0, c0); mean-pooled logits."""
    batch_axis = 1

    def __init__(self, inp=6, hidden=10):
        super().__init__()
        self.lstm = nn.LSTM(inp, hidden, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, 3)
        self.inp, self.hidden = inp, hidden

    def forward(self, x, h0, c0):
        y, (h, c) = self.lstm(x, (h0, c0))
        return self.fc(y.mean(0)), h, c

    def example(self, batch=2):
        rng = np.random.default_rng(4)
        f = lambda *s: ember.tensor(rng.standard_normal(s).astype(np.float32))  # noqa: E731
        return f(5, batch, self.inp), f(4, batch, self.hidden), f(4, batch, self.hidden)


class TinyEncoder(nn.Module):
    """nn.TransformerEncoder (2 post-norm layers, GELU) over embedded tokens."""
    batch_axis = 0

    def __init__(self, vocab=20, d=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 4, dim_feedforward=32, dropout=0.1,
                                           activation="gelu", batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.vocab = vocab

    def forward(self, tokens):
        return self.head(self.norm(self.enc(self.emb(tokens))))

    def example(self, batch=2):
        return ember.tensor(np.random.default_rng(5).integers(0, self.vocab, (batch, 7)))


class GroupNormUpsample(nn.Module):
    """GroupNorm, nearest and bilinear Upsample, asymmetric ZeroPad, avg pooling with ceil."""
    batch_axis = 0

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, groups=1, dilation=1)
        self.gn = nn.GroupNorm(2, 8)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.up2 = nn.Upsample(size=(9, 11), mode="bilinear", align_corners=False)
        self.pad = nn.ZeroPad2d((1, 0, 2, 1))
        self.dw = nn.Conv2d(8, 8, 3, groups=8, dilation=2)
        self.pool = nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False)

    def forward(self, x):
        x = ember.relu(self.gn(self.conv(x)))
        x = self.dw(self.pad(self.up(x)))
        return self.pool(self.up2(x))

    def example(self, batch=2):
        return _x((batch, 3, 6, 6))


NN_MODELS = {"alexnet": AlexNetish, "vgg_bn": VGGishBN, "squeezenet": SqueezeNetish,
             "super_resolution": SuperResolution, "dcgan_g": DCGANGenerator,
             "dcgan_d": DCGANDiscriminator, "gru": GRUTagger, "bilstm": BiLSTMClassifier,
             "encoder": TinyEncoder, "groupnorm_upsample": GroupNormUpsample}


def mlp():
    """A seeded 4-8-3 MLP in eval mode (the API and verification tests)."""
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()


def vi(name, shape, elem_type=None):
    """An ONNX value info (float32 unless ``elem_type``, a TensorProto type, is given)."""
    from onnx import TensorProto, helper
    return helper.make_tensor_value_info(name, TensorProto.FLOAT if elem_type is None
                                         else elem_type, shape)


def tiny_model(nodes, inputs, outputs, inits=(), opset=17):
    """A ModelProto of one graph of ``nodes`` (default domain at ``opset``)."""
    from onnx import helper
    g = helper.make_graph(nodes, "tiny", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
