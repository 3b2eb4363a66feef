"""The object collectives (ember/distributed/objects.py) on 2 and 3 ranks: broadcast_object_list
and all_gather_object carry JSON values; tuples, NumPy scalars, tensors, non-string keys and NaN
are a TypeError naming JSON."""
import pytest

from tests.distributed.helpers import ok_ranks, run_ranks


@pytest.mark.parametrize("n", [2, 3])
def test_object_collectives(n):
    assert ok_ranks(run_ranks("objects.py", n).stdout) == list(range(n))
