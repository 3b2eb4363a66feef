"""The architectures of the export zoo (tests/onnx/models.py) written in torch, exported by
``torch.onnx.export`` (TorchScript exporter) with a dynamic batch axis, load into ember and match
torch within 1e-5 at two batch sizes."""
import io
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

import ember  # noqa: E402
import ember.onnx  # noqa: E402

tnn = torch.nn


class Fire(tnn.Module):
    def __init__(self, cin, squeeze, e1, e3):
        super().__init__()
        self.squeeze = tnn.Conv2d(cin, squeeze, 1)
        self.expand1x1 = tnn.Conv2d(squeeze, e1, 1)
        self.expand3x3 = tnn.Conv2d(squeeze, e3, 3, padding=1)

    def forward(self, x):
        x = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.expand1x1(x)), torch.relu(self.expand3x3(x))], 1)


class GRUTagger(tnn.Module):
    def __init__(self):
        super().__init__()
        self.emb = tnn.Embedding(30, 8)
        self.gru = tnn.GRU(8, 12, num_layers=2, batch_first=True)
        self.out = tnn.Linear(12, 5)

    def forward(self, tokens):
        y, h = self.gru(self.emb(tokens))
        return self.out(y), h


class BiLSTM(tnn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = tnn.LSTM(6, 10, num_layers=2, bidirectional=True)
        self.fc = tnn.Linear(20, 3)

    def forward(self, x, h0, c0):
        y, (h, c) = self.lstm(x, (h0, c0))
        return self.fc(y.mean(0)), h, c


class Encoder(tnn.Module):
    def __init__(self):
        super().__init__()
        self.emb = tnn.Embedding(20, 16)
        layer = tnn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.1,
                                            activation="gelu", batch_first=True)
        self.enc = tnn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = tnn.LayerNorm(16)
        self.head = tnn.Linear(16, 20)

    def forward(self, tokens):
        return self.head(self.norm(self.enc(self.emb(tokens))))


class GroupNormUpsample(tnn.Module):
    def __init__(self):
        super().__init__()
        self.conv = tnn.Conv2d(3, 8, 3, padding=1)
        self.gn = tnn.GroupNorm(2, 8)
        self.up = tnn.Upsample(scale_factor=2, mode="nearest")
        self.up2 = tnn.Upsample(size=(9, 11), mode="bilinear", align_corners=False)
        self.pad = tnn.ZeroPad2d((1, 0, 2, 1))
        self.dw = tnn.Conv2d(8, 8, 3, groups=8, dilation=2)
        self.pool = tnn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False)

    def forward(self, x):
        x = torch.relu(self.gn(self.conv(x)))
        return self.pool(self.up2(self.dw(self.pad(self.up(x)))))


def _alexnet():
    return tnn.Sequential(
        tnn.Conv2d(3, 16, 5, stride=2, padding=2), tnn.ReLU(inplace=True), tnn.MaxPool2d(3, 2),
        tnn.Conv2d(16, 24, 3, padding=1), tnn.ReLU(inplace=True),
        tnn.MaxPool2d(3, stride=2, ceil_mode=True), tnn.AdaptiveAvgPool2d((2, 2)), tnn.Flatten(),
        tnn.Dropout(0.5), tnn.Linear(24 * 4, 10))


def _vgg_bn():
    return tnn.Sequential(tnn.Conv2d(3, 8, 3, padding=1), tnn.BatchNorm2d(8), tnn.ReLU(True),
                          tnn.MaxPool2d(2, 2), tnn.Conv2d(8, 16, 3, padding=1),
                          tnn.BatchNorm2d(16), tnn.ReLU(True), tnn.MaxPool2d(2, 2), tnn.Flatten(),
                          tnn.Linear(16 * 4 * 4, 24), tnn.BatchNorm1d(24), tnn.ReLU(),
                          tnn.Linear(24, 5))


def _squeezenet():
    return tnn.Sequential(tnn.Conv2d(3, 16, 3, stride=2), tnn.ReLU(True),
                          tnn.MaxPool2d(3, 2, ceil_mode=True), Fire(16, 4, 8, 8),
                          tnn.MaxPool2d(3, 2, ceil_mode=True), Fire(16, 6, 12, 12),
                          tnn.Dropout(0.5), tnn.Conv2d(24, 6, 1), tnn.ReLU(True),
                          tnn.AdaptiveAvgPool2d((1, 1)), tnn.Flatten())


def _super_resolution():
    return tnn.Sequential(tnn.Conv2d(1, 16, 5, padding=2), tnn.ReLU(),
                          tnn.Conv2d(16, 9, 3, padding=1), tnn.PixelShuffle(3))


def _dcgan_g():
    return tnn.Sequential(tnn.ConvTranspose2d(8, 32, 4, 1, 0, bias=False), tnn.BatchNorm2d(32),
                          tnn.ReLU(True), tnn.ConvTranspose2d(32, 16, 4, 2, 1, bias=False),
                          tnn.BatchNorm2d(16), tnn.ReLU(True),
                          tnn.ConvTranspose2d(16, 3, 4, 2, 1, bias=False), tnn.Tanh())


def _dcgan_d():
    return tnn.Sequential(tnn.Conv2d(3, 8, 4, 2, 1, bias=False), tnn.LeakyReLU(0.2, inplace=True),
                          tnn.Conv2d(8, 16, 4, 2, 1, bias=False), tnn.BatchNorm2d(16),
                          tnn.LeakyReLU(0.2, inplace=True), tnn.Conv2d(16, 1, 4, 1, 0, bias=False),
                          tnn.Sigmoid(), tnn.Flatten(0))


def _f(*shape):
    return lambda b, rng: rng.standard_normal(
        tuple(b if s == "B" else s for s in shape)).astype(np.float32)


def _tokens(vocab, length):
    return lambda b, rng: rng.integers(0, vocab, (b, length))


# name: (builder, input makers, batch axis of each input)
ZOO = {
    "alexnet": (_alexnet, [_f("B", 3, 40, 40)], [0]),   # 4x4 into the adaptive 2x2 pool
    "vgg_bn": (_vgg_bn, [_f("B", 3, 16, 16)], [0]),
    "squeezenet": (_squeezenet, [_f("B", 3, 33, 33)], [0]),
    "super_resolution": (_super_resolution, [_f("B", 1, 12, 12)], [0]),
    "dcgan_g": (_dcgan_g, [_f("B", 8, 1, 1)], [0]),
    "dcgan_d": (_dcgan_d, [_f("B", 3, 16, 16)], [0]),
    "gru": (GRUTagger, [_tokens(30, 6)], [0]),
    "bilstm": (BiLSTM, [_f(5, "B", 6), _f(4, "B", 10), _f(4, "B", 10)], [1, 1, 1]),
    "encoder": (Encoder, [_tokens(20, 7)], [0]),
    "groupnorm_upsample": (GroupNormUpsample, [_f("B", 3, 6, 6)], [0]),
}


def _randomize_bn(model, rng):
    for m in model.modules():
        if isinstance(m, (tnn.BatchNorm1d, tnn.BatchNorm2d)):
            c = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.from_numpy(rng.normal(0, 0.1, c).astype(np.float32)))
                m.running_var.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, c).astype(np.float32)))
                m.weight.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, c).astype(np.float32)))
                m.bias.copy_(torch.from_numpy(rng.uniform(-0.2, 0.2, c).astype(np.float32)))


@pytest.mark.parametrize("name", sorted(ZOO))
def test_torch_exported_zoo_round_trips(name):
    build, makers, axes = ZOO[name]
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = build().eval()
    _randomize_bn(model, rng)
    ex = [m(2, rng) for m in makers]
    ins = [f"input{i}" for i in range(len(ex))]
    with torch.no_grad():
        out = model(*[torch.from_numpy(a) for a in ex])
    n_out = len(out) if isinstance(out, tuple) else 1
    outs = [f"output{i}" for i in range(n_out)]
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(model, tuple(torch.from_numpy(a) for a in ex), buf, dynamo=False,
                              input_names=ins, output_names=outs,
                              dynamic_axes={n: {ax: "batch"} for n, ax in zip(ins, axes)})
        except (ImportError, ModuleNotFoundError) as e:   # no TorchScript exporter
            pytest.skip(f"torch.onnx.export unavailable: {e}")
    imported = ember.onnx.load_model(buf.getvalue())
    for batch in (2, 5):
        args = [m(batch, rng) for m in makers]
        with torch.no_grad():
            want = model(*[torch.from_numpy(a) for a in args])
        want = [w.numpy() for w in (want if isinstance(want, tuple) else (want,))]
        with ember.no_grad():
            got = imported(*[ember.tensor(a) for a in args])
        got = [g.numpy() for g in (got if isinstance(got, tuple) else (got,))]
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert g.shape == w.shape, (name, batch, i)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{name} batch {batch} output {i}")
