"""Graph breaks as compiled segments (ember/compiler/segments.py): the code before and after a
break compiled, results equal to eager's in float64, gradients through the segments."""
import copy
import warnings

import numpy as np
import pytest

import ember
import ember.autograd._generated.functions as generated
import ember.nn as nn
from ember.compiler.frontend import CompiledAutograd, GraphBreakError, GraphBreakWarning
from ember.compiler.segments import Segmented

f64 = ember.float64


@pytest.fixture
def dispatches(monkeypatch):
    """The number of ops dispatched eagerly (through autograd's dispatch) since the last read."""
    count = [0]
    orig = generated.dispatch

    def counting(*a, **k):
        count[0] += 1
        return orig(*a, **k)
    monkeypatch.setattr(generated, "dispatch", counting)

    def read():
        n, count[0] = count[0], 0
        return n
    return read


def _segmented(compiled):
    entries = [e.traced for e in compiled._compiled._entries.values()]
    assert len(entries) == 1 and isinstance(entries[0], Segmented)
    return entries[0]


def _same(a, b):
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert a.dtype == b.dtype


def _close(a, b):
    """Gradients: a compiled backward program may sum contributions in another order."""
    a, b = a.detach().numpy(), b.detach().numpy()
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(b).max()))


def _close_grads_and_clear(model, ref):
    """The compiled model's parameter gradients close to the eager copy's; both cleared."""
    for p, q in zip(model.parameters(), ref.parameters()):
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            _close(p.grad, q.grad)
        p.grad = q.grad = None


def test_both_branches_of_a_tensor_condition_compiled_across_calls(dispatches):
    body = []

    def f(x):
        body.append(1)
        y = x * 2
        if y.sum() > 0:
            return y.exp() + 1
        return y - 1

    c = ember.compile(f)
    rng = np.random.default_rng(0)
    xs = [ember.tensor(rng.standard_normal(5) + s, dtype=f64) for s in (3, -3, 3, -3, -3, 3)]
    want = [f(x) for x in xs]
    body.clear()
    dispatches()
    got = [c(x) for x in xs]
    for a, b in zip(got, want):
        _same(a, b)
    # the Python body ran once per branch (two traces); the other four calls ran the compiled
    # segments only: no op dispatched eagerly
    assert len(body) == 2
    seg = _segmented(c)
    assert seg.runs == 4 and len(seg.paths) == 2
    assert len(c._compiled.graphs) == 4    # before and after the break, for each branch
    assert not c._compiled.breaks
    dispatches()
    c(xs[0])
    c(xs[1])
    assert dispatches() == 0
    # the read's value is a guard of the code after it
    assert "a value Python read changed: False (traced for True)" in c._compiled.recompiles[0]
    assert "test_segments.py" in c._compiled.recompiles[0]


def test_explain_reports_segments_and_the_break_line():
    def f(x):
        y = x * 2
        if y.sum().item() > 0:
            return y + 1
        return -y

    e = ember.explain(f, ember.ones(3, dtype=f64))
    assert e.graph_count == 2 and e.graph_break_count == 1
    assert [k for k in e.ops_per_graph[0]] == ["mul", "sum"] and e.op_count == 3
    r = str(e.break_reasons[0])
    assert "item()" in r and "test_segments.py" in r and "if y.sum().item() > 0:" in r
    assert "Graph Count: 2" in str(e) and "Graph Break Count: 1" in str(e)


def test_item_used_in_arithmetic():
    body = []

    def f(x, y):
        body.append(1)
        v = x.max().item()
        return (y * v + x).sin()

    c = ember.compile(f)
    rng = np.random.default_rng(1)
    xa = ember.tensor(rng.standard_normal(4), dtype=f64)
    xb = ember.tensor(rng.standard_normal(4), dtype=f64)
    y = ember.tensor(rng.standard_normal(4), dtype=f64)
    for x in (xa, xb, xa, xb, xa):
        _same(c(x, y), f(x, y))
    # one trace per value read (a float Python saw is a guard, as an int or a bool)
    assert len(body) == 2 + 5 and len(_segmented(c).paths) == 2


def test_tolist():
    def f(x, y):
        a, b = x.tolist()
        return y * a - b, a + b

    c = ember.compile(f)
    y = ember.arange(3.0, dtype=f64)
    for v in ((1.5, 2.0), (0.25, -1.0), (1.5, 2.0)):
        x = ember.tensor(v, dtype=f64)
        (ga, gb), (wa, wb) = c(x, y), f(x, y)
        _same(ga, wa)
        assert gb == wb
    assert _segmented(c).runs == 1


def test_a_loop_whose_trip_count_is_a_tensor_value(dispatches):
    def f(x, n):
        for _ in range(int(n)):
            x = x * 1.5 + 0.25
        return x.tanh()

    c = ember.compile(f)
    x = ember.tensor(np.random.default_rng(2).standard_normal(6), dtype=f64)
    for k in (1, 3, 0, 3, 1, 0, 3):
        n = ember.tensor(k)
        _same(c(x, n), f(x, n))
    seg = _segmented(c)
    assert len(seg.paths) == 3 and seg.runs == 4
    dispatches()
    c(x, ember.tensor(3))
    assert dispatches() == 0


def test_a_while_loop_on_a_tensor_condition():
    def f(x):
        while x.sum() > 1:
            x = x * 0.5
        return x + 1

    c = ember.compile(f)
    for s in (4.0, 0.5, 4.0, 20.0, 0.5):
        x = ember.full((3,), s, dtype=f64)
        _same(c(x), f(x))


class _Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.b = nn.Linear(8, 3)
        self.c = nn.Linear(8, 3)

    def forward(self, x):
        h = self.a(x).tanh()
        if h.mean() > 0:     # the break inside the module's forward
            return self.b(h)
        return self.c(h) * 2.0


def test_a_break_inside_a_module_forward_with_gradients_through_the_segments():
    ember.manual_seed(0)
    model = _Gate().double()
    ref = copy.deepcopy(model)
    compiled = ember.compile(model)
    rng = np.random.default_rng(3)
    for i in range(6):
        data = rng.standard_normal((5, 4)) + (1.5 if i % 2 else -1.5)
        x1 = ember.tensor(data, dtype=f64, requires_grad=True)
        x2 = ember.tensor(data, dtype=f64, requires_grad=True)
        out, want = compiled(x1), ref(x2)
        _same(out, want)
        assert out.requires_grad and out.grad_fn is not None
        (out * out).sum().backward()
        (want * want).sum().backward()
        _close(x1.grad, x2.grad)     # into the first segment's input, through both
        _close_grads_and_clear(model, ref)
    seg = _segmented(compiled)
    assert len(seg.paths) == 2 and seg.runs == 4
    # every segment ran its compiled forward and backward programs (checked once vs eager)
    runners = [e[1]._last.traced for p in seg.paths for e in p._grad_fns if e is not None]
    assert len(runners) == 4 and all(isinstance(r, CompiledAutograd) for r in runners)
    # parameters are formals read at every call: an update is seen
    with ember.no_grad():
        for p, q in zip(model.parameters(), ref.parameters()):
            p.mul_(0.5)
            q.mul_(0.5)
    x = ember.tensor(rng.standard_normal((5, 4)) + 1.5, dtype=f64)
    _same(compiled(x), ref(x))


def test_random_draws_and_in_place_writes_before_a_break_happen_once():
    # a path whose read disagrees ran its first segment: its draw and its write are undone
    # before the other path (or a new trace) runs, so every call draws and writes once
    def make(buf):
        def f(x):
            y = x + ember.rand(3, dtype=f64)
            buf.add_(y)
            if y.sum() > 3.5:
                return y * 2
            return y - 1
        return f
    buf_c, buf_e = ember.zeros(3, dtype=f64), ember.zeros(3, dtype=f64)
    c, e = ember.compile(make(buf_c)), make(buf_e)
    for i, v in enumerate((1.0, 0.0, 1.0, 0.0, 0.5, 1.0, 0.0)):
        x = ember.full((3,), v, dtype=f64)
        ember.manual_seed(i)
        got, next_c = c(x), ember.rand(2, dtype=f64)
        ember.manual_seed(i)
        want, next_e = e(x), ember.rand(2, dtype=f64)
        _same(got, want)
        _same(buf_c, buf_e)
        _same(next_c, next_e)      # the generator advanced as eager's
    seg = _segmented(c)
    assert len(seg.paths) == 2 and seg.runs == 5 and seg.switches >= 2


def test_fullgraph_raises_graph_break_error_naming_the_users_line():
    def f(x):
        y = x * 2
        if y.sum() > 0:
            return y
        return -y

    with pytest.raises(GraphBreakError, match=r"bool\(\).*test_segments.py:\d+: `if y.sum\(\) > 0:`"):
        ember.compile(f, fullgraph=True)(ember.ones(3, dtype=f64))


def test_segments_off_runs_the_function_eagerly_for_those_guards():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1

    c = ember.compile(f, options={"segments": False})
    with pytest.warns(GraphBreakWarning, match=r"bool\(\).*test_segments.py"):
        _same(c(ember.ones(3, dtype=f64)), f(ember.ones(3, dtype=f64)))
    _same(c(-ember.ones(3, dtype=f64)), f(-ember.ones(3, dtype=f64)))
    assert not c._compiled.graphs


def test_a_training_step_with_a_break_stays_eager_and_reported():
    ember.manual_seed(0)
    model = nn.Linear(3, 2).double()
    ref = copy.deepcopy(model)

    def make(m):
        opt = ember.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = (m(x) ** 2).mean()
            loss.backward()
            if loss.item() > 0.01:   # the break in a captured training step
                opt.step()
            return loss.detach()
        return step
    c, e = ember.compile(make(model)), make(ref)
    rng = np.random.default_rng(4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = ember.tensor(rng.standard_normal((4, 3)), dtype=f64)
            _same(c(x), e(x))
    assert any(issubclass(w.category, GraphBreakWarning) and "item()" in str(w.message)
               for w in caught)
    for p, q in zip(model.parameters(), ref.parameters()):
        _same(p, q)


def test_the_cache_size_limit_bounds_the_paths():
    def f(x):
        return x * x.sum().item()

    c = ember.compile(f)
    c._compiled.recompile_limit = 2
    with pytest.warns(ember.compiler.frontend.RecompileWarning, match="paths through its graph"):
        for v in (1.0, 2.0, 3.0, 4.0):
            x = ember.full((2,), v, dtype=f64)
            _same(c(x), f(x))
    assert len(_segmented(c).paths) == 2


class _Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(4, 6)
        self.bn = nn.BatchNorm1d(6)
        self.d = nn.Dropout(0.3)
        self.o = nn.Linear(6, 2)

    def forward(self, x):
        h = self.d(self.bn(self.l(x)).relu())
        if h[0].sum() > 3.0:
            return self.o(h)
        return self.o(h * 0.5) - 1


def test_batch_norm_and_dropout_across_both_branches_with_gradients():
    # running statistics written and dropout drawn before the break: once per call whichever
    # path serves it (a path whose read disagrees is undone first); outputs, gradients and
    # buffers as eager's, bit for bit
    ember.manual_seed(0)
    model = _Noisy().double()
    ref = copy.deepcopy(model)
    compiled = ember.compile(model)
    rng = np.random.default_rng(0)
    for i in range(8):
        data = rng.standard_normal((5, 4)) * (3 if i % 3 else 0.1)
        x1 = ember.tensor(data, dtype=f64, requires_grad=True)
        x2 = ember.tensor(data, dtype=f64, requires_grad=True)
        ember.manual_seed(i)
        got = compiled(x1)
        ember.manual_seed(i)
        want = ref(x2)
        _same(got, want)
        got.sum().backward()
        want.sum().backward()
        _close(x1.grad, x2.grad)
        for p, q in zip(model.buffers(), ref.buffers()):
            _same(p, q)
        _close_grads_and_clear(model, ref)
    seg = _segmented(compiled)
    assert len(seg.paths) == 2 and seg.runs >= 4


class _Keyed(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x, scale=None):
        h = self.lin(x)
        if h.sum() > 0:
            return {"a": h * scale, "b": [h, h.sum()]}
        return {"a": h, "b": [h - 1, h.mean()]}


def test_keyword_arguments_and_nested_outputs_through_segments():
    ember.manual_seed(0)
    model = _Keyed().double()
    compiled = ember.compile(model)
    scale = ember.tensor(2.0, dtype=f64)
    with ember.no_grad():
        for v in (1.0, -1.0, 1.0, -1.0):
            x = ember.full((3, 2), v, dtype=f64)
            got, want = compiled(x, scale=scale), model(x, scale=scale)
            assert set(got) == {"a", "b"} and isinstance(got["b"], list)
            _same(got["a"], want["a"])
            _same(got["b"][0], want["b"][0])
            _same(got["b"][1], want["b"][1])
    assert _segmented(compiled).runs == 2
    e = ember.explain(model, ember.ones(3, 2, dtype=f64), scale=scale)
    assert e.graph_break_count == 1 and e.graph_count >= 1
