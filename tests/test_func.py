"""ember.func (ember/func.py) against torch.func in float64: functional_call (several dicts,
strict, tied weights, buffers), stack_module_state with vmap (a model ensemble), grad /
grad_and_value (argnums, has_aux, nesting), vjp, jvp, linearize, jacrev, jacfwd, hessian, vmap
(in_dims, out_dims, nested inputs, randomness), and their errors."""
import copy

import numpy as np
import pytest

import ember
import ember.func as EF

torch = pytest.importorskip("torch")
TF = torch.func

rng = np.random.default_rng(0)
X = rng.standard_normal(4)
Y = rng.standard_normal(4)
B = rng.standard_normal((5, 4))


def _np(x):
    if isinstance(x, (tuple, list)):
        return [_np(v) for v in x]
    if isinstance(x, dict):
        return {k: _np(v) for k, v in x.items()}
    return x.detach().numpy()


def _close(a, b):
    a, b = _np(a), _np(b)
    if isinstance(b, list):
        assert isinstance(a, list) and len(a) == len(b)
        for u, v in zip(a, b):
            _close_np(u, v)
    else:
        _close_np(a, b)


def _close_np(a, b):
    if isinstance(b, list):
        for u, v in zip(a, b):
            _close_np(u, v)
        return
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def f_sum(L):
    return lambda x, y: (x.sin() * y).sum() + (x * x).sum()


def f_vec(L):
    return lambda x, y: (x.exp() * y[0], (x * y).cos())


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_grad_and_grad_and_value(argnums):
    for fn in ("grad", "grad_and_value"):
        want = getattr(TF, fn)(f_sum(torch), argnums=argnums)(torch.tensor(X), torch.tensor(Y))
        got = getattr(EF, fn)(f_sum(ember), argnums=argnums)(ember.tensor(X), ember.tensor(Y))
        _close(got, want)


def test_grad_with_aux_and_nested():
    def f(L):
        return lambda x: ((x ** 3).sum(), x.mean())
    g, aux = EF.grad(f(ember), has_aux=True)(ember.tensor(X))
    tg, taux = TF.grad(f(torch), has_aux=True)(torch.tensor(X))
    _close([g, aux], [tg, taux])
    second = EF.grad(lambda x: EF.grad(lambda y: (y ** 3).sum())(x).sum())(ember.tensor(X))
    _close(second, torch.tensor(6 * X))
    assert not second.requires_grad
    with pytest.raises(ember.errors.EmberError, match="scalar"):
        EF.grad(lambda x: x * 2)(ember.tensor(X))


def test_vjp_and_jvp():
    out, fn = EF.vjp(f_vec(ember), ember.tensor(X), ember.tensor(Y))
    tout, tfn = TF.vjp(f_vec(torch), torch.tensor(X), torch.tensor(Y))
    _close(list(out), list(tout))
    cot = (ember.tensor(Y), ember.tensor(X))
    _close(list(fn(cot)), list(tfn((torch.tensor(Y), torch.tensor(X)))))
    _close(list(fn(cot)), list(tfn((torch.tensor(Y), torch.tensor(X)))))   # called again
    o, j = EF.jvp(f_vec(ember), (ember.tensor(X), ember.tensor(Y)),
                  (ember.tensor(Y), ember.tensor(X)))
    to, tj = TF.jvp(f_vec(torch), (torch.tensor(X), torch.tensor(Y)),
                    (torch.tensor(Y), torch.tensor(X)))
    _close([list(o), list(j)], [list(to), list(tj)])
    with pytest.raises(ember.errors.EmberError, match="shape"):
        fn((ember.tensor(Y[:2]), ember.tensor(X)))


def test_linearize_as_torch():
    out, fn = EF.linearize(f_vec(ember), ember.tensor(X), ember.tensor(Y))
    tout, tfn = TF.linearize(f_vec(torch), torch.tensor(X), torch.tensor(Y))
    _close(list(out), list(tout))
    assert not any(o.requires_grad for o in out)
    for u, v in ((Y, X), (X, B[0])):   # called again with other tangents
        _close(list(fn(ember.tensor(u), ember.tensor(v))),
               list(tfn(torch.tensor(u), torch.tensor(v))))
    with pytest.raises(RuntimeError, match="shape"):
        fn(ember.tensor(Y[:2]), ember.tensor(X))
    with pytest.raises(RuntimeError, match="dtype"):
        fn(ember.tensor(Y).float(), ember.tensor(X))
    with pytest.raises(RuntimeError, match="argspec"):
        fn(ember.tensor(Y))


@pytest.mark.parametrize("argnums", [0, (0, 1)])
def test_jacobians_and_hessian(argnums):
    for name in ("jacrev", "jacfwd"):
        want = getattr(TF, name)(f_vec(torch), argnums=argnums)(torch.tensor(X), torch.tensor(Y))
        got = getattr(EF, name)(f_vec(ember), argnums=argnums)(ember.tensor(X), ember.tensor(Y))
        _close(list(got), list(want))
    want = TF.hessian(f_sum(torch), argnums=argnums)(torch.tensor(X), torch.tensor(Y))
    got = EF.hessian(f_sum(ember), argnums=argnums)(ember.tensor(X), ember.tensor(Y))
    _close(got if isinstance(got, ember.Tensor) else [list(r) for r in got],
           want if isinstance(want, torch.Tensor) else [list(r) for r in want])


def test_vmap_dims_nesting_and_errors():
    def f(a, pair, scale):
        return (a * pair["w"]).sum() * scale, a + pair["b"]
    for in_dims, out_dims in (((0, {"w": 0, "b": None}, None), 0),
                              ((1, {"w": 0, "b": None}, None), (0, 1))):
        a = B if in_dims[0] == 0 else B.T
        args = lambda L: (L.tensor(a), {"w": L.tensor(B), "b": L.tensor(X)}, 2.0)
        want = TF.vmap(f, in_dims=in_dims, out_dims=out_dims)(*args(torch))
        got = EF.vmap(f, in_dims=in_dims, out_dims=out_dims)(*args(ember))
        _close(list(got), list(want))
    _close(EF.vmap(EF.grad(f_sum(ember)), in_dims=(0, None))(ember.tensor(B), ember.tensor(Y)),
           TF.vmap(TF.grad(f_sum(torch)), in_dims=(0, None))(torch.tensor(B), torch.tensor(Y)))
    with pytest.raises(ember.errors.EmberError, match="same size"):
        EF.vmap(lambda a, b: a + b)(ember.zeros(3, 2), ember.zeros(4, 2))
    with pytest.raises(ember.errors.EmberError, match="in_dim"):
        EF.vmap(lambda a: a, in_dims=(None,))(ember.zeros(3))
    with pytest.raises(ember.errors.EmberError, match="random"):
        EF.vmap(lambda a: a + ember.rand(1))(ember.zeros(3))
    same = EF.vmap(lambda a: a + ember.rand(()), randomness="same")(ember.zeros(3))
    assert len(set(same.tolist())) == 1
    diff = EF.vmap(lambda a: a + ember.rand(()), randomness="different")(ember.zeros(3))
    assert len(set(diff.tolist())) == 3


def _net_class(L):
    class Net(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = L.nn.Linear(4, 3)
            self.bn = L.nn.BatchNorm1d(3)
            self.out = L.nn.Linear(3, 3, bias=False)

        def forward(self, x):
            return self.out(self.bn(self.fc(x)))
    return Net


TorchNet, EmberNet = _net_class(torch), _net_class(ember)


def _nets():
    t = TorchNet().double()
    e = EmberNet().double()
    e.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t.state_dict().items()})
    return t, e


def test_functional_call_swaps_parameters_and_buffers_for_one_call():
    t, e = _nets()
    before = {k: v.numpy().copy() for k, v in e.state_dict().items()}
    w = rng.standard_normal((3, 4))
    x = B
    want = TF.functional_call(t, ({"fc.weight": torch.tensor(w, requires_grad=True)},
                                  {"bn.running_mean": torch.zeros(3, dtype=torch.float64)}),
                              (torch.tensor(x),))
    ew = ember.tensor(w, requires_grad=True)
    rm = ember.zeros(3, dtype=ember.float64)
    got = EF.functional_call(e, ({"fc.weight": ew}, {"bn.running_mean": rm}), ember.tensor(x))
    _close(got, want)
    got.sum().backward()
    assert ew.grad is not None and e.fc.weight.grad is None
    assert rm.abs().sum().item() > 0     # the given buffer took the batch's statistics
    for k in ("fc.weight", "bn.running_mean"):    # the swapped tensors are back, untouched
        np.testing.assert_array_equal(e.state_dict()[k].numpy(), before[k])
    for k, v in t.state_dict().items():  # the others moved as torch's did (running_var)
        np.testing.assert_allclose(e.state_dict()[k].numpy(), v.numpy(), rtol=1e-12)
    with pytest.raises(ember.errors.EmberError, match="Missing key"):
        EF.functional_call(e, {"fc.weight": ew}, (ember.tensor(x),), strict=True)
    with pytest.raises(ember.errors.EmberError, match="multiple dictionaries"):
        EF.functional_call(e, ({"fc.weight": ew}, {"fc.weight": ew}), (ember.tensor(x),))


def test_functional_call_ties_weights_as_torch():
    def tied(L):
        s = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.Linear(2, 2)).double()
        s[1].weight = s[0].weight
        return s
    t, e = tied(torch), tied(ember)
    e.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t.state_dict().items()})
    z = np.zeros((2, 2))
    x = rng.standard_normal((1, 2))
    for tie in (True, False):
        want = TF.functional_call(t, {"0.weight": torch.tensor(z)}, (torch.tensor(x),),
                                  tie_weights=tie)
        got = EF.functional_call(e, {"0.weight": ember.tensor(z)}, (ember.tensor(x),),
                                 tie_weights=tie)
        _close(got, want)
    with pytest.raises(ember.errors.EmberError, match="tied"):
        EF.functional_call(e, {"0.weight": ember.tensor(z), "1.weight": ember.tensor(z + 1)},
                           (ember.tensor(x),))


def test_an_ensemble_through_stack_module_state_and_vmap():
    """torch's model-ensembling recipe: stacked states, one functional_call under vmap."""
    pairs = [_nets() for _ in range(3)]
    for t, e in pairs:
        t.eval()
        e.eval()
    tp, tb = TF.stack_module_state([t for t, _ in pairs])
    ep, eb = EF.stack_module_state([e for _, e in pairs])
    assert set(ep) == set(tp) and set(eb) == set(tb)
    assert all(v.requires_grad and v.is_leaf for v in ep.values())
    base_t, base_e = copy.deepcopy(pairs[0][0]), copy.deepcopy(pairs[0][1])

    def run(F, base):
        return lambda p, b, x: F.functional_call(base, (p, b), (x,))
    want = TF.vmap(run(TF, base_t), in_dims=(0, 0, None))(tp, tb, torch.tensor(B))
    got = EF.vmap(run(EF, base_e), in_dims=(0, 0, None))(ep, eb, ember.tensor(B))
    _close(got, want)


def test_vmap_is_also_ember_vmap_as_torch_vmap():
    assert ember.vmap is EF.vmap and "vmap" in dir(ember)
