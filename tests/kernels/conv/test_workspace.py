"""Per-thread convolution workspace: buffers are reused across calls, never handed back as
results, zero-padded where asked, and private to their thread."""
import threading
import tracemalloc

import numpy as np
import pytest

from ember.backends import conv as settings
from ember.kernels import conv as C
from ember.kernels.conv import workspace

rng = np.random.default_rng(1)


@pytest.fixture
def force():
    def set_algorithm(name):
        settings.algorithm = name
    yield set_algorithm
    settings.algorithm = None
    settings.benchmark = False


def test_results_are_fresh_arrays_not_workspace_views():
    x = rng.standard_normal((3, 4, 9, 8)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    y1 = C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    keep = y1.copy()
    C.conv2d_forward(2 * x, w, None, 1, 1, 1, 1)
    np.testing.assert_array_equal(y1, keep)


@pytest.mark.parametrize("algorithm", ["im2col", "implicit_gemm", "winograd"])
def test_workspace_is_reused_across_calls(algorithm, force):
    force(algorithm)
    x = rng.standard_normal((4, 16, 24, 24)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    gy = rng.standard_normal((4, 16, 24, 24)).astype(np.float32)
    C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    C.conv2d_input_grad(gy, w, x.shape, 1, 1, 1, 1)
    held = workspace.nbytes()
    assert held > x.nbytes
    tracemalloc.start()
    try:
        for _ in range(3):
            C.conv2d_forward(x, w, None, 1, 1, 1, 1)
            C.conv2d_input_grad(gy, w, x.shape, 1, 1, 1, 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert workspace.nbytes() == held
    # each call allocates only its fresh result (+ small transforms), never the workspace again
    assert peak < 2 * x.nbytes + held // 4


def test_buffer_grows_only_and_reuses_its_memory():
    workspace.clear()
    a = workspace.buffer("test.a", (4, 5), np.float32)
    assert a.shape == (4, 5) and a.dtype == np.float32 and a.flags.c_contiguous
    small = workspace.buffer("test.a", (3,), np.float32)
    assert np.shares_memory(a, small)                    # the same flat buffer, a smaller view
    assert workspace.nbytes() == 4 * 5 * 4
    big = workspace.buffer("test.a", (6, 5), np.float32)
    assert big.shape == (6, 5) and workspace.nbytes() == 6 * 5 * 4
    other_dtype = workspace.buffer("test.a", (6, 5), np.float64)
    other_slot = workspace.buffer("test.b", (6, 5), np.float32)
    assert not np.shares_memory(big, other_dtype) and not np.shares_memory(big, other_slot)
    assert workspace.nbytes() == 6 * 5 * (4 + 8 + 4)
    assert workspace.buffer("test.c", (0, 3), np.float32).shape == (0, 3)
    workspace.clear()
    assert workspace.nbytes() == 0


@pytest.mark.parametrize("padding", [(1, 2, 0, 3), (0, 0, 2, 0), (1, 1, 1, 1)])
def test_padded_is_np_pad_with_zeros_even_over_a_dirty_buffer(padding):
    pt, pb, pl, pr = padding
    x = rng.standard_normal((2, 3, 4, 5))
    workspace.buffer("test.pad", (2, 3, 4 + pt + pb, 5 + pl + pr), np.float64)[...] = np.nan
    out = workspace.padded(x, padding, "test.pad")
    np.testing.assert_array_equal(out, np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr))))
    workspace.clear()


def test_padded_without_padding_is_the_contiguous_input_itself():
    x = rng.standard_normal((2, 3, 4, 5))
    assert workspace.padded(x, (0, 0, 0, 0), "test.pad") is x
    view = x[:, :, :, ::2]
    out = workspace.padded(view, (0, 0, 0, 0), "test.pad")
    assert out is not view and out.flags.c_contiguous
    np.testing.assert_array_equal(out, view)
    workspace.clear()


def test_zero_border_clears_only_the_border():
    a = np.ones((2, 6, 7))
    workspace.zero_border(a, (1, 2, 3, 1))
    expected = np.zeros((2, 6, 7))
    expected[:, 1:4, 3:6] = 1
    np.testing.assert_array_equal(a, expected)


def test_each_thread_has_its_own_buffers():
    workspace.clear()
    mine = workspace.buffer("test.t", (8,), np.float64)
    seen = {}

    def other():
        seen["before"] = workspace.nbytes()
        seen["buf"] = workspace.buffer("test.t", (8,), np.float64)
        seen["after"] = workspace.nbytes()
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen["before"] == 0 and seen["after"] == 64
    assert not np.shares_memory(mine, seen["buf"])
    assert workspace.nbytes() == 64
    workspace.clear()



# geometries where a result is a workspace crop that needs no copy: no padding (the crop is the
# whole buffer), one image, one channel and one filter (a transposed (9, 1) weight gradient)
_ALIASING_CASES = [((1, 3, 5, 5), (3, 1, 3, 3), 0, 3), ((2, 4, 6, 6), (4, 4, 3, 3), 0, 1),
                   ((1, 1, 6, 6), (1, 1, 3, 3), 0, 1), ((2, 8, 5, 5), (8, 8, 1, 1), 0, 1),
                   ((1, 4, 8, 8), (4, 4, 3, 3), 1, 1), ((2, 4, 6, 6), (4, 1, 3, 3), 1, 4)]


@pytest.mark.parametrize("direction", ["forward", "input", "weight"])
@pytest.mark.parametrize("case", _ALIASING_CASES, ids=str)
def test_no_algorithm_hands_back_its_workspace(direction, case, force):
    """Each capable algorithm, every direction: a second call (after a larger one grew the
    buffers) leaves the first call's result as it was (depthwise's and direct1x1's unpadded
    input gradients, winograd2x2's even-sized output and one-channel weight gradients were
    views of the workspace, overwritten by the next call)."""
    from ember.kernels.conv import selector
    from ember.kernels.conv.geometry import geometry
    xs, ws, pad, groups = case
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    g = geometry("conv2d", xs, ws, (1, 1), (pad, pad), (1, 1), groups)
    gy = rng.standard_normal(g.output_shape).astype(np.float32)
    run = {"forward": lambda s: C.conv2d_forward(s * x, w, None, 1, pad, 1, groups),
           "input": lambda s: C.conv2d_input_grad(s * gy, w, xs, 1, pad, 1, groups),
           "weight": lambda s: C.conv2d_weight_grad(s * gy, x, ws, 1, pad, 1, groups)}[direction]
    algorithms = selector.capable(direction, g)
    assert algorithms
    for name in algorithms:
        force(None)
        big = rng.standard_normal((4, 8, 16, 16)).astype(np.float32)
        C.conv2d_forward(big, rng.standard_normal((8, 8, 3, 3)).astype(np.float32), None, 1, 1,
                         1, 1)                                   # grow the buffers first
        force(name)
        first = run(1.0)
        keep = first.copy()
        run(2.0)
        np.testing.assert_array_equal(first, keep, err_msg=name)

