"""Tensor creation (ember.creation) against torch: ndarray subclasses."""
import numpy as np
import pytest
import torch

import ember
from ember.utils.data import default_collate


@pytest.fixture
def memmap(tmp_path):
    mm = np.memmap(tmp_path / "a.bin", dtype=np.int64, mode="w+", shape=(3,))
    mm[:] = [1, 2, 3]
    return mm


@pytest.mark.parametrize("make", ["from_numpy", "as_tensor", "tensor"])
def test_memmap_tensor_promotes_as_a_tensor(memmap, make):
    """A tensor made from an np.memmap holds a plain ndarray: it promotes as a tensor, not as a
    Python scalar (stack of int64 memmap tensors was float32, ``+ 1`` float64)."""
    for m in (ember, torch):
        t = getattr(m, make)(memmap)
        assert str(m.stack([t, t]).dtype).endswith("int64")
        assert str(m.cat([t, t]).dtype).endswith("int64")
        assert str((t + 1).dtype).endswith("int64")
        assert str((t * 1.5).dtype).endswith("float32")
    assert type(ember.from_numpy(memmap)._data) is np.ndarray


@pytest.mark.parametrize("make", ["from_numpy", "as_tensor"])
def test_memmap_tensor_shares_memory_as_torch(memmap, make):
    t = getattr(ember, make)(memmap)
    t[0] = 7
    assert memmap[0] == 7
    memmap[1] = 9
    assert t.tolist() == [7, 9, 3]


def test_matrix_becomes_a_plain_tensor_as_torch():
    mat = np.matrix([[1, 2], [3, 4]])
    for make in ("tensor", "as_tensor", "from_numpy"):
        t = getattr(ember, make)(mat)
        assert type(t._data) is np.ndarray
        assert (t[0] * t[0]).tolist() == getattr(torch, make)(mat)[0].pow(2).tolist()
    assert list(default_collate([mat, mat]).shape) == list(
        torch.utils.data.default_collate([mat, mat]).shape)
