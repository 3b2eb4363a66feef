"""ember.nn.functional calls against torch.nn.functional that the layer cases do not reach: the
legacy size_average/reduce arguments, scaled_dot_product_attention with its masks and scale,
normalize, one_hot, unfold, linear interpolate, local_response_norm, embedding_bag (float64)."""
import numpy as np
import pytest

import ember
from tests.nn._parity import assert_close

torch = pytest.importorskip("torch")


def test_functional_legacy_reduction_args():
    import ember.nn.functional as F
    x = np.random.default_rng(0).standard_normal((3, 4))
    t = np.random.default_rng(1).standard_normal((3, 4))
    with pytest.warns(UserWarning):
        a = F.mse_loss(ember.tensor(x), ember.tensor(t), size_average=False)
    b = torch.nn.functional.mse_loss(torch.tensor(x), torch.tensor(t), reduction="sum")
    assert_close(a.numpy(), b.numpy())
    with pytest.warns(UserWarning):
        c = F.cross_entropy(ember.tensor(x), ember.tensor([0, 1, 2]), None, None, -100, False)
    assert tuple(c.shape) == (3,)


def test_attention_normalize_one_hot_unfold_interpolate_lrn_embedding_bag_vs_torch():
    import ember.nn.functional as F
    import torch.nn.functional as TF
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 5, 4)) for _ in range(3))
    mask = rng.random((5, 5)) > 0.3
    np.fill_diagonal(mask, True)
    for kw in [{}, {"is_causal": True}, {"attn_mask": mask}, {"scale": 0.3}]:
        ekw = {kk: (ember.tensor(vv) if isinstance(vv, np.ndarray) else vv)
               for kk, vv in kw.items()}
        tkw = {kk: (torch.tensor(vv) if isinstance(vv, np.ndarray) else vv)
               for kk, vv in kw.items()}
        a = F.scaled_dot_product_attention(*(ember.tensor(t) for t in (q, k, v)), **ekw)
        b = TF.scaled_dot_product_attention(*(torch.tensor(t) for t in (q, k, v)), **tkw)
        assert_close(a.numpy(), b.numpy())
    x = rng.standard_normal((2, 3, 4, 4))
    assert_close(F.normalize(ember.tensor(x), dim=1).numpy(),
                 TF.normalize(torch.tensor(x), dim=1).numpy())
    assert_close(F.one_hot(ember.tensor([0, 2, 1]), 4).numpy(),
                 TF.one_hot(torch.tensor([0, 2, 1]), 4).numpy())
    assert_close(F.unfold(ember.tensor(x), 2, padding=1, stride=2).numpy(),
                 TF.unfold(torch.tensor(x), 2, padding=1, stride=2).numpy())
    assert_close(F.interpolate(ember.tensor(x[0]), scale_factor=2, mode="linear").numpy(),
                 TF.interpolate(torch.tensor(x[0]), scale_factor=2, mode="linear").numpy())
    assert_close(F.local_response_norm(ember.tensor(x), 3).numpy(),
                 TF.local_response_norm(torch.tensor(x), 3).numpy())
    assert_close(F.embedding_bag(ember.tensor([[0, 2], [1, 3]]), ember.tensor(x[0, 0])).numpy(),
                 TF.embedding_bag(torch.tensor([[0, 2], [1, 3]]), torch.tensor(x[0, 0])).numpy())

