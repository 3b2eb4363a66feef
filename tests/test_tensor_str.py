"""The repr layout on NumPy arrays (ember/_tensor_str.py): tensor_str's body and add_suffixes'
wrapping are torch's text; whole reprs under every print option are in test_printing.py."""
import numpy as np
import pytest

from ember._tensor_str import PRINT_OPTIONS, add_suffixes, tensor_str

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("values", [np.arange(2000.0, dtype=np.float32),
                                    np.arange(2000).reshape(40, 50),
                                    np.array([1.0, 2000.0], np.float32),
                                    np.array([[1.5, -2.25], [np.nan, np.inf]], np.float32),
                                    np.array([True, False]),
                                    np.array([1 + 2j, -3.5j], np.complex64)],
                         ids=["summarised", "summarised_2d", "sci", "nonfinite", "bool", "complex"])
def test_body_is_torchs(values):
    theirs = repr(torch.from_numpy(values))
    body = theirs[len("tensor("):theirs.index("]" * values.ndim) + values.ndim]
    assert tensor_str(values, 7, values.dtype.kind in "fc") == body


def test_suffixes_wrap_at_the_line_width():
    body = "tensor([1., 2.]"
    assert add_suffixes(body, ["dtype=ember.float64"], 7) == body + ", dtype=ember.float64)"
    long = "tensor([" + "1., " * 17 + "1.]"
    assert add_suffixes(long, ["requires_grad=True"], 7) == \
        long + ",\n       requires_grad=True)"
    assert PRINT_OPTIONS["linewidth"] == 80
