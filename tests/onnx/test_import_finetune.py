"""Fine-tuning imported models: a CNN and an LSTM exported by torch.onnx.export load into ember,
their gradients match torch's on the same weights, they train, and the trained model re-exports
and runs in onnxruntime with ember's outputs. Subgraph initializers are trainable state."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember import nn  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def _loop_model():
    """h <- h * body.w + x, three times (body.w an initializer of the Loop body)."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["h_in", "body.w"], ["hm"]),
         helper.make_node("Add", ["hm", "x"], ["h_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL),
                 _vi("h_in", [3])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("h_out", [3])],
        [numpy_helper.from_array(np.array([0.5, 2.0, -1.0], np.float32), "body.w")])
    g = helper.make_graph([helper.make_node("Loop", ["n", "", "h0"], ["h"], body=body)], "g",
                          [_vi("x", [3]), _vi("h0", [3])], [_vi("h", [3])],
                          [numpy_helper.from_array(np.array(3, np.int64), "n")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_subgraph_initializers_are_trainable_state():
    mod = ember.onnx.load_model(_loop_model())
    assert set(mod.state_dict()) == {"n", "body.w"} and mod.onnx_names["body.w"] == "body.w"
    w = mod.get_parameter("body.w")
    assert isinstance(w, nn.Parameter)
    x, h0 = ember.tensor([1.0, 1.0, 1.0]), ember.tensor([1.0, 2.0, 3.0])
    mod(x, h0).sum().backward()
    # h3 = w^3 h0 + (w^2 + w + 1) x: dh3/dw = 3 w^2 h0 + (2 w + 1) x
    wn = np.array([0.5, 2.0, -1.0])
    np.testing.assert_allclose(w.grad.numpy(), 3 * wn ** 2 * [1, 2, 3] + 2 * wn + 1, rtol=1e-6)
    # a loaded state dict reaches the body
    mod.load_state_dict({"n": ember.tensor(np.array(3)), "body.w": ember.zeros(3)})
    with ember.no_grad():
        assert mod(x, h0).tolist() == [1.0, 1.0, 1.0]


def _torch_export(model, args, **kw):
    """``torch.onnx.export`` with the TorchScript exporter (the dynamo one needs onnxscript)."""
    import io
    import warnings
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(model, args, buf, dynamo=False, **kw)
        except (TypeError, ImportError, ModuleNotFoundError) as e:   # no TorchScript exporter
            pytest.skip(f"torch.onnx.export unavailable: {e}")
    return onnx.load_from_string(buf.getvalue())


def _ort_matches(imported, args, names, rtol=1e-4, atol=1e-5):
    """Re-export the (trained) imported model with ember.onnx.export; onnxruntime's outputs
    equal ember's."""
    import io
    import warnings
    ort = pytest.importorskip("onnxruntime")
    buf = io.BytesIO()
    with warnings.catch_warnings():   # sizes read from Shape nodes are frozen by the trace
        warnings.simplefilter("ignore", ember.jit.TracerWarning)
        ember.onnx.export(imported, args, buf, input_names=names)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    with ember.no_grad():
        want = imported(*args)
    want = want if isinstance(want, tuple) else (want,)
    got = sess.run(None, {n: a.numpy() for n, a in zip(names, args)})
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=rtol, atol=atol)


def _train_both(imported, tmodel, to_torch_grad, loss_e, loss_t, steps=4, lr=0.2,
                rtol=1e-4, atol=1e-6):
    """SGD on the imported model in ember and on the torch model side by side: at every step
    each ONNX initializer's gradient equals the torch gradient mapped onto it."""
    import torch
    opt_e = ember.optim.SGD(imported.parameters(), lr=lr)
    opt_t = torch.optim.SGD(tmodel.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        opt_e.zero_grad()
        opt_t.zero_grad()
        le, lt = loss_e(), loss_t()
        le.backward()
        lt.backward()
        np.testing.assert_allclose(float(le.item()), float(lt.item()), rtol=1e-5)
        tgrads = {k: p.grad.numpy() for k, p in tmodel.named_parameters()}
        for key, p in imported.named_parameters():
            name = imported.onnx_names[key]
            assert p.grad is not None, name
            np.testing.assert_allclose(p.grad.numpy(), to_torch_grad(name, tgrads), rtol=rtol,
                                       atol=atol, err_msg=f"step {step}: {name}")
        opt_e.step()
        opt_t.step()
        losses.append(float(le.item()))
    assert losses[-1] < losses[0], losses


def test_torch_exported_cnn_fine_tunes_like_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.MaxPool2d(2), torch.nn.Conv2d(6, 8, 3, stride=2),
                               torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(8, 5))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 3, 12, 12)).astype(np.float32)
    y = rng.integers(0, 5, 6)
    proto = _torch_export(tnet, (torch.from_numpy(x),), input_names=["images"],
                          output_names=["logits"], dynamic_axes={"images": {0: "batch"}})
    imported = ember.onnx.load_model(proto)
    # the torch parameter names survive the export: state_dict keys are torch's
    tsd = {k: v.numpy() for k, v in tnet.state_dict().items()}
    assert set(imported.state_dict()) == set(tsd)
    with ember.no_grad():
        np.testing.assert_allclose(imported(ember.tensor(x)).numpy(),
                                   tnet(torch.from_numpy(x)).detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    xe, ye, xt, yt = ember.tensor(x), ember.tensor(y), torch.from_numpy(x), torch.from_numpy(y)
    _train_both(imported, tnet, lambda name, g: g[name],
                lambda: nn.functional.cross_entropy(imported(xe), ye),
                lambda: torch.nn.functional.cross_entropy(tnet(xt), yt))
    for k, v in tnet.state_dict().items():   # the same weights after training
        np.testing.assert_allclose(imported.state_dict()[k].numpy(), v.numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=k)
    _ort_matches(imported, (ember.tensor(x[:2]),), ["images"])


class _TorchLM:
    """Embedding -> 2-layer LSTM -> Linear (a torch word language model), built lazily."""

    @staticmethod
    def make():
        import torch

        class LM(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(20, 6)
                self.lstm = torch.nn.LSTM(6, 8, num_layers=2)
                self.fc = torch.nn.Linear(8, 20)

            def forward(self, tokens):
                y, _ = self.lstm(self.emb(tokens))
                return self.fc(y)
        return LM()


def _lstm_grad_map(proto):
    """ONNX initializer name -> function(torch grads) giving its gradient: W/R/B of each LSTM
    node are torch's weight_ih/weight_hh/(bias_ih, bias_hh) with the gates reordered from
    torch's (i, f, g, o) to ONNX's (i, o, f, c); the decoder MatMul weight is fc.weight^T."""
    H = 8
    perm = np.concatenate([np.arange(k * H, (k + 1) * H) for k in (0, 3, 1, 2)])
    m = {"emb.weight": lambda g: g["emb.weight"], "fc.bias": lambda g: g["fc.bias"]}
    layer = 0
    for n in proto.graph.node:
        if n.op_type == "LSTM":
            sfx = f"_l{layer}"
            m[n.input[1]] = lambda g, s=sfx: g[f"lstm.weight_ih{s}"][perm][None]
            m[n.input[2]] = lambda g, s=sfx: g[f"lstm.weight_hh{s}"][perm][None]
            m[n.input[3]] = lambda g, s=sfx: np.concatenate(
                [g[f"lstm.bias_ih{s}"][perm], g[f"lstm.bias_hh{s}"][perm]])[None]
            layer += 1
        elif n.op_type == "MatMul":
            m[n.input[1]] = lambda g: g["fc.weight"].T
    assert layer == 2
    return m


def test_torch_exported_lstm_fine_tunes_like_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tlm = _TorchLM.make()
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 20, (7, 3))
    target = rng.integers(0, 20, (7, 3))
    proto = _torch_export(tlm, (torch.from_numpy(tokens),), input_names=["tokens"],
                          output_names=["logits"], dynamic_axes={"tokens": {0: "T", 1: "B"}})
    assert [n.op_type for n in proto.graph.node].count("LSTM") == 2
    imported = ember.onnx.load_model(proto)
    gmap = _lstm_grad_map(proto)
    assert set(imported.onnx_names.values()) == set(gmap)
    with ember.no_grad():   # any sequence length and batch (dynamic axes)
        other = rng.integers(0, 20, (4, 5))
        np.testing.assert_allclose(imported(ember.tensor(other)).numpy(),
                                   tlm(torch.from_numpy(other)).detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    te, tt = ember.tensor(tokens), torch.from_numpy(tokens)
    ye, yt = ember.tensor(target.reshape(-1)), torch.from_numpy(target.reshape(-1))
    _train_both(imported, tlm, lambda name, g: gmap[name](g),
                lambda: nn.functional.cross_entropy(imported(te).reshape(-1, 20), ye),
                lambda: torch.nn.functional.cross_entropy(tlm(tt).reshape(-1, 20), yt),
                lr=1.0, atol=2e-6)
    _ort_matches(imported, (te,), ["tokens"])
