"""ember/optim/sparse_adam.py against torch: SparseAdam on the weights of nn.Embedding(sparse=True)
follows torch's trajectory step by step (rows never looked up keep their weights and zero
moments), in float64 and float32, with maximize, and with its state dict; torch's errors for
invalid hyper-parameters and complex parameters."""
import numpy as np
import pytest

import ember
import ember.optim as eopt

torch = pytest.importorskip("torch")


def _train(lib, dtype, steps=6, **kw):
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((7, 3))
    batches = [rng.integers(0, 4, (2, 3)) for _ in range(steps)]  # rows 4..6 never looked up
    targets = [rng.standard_normal((2, 3, 3)) for _ in range(steps)]
    emb = lib.nn.Embedding(7, 3, sparse=True).to(getattr(lib, dtype))
    with lib.no_grad():
        emb.weight.copy_(lib.from_numpy(w0))
    opt = lib.optim.SparseAdam(emb.parameters(), lr=0.05, **kw)
    out = []
    for idx, tgt in zip(batches, targets):
        opt.zero_grad()
        loss = (emb(lib.from_numpy(idx)) - lib.from_numpy(tgt).to(emb.weight.dtype)).pow(2).sum()
        loss.backward()
        opt.step()
        out.append(emb.weight.detach().numpy().copy())
    return out, opt


@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-12), ("float32", 1e-6)])
@pytest.mark.parametrize("kw", [dict(), dict(betas=(0.8, 0.9), eps=1e-3, maximize=True)])
def test_matches_torch_on_sparse_embedding(dtype, rtol, kw):
    (e, eo), (t, to) = _train(ember, dtype, **kw), _train(torch, dtype, **kw)
    for i, (a, b) in enumerate(zip(e, t)):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, err_msg=f"step {i}")
    np.testing.assert_array_equal(e[-1][4:], e[0][4:])  # untouched rows
    es, ts = eo.state_dict()["state"][0], to.state_dict()["state"][0]
    assert set(es) == set(ts) and es["step"] == ts["step"] == 6
    for k in ("exp_avg", "exp_avg_sq"):
        np.testing.assert_allclose(es[k].numpy(), ts[k].numpy(), rtol=rtol, atol=rtol)
    assert eo.state_dict()["param_groups"][0].keys() == to.state_dict()["param_groups"][0].keys()


def test_state_dict_resume_continues_identically():
    _, opt = _train(ember, "float64", steps=3)
    p = opt.param_groups[0]["params"][0]
    fresh = eopt.SparseAdam([p], lr=0.05)
    fresh.load_state_dict(opt.state_dict())
    p.grad = ember.zeros_like(p)
    p.grad[1] = 1.0
    before = p.detach().clone()
    fresh.step()
    changed = (p.detach() != before).any(dim=1)
    assert changed.tolist() == [False, True, False, False, False, False, False]
    assert fresh.state[p]["step"] == 4


@pytest.mark.parametrize("kw,msg", [(dict(lr=0.0), "Invalid learning rate: 0.0"),
                                    (dict(eps=-1.0), "Invalid epsilon value: -1.0"),
                                    (dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0"),
                                    (dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1")])
def test_invalid_hyper_parameters_raise_as_torch(kw, msg):
    with pytest.raises(ValueError, match=msg):
        eopt.SparseAdam([ember.nn.Parameter(ember.ones(2))], **kw)
    with pytest.raises(ValueError, match=msg):
        torch.optim.SparseAdam([torch.nn.Parameter(torch.ones(2))], **kw)


def test_complex_parameters_raise_as_torch():
    msg = r"Complex params at indices \[\[0, 1\]\]: SparseAdam does not support complex"
    with pytest.raises(ValueError, match=msg):
        eopt.SparseAdam([ember.nn.Parameter(ember.ones(2)),
                         ember.nn.Parameter(ember.ones(2, dtype=ember.complex64))])
    with pytest.raises(ValueError, match=msg):
        torch.optim.SparseAdam([torch.nn.Parameter(torch.ones(2)),
                                torch.nn.Parameter(torch.ones(2, dtype=torch.complex64))])
