"""The compiler's correctness suite: 10 training steps of ``ember.compile``d whole steps
(zero_grad, forward, loss, backward, optimizer step; ember/compiler/step.py) against the same
steps in eager mode, in float64 (parameters, buffers, gradients and losses within 1e-10) and
float32, on LeNet-5, the MLP, the word-LM LSTM (truncated BPTT, the hidden state detached and
passed to the next call), a GPT block stack with dropout (the compiled step draws eager's random
stream) and a ResNet block net with BatchNorm (running statistics updated), with SGD momentum,
AdamW, an LR scheduler stepped between calls and gradient clipping inside the step."""
import copy
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler.frontend import GraphBreakWarning
from tests.compiler.models import GPT, MLP, LeNet5, ResNetBN, WordLM

STEPS = 10
OPTS = {
    "sgd_momentum": lambda ps: ember.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3),
    "adamw": lambda ps: ember.optim.AdamW(ps, lr=1e-2),
}
SCHEDS = {
    "sgd_momentum": lambda o: ember.optim.lr_scheduler.StepLR(o, 3, 0.5),
    "adamw": lambda o: ember.optim.lr_scheduler.CosineAnnealingLR(o, STEPS),
}


@pytest.fixture(autouse=True)
def _reset():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


# ------------------------------------------------------------------------ models and data
def _mlp_data(g, dtype):
    return (ember.tensor(g.standard_normal((4, 20)), dtype=dtype),
            ember.tensor(g.integers(0, 5, 4)))


def _lenet_data(g, dtype):
    return (ember.tensor(g.standard_normal((2, 1, 28, 28)), dtype=dtype),
            ember.tensor(g.integers(0, 10, 2)))


def _lm_data(g, dtype):   # (seq 5, batch 3) tokens and the next tokens, flattened
    return (ember.tensor(g.integers(0, 11, (5, 3))), ember.tensor(g.integers(0, 11, 15)))


def _gpt_data(g, dtype):
    return (ember.tensor(g.integers(0, 13, (2, 8))), ember.tensor(g.integers(0, 13, (2, 8))))


def _resnet_data(g, dtype):
    return (ember.tensor(g.standard_normal((4, 3, 8, 8)), dtype=dtype),
            ember.tensor(g.integers(0, 10, 4)))


MODELS = {"mlp": (MLP, _mlp_data), "lenet5": (LeNet5, _lenet_data),
          "word_lm": (WordLM, _lm_data), "gpt": (GPT, _gpt_data),
          "resnet_bn": (ResNetBN, _resnet_data)}


def _loss(model, x, y, state):
    """(loss, new recurrent state) of one batch."""
    if isinstance(model, WordLM):
        out, hidden = model(x, state)
        return F.nll_loss(out, y), tuple(h.detach() for h in hidden)
    if isinstance(model, GPT):
        return model(x, y), None
    return F.cross_entropy(model(x), y), None


# clip_grad_norm_'s max_norm per model: above the gradient norm of the third call (the first
# run of the compiled program, the one checked against eager) and below later ones, so a
# clipping the program left out would show after the check (ResNet's third norm is its
# largest: clipped at every call); the AdamW norms of these 10 steps, float64:
# mlp 0.96 0.81 0.74 0.67 0.53 0.74 0.66 1.04 0.91 0.73, lenet5 1.4 2.9 2.9 5.2 17 8.8 4.3 1.2
# 0.84 0.73, word_lm 0.31 0.29 0.23 0.29 0.28 0.30 0.32 0.26 0.36 0.42, gpt 1.15 1.12 1.10 1.00
# 1.34 1.34 1.02 1.30 0.95 1.19, resnet_bn 1.6-1.9
MAX_NORM = {"mlp": 0.9, "lenet5": 4.0, "word_lm": 0.3, "gpt": 1.2, "resnet_bn": 0.5}


def _make_step(model, opt, clip, max_norm=None):
    def step(x, y, state=None):
        opt.zero_grad()
        loss, state = _loss(model, x, y, state)
        loss.backward()
        if clip == "norm":
            nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        elif clip == "value":
            nn.utils.clip_grad_value_(model.parameters(), 0.05)
        opt.step()
        return loss if state is None else (loss, state)
    return step


def _train(name, opt, dtype, clip=None, sched=False, steps=STEPS):
    """Train a model and its deep copy side by side, eagerly and compiled, each step seeded
    alike (dropout draws the same numbers if the compiled step consumes eager's stream); the
    losses must agree at every step. Returns (eager model, compiled model, eager optimizer,
    compiled optimizer, the CompiledFunction)."""
    cls, data = MODELS[name]
    ember.manual_seed(0)
    me = cls().to(dtype)
    mc = copy.deepcopy(me)
    oe, oc = OPTS[opt](me.parameters()), OPTS[opt](mc.parameters())
    se, sc = (SCHEDS[opt](oe), SCHEDS[opt](oc)) if sched else (None, None)
    step_e = _make_step(me, oe, clip, MAX_NORM[name])
    compiled = ember.compile(_make_step(mc, oc, clip, MAX_NORM[name]))
    state_e = state_c = me.init_hidden(3) if isinstance(me, WordLM) else None
    g = np.random.default_rng(0)
    tol = 1e-10 if dtype == ember.float64 else 1e-4
    for i in range(steps):
        x, y = data(g, dtype)
        ember.manual_seed(100 + i)
        out_e = step_e(x, y, state_e) if state_e is not None else step_e(x, y)
        ember.manual_seed(100 + i)
        out_c = compiled(x, y, state_c) if state_c is not None else compiled(x, y)
        if state_e is not None:
            (out_e, state_e), (out_c, state_c) = out_e, out_c
            for a, b in zip(state_e, state_c):
                np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=tol, atol=tol)
        le, lc = out_e.item(), out_c.item()
        assert abs(le - lc) <= tol * max(1.0, abs(le)), (i, le, lc)
        if se is not None:
            se.step()
            sc.step()
    return me, mc, oe, oc, compiled._compiled


def _noise(model, name, opt, dtype):
    """The slice of parameter ``name`` whose gradient is zero in exact arithmetic and rounding
    noise in float32, which Adam's normalisation turns into steps of about lr each: the bias
    of the attention's keys (softmax is invariant to adding q.b_k to a row of scores). Its
    float32 AdamW values are only bounded (by the 10 steps' lr sum), not compared."""
    if not (isinstance(model, GPT) and opt == "adamw" and dtype == ember.float32 and
            name.endswith("attn.bias")):
        return None
    c = model.blocks[0].n_embd
    return slice(c, 2 * c)


def _close(me, mc, oe, oc, dtype, opt=None):
    """Parameters, gradients, buffers (running statistics) and optimizer state agree."""
    tol = dict(rtol=0, atol=1e-10) if dtype == ember.float64 else dict(rtol=1e-4, atol=1e-5)
    for (n, p), (_, q) in zip(me.named_parameters(), mc.named_parameters()):
        a, b = q.numpy(force=True), p.numpy(force=True)
        noise = _noise(me, n, opt, dtype)
        if noise is not None:
            assert np.abs(a[noise] - b[noise]).max() <= 2 * STEPS * oe.defaults["lr"]
            a, b = np.delete(a, noise), np.delete(b, noise)
            np.testing.assert_allclose(a, b, err_msg=n, **tol)
            continue
        np.testing.assert_allclose(a, b, err_msg=n, **tol)
        assert (p.grad is None) == (q.grad is None), n
        if p.grad is not None:
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), err_msg=n, **tol)
        for k, v in oe.state[p].items():
            w = oc.state[q][k]
            if isinstance(v, (int, float)):
                assert v == w, (n, k)
            else:
                np.testing.assert_allclose(w.numpy(), v.numpy(), err_msg=f"{n} {k}", **tol)
    for (n, b), (_, c) in zip(me.named_buffers(), mc.named_buffers()):
        np.testing.assert_allclose(c.numpy(), b.numpy(), err_msg=n, **tol)
    assert oe.param_groups[0]["lr"] == oc.param_groups[0]["lr"]


def _captured(cf):
    """The step ran as a compiled program: no graph break, traced (and not only warmed up)."""
    assert cf.breaks == [], cf.breaks
    assert cf.traces >= 1 and cf._last is not None and cf._last.traced is not None


def _train_captured(name, opt, dtype, breaks="error", noise_opt=None, **kw):
    """_train under warnings.simplefilter(breaks, GraphBreakWarning), then _close (noise_opt
    is _close's opt) and _captured; returns the compiled function."""
    with warnings.catch_warnings():
        warnings.simplefilter(breaks, GraphBreakWarning)
        me, mc, oe, oc, cf = _train(name, opt, dtype, **kw)
    _close(me, mc, oe, oc, dtype, noise_opt)
    _captured(cf)
    return cf


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("opt", list(OPTS))
def test_ten_steps_match_eager_float64(name, opt):
    cf = _train_captured(name, opt, ember.float64)
    assert cf.traces == 1 and cf.recompiles == []


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("opt", list(OPTS))
def test_lr_scheduler_between_steps_matches_eager_without_retrace(name, opt):
    cf = _train_captured(name, opt, ember.float64, sched=True)
    assert cf.traces == 1 and cf.recompiles == []


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("opt", list(OPTS))
def test_ten_steps_match_eager_float32(name, opt):
    _train_captured(name, opt, ember.float32, noise_opt=opt)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("clip", ["norm", "value"])
def test_gradient_clipping_matches_eager(name, clip):
    _train_captured(name, "adamw", ember.float64, breaks="ignore", clip=clip, sched=True)


@pytest.mark.parametrize("whole_step", [True, False])
def test_buffers_a_compiled_function_reaches_are_state_formals(whole_step):
    # batch norm's running statistics and num_batches_tracked, reached through a closure, are
    # buffer formals read and written at every call (they were constants: the step's check
    # ran the program, did not restore them and ran eager again, updating them twice)
    ember.manual_seed(0)
    me = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).double()
    mc = copy.deepcopy(me)

    def make(m):
        o = ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x):
            o.zero_grad()
            loss = m(x).pow(2).sum()
            loss.backward()
            o.step()
            return loss

        def forward(x):
            with ember.no_grad():
                return m(x).sum()
        return step if whole_step else forward
    fe, fc = make(me), ember.compile(make(mc))
    g = np.random.default_rng(0)
    for _ in range(5):
        x = ember.tensor(g.standard_normal((5, 3)))
        assert abs(fe(x).item() - fc(x).item()) <= 1e-10
    for (n, b), (_, c) in zip(me.named_buffers(), mc.named_buffers()):
        np.testing.assert_allclose(c.numpy(), b.numpy(), rtol=0, atol=1e-12, err_msg=n)
    cf = fc._compiled
    assert cf.breaks == [] and cf.traces == 1 and cf.recompiles == []
    roles = {v.name: v.role for v in cf.graph.inputs}
    assert roles["m.1.running_mean"] == roles["m.1.num_batches_tracked"] == "buffer"
