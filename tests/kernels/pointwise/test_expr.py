"""Symbolic pointwise values (``expr.Sym``/``Builder``): what each operator and method emits."""
import numpy as np
import pytest

import ember
from ember.kernels.pointwise import Builder, apply
from ember.kernels.pointwise.expr import vocabulary as V


def test_operators_and_methods_emit_steps_in_operand_order():
    b = Builder(("x", "y"))
    x, y = b.inputs
    out = (2.0 - x) * y / (x ** 2) + (-y).sigmoid() - x.maximum(y)
    e = b.expr(out, (x > y).where(x, 0.0))
    ops = [(op, args) for _, op, args in e.steps]
    assert ops[:4] == [("sub", (2.0, "x")), ("mul", ("t0", "y")), ("pow", ("x", 2)),
                       ("div", ("t1", "t2"))]
    assert ("sigmoid", ("t4",)) in ops and ("maximum", ("x", "y")) in ops
    assert ops[-1] == ("where", ("t9", "x", 0.0)) and ops[-2] == ("gt", ("x", "y"))
    xs = np.linspace(0.5, 2, 5, dtype=np.float32)
    ys = np.linspace(-1, 1, 5, dtype=np.float32)
    r, w = apply(e, xs, ys, backend="numpy")
    ref = (2.0 - xs) * ys / xs ** 2 + 1 / (1 + np.exp(ys)) - np.maximum(xs, ys)
    np.testing.assert_allclose(r, ref, rtol=1e-6)
    np.testing.assert_array_equal(w, np.where(xs > ys, xs, 0))


def test_dedupe_reuses_equal_steps_and_bind_does_not():
    b = Builder(("x",), prefix="d", dedupe=True)
    (x,) = b.inputs
    assert (x.sigmoid() * x.sigmoid()).name == "d1"
    assert [s[1] for s in b.steps] == ["sigmoid", "mul"]
    assert (x * 1).name != (x * 1.0).name  # constants are compared by type and value
    assert b.bind("sigmoid", "x").name not in ("d0",)


def test_vocabulary_functions_cast_and_errors():
    b = Builder(("x",))
    (x,) = b.inputs
    c = V.cast(x, ember.float64)
    assert b.steps[-1] == (c.name, "cast", ("x", "float64"))
    with pytest.raises(TypeError, match="no truth value"):
        bool(x > 0)
    with pytest.raises(TypeError, match="symbolic operand"):
        V.add(1.0, 2.0)
    other = Builder(("y",)).inputs[0]
    with pytest.raises(ValueError, match="another expression"):
        x + other
