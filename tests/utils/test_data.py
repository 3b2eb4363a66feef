"""ember.utils.data: datasets, samplers, collation, DataLoader determinism."""
import numpy as np
import pytest

import ember
from ember.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset,
                              RandomSampler, SequentialSampler, Subset, TensorDataset,
                              WeightedRandomSampler, default_collate, random_split)


def _ds(n=10):
    return TensorDataset(ember.arange(n).float().unsqueeze(1), ember.arange(n))


def test_tensor_dataset_and_sequential_loader():
    ds = _ds()
    assert len(ds) == 10
    x, y = ds[3]
    assert float(x[0]) == 3.0 and int(y) == 3
    batches = list(DataLoader(ds, batch_size=4))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert tuple(batches[0][0].shape) == (4, 1)
    assert len(DataLoader(ds, batch_size=4)) == 3
    assert [b[1].tolist() for b in DataLoader(ds, batch_size=4, drop_last=True)] == \
        [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError):
        TensorDataset(ember.zeros(3), ember.zeros(4))


def test_single_process_iterator_is_torchs_class_with_len_and_no_python2_next():
    # pytorch-tutorial's pytorch_basics calls ``iter(loader).next()``: AttributeError naming
    # torch's _SingleProcessDataLoaderIter (ember's was a generator); len(iter(loader)) works
    torch = pytest.importorskip("torch")
    results = []
    for lib in (ember, torch):
        ds = lib.utils.data.TensorDataset(lib.arange(10).float())
        it = iter(lib.utils.data.DataLoader(ds, batch_size=3))
        with pytest.raises(AttributeError) as info:
            it.next()
        results.append((type(it).__name__, len(it), str(info.value), iter(it) is it,
                        [b[0].tolist() for b in it]))
        with pytest.raises(StopIteration):
            next(it)

        class StopsAtThree(lib.utils.data.Dataset):
            def __len__(self):
                return 6

            def __getitem__(self, i):
                if i == 3:
                    raise StopIteration
                return i
        results.append([b.tolist() for b in lib.utils.data.DataLoader(StopsAtThree(),
                                                                       batch_size=2)])
    assert results[:2] == results[2:] and results[1] == [[0, 1]]


def test_shuffle_determinism_with_generator_and_seed():
    ds = _ds(20)

    def order(**kw):
        return [b[1].tolist() for b in DataLoader(ds, batch_size=6, shuffle=True, **kw)]
    g1 = ember.Generator().manual_seed(7)
    g2 = ember.Generator().manual_seed(7)
    a, b = order(generator=g1), order(generator=g2)
    assert a == b and sorted(sum(a, [])) == list(range(20)) and sum(a, []) != list(range(20))
    assert order(generator=g1) != a  # a new epoch, a new order
    ember.manual_seed(3)
    c = order()
    ember.manual_seed(3)
    assert order() == c


class Squares(Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"x": np.array([i, i * i], np.float32), "y": i, "name": f"s{i}"}


def test_default_collate_nested_and_custom_collate():
    b = next(iter(DataLoader(Squares(), batch_size=3)))
    assert tuple(b["x"].shape) == (3, 2) and b["y"].tolist() == [0, 1, 2]
    assert b["name"] == ["s0", "s1", "s2"]
    out = list(DataLoader(Squares(), batch_size=2, collate_fn=lambda xs: len(xs)))
    assert out == [2, 2, 1]
    c = default_collate([(1, 2.0), (3, 4.0)])
    assert c[0].dtype == ember.int64 and c[1].dtype == ember.float64
    single = list(DataLoader(Squares(), batch_size=None))
    assert single[2]["y"] == 2


def test_samplers():
    ds = _ds(7)
    assert list(SequentialSampler(ds)) == list(range(7))
    rs = RandomSampler(ds, generator=ember.Generator().manual_seed(0))
    assert sorted(rs) == list(range(7))
    rr = list(RandomSampler(ds, replacement=True, num_samples=20,
                            generator=ember.Generator().manual_seed(0)))
    assert len(rr) == 20 and max(rr) < 7
    assert list(BatchSampler(range(5), 2, False)) == [[0, 1], [2, 3], [4]]
    loader = DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), 3, True))
    assert [b[1].tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]]
    loader = DataLoader(ds, sampler=[6, 5, 4], batch_size=2)
    assert [b[1].tolist() for b in loader] == [[6, 5], [4]]
    w = list(WeightedRandomSampler([0, 0, 1.0], 5, generator=ember.Generator().manual_seed(0)))
    assert w == [2] * 5
    with pytest.raises(ValueError):
        DataLoader(ds, sampler=[0], shuffle=True)


def _first(iterable, k):
    import itertools
    return list(itertools.islice(iter(iterable), k))


def _peak_bytes(fn):
    import tracemalloc
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("make", [
    lambda g: RandomSampler(range(1000), replacement=True, num_samples=10 ** 10, generator=g),
    lambda g: RandomSampler(range(1000), num_samples=10 ** 10, generator=g),
    lambda g: WeightedRandomSampler(ember.linspace(0.1, 1.0, 1000), 10 ** 10, generator=g),
])
def test_samplers_draw_lazily_for_huge_num_samples(make):
    """RandomSampler(replacement=True, num_samples=10**10) allocated every index up front
    (80 GB); the first 100 indices now cost a few KiB, as torch's 32-at-a-time draws."""
    s = make(ember.Generator().manual_seed(0))
    assert len(s) == 10 ** 10
    first, peak = _peak_bytes(lambda: _first(s, 100))
    assert peak < 2 ** 20, peak
    assert len(first) == 100 and all(0 <= i < 1000 for i in first)
    again = _first(make(ember.Generator().manual_seed(0)), 100)
    assert again == first  # generator= honoured: same seed, same indices


def test_random_sampler_semantics():
    n = 10
    perm = list(RandomSampler(range(n), num_samples=25))
    assert sorted(perm[:10]) == list(range(n)) and sorted(perm[10:20]) == list(range(n))
    assert len(perm) == 25 and len(set(perm[20:])) == 5
    draws = list(RandomSampler(range(n), replacement=True, num_samples=20000,
                               generator=ember.Generator().manual_seed(1)))
    counts = np.bincount(draws, minlength=n)
    assert len(draws) == 20000 and counts.min() > 1700 and counts.max() < 2300
    it = iter(RandomSampler(range(n), replacement=True, num_samples=33))
    assert len(list(it)) == 33


def test_weighted_sampler_semantics():
    w = [0.0, 1.0, 3.0, 0.0, 4.0]
    s = WeightedRandomSampler(w, 40000, generator=ember.Generator().manual_seed(2))
    draws = list(s)
    freq = np.bincount(draws, minlength=5) / len(draws)
    np.testing.assert_allclose(freq, np.array(w) / 8, atol=0.01)
    assert s.weights.dtype == ember.float64 and s.weights.tolist() == w
    picks = list(WeightedRandomSampler(w, 3, replacement=False))
    assert sorted(picks) == [1, 2, 4]
    picks = list(WeightedRandomSampler(w, 5, replacement=False))  # zero weights last, as torch
    assert sorted(picks[:3]) == [1, 2, 4] and sorted(picks[3:]) == [0, 3]
    # without replacement the first pick follows the weights
    first = [list(WeightedRandomSampler([1.0, 3.0], 2, replacement=False,
                                        generator=ember.Generator().manual_seed(i)))[0]
             for i in range(2000)]
    assert 0.7 < np.mean(first) < 0.8


@pytest.mark.parametrize("make, err, match", [
    ("W([1., 2.], 3, replacement=False)", RuntimeError, "cannot sample n_sample > prob_dist"),
    ("W([-1., 2.], 3)", RuntimeError, r"probability entry < 0"),
    ("W([0., 0.], 3)", RuntimeError, r"sum of probabilities <= 0"),
    ("W([float('inf'), 1.], 3)", RuntimeError, "infinity or NaN"),
    ("W([[1., 2.]], 3)", ValueError, r"1d sequence but given weights have shape \(1, 2\)"),
    ("W([1., 2.], 0)", ValueError, "num_samples=0"),
    ("W([1., 2.], True)", ValueError, "num_samples=True"),
    ("W([1., 2.], 2, replacement=1)", ValueError, "replacement=1"),
    ("R(range(3), replacement=1)", TypeError, "replacement=1"),
    ("R(range(3), num_samples=0)", ValueError, "num_samples=0"),
    ("R(range(0))", ValueError, "num_samples=0"),
])
def test_sampler_errors_match_torch(make, err, match):
    torch = pytest.importorskip("torch")
    from torch.utils import data as tdata
    for W, R in ((tdata.WeightedRandomSampler, tdata.RandomSampler),
                 (WeightedRandomSampler, RandomSampler)):
        with pytest.raises(err, match=match):
            list(eval(make))


def test_subset_concat_random_split():
    ds = _ds(10)
    s = Subset(ds, [9, 0, 4])
    assert len(s) == 3 and int(s[0][1]) == 9
    c = ConcatDataset([ds, s])
    assert len(c) == 13 and int(c[10][1]) == 9 and int(c[-1][1]) == 4
    assert len(ds + s) == 13
    a, b = random_split(ds, [7, 3], generator=ember.Generator().manual_seed(1))
    idx = sorted(list(a.indices) + list(b.indices))
    assert idx == list(range(10))
    a2, _ = random_split(ds, [7, 3], generator=ember.Generator().manual_seed(1))
    assert a.indices == a2.indices
    f1, f2, f3 = random_split(ds, [0.5, 0.3, 0.2], generator=ember.Generator().manual_seed(0))
    assert (len(f1), len(f2), len(f3)) == (5, 3, 2)
    with pytest.raises(ValueError):
        random_split(ds, [4, 4])


class Counter(IterableDataset):
    def __iter__(self):
        return iter(range(5))


def test_iterable_dataset():
    assert [b.tolist() for b in DataLoader(Counter(), batch_size=2)] == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError):
        DataLoader(Counter(), shuffle=True)


def test_collate_gives_a_list_for_tuple_samples_as_torch():
    """torch collates tuple samples into a list (``batch[0] = batch[0].to(device)`` works)."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate
    def shape(x):   # the containers' types and the leaves' values
        return [shape(y) for y in x] if isinstance(x, (list, tuple)) else x.tolist()

    def kinds(x):
        return (type(x).__name__, [kinds(y) for y in x]) if isinstance(x, (list, tuple)) \
            else "tensor"
    for samples in ([(1, 2.0), (3, 4.0)], [[1, 2.0], [3, 4.0]], [((1, 2), 3), ((4, 5), 6)]):
        ours, theirs = default_collate(samples), torch_collate(samples)
        assert kinds(ours) == kinds(theirs) and shape(ours) == shape(theirs)
        assert type(ours) is list
    batch = next(iter(DataLoader(_ds(4), batch_size=2)))
    assert isinstance(batch, list)
    batch[0] = batch[0] * 2


def test_chain_and_stack_datasets_and_torchs_top_level_names():
    import ember.utils.data as D

    class Stream(IterableDataset):
        def __init__(self, items):
            self.items = items

        def __iter__(self):
            return iter(self.items)

        def __len__(self):
            return len(self.items)
    chain = D.ChainDataset([Stream([1, 2]), Stream([3])])
    assert list(chain) == [1, 2, 3] and len(chain) == 3
    with pytest.raises(ember.errors.EmberError, match="IterableDataset"):
        list(D.ChainDataset([Stream([1]), [2]]))
    stack = D.StackDataset(_ds(3), ["a", "b", "c"])
    (x, y), name = stack[1]
    assert int(y) == 1 and name == "b" and len(stack) == 3
    assert D.StackDataset(x=[1, 2], y=[3, 4])[1] == {"x": 2, "y": 4}
    batch = next(iter(DataLoader(D.StackDataset(a=_ds(4), b=[0, 1, 2, 3]), batch_size=2)))
    assert batch["b"].tolist() == [0, 1] and batch["a"][1].tolist() == [0, 1]
    for bad in (lambda: D.StackDataset([1], [1, 2]), lambda: D.StackDataset(),
                lambda: D.StackDataset([1], y=[1])):
        with pytest.raises(ember.errors.EmberError, match="StackDataset"):
            bad()
    from ember.utils.data.distributed import DistributedSampler
    assert D.DistributedSampler is DistributedSampler
    assert D.sampler.SubsetRandomSampler is D.SubsetRandomSampler
    assert D.dataloader.DataLoader is DataLoader and D.dataset.StackDataset is D.StackDataset
    with pytest.raises(AttributeError):
        D.NoSuchThing


def test_collate_keeps_numpy_scalar_dtypes_and_mapping_types_as_torch():
    """A Dataset returning NumPy scalars (``np.float32(label)``) batches in their dtype, and a
    sample that is an OrderedDict stays one."""
    from collections import OrderedDict
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate
    for scalars in ([np.float32(1.5), np.float32(2)], [np.int32(1), np.int32(2)],
                    [np.uint8(3), np.uint8(4)], [np.float16(1), np.float16(2)],
                    [np.float64(1), np.float64(2)], [np.bool_(True), np.bool_(False)],
                    [True, False], [1.5, 2.5], [1, 2]):
        ours, theirs = default_collate(scalars), torch_collate(scalars)
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1], scalars
        assert ours.tolist() == theirs.tolist()
    batch = default_collate([OrderedDict(x=np.float32(1), y=2), OrderedDict(x=np.float32(3), y=4)])
    assert type(batch) is OrderedDict and list(batch) == ["x", "y"]
    assert batch["x"].dtype == ember.float32 and batch["y"].dtype == ember.int64


def test_collate_of_unequal_samples_raises_torchs_stack_error():
    """Variable-length text without a padding collate_fn fails with torch's message (the one
    users search for), for tensors and ndarrays alike; string arrays cannot be batched."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate
    for samples in ([ember.ones(3), ember.ones(3), ember.ones(4)],
                    [np.ones(3), np.ones(3), np.ones(4)]):
        with pytest.raises(RuntimeError) as ours:
            default_collate(samples)
        theirs = [torch.from_numpy(np.asarray(s)) for s in samples]
        with pytest.raises(RuntimeError) as expected:
            torch_collate(theirs)
        assert str(ours.value) == str(expected.value) == (
            "stack expects each tensor to be equal size, but got [3] at entry 0 and [4] at "
            "entry 2")
    with pytest.raises(RuntimeError, match=r"got \[3\] at entry 0 and \[4\] at entry 1"):
        next(iter(DataLoader([ember.ones(3), ember.ones(4)], batch_size=2)))
    for arr, name in ((np.array(["a"]), "<U1"), (np.array([None]), "object")):
        with pytest.raises(TypeError, match=f"numbers, dicts or lists; found {name}$"):
            default_collate([arr, arr])
        with pytest.raises(TypeError, match=f"numbers, dicts or lists; found {name}$"):
            torch_collate([arr, arr])
