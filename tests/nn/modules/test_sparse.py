"""Embedding (ember/nn/modules/sparse.py) against torch with identical weights: forward outputs,
input and parameter gradients and buffers, in train and eval modes (float64)."""
import numpy as np
import pytest

from tests.nn.layer_cases import CASES, cases, check_against_torch


PARAMS = cases(CASES, "sparse")


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name,src,specs", PARAMS, ids=[c[0] for c in PARAMS])
def test_layer_matches_torch(name, src, specs, train):
    check_against_torch(src, specs, train)


@pytest.mark.parametrize("mode,padding_idx,freeze",
                         [("mean", None, True), ("sum", 1, False), ("max", -1, False)])
def test_embedding_bag_from_pretrained_matches_torch(mode, padding_idx, freeze):
    import ember
    torch = pytest.importorskip("torch")
    w = np.arange(12, dtype=np.float64).reshape(4, 3) / 7
    idx, offsets = [0, 1, 1, 2, 3, 0], [0, 2, 5]
    out = []
    for lib in (ember, torch):
        emb = lib.tensor(w)
        bag = lib.nn.EmbeddingBag.from_pretrained(emb, freeze=freeze, mode=mode,
                                                  padding_idx=padding_idx, max_norm=None)
        assert bag.weight.requires_grad is (not freeze)
        assert (bag.mode, bag.padding_idx) == (mode, padding_idx % 4 if padding_idx else None)
        y = bag(lib.tensor(idx), lib.tensor(offsets))
        if not freeze:
            y.sum().backward()
        out.append((y.detach().numpy(), None if freeze else bag.weight.grad.numpy(), repr(bag)))
    np.testing.assert_allclose(out[0][0], out[1][0])
    if not freeze:
        np.testing.assert_allclose(out[0][1], out[1][1])
    assert out[0][2] == out[1][2]


def test_embedding_bag_from_pretrained_needs_2d():
    import ember
    with pytest.raises(ember.EmberError, match="2-dimensional"):
        ember.nn.EmbeddingBag.from_pretrained(ember.ones(3))
