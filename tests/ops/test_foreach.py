"""torch._foreach_*: each op over a list of tensors, with a scalar, scalars, tensors or one
tensor as the other operand; results, in-place updates and return types as torch's."""
import numpy as np
import pytest

import ember
from ember.ops import foreach

torch = pytest.importorskip("torch")

_DATA = [np.array([0.3, 0.7]), np.array([[0.2, 0.9], [0.5, 0.6]])]


def _lists(m, scale=1.0):
    return [m.tensor(d * scale) for d in _DATA]


def _call(m, name):
    """``name`` applied as a program would, on fresh tensors of ``m``."""
    fn = getattr(m, name)
    op = name[len("_foreach_"):].rstrip("_")
    a, b, c = _lists(m), _lists(m, 0.5), _lists(m, 2.0)
    if op in foreach.UNARY:
        return a, fn(a)
    if op in foreach.BINARY:
        other = {"pow": 2.0}.get(op, b)
        return a, fn(a, other)
    if op == "lerp":
        return a, fn(a, b, 0.25)
    if op in ("addcmul", "addcdiv"):
        return a, fn(a, b, c, value=0.5)
    if op == "copy":
        return a, fn(a, b)
    return a, fn(a)


@pytest.mark.parametrize("name", sorted(foreach.FUNCTIONS))
def test_foreach_matches_torch(name):
    (ta, tout), (ea, eout) = _call(torch, name), _call(ember, name)
    assert type(eout) is type(tout)
    inplace = name.endswith("_")
    if inplace:
        assert eout is ea and tout is ta
    results = zip(ea, ta) if inplace else zip(eout, tout)
    for e, t in results:
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("other", ["scalar", "scalars", "tensor", "alpha"])
def test_the_other_operand_forms_as_torch(other):
    outs = []
    for m in (torch, ember):
        a, b = _lists(m), _lists(m, 0.5)
        arg, kw = {"scalar": (0.5, {}), "scalars": ([0.5, 2.0], {}),
                   "tensor": (m.tensor(3.0, dtype=m.float64), {}),
                   "alpha": (b, {"alpha": -2.0})}[other]
        outs.append([x.numpy() for x in m._foreach_add(a, arg, **kw)])
    for e, t in zip(*outs[::-1]):
        np.testing.assert_allclose(e, t, rtol=1e-12)


def test_bad_lists_raise_as_torch():
    for m in (torch, ember):
        with pytest.raises(RuntimeError, match="at least one tensor"):
            m._foreach_mul_([], 2.0)
        with pytest.raises(RuntimeError, match="same number of tensors, got 1 and 2"):
            m._foreach_add([m.ones(1)], [m.ones(1), m.ones(1)])
    with pytest.raises(AttributeError):
        ember._foreach_nonexistent
