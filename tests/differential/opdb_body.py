"""ember against torch on the OpInfo entries of torch's op_db that ember resolves: torch's own
sample inputs in a drawn dtype (every one the entry lists), each tensor in a drawn layout, in a
drawn form (function, in-place, out=), with float64 gradients at first and second order.
EMBER_DIFFERENTIAL=long: 50x the examples, a random seed."""
import pytest
from hypothesis import given, strategies as st

from tests.differential import harness as H
from tests.differential.settings import differential

pytest.importorskip("torch")
pytest.importorskip("expecttest")


@differential(H.examples(2800))
@given(st.data())
def test_opdb_entry_matches_torch(data):
    H.check(data.draw(H.opdb_cases(), label="case"))
