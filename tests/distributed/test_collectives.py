"""ember.distributed collectives on 2 and 4 ranks against NumPy."""
import pytest

from tests.distributed.helpers import ok_ranks, run_ranks


@pytest.mark.parametrize("n", [2, 4])
def test_collectives_match_numpy(n):
    p = run_ranks("collectives.py", n)
    assert ok_ranks(p.stdout) == list(range(n))


def test_debug_mode_accepts_every_collective_called_alike():
    # uneven all_to_all splits differ per rank, legitimately: debug mode compares rows only
    p = run_ranks("collectives.py", 2, env={"EMBER_DISTRIBUTED_DEBUG": "DETAIL"})
    assert ok_ranks(p.stdout) == [0, 1]
