"""Modules with state copied from torch and one training step compared with torch, shared by the
tests of nn.utils.parametrizations, weight_norm and spectral_norm."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def copy_state(em, tm):
    assert list(em.state_dict()) == list(tm.state_dict())
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})


def modules(kind):
    torch.manual_seed(0)
    if kind == "linear":
        return ember.nn.Linear(3, 4).double(), torch.nn.Linear(3, 4).double(), (5, 3)
    if kind == "conv":
        return ember.nn.Conv2d(2, 3, 3).double(), torch.nn.Conv2d(2, 3, 3).double(), (2, 2, 5, 5)
    return (ember.nn.ConvTranspose2d(2, 3, 3).double(), torch.nn.ConvTranspose2d(2, 3, 3).double(),
            (2, 2, 4, 4))


def check_step(em, tm, shape, train=True):
    x = np.random.default_rng(1).standard_normal(shape)
    em.train(train)
    tm.train(train)
    ye, yt = em(ember.tensor(x)), tm(torch.tensor(x))
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    (ye * ye).sum().backward()
    (yt * yt).sum().backward()
    pt = dict(tm.named_parameters())
    for k, p in em.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), pt[k].grad.numpy(), rtol=1e-9, atol=1e-11,
                                   err_msg=k)
    for k, b in dict(tm.named_buffers()).items():
        np.testing.assert_allclose(dict(em.named_buffers())[k].numpy(), b.numpy(), rtol=1e-10,
                                   err_msg=k)

