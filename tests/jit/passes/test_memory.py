"""The memory plan of array-mode programs (ember/jit/passes/memory.py) and the code that runs it
(codegen's arena buffers): planned results equal the unplanned program's and eager's, no two
values live at once share a buffer, views keep their source's buffer alive, what a program
returns is never arena memory, and an arena reused across calls gives fresh buffers' results."""
import warnings

import numpy as np
import pytest

import ember
import ember.jit as jit
from ember.jit import fused
from ember.jit.codegen import compile_graph
from ember.jit.passes import fuse, run_passes
from ember.jit.passes.memory import plan_memory

N = 6


def _graph(fn, *xs, fused_groups=True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = jit.trace(fn, xs, check_trace=False).graph.copy()
    g = run_passes(g, ["simplify", "cse", "dce"])
    if fused_groups:
        g = fuse(g, min_size=1)
    return g


def _compiled(g):
    plan = plan_memory(g)
    fn, src = compile_graph(g, "array", "f", plan=plan)
    return fn, src, plan


def _values(g):
    return {id(v): v for v in g.values()}


def _live_sets_disjoint(g, plan):
    """No two planned values whose lifetimes overlap share a buffer."""
    items = [(plan.slot[k], *plan.lifetimes[k]) for k in plan.slot]
    for i, (b1, s1, e1) in enumerate(items):
        for b2, s2, e2 in items[i + 1:]:
            if b1 == b2:
                assert e1 < s2 or e2 < s1, (b1, (s1, e1), (s2, e2))


def _into_dying_values(g, plan):
    """Each in-place reuse targets an argument of the writing node made inside the program
    (not a formal), read by no later node, directly or through a view, nor returned."""
    index = {id(n): i for i, n in enumerate(g.nodes)}
    writer = {id(o): n for n in g.nodes for o in n.outputs}
    for k, a in plan.into.items():
        n = writer[k]
        assert a in n.args and a.node is not None and a.node.kind != "constant"
        assert a not in g.outputs
        later = [m for m in g.nodes[index[id(n)] + 1:] if a in m.inputs]
        assert not later, (a, later)


def _random_program(rng, n_ops):
    """A function of three (N, N) inputs: a random mix of GEMMs, arithmetic, ReLU, transposes,
    reshapes and sums reading random earlier values; returns the last and up to two others
    (views included)."""
    ops = []
    for _ in range(n_ops):
        k = rng.choice(["mm", "add", "mul", "sub", "scale", "relu", "t", "view", "sum"])
        ops.append((k, rng.integers(0, 1 << 30, 2)))
    picks = rng.integers(0, 1 << 30, int(rng.integers(0, 3)))

    def f(a, b, c):
        pool = [a, b, c]

        def pick(r):
            return pool[int(r) % len(pool)]
        for k, (r1, r2) in ops:
            x, y = pick(r1), pick(r2)
            if k == "mm":
                v = x @ y
            elif k == "add":
                v = x + y
            elif k == "mul":
                v = x * y
            elif k == "sub":
                v = x - y
            elif k == "scale":
                v = x * 0.5
            elif k == "relu":
                v = x.relu()
            elif k == "t":
                v = x.t()
            elif k == "view":
                v = x.reshape(N * N).reshape(N, N)
            else:
                v = x.sum(0, keepdim=True) + y
            pool.append(v)
        return (pool[-1],) + tuple(pick(p) for p in picks)
    return f


@pytest.mark.parametrize("kernel", [False, True])
def test_random_programs_with_a_plan_equal_eager_and_the_unplanned_program(monkeypatch, kernel):
    if kernel:     # fusion groups through the engine's kernel (writing into their buffers)
        monkeypatch.setattr(fused, "FORCE", "kernel")
        monkeypatch.setattr(fused, "BACKEND", "numpy")
    rng = np.random.default_rng(0)
    planned_total = shared = into_total = 0
    for _ in range(40):
        f = _random_program(rng, int(rng.integers(4, 30)))
        xs = [ember.tensor(rng.standard_normal((N, N))) for _ in range(3)]
        g = _graph(f, *xs)
        fn, _, plan = _compiled(g)
        plain = compile_graph(g, "array", "f")[0]
        _live_sets_disjoint(g, plan)
        _into_dying_values(g, plan)
        into_total += len(plan.into)
        planned_total += len(plan)
        shared += len(plan) - len(plan.buffers)
        for _ in range(2):      # the second call reuses the arena
            xs = [rng.standard_normal((N, N)) for _ in range(3)]
            want = f(*[ember.tensor(x) for x in xs])
            got = fn(*xs)
            ref = plain(*xs)
            for w, a, r in zip(want, got, ref):
                np.testing.assert_allclose(a, w.numpy(), rtol=1e-12, atol=1e-12)
                np.testing.assert_array_equal(a, r)
    assert planned_total >= 10 and shared > 0 and into_total > 0   # planned, shared, reused


def test_a_view_keeps_its_sources_buffer_alive():
    def f(x, w, w2):
        a = x @ w          # read later only through its transpose
        v = a.t()
        b = x @ w2         # same shape: would take a's buffer if the view were not seen
        return v @ b
    xs = [ember.tensor(np.random.default_rng(1).standard_normal((N, N))) for _ in range(3)]
    g = _graph(f, *xs)
    fn, src, plan = _compiled(g)
    mms = [n.output for n in g.nodes if n.kind in ("matmul", "mm")]
    assert id(mms[0]) in plan.slot and id(mms[1]) in plan.slot
    assert plan.slot[id(mms[0])] != plan.slot[id(mms[1])]
    np.testing.assert_allclose(fn(*[x.numpy() for x in xs])[0], f(*xs).numpy(), rtol=1e-12)


def test_a_dead_buffer_is_reused_for_a_later_value_of_its_shape():
    def f(x, w):
        a = (x @ w).relu()
        b = (a @ w).relu()
        c = (b @ w).relu()
        return (c @ w).sum()
    xs = [ember.tensor(np.random.default_rng(2).standard_normal((N, N))) for _ in range(2)]
    g = _graph(f, *xs, fused_groups=False)
    fn, src, plan = _compiled(g)
    assert len(plan) == 4 and len(plan.buffers) == 2     # two alternate, four GEMMs
    np.testing.assert_allclose(fn(*[x.numpy() for x in xs])[0], f(*xs).numpy(), rtol=1e-12)


def test_what_a_program_returns_is_never_arena_memory():
    def f(x, w):
        a = x @ w
        h = (a * 2.0) @ w
        return a.t(), h
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((N, N)) for _ in range(2)]
    g = _graph(f, *[ember.tensor(x) for x in xs], fused_groups=False)
    fn, _, plan = _compiled(g)
    values = _values(g)
    mm = [n.output for n in g.nodes if n.kind in ("matmul", "mm")]
    assert id(mm[0]) not in plan.slot and id(mm[1]) not in plan.slot
    assert any(values[k].node.kind == "mul" for k in plan.slot)      # the product is planned
    first = [np.array(r) for r in fn(*xs)]
    kept = fn(*xs)
    fn(*[x + 1 for x in xs])          # another call: what the first one returned stays
    for a, b in zip(first, kept):
        np.testing.assert_array_equal(a, b)
    arena = [v for k, v in fn.__globals__.items() if k.startswith("arena_")]
    assert arena and not any(np.shares_memory(a, r) for a in arena for r in kept)


def test_an_arena_reused_across_calls_gives_fresh_buffers_results():
    def f(x, w, b):
        h = ember.nn.functional.linear(x, w, b).relu()
        return (h @ w.t() - x).sum()
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((8, N)), rng.standard_normal((N, N)), rng.standard_normal(N)]
    g = _graph(f, *[ember.tensor(x) for x in xs], fused_groups=False)
    fn, src, plan = _compiled(g)
    assert "linear_into" in src and "arena_" in src
    arena = [fn.__globals__[f"arena_{i}"] for i in range(len(plan.buffers))]
    inputs = [[x * s for x in xs] for s in (1.0, -2.0, 1.0, 0.25)]
    for ins in inputs:
        fresh = compile_graph(g, "array", "f", plan=plan_memory(g))[0]   # a new arena
        np.testing.assert_array_equal(fn(*ins)[0], fresh(*ins)[0])
        np.testing.assert_allclose(fn(*ins)[0], f(*[ember.tensor(x) for x in ins]).numpy(),
                                   rtol=1e-12)
    assert all(fn.__globals__[f"arena_{i}"] is a for i, a in enumerate(arena))


def test_buffers_of_another_shape_fall_back_to_new_arrays():
    def f(x, w):
        return ((x @ w) * 3.0).sum(0)
    rng = np.random.default_rng(5)
    g = _graph(f, *[ember.tensor(rng.standard_normal(s)) for s in ((4, N), (N, N))],
               fused_groups=False)
    fn, _, plan = _compiled(g)
    assert len(plan) == 2
    x, w = rng.standard_normal((7, N)), rng.standard_normal((N, N))    # other rows
    np.testing.assert_allclose(fn(x, w)[0], ((x @ w) * 3.0).sum(0), rtol=1e-12)


def _reused(g, plan, kind):
    return [(n, plan.into[id(n.outputs[0])]) for n in g.nodes
            if n.kind == kind and id(n.outputs[0]) in plan.into]


def test_an_elementwise_result_takes_the_memory_of_an_argument_dying_at_its_node():
    def f(x, w):
        return ((x @ w) * 2.0 + 1.0).sum(0)
    xs = [np.random.default_rng(6).standard_normal((N, N)) for _ in range(2)]
    g = _graph(f, *[ember.tensor(x) for x in xs], fused_groups=False)
    plan = plan_memory(g, arena=False)
    assert not plan.buffers and not plan.slot
    (mul, prod), = _reused(g, plan, "mul")
    (add, scaled), = _reused(g, plan, "add")
    assert prod.node.kind in ("matmul", "mm") and scaled is mul.output
    fn, src = compile_graph(g, "array", "f", plan=plan)
    assert src.count("binary_into(") == 2 and "arena_" not in src
    np.testing.assert_allclose(fn(*xs)[0], ((xs[0] @ xs[1]) * 2.0 + 1.0).sum(0), rtol=1e-12)


def test_no_reuse_of_a_formal_a_value_read_later_or_a_returned_value():
    def f(x, w):
        h = x @ w
        a = x * 2.0          # x: the caller's array
        b = h * 3.0          # h is read again below
        c = (a + h) - b      # (its last reader: h is returned)
        return c, h
    xs = [np.random.default_rng(7).standard_normal((N, N)) for _ in range(2)]
    g = _graph(f, *[ember.tensor(x) for x in xs], fused_groups=False)
    plan = plan_memory(g, arena=False)
    _into_dying_values(g, plan)
    targets = {id(a) for a in plan.into.values()}
    h = next(n.output for n in g.nodes if n.kind in ("matmul", "mm"))
    assert id(g.inputs[0]) not in targets and id(h) not in targets
    fn, _ = compile_graph(g, "array", "f", plan=plan)
    x, w = xs
    x0 = x.copy()
    got = fn(x, w)
    np.testing.assert_allclose(got[0], (x * 2.0 + x @ w) - (x @ w) * 3.0, rtol=1e-12)
    np.testing.assert_allclose(got[1], x @ w, rtol=1e-12)
    np.testing.assert_array_equal(x, x0)     # the caller's array untouched


@pytest.mark.parametrize("kernel", [False, True])
def test_a_fusion_group_writes_into_its_dying_argument_and_may_be_returned(monkeypatch, kernel):
    if kernel:
        monkeypatch.setattr(fused, "FORCE", "kernel")
        monkeypatch.setattr(fused, "BACKEND", "numpy")

    def f(x, w):
        return ((x @ w) * 0.5 + 1.0).tanh()
    xs = [np.random.default_rng(8).standard_normal((N, N)) for _ in range(2)]
    g = _graph(f, *[ember.tensor(x) for x in xs])
    plan = plan_memory(g, arena=True)
    (grp, prod), = _reused(g, plan, "fusion_group")
    assert prod.node.kind in ("matmul", "mm") and id(prod) not in plan.slot   # returned
    fn, src = compile_graph(g, "array", "f", plan=plan)
    assert "arena_" not in src
    first = fn(*xs)[0]
    again = fn(*xs)[0]
    assert first is not again and not np.shares_memory(first, again)
    np.testing.assert_allclose(first, np.tanh((xs[0] @ xs[1]) * 0.5 + 1.0), rtol=1e-12)
    np.testing.assert_array_equal(first, again)
