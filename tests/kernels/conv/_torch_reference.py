"""torch as the oracle for one 2-d convolution problem, called on a conv algorithm module's own
functions (``forward(x, w, g)``, ``input_grad(gy, w, g)``, ``weight_grad(gy, x, g)``)."""
import numpy as np
import pytest

from ember.kernels.conv.geometry import geometry

torch = pytest.importorskip("torch")


def problem(shape_x, shape_w, stride=1, padding=0, dilation=1, groups=1, dtype=np.float64,
            seed=0):
    """(x, w, gy, g): random arrays of ``dtype`` and the validated geometry."""
    rng = np.random.default_rng(seed)
    g = geometry("conv2d", shape_x, shape_w, stride, padding, dilation, groups)
    x = rng.standard_normal(shape_x).astype(dtype)
    w = rng.standard_normal(shape_w).astype(dtype)
    gy = rng.standard_normal(g.output_shape).astype(dtype)
    return x, w, gy, g


def torch_directions(x, w, gy, g):
    """(y, gx, gw) of torch's conv2d in float64 (asymmetric padding as an explicit F.pad)."""
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    pt, pb, pl, pr = g.padding
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(xt, (pl, pr, pt, pb)), wt, None,
                                   g.stride, 0, g.dilation, g.groups)
    y.backward(torch.tensor(gy, dtype=torch.float64))
    return y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()


def assert_matches(out, ref, dtype):
    """A result of the problem's dtype and shape, within float rounding of torch."""
    assert out.dtype == dtype and out.shape == ref.shape
    tol = 2e-5 if dtype == np.float32 else 1e-12
    scale = max(float(np.abs(ref).max()), 1e-30)
    assert np.abs(out - ref).max() <= tol * scale * max(1, np.sqrt(ref.size) / 8)


def assert_directions_match(module, case, dtype, directions=("forward", "input", "weight")):
    """``module`` (a conv algorithm) supports ``case`` (geometry arguments) in each of
    ``directions`` and computes each within float rounding of torch."""
    x, w, gy, g = problem(*case, dtype=dtype)
    ref = dict(zip(("forward", "input", "weight"), torch_directions(x, w, gy, g)))
    run = {"forward": lambda: module.forward(x, w, g), "input": lambda: module.input_grad(gy, w, g),
           "weight": lambda: module.weight_grad(gy, x, g)}
    for direction in directions:
        assert module.supports(g, direction), (case, direction)
        assert_matches(run[direction](), ref[direction], dtype)


def assert_refused(module, case, directions=("forward", "input", "weight")):
    """``module`` supports ``case`` in none of ``directions``."""
    g = geometry("conv2d", *case)
    assert not any(module.supports(g, d) for d in directions), case
