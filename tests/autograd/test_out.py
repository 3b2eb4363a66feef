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


def _f32(m):
    return m.tensor([0.5, 1.5])


OUT_DTYPE_CASES = {
    "sum without dim": lambda m, o: m.sum(_f32(m), out=o),
    "prod without dim": lambda m, o: m.prod(_f32(m), out=o),
    "median without dim": lambda m, o: m.median(_f32(m), out=o),
    "cat": lambda m, o: m.cat([_f32(m), _f32(m)], out=o),
    "stack": lambda m, o: m.stack([_f32(m), _f32(m)], out=o),
    "clamp": lambda m, o: m.clamp(_f32(m), 0, 1, out=o),
    "clamp_min": lambda m, o: m.clamp_min(_f32(m), 1, out=o),
    "abs": lambda m, o: m.abs(_f32(m), out=o), "neg": lambda m, o: m.neg(_f32(m), out=o),
    "floor": lambda m, o: m.floor(_f32(m), out=o), "round": lambda m, o: m.round(_f32(m), out=o),
    "sign": lambda m, o: m.sign(_f32(m), out=o),
    "where": lambda m, o: m.where(m.tensor([True, False]), _f32(m), _f32(m), out=o),
    "dot": lambda m, o: m.dot(_f32(m), _f32(m), out=o),
    "mv": lambda m, o: m.mv(m.ones(2, 2), _f32(m), out=o),
    "amax": lambda m, o: m.amax(_f32(m), 0, out=o),
    "nan_to_num": lambda m, o: m.nan_to_num(_f32(m), out=o),
    "index_select": lambda m, o: m.index_select(_f32(m), 0, m.tensor([1, 0]), out=o),
    "take": lambda m, o: m.take(_f32(m), m.tensor([1, 0]), out=o),
    "gather": lambda m, o: m.gather(_f32(m), 0, m.tensor([1, 0]), out=o),
    "nonzero": lambda m, o: m.nonzero(_f32(m), out=o),
    "float_power": lambda m, o: m.float_power(_f32(m), 2, out=o),
    "logsumexp": lambda m, o: m.logsumexp(_f32(m), 0, out=o),
    "mean": lambda m, o: m.mean(_f32(m), 0, out=o),
    "topk with one tensor": lambda m, o: m.topk(_f32(m), 1, out=o),
    "sum dtype= other than out's": lambda m, o: m.sum(_f32(m), 0, dtype=m.float64, out=o),
}


@pytest.mark.parametrize("out_dtype", ["int64", "float64", "bool", "float16"])
@pytest.mark.parametrize("case", sorted(OUT_DTYPE_CASES))
def test_out_of_another_dtype_as_torch(case, out_dtype):
    """Which ops take an ``out`` of another dtype (cast), which refuse it and with which error:
    torch's exception type and words, per op."""
    outcome = {}
    for m in (torch, ember):
        try:
            r = OUT_DTYPE_CASES[case](m, m.empty(0, dtype=getattr(m, out_dtype)))
            outcome[m] = ("ok", str(r.dtype).split(".")[-1], r.tolist())
        except Exception as e:   # noqa: BLE001 - compared between the two
            builtin = next(c for c in type(e).__mro__ if c.__module__ == "builtins")
            outcome[m] = ("err", builtin, str(e).splitlines()[0])
    want, got = outcome[torch], outcome[ember]
    assert got[:2] == want[:2]
    if want[0] == "ok":   # transcendental functions: torch's and ember's last bits differ
        assert got[:2] == want[:2]
        np.testing.assert_allclose(got[2], want[2], rtol=1e-6)
    elif "invalid combination" not in want[2]:
        assert want[2].split("(): ")[-1] in got[2]


@pytest.mark.parametrize("op", ["sum", "prod", "cumsum", "cumprod"])
def test_reduction_with_out_computes_in_outs_dtype(op):
    """torch casts the input to ``out``'s dtype first: sum([0.5, 1.5], 0, out=long) is 1."""
    for od in ("int64", "float64", "int32"):
        got = getattr(ember, op)(ember.tensor([0.5, 1.5, 0.1]), 0, out=ember.empty(0, dtype=getattr(ember, od)))
        want = getattr(torch, op)(torch.tensor([0.5, 1.5, 0.1]), 0, out=torch.empty(0, dtype=getattr(torch, od)))
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_exp_into_float64_out_is_the_float32_result_cast():
    """exp of float32 into a float64 out computes in float32, then casts (as torch)."""
    x = ember.tensor([1.0, -2.5, 0.3])
    o = ember.empty(3, dtype=ember.float64)
    ember.exp(x, out=o)
    assert o.dtype == ember.float64
    np.testing.assert_array_equal(o.numpy(), ember.exp(x).numpy().astype(np.float64))
