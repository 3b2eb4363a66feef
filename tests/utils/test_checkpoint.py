"""ember.utils.checkpoint against torch.utils.checkpoint: the same outputs and gradients (inputs
and parameters, through .backward and autograd.grad), dropout replayed with the forward's random
state, checkpoint_sequential, and intermediate tensors not kept alive."""
import gc
import weakref

import numpy as np
import pytest

import ember
from ember.utils.checkpoint import checkpoint, checkpoint_sequential

torch = pytest.importorskip("torch")


def _pair():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8),
                             torch.nn.GELU(), torch.nn.Linear(8, 2)).double()
    em = ember.nn.Sequential(ember.nn.Linear(3, 8), ember.nn.Tanh(), ember.nn.Linear(8, 8),
                             ember.nn.GELU(), ember.nn.Linear(8, 2)).double()
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return em, tm


@pytest.mark.parametrize("use_reentrant", [False, True])
@pytest.mark.parametrize("input_grad", [False, True])
def test_checkpoint_matches_torch(use_reentrant, input_grad):
    em, tm = _pair()
    x = np.random.default_rng(0).standard_normal((4, 3))
    xe, xt = ember.tensor(x, requires_grad=input_grad), torch.tensor(x, requires_grad=True)
    ye = checkpoint(em, xe, use_reentrant=use_reentrant)
    yt = torch.utils.checkpoint.checkpoint(tm, xt, use_reentrant=use_reentrant)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    (ye * ye).sum().backward()
    (yt * yt).sum().backward()
    pt = dict(tm.named_parameters())
    for k, p in em.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), pt[k].grad.numpy(), rtol=1e-10, err_msg=k)
    if input_grad:
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-10)


def test_autograd_grad_reaches_parameters_used_inside():
    em, _ = _pair()
    x = ember.randn(4, 3, dtype=ember.float64)
    y = checkpoint(lambda t: em(t) * 2.0, x, use_reentrant=False)
    g, = ember.autograd.grad(y.sum(), [em[0].weight])
    em.zero_grad()
    (em(x) * 2.0).sum().backward()
    np.testing.assert_allclose(g.numpy(), em[0].weight.grad.numpy(), rtol=1e-12)


def test_dropout_is_replayed_with_the_forwards_random_state():
    m = ember.nn.Sequential(ember.nn.Linear(6, 32), ember.nn.Dropout(0.5), ember.nn.Linear(32, 1))
    x = ember.randn(8, 6, requires_grad=True)
    ember.manual_seed(3)
    checkpoint(m, x, use_reentrant=False).sum().backward()
    g_ckpt = x.grad.numpy().copy()
    x.grad = None
    ember.manual_seed(3)
    m(x).sum().backward()
    np.testing.assert_allclose(g_ckpt, x.grad.numpy(), rtol=1e-6)


def test_checkpoint_sequential_matches_torch():
    em, tm = _pair()
    x = np.random.default_rng(1).standard_normal((4, 3))
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ye = checkpoint_sequential(em, 2, xe, use_reentrant=False)
    yt = torch.utils.checkpoint.checkpoint_sequential(tm, 2, xt, use_reentrant=False)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    ye.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-10)


def test_intermediates_are_not_kept_alive():
    kept = []

    def f(x):
        h = x * 3.0
        kept.append(weakref.ref(h))
        return h.tanh()

    x = ember.randn(5, requires_grad=True)
    y = checkpoint(f, x, use_reentrant=False)
    gc.collect()
    assert kept and all(r() is None for r in kept)   # the forward's intermediate is gone
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3.0 * (1 - np.tanh(3.0 * x.detach().numpy()) ** 2),
                               rtol=1e-6)


def test_checkpoint_errors():
    with pytest.raises(ember.EmberError, match="expected a callable"):
        checkpoint(3, ember.ones(2))


def test_outputs_of_any_structure_keep_their_shape_and_gradients():
    """A decoder layer returning ``(hidden, None)`` or ``(hidden, (k, v))`` checkpoints as in
    torch: non-tensor values come back as they are, tensors in nested tuples, lists and dicts
    carry gradients."""
    x = np.random.default_rng(1).standard_normal(3)

    def f(t):
        return t.tanh(), None, {"cache": [t * 3.0, 5]}

    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ye = checkpoint(f, xe, use_reentrant=False)
    yt = torch.utils.checkpoint.checkpoint(f, xt, use_reentrant=False)
    assert ye[1] is None and ye[2]["cache"][1] == 5 and isinstance(ye[2]["cache"], list)
    (ye[0].sum() + ye[2]["cache"][0].pow(2).sum()).backward()
    (yt[0].sum() + yt[2]["cache"][0].pow(2).sum()).backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    assert checkpoint(lambda t: "x", ember.ones(2, requires_grad=True)) == "x"


def test_use_reentrant_left_out_warns_and_reentrant_takes_no_kwargs():
    x = ember.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        checkpoint(lambda t: t * 2.0, x)
    with pytest.raises(ValueError, match="^Unexpected keyword arguments: scale,bias$"):
        checkpoint(lambda t, scale, bias: t * scale + bias, x, scale=2.0, bias=1.0,
                   use_reentrant=True)
    y = checkpoint(lambda t, scale: t * scale, x, scale=ember.tensor(3.0), use_reentrant=False)
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_checkpoint_without_grad_runs_the_function_as_torch():
    """Under no_grad / inference_mode checkpoint is the plain call (torch saves nothing to
    recompute): inference tensors made there are fine, and the result needs no grad."""
    import torch
    for L in (ember, torch):
        lin = L.nn.Linear(3, 2)
        x = L.ones(4, 3)
        for mode in (L.no_grad, L.inference_mode):
            with mode():
                y = L.utils.checkpoint.checkpoint(lambda t: L.nn.functional.silu(lin(t)), x,
                                                  use_reentrant=False)
            assert not y.requires_grad and tuple(y.shape) == (4, 2)
        with L.inference_mode():
            assert L.utils.checkpoint.checkpoint(lin, x, use_reentrant=False).is_inference()
