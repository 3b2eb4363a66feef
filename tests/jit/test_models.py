"""Every test model: trace, print, parse back, run on new inputs (other batch sizes), compare
with eager; backward through the trace equals eager; optimised graphs are equal numerically."""
import warnings

import numpy as np
import pytest

import ember
import ember.jit as jit
from tests.jit.models import MODELS, LSTMLM, example

RTOL, ATOL = 1e-4, 1e-5


def flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return [out]


def close(a, b, rtol=RTOL, atol=ATOL):
    fa, fb = flat(a), flat(b)
    assert len(fa) == len(fb)
    for x, y in zip(fa, fb):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(x._data, y._data, rtol=rtol, atol=atol)


@pytest.fixture(scope="module", params=sorted(MODELS))
def traced(request):
    model = MODELS[request.param]().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean trace: no TracerWarning
        t = jit.trace(model, (example(model),))
    return model, t


def test_print_parse_roundtrip(traced):
    model, t = traced
    text = str(t.graph)
    g = jit.parse(text, constants=t.graph.constants)
    g.lint()
    assert g == t.graph
    assert str(g) == text
    assert isinstance(t, jit.TracedModule)
    for v in t.graph.inputs[1:]:
        assert v.role in ("param", "buffer") and v.name in dict(model.named_parameters()) | \
            dict(model.named_buffers())


@pytest.mark.parametrize("batch", [None, 1, 5])
def test_new_inputs_match_eager(traced, batch):
    model, t = traced
    x = example(model, batch, seed=7)
    with ember.no_grad():
        close(t(x), model(x))
        close(t.run_interpreter(x), model(x))
        close(t.run_interpreter(x, mode="array"), model(x))


def test_backward_matches_eager(traced):
    model, t = traced
    x = example(model, 3, seed=3)
    if x.dtype == ember.float32:
        x.requires_grad_(True)
    params = model.parameters()

    def grads(fn):
        for p in params:
            p.grad = None
        if x.requires_grad:
            x.grad = None
        flat(fn(x))[0].square().sum().backward()
        out = [p.grad._data.copy() for p in params]
        if x.requires_grad:
            out.append(x.grad._data.copy())
        return out
    for a, b in zip(grads(model), grads(t)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("freeze", [True, False])
def test_optimized_equal(traced, freeze):
    model, t = traced
    opt = jit.optimize(t, freeze_params=freeze)
    opt.graph.lint()
    assert jit.parse(str(opt.graph), opt.graph.constants) == opt.graph
    if type(model).__name__ in ("LeNetBN", "ResNetish"):  # every BN follows a conv/linear
        assert not opt.graph.find_nodes("native_batch_norm")
        assert len(opt.graph.find_nodes("conv2d")) == len(t.graph.find_nodes("conv2d"))
    for batch in (None, 2):
        x = example(model, batch, seed=11)
        with ember.no_grad():
            close(opt(x), model(x))
            close(opt.run_interpreter(x), model(x))


def test_saved_inmemory_roundtrip(traced, tmp_path):
    model, t = traced
    for obj in (t, jit.optimize(t)):
        jit.save(obj, tmp_path / "m.ejit")
        loaded = jit.load(tmp_path / "m.ejit")
        assert loaded.graph == obj.graph
        x = example(model, 2, seed=5)
        with ember.no_grad():
            close(loaded(x), model(x))


def test_train_mode_lenet_running_stats():
    from tests.jit.models import LeNetBN
    eager, traced_m = LeNetBN(seed=3).train(), LeNetBN(seed=3).train()
    t = jit.trace(traced_m, (example(traced_m),))
    # the example run updated running stats once in both; match them up
    for (_, a), (_, b) in zip(eager.named_buffers(), traced_m.named_buffers()):
        a._data[...] = b._data
    assert t.graph.find_nodes("copy_"), "training-mode BN writes running stats in place"
    # same batch size as the trace: batch_norm's unbiased-variance factor n/(n-1) for the
    # running_var update is a Python float computed from the shape, frozen by the trace
    for seed in (1, 2):
        x = example(eager, None, seed=seed)
        close(t(x), eager(x))
        for (_, a), (_, b) in zip(eager.named_buffers(), traced_m.named_buffers()):
            np.testing.assert_allclose(a._data, b._data, rtol=1e-5, atol=1e-6)


def test_train_mode_lenet_backward():
    from tests.jit.models import LeNetBN
    eager, traced_m = LeNetBN(seed=3).train(), LeNetBN(seed=3).train()
    x = example(eager)
    t = jit.trace(traced_m, (x,), check_trace=False)
    ye, yt = eager(x), t(x)
    ye.sum().backward()
    yt.sum().backward()
    for (_, a), (_, b) in zip(eager.named_parameters(), traced_m.named_parameters()):
        np.testing.assert_allclose(a.grad._data, b.grad._data, rtol=1e-4, atol=1e-5)


def test_lstm_dropout_replays_fresh_randomness():
    model = LSTMLM(seed=1).train()
    x = example(model)
    t = jit.trace(model, (x,))
    assert t.graph.find_nodes("native_dropout")
    with ember.no_grad():
        a, b = t(x)[0], t(x)[0]
    assert not np.allclose(a._data, b._data), "the trace replays one fixed dropout mask"
    # same generator state -> same masks as eager
    state = ember.get_rng_state()
    with ember.no_grad():
        e = model(x)
        ember.set_rng_state(state)
        close(t(x), e)
    # nested output structure is rebuilt
    out = t(x)
    assert isinstance(out, tuple) and isinstance(out[1], tuple) and isinstance(out[1][0], list)
    assert len(out[1][0]) == 2


def test_optimizer_step_seen_by_trace():
    from tests.jit.models import MLP
    model = MLP()
    x = example(model)
    t = jit.trace(model, (x,))
    w = dict(model.named_parameters())["fc3.bias"]
    with ember.no_grad():
        before = t(x)._data.copy()
        w.sub_(1.0)
        after = t(x)._data
    np.testing.assert_allclose(after, before - 1.0, rtol=1e-5, atol=1e-5)
