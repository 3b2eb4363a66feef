"""``ember.jit.trace`` and its callables (ember/jit/traced.py): nested argument and output
structures (flatten / unflatten, ember.Size kept), structure errors, a traced module whose
parameters stay live, check_trace catching a trace that does not reproduce eager (an error
when strict, a warning otherwise), outputs that are not tensors, the generated code, and
gradients through the traced callable against eager."""
import warnings

import numpy as np
import pytest

import ember
import ember.jit as jit
import ember.nn as nn
from ember.errors import EmberTypeError
from ember.jit import traced as T


def test_flatten_and_unflatten_round_trip_nested_structures():
    a, b, c = ember.ones(2), ember.zeros(3), ember.ones(1)
    obj = {"x": (a, [b, 3.5]), 1: None, "s": ember.Size([2, 3]), "c": c}
    tensors, paths = [], []
    spec = T.flatten(obj, "in", tensors, paths)
    assert tensors == [a, b, c] and paths == ["in.x.0", "in.x.1.0", "in.c"]
    back = T.unflatten(spec, iter(tensors))
    assert back["x"][0] is a and back["x"][1][0] is b and back["x"][1][1] == 3.5
    assert isinstance(back["x"], tuple) and isinstance(back["x"][1], list)
    assert type(back["s"]) is ember.Size and tuple(back["s"]) == (2, 3)
    assert back[1] is None and back["c"] is c


def test_flatten_refuses_what_it_cannot_carry():
    with pytest.raises(EmberTypeError, match="dict keys must be str or int"):
        T.flatten({(1, 2): ember.ones(1)}, "in", [], [])
    with pytest.raises(EmberTypeError, match="cannot flatten a object at 'in.0'"):
        T.flatten([object()], "in", [], [])


def test_nested_inputs_and_outputs_match_eager():
    def f(d, pair):
        x, y = pair
        return {"sum": d["a"] + x, "parts": [x * y, d["b"].relu()]}
    d = {"a": ember.randn(3), "b": ember.randn(3)}
    pair = (ember.randn(3), ember.randn(3))
    t = jit.trace(f, (d, pair))
    d2 = {"a": ember.randn(3), "b": ember.randn(3)}
    pair2 = (ember.randn(3), ember.randn(3))
    got, want = t(d2, pair2), f(d2, pair2)
    np.testing.assert_allclose(got["sum"].numpy(), want["sum"].numpy())
    for g, w in zip(got["parts"], want["parts"]):
        np.testing.assert_allclose(g.numpy(), w.numpy())
    with pytest.raises(EmberTypeError, match="expected a sequence of 2 items"):
        t(d2, (pair2[0],))
    with pytest.raises(EmberTypeError, match="expected a Tensor"):
        t(d2, (pair2[0], 1.0))
    with pytest.raises(EmberTypeError, match="expected a dict"):
        t([d2["a"]], pair2)


def test_traced_module_keeps_parameters_live():
    m = nn.Linear(4, 2)
    tm = jit.trace(m, (ember.randn(5, 4),))
    assert isinstance(tm, jit.TracedModule)
    assert [n for n, _ in tm.named_parameters()] == ["weight", "bias"]
    x = ember.randn(5, 4)
    with ember.no_grad():
        m.weight.mul_(2.0)
    np.testing.assert_allclose(tm(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    assert set(tm.state_dict()) == {"weight", "bias"}


def test_gradients_through_the_trace_match_eager():
    w = ember.randn(3, requires_grad=True)

    def f(x):
        return (x * w).tanh().sum()
    t = jit.trace(f, (ember.randn(3),))
    x1 = ember.randn(3, requires_grad=True)
    t(x1).backward()
    gx, gw = x1.grad.numpy().copy(), w.grad.numpy().copy()
    w.grad = None
    x2 = ember.tensor(x1.detach().numpy(), requires_grad=True)
    f(x2).backward()
    np.testing.assert_allclose(gx, x2.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(gw, w.grad.numpy(), rtol=1e-6)


def test_check_trace_catches_a_trace_that_does_not_reproduce_eager():
    """The check re-runs the trace on the example inputs: a function that writes its input in
    place gives other outputs the second time."""
    def f(x):
        x.add_(1.0)
        return x * 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(T.TracingCheckError, match="does not reproduce the eager outputs"):
            jit.trace(f, (ember.ones(2),))
        with pytest.warns(UserWarning, match="does not reproduce"):
            jit.trace(f, (ember.ones(2),), strict=False)
        t = jit.trace(f, (ember.ones(2),), check_trace=False)
    np.testing.assert_array_equal(t(ember.zeros(2)).numpy(), [2.0, 2.0])


def test_check_trace_allows_rounding_of_the_outputs_largest_magnitude():
    """ember's algorithm choice may change between two runs of a model (the autotuner): the
    check accepts differences within the tolerance of the output's largest magnitude (entries
    near zero of large logits), and still rejects larger ones and moved NaNs or infinities."""
    def close(a, b):
        return T._outputs_close(ember.tensor(np.array(a, np.float32)),
                                ember.tensor(np.array(b, np.float32)), 1e-5, 1e-5)
    assert close([5000.0, 2e-3], [5000.0, 0.0])          # 2e-3 <= 1e-5 + 1e-5 * 5000
    assert not close([5000.0, 0.2], [5000.0, 0.0])
    assert not close([1.0, 2e-3], [1.0, 0.0])             # small outputs: no such slack
    assert close([np.inf, np.nan, 1.0], [np.inf, np.nan, 1.0])
    assert not close([np.inf, 1.0, 1e4], [1.0, 1.0, 1e4])
    assert not close([np.nan, 1.0, 1e4], [np.inf, 1.0, 1e4])


def test_outputs_must_be_tensors_when_strict_and_code_is_python():
    from ember.jit.tracer import TracingError
    with pytest.raises(TracingError, match=r"non-tensor values \[\('output.1', 3\)\]"):
        jit.trace(lambda x: (x + 1, 3), (ember.ones(2),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = jit.trace(lambda x: (x + 1, 3), (ember.ones(2),), strict=False)
    y, n = t(ember.zeros(2))
    assert n == 3 and (y.numpy() == 1).all()
    compile(t.code, "<traced>", "exec")
