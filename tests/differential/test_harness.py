"""The differential tester itself: it fails on a wrong result, a wrong dtype, a wrong error
and a wrong gradient, prints a reproducer that replays, and builds every layout faithfully."""
import numpy as np
import pytest

import ember
from tests.differential import exclusions as X
from tests.differential import harness as H
from tests.differential.harness import Case, T

torch = pytest.importorskip("torch")


def _case(op="add", form="function", dtype="float32", layout=(), grad=False):
    a = T(np.arange(12, dtype=np.float64).reshape(3, 4) / 7, dtype, layout, grad=grad)
    b = T(np.linspace(-1, 1, 4), dtype, (), grad=grad)
    return Case("spec", op, form, [a, b], grad=grad)


@pytest.mark.parametrize("layout", [(), (("t", 0, 1),), (("slice", 1, 1),), (("neg", 0),),
                                    (("expand", 0, 3),), (("t", 0, 1), ("slice", 0, 0))])
def test_layouts_hold_the_values_in_both_libraries(layout):
    values = np.arange(12.0).reshape(3, 4)
    t = T(H._expand_values(values, layout), "float32", layout)
    e, _ = H.build(t, "ember")
    tt, _ = H.build(t, "torch")
    np.testing.assert_array_equal(np.asarray(e._data), t.values)
    np.testing.assert_array_equal(tt.numpy(), t.values)
    strides = e.stride()
    if layout and layout[0][0] == "neg":
        assert strides[0] < 0
    if layout and layout[0][0] == "expand":
        assert strides[0] == 0
    if layout and layout[-1][0] == "slice":
        assert not e.is_contiguous() and not tt.is_contiguous()


@pytest.mark.parametrize("dtype", ["int64", "bfloat16", "complex64"])
def test_zero_dim_tensors_stay_zero_dim(dtype):
    t = T(np.array(3), dtype)
    assert H.build(t, "ember")[0].shape == () and tuple(H.build(t, "torch")[0].shape) == ()


def test_matching_case_passes():
    assert H.check(_case()).status == "match"
    assert H.check(_case(form="inplace", layout=(("slice", 1, 0),))).status == "match"
    assert H.check(_case(op="mul", dtype="float64", grad=True)).status == "match"


def test_wrong_value_fails_with_a_reproducer(monkeypatch):
    real = ember.add
    monkeypatch.setattr(ember, "add", lambda a, b, **kw: real(a, b, **kw) * 1.001)
    with pytest.raises(H.Divergence) as info:
        H.check(_case())
    text = str(info.value)
    assert "values differ" in text and "replay(Case('spec', 'add'" in text
    assert "float32[3, 4]" in text and "strides=(4, 1)" in text


def test_wrong_dtype_fails(monkeypatch):
    real = ember.add
    monkeypatch.setattr(ember, "add", lambda a, b, **kw: real(a, b, **kw).double())
    with pytest.raises(H.Divergence, match="dtype float64, torch float32"):
        H.check(_case())


def test_wrong_error_class_fails(monkeypatch):
    def raises(a, b, **kw):
        raise ember.errors.EmberTypeError("add: no")
    monkeypatch.setattr(ember, "add", raises)
    with pytest.raises(H.Divergence, match="ember raises EmberTypeError"):
        H.check(_case())
    monkeypatch.undo()
    bad = Case("spec", "add", "function", [T(np.ones(3), "float32"), T(np.ones(4), "float32")])
    assert H.check(bad).status == "both_raised"  # RuntimeError in both


def test_wrong_gradient_fails(monkeypatch):
    real = ember.mul

    def mul(a, b, **kw):  # the right value, a gradient twice too large for a
        return real(a, b) + real(a - a.detach(), b)
    monkeypatch.setattr(ember, "mul", mul)
    with pytest.raises(H.Divergence, match="first-order gradient of leaf 0"):
        H.check(_case(op="mul", dtype="float64", grad=True))


def test_wrong_second_order_gradient_fails(monkeypatch):
    real = ember.mul

    def mul(a, b, **kw):  # right value and first derivative, a spurious second derivative
        d = a - a.detach()
        return real(a, b) + d * d * 0.5
    monkeypatch.setattr(ember, "mul", mul)
    with pytest.raises(H.Divergence, match="second-order gradient"):
        H.check(_case(op="mul", dtype="float64", grad=True))


def test_reproducer_replays(capsys):
    case = _case(layout=(("t", 0, 1),))
    text = H.reproducer(case).split("--- reproduce (repository root):\n")[1]
    exec(text, {})
    assert "verdict: agree" in capsys.readouterr().out


def test_every_exclusion_says_why():
    for entry in X.LEGITIMATE + X.KNOWN_OPEN + X.NEVER_RUN:
        assert entry.name and entry.why, entry.name
    names = [e.name for e in X.LEGITIMATE + X.KNOWN_OPEN + X.NEVER_RUN]
    assert len(names) == len(set(names))
