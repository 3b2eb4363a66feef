"""The training steps whose kernels the install-time kernel cache keeps (``ember prebuild``).

``ember.kernels.runtime.prebuilt.build`` runs this module in a child process (``python -m
ember.prebuild``) with ``EMBER_JIT_COMPILE=sync`` and the Numba and ember caches pointed into
the prebuilt directory: every kernel these steps meet is compiled there. The child prints the
directory its generated pointwise kernels went to (``diskcache.cache_dir()``) as its last line.
The steps are small versions of what a new user runs first: a LeNet-style CNN, an MLP, the
layers of an ImageNet classifier (trained, and run for inference eager and traced + optimised),
a GPT-style transformer with both attention forms, all float32.
"""
import math
import sys

import numpy as np

import ember
import ember.nn.functional as F
from ember import jit, nn, optim
from ember.kernels.runtime import diskcache

__all__ = ["workloads"]


def workloads():
    """Run the training steps whose kernels the build keeps, on the default thread count and on
    one thread (generated pointwise kernels have a serial and a parallel variant)."""
    default = ember.get_num_threads()
    for n in dict.fromkeys((default, 1)):
        ember.set_num_threads(n)
        _steps()
    ember.set_num_threads(default)


def _steps():
    rng = np.random.default_rng(0)

    def train(model, opt, x, y, steps=3, loss_fn=F.cross_entropy):
        for _ in range(steps):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()

    for batch in (64, 1):
        ember.manual_seed(0)
        cnn = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                            nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                            nn.Linear(84, 10))
        x = ember.tensor(rng.standard_normal((batch, 1, 28, 28)).astype(np.float32))
        y = ember.tensor(rng.integers(0, 10, batch))
        train(cnn, optim.SGD(cnn.parameters(), lr=0.01, momentum=0.9), x, y)
        with ember.no_grad():
            cnn.eval()
            cnn(x)
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                        nn.Linear(512, 10))
    x = ember.tensor(rng.standard_normal((128, 784)).astype(np.float32))
    y = ember.tensor(rng.integers(0, 10, 128))
    train(mlp, optim.Adam(mlp.parameters(), lr=1e-3), x, y)
    _imagenet_cnn_steps(rng)
    for attn in ("manual", "sdpa"):
        _transformer_steps(attn, rng)


def _imagenet_cnn_steps(rng):
    """The layers of torchvision's classifiers at a small size: a 7x7/2 stem, BatchNorm, a
    3x3/2 max pool with padding, basic blocks (a 3x3 of 64 channels over 24x24, which takes
    Winograd; a strided block with a 1x1/2 downsample), a global average pool. Trained at batch
    2; inference at batch 1, eager and traced + optimised."""

    class Block(nn.Module):
        def __init__(self, c, k, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(c, k, 3, stride, 1, bias=False)
            self.conv2 = nn.Conv2d(k, k, 3, 1, 1, bias=False)
            self.bn1, self.bn2 = nn.BatchNorm2d(k), nn.BatchNorm2d(k)
            self.down = nn.Sequential(nn.Conv2d(c, k, 1, stride, bias=False), nn.BatchNorm2d(k))

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            return F.relu(self.bn2(self.conv2(y)) + self.down(x))

    ember.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                        nn.MaxPool2d(3, 2, 1), Block(16, 64, 1), Block(64, 64, 2),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    x = ember.tensor(rng.standard_normal((2, 3, 96, 96)).astype(np.float32))
    y = ember.tensor(rng.integers(0, 10, 2))
    opt = optim.SGD(cnn.parameters(), lr=0.01, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(cnn(x), y).backward()
        opt.step()
    cnn.eval()
    with ember.no_grad():
        one = x[:1]
        cnn(one)
        fast = jit.optimize(jit.trace(cnn, (one,)))
        for _ in range(3):
            fast(one)


def _transformer_steps(attn, rng, n_layer=2, width=128, heads=4, block=64, vocab=65, batch=16):

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.attn, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.fc, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
            self.register_buffer("bias", ember.tril(ember.ones(block, block)).view(
                1, 1, block, block))

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.attn(self.ln1(x)).split(width, dim=2)
            q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
            if attn == "sdpa":
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
                a = a.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                y = F.softmax(a, dim=-1) @ v
            x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.fc2(F.gelu(self.fc(self.ln2(x))))

    ember.manual_seed(0)
    wte, wpe = nn.Embedding(vocab, width), nn.Embedding(block, width)
    blocks = nn.ModuleList([Block() for _ in range(n_layer)])
    ln_f, head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)
    params = [p for m in (wte, wpe, blocks, ln_f, head) for p in m.parameters()]
    opt = optim.AdamW(params, lr=3e-4)
    idx = ember.tensor(rng.integers(0, vocab, (batch, block)))
    tgt = ember.tensor(rng.integers(0, vocab, (batch, block)))
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        x = wte(idx) + wpe(ember.arange(block))
        for b in blocks:
            x = b(x)
        loss = F.cross_entropy(head(ln_f(x)).view(-1, vocab), tgt.view(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()


def main():
    workloads()
    print(diskcache.cache_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main())
