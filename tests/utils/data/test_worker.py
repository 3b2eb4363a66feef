"""What runs inside a DataLoader worker (ember/utils/data/_worker.py), against torch: which worker
reads each batch and its worker info, IterableDataset copies per worker, the workers' Python /
NumPy / ember seeds, worker_init_fn and collate_fn in the worker with tensors sent back, and one
thread per worker."""
import os
import random

import numpy as np
import pytest

import ember
from ember.utils.data import TensorDataset, get_worker_info
from tests.utils import _loader_datasets as D
from tests.utils._loader_datasets import CTX, worker_loader


def _list(b):
    return b.tolist() if hasattr(b, "tolist") else b


def test_worker_info_and_batch_assignment_match_torch():
    torch = pytest.importorskip("torch")

    def rows(loader):
        out = [(b[0].tolist(), b[1].tolist(), b[2].tolist(), b[4], b[5].tolist()) for b in loader]
        bases = {v for b in loader for v in b[3].tolist()}
        return out, bases
    ours, our_bases = rows(worker_loader(D.WorkerTagged(10), batch_size=3, num_workers=2))
    theirs, their_bases = rows(torch.utils.data.DataLoader(
        D.WorkerTagged(10, "torch"), batch_size=3, num_workers=2, multiprocessing_context=CTX))
    assert ours == theirs  # batch k read by worker k % 2, ids, num_workers, the dataset copy
    assert [r[1][0] for r in ours] == [0, 1, 0, 1]
    assert len(our_bases) == 1 and len(their_bases) == 1  # seed = one base_seed + worker id
    assert get_worker_info() is None


@pytest.mark.parametrize("shard", [True, False])
def test_iterable_dataset_per_worker_copies_match_torch(shard):
    torch = pytest.importorskip("torch")
    for kw in (dict(batch_size=2), dict(batch_size=None), dict(batch_size=3, drop_last=True)):
        ours = [_list(b) for b in worker_loader(D.ShardedRange(0, 9, shard), num_workers=2, **kw)]
        theirs = [_list(b) for b in torch.utils.data.DataLoader(
            D.torch_sharded_range(0, 9, shard), num_workers=2, multiprocessing_context=CTX,
            **kw)]
        assert ours == theirs, kw
    flat = sorted(sum((b.tolist() for b in worker_loader(D.ShardedRange(0, 9, shard), batch_size=2,
                                                     num_workers=2)), []))
    assert flat == (list(range(9)) if shard else sorted(list(range(9)) * 2))


def test_worker_numpy_seed_is_torchs():
    torch = pytest.importorskip("torch")
    from torch.utils.data._utils.worker import _generate_state
    batches = list(worker_loader(D.RandomDraws(4), batch_size=2, num_workers=2))
    for wid, b in enumerate(batches):  # sample 2 * wid is the first its worker read
        seed = int(b[2][0])
        base = seed - wid
        assert b[3][0].item() == random.Random(seed).random()
        assert b[4][0].item() == np.random.RandomState(_generate_state(base, wid)).rand()
        ember.manual_seed(seed)
        assert b[5][0].item() == pytest.approx(ember.rand(()).item())


def test_worker_init_fn_collate_fn_and_tensor_transfer_in_workers():
    got = list(worker_loader(D.InitSeen(), batch_size=2, num_workers=2, worker_init_fn=D.init_fn))
    assert [b[0].tolist() for b in got] == [[0, 1], [2, 3], [4, 5]]
    assert [b[1].tolist() for b in got] == [[1, 1]] * 3  # once per worker
    assert [b[2].tolist() for b in got] == [[100, 100], [101, 101], [100, 100]]
    assert D.INIT == []  # ran in the workers only
    batches = list(worker_loader(D.Squares(6), batch_size=3, num_workers=2, collate_fn=D.pid_collate))
    assert [b[0] for b in batches] == [[0, 1, 2], [3, 4, 5]]
    assert os.getpid() not in {b[1] for b in batches} and len({b[1] for b in batches}) == 2
    x = ember.randn(8, 3, 4)
    ds = TensorDataset(x, ember.arange(8))
    out = list(worker_loader(ds, batch_size=4, num_workers=2))
    assert isinstance(out[0][0], ember.Tensor) and out[0][0].dtype == ember.float32
    assert np.array_equal(np.concatenate([b[0].numpy() for b in out]), x.numpy())
    out[0][0].add_(1)  # batches own writable memory
    strided = list(worker_loader(D.Squares(4), batch_size=2, num_workers=1,
                           collate_fn=lambda b: ember.tensor(np.stack([s[0] for s in b]).T)))
    assert strided[1].tolist() == [[2.0, 3.0], [4.0, 9.0]]


def test_workers_run_one_thread_as_torchs():
    """A worker's ember loops and BLAS run one thread (torch's workers set 1), so N workers do
    not each take the parent's count; the parent's count is unchanged."""
    torch = pytest.importorskip("torch")
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        ours = [b.tolist() for b in worker_loader(D.ThreadCounts(4), batch_size=2, num_workers=2)]
        assert ember.get_num_threads() == 2
    finally:
        ember.set_num_threads(before)
    theirs = [b.tolist() for b in torch.utils.data.DataLoader(
        D.ThreadCounts(4, "torch"), batch_size=2, num_workers=2, multiprocessing_context=CTX)]
    assert ours == theirs == [[1, 1], [1, 1]]
