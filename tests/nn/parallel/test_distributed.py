"""DistributedDataParallel (ember/nn/parallel/distributed.py) on 2 and 4 ranks equals one process
on the whole batch; ranks holding different models are refused, naming the rank and shape."""
import pytest

from tests.distributed.helpers import ok_ranks, run_ranks


@pytest.mark.parametrize("n", [2, 4])
def test_ddp_matches_single_process(n):
    p = run_ranks("ddp.py", n)
    assert ok_ranks(p.stdout) == list(range(n))


def test_ddp_rejects_different_models():
    p = run_ranks("ddp_mismatch.py", 2, check=False)
    assert p.returncode != 0
    assert "rank 1 has shape (4, 3)" in p.stderr or "on rank 1 has shape (4, 3)" in p.stderr, \
        p.stderr
