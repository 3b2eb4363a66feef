"""Gradients through importers that compute sample points (RoiAlign, DeformConv) against central
finite differences in float64: they are ember ops end to end, so an imported detector or
deformable net fine-tunes."""
import numpy as np
import pytest

pytest.importorskip("onnx")

import ember  # noqa: E402
from ember.onnx.importer.ops_vision import deform_conv, roi_align  # noqa: E402


def _numeric(f, arr, eps=1e-6):
    g = np.zeros_like(arr)
    for i in np.ndindex(arr.shape):
        a, b = arr.copy(), arr.copy()
        a[i] += eps
        b[i] -= eps
        g[i] = (f(a) - f(b)) / (2 * eps)
    return g


@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roi_align_gradient_reaches_the_feature_map(mode):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1, 2, 5, 6))
    rois = ember.tensor(np.array([[0.3, 0.5, 4.2, 3.7], [1.0, 1.0, 3.0, 4.5]]))
    bi = ember.tensor(np.array([0, 0]))
    a = {"mode": mode, "output_height": 2, "output_width": 3, "sampling_ratio": 2,
         "spatial_scale": 1.0, "coordinate_transformation_mode": "half_pixel"}
    x = ember.tensor(X, requires_grad=True)
    roi_align(a, x, rois, bi).sum().backward()
    want = _numeric(lambda v: roi_align(a, ember.tensor(v), rois, bi).sum().item(), X)
    np.testing.assert_allclose(x.grad.numpy(), want, atol=1e-7)


def test_deform_conv_gradients_reach_input_weight_offsets_and_mask():
    rng = np.random.default_rng(1)
    arrs = [rng.standard_normal((1, 2, 5, 6)), rng.standard_normal((4, 2, 2, 2)),
            rng.standard_normal((1, 8, 4, 5)) * 0.7, rng.random((1, 4, 4, 5))]
    a = {"kernel_shape": [2, 2], "strides": None, "dilations": None, "pads": None, "group": 1,
         "offset_group": 1}

    def f(*vs):
        x, w, o, m = vs
        return deform_conv(a, x, w, o, None, m).sum()

    ts = [ember.tensor(v, requires_grad=True) for v in arrs]
    f(*ts).backward()
    for k, t in enumerate(ts):
        def fk(v, k=k):
            return f(*[ember.tensor(v if j == k else arrs[j]) for j in range(4)]).item()
        np.testing.assert_allclose(t.grad.numpy(), _numeric(fk, arrs[k]), atol=1e-7)
