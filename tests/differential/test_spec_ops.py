"""ember against torch on the ops of ember/autograd/derivatives.yaml: each example draws an
entry, one of its ``test:`` samples, dtypes (all twelve), layouts (strided, transposed,
expanded, negative strides, views of views), Python scalar types, NaN/inf values and a form
(function, method, in-place, out=), and compares values, dtypes, errors and (float64)
gradients at first and second order. EMBER_DIFFERENTIAL=long: 50x the examples, a random seed."""
import pytest
from hypothesis import given, strategies as st

from tests.differential import harness as H
from tests.differential.settings import differential

pytest.importorskip("torch")


@differential(H.examples(3000))
@given(st.data())
def test_spec_op_matches_torch(data):
    H.check(data.draw(H.spec_cases(), label="case"))


@differential(H.examples(1400))
@given(st.data())
def test_spec_op_gradients_match_torch(data):
    """Only float64 cases with gradients (half of the drawn cases of differentiable ops have
    them in the test above; this one has nothing else)."""
    H.check(data.draw(H.spec_cases(grad_only=True), label="case"))
