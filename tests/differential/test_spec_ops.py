"""ember against torch on the ops of the op spec: for each entry, examples draw one of its
``test:`` samples, dtypes (all twelve), layouts (strided, transposed, expanded, negative strides,
views of views), Python scalar types, NaN/inf values and a form (function, method, in-place,
out=), and compare values, dtypes, errors and (float64) gradients at first and second order.
Each entry is its own test with its own derandomized examples, so an entry's cases change only
when that entry or the tester changes. EMBER_DIFFERENTIAL=long: 50x the examples, a random seed."""
import pytest
from hypothesis import given, strategies as st

from tests.differential import harness as H
from tests.differential.settings import differential

pytest.importorskip("torch")


@pytest.mark.parametrize("name", H.spec_op_names())
@differential(H.examples(8))
@given(data=st.data())
def test_spec_op_matches_torch(name, data):
    H.check(data.draw(H.spec_cases(name), label="case"))


@pytest.mark.parametrize("name", H.spec_op_names(grad_only=True))
@differential(H.examples(5))
@given(data=st.data())
def test_spec_op_gradients_match_torch(name, data):
    """Only float64 cases with gradients (about half of the cases of differentiable ops have
    them in the test above; this one has nothing else)."""
    H.check(data.draw(H.spec_cases(name, grad_only=True), label="case"))
