"""``ember.compile`` (ember/compiler/frontend.py): torch.compile's API, compiled forward
against eager (float64), training steps, guards and recompiles, graph breaks, torch's
OptimizedModule layout."""
import copy
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler.frontend import (CompiledAutograd, GraphBreakError, GraphBreakWarning,
                                     InvalidBackend, RecompileWarning)
from ember.jit.plan_live import wait_kernels
from tests.compiler.models import LeNet5, MLP

f64 = ember.float64


def _data(model, batch, seed=0):
    g = np.random.default_rng(seed)
    if isinstance(model, LeNet5):
        x = g.standard_normal((batch, 1, 28, 28))
        n = 10
    else:
        x = g.standard_normal((batch, 20))
        n = 5
    return ember.tensor(x, dtype=f64), ember.tensor(g.integers(0, n, batch))


def _pair(cls):
    ember.manual_seed(0)
    eager = cls().double()
    return eager, copy.deepcopy(eager)


@pytest.fixture(autouse=True)
def _reset():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


@pytest.mark.parametrize("cls", [MLP, LeNet5])
def test_forward_matches_eager(cls):
    eager, _ = _pair(cls)
    compiled = ember.compile(eager)
    x, _ = _data(eager, 4)
    for _ in range(2):   # the tracing call, then the compiled code
        np.testing.assert_allclose(compiled(x).numpy(force=True), eager(x).numpy(force=True),
                                   rtol=0, atol=1e-12)
    with ember.no_grad():  # array-mode code
        for _ in range(2):
            np.testing.assert_allclose(compiled(x).numpy(), eager(x).numpy(), rtol=0,
                                       atol=1e-12)
    assert compiled.graph is not None and "linear" in str(compiled.graph)


@pytest.mark.parametrize("cls", [MLP, LeNet5])
@pytest.mark.parametrize("opt", ["sgd", "adamw"])
def test_training_steps_match_eager(cls, opt):
    eager, twin = _pair(cls)
    compiled = ember.compile(twin)

    def make(m):
        if opt == "sgd":
            return ember.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        return ember.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
    oe, oc = make(eager), make(twin)
    for step in range(10):
        x, y = _data(eager, 8, seed=step)
        for model, o in ((eager, oe), (compiled, oc)):
            o.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            o.step()
    for (n, p), (n2, q) in zip(eager.named_parameters(), twin.named_parameters()):
        assert n == n2
        np.testing.assert_allclose(q.numpy(force=True), p.numpy(force=True), rtol=0, atol=1e-10)
    cf = compiled._compiled
    assert len(cf.graphs) == 1   # one trace served every step
    assert isinstance(cf._last.traced, CompiledAutograd) and cf.backward_fallbacks == []


def test_grad_accumulates_as_eager():
    eager, twin = _pair(MLP)
    compiled = ember.compile(twin)
    x, _ = _data(eager, 3)
    for _ in range(3):
        eager(x).pow(2).sum().backward()
        compiled(x).pow(2).sum().backward()
    for p, q in zip(eager.parameters(), twin.parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=0, atol=1e-12)


def test_backward_is_a_compiled_program():
    m = nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6), nn.Dropout(0.3), nn.Tanh(),
                      nn.LayerNorm(6)).double()
    twin = copy.deepcopy(m)
    compiled = ember.compile(twin)
    x = ember.randn(4, 6, dtype=f64)
    for _ in range(3):
        ember.manual_seed(3)
        m(x).pow(2).sum().backward()
        ember.manual_seed(3)
        compiled(x).pow(2).sum().backward()
    runner = compiled._compiled._last.traced
    assert isinstance(runner, CompiledAutograd)
    assert runner.backward_graph.inputs[0].name == "grad_out0"
    assert "def Sequential_backward(grad_out0" in runner.backward_code
    for p, q in zip(m.parameters(), twin.parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(twin[1].running_var.numpy(), m[1].running_var.numpy(), atol=1e-14)


def test_double_backward_needs_the_eager_backward():
    w = ember.randn(3, dtype=f64, requires_grad=True)
    x = ember.randn(3, dtype=f64)

    def f(x):
        return (x * w).tanh()

    y = ember.compile(f)(x)   # tracing call: eager result, double backward works
    (g,) = ember.autograd.grad(y.sum(), w, create_graph=True)
    y = ember.compile(f)(x)
    y = ember.compile(f)(x)
    compiled = ember.compile(f)
    compiled(x)
    y = compiled(x)
    with pytest.raises(ember.errors.EmberRuntimeError, match="double backward"):
        ember.autograd.grad(y.sum(), w, create_graph=True)
    eager = ember.compile(f, options={"compiled_backward": False})
    eager(x)
    (g2,) = ember.autograd.grad(eager(x).sum(), w, create_graph=True)
    np.testing.assert_allclose(g2.numpy(force=True), g.numpy(force=True), atol=1e-14)
    g2.sum().backward()


def test_saved_parameter_modified_before_backward_raises():
    m = nn.Linear(3, 3).double()
    compiled = ember.compile(m)
    x = ember.randn(2, 3, dtype=f64, requires_grad=True)   # so the weight is saved
    compiled(x)
    for model in (m, compiled):   # as eager
        y = model(x).tanh().sum()
        with ember.no_grad():
            m.weight.mul_(2.0)
        with pytest.raises(ember.errors.EmberRuntimeError,
                           match="modified by an inplace operation"):
            y.backward()


def test_leaf_hooks_run_once_per_backward():
    w = ember.randn(3, dtype=f64, requires_grad=True)
    calls = []
    w.register_hook(lambda g: calls.append(g.tolist()))
    f = ember.compile(lambda x: (x * w).sum())
    for _ in range(3):   # the first call traces and checks the backward: no extra hook calls
        f(ember.full((3,), 2.0, dtype=f64)).backward()
    assert calls == [[2.0, 2.0, 2.0]] * 3
    assert isinstance(f._compiled._last.traced, CompiledAutograd)


def test_hook_on_a_computed_tensor_is_a_break():
    w = ember.randn(3, dtype=f64, requires_grad=True)
    seen = []

    def f(x):
        y = x * w
        y.register_hook(lambda g: seen.append(1))
        return y.sum()

    compiled = ember.compile(f)
    with pytest.warns(GraphBreakWarning, match="hook registered"):
        for _ in range(2):
            compiled(ember.ones(3, dtype=f64)).backward()
    assert len(seen) == 2


def test_printing_a_traced_tensor_is_a_break_and_prints_every_call(capsys):
    def f(x):
        y = x * 2
        print(y, f"{y.sum():.1f}")
        return y + 1

    compiled = ember.compile(f)
    with pytest.warns(GraphBreakWarning, match=r"repr\(\)"):
        outs = [compiled(ember.full((2,), float(i), dtype=f64)) for i in range(3)]
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"tensor([{2 * i}., {2 * i}.], dtype=ember.float64) {4 * i:.1f}"
                       for i in range(3)]
    assert [o.tolist() for o in outs] == [[2.0 * i + 1] * 2 for i in range(3)]


def test_printing_in_a_plain_trace_records_nothing():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traced = ember.jit.trace(lambda x: (print(x * 2), x + 1)[1], (ember.ones(2),))
    assert traced(ember.zeros(2)).tolist() == [1.0, 1.0]


def test_module_hooks_are_a_break():
    m = MLP().double()
    compiled = ember.compile(m)
    x, _ = _data(m, 2)
    compiled(x)
    compiled(x)
    seen = []
    handle = m.fc2.register_forward_hook(lambda mod, i, o: seen.append(o.shape))
    with pytest.warns(GraphBreakWarning, match="a call of Linear with hooks"):
        compiled(x)
    compiled(x)
    assert seen == [(2, 32), (2, 32)]
    handle.remove()
    compiled(x)
    assert len(seen) == 2


def test_output_without_grad_keeps_eager_backward():
    w = ember.randn(3, dtype=f64, requires_grad=True)
    f = ember.compile(lambda x: ((x * w).tanh(), x.argmax()))
    for _ in range(2):
        a, i = f(ember.ones(3, dtype=f64))
        a.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * (1 - np.tanh(w.numpy(force=True)) ** 2))
    assert i.item() == 0
    assert f._compiled.backward_fallbacks == [
        "an output that does not require grad beside one that does"]


def test_inplace_parameter_update_is_seen():
    m = MLP().double()
    compiled = ember.compile(m)
    x, _ = _data(m, 4)
    with ember.no_grad():
        compiled(x)
        compiled(x)   # compiled code
        m.fc1.weight.mul_(0.5)
        m.fc3.bias.add_(1.0)
        np.testing.assert_allclose(compiled(x).numpy(), m(x).numpy(), rtol=0, atol=1e-12)
    assert len(compiled._compiled.graphs) == 1


def test_new_batch_size_recompiles():
    m = MLP().double()
    compiled = ember.compile(m, dynamic=False)
    for b in (4, 7, 4):
        x, _ = _data(m, b)
        np.testing.assert_allclose(compiled(x).numpy(force=True), m(x).numpy(force=True),
                                   rtol=0, atol=1e-12)
    cf = compiled._compiled
    assert len(cf.graphs) == 2
    assert cf.recompiles == ["an input's shape changed: [7, 20] (traced for [4, 20])"]


def test_guards_grad_mode_training_flag_and_parameter_identity():
    m = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5)).double()
    compiled = ember.compile(m)
    x = ember.randn(3, 6, dtype=f64)
    compiled(x)
    m.eval()
    np.testing.assert_allclose(compiled(x).numpy(force=True), m(x).numpy(force=True), atol=1e-12)
    with ember.no_grad():
        compiled(x)
    m[0].weight = nn.Parameter(ember.zeros(6, 6, dtype=f64))
    np.testing.assert_allclose(compiled(x).numpy(force=True), m(x).numpy(force=True), atol=1e-12)
    rec = compiled._compiled.recompiles
    assert rec[0] == "a module's training flag, hooks or a parameter's identity changed"
    assert rec[1] == "the grad mode changed"
    assert len(rec) == 3


def test_dropout_draws_as_eager():
    m = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5)).double()
    compiled = ember.compile(m)
    x = ember.randn(3, 6, dtype=f64)
    for _ in range(3):
        ember.manual_seed(5)
        a = m(x)
        ember.manual_seed(5)
        b = compiled(x)
        np.testing.assert_allclose(b.numpy(force=True), a.numpy(force=True), atol=1e-12)


def test_captured_tensor_modified_in_place_retraces():
    scale = ember.tensor([2.0], dtype=f64)

    @ember.compile
    def f(x):
        return x * scale + 1

    x = ember.ones(3, dtype=f64)
    f(x)
    f(x)
    scale.add_(1.0)
    np.testing.assert_allclose(f(x).numpy(), np.full(3, 4.0))


def test_graph_break_falls_back_with_warning_naming_the_line():
    # NumPy holding a traced tensor's array: no guard can stand for what Python does with it,
    # so the function runs eagerly for these guards (a bool/item read is a compiled segment
    # instead: tests/compiler/test_segments.py)
    @ember.compile
    def f(x):
        if x.numpy().sum() > 0:   # the break
            return x * 2
        return x - 1

    pos, neg = ember.ones(3, dtype=f64), -ember.ones(3, dtype=f64)
    with pytest.warns(GraphBreakWarning,
                      match=r"numpy\(\).*test_frontend.py:\d+: `if x.numpy\(\).sum\(\) > 0"):
        assert f(pos).tolist() == [2.0, 2.0, 2.0]
    # same guards, other data: eager, never the traced branch
    assert f(neg).tolist() == [-2.0, -2.0, -2.0]


@pytest.mark.parametrize("body", ["x.sum().item()", "x.tolist()", "float(x.mean())"])
def test_fullgraph_raises_on_break(body):
    fn = eval(f"lambda x: {body}")
    compiled = ember.compile(fn, fullgraph=True)
    with pytest.raises(GraphBreakError, match="fullgraph=True"):
        compiled(ember.ones(3, dtype=f64))


def _stepper(model):
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def test_backward_and_optimizer_step_inside_are_breaks_without_step_capture():
    # options={"whole_step": False}: backward, step and zero_grad break the graph (the
    # captured whole step is tests/compiler/test_step.py)
    eager, twin = _pair(MLP)
    step_e = _stepper(eager)
    compiled = ember.compile(_stepper(twin), options={"whole_step": False})
    with pytest.warns(GraphBreakWarning, match=r"SGD.zero_grad\(\) at .*test_frontend.py"):
        for i in range(4):
            x, y = _data(eager, 4, seed=i)
            le, lc = step_e(x, y), compiled(x, y)
            assert abs(le.item() - lc.item()) < 1e-12
    for p, q in zip(eager.parameters(), twin.parameters()):
        np.testing.assert_allclose(q.numpy(force=True), p.numpy(force=True), rtol=0, atol=1e-12)
    x, y = _data(eager, 4)
    with pytest.raises(GraphBreakError, match="a backward pass"):
        ember.compile(_stepper(MLP().double()), fullgraph=True,
                      options={"whole_step": False})(x, y)


def test_explain_names_an_optimizer_step_that_is_not_captured():
    model = MLP().double()
    class CustomSGD(ember.optim.Optimizer):
        def __init__(self, params, lr=0.01):
            super().__init__(params, dict(lr=lr))

        def step(self, closure=None):
            with ember.no_grad():
                for p in self.param_groups[0]["params"]:
                    p.sub_(0.01 * p.grad)
    opt = CustomSGD(model.parameters())

    def step(x, y):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    e = ember.explain(step, *_data(model, 4))
    assert e.graph_count == 0 and [b.reason for b in e.break_reasons] == [
        "CustomSGD.step(): ember.compile traces the updates of SGD, Adam, AdamW, RMSprop, "
        "Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop (not LBFGS: its step needs a "
        "closure); this optimizer's step runs eagerly"]


def test_module_argument_is_guarded_by_identity():
    @ember.compile
    def predict(model, x, *, temperature=1.0):
        return (model(x) / temperature).softmax(-1)

    m1, m2 = MLP().double(), MLP().double()
    twin = copy.deepcopy(m1)
    x, _ = _data(m1, 3)
    for m in (m1, m2, m1, m2):
        np.testing.assert_allclose(predict(m, x).numpy(force=True),
                                   m(x).softmax(-1).numpy(force=True), rtol=0, atol=1e-12)
    assert len(predict._compiled.graphs) == 2
    for _ in range(2):
        predict(m1, x, temperature=2.0).pow(2).sum().backward()
        (twin(x) / 2.0).softmax(-1).pow(2).sum().backward()
    for p, q in zip(m1.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=0, atol=1e-12)
    m1.fc1.weight = nn.Parameter(m1.fc1.weight.detach() * 2)   # a new Parameter: retraced
    np.testing.assert_allclose(predict(m1, x).numpy(force=True),
                               m1(x).softmax(-1).numpy(force=True), rtol=0, atol=1e-12)


def test_batchnorm_module_argument_updates_running_stats_without_retracing():
    bn = nn.BatchNorm1d(4).double()
    twin = copy.deepcopy(bn)
    f = ember.compile(lambda m, x: m(x) * 2)
    x = ember.randn(6, 4, dtype=f64)
    for _ in range(4):
        with ember.no_grad():
            a, b = twin(x) * 2, f(bn, x)
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(bn.running_mean.numpy(), twin.running_mean.numpy(), atol=1e-14)
    assert len(f._compiled.graphs) == 1 and f._compiled.recompiles == []


def test_cache_limit_then_eager_with_warning(monkeypatch):
    monkeypatch.setattr(ember._dynamo.config, "cache_size_limit", 2)

    @ember.compile(dynamic=False)
    def f(x):
        return x * 2

    f(ember.ones(1))
    f(ember.ones(2))
    with pytest.warns(RecompileWarning, match=r"cache size limit \(2.*shape changed: \[3\]"):
        assert f(ember.ones(3)).tolist() == [2.0, 2.0, 2.0]


def test_reset_clears_caches():
    m = MLP().double()
    compiled = ember.compile(m)
    compiled(_data(m, 2)[0])
    assert len(compiled._compiled.graphs) == 1
    ember._dynamo.reset()
    assert compiled._compiled.graphs == []
    compiled(_data(m, 2)[0])
    ember.compiler.reset()
    assert compiled._compiled.graphs == []


def test_optimized_module_layout_matches_torch():
    torch = pytest.importorskip("torch")
    # torch.compile's first use patches torch for the process: among others it turns
    # torch.distributions' default argument validation off (torch/_dynamo/eval_frame.py), which
    # later tests in this process compare against; put it back
    validate = torch.distributions.Distribution._validate_args
    try:
        tm = torch.compile(torch.nn.Linear(2, 2))
    finally:
        torch.distributions.Distribution.set_default_validate_args(validate)
    m = nn.Linear(2, 2)
    c = ember.compile(m)
    assert list(c.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in c.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert c._orig_mod is m and c.weight is m.weight and c.in_features == 2
    assert type(c).__name__ == type(tm).__name__ == "OptimizedModule"
    c.eval()
    assert not m.training
    assert repr(c).startswith("OptimizedModule(\n  (_orig_mod): Linear(")
    m2 = nn.Linear(2, 2)
    c2 = ember.compile(m2)
    c2.load_state_dict(c.state_dict())
    assert ember.equal(m2.weight, m.weight)


def test_decorator_forms_and_disable():
    def f(x):
        return x + 1

    @ember.compile
    def g(x):
        return x + 1

    @ember.compile(fullgraph=True, mode="max-autotune")
    def h(x):
        return x + 1

    x = ember.ones(2)
    assert g(x).tolist() == h(x).tolist() == [2.0, 2.0]
    assert g.__name__ == "g" and h.__name__ == "h"
    assert ember.compile(f, disable=True) is f
    m = nn.Linear(2, 2)
    assert ember.compile(m, disable=True) is m
    for backend in ("inductor", "eager", "aot_eager", "ember", None):
        assert ember.compile(f, backend=backend)(x).tolist() == [2.0, 2.0]


def test_invalid_backend_and_mode():
    with pytest.raises(InvalidBackend, match="invalid backend 'foo'"):
        ember.compile(lambda x: x, backend="foo")
    with pytest.raises(ember.errors.EmberRuntimeError, match="unrecognized mode=foo"):
        ember.compile(lambda x: x, mode="foo")
    assert issubclass(InvalidBackend, RuntimeError)


def test_debug_mode_prints_graph_breaks_and_recompiles(capsys):
    m = MLP().double()
    c = ember.compile(m, mode="debug")
    c(_data(m, 2)[0])
    c(_data(m, 3)[0])
    out = capsys.readouterr().out
    assert "[ember.compile] traced 'MLP'" in out and "fusion groups" in out
    assert "recompiling 'MLP': an input's shape changed" in out


def test_explain_counts_graphs_and_breaks():
    def f(x):
        y = x * 2
        if y.sum().item() > 0:
            return y
        return -y

    e = ember.explain(f, ember.ones(3))   # before the break: one graph; after it: no op
    assert e.graph_count == 1 and e.graph_break_count == 1
    assert "item()" in str(e.break_reasons[0])
    e = ember.explain(lambda x: x * 2 + 1, ember.ones(3))
    assert e.graph_count == 1 and e.graph_break_count == 0
    assert "Graph Count: 1" in str(e)


def test_kwargs_and_non_tensor_arguments():
    @ember.compile
    def f(x, *, scale=1.0, bias=None):
        return x * scale + (0 if bias is None else bias)

    x = ember.ones(2, dtype=f64)
    assert f(x, scale=2.0).tolist() == [2.0, 2.0]
    assert f(x, scale=3.0).tolist() == [3.0, 3.0]          # a Python scalar is guarded
    assert f(x, scale=2.0, bias=ember.ones(2, dtype=f64)).tolist() == [3.0, 3.0]
    assert f(x, scale=2.0, bias=ember.full((2,), 5.0, dtype=f64)).tolist() == [7.0, 7.0]


def test_torch_program_runs_unchanged():
    program = textwrap.dedent("""
        import ember as torch
        import ember.nn as nn
        import ember.nn.functional as F

        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
        model = torch.compile(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = torch.randn(32, 10)
        y = torch.randint(0, 3, (32,))
        first = None
        for epoch in range(20):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            first = first if first is not None else loss.item()
        model.eval()
        with torch.no_grad():
            acc = (model(x).argmax(1) == y).float().mean().item()
        torch._dynamo.reset()
        torch.compiler.reset()
        print(first > loss.item(), acc > 0.5, list(model.state_dict())[0])
    """)
    r = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["True", "True", "_orig_mod.0.weight"]


def test_import_ember_does_not_load_the_compiler():
    r = subprocess.run([sys.executable, "-c", "import sys, ember; "
                        "print('ember.jit' in sys.modules, ember.compile.__module__)"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["False", "ember.compiler.frontend"]


def test_recompile_limit_is_the_functions_own_and_arguments_are_checked():
    """compile(recompile_limit=2) set the process-wide limit, so every later compiled function
    stopped retracing after two traces; arguments of the wrong type named eq() instead of
    compile's argument."""
    f = ember.compile(lambda x: x * 2, recompile_limit=1)
    f(ember.ones(2))
    with pytest.warns(RecompileWarning):
        f(ember.ones(3))
    g = ember.compile(lambda x: x + 1, dynamic=False)
    for n in range(2, 5):
        g(ember.ones(n))
    assert len(g._compiled.recompiles) == 2
    for kw in (dict(dynamic=ember.ones(2)), dict(mode=ember.ones(2)), dict(fullgraph="yes"),
               dict(backend=ember.ones(2)), dict(recompile_limit=0)):
        with pytest.raises(ember.errors.EmberError, match="compile"):
            ember.compile(nn.Linear(2, 2), **kw)


# ---------------------------------------------------------------------- dynamic batch size
class ViewFlatten(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.fc = nn.Linear(2 * 4 * 4, 3)

    def forward(self, x):
        y = F.relu(self.conv(x))
        return self.fc(y.view(y.size(0), -1))


def _batch(model, b, seed):
    if isinstance(model, ViewFlatten):
        return ember.tensor(np.random.default_rng(seed).standard_normal((b, 1, 6, 6)),
                            dtype=f64)
    return _data(model, b, seed)[0]


def _run_batches(cls, dynamic, sizes=(8, 16, 5, 16, 8)):
    """Forward + backward through the compiled module at each batch size, and a no-grad
    forward, against eager (float64); returns the CompiledFunction."""
    eager, twin = _pair(cls)
    compiled = ember.compile(twin, dynamic=dynamic)
    for i, b in enumerate(sizes):
        x = _batch(eager, b, i)
        for m in (eager, compiled):
            for p in m.parameters():
                p.grad = None
        ye, yc = eager(x), compiled(x)
        np.testing.assert_allclose(yc.numpy(force=True), ye.numpy(force=True), rtol=0,
                                   atol=1e-10)
        (ye * ye).sum().backward()
        (yc * yc).sum().backward()
        for p, q in zip(eager.parameters(), twin.parameters()):
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=0, atol=1e-10)
    return compiled._compiled


@pytest.mark.parametrize("cls", [MLP, LeNet5, ViewFlatten])
def test_second_batch_size_makes_the_batch_dynamic(cls):
    # dynamic=None (torch's automatic dynamic): 8 is traced, 16 traced again and found the
    # same program but for the batch size, which becomes symbolic; 5 and later sizes reuse it
    cf = _run_batches(cls, None)
    assert cf.traces == 2 and len(cf.recompiles) == 1 and cf.dynamic_fallbacks == []
    assert isinstance(cf._last.traced, CompiledAutograd)
    assert [e.batch for e in cf._dynamic.values()] == [16]


@pytest.mark.parametrize("cls", [MLP, LeNet5, ViewFlatten])
def test_dynamic_true_and_false(cls):
    cf = _run_batches(cls, True)
    # the MLP's programs hold no batch size: one trace; the flatten's backward reshapes to the
    # traced batch size ((8, 16, 5, 5)): the second batch size compares two traces
    assert cf.traces == (1 if cls is MLP else 2) and cf.dynamic_fallbacks == []
    assert _run_batches(cls, False).traces == 3   # static: one trace per batch size


def test_view_flatten_backward_reads_the_batch_size_from_an_input():
    cf = _run_batches(ViewFlatten, None, sizes=(8, 16))
    fwd, bwd = str(cf._last.traced.graph), str(cf._last.traced.backward_graph)
    assert "view(%2, size=(int(%3), -1))" in fwd
    assert "reshape(%" in bwd and "shape=(int(%" in bwd and "(16, 2, 4, 4)" not in bwd
    with ember.no_grad():   # the no-grad forward is dynamic from its second batch size too
        m = cf.module
        for b in (8, 3, 11):
            x = _batch(m, b, b)
            np.testing.assert_allclose(cf(x).numpy(), m(x).numpy(), rtol=0, atol=1e-12)
    assert cf.traces == 4   # 2 with grad, 2 without (8, then 3)


class LossNet(nn.Module):
    """A scalar output (its cotangent is 0-d) and a weight of 16 output features: at batch
    size 16 the backward's first saved formal with a leading 16 is that weight."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 16, 3)
        self.fc = nn.Linear(16 * 2 * 2, 16)

    def forward(self, x):
        y = F.relu(self.conv(x))
        return self.fc(y.flatten(1)).pow(2).sum()


def test_symbolic_batch_is_read_from_a_batch_input_not_a_same_sized_weight():
    eager, twin = _pair(LossNet)
    compiled = ember.compile(twin)
    for i, b in enumerate((8, 16, 5)):
        x = ember.tensor(np.random.default_rng(i).standard_normal((b, 1, 4, 4)), dtype=f64)
        for m in (eager, twin):
            m.zero_grad()
        le, lc = eager(x), compiled(x)
        assert abs(le.item() - lc.item()) <= 1e-10 * abs(le.item())
        le.backward()
        lc.backward()
        for p, q in zip(eager.parameters(), twin.parameters()):
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=0, atol=1e-10)
    cf = compiled._compiled
    assert cf.traces == 2 and "size(%saved_x, dim=0)" in str(cf._last.traced.backward_graph)


def test_dynamic_batch_with_batchnorm_and_dropout_matches_eager():
    # batch norm's training-mode check (size(0) == 1) is a shape guard of the joint trace, whose
    # guard graph also has the cotangent formals: re-checked at 5 and 7, it holds (no retrace)
    ember.manual_seed(0)
    eager = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Dropout(0.3), nn.Tanh(),
                          nn.Linear(8, 2)).double()
    twin = copy.deepcopy(eager)
    compiled = ember.compile(twin)
    for i, b in enumerate((8, 16, 5, 16, 7)):
        x = ember.tensor(np.random.default_rng(i).standard_normal((b, 6)))
        ember.manual_seed(100 + i)
        ye = eager(x)
        ember.manual_seed(100 + i)
        yc = compiled(x)
        np.testing.assert_allclose(yc.numpy(force=True), ye.numpy(force=True), rtol=0,
                                   atol=1e-10)
        (ye * ye).sum().backward()
        (yc * yc).sum().backward()
    for p, q in zip(eager.parameters(), twin.parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=0, atol=1e-10)
    for p, q in zip(eager.buffers(), twin.buffers()):   # running statistics
        np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=0, atol=1e-10)
    cf = compiled._compiled
    assert cf.traces == 2 and len(cf.recompiles) == 1 and cf.backward_fallbacks == []


def test_batch_size_read_as_a_python_number_stays_static():
    def f(x):
        return x.sum(0) / float(x.shape[0])   # the batch size frozen as a constant
    compiled = ember.compile(f)
    with warnings.catch_warnings():     # torch's default (dynamic=None) specialises silently
        warnings.simplefilter("error", RecompileWarning)
        for b in (8, 16, 5):
            x = ember.tensor(np.random.default_rng(b).standard_normal((b, 3)))
            np.testing.assert_allclose(compiled(x).numpy(), x.numpy().mean(0), rtol=0,
                                       atol=1e-12)
    cf = compiled._compiled
    assert cf.traces == 3 and len(cf.dynamic_fallbacks) == 2
    assert "differs between batch sizes 8 and 16" in cf.dynamic_fallbacks[0]
    assert "div" in cf.dynamic_fallbacks[0]


def test_a_dynamic_batch_asked_for_and_refused_says_why(monkeypatch):
    from ember.compiler import frontend
    # the two refusals (a constant holding the batch size, then two traces that differ)
    monkeypatch.setattr(frontend, "_frozen_batch", lambda runner, b: f"a constant at {b}")
    monkeypatch.setattr(frontend, "_generalise", lambda old, new, b1, b2: f"{b1} vs {b2}")
    compiled = ember.compile(lambda x: x * 2, dynamic=True)
    with pytest.warns(RecompileWarning, match=r"cannot make the batch size dynamic: 8 vs 16; "
                      r"each batch size is traced again"):
        for b in (8, 16, 5):
            assert compiled(ember.ones(b, 2, dtype=f64)).tolist() == [[2.0, 2.0]] * b
    assert compiled._compiled.dynamic_fallbacks[0] == "8 vs 16"


def test_dynamic_batch_rechecks_shape_guards():
    def f(x):
        if x.shape[0] > 10:    # a branch on the batch size: guarded
            return x * 2
        return x * 3
    compiled = ember.compile(f, dynamic=True)
    for b in (8, 9, 16, 5):
        x = ember.ones(b, 2, dtype=f64)
        assert compiled(x).tolist() == (x * (2 if b > 10 else 3)).tolist()
    cf = compiled._compiled
    assert cf.traces == 2
    assert cf.recompiles[-1].startswith("a size the trace read in Python changed with the "
                                        "batch size 16 (traced for 8): %x.size(0) > 10 at ")


def test_compiled_module_names_parameters_by_path():
    from ember.jit.ir import parse
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).double()
    compiled = ember.compile(m)
    compiled(ember.randn(2, 4, dtype=f64)).sum().backward()
    runner = compiled._compiled._last.traced
    names = [v.name for v in runner.graph.inputs]   # state-dict keys, as ember.jit.trace's
    assert names == ["input", "0.weight", "0.bias", "2.weight", "2.bias"]
    # printed so that none reads as a value (%0, %2) or a part of one
    assert [v.ref for v in runner.graph.inputs] == ["%input", "%self.0.weight", "%self.0.bias",
                                                     "%self.2.weight", "%self.2.bias"]
    assert "%saved_self.2.weight" in str(runner.backward_graph)
    for g in (runner.graph, runner.backward_graph):
        assert parse(str(g)) == g
    assert [n for n, _ in compiled.named_parameters()][0] == "_orig_mod.0.weight"


def test_an_op_no_trace_can_record_is_a_named_break():
    # resize_ and view(dtype) raised inside ember.compile's trace (the compiled call failed
    # where eager runs); they are graph breaks naming the op, and the function runs eagerly
    def grow(x):
        y = x.clone()
        y.resize_(2, 3)
        return y * 2

    def bits(x):
        return x.view(ember.int32) + 1
    x = ember.arange(12.0).reshape(3, 4)
    for fn, what in ((grow, r"resize_: a tensor cannot change its shape"),
                     (bits, r"view\(dtype\): a trace cannot record")):
        c = ember.compile(fn)
        with pytest.warns(GraphBreakWarning, match=what + r".*test_frontend.py:\d+"):
            got = c(x)
        np.testing.assert_array_equal(got.numpy(), fn(x).numpy())
        np.testing.assert_array_equal(c(x).numpy(), fn(x).numpy())
        with pytest.raises(GraphBreakError, match=what):
            ember.compile(fn, fullgraph=True)(x)
    # ember.jit.trace cannot break a graph: it raises, as before
    with pytest.raises(ember.errors.EmberRuntimeError, match="resize_: a tensor cannot"):
        ember.jit.trace(grow, (x,))


def test_a_returned_shape_stays_a_size():
    # the call structure flattened ember.Size as a tuple: the compiled call returned (3, 2)
    # where eager returns Size([3, 2]) (op_db broadcast_shapes through ember.compile)
    for fn, args in ((lambda *a: ember.broadcast_shapes(*a), ((1, 2), (3, 1))),
                     (lambda x: (x.shape, x * 2), (ember.ones(2, 3),)),
                     (lambda *a: ember.broadcast_shapes(*a), ((),))):
        c = ember.compile(fn)
        for _ in range(2):
            got, want = c(*args), fn(*args)
            got, want = (got[0], want[0]) if isinstance(want, tuple) and \
                not isinstance(want, ember.Size) else (got, want)
            assert type(got) is ember.Size and got == want
    traced = ember.jit.trace(lambda x: (x.shape, x + 1), (ember.ones(2, 3),), strict=False)
    assert type(traced(ember.ones(2, 3))[0]) is ember.Size


def test_a_tensor_argument_read_as_a_value_is_a_break():
    # pinv's atol as an input tensor: its values are read in Python, so the compiled call
    # breaks (it raised TypeError writing the IR before) and runs eagerly; each atol is right
    x = ember.randn(4, 3, dtype=ember.float64)
    f = ember.compile(lambda x, atol: ember.linalg.pinv(x, atol=atol))
    with pytest.warns(GraphBreakWarning, match="a traced tensor passed as a value the op reads"):
        for a in (1.0, 0.1):
            t = ember.tensor(a, dtype=ember.float64)
            np.testing.assert_allclose(f(x, t).numpy(), ember.linalg.pinv(x, atol=t).numpy(),
                                       rtol=0, atol=1e-12)


def test_the_backward_check_permutes_integer_inputs(monkeypatch):
    # a derivative formula reading an index's values in Python (scatter_reduce(mean)'s counts
    # did) is a frozen constant in the compiled backward; the check once ran on the same
    # indices (floats scaled only) and passed, and a call with other indices got the first
    # call's gradient. Integer inputs are permuted in the check now: it differs, the backward
    # stays eager's, and every call's gradient is right
    import ember.ops.indexing as indexing
    from ember.autograd._generated import functions as G
    orig = indexing.scatter_reduce_backward

    def reads_index(grad, input, index, src, *rest):
        k = float(index._data.reshape(-1)[0] + 1)    # a value of index, read in Python
        return tuple(None if g is None else G.mul(g, k)
                     for g in orig(grad, input, index, src, *rest))
    monkeypatch.setattr(indexing, "scatter_reduce_backward", reads_index)

    def fn(a, i, s):
        return a.scatter_reduce(1, i, s, "sum").sin()
    f = ember.compile(fn)
    g = np.random.default_rng(0)
    x, src = g.standard_normal((2, 4)), g.standard_normal((2, 3))
    for idx in ([[0, 1, 3], [2, 2, 0]], [[3, 1, 0], [1, 2, 0]], [[1, 1, 1], [0, 0, 0]]):
        grads = []
        for h in (fn, f):
            a = ember.tensor(x, requires_grad=True)
            s = ember.tensor(src, requires_grad=True)
            h(a, ember.tensor(idx), s).sum().backward()
            grads.append((a.grad.numpy(), s.grad.numpy()))
        for w, c in zip(*grads):
            np.testing.assert_allclose(c, w, rtol=0, atol=1e-12)
    assert any("differ from eager" in w for w in f._compiled.backward_fallbacks)


def test_the_same_tensor_passed_twice_is_a_guard():
    # f(a, a) is traced with one formal read twice (sub(%b, %b)); f(a, b) after it had the
    # same guard key and returned a - a = 0. Which arguments are the same tensor is guarded
    c = ember.compile(lambda a, b: a - b)
    a = ember.ones(3, dtype=f64)
    b = ember.full((3,), 3.0, dtype=f64)
    assert c(a, a).tolist() == [0.0] * 3
    assert c(a, b).tolist() == [-2.0] * 3
    assert c(b, b).tolist() == [0.0] * 3
    assert c(b, a).tolist() == [2.0] * 3
    assert c._compiled.traces == 2


def test_no_grad_inside_the_function_is_kept():
    # ops under no_grad inside a function compiled with grad mode on were replayed with
    # autograd recording (the tensor-mode code), so the gradient flowed through them: the
    # second call's gradient was 4 where eager's is 2. Their outputs are detached in the graph
    def f(x):
        with ember.no_grad():
            y = x * 2
        return y + x * x

    c = ember.compile(f)
    for _ in range(3):
        x1 = ember.full((2,), 1.0, dtype=f64, requires_grad=True)
        x2 = ember.full((2,), 1.0, dtype=f64, requires_grad=True)
        c(x1).sum().backward()
        f(x2).sum().backward()
        assert x1.grad.tolist() == x2.grad.tolist() == [2.0, 2.0]


def test_the_collector_pauses_while_tracing_only():
    import gc
    seen = []

    def f(x):
        seen.append(gc.isenabled())
        return (x * 2).relu().sum()
    c = ember.compile(f)
    x = ember.randn(3, dtype=f64)
    assert gc.isenabled()
    c(x)                                   # traced: the collector is off during the trace
    c(x)                                   # a hit runs the program, Python not traced
    assert seen == [False] and gc.isenabled()

    def bad(x):
        raise ValueError("boom")
    with pytest.raises(ValueError, match="boom"):
        ember.compile(bad)(x)
    assert gc.isenabled()                  # on again after a trace that raised
    gc.disable()                           # a caller's choice is kept
    try:
        ember.compile(lambda x: x + 1)(x)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_what_a_trace_keeps_goes_to_the_oldest_generation():
    """The program's graph, made while the collector was off, is not left in the young
    generations (whose next collection would walk all of it)."""
    import gc

    def f(x):
        return (x * 2).relu().sum()
    c = ember.compile(f)
    x = ember.randn(3, dtype=f64)
    c(x)
    graph = c._compiled._last.traced.graph
    kept = [graph, *graph.nodes, *graph.values()]
    assert all(gc.is_tracked(o) for o in kept)
    young = {id(o) for gen in (0, 1) for o in gc.get_objects(generation=gen)}
    assert not any(id(o) in young for o in kept)
    old = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(o) in old for o in kept)
    marker = [[]]
    gc.freeze()                            # a caller's frozen objects stay frozen
    try:
        ember.compile(lambda x: x + 1)(x)
        assert not any(o is marker for o in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(o is marker for o in gc.get_objects())


# ---- guards of calls served by the inference plan (the graph frozen on live parameters) ----
def _guarded_net():
    ember.manual_seed(1)
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(8, 3)).double().eval()


def _replace_param(m):
    m[0].weight = nn.Parameter(m[0].weight.detach() * 2)


def _assign_data(m):
    m[0].weight.data = m[0].weight.detach() * 2


def _inplace_no_grad(m):
    with ember.no_grad():
        m[4].weight.mul_(0.5)


def _data_inplace(m):   # torch's .data: untracked by autograd, still a write to the weight
    m[0].weight.data.mul_(0.5)


def _data_isub(m):   # the hand-written SGD step: p.data -= lr * grad (same array assigned back)
    m[4].weight.data -= 0.25 * ember.ones_like(m[4].weight)


def _data_of_data_copy(m):
    m[1].weight.data.data.copy_(ember.full((8,), 3.0, dtype=f64))


def _bias_to_none(m):
    m[4].bias = None


def _replace_buffer(m):
    m[1].running_mean = ember.ones(8, dtype=f64)


def _inplace_buffer(m):
    with ember.no_grad():
        m[1].running_var.mul_(4.0)


def _load_state_dict(m):
    ember.manual_seed(2)
    m.load_state_dict(_guarded_net_other().state_dict())


def _guarded_net_other():
    ember.manual_seed(2)
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(8, 3)).double().eval()


def _replace_submodule(m):
    ember.manual_seed(3)
    m[0] = nn.Linear(6, 8).double()


def _replace_submodule_inside(m):   # two levels down: the parent's children are unchanged
    ember.manual_seed(3)
    inner = nn.Sequential(nn.Linear(8, 3)).double()
    m[4] = inner
    m(ember.randn(2, 6, dtype=f64))   # (the key of this tree is read after the next change)
    inner[0] = nn.Linear(8, 3).double()


def _batchnorm_train(m):
    m[1].train()


def _forward_hook(m):
    m[2].register_forward_hook(lambda mod, i, o: o * 2)


def _to_float32(m):
    m.float()


CHANGES = [_replace_param, _assign_data, _inplace_no_grad, _data_inplace, _data_isub,
           _data_of_data_copy, _bias_to_none, _replace_buffer,
           _inplace_buffer, _load_state_dict, _replace_submodule, _replace_submodule_inside,
           _batchnorm_train, _forward_hook, _to_float32]


@pytest.mark.parametrize("change", CHANGES, ids=[c.__name__.strip("_") for c in CHANGES])
def test_calls_served_by_the_inference_plan_see_every_change(change):
    m = _guarded_net()
    compiled = ember.compile(m)
    x = ember.randn(4, 6, dtype=f64)
    with ember.no_grad():
        for i in range(4):   # the trace, then the frozen graph's plan
            if i == 2:
                assert wait_kernels(600)
            np.testing.assert_allclose(compiled(x).numpy(), m(x).numpy(), rtol=0, atol=1e-12)
        runner = compiled._compiled._last.traced
        assert runner._planner is not None and runner._planner.builds == 1, \
            runner._planner.errors
        before = m(x).numpy()
        change(m)
        xs = x.float() if change is _to_float32 else x
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GraphBreakWarning)
            for _ in range(4):
                want = m(xs).numpy()
                # the change shows in eager's output
                assert want.dtype != before.dtype or not np.allclose(want, before)
                got = compiled(xs).numpy()
                assert got.dtype == want.dtype
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 if xs is not x else 1e-12)


def test_requires_grad_switched_on_is_a_guard_of_planned_calls():
    m = _guarded_net()
    for p in m.parameters():
        p.requires_grad_(False)
    compiled = ember.compile(m)
    x = ember.randn(4, 6, dtype=f64)
    for i in range(4):   # grad mode, nothing requires grad: planned calls
        if i == 2:
            assert wait_kernels(600)
        out = compiled(x)
        assert not out.requires_grad
    assert compiled._compiled._last.traced._planner.builds == 1
    m[0].weight.requires_grad_(True)
    out = compiled(x)
    assert out.requires_grad
    assert compiled._compiled.recompiles == [
        "a module's training flag, hooks or a parameter's identity changed"]
    out.sum().backward()
    got = m[0].weight.grad.numpy().copy()
    m[0].weight.grad = None
    m(x).sum().backward()
    np.testing.assert_allclose(got, m[0].weight.grad.numpy(), rtol=0, atol=1e-12)


def test_inference_plan_option_off_runs_the_trace():
    m = _guarded_net()
    compiled = ember.compile(m, options={"inference_plan": False})
    x = ember.randn(4, 6, dtype=f64)
    with ember.no_grad():
        for _ in range(4):
            np.testing.assert_allclose(compiled(x).numpy(), m(x).numpy(), rtol=0, atol=1e-12)
    assert compiled._compiled._last.traced._planner is None


# ---- the previous call's guards (CompiledFunction._hit): each change below must not reuse it
def _hit_then(fn, args, change, call_args=None, grad=False):
    """Compile ``fn``, call it three times on ``args`` (the third call runs through the kept
    previous-call guards), apply ``change`` and return (compiled result, eager result) for
    ``call_args`` (default ``args``), both under ``grad``."""
    compiled = ember.compile(fn)
    ctx = ember.enable_grad if grad else ember.no_grad
    with ctx():
        for _ in range(3):
            compiled(*args)
    assert compiled._compiled._hit is not None
    change()
    call_args = args if call_args is None else call_args
    with ctx():
        got = compiled(*call_args)
        want = fn(*call_args)
    return got, want


def _close(got, want):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=0, atol=1e-12)


def test_previous_call_guard_input_shape():
    def f(x):
        return x.sum(0) / float(x.shape[0])   # the size is a Python number in the trace
    got, want = _hit_then(f, (ember.randn(4, 3, dtype=f64),), lambda: None,
                          (ember.randn(8, 3, dtype=f64),))
    _close(got, want)


def test_previous_call_guard_input_dtype():
    def f(x):
        return x * (2.0 if x.dtype == ember.float64 else 3.0)
    got, want = _hit_then(f, (ember.randn(4, 3, dtype=f64),), lambda: None,
                          (ember.randn(4, 3, dtype=ember.float32),))
    assert got.dtype == ember.float32
    _close(got, want)


def test_previous_call_guard_input_requires_grad():
    def f(x):
        return x * (2.0 if x.requires_grad else 3.0)
    x = ember.randn(4, 3, dtype=f64)
    got, want = _hit_then(f, (x,), lambda: None, (x.detach().requires_grad_(),), grad=True)
    assert got.requires_grad
    _close(got, want)


def test_previous_call_guard_grad_mode():
    def f(x):
        return x * (2.0 if ember.is_grad_enabled() else 3.0)
    x = ember.randn(4, 3, dtype=f64)
    compiled = ember.compile(f)
    for _ in range(3):
        compiled(x)
    assert compiled._compiled._hit is not None
    with ember.no_grad():
        _close(compiled(x), f(x))


def test_previous_call_guard_autocast():
    w = ember.randn(3, 3)

    def f(x):
        return x @ w
    x = ember.randn(4, 3)
    compiled = ember.compile(f)
    with ember.no_grad():
        for _ in range(3):
            compiled(x)
        assert compiled._compiled._hit is not None
        with ember.autocast("cpu", dtype=ember.bfloat16):
            got, want = compiled(x), f(x)
    assert got.dtype == want.dtype == ember.bfloat16


def test_previous_call_guard_aliasing():
    def f(a, b):
        c = b * 1.0
        a.mul_(2.0)
        return c + a   # f(a, a): 3a; the trace of f(a, b) reads b's array after a's write
    a0, b0 = ember.randn(3, dtype=f64), ember.randn(3, dtype=f64)
    a1 = ember.randn(3, dtype=f64)
    a2 = a1.clone()
    compiled = ember.compile(f)
    with ember.no_grad():
        for _ in range(3):
            compiled(a0, b0)
        assert compiled._compiled._hit is not None
        got = compiled(a1, a1)
        want = f(a2, a2)
    _close(got, want)


def test_previous_call_guard_number_of_arguments():
    def f(*xs):
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out
    a, b = ember.randn(3, dtype=f64), ember.randn(3, dtype=f64)
    got, want = _hit_then(f, (a,), lambda: None, (a, b))
    _close(got, want)


def test_previous_call_guard_captured_tensor_version():
    c = ember.ones(3, dtype=f64)

    def f(x):
        return x + c * 2.0   # c * 2.0 folded into a constant
    with ember.no_grad():
        got, want = _hit_then(f, (ember.randn(3, dtype=f64),), lambda: c.add_(1.0))
    _close(got, want)


def _module_hit_then(change, grad=False):
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6), nn.Linear(6, 3)).double()
    m.eval()
    x = ember.randn(5, 6, dtype=f64)
    compiled = ember.compile(m)
    ctx = ember.enable_grad if grad else ember.no_grad
    with ctx():
        for _ in range(3):
            compiled(x)
    assert compiled._compiled._hit is not None
    change(m)
    with ctx():
        got = compiled(x)
        want = m(x)
    return got, want, compiled


@pytest.mark.parametrize("change", [
    lambda m: m.train(),                                                  # training flag
    lambda m: m[1].train(),
    lambda m: m[2].register_forward_hook(lambda mod, a, out: out * 2.0),  # a module's hook
    lambda m: setattr(m[0], "weight", nn.Parameter(ember.zeros(6, 6, dtype=f64))),  # identity
    lambda m: setattr(m[2], "bias", None),
    lambda m: m[0].weight.data.mul_(0.5),                                 # version (.data)
    lambda m: m[1].running_mean.add_(1.0),                                # buffer version
], ids=["train", "train-submodule", "hook", "parameter-replaced", "parameter-removed",
        "parameter-data-written", "buffer-written"])
def test_previous_call_guard_module_state(change):
    got, want, _ = _module_hit_then(change)
    _close(got, want)


def test_previous_call_guard_parameter_requires_grad():
    got, want, compiled = _module_hit_then(lambda m: m[0].weight.requires_grad_(False),
                                           grad=True)
    _close(got, want)
    m = compiled._orig_mod
    m.zero_grad()
    got.sum().backward()
    assert m[0].weight.grad is None and m[0].bias.grad is not None


def test_global_module_hook_is_a_guard():
    from ember.nn.modules.module import register_module_forward_hook
    handle = []

    def change(m):
        handle.append(register_module_forward_hook(   # (the compiled wrapper is a Module too)
            lambda mod, a, out: out * 2.0 if isinstance(mod, nn.Linear) else None))
    try:
        with pytest.warns(GraphBreakWarning):
            got, want, compiled = _module_hit_then(change)
        _close(got, want)
    finally:
        for h in handle:
            h.remove()
    with ember.no_grad():   # the hook removed: compiled again, and the same as eager
        x = ember.randn(5, 6, dtype=f64)
        _close(compiled(x), compiled._orig_mod(x))
