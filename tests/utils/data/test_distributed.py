"""DistributedSampler partitions exactly, pads or drops as torch does, reshuffles per epoch."""
import pytest

from ember.errors import EmberValueError
from ember.utils.data.distributed import DistributedSampler


@pytest.mark.parametrize("n,replicas", [(10, 2), (10, 3), (7, 4), (2, 4), (12, 4)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_partitions_and_pads(n, replicas, shuffle):
    data = list(range(n))
    parts = [list(DistributedSampler(data, replicas, r, shuffle=shuffle, seed=3))
             for r in range(replicas)]
    per = -(-n // replicas)
    assert all(len(p) == per for p in parts)
    flat = sorted(i for p in parts for i in p)
    assert set(flat) == set(range(n))          # every index, each rank's share disjoint ...
    assert len(flat) - n == per * replicas - n  # ... except the wrap-around padding


@pytest.mark.parametrize("n,replicas", [(10, 3), (12, 4), (7, 2)])
def test_drop_last_is_a_disjoint_partition(n, replicas):
    parts = [list(DistributedSampler(range(n), replicas, r, shuffle=True, drop_last=True))
             for r in range(replicas)]
    flat = [i for p in parts for i in p]
    assert len(flat) == len(set(flat)) == (n // replicas) * replicas
    assert all(len(p) == n // replicas for p in parts)


def test_set_epoch_reshuffles_the_same_way_on_every_rank():
    s0, s1 = DistributedSampler(range(40), 2, 0), DistributedSampler(range(40), 2, 1)
    first = list(s0) + list(s1)
    s0.set_epoch(1)
    s1.set_epoch(1)
    second = list(s0) + list(s1)
    assert sorted(first) == sorted(second) == list(range(40))
    assert first != second
    assert list(DistributedSampler(range(40), 2, 0)) == first[:20]  # deterministic per epoch


def test_no_shuffle_order_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TS
    for n, k, drop in [(10, 3, False), (10, 3, True), (5, 4, False), (1, 3, False)]:
        for r in range(k):
            ours = list(DistributedSampler(range(n), k, r, shuffle=False, drop_last=drop))
            assert ours == list(TS(range(n), k, r, shuffle=False, drop_last=drop))


def test_bad_rank():
    with pytest.raises(EmberValueError, match="invalid rank 2"):
        DistributedSampler(range(4), 2, 2)
