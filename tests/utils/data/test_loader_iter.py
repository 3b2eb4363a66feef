"""The loader's side of DataLoader(num_workers > 0) (ember/utils/data/_loader_iter.py): batches
in order as torch's, the same data whatever num_workers, prefetch bounds, persistent workers,
worker errors, dead workers, timeouts and shutdown, spawn workers, argument checks. The
datasets and the loader helper are in tests/utils/_loader_datasets.py so 'spawn' workers can
import them; every test runs under tests/utils/data/conftest.py's hard timeout."""
import multiprocessing
import warnings

import numpy as np
import pytest

import ember
from ember.errors import (EmberError, EmberKeyError, EmberRuntimeError, EmberTypeError,
                          EmberValueError)
from ember.utils.data import DataLoader, TensorDataset, get_worker_info
from ember.utils.data import _loader_iter
from tests.utils import _loader_datasets as D
from tests.utils._loader_datasets import CTX, alive, worker_loader
from tests.utils.data.conftest import HARD_TIMEOUT_S


def _np(batch):
    return [np.asarray(x.numpy() if hasattr(x, "numpy") else x).tolist() for x in batch]


# ---------------------------------------------------------------------------- against torch
@pytest.mark.parametrize("kw", [dict(batch_size=3), dict(batch_size=4, drop_last=True),
                                dict(batch_size=2, prefetch_factor=1),
                                dict(batch_size=3, sampler=[7, 2, 9, 0, 4, 1, 8, 3, 6, 5, 10])])
def test_batches_in_order_match_torch(kw):
    torch = pytest.importorskip("torch")
    ds = D.Squares(11)
    ours = [_np(b) for b in worker_loader(ds, num_workers=2, **kw)]
    kw.pop("timeout", None)
    theirs = [_np(b) for b in torch.utils.data.DataLoader(ds, num_workers=2,
                                                          multiprocessing_context=CTX, **kw)]
    assert ours == theirs
    assert ours == [_np(b) for b in DataLoader(ds, **{k: v for k, v in kw.items()
                                                       if k != "prefetch_factor"})]


# ---------------------------------------------------------------------------- behavior
def test_same_generator_same_data_whatever_num_workers():
    def run(seed, shuffle=True, ds=D.RandomDraws(12), **kw):
        g = None if seed is None else ember.Generator().manual_seed(seed)
        kw.setdefault("num_workers", 2)
        loader = (worker_loader if kw["num_workers"] else DataLoader)(ds, batch_size=3, generator=g,
                                                                shuffle=shuffle, **kw)
        return [[t.tolist() for t in b[:1] + b[2:]] if isinstance(b, (list, tuple)) else
                b.tolist() for b in loader]
    a = run(7)
    assert a == run(7)  # indices, worker seeds, and the three RNGs' draws
    assert a != run(8)
    draws = [v for b in a for v in b[2]]
    assert len(set(draws)) == len(draws)  # the workers are seeded differently
    order = [b[0] for b in a]
    assert sorted(sum(order, [])) == list(range(12)) and sum(order, []) != list(range(12))
    single = DataLoader(D.Squares(12), batch_size=3, shuffle=True,
                        generator=ember.Generator().manual_seed(7))
    assert order == [b[1].tolist() for b in single]
    ember.manual_seed(3)
    c = run(None, shuffle=False)
    ember.manual_seed(3)
    assert c == run(None, shuffle=False)  # no generator: the default one, seeded


def test_prefetch_factor_bounds_batches_in_flight():
    it = iter(worker_loader(D.Squares(40), batch_size=2, num_workers=2, prefetch_factor=3))
    assert it._send_idx == 6  # prefetch_factor * num_workers sent before the first next()
    next(it)
    assert it._send_idx == 7
    assert sorted(b.tolist() for b, _ in worker_loader(D.Squares(7), batch_size=None, num_workers=2,
                                                 in_order=False)) == \
        [[i, i * i] for i in range(7)]


def test_persistent_workers_are_reused_across_epochs():
    loader = worker_loader(D.Pids(8), batch_size=2, num_workers=2, persistent_workers=True)
    epochs = [[p for b in loader for p in b.tolist()] for _ in range(3)]
    assert set(epochs[0]) == set(epochs[1]) == set(epochs[2]) and len(set(epochs[0])) == 2
    it = iter(loader)
    next(it)  # a broken epoch: what the workers still send of it is dropped at the next one
    assert len([b for b in loader]) == 4
    pids = set(epochs[0])
    del it, loader
    assert not any(alive(p) for p in pids)
    fresh = worker_loader(D.Pids(8), batch_size=2, num_workers=2)
    a, b = ({p for b in fresh for p in b.tolist()} for _ in range(2))
    assert not a & b  # without persistent_workers, new workers each epoch
    it_loader = worker_loader(D.ShardedRange(0, 6), batch_size=2, num_workers=2,
                        persistent_workers=True)
    assert [sorted(sum((b.tolist() for b in it_loader), [])) for _ in range(2)] == \
        [list(range(6))] * 2


def test_worker_exception_shows_traceback_and_shuts_down():
    loader = worker_loader(D.FailsAt(12, bad=6), batch_size=2, num_workers=2)
    it = iter(loader)
    pids = it.worker_pids
    seen = [next(it).tolist() for _ in range(3)]  # batch 3 (samples 6, 7) is read by worker 1
    with pytest.raises(EmberValueError) as e:
        next(it)
    msg = str(e.value)
    assert isinstance(e.value, EmberError) and isinstance(e.value, ValueError)
    assert "caught ValueError in worker process 1" in msg
    assert "Original Traceback (most recent call last)" in msg
    assert "sample 6 is unreadable" in msg and "_loader_datasets.py" in msg
    assert "in __getitem__" in msg
    assert len(seen) == 3 and not any(alive(p) for p in pids)
    with pytest.raises(StopIteration):
        next(it)
    persistent = worker_loader(D.FailsAt(4, bad=3), batch_size=2, num_workers=2,
                         persistent_workers=True)
    for _ in range(2):  # each epoch after a failed one starts new workers
        it = iter(persistent)
        pids = it.worker_pids
        with pytest.raises(ValueError, match="sample 3 is unreadable"):
            list(it)
        assert not any(alive(p) for p in pids)
    with pytest.raises(EmberKeyError, match="caught KeyError in worker process 0"):
        list(worker_loader(D.Squares(4), batch_size=2, num_workers=1,
                     collate_fn=lambda b: {}["missing"]))
    with pytest.raises(EmberRuntimeError, match="caught ZeroDivisionError in worker process"):
        list(worker_loader(D.Squares(4), batch_size=2, num_workers=2,
                     worker_init_fn=lambda w: 1 / 0))


def test_worker_killed_by_signal_is_an_error_not_a_hang():
    it = iter(worker_loader(D.KillsItselfAt(8, bad=2), batch_size=2, num_workers=2, timeout=0))
    pids = it.worker_pids
    with pytest.raises(EmberRuntimeError, match=r"worker 1 \(pid \d+\) was killed by signal "
                                                r"SIGKILL"):
        list(it)
    assert not any(alive(p) for p in pids)


def test_early_break_and_deleted_iterator_shut_workers_down():
    loader = worker_loader(D.Pids(40), batch_size=2, num_workers=2)
    for b in loader:
        pids = set(b.tolist())
        break
    it = iter(loader)
    pids |= set(it.worker_pids)
    next(it)
    del it
    assert not any(alive(p) for p in pids)


def test_timeout_raises_and_stops_workers(monkeypatch):
    monkeypatch.setattr(_loader_iter, "_JOIN_S", 0.5)  # the sleeping worker is terminated sooner
    it = iter(worker_loader(D.SleepsAt(8, bad=0, seconds=30), batch_size=2, num_workers=1,
                      timeout=0.5))
    pids = it.worker_pids
    with pytest.raises(EmberRuntimeError, match="timed out after 0.5 seconds"):
        next(it)
    assert not any(alive(p) for p in pids)


def test_spawn_workers():
    ds = TensorDataset(ember.arange(10).float().unsqueeze(1), ember.arange(10))
    loader = DataLoader(ds, batch_size=4, num_workers=1, multiprocessing_context="spawn",
                        timeout=HARD_TIMEOUT_S / 2, persistent_workers=True)
    want = [[t.tolist() for t in b] for b in DataLoader(ds, batch_size=4)]
    assert [[t.tolist() for t in b] for b in loader] == want
    assert [[t.tolist() for t in b] for b in loader] == want
    with pytest.raises(EmberRuntimeError, match="define them at module level"):
        iter(DataLoader(ds, num_workers=1, multiprocessing_context="spawn",
                        collate_fn=lambda b: b))
    with pytest.raises(EmberRuntimeError, match="caught ImportError in worker process 0"):
        list(DataLoader(D.LoadsOnlyHere(), num_workers=1, multiprocessing_context="spawn",
                        timeout=HARD_TIMEOUT_S / 2))


def test_arguments_checked_as_torch():
    ds = D.Squares(4)
    with pytest.raises(EmberValueError, match="valid start method"):
        DataLoader(ds, num_workers=1, multiprocessing_context="nope")
    with pytest.raises(EmberTypeError, match="valid context object"):
        DataLoader(ds, num_workers=1, multiprocessing_context=3)
    with pytest.raises(EmberValueError, match="num_workers > 0"):
        DataLoader(ds, multiprocessing_context=CTX or "spawn")
    with pytest.raises(EmberValueError, match="persistent_workers option needs"):
        DataLoader(ds, persistent_workers=True)
    with pytest.raises(EmberValueError, match="prefetch_factor"):
        DataLoader(ds, prefetch_factor=2)
    with pytest.raises(EmberValueError, match="timeout option should be non-negative"):
        DataLoader(ds, num_workers=1, timeout=-1)
    with pytest.raises(EmberValueError, match="num_workers option should be non-negative"):
        DataLoader(ds, num_workers=-1)
    ctx = multiprocessing.get_context(CTX)
    assert DataLoader(ds, num_workers=1, multiprocessing_context=ctx).multiprocessing_context \
        is ctx
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = [b[1].tolist() for b in worker_loader(ds, batch_size=2, num_workers=1, pin_memory=True)]
    assert got == [[0, 1], [2, 3]] and any("pin_memory" in str(x.message) for x in w)


def test_torch_submodule_paths():
    import ember.utils.data as data
    from ember.utils.data import dataloader, dataset, sampler
    for mod in (dataloader, dataset, sampler):
        assert all(getattr(mod, n) is getattr(data, n) for n in mod.__all__)
    assert dataloader.get_worker_info is get_worker_info




def test_pin_memory_warning_is_shown_once_for_every_loop_as_torchs():
    """The warning is attributed to the loader, so Python's default filter shows it once
    however many loops iterate loaders (it named each loop's line: one warning per loop)."""
    import warnings
    from ember.utils.data import DataLoader
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("default")
        warnings.resetwarnings()
        warnings.simplefilter("default")
        for _ in DataLoader(list(range(4)), batch_size=2, pin_memory=True):
            pass
        for _ in DataLoader(list(range(4)), batch_size=2, pin_memory=True):
            pass
    assert sum("pin_memory" in str(x.message) for x in w) == 1
