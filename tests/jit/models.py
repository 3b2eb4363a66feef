"""Test models for the JIT, written with functional ember ops and explicit parameter tensors held
by a minimal Module stand-in (``Net``: parameters and buffers by dotted state-dict name).
``NN_MODELS`` (bottom) holds ember.nn versions when ember.nn provides the layers."""
import math

import numpy as np

import ember
from ember.autograd._generated import functions as G


class Net:
    """The part of the Module API the tracer uses: named_parameters/named_buffers, training."""

    def __init__(self, seed=0):
        self._p, self._b = {}, {}
        self.training = True
        self.rng = np.random.default_rng(seed)

    def param(self, name, *shape, scale=None, value=None):
        if value is None:
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
            s = scale if scale is not None else 1.0 / math.sqrt(fan_in)
            value = self.rng.uniform(-s, s, shape)
        t = ember.tensor(np.asarray(value, np.float32), requires_grad=True)
        self._p[name] = t
        return t

    def buffer(self, name, value):
        t = ember.tensor(np.asarray(value))
        self._b[name] = t
        return t

    def named_parameters(self):
        return list(self._p.items())

    def named_buffers(self):
        return list(self._b.items())

    def parameters(self):
        return list(self._p.values())

    def train(self, mode=True):
        self.training = mode
        return self

    def eval(self):
        return self.train(False)

    def __call__(self, *args):
        return self.forward(*args)

    # ---- layers ----------------------------------------------------------------------------
    def linear_params(self, name, i, o):
        return self.param(f"{name}.weight", o, i), self.param(f"{name}.bias", o)

    def bn_params(self, name, c):
        w = self.param(f"{name}.weight", c, value=self.rng.uniform(0.5, 1.5, c))
        b = self.param(f"{name}.bias", c, value=self.rng.uniform(-0.2, 0.2, c))
        rm = self.buffer(f"{name}.running_mean", self.rng.normal(0, 0.1, c).astype(np.float32))
        rv = self.buffer(f"{name}.running_var", self.rng.uniform(0.5, 1.5, c).astype(np.float32))
        return (w, b, rm, rv)

    def bn(self, x, p):
        w, b, rm, rv = p
        return G.batch_norm(x, rm, rv, w, b, self.training, 0.1, 1e-5)


def linear(x, wb):
    return G.linear(x, wb[0], wb[1])


def conv(x, w, b=None, stride=1, padding=0):
    return G.conv2d(x, w, b, stride, padding, 1, 1)


def max_pool(x, k):
    return G.max_pool2d_with_indices(x, k, k, 0, 1, False)[0]


class MLP(Net):
    input_shape = (8, 1, 4, 5)  # flattened to 20 features with x.shape[0]

    def __init__(self, seed=0):
        super().__init__(seed)
        self.l1 = self.linear_params("fc1", 20, 32)
        self.l2 = self.linear_params("fc2", 32, 32)
        self.l3 = self.linear_params("fc3", 32, 10)

    def forward(self, x):
        x = x.reshape(x.shape[0], -1)
        x = linear(x, self.l1).relu()
        x = linear(x, self.l2).relu()
        return linear(x, self.l3)


class LeNetBN(Net):
    input_shape = (4, 1, 20, 20)

    def __init__(self, seed=0):
        super().__init__(seed)
        self.c1 = self.param("conv1.weight", 6, 1, 5, 5)
        self.c1b = self.param("conv1.bias", 6)
        self.bn1 = self.bn_params("bn1", 6)
        self.c2 = self.param("conv2.weight", 16, 6, 3, 3)
        self.c2b = self.param("conv2.bias", 16)
        self.bn2 = self.bn_params("bn2", 16)
        self.f1 = self.linear_params("fc1", 144, 40)
        self.bn3 = self.bn_params("bn3", 40)
        self.f2 = self.linear_params("fc2", 40, 10)

    def forward(self, x):
        x = max_pool(self.bn(conv(x, self.c1, self.c1b), self.bn1).relu(), 2)
        x = max_pool(self.bn(conv(x, self.c2, self.c2b), self.bn2).relu(), 2)
        x = x.reshape(x.size(0), -1)
        x = self.bn(linear(x, self.f1), self.bn3).relu()
        return linear(x, self.f2)


class ResNetish(Net):
    input_shape = (2, 3, 32, 32)

    def __init__(self, seed=0, width=16):
        super().__init__(seed)
        w = width
        self.stem = self.param("stem.weight", w, 3, 3, 3)
        self.stem_bn = self.bn_params("stem_bn", w)
        self.blocks = []
        cin = w
        for i, (cout, stride) in enumerate([(w, 1), (2 * w, 2), (2 * w, 1)]):
            b = {"c1": self.param(f"layer{i}.conv1.weight", cout, cin, 3, 3),
                 "bn1": self.bn_params(f"layer{i}.bn1", cout),
                 "c2": self.param(f"layer{i}.conv2.weight", cout, cout, 3, 3),
                 "bn2": self.bn_params(f"layer{i}.bn2", cout), "stride": stride}
            if stride != 1 or cin != cout:
                b["down"] = self.param(f"layer{i}.downsample.weight", cout, cin, 1, 1)
                b["down_bn"] = self.bn_params(f"layer{i}.downsample_bn", cout)
            self.blocks.append(b)
            cin = cout
        self.fc = self.linear_params("fc", cin, 10)

    def forward(self, x):
        x = self.bn(conv(x, self.stem, padding=1), self.stem_bn).relu()
        for b in self.blocks:
            y = self.bn(conv(x, b["c1"], stride=b["stride"], padding=1), b["bn1"]).relu()
            y = self.bn(conv(y, b["c2"], padding=1), b["bn2"])
            if "down" in b:
                x = self.bn(conv(x, b["down"], stride=b["stride"]), b["down_bn"])
            x = (y + x).relu()
        x = G.adaptive_avg_pool2d(x, (1, 1)).flatten(1)
        return linear(x, self.fc)


class DenseNetish(Net):
    input_shape = (2, 3, 16, 16)

    def __init__(self, seed=0, growth=6, layers=3):
        super().__init__(seed)
        self.stem = self.param("stem.weight", 8, 3, 3, 3)
        self.layers = []
        c = 8
        for i in range(layers):
            self.layers.append((self.bn_params(f"dense.{i}.norm", c),
                                self.param(f"dense.{i}.conv.weight", growth, c, 3, 3)))
            c += growth
        self.trans_bn = self.bn_params("transition.norm", c)
        self.trans = self.param("transition.conv.weight", 8, c, 1, 1)
        self.fc = self.linear_params("classifier", 8, 5)

    def forward(self, x):
        feats = [conv(x, self.stem, padding=1)]
        for bnp, w in self.layers:
            h = ember.cat(feats, 1)
            feats.append(conv(self.bn(h, bnp).relu(), w, padding=1))
        x = conv(self.bn(ember.cat(feats, 1), self.trans_bn).relu(), self.trans)
        x = G.avg_pool2d(x, 2, 2, 0, False, True, None)
        x = x.mean((2, 3))
        return linear(x, self.fc)


class LSTMLM(Net):
    """Word language model: embedding, dropout, 2-layer LSTM (unrolled over the sequence, whose
    length is frozen by the trace), dropout, linear decoder. Input: tokens [T, B]; returns
    (logits [T, B, V], (h, c)) with h and c lists of per-layer states."""

    vocab, emb, hidden, nlayers, T = 50, 16, 24, 2, 5
    input_shape = (5, 3)

    def __init__(self, seed=0, p=0.2):
        super().__init__(seed)
        self.p = p
        self.encoder = self.param("encoder.weight", self.vocab, self.emb, scale=0.1)
        self.rnn = []
        for layer in range(self.nlayers):
            i = self.emb if layer == 0 else self.hidden
            H = self.hidden
            self.rnn.append((self.param(f"rnn.weight_ih_l{layer}", 4 * H, i),
                             self.param(f"rnn.weight_hh_l{layer}", 4 * H, H),
                             self.param(f"rnn.bias_ih_l{layer}", 4 * H),
                             self.param(f"rnn.bias_hh_l{layer}", 4 * H)))
        self.decoder = self.linear_params("decoder", self.hidden, self.vocab)

    def forward(self, tokens):
        T, B = tokens.shape
        x = ember.dropout(G.embedding(tokens, self.encoder), self.p, self.training)
        hs, cs = [], []
        for w_ih, w_hh, b_ih, b_hh in self.rnn:
            h = ember.zeros(B, self.hidden)
            c = ember.zeros(B, self.hidden)
            gx = G.linear(x, w_ih, b_ih + b_hh)      # [T, B, 4H], one matmul for all steps
            outs = []
            for t in range(T):
                h, c, _ = G.lstm_step(gx[t], h, c, w_hh)
                outs.append(h)
            x = ember.dropout(ember.stack(outs, 0), self.p, self.training)
            hs.append(h)
            cs.append(c)
        return linear(x, self.decoder), (hs, cs)

    def example(self, batch):
        return ember.tensor(self.rng.integers(0, self.vocab, (self.T, batch)))


class TransformerLayer(Net):
    """Post-norm encoder layer: multi-head attention (matmul/softmax), layer_norm, GELU FFN."""

    d, heads, ff = 16, 4, 32
    input_shape = (2, 6, 16)

    def __init__(self, seed=0):
        super().__init__(seed)
        d, ff = self.d, self.ff
        self.qkv = self.linear_params("self_attn.in_proj", d, 3 * d)
        self.out = self.linear_params("self_attn.out_proj", d, d)
        self.ln1 = (self.param("norm1.weight", d, value=np.ones(d)),
                    self.param("norm1.bias", d, value=np.zeros(d)))
        self.ff1 = self.linear_params("linear1", d, ff)
        self.ff2 = self.linear_params("linear2", ff, d)
        self.ln2 = (self.param("norm2.weight", d, value=np.ones(d)),
                    self.param("norm2.bias", d, value=np.zeros(d)))

    def forward(self, x):
        B, S, D = x.shape
        H = self.heads
        qkv = linear(x, self.qkv).reshape(B, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // H))
        att = att.softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, S, D)
        x = G.layer_norm(x + linear(y, self.out), (D,), self.ln1[0], self.ln1[1], 1e-5)
        f = linear(G.gelu(linear(x, self.ff1)), self.ff2)
        return G.layer_norm(x + f, (D,), self.ln2[0], self.ln2[1], 1e-5)


MODELS = {"mlp": MLP, "lenet_bn": LeNetBN, "resnet": ResNetish, "densenet": DenseNetish,
          "lstm_lm": LSTMLM, "transformer": TransformerLayer}


def example(model, batch=None, seed=1):
    shape = list(model.input_shape)
    if batch is not None:
        shape[1 if isinstance(model, LSTMLM) else 0] = batch
    if isinstance(model, LSTMLM):
        return model.example(shape[1])
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
