"""The joint-graph rewrites of a captured step (ember/compiler/joint_passes.py): each one's
pattern gone from the step program (the traced graph keeping it) and the step matching eager
(float64 to 1e-10 over 10 steps; float32 close)."""
import copy
import math
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler.frontend import GraphBreakWarning
from ember.compiler.step import WholeStep
from tests.compiler.models import LeNet5Flatten as LeNet5, MLP
from tests.compiler.test_step import _close, _data, _train


def _offset_steps(shape, dtype, lr, loss_fn):
    """Two zero parameters ``w`` of ``shape`` and, for each, an SGD(lr) step ``step(t)`` on
    ``loss_fn(t + w)``: ([w, w'], [step, step'])."""
    params, steps = [], []
    for _ in range(2):
        w = nn.Parameter(ember.zeros(shape, dtype=dtype))
        o = ember.optim.SGD([w], lr=lr)

        def step(t, w=w, o=o):
            o.zero_grad()
            loss = loss_fn(t + w)
            loss.backward()
            o.step()
            return loss
        steps.append(step)
        params.append(w)
    return params, steps


def _twin_steps(model, make_opt, loss_fn):
    """``model``'s deep copy and, for each of the two, a training step ``step(*batch)``:
    zero_grad, ``loss_fn(m, *batch)``, backward, the optimizer's step (returns the loss)."""
    twin = copy.deepcopy(model)
    steps = []
    for m in (model, twin):
        o = make_opt(m.parameters())

        def step(*batch, m=m, o=o):
            o.zero_grad()
            loss = loss_fn(m, *batch)
            loss.backward()
            o.step()
            return loss
        steps.append(step)
    return twin, steps


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32])
@pytest.mark.parametrize("logits", ["2d", "3d_weighted_ignore"])
def test_cross_entropy_backward_is_one_op_in_the_step(dtype, logits):
    """The traced backward of the cross entropy is one ``cross_entropy_loss_backward`` (eager's
    kernel, reading the forward's log-sum-exp), not the formula's log_softmax, nll_loss_backward,
    sum and products; the step matches eager (float64 to 1e-10), also for (N, C, L) logits with
    class weights and ignored positions."""
    ember.manual_seed(0)
    if logits == "2d":
        make = lambda: MLP()  # noqa: E731
        kw = {}
    else:
        make = lambda: nn.Conv1d(3, 5, 3, padding=1)  # noqa: E731
        kw = dict(weight=ember.tensor(np.array([1.0, 2.0, 0.5, 1.5, 3.0]), dtype=dtype),
                  ignore_index=-1)
    model = make().to(dtype)
    twin, steps = _twin_steps(model, lambda ps: ember.optim.SGD(ps, lr=0.05, momentum=0.9),
                              lambda m, x, y: F.cross_entropy(m(x), y, **kw))
    compiled = ember.compile(steps[1])
    g = np.random.default_rng(1)
    for i in range(10):
        if logits == "2d":
            x, y = _data(model, 6, i, dtype)
        else:
            x = ember.tensor(g.standard_normal((4, 3, 7)), dtype=dtype)
            y = ember.tensor(np.where(g.random((4, 7)) < 0.2, -1, g.integers(0, 5, (4, 7))))
        le, lc = steps[0](x, y), compiled(x, y)
        assert abs(le.item() - lc.item()) <= (1e-10 if dtype == ember.float64 else 1e-5)
    _close(model, twin, dtype)
    cf = compiled._compiled
    assert (cf.traces, cf.breaks) == (1, []) and isinstance(cf._last.traced, WholeStep)
    kinds = _kinds(cf._last.traced.graph)
    assert "cross_entropy_loss" in kinds and kinds.count("cross_entropy_loss_backward") == 1
    assert not {"log_softmax", "nll_loss_backward", "exp"} & set(kinds)
    assert "cross_entropy_loss_backward" in _kinds(cf._last.traced._traced.graph)


def _kinds(graph):
    return [n.kind for n in graph.nodes] + \
        [n.kind for grp in graph.find_nodes("fusion_group") for n in grp.attrs["graph"].nodes]


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_reads_the_forwards_output(dtype, approximate):
    """Exact GELU's backward in the step program takes Phi(x) as gelu(x) / x (0.5 where |x| is
    tiny) instead of an erf: no erf left; the gradient matches eager's and torch's at 0,
    +-1e-35, 1e-20, large and very negative inputs (float64 to 1e-12, float32 to 2 ulp-ish);
    the tanh form keeps its formula."""
    torch = pytest.importorskip("torch")
    x = np.array([0.0, 1e-35, -1e-35, 1e-20, -1e-7, 0.3, -0.7, 3.0, 9.0, -5.0, -20.0, 1.5])
    params, steps = _offset_steps((x.size,), dtype, 0.1,
                                  lambda v: (F.gelu(v, approximate=approximate) * 1.5).sum())
    compiled = ember.compile(steps[1])
    t = ember.tensor(x, dtype=dtype)
    tt = torch.tensor(x, dtype=torch.float64 if dtype == ember.float64 else torch.float32,
                      requires_grad=True)
    (torch.nn.functional.gelu(tt, approximate=approximate) * 1.5).sum().backward()
    # float32: Phi(x) = 0.5 (1 + erf) cancels below x = -3 in the forward and in eager's
    # backward alike (an ulp of 1 is 1.2e-7), so absolute there
    tol = dict(rtol=1e-12, atol=1e-14) if dtype == ember.float64 else dict(rtol=2e-6, atol=1e-7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):   # the second call runs the program (the first traces and checks)
            params[0].data.zero_()
            params[1].data.zero_()
            steps[0](t)
            compiled(t)
            np.testing.assert_allclose(params[1].grad.numpy(), params[0].grad.numpy(), **tol)
            np.testing.assert_allclose(params[1].grad.numpy(), tt.grad.numpy(), **tol)
    cf = compiled._compiled
    assert cf.breaks == [] and isinstance(cf._last.traced, WholeStep)
    kinds = _kinds(cf._last.traced.graph)
    assert "gelu" in kinds and "erf" not in kinds
    assert ("tanh" in kinds) == (approximate == "tanh") and ("div" in kinds) == (approximate == "none")


class _MaskedAttention(nn.Module):
    """One head of causal self-attention written out: scores * scale, masked_fill, softmax."""

    def __init__(self, width=8, block=6):
        super().__init__()
        self.q = nn.Linear(width, width)
        self.k = nn.Linear(width, width)
        self.v = nn.Linear(width, width)
        self.register_buffer("bias", ember.tril(ember.ones(block, block)).view(1, block, block))

    def forward(self, x):
        t = x.shape[1]
        a = (self.q(x) @ self.k(x).transpose(-2, -1)) * (1.0 / math.sqrt(x.shape[-1]))
        a = a.masked_fill(self.bias[:, :t, :t] == 0, float("-inf"))
        return F.softmax(a, dim=-1) @ self.v(x)


def _attention_steps_match(make, dtype, seed):
    """10 AdamW steps of ``make()`` on (3, 6, 8) inputs, eager and through ``ember.compile``:
    the losses and parameters match (float64 to 1e-10) and the step is one captured program;
    returns the compiled function's state."""
    ember.manual_seed(0)
    model = make().to(dtype)
    twin, steps = _twin_steps(model, lambda ps: ember.optim.AdamW(ps, lr=1e-2),
                              lambda m, x: (m(x) ** 2).mean())
    compiled = ember.compile(steps[1])
    g = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphBreakWarning)
        for _ in range(10):
            x = ember.tensor(g.standard_normal((3, 6, 8)), dtype=dtype)
            le, lc = steps[0](x), compiled(x)
            assert abs(le.item() - lc.item()) <= (1e-10 if dtype == ember.float64 else 1e-5)
    _close(model, twin, dtype)
    cf = compiled._compiled
    assert cf.breaks == [] and isinstance(cf._last.traced, WholeStep)
    return cf


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32])
def test_attention_scale_mask_softmax_is_one_op_in_the_step(dtype):
    """The step program runs the attention's scale, masked_fill and softmax as one
    ``scaled_masked_softmax`` and their backward as one ``scaled_masked_softmax_backward`` (the
    traced backward's ``softmax_backward``, the select and the product; no sum of the formula's
    product left); 10 AdamW steps match eager (float64 to 1e-10)."""
    cf = _attention_steps_match(_MaskedAttention, dtype, seed=4)
    kinds = _kinds(cf._last.traced.graph)
    assert kinds.count("scaled_masked_softmax") == 1
    assert "softmax" not in kinds and "masked_fill" not in kinds
    assert kinds.count("scaled_masked_softmax_backward") == 1
    assert "softmax_backward" not in kinds and "where" not in kinds
    assert "softmax_backward" in _kinds(cf._last.traced._traced.graph)
    assert [n.attrs["dim"] for n in cf._last.traced.graph.find_nodes("sum")
            if n.args[0].shape == (3, 6, 6)] == []
    # the traced joint graph has the three ops: the step program rewrote them
    assert "masked_fill" in _kinds(cf._last.traced._traced.graph)


class _FusedQKV(nn.Module):
    """Causal self-attention of ``heads`` heads with one (width -> 3 width) projection split
    into q, k, v, as nanoGPT writes it."""

    def __init__(self, width=8, heads=2, block=6):
        super().__init__()
        self.heads = heads
        self.attn = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.register_buffer("bias", ember.tril(ember.ones(block, block)).view(1, 1, block,
                                                                               block))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2)
                   for t in self.attn(x).split(C, dim=2))
        a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        a = a.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        y = (F.softmax(a, dim=-1) @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32])
def test_split_heads_gradients_merge_in_one_op(dtype):
    """The q, k, v gradients of a fused projection, each transposed back and reshaped, then
    concatenated, are one ``merge_heads`` in the step program (no cat left); 10 AdamW steps
    match eager (float64 to 1e-10)."""
    cf = _attention_steps_match(_FusedQKV, dtype, seed=5)
    kinds = _kinds(cf._last.traced.graph)
    assert kinds.count("merge_heads") == 1 and "cat" not in kinds
    assert "cat" in _kinds(cf._last.traced._traced.graph)


def test_merge_heads_equals_the_cat_of_transposed_heads():
    """``merge_heads`` against the ops it replaces, on strided heads, bit for bit; heads of
    different shapes are refused naming them."""
    r = np.random.default_rng(6)
    heads = [r.standard_normal((2, 3, 4, 5)).astype(np.float32),
             r.standard_normal((2, 3, 5, 4)).astype(np.float32).transpose(0, 1, 3, 2),
             r.standard_normal((2, 4, 3, 5)).astype(np.float32).transpose(0, 2, 1, 3)]
    f = ember.autograd._generated.functions.merge_heads
    got = f([ember.tensor(h) for h in heads]).numpy()
    want = np.concatenate([h.transpose(0, 2, 1, 3).reshape(2, 4, 15) for h in heads], 2)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(Exception, match=r"merge_heads.*\[2, 3, 4, 5\].*\[2, 3, 4, 6\]"):
        f([ember.zeros(2, 3, 4, 5), ember.zeros(2, 3, 4, 6)])


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32])
def test_conv_bias_gradient_sums_run_as_a_gemv(dtype):
    """A convolution's bias gradient, sum(grad, dim=(0, 2, 3)), is a GEMV of the (N*C, H*W)
    rows with ones and a sum over N in the step program; LeNet-5's step matches eager (float64
    to 1e-10), also across batch sizes (the reshapes hold no batch size)."""
    me, mc, *_, cf = _train(LeNet5, "sgd_momentum", dtype, batches=[8, 8, 16, 16, 5, 5])
    _close(me, mc, dtype)
    assert cf.breaks == [] and isinstance(cf._last.traced, WholeStep)
    g = cf._last.traced.graph
    sums = [n.attrs["dim"] for n in g.find_nodes("sum")]
    assert (0, 2, 3) not in sums and sums.count((0,)) >= 2
    ones = [n for n in g.find_nodes("matmul") if n.args[1].node is not None and
            n.args[1].node.kind == "constant"]
    assert len(ones) == 2
    for n in ones:
        c = g.constants[n.args[1].node.attrs["name"]]
        assert c.shape[1] == 1 and c.dtype == n.args[0].dtype and (c == 1).all()


def _producer(v):
    return None if v.node is None else v.node.kind


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32])
def test_relu_runs_after_the_max_pool_it_feeds(dtype):
    """LeNet-5's conv, ReLU, pool: the step program pools the convolution's output and applies
    the ReLU (and its backward mask) at the pooled size, no ReLU of a convolution's output left;
    10 SGD steps match eager (float64 to 1e-10), 6 in float32 (with or without the rewrite,
    under EMBER_CPU_ISA=avx2 the programs' 1e-8 roundings flip a ReLU by the tenth step)."""
    me, mc, *_, cf = _train(LeNet5, "sgd_momentum", dtype,
                            steps=10 if dtype == ember.float64 else 6)
    _close(me, mc, dtype)
    assert cf.breaks == [] and isinstance(cf._last.traced, WholeStep)
    g = cf._last.traced.graph
    pools = list(g.find_nodes("max_pool2d_with_indices"))
    assert len(pools) == 2 and all(_producer(p.args[0]) == "conv2d" for p in pools)
    relus = [n for n in g.nodes if n.kind == "relu"]
    assert sum(_producer(r.args[0]) == "max_pool2d_with_indices" for r in relus) == 2
    assert not any(_producer(r.args[0]) == "conv2d" for r in relus)
    traced = cf._last.traced._traced.graph     # the traced graph pools the ReLU's output
    assert all(_producer(p.args[0]) == "relu" for p in traced.find_nodes("max_pool2d_with_indices"))


def test_relu_after_max_pool_keeps_the_gradient_on_ties_and_non_positive_windows():
    """Overlapping 3x3 windows over integer values (ties among positives, windows whose maximum
    is 0 or negative): the rewritten step's gradients equal eager's exactly and torch's (whose
    first maximum takes the gradient), step after step."""
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(5)
    x0 = r.integers(-3, 4, (2, 3, 7, 7)).astype(np.float64)
    c = r.integers(-2, 3, (2, 3, 7, 7)).astype(np.float64)
    params, steps = _offset_steps(x0.shape, ember.float64, 1.0, lambda v: (
        F.max_pool2d(F.relu(v), 3, 1, 1) * ember.tensor(c)).sum())
    compiled = ember.compile(steps[1])
    x = ember.tensor(x0)
    tw = torch.zeros(x0.shape, dtype=torch.float64, requires_grad=True)
    topt = torch.optim.SGD([tw], lr=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphBreakWarning)
        for _ in range(4):
            steps[0](x)
            compiled(x)
            topt.zero_grad()
            (torch.nn.functional.max_pool2d(torch.relu(torch.tensor(x0) + tw), 3, 1, 1)
             * torch.tensor(c)).sum().backward()
            np.testing.assert_array_equal(params[1].grad.numpy(), params[0].grad.numpy())
            np.testing.assert_array_equal(params[1].grad.numpy(), tw.grad.numpy())
            topt.step()
    cf = compiled._compiled
    assert cf.breaks == [] and isinstance(cf._last.traced, WholeStep)
    pool, = cf._last.traced.graph.find_nodes("max_pool2d_with_indices")
    assert _producer(pool.args[0]) != "relu"
