"""The ONNX model zoo's classic image classifiers, written in torch with the zoo models' layers
(what benchmarks/onnx_zoo.py exports with generated weights: this machine has no network, and the
zoo's weights are not what is measured).

  squeezenet1_1  SqueezeNet 1.1 (torchvision's definition: 3x3/2 stem, eight Fire modules,
                 1x1 classifier convolution, global average pool)
  densenet121    DenseNet-121 (torchvision's: growth 32, blocks 6/12/24/16, bottleneck 4x,
                 every layer concatenating all earlier features, transitions halving channels)
  googlenet      Inception v1 as the zoo's BVLC GoogLeNet: convolutions with bias and ReLU, no
                 batch norm, two local response normalisations (exported as ONNX ``LRN``),
                 nine Inception modules with 1x1 / 3x3 / 5x5 / pool branches, 7x7 average pool
ResNet-50 is torchvision's (the stand-in in tests/programs/standins, also used by
benchmarks/networks.py). The models end at the logits (the zoo files' final softmax is left
out, so that comparing outputs between runtimes means something); ``build`` gives them the
stand-in's generated weights (He-normal convolutions, unit batch-norm scales and variances), which
keep activations at a steady scale through every layer.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class _LRN(torch.autograd.Function):
    """``F.local_response_norm`` that exports as one ONNX ``LRN`` node (torch's exporter writes
    its decomposition otherwise, with a shape-dependent ``If``)."""

    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):
        return F.local_response_norm(x, size, alpha, beta, k)

    @staticmethod
    def symbolic(g, x, size, alpha, beta, k):
        return g.op("LRN", x, size_i=size, alpha_f=alpha, beta_f=beta, bias_f=k)


class LRN(nn.Module):
    def __init__(self, size=5, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.args = (size, alpha, beta, k)

    def forward(self, x):
        return _LRN.apply(x, *self.args)


class Fire(nn.Module):
    def __init__(self, cin, squeeze, e1, e3):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
        self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)

    def forward(self, x):
        x = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.expand1x1(x)), F.relu(self.expand3x3(x))], 1)


def squeezenet1_1():
    pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, stride=2), nn.ReLU(), pool(), Fire(64, 16, 64, 64),
        Fire(128, 16, 64, 64), pool(), Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), pool(),
        Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256),
        Fire(512, 64, 256, 256), nn.Dropout(0.5), nn.Conv2d(512, 1000, 1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten())


class DenseLayer(nn.Module):
    def __init__(self, cin, growth=32, bn_size=4):
        super().__init__()
        self.norm1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, bn_size * growth, 1,
                                                                bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, features):
        x = self.conv1(F.relu(self.norm1(torch.cat(features, 1))))
        return self.conv2(F.relu(self.norm2(x)))


class DenseBlock(nn.Module):
    def __init__(self, n, cin, growth=32):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(cin + i * growth, growth) for i in range(n))

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


class DenseNet121(nn.Module):
    def __init__(self, growth=32, blocks=(6, 12, 24, 16), init=64):
        super().__init__()
        mods = [nn.Conv2d(3, init, 7, 2, 3, bias=False), nn.BatchNorm2d(init), nn.ReLU(),
                nn.MaxPool2d(3, 2, 1)]
        c = init
        for i, n in enumerate(blocks):
            mods.append(DenseBlock(n, c, growth))
            c += n * growth
            if i != len(blocks) - 1:
                mods += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                         nn.AvgPool2d(2, 2)]
                c //= 2
        mods += [nn.BatchNorm2d(c), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.features = nn.Sequential(*mods)
        self.classifier = nn.Linear(c, 1000)

    def forward(self, x):
        return self.classifier(self.features(x))


def densenet121():
    return DenseNet121()


class Inception(nn.Module):
    def __init__(self, cin, c1, c3r, c3, c5r, c5, pp):
        super().__init__()
        self.b1 = nn.Conv2d(cin, c1, 1)
        self.b3r, self.b3 = nn.Conv2d(cin, c3r, 1), nn.Conv2d(c3r, c3, 3, padding=1)
        self.b5r, self.b5 = nn.Conv2d(cin, c5r, 1), nn.Conv2d(c5r, c5, 5, padding=2)
        self.pool, self.pp = nn.MaxPool2d(3, 1, 1), nn.Conv2d(cin, pp, 1)

    def forward(self, x):
        return torch.cat([F.relu(self.b1(x)), F.relu(self.b3(F.relu(self.b3r(x)))),
                          F.relu(self.b5(F.relu(self.b5r(x)))), F.relu(self.pp(self.pool(x)))],
                         1)


def googlenet():
    pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
    return nn.Sequential(
        nn.Conv2d(3, 64, 7, 2, 3), nn.ReLU(), pool(), LRN(), nn.Conv2d(64, 64, 1), nn.ReLU(),
        nn.Conv2d(64, 192, 3, padding=1), nn.ReLU(), LRN(), pool(),
        Inception(192, 64, 96, 128, 16, 32, 32), Inception(256, 128, 128, 192, 32, 96, 64),
        pool(), Inception(480, 192, 96, 208, 16, 48, 64), Inception(512, 160, 112, 224, 24, 64, 64),
        Inception(512, 128, 128, 256, 24, 64, 64), Inception(512, 112, 144, 288, 32, 64, 64),
        Inception(528, 256, 160, 320, 32, 128, 128), pool(),
        Inception(832, 256, 160, 320, 32, 128, 128), Inception(832, 384, 192, 384, 48, 128, 128),
        nn.AvgPool2d(7, 1), nn.Flatten(), nn.Dropout(0.4), nn.Linear(1024, 1000))


def _standin():
    """The torchvision stand-in's ``models`` (tests/programs/standins), on torch."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "tests", "programs", "standins"))
    import torchvision.models
    return torchvision.models


def resnet50():
    """torchvision's ResNet-50 (the stand-in's definition)."""
    return _standin().resnet50()


MODELS = {"resnet50": resnet50, "squeezenet1_1": squeezenet1_1, "densenet121": densenet121,
          "googlenet": googlenet}


def build(name):
    """Model ``name`` in eval mode with the stand-in's generated weights for ``name``."""
    model = MODELS[name]()
    generated = _standin()._weights.generated_state_dict
    model.load_state_dict(generated(model, name))
    return model.eval()
