"""Helpers that run an ember module and a torch module with the same weights and compare."""
import numpy as np

import ember


def to_torch(a, torch):
    return torch.from_numpy(np.array(a, copy=True))


def flatten(out):
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res.extend(flatten(o))
        return res
    return [] if out is None else [out]


def copy_weights(em, tm):
    """Load the torch module's state dict into the ember one (by key)."""
    sd = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    em.load_state_dict(sd)


def run_pair(em, tm, inputs, torch, train=True, seed=0, grad_inputs=True, nograd=()):
    """Forward both modules on ``inputs`` (ndarrays), backward a random cotangent, and return
    (ember outputs, torch outputs, ember grads, torch grads) as ndarrays."""
    em.train(train)
    tm.train(train)
    wants = [grad_inputs and isinstance(a, np.ndarray) and a.dtype.kind == "f" and k not in nograd
             for k, a in enumerate(inputs)]
    e_in = [ember.tensor(a, requires_grad=w) if isinstance(a, np.ndarray) else a
            for a, w in zip(inputs, wants)]
    t_in = [to_torch(a, torch).requires_grad_(w) if isinstance(a, np.ndarray) else a
            for a, w in zip(inputs, wants)]
    e_out = flatten(em(*e_in))
    t_out = flatten(tm(*t_in))
    assert len(e_out) == len(t_out)
    rng = np.random.default_rng(seed)
    e_loss, t_loss = None, None
    for eo, to in zip(e_out, t_out):
        if eo.dtype.is_floating_point and eo.requires_grad:
            c = rng.standard_normal(tuple(eo.shape))
            el = (eo * ember.tensor(c, dtype=eo.dtype)).sum()
            tl = (to * to_torch(c, torch).to(to.dtype)).sum()
            e_loss = el if e_loss is None else e_loss + el
            t_loss = tl if t_loss is None else t_loss + tl
    if e_loss is not None:
        e_loss.backward()
        t_loss.backward()
    e_grads = {f"input{i}": t.grad.numpy() for i, t in enumerate(e_in)
               if isinstance(t, ember.Tensor) and t.grad is not None}
    t_grads = {f"input{i}": t.grad.numpy() for i, t in enumerate(t_in)
               if isinstance(t, torch.Tensor) and t.grad is not None}
    for n, p in em.named_parameters():
        if p.grad is not None:
            e_grads[n] = p.grad.numpy()
    for n, p in tm.named_parameters():
        if p.grad is not None:
            t_grads[n] = p.grad.numpy()
    return ([o.detach().numpy() for o in e_out], [o.detach().numpy() for o in t_out],
            e_grads, t_grads)


def assert_close(a, b, rtol=1e-6, atol=1e-8, what=""):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol,
                               atol=atol, err_msg=what)
