"""ember.testing (ember/testing.py) against torch.testing: assert_close passes and fails on the
same inputs with the same messages (tolerances by dtype, NaN, integers exactly, scalars,
booleans, nested sequences and mappings, attribute mismatches, unsupported pairs), and
make_tensor's ranges, dtypes and layouts."""
import warnings

import numpy as np
import pytest

import ember
import ember.testing as ET

torch = pytest.importorskip("torch")

CASES = {
    "close_float32": lambda L: (L.tensor([1., 2., 3.]), L.tensor([1., 2. + 1e-6, 3.])),
    "far_float32": lambda L: (L.tensor([1., 2., 3.]), L.tensor([1., 2.1, 3.])),
    "float64_tolerance": lambda L: (L.tensor([1., 2.], dtype=L.float64),
                                    L.tensor([1. + 1e-8, 2.], dtype=L.float64)),
    "float64_far": lambda L: (L.tensor([1., 2.], dtype=L.float64),
                              L.tensor([1. + 1e-5, 2.], dtype=L.float64)),
    "dtype": lambda L: (L.tensor([1., 2.]), L.tensor([1., 2.], dtype=L.float64)),
    "shape": lambda L: (L.tensor([1., 2.]), L.tensor([1., 2., 3.])),
    "nan": lambda L: (L.tensor([1., float("nan")]), L.tensor([1., float("nan")])),
    "nan_vs_number": lambda L: (L.tensor([1., float("nan")]), L.tensor([1., 2.])),
    "integers": lambda L: (L.tensor([1, 2]), L.tensor([1, 3])),
    "matrix": lambda L: (L.tensor([[1., 5.], [2., 2.]]), L.tensor([[1., 2.], [2., 0.]])),
    "zero_expected": lambda L: (L.tensor([1e-4]), L.tensor([0.0])),
    "float_scalars": lambda L: (1.0, 1.1),
    "int_vs_float": lambda L: (1, 1.0),
    "booleans": lambda L: (True, False),
    "nested": lambda L: ([L.tensor([1.]), {"a": L.tensor([2.])}],
                         [L.tensor([1.]), {"a": L.tensor([2.5])}]),
    "keys": lambda L: ({"a": 1}, {"b": 1}),
    "lengths": lambda L: ([1, 2], [1]),
    "tuple_vs_list": lambda L: ((L.tensor([1.]),), [L.tensor([1.])]),
    "arrays": lambda L: (np.array([1., 2.]), np.array([1., 2.5])),
    "tensor_vs_number": lambda L: (L.tensor(1.), 1.0),
    "tensor_vs_array": lambda L: (L.tensor([1.]), np.array([1.], np.float32)),
    "strings": lambda L: ("a", "b"),
    "none": lambda L: (None, None),
}


def _outcome(fn, args, **kw):
    try:
        fn(*args, **kw)
        return "ok"
    except AssertionError as e:
        return "AssertionError: " + str(e).replace("torch.", "").replace("ember.", "")
    except TypeError as e:
        return "TypeError: " + str(e).replace("torch.", "").replace("ember.", "") \
            .replace("<class 'tensor.Tensor'>", "<class 'Tensor'>")


@pytest.mark.parametrize("case", sorted(CASES))
def test_assert_close_agrees_with_torch(case):
    want = _outcome(torch.testing.assert_close, CASES[case](torch))
    got = _outcome(ET.assert_close, CASES[case](ember))
    if case == "integers":   # torch computes the relative difference of ints in float32
        want, got = (w.rsplit("Greatest relative", 1)[0] for w in (want, got))
    assert got == want


def test_assert_close_options():
    a, b = ember.tensor([1., 2.]), ember.tensor([1.05, 2.])
    ET.assert_close(a, b, rtol=0.1, atol=0.0)
    ET.assert_close(a, ember.tensor([1., 2.], dtype=ember.float64), check_dtype=False)
    nan = ember.tensor([float("nan")])
    ET.assert_close(nan, nan, equal_nan=True)
    with pytest.raises(AssertionError, match="^custom$"):
        ET.assert_close(a, b, msg="custom")
    with pytest.raises(ember.errors.EmberError, match="rtol.*atol"):
        ET.assert_close(a, b, rtol=0.1)
    with pytest.raises(AssertionError, match="stride"):
        ET.assert_close(ember.zeros(2, 3).t(), ember.zeros(3, 2), check_stride=True)
    with pytest.warns(FutureWarning):
        ET.assert_allclose(ember.tensor([1., 2.]), [1.00001, 2.])   # float32: rtol 1e-4
    with pytest.warns(FutureWarning), pytest.raises(AssertionError):
        ET.assert_allclose(ember.tensor([1., 2.]), [1.01, 2.])


@pytest.mark.parametrize("dtype,low,high", [
    ("float32", -9, 9), ("float64", -9, 9), ("int64", -9, 10), ("uint8", 0, 10),
    ("int32", -9, 10), ("complex64", -9, 9)])
def test_make_tensor_ranges_dtypes_and_layouts(dtype, low, high):
    dt = getattr(ember, dtype)
    ember.manual_seed(0)
    t = ET.make_tensor(4, 50, dtype=dt)
    assert t.dtype == dt and tuple(t.shape) == (4, 50)
    a = t.numpy()
    parts = (a.real, a.imag) if a.dtype.kind == "c" else (a,)
    for p in parts:
        assert p.min() >= low and p.max() < high and len(np.unique(p)) > 3
    nc = ET.make_tensor((3, 5), dtype=dt, noncontiguous=True)
    assert not nc.is_contiguous() and tuple(nc.shape) == (3, 5)
    nz = ET.make_tensor(200, dtype=dt, low=-1, high=1, exclude_zero=True)
    assert (nz.numpy() != 0).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = ET.make_tensor(6, dtype=ember.bool)
    assert b.dtype == ember.bool
    g = ET.make_tensor(3, dtype=ember.float64, requires_grad=True)
    assert g.requires_grad and g.is_leaf
    with pytest.raises(ember.errors.EmberError, match="low"):
        ET.make_tensor(3, dtype=dt, low=2, high=1)
