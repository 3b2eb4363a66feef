"""nn.utils.prune (ember/nn/utils/prune.py) against torch, float64, modules holding torch's
weights: masks, state_dict keys, forward and gradients (to ``weight_orig``, masked) after
l1/ln/global/custom pruning, rounds combined in a PruningContainer, ``remove``, and torch's
errors. Weights are torch's random initialisation (no equal magnitudes, so the L1 and Ln choices
are torch's); the random methods draw from ember's generator and are checked by count and
structure."""
import math

import numpy as np
import pytest

import ember
from ember.nn.utils import prune
from tests.nn.utils.parametrized_modules import check_step, copy_state, modules, torch

tprune = pytest.importorskip("torch.nn.utils.prune")


def _pair(kind="linear"):
    em, tm, shape = modules(kind)
    copy_state(em, tm)
    return em, tm, shape


def _np(t):
    return t.detach().numpy()


def _same(em, tm, shape, name="weight"):
    """Same mask, pruned tensor, state_dict keys and values, forward and gradients."""
    assert list(em.state_dict()) == list(tm.state_dict())
    np.testing.assert_array_equal(_np(getattr(em, name + "_mask")),
                                  _np(getattr(tm, name + "_mask")))
    assert getattr(em, name + "_mask").dtype == ember.float64
    np.testing.assert_array_equal(_np(getattr(em, name)), _np(getattr(tm, name)))
    assert isinstance(getattr(em, name + "_orig"), ember.nn.Parameter)
    assert name not in em._parameters and not isinstance(getattr(em, name), ember.nn.Parameter)
    for k, v in tm.state_dict().items():
        np.testing.assert_array_equal(_np(em.state_dict()[k]), _np(v), err_msg=k)
    check_step(em, tm, shape)
    grad = _np(getattr(em, name + "_orig").grad)
    assert (grad[_np(getattr(em, name + "_mask")) == 0] == 0).all()


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("amount", [0, 3, 0.4, 1.0, 12])
def test_l1_unstructured_matches_torch(kind, amount):
    em, tm, shape = _pair(kind)
    hooks = prune.l1_unstructured(em, "weight", amount)._forward_pre_hooks
    tprune.l1_unstructured(tm, "weight", amount)
    (h,) = hooks.values()
    assert isinstance(h, prune.L1Unstructured) and h._tensor_name == "weight"
    assert h.amount == amount
    _same(em, tm, shape)
    pruned = int((_np(em.weight_mask) == 0).sum())
    assert pruned == (amount if isinstance(amount, int) else round(amount * em.weight.numel()))


def test_fraction_rounds_as_torch():
    """round(0.25 * 10) == 2, round(0.35 * 10) == 4 (Python's round), as torch."""
    torch.manual_seed(0)
    tm = torch.nn.Linear(5, 2).double()
    for amount, count in ((0.25, 2), (0.35, 4)):
        em, t2 = ember.nn.Linear(5, 2).double(), torch.nn.Linear(5, 2).double()
        t2.load_state_dict(tm.state_dict())
        copy_state(em, t2)
        prune.l1_unstructured(em, "weight", amount)
        tprune.l1_unstructured(t2, "weight", amount)
        np.testing.assert_array_equal(_np(em.weight_mask), _np(t2.weight_mask))
        assert int((_np(em.weight_mask) == 0).sum()) == count


@pytest.mark.parametrize("n", [1, 2, math.inf, "fro"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_ln_structured_matches_torch(kind, n, dim):
    if n == "fro" and kind == "conv":
        pytest.skip("torch.norm(p='fro') takes at most two dims (a 4-d weight has three others)")
    em, tm, shape = _pair(kind)
    amount = 0.5 if dim == 0 else 1
    prune.ln_structured(em, "weight", amount, n, dim)
    tprune.ln_structured(tm, "weight", amount, n, dim)
    _same(em, tm, shape)
    mask = np.moveaxis(_np(em.weight_mask), dim, 0).reshape(em.weight.shape[dim], -1)
    assert all(row.min() == row.max() for row in mask)   # whole channels


def test_importance_scores_match_torch():
    for kind in ("linear", "conv"):
        em, tm, shape = _pair(kind)
        scores = np.random.default_rng(3).standard_normal(tuple(tm.weight.shape))
        prune.l1_unstructured(em, "weight", 5, importance_scores=ember.tensor(scores))
        tprune.l1_unstructured(tm, "weight", 5, importance_scores=torch.tensor(scores))
        _same(em, tm, shape)
        em, tm, shape = _pair(kind)
        prune.ln_structured(em, "weight", 1, 1, 1, importance_scores=ember.tensor(scores))
        tprune.ln_structured(tm, "weight", 1, 1, 1, importance_scores=torch.tensor(scores))
        _same(em, tm, shape)


def test_custom_from_mask_matches_torch():
    em, tm, shape = _pair("conv")
    mask = np.random.default_rng(4).random(tuple(tm.weight.shape)) > 0.5
    prune.custom_from_mask(em, "weight", ember.tensor(mask))
    tprune.custom_from_mask(tm, "weight", torch.tensor(mask))
    _same(em, tm, shape)
    np.testing.assert_array_equal(_np(em.weight_mask), mask.astype(np.float64))


def test_identity_keeps_every_entry():
    em, tm, shape = _pair()
    prune.identity(em, "weight")
    tprune.identity(tm, "weight")
    _same(em, tm, shape)
    assert (_np(em.weight_mask) == 1).all()


def _net(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3), lib.nn.Flatten(), lib.nn.Linear(27, 4),
                             lib.nn.Tanh(), lib.nn.Linear(4, 2)).double()


@pytest.mark.parametrize("amount", [0.3, 40])
def test_global_unstructured_matches_torch(amount):
    tm, em = _net(torch), _net(ember)
    copy_state(em, tm)
    params = lambda m: [(m[0], "weight"), (m[2], "weight"), (m[4], "weight"), (m[2], "bias")]
    prune.global_unstructured(params(em), pruning_method=prune.L1Unstructured, amount=amount)
    tprune.global_unstructured(params(tm), pruning_method=tprune.L1Unstructured, amount=amount)
    total = sum(int((_np(m.weight_mask) == 0).sum()) for m in (em[0], em[2], em[4]))
    total += int((_np(em[2].bias_mask) == 0).sum())
    assert total == (amount if isinstance(amount, int) else round(amount * (54 + 108 + 8 + 4)))
    # a second global round (and importance scores) on top of the first masks
    scores = np.random.default_rng(5).standard_normal((4, 27))
    prune.global_unstructured(params(em), prune.L1Unstructured, amount=0.2,
                              importance_scores={(em[2], "weight"): ember.tensor(scores)})
    tprune.global_unstructured(params(tm), tprune.L1Unstructured, amount=0.2,
                               importance_scores={(tm[2], "weight"): torch.tensor(scores)})
    assert isinstance(list(em[2]._forward_pre_hooks.values())[0], prune.PruningContainer)
    for i, name in ((0, "weight"), (2, "weight"), (4, "weight"), (2, "bias")):
        np.testing.assert_array_equal(_np(getattr(em[i], name + "_mask")),
                                      _np(getattr(tm[i], name + "_mask")), err_msg=f"{i}.{name}")
    assert list(em.state_dict()) == list(tm.state_dict())
    check_step(em, tm, (2, 2, 5, 5))


@pytest.mark.parametrize("rounds", [
    [("l1_unstructured", {"amount": 5}), ("l1_unstructured", {"amount": 0.5})],
    [("l1_unstructured", {"amount": 0.2}), ("ln_structured", {"amount": 1, "n": 2, "dim": 0})],
    [("ln_structured", {"amount": 1, "n": 1, "dim": 1}), ("l1_unstructured", {"amount": 6})],
    [("ln_structured", {"amount": 1, "n": 2, "dim": 0}),
     ("ln_structured", {"amount": 1, "n": 2, "dim": 0}),
     ("ln_structured", {"amount": 0.5, "n": 1, "dim": -1})],
    [("custom_from_mask", {"mask": "random"}), ("l1_unstructured", {"amount": 0.5})],
])
@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_iterative_pruning_combines_masks_as_torch(kind, rounds):
    em, tm, shape = _pair(kind)
    if rounds[0][1].get("mask") == "random":
        mask = np.random.default_rng(6).random(tuple(tm.weight.shape)) > 0.3
        rounds = [("custom_from_mask", {"mask": mask})] + rounds[1:]
    for lib, p, m in ((ember, prune, em), (torch, tprune, tm)):
        for fn, kwargs in rounds:
            kwargs = {k: lib.tensor(v) if isinstance(v, np.ndarray) else v
                      for k, v in kwargs.items()}
            getattr(p, fn)(m, "weight", **kwargs)
    (hook,) = em._forward_pre_hooks.values()
    (thook,) = tm._forward_pre_hooks.values()
    assert isinstance(hook, prune.PruningContainer) and len(hook) == len(rounds)
    assert [type(h).__name__ for h in hook] == [type(h).__name__ for h in thook]
    assert hook[0]._tensor_name == "weight"
    _same(em, tm, shape)


def test_second_l1_round_prunes_only_unpruned_entries():
    em, _, _ = _pair("conv")
    prune.l1_unstructured(em, "weight", 10)
    first = _np(em.weight_mask).copy()
    prune.l1_unstructured(em, "weight", 7)
    assert int((_np(em.weight_mask) == 0).sum()) == 17
    assert (_np(em.weight_mask)[first == 0] == 0).all()


def test_remove_makes_pruning_permanent():
    em, tm, shape = _pair("conv")
    for p, m in ((prune, em), (tprune, tm)):
        p.l1_unstructured(m, "weight", 0.3)
        p.ln_structured(m, "weight", 1, 2, 0)
    pruned = _np(em.weight).copy()
    assert prune.remove(em, "weight") is em
    tprune.remove(tm, "weight")
    assert isinstance(em.weight, ember.nn.Parameter) and em.weight.requires_grad
    np.testing.assert_array_equal(_np(em.weight), pruned)
    np.testing.assert_array_equal(_np(em.weight), _np(tm.weight))
    assert not hasattr(em, "weight_orig") and not hasattr(em, "weight_mask")
    assert "weight" in em._parameters and not em._forward_pre_hooks and "weight" not in \
        em.__dict__
    assert not prune.is_pruned(em)
    check_step(em, tm, shape)   # the gradient reaches the pruned entries again, as torch
    assert list(em.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]


def test_is_pruned_looks_at_submodules():
    em, tm = _net(ember), _net(torch)
    assert not prune.is_pruned(em) and not tprune.is_pruned(tm)
    prune.random_unstructured(em[4], "bias", 1)
    assert prune.is_pruned(em) and prune.is_pruned(em[4]) and not prune.is_pruned(em[0])
    prune.remove(em[4], "bias")
    assert not prune.is_pruned(em)


def test_pruned_state_dict_loads_from_torch():
    em, tm, shape = _pair("conv")
    tprune.l1_unstructured(tm, "weight", 0.5)
    tprune.l1_unstructured(tm, "bias", 1)
    prune.identity(em, "weight")
    prune.identity(em, "bias")
    em.load_state_dict({k: ember.tensor(_np(v)) for k, v in tm.state_dict().items()})
    em(ember.zeros(shape, dtype=ember.float64))   # the pre-hook recomputes weight and bias
    _same(em, tm, shape)
    _same(em, tm, shape, "bias")


@pytest.mark.parametrize("amount", [4, 0.3, 0, 1.0])
def test_random_unstructured_prunes_torchs_count(amount):
    em, tm, shape = _pair("conv")
    prune.random_unstructured(em, "weight", amount)
    tprune.random_unstructured(tm, "weight", amount)
    assert int((_np(em.weight_mask) == 0).sum()) == int((_np(tm.weight_mask) == 0).sum())
    assert set(np.unique(_np(em.weight_mask))) <= {0.0, 1.0}
    assert list(em.state_dict()) == list(tm.state_dict())
    np.testing.assert_array_equal(_np(em.weight), _np(em.weight_orig) * _np(em.weight_mask))
    # a second round prunes among the unpruned entries only
    prune.random_unstructured(em, "weight", 0.2)
    tprune.random_unstructured(tm, "weight", 0.2)
    assert int((_np(em.weight_mask) == 0).sum()) == int((_np(tm.weight_mask) == 0).sum())


def _zero_channels(mask, dim):
    m = np.moveaxis(mask, dim, 0).reshape(mask.shape[dim], -1)
    assert all(row.min() == row.max() for row in m)
    return int((m.max(axis=1) == 0).sum())


@pytest.mark.parametrize("amount, dim", [(1, 0), (0.5, 1), (2, -1), (0, 0)])
def test_random_structured_prunes_torchs_channel_count(amount, dim):
    em, tm, shape = _pair("conv")
    prune.random_structured(em, "weight", amount, dim)
    tprune.random_structured(tm, "weight", amount, dim)
    assert _zero_channels(_np(em.weight_mask), dim) == _zero_channels(_np(tm.weight_mask), dim)
    prune.random_structured(em, "weight", 1, dim)
    tprune.random_structured(tm, "weight", 1, dim)
    assert _zero_channels(_np(em.weight_mask), dim) == _zero_channels(_np(tm.weight_mask), dim)
    assert list(em.state_dict()) == list(tm.state_dict())


def test_random_methods_draw_from_embers_generator():
    masks = []
    for _ in range(2):
        em, _, _ = _pair("conv")
        ember.manual_seed(7)
        prune.random_unstructured(em, "weight", 0.5)
        prune.random_structured(em, "weight", 1, 0)
        masks.append(_np(em.weight_mask))
    np.testing.assert_array_equal(*masks)


def test_prune_method_and_container_api():
    t = np.random.default_rng(8).standard_normal((3, 4))
    for amount in (5, 0.5):
        got = prune.L1Unstructured(amount).prune(ember.tensor(t))
        want = tprune.L1Unstructured(amount).prune(torch.tensor(t))
        np.testing.assert_array_equal(_np(got), _np(want))
    got = prune.LnStructured(1, 2, 0).prune(ember.tensor(t), importance_scores=ember.tensor(-t))
    want = tprune.LnStructured(1, 2, 0).prune(torch.tensor(t), importance_scores=torch.tensor(-t))
    np.testing.assert_array_equal(_np(got), _np(want))
    em, _, _ = _pair()
    hook = prune.L1Unstructured.apply(em, "weight", 2)
    assert list(em._forward_pre_hooks.values()) == [hook]
    container = prune.PruningContainer(hook)
    assert len(container) == 1 and container[0] is hook and list(container) == [hook]
    other = prune.RandomUnstructured(1)
    other._tensor_name = "bias"
    with pytest.raises(ValueError, match="Can only add pruning methods acting on the parameter "
                                         "named 'weight' to PruningContainer"):
        container.add_pruning_method(other)
    with pytest.raises(TypeError, match="is not a BasePruningMethod subclass"):
        container.add_pruning_method(3)
    with pytest.raises(RuntimeError, match="has to be pruned before pruning can be removed"):
        prune.Identity().remove(em)


def _error(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


@pytest.mark.parametrize("call", [
    lambda p, m: p.l1_unstructured(m, "weight", -1),
    lambda p, m: p.l1_unstructured(m, "weight", 1.5),
    lambda p, m: p.l1_unstructured(m, "weight", -0.1),
    lambda p, m: p.random_unstructured(m, "weight", "a"),
    lambda p, m: p.l1_unstructured(m, "weight", 13),
    lambda p, m: p.random_unstructured(m, "weight", 13),
    lambda p, m: p.ln_structured(m, "weight", 5, 2, 0),
    lambda p, m: p.random_structured(m, "weight", 4, 1),
    lambda p, m: p.ln_structured(m, "weight", 1, 2, 2),
    lambda p, m: p.ln_structured(m, "bias", 1, 2, 0),
    lambda p, m: p.random_structured(m, "bias", 1, 0),
    lambda p, m: p.remove(m, "weight"),
    lambda p, m: p.global_unstructured(3, p.L1Unstructured, amount=1),
    lambda p, m: p.global_unstructured([(m, "weight")], p.LnStructured, amount=1, n=2, dim=0),
    lambda p, m: p.global_unstructured([(m, "weight")], p.L1Unstructured, importance_scores=[],
                                       amount=1),
])
def test_errors_match_torch(call):
    em, tm, _ = _pair()
    e, t = _error(lambda: call(prune, em)), _error(lambda: call(tprune, tm))
    assert isinstance(e, ember.errors.EmberError) and isinstance(e, type(t)), (e, t)
    assert str(e) == str(t).replace("torch", "ember")
    # a failed pruning leaves the module as it was
    assert "weight" in em._parameters and "weight_orig" not in em._parameters
    assert not em._buffers and not em._forward_pre_hooks


def test_wrong_parameter_name_is_an_attribute_error_as_torch():
    em, tm, _ = _pair()
    e, t = _error(lambda: prune.l1_unstructured(em, "wieght", 1)), \
        _error(lambda: tprune.l1_unstructured(tm, "wieght", 1))
    assert isinstance(e, AttributeError) and isinstance(t, AttributeError)
    assert str(e) == str(t) == "'Linear' object has no attribute 'wieght'"
    assert not em._forward_pre_hooks and "weight" in em._parameters


def test_importance_scores_of_the_wrong_shape():
    em, _, _ = _pair()
    with pytest.raises(RuntimeError, match=r"importance_scores should have the same shape as "
                                           r"parameter weight of Linear"):
        prune.l1_unstructured(em, "weight", 1, importance_scores=ember.ones(2, 2))
    assert "weight" in em._parameters and not em._forward_pre_hooks
    with pytest.raises(RuntimeError, match="the same shape as tensor t"):
        prune.L1Unstructured(1).prune(ember.ones(3), importance_scores=ember.ones(2))


def test_a_failed_second_round_keeps_the_first():
    """torch drops the first round's hook when a second round fails; ember keeps it."""
    em, _, shape = _pair()
    prune.l1_unstructured(em, "weight", 4)
    mask = _np(em.weight_mask).copy()
    with pytest.raises(ValueError, match="should be smaller than the number of parameters"):
        prune.l1_unstructured(em, "weight", 13)
    with pytest.raises(ValueError, match="should either be a float in the range"):
        prune.l1_unstructured(em, "weight", 2.0)
    (hook,) = em._forward_pre_hooks.values()
    assert isinstance(hook, prune.L1Unstructured)
    np.testing.assert_array_equal(_np(em.weight_mask), mask)
    prune.l1_unstructured(em, "weight", 1)
    with pytest.raises(ValueError):
        prune.l1_unstructured(em, "weight", 13)
    (hook,) = em._forward_pre_hooks.values()
    assert len(hook) == 2 and int((_np(em.weight_mask) == 0).sum()) == 5
    with pytest.raises(RuntimeError, match="importance_scores should have the same shape"):
        prune.l1_unstructured(em, "weight", 1, importance_scores=ember.ones(3))
    (hook,) = em._forward_pre_hooks.values()
    assert len(hook) == 2 and int((_np(em.weight_mask) == 0).sum()) == 5
    x = np.random.default_rng(9).standard_normal(shape)
    want = x @ (_np(em.weight_orig) * _np(em.weight_mask)).T + _np(em.bias)
    np.testing.assert_allclose(_np(em(ember.tensor(x))), want, rtol=1e-12, atol=1e-14)
