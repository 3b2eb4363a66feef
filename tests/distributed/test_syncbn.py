"""SyncBatchNorm on 2 ranks equals BatchNorm on the whole batch."""
from tests.distributed.helpers import ok_ranks, run_ranks


def test_sync_batchnorm_matches_whole_batch():
    assert ok_ranks(run_ranks("syncbn.py", 2).stdout) == [0, 1]
