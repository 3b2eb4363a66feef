"""``as_strided`` on ndarrays against torch.as_strided (views of the root storage, offsets of
views, bounds), the storage offset of views, and the scatter indices of as_strided_scatter."""
import numpy as np
import pytest

from ember.kernels import strided as K
from ember.kernels.errors import KernelError

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("size, stride, offset", [
    ((3, 3), (1, 3), None), ((2, 2), (4, 1), 5), ((4,), (0,), 2), ((2, 3, 2), (6, 1, 3), 0),
    ((0, 5), (1, 1), 50),
])
def test_as_strided_matches_torch(size, stride, offset):
    base = np.arange(24.0)
    out = K.as_strided(base, size, stride, offset)
    ref = torch.as_strided(torch.arange(24.0, dtype=torch.float64), size, stride, offset)
    np.testing.assert_array_equal(out, ref.numpy())
    if out.size:
        assert np.shares_memory(out, base)


def test_views_keep_their_storage_offset():
    base = np.arange(30.0).reshape(5, 6)
    view = base[2:, 1:]
    tview = torch.arange(30.0, dtype=torch.float64).reshape(5, 6)[2:, 1:]
    assert K.storage_offset(view) == tview.storage_offset() == 13
    flat, offset = K.storage(view.T)
    assert flat.size == 30 and offset == 13
    np.testing.assert_array_equal(K.as_strided(view, (2, 2), (1, 6)),
                                  torch.as_strided(tview, (2, 2), (1, 6)).numpy())
    assert K.storage_offset(np.arange(6.0)[::-1]) == 5


@pytest.mark.parametrize("call, message", [
    (lambda a: K.as_strided(a, (3, 3), (1,)), "mismatch in length"),
    (lambda a: K.as_strided(a, (3,), (-1,)), "non-negative"),
    (lambda a: K.as_strided(a, (3,), (1,), -2), "storage_offset must be non-negative"),
    (lambda a: K.as_strided(a, (5, 5), (5, 1)), "out of bounds"),
    (lambda a: K.as_strided(a.view(np.int64), (2,), (1,)), "not a plain"),
])
def test_errors(call, message):
    with pytest.raises(KernelError, match=message):
        call(np.arange(12.0))


def test_flat_and_scatter_indices():
    idx = K.flat_indices((2, 3), (1, 2), 4)
    np.testing.assert_array_equal(idx, [[4, 6, 8], [5, 7, 9]])
    np.testing.assert_array_equal(K.scatter_indices((3, 4), (2, 2), (4, 1), 1), [[1, 2], [5, 6]])
    # the positions are where torch's as_strided_scatter writes
    src = torch.full((2, 2), -1.0)
    hit = torch.as_strided_scatter(torch.zeros(3, 4), src, (2, 2), (4, 1), 1).reshape(-1)
    np.testing.assert_array_equal(np.flatnonzero(hit.numpy()),
                                  np.sort(K.scatter_indices((3, 4), (2, 2), (4, 1), 1).ravel()))
    with pytest.raises(KernelError, match="as_strided_scatter: .* out of bounds"):
        K.scatter_indices((3, 4), (3, 3), (4, 1), 2)
