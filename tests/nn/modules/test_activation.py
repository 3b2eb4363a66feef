"""The activation layers (ember/nn/modules/activation.py) against torch with identical weights,
in train and eval modes (float64); in-place activations (leaky_relu / elu / hardtanh with
inplace=True, and their modules) inside a graph: the backward does not need the overwritten
input, as in torch (DCGAN's Conv2d -> LeakyReLU(0.2, inplace=True) failed with 'modified by an
inplace operation')."""
import numpy as np
import pytest

import ember
from tests.nn import layer_cases

torch = pytest.importorskip("torch")

CASES = [("leaky_relu", dict(negative_slope=0.2)), ("elu", dict(alpha=0.7)),
         ("hardtanh", dict(min_val=-0.5, max_val=0.8))]


@pytest.mark.parametrize("name,kw", CASES)
def test_inplace_activation_backward_matches_torch(name, kw):
    x = np.random.default_rng(0).standard_normal((3, 4))
    w = np.linspace(-1, 2, 12).reshape(3, 4)
    grads = []
    for lib in (ember, torch):
        F = lib.nn.functional
        leaf = lib.tensor(x, requires_grad=True)
        h = leaf * 2.0
        out = getattr(F, name)(h, inplace=True, **kw)
        assert out is h
        (out * lib.tensor(w)).sum().backward()
        grads.append((out.detach().numpy(), leaf.grad.numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-12)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-12)


def test_conv_then_inplace_leaky_relu_module_trains():
    ember.manual_seed(0)
    net = ember.nn.Sequential(ember.nn.Conv2d(1, 2, 3), ember.nn.LeakyReLU(0.2, inplace=True),
                              ember.nn.Conv2d(2, 1, 3), ember.nn.ELU(inplace=True))
    ref = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.LeakyReLU(0.2, inplace=True),
                              torch.nn.Conv2d(2, 1, 3), torch.nn.ELU(inplace=True)).double()
    net = net.double()
    for k, v in net.state_dict().items():
        ref.state_dict()[k].copy_(torch.tensor(v.numpy()))
    x = np.random.default_rng(1).standard_normal((2, 1, 7, 7))
    net(ember.tensor(x)).sum().backward()
    ref(torch.tensor(x)).sum().backward()
    for (k, p), q in zip(net.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, err_msg=k)


def test_inplace_on_a_leaf_requiring_grad_is_refused():
    leaf = ember.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        ember.nn.functional.leaky_relu(leaf, inplace=True)


LAYER_CASES = layer_cases.cases(layer_cases.CASES, "activation")


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name,src,specs", LAYER_CASES, ids=[c[0] for c in LAYER_CASES])
def test_layer_matches_torch(name, src, specs, train):
    layer_cases.check_against_torch(src, specs, train)
