"""ember.distributed collectives on 2 and 4 ranks against NumPy."""
import pytest

from tests.distributed.helpers import run_ranks


@pytest.mark.parametrize("n", [2, 4])
def test_collectives_match_numpy(n):
    p = run_ranks("collectives.py", n)
    assert sorted(p.stdout.split("\n")[:-1]) == [f"OK rank {k}" for k in range(n)]
