"""Model-level parity: an MLP, a LeNet with BatchNorm, a small ResNet-block net and a 2-layer
LSTM word language model trained a few steps in ember and torch from the same weights on the
same batches (float64): losses and final weights agree within 1e-4 relative."""
import numpy as np
import pytest

import ember
import ember.nn as enn
import ember.optim as eopt
from tests.nn._parity import copy_weights

torch = pytest.importorskip("torch")


def mlp(nn):
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 5))


def lenet_bn(nn):
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 2 * 2, 24), nn.ReLU(), nn.Linear(24, 5))


def resnet(nn):
    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + idt)

    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                         nn.ReLU(), Block(8, 8, 1), Block(8, 16, 2), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(16, 5))


def word_lm(nn):
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(40, 12)
            self.rnn = nn.LSTM(12, 12, 2)
            self.decoder = nn.Linear(12, 40)

        def forward(self, x):
            out, _ = self.rnn(self.encoder(x))
            return self.decoder(out).reshape(-1, 40)

    return LM()


def _data(kind, rng, steps):
    if kind == "mlp":
        return [(rng.standard_normal((8, 20)), rng.integers(0, 5, 8)) for _ in range(steps)]
    if kind == "lenet_bn":
        return [(rng.standard_normal((6, 1, 12, 12)), rng.integers(0, 5, 6))
                for _ in range(steps)]
    if kind == "resnet":
        return [(rng.standard_normal((4, 3, 8, 8)), rng.integers(0, 5, 4)) for _ in range(steps)]
    return [(rng.integers(0, 40, (7, 3)), rng.integers(0, 40, 21)) for _ in range(steps)]


BUILDERS = {"mlp": mlp, "lenet_bn": lenet_bn, "resnet": resnet, "word_lm": word_lm}


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("kind", list(BUILDERS))
def test_training_parity(kind, opt):
    torch.manual_seed(0)
    tm = BUILDERS[kind](torch.nn).double()
    em = BUILDERS[kind](enn).double()
    copy_weights(em, tm)
    if opt == "sgd":
        eo = eopt.SGD(em.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)
        to = torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)
    else:
        eo = eopt.Adam(em.parameters(), lr=1e-2, weight_decay=1e-4)
        to = torch.optim.Adam(tm.parameters(), lr=1e-2, weight_decay=1e-4)
    rng = np.random.default_rng(0)
    for x, y in _data(kind, rng, 5):
        eo.zero_grad()
        to.zero_grad()
        el = enn.functional.cross_entropy(em(ember.tensor(x)), ember.tensor(y))
        tl = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
        el.backward()
        tl.backward()
        eo.step()
        to.step()
        assert el.item() == pytest.approx(tl.item(), rel=1e-6)
    tsd = tm.state_dict()
    for k, v in em.state_dict().items():
        np.testing.assert_allclose(v.numpy(), tsd[k].numpy(), rtol=1e-4, atol=1e-7, err_msg=k)
    em.eval()
    tm.eval()
    x = _data(kind, rng, 1)[0][0]
    with ember.no_grad(), torch.no_grad():
        np.testing.assert_allclose(em(ember.tensor(x)).numpy(), tm(torch.tensor(x)).numpy(),
                                   rtol=1e-4, atol=1e-8)


def test_float32_training_close():
    torch.manual_seed(0)
    tm = lenet_bn(torch.nn)
    em = lenet_bn(enn)
    copy_weights(em, tm)
    eo = eopt.SGD(em.parameters(), lr=0.05, momentum=0.9)
    to = torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(1)
    for x, y in _data("lenet_bn", rng, 3):
        x = x.astype(np.float32)
        eo.zero_grad()
        to.zero_grad()
        el = enn.functional.cross_entropy(em(ember.tensor(x)), ember.tensor(y))
        tl = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
        el.backward()
        tl.backward()
        eo.step()
        to.step()
        assert el.item() == pytest.approx(tl.item(), rel=1e-4)
