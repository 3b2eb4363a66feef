"""SWA and EMA (ember/optim/swa_utils.py) against torch: AveragedModel's averages (SWA, EMA by
``multi_avg_fn`` and by ``avg_fn``, buffers with ``use_buffers``), ``n_averaged`` and the state
dict's keys, SWALR's lr sequences, update_bn's BatchNorm statistics, and the errors."""
import sys

import numpy as np
import pytest

import ember
import ember.optim
from ember.errors import (EmberRuntimeError, EmberTypeError, EmberValueError,
                          UnsupportedError)
from ember.optim import swa_utils
from ember.utils.data import DataLoader, TensorDataset

torch = pytest.importorskip("torch")
tswa = torch.optim.swa_utils


def _models(seed=0, batchnorm=True):
    """The same float64 MLP (with a BatchNorm1d) in torch and ember, equal weights."""
    torch.manual_seed(seed)
    layers = [torch.nn.Linear(3, 5)]
    if batchnorm:
        layers.append(torch.nn.BatchNorm1d(5))
    layers += [torch.nn.ReLU(), torch.nn.Linear(5, 2)]
    tm = torch.nn.Sequential(*layers).double()
    e_layers = [ember.nn.Linear(3, 5)]
    if batchnorm:
        e_layers.append(ember.nn.BatchNorm1d(5))
    e_layers += [ember.nn.ReLU(), ember.nn.Linear(5, 2)]
    em = ember.nn.Sequential(*e_layers).double()
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    return tm, em


def _batches(n=6, seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((4, 3)), rng.standard_normal((4, 2))) for _ in range(n)]


def _train_step(model, opt, x, y, lib):
    opt.zero_grad()
    loss = ((model(lib.tensor(x)) - lib.tensor(y)) ** 2).mean()
    loss.backward()
    opt.step()


def _assert_state_equal(ember_module, torch_module, rtol=1e-12, atol=1e-14):
    t_state = torch_module.state_dict()
    e_state = ember_module.state_dict()
    assert list(e_state) == list(t_state)
    for k, v in t_state.items():
        got = e_state[k].numpy()
        assert got.dtype == v.numpy().dtype, k
        np.testing.assert_allclose(got, v.numpy(), rtol=rtol, atol=atol, err_msg=k)


def _run_averaging(steps=5, batchnorm=True, **kw):
    """Train both models ``steps`` SGD steps, updating an AveragedModel (built with ``kw``,
    the same averaging function from each library) after each."""
    tm, em = _models(batchnorm=batchnorm)
    t_kw = {k: v[0] for k, v in kw.items() if isinstance(v, tuple)}
    e_kw = {k: v[1] for k, v in kw.items() if isinstance(v, tuple)}
    t_kw.update({k: v for k, v in kw.items() if not isinstance(v, tuple)})
    e_kw.update({k: v for k, v in kw.items() if not isinstance(v, tuple)})
    t_avg = tswa.AveragedModel(tm, **t_kw)
    e_avg = swa_utils.AveragedModel(em, **e_kw)
    t_opt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    e_opt = ember.optim.SGD(em.parameters(), lr=0.1, momentum=0.9)
    for x, y in _batches(steps):
        _train_step(tm, t_opt, x, y, torch)
        _train_step(em, e_opt, x, y, ember)
        t_avg.update_parameters(tm)
        e_avg.update_parameters(em)
    return t_avg, e_avg, tm, em


AVERAGING = {
    "swa": {},
    "ema_multi": {"multi_avg_fn": (tswa.get_ema_multi_avg_fn(0.9),
                                   swa_utils.get_ema_multi_avg_fn(0.9))},
    "ema_single": {"avg_fn": (tswa.get_ema_avg_fn(0.9), swa_utils.get_ema_avg_fn(0.9))},
    "swa_single": {"avg_fn": (tswa.get_swa_avg_fn(), swa_utils.get_swa_avg_fn())},
}


@pytest.mark.parametrize("use_buffers", [False, True])
@pytest.mark.parametrize("how", list(AVERAGING))
def test_averaged_model_matches_torch(how, use_buffers):
    t_avg, e_avg, tm, em = _run_averaging(use_buffers=use_buffers, **AVERAGING[how])
    _assert_state_equal(e_avg, t_avg)
    assert int(e_avg.n_averaged) == int(t_avg.n_averaged) == 5
    assert e_avg.n_averaged.dtype == ember.int64
    # the averaged model's weights are not the trained one's (it is a copy, averaged)
    assert not np.allclose(e_avg.module[0].weight.detach().numpy(),
                           em[0].weight.detach().numpy())
    if not use_buffers:   # the buffers follow the model's
        np.testing.assert_array_equal(e_avg.module[1].running_mean.numpy(),
                                      em[1].running_mean.numpy())
    # forward runs the copy, in both modes
    x = np.random.default_rng(3).standard_normal((4, 3))
    for mode in ("train", "eval"):
        getattr(t_avg, mode)()
        getattr(e_avg, mode)()
        with torch.no_grad():
            want = t_avg(torch.tensor(x)).numpy()
        np.testing.assert_allclose(e_avg(ember.tensor(x)).detach().numpy(), want, rtol=1e-12,
                                   atol=1e-14)


def test_swa_multi_avg_fn_on_parameters_matches_torch():
    # torch's foreach SWA update (lerp); its integer path fails in torch, so no buffers here
    kw = {"multi_avg_fn": (tswa.get_swa_multi_avg_fn(), swa_utils.get_swa_multi_avg_fn())}
    t_avg, e_avg, _, _ = _run_averaging(batchnorm=False, **kw)
    _assert_state_equal(e_avg, t_avg)


def test_default_average_is_the_mean_of_the_snapshots():
    tm, em = _models(batchnorm=False)
    avg = swa_utils.AveragedModel(em)
    opt = ember.optim.SGD(em.parameters(), lr=0.1)
    snapshots = []
    for x, y in _batches(4):
        _train_step(em, opt, x, y, ember)
        avg.update_parameters(em)
        snapshots.append(em[0].weight.detach().numpy().copy())
    np.testing.assert_allclose(avg.module[0].weight.detach().numpy(),
                               np.mean(snapshots, axis=0), rtol=1e-12)


def test_integer_buffers_average_as_torch():
    """num_batches_tracked (int64) with use_buffers: truncated averages as torch's."""
    for how in ("swa", "ema_multi", "ema_single"):
        t_avg, e_avg, _, _ = _run_averaging(use_buffers=True, **AVERAGING[how])
        assert e_avg.module[1].num_batches_tracked.dtype == ember.int64
        assert int(e_avg.module[1].num_batches_tracked) == \
            int(t_avg.module[1].num_batches_tracked)
    # ember's multi SWA function also averages integer tensors (torch's raises there)
    fn = swa_utils.get_swa_multi_avg_fn()
    a, b = ember.tensor([4, 10]), ember.tensor([7, 20])
    fn([a], [b], ember.tensor(1))
    assert a.tolist() == [5, 15]


def test_state_dict_layout_and_round_trip():
    tm, em = _models()
    t_avg = tswa.AveragedModel(tm, use_buffers=True)
    e_avg = swa_utils.AveragedModel(em, use_buffers=True)
    assert list(e_avg.state_dict()) == list(t_avg.state_dict())
    assert list(e_avg.state_dict())[0] == "n_averaged"
    e_avg.update_parameters(em)
    e_avg.update_parameters(em)
    other = swa_utils.AveragedModel(_models(seed=5)[1], use_buffers=True)
    other.load_state_dict(e_avg.state_dict())
    assert int(other.n_averaged) == 2
    # torch's state dict loads into ember's
    t_avg.update_parameters(tm)
    other.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t_avg.state_dict().items()})
    _assert_state_equal(other, t_avg)
    assert isinstance(e_avg, ember.nn.Module)
    assert e_avg.module is not em and list(e_avg.parameters())[0] is not \
        list(em.parameters())[0]


def test_averaged_model_leaves_no_graph_and_keeps_requires_grad():
    _, em = _models(batchnorm=False)
    avg = swa_utils.AveragedModel(em, avg_fn=swa_utils.get_ema_avg_fn(0.5))
    avg.update_parameters(em)
    avg.update_parameters(em)
    for p in avg.parameters():
        assert p.requires_grad and p.grad is None and p.grad_fn is None


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs", [0, 1, 4])
def test_swalr_matches_torch(strategy, anneal_epochs):
    def make(lib, opt_mod, sched_mod):
        groups = [{"params": [lib.nn.Parameter(lib.zeros(1))], "lr": 0.5},
                  {"params": [lib.nn.Parameter(lib.zeros(1))], "lr": 0.05}]
        opt = opt_mod.SGD(groups, lr=0.1, momentum=0.9)
        return opt, sched_mod.SWALR(opt, swa_lr=[0.01, 0.2], anneal_epochs=anneal_epochs,
                                    anneal_strategy=strategy)

    t_opt, t_s = make(torch, torch.optim, tswa)
    e_opt, e_s = make(ember, ember.optim, swa_utils)
    for _ in range(8):
        assert e_s.get_last_lr() == pytest.approx(t_s.get_last_lr(), rel=1e-13, abs=1e-16)
        assert [g["lr"] for g in e_opt.param_groups] == \
            pytest.approx([g["lr"] for g in t_opt.param_groups], rel=1e-13, abs=1e-16)
        assert [g["swa_lr"] for g in e_opt.param_groups] == [0.01, 0.2]
        e_opt.step()
        t_opt.step()
        e_s.step()
        t_s.step()
    assert e_s.get_last_lr() == pytest.approx([0.01, 0.2])


def test_swalr_one_swa_lr_and_after_another_scheduler():
    """One swa_lr for every group; SWALR taking over from a decaying scheduler, as torch."""
    def run(lib, opt_mod, sched_mod):
        opt = opt_mod.Adam([lib.nn.Parameter(lib.zeros(2))], lr=0.1)
        first = opt_mod.lr_scheduler.ExponentialLR(opt, gamma=0.8)
        swa = sched_mod.SWALR(opt, swa_lr=0.03, anneal_epochs=3)
        out = []
        for i in range(10):
            opt.step()
            (first if i < 4 else swa).step()
            out.append(opt.param_groups[0]["lr"])
        return out, swa.state_dict()

    got, e_state = run(ember, ember.optim, swa_utils)
    want, t_state = run(torch, torch.optim, tswa)
    assert got == pytest.approx(want, rel=1e-13)
    assert "anneal_func" not in e_state and "optimizer" not in e_state
    assert set(e_state) >= {"anneal_epochs", "_anneal_strategy", "base_lrs", "last_epoch",
                            "_step_count"}
    assert e_state["_anneal_strategy"] == t_state["_anneal_strategy"] == "cos"


def test_swalr_state_dict_round_trip():
    opt = ember.optim.SGD([ember.nn.Parameter(ember.zeros(1))], lr=1.0)
    s = swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=5, anneal_strategy="linear")
    s.step()
    s.step()
    opt2 = ember.optim.SGD([ember.nn.Parameter(ember.zeros(1))], lr=1.0)
    s2 = swa_utils.SWALR(opt2, swa_lr=0.1, anneal_epochs=5, anneal_strategy="cos")
    s2.load_state_dict(s.state_dict())
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    assert s2.anneal_func(0.5) == 0.5   # linear again
    s.step()
    s2.step()
    assert s2.get_last_lr() == pytest.approx(s.get_last_lr())


def _bn_models():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4, momentum=0.3),
                             torch.nn.ReLU(), torch.nn.Linear(4, 4),
                             torch.nn.BatchNorm1d(4)).double()
    em = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4, momentum=0.3),
                             ember.nn.ReLU(), ember.nn.Linear(4, 4),
                             ember.nn.BatchNorm1d(4)).double()
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    return tm, em


@pytest.mark.parametrize("labelled", [False, True])
@pytest.mark.parametrize("training", [False, True])
def test_update_bn_matches_torch(labelled, training):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((10, 3)) * 3 + 1
    y = rng.standard_normal((10, 1))
    tm, em = _bn_models()
    tm.train(training)
    em.train(training)
    t_ds = torch.utils.data.TensorDataset(*[torch.tensor(a) for a in ((x, y) if labelled
                                                                       else (x,))])
    e_ds = TensorDataset(*[ember.tensor(a) for a in ((x, y) if labelled else (x,))])
    t_loader = torch.utils.data.DataLoader(t_ds, batch_size=4)
    e_loader = DataLoader(e_ds, batch_size=4)
    tswa.update_bn(t_loader, tm)
    swa_utils.update_bn(e_loader, em)
    _assert_state_equal(em, tm)
    assert em.training == training
    assert em[1].momentum == 0.3 and em[4].momentum == 0.1
    # the cumulative average over the three batches (sizes 4, 4, 2): the mean of batch means
    h = em[0](ember.tensor(x)).detach().numpy()
    means = [h[i:i + 4].mean(0) for i in (0, 4, 8)]
    np.testing.assert_allclose(em[1].running_mean.numpy(), np.mean(means, axis=0), rtol=1e-12)


def test_update_bn_on_averaged_model_with_plain_tensors():
    """A loader of bare tensors (a list works as one); the AveragedModel's BatchNorm layers
    are found through its ``module``; device="cpu" is accepted."""
    rng = np.random.default_rng(2)
    batches = [rng.standard_normal((5, 3)) for _ in range(3)]
    tm, em = _bn_models()
    t_avg, e_avg = tswa.AveragedModel(tm), swa_utils.AveragedModel(em)
    t_avg.update_parameters(tm)
    e_avg.update_parameters(em)
    tswa.update_bn([torch.tensor(b) for b in batches], t_avg, device="cpu")
    swa_utils.update_bn([ember.tensor(b) for b in batches], e_avg, device="cpu")
    _assert_state_equal(e_avg, t_avg)
    assert int(e_avg.module[1].num_batches_tracked) == 3


def test_update_bn_without_batchnorm_does_nothing():
    _, em = _models(batchnorm=False)
    before = {k: v.numpy().copy() for k, v in em.state_dict().items()}
    swa_utils.update_bn(iter(()), em)
    swa_utils.update_bn([ember.ones(2, 3)], em)
    for k, v in em.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_update_bn_restores_momentum_when_the_model_fails():
    _, em = _bn_models()
    em.eval()
    with pytest.raises(EmberRuntimeError, match="linear"):
        swa_utils.update_bn([ember.ones(2, 7)], em)   # wrong feature count
    assert em[1].momentum == 0.3 and not em.training


def test_errors():
    _, em = _models(batchnorm=False)
    with pytest.raises(EmberValueError, match="AveragedModel: Only one of avg_fn and "
                                              "multi_avg_fn"):
        swa_utils.AveragedModel(em, avg_fn=swa_utils.get_swa_avg_fn(),
                                multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
    with pytest.raises(EmberTypeError, match="AveragedModel: model must be an ember.nn.Module, "
                                             "got int"):
        swa_utils.AveragedModel(3)
    with pytest.raises(UnsupportedError, match="AveragedModel"):
        swa_utils.AveragedModel(em, device="cuda")
    avg = swa_utils.AveragedModel(em)
    with pytest.raises(EmberTypeError, match="update_parameters: model must be an "
                                             "ember.nn.Module, got str"):
        avg.update_parameters("model")
    _, bn = _bn_models()
    with pytest.raises(EmberValueError, match="update_parameters: model has 6 buffers, the "
                                              "averaged model 0"):
        avg.update_parameters(bn)
    for fn in (swa_utils.get_ema_multi_avg_fn, swa_utils.get_ema_avg_fn):
        for bad in (-0.1, 1.5, float("nan")):
            with pytest.raises(EmberValueError, match=f"{fn.__name__}: Invalid decay value"):
                fn(bad)
        with pytest.raises(EmberTypeError, match=f"{fn.__name__}: decay must be a number, "
                                                 "got str"):
            fn("0.9")
        fn(0.0)
        fn(1)
    with pytest.raises(EmberTypeError, match="update_bn: model must be an ember.nn.Module"):
        swa_utils.update_bn([], object())
    with pytest.raises(UnsupportedError, match="update_bn"):
        swa_utils.update_bn([], em, device="cuda")

    opt = ember.optim.SGD([{"params": [ember.nn.Parameter(ember.zeros(1))]},
                           {"params": [ember.nn.Parameter(ember.zeros(1))]}], lr=0.1)
    with pytest.raises(EmberValueError, match="SWALR: swa_lr must have the same length as "
                                              "optimizer.param_groups. swa_lr has 3 values, "
                                              "param_groups has 2."):
        swa_utils.SWALR(opt, swa_lr=[0.1, 0.2, 0.3])
    with pytest.raises(EmberValueError, match="SWALR: anneal_strategy must be one of 'cos' or "
                                              "'linear', instead got cosine"):
        swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="cosine")
    for bad in (-1, 2.5, "3"):
        with pytest.raises(EmberValueError, match="SWALR: anneal_epochs must be equal or "
                                                  f"greater than 0, got {bad}"):
            swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=bad)
    assert all("swa_lr" not in g for g in opt.param_groups)   # a failed call changes nothing
    with pytest.raises(EmberTypeError, match="SWALR: list is not an Optimizer"):
        swa_utils.SWALR([], swa_lr=0.1)
    # torch raises the same builtin classes
    tm, _ = _models(batchnorm=False)
    with pytest.raises(ValueError):
        tswa.get_ema_avg_fn(1.5)
    t_opt = torch.optim.SGD(tm.parameters(), lr=0.1)
    for kw in ({"swa_lr": [0.1, 0.2]}, {"swa_lr": 0.1, "anneal_strategy": "cosine"},
               {"swa_lr": 0.1, "anneal_epochs": -1}):
        with pytest.raises(ValueError):
            tswa.SWALR(t_opt, **kw)


def test_submodule_loads_on_first_use():
    import subprocess
    code = ("import sys, ember.optim; assert 'ember.nn' not in sys.modules; "
            "m = ember.optim.swa_utils; assert m.AveragedModel and m.SWALR; "
            "from ember.optim.swa_utils import update_bn; "
            "assert 'swa_utils' in dir(ember.optim)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert set(swa_utils.__all__) == set(tswa.__all__)
    with pytest.raises(AttributeError):
        ember.optim.no_such_thing
