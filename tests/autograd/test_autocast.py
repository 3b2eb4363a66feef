"""Autocast's cast rule (ember/autograd/autocast.py) against torch 2.13's CPU autocast: output
dtypes of listed and unlisted ops (float64 untouched), nothing cast outside a region, gradients
reaching float32 parameters in float32 through the recorded casts, backward inside a region,
and the per-region cache of cast leaves."""
import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as EF


def _ops(m, F):
    g = m.Generator().manual_seed(0)
    r = lambda *s: m.randn(*s, generator=g)   # noqa: E731
    x, w, lw, b = r(2, 3, 8, 8), r(4, 3, 3, 3), r(5, 3), r(5)
    a, t, tgt = r(2, 3), r(2, 5), m.tensor([0, 1])
    p, q, bb = m.rand(2, 5, generator=g), r(2, 2, 4, 8), r(2, 3, 3)
    return {
        "linear": lambda: F.linear(a, lw, b),
        "conv1d": lambda: F.conv1d(x[:, :, 0], w[:, :, 0]),
        "conv2d": lambda: F.conv2d(x, w),
        "conv3d": lambda: F.conv3d(r(1, 2, 3, 4, 4), r(2, 2, 1, 1, 1)),
        "conv_transpose1d": lambda: F.conv_transpose1d(x[0], r(8, 2, 3)),
        "conv_transpose2d": lambda: F.conv_transpose2d(x, w.transpose(0, 1)),
        "matmul @": lambda: a @ lw.T, "matmul": lambda: m.matmul(a, lw.T),
        "mm": lambda: m.mm(a, lw.T), "bmm": lambda: m.bmm(bb, bb),
        "addmm": lambda: m.addmm(t, a, lw.T), "baddbmm": lambda: m.baddbmm(bb, bb, bb),
        "addbmm": lambda: m.addbmm(bb[0], bb, bb), "prelu": lambda: F.prelu(t, m.ones(1)),
        "sdpa": lambda: F.scaled_dot_product_attention(q, q, q),
        "linalg.vecdot": lambda: m.linalg.vecdot(t, t),
        "einsum of two": lambda: m.einsum("ij,kj->ik", a, lw),
        "einsum batched": lambda: m.einsum("bij,bkj->bik", bb, bb),
        "einsum of one": lambda: m.einsum("ij->ji", a),
        "mse_loss": lambda: F.mse_loss(t, t), "l1_loss": lambda: F.l1_loss(t, t),
        "cross_entropy": lambda: F.cross_entropy(t, tgt), "nll_loss": lambda: F.nll_loss(t, tgt),
        "binary_cross_entropy": lambda: F.binary_cross_entropy(p, p),
        "bce_with_logits": lambda: F.binary_cross_entropy_with_logits(t, p),
        "smooth_l1_loss": lambda: F.smooth_l1_loss(t, t), "huber_loss": lambda: F.huber_loss(t, t),
        "kl_div": lambda: F.kl_div(t, p, reduction="batchmean"),
        "softmax": lambda: F.softmax(t, 1), "log_softmax": lambda: F.log_softmax(t, 1),
        "layer_norm": lambda: F.layer_norm(t, (5,)), "relu": lambda: F.relu(t),
        "gelu": lambda: F.gelu(t), "sum": lambda: t.sum(), "mean": lambda: t.mean(),
        "prod": lambda: t.prod(), "add": lambda: t + t,
        "linear then add bias": lambda: F.linear(a, lw) + b,
        "cdist": lambda: m.cdist(t, t), "trace": lambda: m.trace(lw),
        "inverse": lambda: m.inverse(m.eye(3) + 0.1 * m.ones(3, 3)),
        "linalg.inv": lambda: m.linalg.inv(m.eye(3) + 0.1 * m.ones(3, 3)),
        "max_pool2d": lambda: F.max_pool2d(x, 2),
        "avg_pool3d": lambda: F.avg_pool3d(r(1, 2, 4, 4, 4), 2),
        "batch_norm": lambda: F.batch_norm(x, None, None, training=True),
        "float64 linear": lambda: F.linear(a.double(), lw.double()),
        "float64 mse_loss": lambda: F.mse_loss(t.double(), t.double()),
        "embedding": lambda: F.embedding(tgt, lw),
        "bf16 mse_loss": lambda: F.mse_loss(t.bfloat16(), t.bfloat16()),
    }


def _dtypes(m, F, dtype):
    out = {}
    for name, fn in _ops(m, F).items():
        if m is ember and dtype is ember.float16 and name in _NO_FLOAT16:
            continue
        with m.autocast("cpu", dtype=dtype):
            out[name] = str(fn().dtype).split(".")[-1]
    return out


# ember's convolution kernels take float32/float64 only (docs/amp.md): float16 convolutions
_NO_FLOAT16 = {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d"}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_output_dtypes_under_autocast_match_torch(dtype):
    t = _dtypes(torch, torch.nn.functional, getattr(torch, dtype))
    e = _dtypes(ember, EF, getattr(ember, dtype))
    assert e == {k: v for k, v in t.items() if k in e}
    assert t["linear"] == dtype and t["mse_loss"] == "float32"   # the lists are exercised


def test_outside_autocast_nothing_is_cast():
    ops = _ops(ember, EF)
    for name in ("linear", "matmul", "mse_loss", "conv2d"):
        assert ops[name]().dtype == ember.float32


def test_gradients_reach_float32_parameters_in_float32_as_torch():
    tw = torch.randn(4, 3, dtype=torch.float32)
    grads = {}
    for m in (torch, ember):
        lin = m.nn.Linear(3, 4)
        with m.no_grad():
            lin.weight.copy_(m.tensor(tw.numpy()))
            lin.bias.zero_()
        x = m.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
        with m.autocast("cpu"):
            y = lin(x)
            assert y.dtype == m.bfloat16
            loss = m.nn.functional.mse_loss(y, m.zeros(2, 4))
            assert loss.dtype == m.float32
        loss.backward()
        assert lin.weight.grad.dtype == m.float32 and lin.bias.grad.dtype == m.float32
        grads[m.__name__] = lin.weight.grad.numpy()
    np.testing.assert_allclose(grads["ember"], grads["torch"], rtol=2e-2, atol=2e-3)


def test_backward_inside_region_keeps_forward_dtypes():
    w = ember.randn(3, 3, requires_grad=True)
    with ember.autocast("cpu"):
        loss = (ember.ones(2, 3) @ w).float().sum()
        loss.backward()
    assert w.grad.dtype == ember.float32


def test_leaf_cast_is_cached_within_a_region_and_cleared_after():
    from ember.autograd import autocast as rule
    w = ember.randn(3, 3, requires_grad=True)
    with ember.autocast("cpu"):
        (ember.ones(2, 3) @ w).float().sum().backward()
        n = len(rule._cache())
        ember.ones(2, 3) @ w
        assert len(rule._cache()) == n == 1
    assert len(rule._cache()) == 0
    assert ember.is_autocast_cache_enabled()


@pytest.mark.parametrize("kw", [{}, {"bidirectional": True, "num_layers": 2},
                                {"proj_size": 2}], ids=["plain", "bidirectional", "proj"])
def test_lstm_under_autocast_gives_torchs_dtypes_and_values(kw):
    """torch's CPU LSTM layer (mkldnn_rnn_layer) is on the lower-precision list: output and
    states bfloat16 (the projected LSTM's cell state float32); GRU stays float32."""
    import numpy as np
    x = np.random.default_rng(0).standard_normal((2, 5, 4)).astype(np.float32)
    seen = []
    for m in (torch, ember):
        m.manual_seed(0)
        lstm = m.nn.LSTM(4, 3, batch_first=True, **kw)
        with m.no_grad():
            for i, p in enumerate(lstm.parameters()):
                p.copy_(m.tensor(np.linspace(-0.5, 0.5, p.numel(), dtype=np.float32)
                                 .reshape(p.shape) * (1 + i % 3)))
        with m.autocast("cpu", dtype=m.bfloat16):
            out, (h, c) = lstm(m.tensor(x))
        seen.append(([str(v.dtype).split(".")[-1] for v in (out, h, c)],
                     out.detach().float().numpy()))
    assert seen[1][0] == seen[0][0]
    np.testing.assert_allclose(seen[1][1], seen[0][1], atol=3e-2)
