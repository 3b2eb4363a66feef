"""SyncBatchNorm (ember/nn/parallel/sync_batchnorm.py) on 2 and 4 ranks equals BatchNorm on the
whole batch."""
import pytest

from tests.distributed.helpers import ok_ranks, run_ranks


@pytest.mark.parametrize("n", [2, 4])
def test_sync_batchnorm_matches_whole_batch(n):
    assert ok_ranks(run_ranks("syncbn.py", n).stdout) == list(range(n))
