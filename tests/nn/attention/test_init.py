"""sdpa_kernel and SDPBackend (ember/nn/attention/__init__.py) as torch's on a CPU: the backend values,
the regions that run scaled_dot_product_attention (MATH, FLASH_ATTENTION) and those with no
viable backend, nesting, and a bad argument."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.nn.attention import SDPBackend, sdpa_kernel

torch = pytest.importorskip("torch")


def test_backend_names_and_values_are_torchs():
    from torch.nn.attention import SDPBackend as T
    assert {k: int(v) for k, v in SDPBackend.__members__.items()} == \
        {k: int(v) for k, v in T.__members__.items()}


@pytest.mark.parametrize("backends,runs", [
    (SDPBackend.MATH, True), (SDPBackend.FLASH_ATTENTION, True),
    ([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH], True),
    (SDPBackend.EFFICIENT_ATTENTION, False),
    ([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION], False)])
def test_regions_run_attention_where_torch_runs_it_on_a_cpu(backends, runs):
    from torch.nn.attention import SDPBackend as T, sdpa_kernel as t_kernel
    q = np.random.default_rng(0).standard_normal((1, 2, 4, 8))
    t_back = [T(int(b)) for b in backends] if isinstance(backends, list) else T(int(backends))
    try:
        with t_kernel(t_back):
            want = torch.nn.functional.scaled_dot_product_attention(
                *(torch.tensor(q),) * 3, is_causal=True).numpy()
    except RuntimeError:
        want = None
    assert (want is not None) == runs
    with sdpa_kernel(backends) as state:
        assert state == {}
        if runs:
            got = F.scaled_dot_product_attention(*(ember.tensor(q),) * 3, is_causal=True)
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
        else:
            with pytest.raises(ember.errors.EmberError, match="no viable backend"):
                F.scaled_dot_product_attention(*(ember.tensor(q),) * 3)


def test_regions_nest_and_restore():
    q = ember.randn(1, 1, 3, 4)
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        with sdpa_kernel([SDPBackend.MATH]):
            F.scaled_dot_product_attention(q, q, q)
        with pytest.raises(ember.errors.EmberError):
            F.scaled_dot_product_attention(q, q, q)
    F.scaled_dot_product_attention(q, q, q)
    with pytest.raises(ember.errors.EmberError, match="SDPBackend"):
        with sdpa_kernel("math"):
            pass
