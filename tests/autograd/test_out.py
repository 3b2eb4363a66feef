"""``out=`` (ember.autograd.out, creation factories) against torch."""
import warnings

import numpy as np
import pytest
import torch

import ember

CASES = {
    "add": lambda m, o: m.add(m.ones(3), m.arange(3.0), out=o(m, 3)),
    "add alpha": lambda m, o: m.add(m.ones(3), m.arange(3.0), alpha=2, out=o(m, 3)),
    "sub": lambda m, o: m.sub(m.ones(3), m.arange(3.0), out=o(m, 3)),
    "mul ints into float": lambda m, o: m.mul(m.arange(3), m.arange(3), out=o(m, 3)),
    "mul float into long": lambda m, o: m.mul(m.arange(3.0), 2, out=o(m, 3, m.int64)),
    "div into float64": lambda m, o: m.div(m.arange(3.0), 2, out=o(m, 3, m.float64)),
    "empty out resized": lambda m, o: m.add(m.ones(3), 1, out=o(m, 0)),
    "matmul": lambda m, o: m.matmul(m.ones(2, 3), m.ones(3, 4), out=o(m, (2, 4))),
    "mm": lambda m, o: m.mm(m.ones(2, 3), m.ones(3, 4), out=o(m, (2, 4))),
    "bmm": lambda m, o: m.bmm(m.ones(2, 2, 3), m.ones(2, 3, 4), out=o(m, (2, 2, 4))),
    "cat": lambda m, o: m.cat([m.ones(2), m.zeros(3)], out=o(m, 5)),
    "stack": lambda m, o: m.stack([m.ones(2), m.zeros(2)], out=o(m, (2, 2))),
    "sum dim": lambda m, o: m.sum(m.ones(2, 3), 1, out=o(m, 2)),
    "sum int into float": lambda m, o: m.sum(m.ones(2, 3, dtype=m.int32), 1, out=o(m, 2)),
    "mean": lambda m, o: m.mean(m.arange(6.0).reshape(2, 3), 0, out=o(m, 3)),
    "max dim": lambda m, o: m.max(m.arange(6.0).reshape(2, 3), 1,
                                  out=(o(m, 2), o(m, 2, m.int64))),
    "max dim bad indices dtype": lambda m, o: m.max(m.arange(6.0).reshape(2, 3), 1,
                                                    out=(o(m, 2), o(m, 2))),
    "min dim": lambda m, o: m.min(m.arange(6.0).reshape(2, 3), 0,
                                  out=(o(m, 3), o(m, 3, m.int64))),
    "exp": lambda m, o: m.exp(m.arange(3.0), out=o(m, 3)),
    "exp into long": lambda m, o: m.exp(m.arange(3.0), out=o(m, 3, m.int64)),
    "log of int into float64": lambda m, o: m.log(m.arange(1, 4), out=o(m, 3, m.float64)),
    "clamp": lambda m, o: m.clamp(m.arange(5.0), 1, 3, out=o(m, 5)),
    "where": lambda m, o: m.where(m.tensor([True, False]), m.ones(2), m.zeros(2), out=o(m, 2)),
    "index_select": lambda m, o: m.index_select(m.arange(6.0).reshape(3, 2), 0,
                                                m.tensor([2, 0]), out=o(m, (2, 2))),
    "gather": lambda m, o: m.gather(m.arange(6.0).reshape(3, 2), 1, m.tensor([[1], [0], [1]]),
                                    out=o(m, (3, 1))),
    "sort": lambda m, o: m.sort(m.tensor([3.0, 1.0, 2.0]), out=(o(m, 3), o(m, 3, m.int64))),
    "normalize": lambda m, o: m.nn.functional.normalize(m.arange(4.0).reshape(2, 2),
                                                        out=o(m, (2, 2))),
    "norm out by position": lambda m, o: m.norm(m.ones(4), "fro", None, False, o(m, ())),
    "zeros": lambda m, o: m.zeros(3, out=o(m, 2)),
    "zeros long out": lambda m, o: m.zeros(2, out=o(m, 2, m.int64)),
    "ones": lambda m, o: m.ones(2, 2, out=o(m, (2, 2))),
    "full": lambda m, o: m.full((2,), 3, out=o(m, 2)),
    "full dtype mismatch": lambda m, o: m.full((2,), 3, dtype=m.float32, out=o(m, 2, m.int64)),
    "arange": lambda m, o: m.arange(5, out=o(m, 0)),
    "empty": lambda m, o: m.empty(4, out=o(m, 4)).shape,
    "randn shape and dtype": lambda m, o: (lambda r: (list(r.shape), str(r.dtype)[-7:]))(
        m.randn(2, out=o(m, 2, m.float64))),
    "rand shape": lambda m, o: list(m.rand(3, 2, out=o(m, 0)).shape),
}


def _empty(m, shape, dtype=None):
    return m.zeros(shape, dtype=dtype if dtype is not None else m.float32)


def _values(t):
    return np.round(np.asarray(t.tolist(), np.float64), 5).tolist()


def _outcome(m, case):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r = CASES[case](m, _empty)
        except RuntimeError:
            return RuntimeError
    if isinstance(r, tuple) and hasattr(r[0], "tolist"):
        return tuple((str(t.dtype).split(".")[-1], _values(t)) for t in r), len(w)
    if hasattr(r, "tolist"):
        return str(r.dtype).split(".")[-1], _values(r), len(w)
    return list(r) if not isinstance(r, (tuple, list)) else r


@pytest.mark.parametrize("case", sorted(CASES))
def test_out_matches_torch(case):
    assert _outcome(ember, case) == _outcome(torch, case)


def test_out_is_returned_written_in_place_and_resized_with_a_warning():
    for m in (ember, torch):
        base = m.zeros(6)
        view = base[::2]
        assert m.add(m.ones(3), 1, out=view) is view
        assert base.tolist() == [2, 0, 2, 0, 2, 0]
        o = m.zeros(5)
        with pytest.warns(UserWarning, match="resized"):
            assert m.add(m.ones(3), 1, out=o) is o
        assert o.tolist() == [2, 2, 2]


def test_out_refused_when_autograd_would_record():
    for m in (ember, torch):
        x = m.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
            m.add(x, 1, out=m.zeros(3))
        with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
            m.mul(m.ones(3), 1, out=m.zeros(3, requires_grad=True))
        with m.no_grad():
            o = m.zeros(3)
            m.add(x, 1, out=o)
        assert o.tolist() == [2, 2, 2]


def test_out_bumps_the_version_and_is_seen_by_saved_tensor_checks():
    o = ember.zeros(3)
    v = o._version
    ember.exp(ember.zeros(3), out=o)
    assert o._version == v + 1
    x = ember.ones(3, requires_grad=True)
    y = x * o
    ember.add(ember.ones(3), 1, out=o)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_op_without_out_in_torch_refuses_it():
    for m in (ember, torch):
        with pytest.raises(TypeError):
            m.relu(m.ones(2), out=m.zeros(2))


@pytest.mark.parametrize("cond", [[[1, 0], [0, 1]], [True, False, True], 5, [[0.0, 2.5]]])
def test_where_with_condition_alone_is_nonzero_as_tuple(cond):
    got = ember.where(ember.tensor(cond))
    want = torch.where(torch.tensor(cond))
    assert [t.tolist() for t in got] == [t.tolist() for t in want]
    assert all(str(t.dtype).endswith("int64") for t in got)


def test_where_with_one_of_input_other_is_a_type_error():
    with pytest.raises(TypeError):
        ember.where(ember.tensor([True]), ember.ones(1))
    np.testing.assert_array_equal(ember.where(ember.tensor([True, False]), 1.0, 0.0).numpy(),
                                  [1.0, 0.0])


@pytest.mark.parametrize("case", ["mm", "matmul", "bmm", "addmm", "argmax", "argmin",
                                  "max tuple", "sort tuple"])
def test_out_of_another_dtype_is_refused_where_torch_wants_the_exact_dtype(case):
    """Products and argmax/argmin take no castable ``out`` in torch (a float64 out for float32
    products, an int32 out for indices): RuntimeError with torch's words."""
    torch = pytest.importorskip("torch")

    def call(m):
        o, d = m.ones, m.float64
        return {"mm": lambda: m.mm(o(2, 2), o(2, 2), out=m.empty(2, 2, dtype=d)),
                "matmul": lambda: m.matmul(o(2, 2), o(2, 2), out=m.empty(2, 2, dtype=d)),
                "bmm": lambda: m.bmm(o(1, 2, 2), o(1, 2, 2), out=m.empty(1, 2, 2, dtype=d)),
                "addmm": lambda: m.addmm(o(2, 2), o(2, 2), o(2, 2), out=m.empty(2, 2, dtype=d)),
                "argmax": lambda: m.argmax(o(2), out=m.empty((), dtype=m.float32)),
                "argmin": lambda: m.argmin(o(2), out=m.empty((), dtype=m.int32)),
                "max tuple": lambda: m.max(o(2, 2), 0, out=(m.empty(2, dtype=d),
                                                              m.empty(2, dtype=m.int64))),
                "sort tuple": lambda: m.sort(o(3), out=(m.empty(3), m.empty(3)))}[case]()
    with pytest.raises(RuntimeError) as theirs:
        call(torch)
    with pytest.raises(RuntimeError) as ours:
        call(ember)
    assert str(theirs.value) in str(ours.value)
