"""DistributedDataParallel on 2 ranks equals one process on the whole batch."""
from tests.distributed.helpers import ok_ranks, run_ranks


def test_ddp_matches_single_process():
    p = run_ranks("ddp.py", 2)
    assert ok_ranks(p.stdout) == list(range(2))


def test_ddp_rejects_different_models():
    p = run_ranks("ddp_mismatch.py", 2, check=False)
    assert p.returncode != 0
    assert "rank 1 has shape (4, 3)" in p.stderr or "on rank 1 has shape (4, 3)" in p.stderr, \
        p.stderr
