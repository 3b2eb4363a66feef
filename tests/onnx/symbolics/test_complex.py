"""ONNX export of complex values (ember/onnx/symbolics/complex.py): FFTs as DFT on the
(..., 2) real layout, with the parts, conjugate, abs, complex arithmetic, narrow and zero pad
around them; checked by onnxruntime against ember at opsets 17 and 20, and the errors."""
import io

import numpy as np
import pytest

import ember
import ember.fft as EF

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 8)).astype(np.float32)
X3 = RNG.standard_normal((2, 4, 6)).astype(np.float32)


class _Fn(ember.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def _export(fn, x, opset):
    f = io.BytesIO()
    ember.onnx.export(_Fn(fn), (ember.tensor(x),), f, opset_version=opset)
    return f.getvalue()


CASES = {
    "rfft_abs": (lambda v: EF.rfft(v).abs(), X),
    "rfft_ortho_view_as_real": (lambda v: ember.view_as_real(EF.rfft(v, norm="ortho")), X),
    "fft_padded": (lambda v: ember.view_as_real(EF.fft(v, n=10)), X),
    "ifft_trimmed": (lambda v: ember.view_as_real(EF.ifft(v, n=5)), X),
    "irfft_even": (lambda v: EF.irfft(EF.rfft(v) * 2, n=8), X),
    "irfft_odd": (lambda v: EF.irfft(EF.rfft(v), n=7), X),
    "irfft_forward_norm": (lambda v: EF.irfft(EF.rfft(v, norm="forward"), n=8, norm="forward"), X),
    "rfft2_power_irfft2": (lambda v: EF.irfft2(EF.rfft2(v) * EF.rfft2(v).conj(), s=(4, 6)), X3),
    "fftn_parts": (lambda v: EF.fftn(v, dim=(0, 2)).real + EF.fftn(v, dim=(0, 2)).imag, X3),
    "hfft": (lambda v: EF.hfft(EF.ifft(v), n=8), X),
    "complex_arith": (lambda v: (EF.rfft(v) * EF.rfft(v) + 1j - v[:, :5]).abs().sum(1), X),
    "complex_ctor": (lambda v: ember.complex(v, v * 2).abs(), X),
    "fft_convolution": (lambda v: EF.irfft(EF.rfft(v, n=16) * EF.rfft(ember.ones(3, 8), n=16),
                                            n=16), X),
}


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("name", sorted(CASES))
def test_runs_in_onnxruntime_like_ember(name, opset):
    fn, x = CASES[name]
    sess = ort.InferenceSession(_export(fn, x, opset))
    got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    want = fn(ember.tensor(x))._data
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1, np.abs(want).max()))


def test_complex_graph_output_is_refused():
    with pytest.raises(ember.onnx.OnnxExportError, match="complex.*graph input or output"):
        _export(lambda v: EF.rfft(v), X, 17)


def test_op_without_a_complex_symbolic_names_it():
    with pytest.raises(ember.onnx.UnsupportedOperatorError, match="exp on complex tensors"):
        _export(lambda v: EF.rfft(v).exp().abs(), X, 17)


def test_dft_needs_opset_17():
    with pytest.raises(ember.onnx.OnnxExportError, match="fft_r2c.*opset 17"):
        _export(lambda v: EF.rfft(v).abs(), X, 16)


def test_real_graphs_export_as_before():
    sess = ort.InferenceSession(_export(lambda v: ember.conj(v) + ember.real(v).abs(), X, 17))
    got = sess.run(None, {sess.get_inputs()[0].name: X})[0]
    np.testing.assert_allclose(got, X + np.abs(X), rtol=1e-6)
