"""Index kernels of COO tensors against NumPy's row-major order and torch's coalesce: flat
positions, sorted unique columns with their inverse, the coalesced test, grouping by kept rows and
per-group maxima."""
import numpy as np
import pytest

from ember.kernels import sparse as K

torch = pytest.importorskip("torch")


def test_coalesce_matches_torch():
    idx = np.array([[2, 0, 2, 1, 0], [1, 3, 1, 0, 3]], np.int64)
    vals = np.arange(5.0)
    uniq, inverse = K.coalesce(idx, (3, 4))
    ref = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(vals), (3, 4),
                                  check_invariants=True).coalesce()
    np.testing.assert_array_equal(uniq, ref.indices().numpy())
    summed = np.zeros(uniq.shape[1])
    np.add.at(summed, inverse, vals)
    np.testing.assert_array_equal(summed, ref.values().numpy())
    assert uniq.dtype == inverse.dtype == np.int64
    assert K.is_sorted_unique(uniq, (3, 4)) and not K.is_sorted_unique(idx, (3, 4))
    assert not K.is_sorted_unique(np.array([[1, 1]]), (3,))   # duplicates are not coalesced


def test_flat_index_is_row_major():
    idx = np.array([[0, 2, 1], [3, 0, 2]])
    np.testing.assert_array_equal(K.flat_index(idx, (3, 4)), [3, 8, 6])
    np.testing.assert_array_equal(K.flat_index(np.zeros((0, 4), np.int64), ()), [0, 0, 0, 0])
    uniq, inverse = K.coalesce(np.zeros((0, 3), np.int64), ())
    assert uniq.shape == (0, 1) and list(inverse) == [0, 0, 0]


def test_groups_and_group_max():
    idx = np.array([[0, 1, 0, 1, 2], [5, 5, 6, 5, 7]])
    group, n, kept = K.groups(idx, [0])
    assert n == 3
    np.testing.assert_array_equal(kept, [[0, 1, 2]])
    np.testing.assert_array_equal(group, [0, 1, 0, 1, 2])
    vals = np.array([[1.0, -2.0], [4.0, 0.0], [3.0, 5.0], [-1.0, 1.0], [2.0, 2.0]])
    np.testing.assert_array_equal(K.group_max(vals, group, 4),
                                  [[3.0, 5.0], [4.0, 1.0], [2.0, 2.0], [-np.inf, -np.inf]])
    group, n, kept = K.groups(np.zeros((2, 0), np.int64), [1])
    assert n == 0 and group.shape == (0,) and kept.shape == (1, 0)
