"""torch.nn.attention.bias (ember/nn/attention/bias.py): the causal biases as
scaled_dot_product_attention's attn_mask against torch's (square, wide, tall, GQA, dropout off),
their materialised masks, CausalVariant's values, and the errors."""
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.nn.attention import bias
from ember.nn.attention.bias import CausalBias, CausalVariant, causal_lower_right, \
    causal_upper_left

torch = pytest.importorskip("torch")
import torch.nn.attention.bias as tbias  # noqa: E402


def test_variant_names_and_values_are_torchs():
    assert {k: int(v) for k, v in CausalVariant.__members__.items()} == \
        {k: int(v) for k, v in tbias.CausalVariant.__members__.items()}
    assert sorted(bias.__all__) == sorted(tbias.__all__)


@pytest.mark.parametrize("factory", ["causal_upper_left", "causal_lower_right"])
@pytest.mark.parametrize("L,S", [(4, 4), (3, 5), (5, 3)])
def test_sdpa_with_a_causal_bias_matches_torch(factory, L, S):
    rs = np.random.RandomState(0)
    q, k, v = rs.randn(2, 2, L, 8), rs.randn(2, 2, S, 8), rs.randn(2, 2, S, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tb, eb = getattr(tbias, factory)(L, S), getattr(bias, factory)(L, S)
    want = torch.nn.functional.scaled_dot_product_attention(
        *map(torch.tensor, (q, k, v)), attn_mask=tb, scale=0.3).numpy()
    got = F.scaled_dot_product_attention(*map(ember.tensor, (q, k, v)), attn_mask=eb,
                                         scale=0.3).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(eb._materialize().numpy(), tb._materialize().numpy())


def test_gqa_and_gradients_match_torch():
    rs = np.random.RandomState(1)
    q, k, v = rs.randn(1, 4, 3, 8), rs.randn(1, 2, 5, 8), rs.randn(1, 2, 5, 8)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    eq, ek, ev = (ember.tensor(a, requires_grad=True) for a in (q, k, v))
    to = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=tbias.causal_lower_right(3, 5), enable_gqa=True)
    eo = F.scaled_dot_product_attention(eq, ek, ev, attn_mask=causal_lower_right(3, 5),
                                        enable_gqa=True)
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), atol=1e-12)
    to.sum().backward()
    eo.sum().backward()
    for e, t in ((eq, tq), (ek, tk), (ev, tv)):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), atol=1e-12)


def test_tall_lower_right_warns_as_torch():
    with pytest.warns(UserWarning, match="Lower right causal bias will produce NaNs"):
        b = causal_lower_right(5, 3)
    assert (b.variant, b.seq_len_q, b.seq_len_kv) == (CausalVariant.LOWER_RIGHT, 5, 3)
    assert repr(b) == repr(b._materialize())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        causal_upper_left(5, 3)


def test_errors():
    q = ember.randn(1, 1, 3, 4)
    with pytest.raises(ember.errors.EmberValueError, match="causal=True"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=causal_upper_left(3, 3),
                                       is_causal=True)
    with pytest.raises(ember.errors.EmberValueError, match="2D"):
        causal_lower_right(3)
    with pytest.raises(ember.errors.EmberValueError, match="CausalVariant"):
        CausalBias(1, 3, 3)
