"""ember.distributed collectives on 2 and 4 ranks against NumPy."""
import pytest

from tests.distributed.helpers import ok_ranks, run_ranks


@pytest.mark.parametrize("n", [2, 4])
def test_collectives_match_numpy(n):
    p = run_ranks("collectives.py", n)
    assert ok_ranks(p.stdout) == list(range(n))
