"""set_printoptions / get_printoptions as torch's: precision, threshold, edgeitems, sci_mode and
the profiles change how tensors print; options are restored after each test."""
import pytest

import ember
import ember._printing

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _restore():
    before_e, before_t = ember._printing.get_printoptions(), torch._tensor_str.PRINT_OPTS.__dict__.copy()
    yield
    ember.set_printoptions(**{k: v for k, v in before_e.items()})
    torch.set_printoptions(**before_t)


@pytest.mark.parametrize("opts,values", [
    (dict(precision=2), [1.23456, 2.0]),
    (dict(threshold=5), list(range(10))),
    (dict(threshold=5, edgeitems=2), list(range(10))),
    (dict(sci_mode=True), [1.5, 200.0]),
    (dict(profile="full"), [float(i % 7) for i in range(1200)]),
    (dict(profile="short"), [1.23456, 2.0]),
])
def test_printoptions_print_as_torch(opts, values):
    ember.set_printoptions(**opts)
    torch.set_printoptions(**opts)
    e, t = repr(ember.tensor(values, dtype=ember.float32)), repr(torch.tensor(values,
                                                                          dtype=torch.float32))
    assert e.replace(" ", "") == t.replace(" ", "")
    assert ember._printing.get_printoptions() == torch._tensor_str.PRINT_OPTS.__dict__


def test_bad_profile_is_an_error():
    with pytest.raises(ember.EmberError, match="profile must be one of"):
        ember.set_printoptions(profile="long")


def _same_repr(make, opts=None):
    """repr and str of ``make(ember)`` are torch's (dtype names normalised)."""
    if opts:
        ember.set_printoptions(**opts)
        torch.set_printoptions(**opts)
    e, t = make(ember), make(torch)
    assert repr(e).replace("ember.", "torch.") == repr(t)
    assert str(e).replace("ember.", "torch.") == str(t)


_NAN, _INF = float("nan"), float("inf")
TENSORS = {
    "sci_mode_auto": lambda m: m.tensor([1., 2000.]),
    "sci_mode_large": lambda m: m.tensor([1e8, 1.0]),
    "sci_mode_tiny": lambda m: m.tensor([1e-5, 2e-5]),
    "sci_mode_huge_and_tiny": lambda m: m.tensor([1e20, 3e-20]),
    "summarised_float": lambda m: m.arange(2000.),
    "summarised_int": lambda m: m.arange(2000),
    "summarised_negative_int": lambda m: -m.arange(2000),
    "summarised_negative_float": lambda m: m.arange(2000.) * -0.37,
    "summarised_2d": lambda m: m.arange(3000.).reshape(60, 50) / 7,
    "summarised_3d": lambda m: m.arange(3000).reshape(10, 15, 20),
    "summarised_bool": lambda m: m.arange(2000) % 3 == 0,
    "summarised_float64": lambda m: m.arange(2000, dtype=m.float64),
    "summarised_complex": lambda m: m.arange(2000.).to(m.complex64) * (1 + 1j),
    "3d": lambda m: m.arange(24.).reshape(2, 3, 4) / 3,
    "4d": lambda m: m.arange(1200.).reshape(2, 3, 10, 20),
    "wrapped_float": lambda m: m.arange(100.) / 3,
    "wrapped_int": lambda m: m.arange(100) * 1000,
    "bool": lambda m: m.tensor([True, False]),
    "whole_floats": lambda m: m.tensor([1., 2.]),
    "whole_floats_sci": lambda m: m.tensor([1., 2e9]),
    "zeros": lambda m: m.zeros(3),
    "negative_zero": lambda m: m.tensor([-0.0, 1.0]),
    "mixed_signs": lambda m: m.tensor([[-1.5, 2.0], [3.25, -400.0]]),
    "nan_inf_whole": lambda m: m.tensor([_NAN, 1.0, _INF, -_INF]),
    "nan_inf_fraction": lambda m: m.tensor([_NAN, 1.5, _INF]),
    "nan_inf_only": lambda m: m.tensor([_NAN, _INF]),
    "float64": lambda m: m.tensor([1.5, 2.25], dtype=m.float64),
    "float16": lambda m: m.tensor([1.5, 2.25, 1e-3], dtype=m.float16),
    "bfloat16": lambda m: m.tensor([1.5, 2.25, 3.3], dtype=m.bfloat16),
    "int32": lambda m: m.tensor([1, 2], dtype=m.int32),
    "uint8": lambda m: m.tensor([1, 200], dtype=m.uint8),
    "complex64": lambda m: m.tensor([1 + 2j, -3.5 - 1j, 0j]),
    "complex128": lambda m: m.tensor([1 + 2j, 1e5 - 1j], dtype=m.complex128),
    "complex_0d": lambda m: m.tensor(1 - 2j),
    "0d_float": lambda m: m.tensor(3.5),
    "0d_int": lambda m: m.tensor(3),
    "0d_nan": lambda m: m.tensor(_NAN),
    "empty_1d": lambda m: m.zeros(0),
    "empty_2d": lambda m: m.zeros(0, 3),
    "empty_int64": lambda m: m.zeros(0, dtype=m.int64),
    "empty_int32_2d": lambda m: m.zeros(2, 0, dtype=m.int32),
    "requires_grad": lambda m: m.ones(3, requires_grad=True),
    "grad_fn": lambda m: m.ones(3, requires_grad=True) * 2,
    "float16_requires_grad": lambda m: m.ones(2, dtype=m.float16, requires_grad=True),
    "suffixes_wrapped": lambda m: (m.arange(70., dtype=m.float64) / 7).requires_grad_(),
    "parameter": lambda m: m.nn.Parameter(m.ones(2)),
}


@pytest.mark.parametrize("name", list(TENSORS))
def test_tensor_prints_as_torch(name):
    _same_repr(TENSORS[name])


@pytest.mark.parametrize("opts,make", [
    (dict(sci_mode=False), lambda m: m.tensor([1e-5, 1.0])),
    (dict(sci_mode=False), lambda m: m.tensor([1e10, 1.0])),
    (dict(sci_mode=True), lambda m: m.tensor([1.5, 2.0])),
    (dict(sci_mode=True), lambda m: m.tensor([1, 2])),
    (dict(precision=2), lambda m: m.tensor([1.23456, 2e-5])),
    (dict(precision=6), lambda m: m.arange(10.) / 3),
    (dict(threshold=5), lambda m: m.arange(10)),
    (dict(threshold=5, edgeitems=1), lambda m: m.arange(10.).reshape(2, 5)),
    (dict(edgeitems=0), lambda m: m.arange(2000.)),
    (dict(edgeitems=0), lambda m: m.arange(2000.).reshape(40, 50)),
    (dict(linewidth=40), lambda m: m.arange(30.) / 3),
    (dict(linewidth=20), lambda m: m.arange(5., dtype=m.float64)),
    (dict(profile="short"), lambda m: m.arange(2000.) / 3),
    (dict(profile="full"), lambda m: m.arange(1200)),
    (dict(profile="default"), lambda m: m.arange(1200)),
], ids=["sci_off_tiny", "sci_off_large", "sci_on", "sci_on_int", "precision2", "precision6",
        "threshold", "threshold_edgeitems", "edgeitems0", "edgeitems0_2d", "linewidth40",
        "linewidth20_suffix", "short", "full", "default"])
def test_printoptions_exact_as_torch(opts, make):
    _same_repr(make, opts)


def test_sci_mode_false_then_str_works():
    ember.set_printoptions(sci_mode=False)
    assert str(ember.tensor([1e-5, 1.0])) == "tensor([0.0000, 1.0000])"


def test_default_dtype_float64_suffixes():
    before = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    torch_before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        for make in (lambda m: m.tensor([1.5, 2.0]), lambda m: m.tensor([1.5], dtype=m.float32),
                     lambda m: m.tensor([1 + 1j]), lambda m: m.zeros(0)):
            _same_repr(make)
    finally:
        ember.set_default_dtype(before)
        torch.set_default_dtype(torch_before)
