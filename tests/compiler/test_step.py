"""Whole-step capture (ember/compiler/step.py): ``loss.backward()``, ``opt.step()`` and
``opt.zero_grad()`` inside an ``ember.compile``d function traced into one program, against
eager (float64 within 1e-10 over 10 steps; float32 close), the program's content, hyper-
parameters as runtime inputs (an LR scheduler does not retrace), and the eager fallbacks with
their warnings."""
import copy
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler.frontend import GraphBreakError, GraphBreakWarning
from ember.compiler.step import WholeStep
from tests.compiler.models import LeNet5Flatten as LeNet5, MLP


OPTS = {
    "sgd_momentum": lambda ps: ember.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3),
    "adamw": lambda ps: ember.optim.AdamW(ps, lr=1e-2),
    "sgd_nesterov_maximize": lambda ps: ember.optim.SGD(ps, lr=0.01, momentum=0.8,
                                                         nesterov=True, maximize=True),
    "sgd_dampening": lambda ps: ember.optim.SGD(ps, lr=0.05, momentum=0.5, dampening=0.3),
    "sgd_plain": lambda ps: ember.optim.SGD(ps, lr=0.05),
    "adam_l2_amsgrad": lambda ps: ember.optim.Adam(ps, lr=1e-2, weight_decay=1e-2,
                                                    amsgrad=True),
    # the optimizers of ember.optim.algorithms._Traceable (update math in ember.optim._updates)
    "rmsprop": lambda ps: ember.optim.RMSprop(ps, lr=1e-2),
    "rmsprop_centered_momentum": lambda ps: ember.optim.RMSprop(
        ps, lr=1e-2, momentum=0.9, centered=True, weight_decay=1e-2, maximize=True),
    "adagrad": lambda ps: ember.optim.Adagrad(ps, lr=1e-2, lr_decay=0.1, weight_decay=1e-2,
                                              initial_accumulator_value=0.1),
    "adadelta": lambda ps: ember.optim.Adadelta(ps, lr=0.5, weight_decay=1e-2),
    "adamax": lambda ps: ember.optim.Adamax(ps, lr=1e-2, weight_decay=1e-2),
    "nadam": lambda ps: ember.optim.NAdam(ps, lr=1e-2, weight_decay=1e-2),
    "nadam_decoupled": lambda ps: ember.optim.NAdam(ps, lr=1e-2, weight_decay=1e-2,
                                                    decoupled_weight_decay=True),
    # betas[1] = 0.9: rho_t > 5 from step 6, both of RAdam's branches run
    "radam": lambda ps: ember.optim.RAdam(ps, lr=1e-2, betas=(0.8, 0.9), weight_decay=1e-2),
    "asgd": lambda ps: ember.optim.ASGD(ps, lr=1e-2),
    # t0=3: the averaging starts (mu != 1) at step 5
    "asgd_t0": lambda ps: ember.optim.ASGD(ps, lr=0.05, lambd=0.01, alpha=0.5, t0=3,
                                           weight_decay=0.1, maximize=True),
    "rprop": lambda ps: ember.optim.Rprop(ps, lr=1e-2),
    "rprop_maximize": lambda ps: ember.optim.Rprop(ps, lr=0.05, etas=(0.3, 1.5),
                                                   step_sizes=(1e-3, 0.1), maximize=True),
}
TRACEABLE = ["rmsprop", "rmsprop_centered_momentum", "adagrad", "adadelta", "adamax", "nadam",
             "nadam_decoupled", "radam", "asgd", "asgd_t0", "rprop", "rprop_maximize"]


class _CustomSGD(ember.optim.Optimizer):
    """A user's optimizer: its own step (not traced)."""

    def __init__(self, params, lr=0.01):
        super().__init__(params, dict(lr=lr))

    def step(self, closure=None):
        with ember.no_grad():
            for g in self.param_groups:
                for p in g["params"]:
                    if p.grad is not None:
                        p.sub_(g["lr"] * p.grad)


@pytest.fixture(autouse=True)
def _reset():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


def _data(model, batch, seed, dtype):
    g = np.random.default_rng(seed)
    if isinstance(model, LeNet5):
        x, n = g.standard_normal((batch, 1, 28, 28)), 10
    else:
        x, n = g.standard_normal((batch, 20)), 5
    return ember.tensor(x, dtype=dtype), ember.tensor(g.integers(0, n, batch))


def _setup(cls, opt, dtype, zero_first=True, sched=False, clip=None):
    ember.manual_seed(0)
    model = cls().to(dtype)
    twin = copy.deepcopy(model)
    out = []
    for m in (model, twin):
        o = OPTS[opt](m.parameters())
        s = ember.optim.lr_scheduler.StepLR(o, 2, 0.5) if sched else None

        def step(x, y, m=m, o=o):
            if zero_first:
                o.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            if clip is not None:
                clip(m)
            o.step()
            if not zero_first:
                o.zero_grad()
            return loss
        out.append((m, o, s, step))
    return out


def _train(cls, opt, dtype, steps=10, batch=4, batches=None, dynamic=None, **kw):
    (me, oe, se, step_e), (mc, oc, sc, step_c) = _setup(cls, opt, dtype, **kw)
    compiled = ember.compile(step_c, dynamic=dynamic)
    batches = batches or [batch] * steps
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphBreakWarning)
        for i, b in enumerate(batches):
            x, y = _data(me, b, i, dtype)
            le, lc = step_e(x, y), compiled(x, y)
            # relative in float32 too: a diverging run's loss reaches 1e4 (an ulp is 1e-3)
            assert abs(le.item() - lc.item()) <= (1e-10 if dtype == ember.float64 else 1e-4) \
                * max(1.0, abs(le.item()))
            for s in (se, sc):
                if s is not None:
                    s.step()
    return me, mc, oe, oc, compiled._compiled


def _close(me, mc, dtype):
    tol = dict(rtol=0, atol=1e-10) if dtype == ember.float64 else dict(rtol=1e-4, atol=1e-5)
    for p, q in zip(me.parameters(), mc.parameters()):
        np.testing.assert_allclose(q.numpy(force=True), p.numpy(force=True), **tol)
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), **tol)


def _twin_steps(make_step):
    """A float64 MLP, its deep copy, and make_step(m) (a training step) for each."""
    ember.manual_seed(0)
    model = MLP().double()
    twin = copy.deepcopy(model)
    return model, twin, [make_step(m) for m in (model, twin)]


def _breaks_and_matches_eager(make_step, match, calls):
    """The compiled twin's step warns a GraphBreakWarning matching `match` within `calls` calls
    and ends where eager does."""
    model, twin, steps = _twin_steps(make_step)
    compiled = ember.compile(steps[1])
    with pytest.warns(GraphBreakWarning, match=match):
        for i in range(calls):
            x, y = _data(model, 4, i, ember.float64)
            steps[0](x, y)
            compiled(x, y)
    _close(model, twin, ember.float64)


def test_first_calls_hold_the_kernel_compile_thread():
    """A compiled step's first calls (the untraced call that creates the optimizer's state, the
    trace and compile, the check) run inside ``compiler.foreground``: the compile thread's
    Numba import and kernel loads wait for them instead of sharing the GIL with them."""
    from ember.kernels.runtime import compiler
    ember.manual_seed(0)
    model = MLP().to(ember.float64)
    opt = ember.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    held = []

    def step(x, y):
        held.append(compiler._holds)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    cf = ember.compile(step)
    for i in range(4):
        cf(*_data(MLP(), 4, i, ember.float64))
    # (the fourth call runs the program: no Python of the function's)
    assert held == [1, 1, 1] and compiler._holds == 0
    assert isinstance(cf._compiled._last.traced, WholeStep)


@pytest.mark.parametrize("cls", [MLP, LeNet5])
@pytest.mark.parametrize("opt", ["sgd_momentum", "adamw"])
def test_whole_step_matches_eager_float64(cls, opt):
    me, mc, oe, oc, cf = _train(cls, opt, ember.float64)
    _close(me, mc, ember.float64)
    # the optimizer state too (Adam's step counts advanced by the runner as eager does)
    for p, q in zip(me.parameters(), mc.parameters()):
        for k, v in oe.state[p].items():
            w = oc.state[q][k]
            if isinstance(v, float):
                assert v == w == 10.0
            else:
                np.testing.assert_allclose(w.numpy(), v.numpy(), rtol=0, atol=1e-10)
    # one trace after the state-creating first step; the other 8 calls ran the program
    assert (cf.traces, cf.warmups, cf.breaks, cf.recompiles) == (1, 1, [], [])
    assert isinstance(cf._last.traced, WholeStep)


def test_state_creating_call_runs_untraced_once():
    # an optimizer the function reaches has no state: the first call runs eagerly, not under
    # the tracer (its trace would be thrown away); the second traces the whole step
    ember.manual_seed(0)
    model = MLP().to(ember.float64)
    opt = ember.optim.Adam(model.parameters(), lr=1e-3)
    traced = []

    def step(x, y):
        traced.append(ember.compiler.is_compiling())
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    cf = ember.compile(step)
    for i in range(3):
        cf(*_data(MLP(), 4, i, ember.float64))
    # (the third call is the check: the program, then the function eagerly)
    assert traced == [False, True, False] and cf._compiled.warmups == 1
    assert isinstance(cf._compiled._last.traced, WholeStep)
    # reached but never stepped (its state stays empty): one untraced call only
    idle = ember.optim.Adam(MLP().parameters())
    seen = []

    def fwd(x):
        seen.append(ember.compiler.is_compiling())
        _ = idle
        return model(x).sum()
    g = ember.compile(fwd)
    for i in range(3):
        g(_data(MLP(), 4, i, ember.float64)[0])
    assert seen == [False, True] and g._compiled.traces == 1


@pytest.mark.parametrize("cls", [MLP, LeNet5])
@pytest.mark.parametrize("opt", ["sgd_momentum", "adamw"])
def test_whole_step_dynamic_batch_matches_eager(cls, opt):
    # 8: the optimizer state is created (eager), 8 traced, 16 traced again and found the same
    # step but for the batch size (LeNet-5's flatten backward reshape then reads it from the
    # input): 5, 7 and 16 run that program without a retrace
    sizes = [8, 8, 16, 16, 5, 5, 16, 8, 5, 7]
    me, mc, oe, oc, cf = _train(cls, opt, ember.float64, batches=sizes)
    _close(me, mc, ember.float64)
    assert (cf.traces, cf.warmups, cf.breaks, cf.dynamic_fallbacks) == (2, 1, [], [])
    assert [e.batch for e in cf._dynamic.values()] == [16]
    assert isinstance(cf._last.traced, WholeStep)
    me, mc, oe, oc, cf = _train(cls, opt, ember.float64, batches=sizes[:6], dynamic=False)
    _close(me, mc, ember.float64)
    assert cf.traces == 3


@pytest.mark.parametrize("opt", ["sgd_nesterov_maximize", "sgd_dampening", "sgd_plain",
                                 "adam_l2_amsgrad"])
def test_whole_step_update_options_match_eager(opt):
    me, mc, *_, cf = _train(MLP, opt, ember.float64, steps=5)
    _close(me, mc, ember.float64)
    assert cf.breaks == [] and cf.traces == 1


@pytest.mark.parametrize("opt", ["sgd_momentum", "adamw"])
def test_whole_step_float32_close(opt):
    me, mc, *_ = _train(MLP, opt, ember.float32, batch=8)
    _close(me, mc, ember.float32)


def test_zero_grad_at_the_end_leaves_no_gradients():
    me, mc, *_, cf = _train(MLP, "adamw", ember.float64, steps=4, zero_first=False)
    _close(me, mc, ember.float64)
    assert all(p.grad is None for p in mc.parameters()) and cf.traces == 1


def test_whole_step_is_one_program():
    *_, cf = _train(MLP, "adamw", ember.float64, steps=3)
    runner = cf._last.traced
    g = runner.graph
    kinds = [n.kind for n in g.nodes]
    inner = [n.kind for grp in g.find_nodes("fusion_group") for n in grp.attrs["graph"].nodes]
    names = {v.name for v in g.inputs}
    # forward and backward (the weight gradients' mm) and Adam's update (sqrt of exp_avg_sq)
    # in the same graph; parameters and both moments written in place
    assert "linear" in kinds and "mm" in kinds and "sqrt" in inner + kinds
    # hyper-parameters and bias corrections are formals (lr enters through decay, step_size)
    assert {"b2", "eps", "one_m_b1", "one_m_b2", "decay"} <= names
    assert sum(n.endswith("_step_size") for n in names) == 6
    # each parameter's update is one fused pass writing the parameter and both moments in
    # place (FusedGroup.run_arrays_into), no copies left
    written = runner.writes
    assert len(written) == 3 * 6 and not g.find_nodes("copy_") and not g.find_nodes("copy")
    assert {v.name for v in g.inputs if v.name.endswith(("exp_avg", "exp_avg_sq")) or
            v.role == "param"} == set(written)
    assert "m.fc1.weight_exp_avg_sq" in written and "m.fc3.bias_step_size" in names
    assert "def step_step(" in runner.code and cf.breaks == []
    e = ember.explain(cf.fn, *_data(MLP(), 4, 0, ember.float64))
    assert e.graph_break_count == 0


def test_lr_scheduler_changes_lr_without_retrace():
    for opt in ("sgd_momentum", "adamw"):
        me, mc, oe, oc, cf = _train(MLP, opt, ember.float64, sched=True)
        assert oc.param_groups[0]["lr"] == oe.param_groups[0]["lr"] < OPTS[opt](
            [nn.Parameter(ember.zeros(1))]).param_groups[0]["lr"] / 8
        _close(me, mc, ember.float64)
        assert cf.traces == 1 and cf.recompiles == []


def _state_close(me, mc, oe, oc, tol):
    for p, q in zip(me.parameters(), mc.parameters()):
        assert set(oe.state[p]) == set(oc.state[q])
        for k, v in oe.state[p].items():
            w = oc.state[q][k]
            if isinstance(v, float):
                assert v == w
            else:
                np.testing.assert_allclose(w.numpy(), v.numpy(), **tol)


@pytest.mark.parametrize("cls", [MLP, LeNet5])
@pytest.mark.parametrize("opt", TRACEABLE)
def test_other_optimizers_whole_step_matches_eager_float64(cls, opt):
    if cls is LeNet5 and opt not in ("rmsprop", "nadam", "radam", "asgd_t0", "rprop"):
        pytest.skip("LeNet-5 with three of them: the MLP runs every optimizer")
    me, mc, oe, oc, cf = _train(cls, opt, ember.float64)
    _close(me, mc, ember.float64)
    _state_close(me, mc, oe, oc, dict(rtol=0, atol=1e-10))
    # Adagrad's state exists from its constructor: no eager first step; RAdam retraces once,
    # when rho_t > 5 switches its update to the rectified one (a branch of the step count),
    # ASGD with t0=3 when its averaging starts
    assert cf.traces == (2 if opt in ("radam", "asgd_t0") else 1) and cf.breaks == []
    assert cf.warmups == (0 if opt == "adagrad" else 1)
    assert isinstance(cf._last.traced, WholeStep)
    assert len(cf._last.traced.writes) >= len(list(mc.parameters()))
    if opt.startswith("asgd"):   # eta and mu advanced by the runner after each program
        assert oc.state[next(iter(mc.parameters()))]["eta"].dtype == ember.float32


@pytest.mark.parametrize("opt", ["rmsprop_centered_momentum", "adamax", "nadam", "radam",
                                 "asgd_t0", "rprop"])
def test_other_optimizers_whole_step_float32_close(opt):
    me, mc, oe, oc, cf = _train(MLP, opt, ember.float32, batch=8)
    _close(me, mc, ember.float32)
    _state_close(me, mc, oe, oc, dict(rtol=1e-4, atol=1e-5))
    assert cf.breaks == []


@pytest.mark.parametrize("opt", ["rmsprop", "adagrad", "nadam"])
def test_other_optimizers_lr_scheduler_does_not_retrace(opt):
    me, mc, oe, oc, cf = _train(MLP, opt, ember.float64, sched=True)
    assert oc.param_groups[0]["lr"] == oe.param_groups[0]["lr"] < OPTS[opt](
        [nn.Parameter(ember.zeros(1))]).param_groups[0]["lr"] / 8
    _close(me, mc, ember.float64)
    assert cf.traces == 1 and cf.recompiles == []
    names = {v.name for v in cf._last.traced.graph.inputs}
    assert "lr" in names or any(n.endswith("_clr") or n.endswith("_c_grad") for n in names)


def test_unknown_optimizer_runs_eagerly_with_a_warning():
    def make_step(m):
        o = _CustomSGD(m.parameters(), lr=1e-2)

        def step(x, y):
            o.zero_grad()
            F.cross_entropy(m(x), y).backward()
            o.step()
        return step
    _breaks_and_matches_eager(
        make_step, r"_CustomSGD.step\(\): ember.compile traces the updates of SGD, Adam, AdamW, "
        r"RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop \(not LBFGS: its step "
        r"needs a closure\); this optimizer's step runs eagerly.*test_step.py:\d+: `o.step\(\)`",
        3)


def test_gradients_accumulated_from_outside_fall_back_with_a_warning():
    # no zero_grad anywhere: the second call would accumulate into the first call's .grad,
    # which the program did not compute: it retraces, breaks and runs eagerly
    def make_step(m):
        o = ember.optim.SGD(m.parameters(), lr=1e-2)

        def step(x, y):
            F.cross_entropy(m(x), y).backward()
            o.step()
        return step
    model, twin, steps = _twin_steps(make_step)
    compiled = ember.compile(steps[1])
    x, y = _data(model, 4, 0, ember.float64)
    steps[0](x, y)
    compiled(x, y)
    with pytest.warns(GraphBreakWarning, match=r"accumulating into the .grad of a tensor"):
        for i in range(1, 3):
            x, y = _data(model, 4, i, ember.float64)
            steps[0](x, y)
            compiled(x, y)
    assert "expected to be None" in compiled._compiled.recompiles[0]
    _close(model, twin, ember.float64)


def test_step_with_closure_is_a_named_break():
    model = MLP().double()
    o = ember.optim.SGD(model.parameters(), lr=1e-2)
    x, y = _data(model, 4, 0, ember.float64)

    def step():
        def closure():
            o.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            return loss
        return o.step(closure)
    with pytest.warns(GraphBreakWarning, match=r"SGD.step\(closure\) \(the closure is not "
                      r"captured\)"):
        ember.compile(step)()


CLIPS = {
    "norm2": lambda m: nn.utils.clip_grad_norm_(m.parameters(), 0.5),
    "norm1": lambda m: nn.utils.clip_grad_norm_(m.parameters(), 0.5, 1, foreach=True),
    "norm3": lambda m: nn.utils.clip_grad_norm_(m.parameters(), 0.2, 3.0),
    "norm_inf": lambda m: nn.utils.clip_grad_norm_(m.parameters(), 0.05, "inf"),
    "norm0": lambda m: nn.utils.clip_grad_norm_(list(m.parameters()), 3.0, 0),
    "value": lambda m: nn.utils.clip_grad_value_(m.parameters(), 0.01),
}


@pytest.mark.parametrize("clip", list(CLIPS))
def test_gradient_clipping_is_captured_and_matches_eager_float64(clip):
    # GPT-style: loss.backward(); clip_grad_norm_(...); opt.step() is one program; the clip's
    # math (ember.nn.utils.clip_grad) traced on the gradients, which the program returns clipped
    me, mc, oe, oc, cf = _train(MLP, "sgd_momentum" if clip != "norm2" else "adamw",
                                ember.float64, clip=CLIPS[clip])
    _close(me, mc, ember.float64)
    for p, q in zip(me.parameters(), mc.parameters()):
        for k, v in oe.state[p].items():
            if not isinstance(v, float):
                np.testing.assert_allclose(oc.state[q][k].numpy(), v.numpy(), rtol=0, atol=1e-10)
    assert (cf.traces, cf.breaks) == (1, []) and isinstance(cf._last.traced, WholeStep)
    kinds = {n.kind for n in cf._last.traced.graph.nodes}
    assert {"amax", "sum"} & kinds and "mm" in kinds
    if clip == "norm2":   # each gradient's squared norm one dot product, as in eager
        dots = cf._last.traced.graph.find_nodes("dot")
        assert len(dots) == len(list(mc.parameters()))


def test_gradient_clipping_is_captured_float32_close():
    me, mc, *_, cf = _train(LeNet5, "sgd_momentum", ember.float32, batch=8,
                            clip=CLIPS["norm2"])
    _close(me, mc, ember.float32)
    assert (cf.traces, cf.breaks) == (1, [])


def test_clip_returns_the_traced_norm_and_lr_scheduler_does_not_retrace():
    ember.manual_seed(0)
    model = MLP().double()
    twin = copy.deepcopy(model)
    runs = []
    for m in (model, twin):
        o = ember.optim.AdamW(m.parameters(), lr=1e-2)
        s = ember.optim.lr_scheduler.StepLR(o, 2, 0.5)

        def step(x, y, m=m, o=o):
            o.zero_grad()
            F.cross_entropy(m(x), y).backward()
            norm = nn.utils.clip_grad_norm_(m.parameters(), 0.1)
            o.step()
            return norm
        runs.append((step, s))
    compiled = ember.compile(runs[1][0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphBreakWarning)
        for i in range(10):
            x, y = _data(model, 4, i, ember.float64)
            ne, nc = runs[0][0](x, y), compiled(x, y)
            assert abs(ne.item() - nc.item()) <= 1e-12 and nc.dtype == ember.float64
            for _, s in runs:
                s.step()
    _close(model, twin, ember.float64)
    assert compiled._compiled.traces == 1


def test_clip_with_error_if_nonfinite_is_a_named_break():
    def make_step(m):
        o = ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            o.zero_grad()
            F.cross_entropy(m(x), y).backward()
            nn.utils.clip_grad_norm_(m.parameters(), 0.01, error_if_nonfinite=True)
            o.step()
        return step
    _breaks_and_matches_eager(make_step, r"clip_grad_norm_\(error_if_nonfinite=True\) \(raising "
                              r"on the norm's value is data-dependent control flow\)", 4)


def test_gradients_changed_outside_the_traced_ops_fall_back_to_eager():
    # Python scaling .grad through its arrays (invisible to the tracer): the first run of the
    # program is checked against eager, differs, and the step runs eagerly
    def make_step(m):
        o = ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            o.zero_grad()
            F.cross_entropy(m(x), y).backward()
            for p in m.parameters():
                p.grad._data *= 0.5
            o.step()
        return step
    _breaks_and_matches_eager(make_step, r"the captured training step differs from eager", 5)


def test_lr_scheduler_stepped_inside_the_function_is_a_named_break():
    def make_step(m):
        o = ember.optim.SGD(m.parameters(), lr=0.1)
        s = ember.optim.lr_scheduler.StepLR(o, 1, 0.5)

        def step(x, y):
            o.zero_grad()
            F.cross_entropy(m(x), y).backward()
            o.step()
            s.step()
        return step
    _breaks_and_matches_eager(
        make_step, r"SGD's hyper-parameters changed after its step inside the function", 4)


def test_captured_parameters_are_named_by_their_module_path():
    # a compiled function's captured parameters read as model.<path>, not param0; the optimizer
    # state formals after them; the text form parses back to the same graph
    from ember.jit import parse
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @ember.compile
    def step(x, y):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    x, y = ember.randn(2, 4), ember.tensor([0, 1])
    for _ in range(3):
        step(x, y)
    g = step._compiled.graph
    assert [v.name for v in g.inputs if v.role == "param"] == [
        "model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias"]
    assert "model.0.weight_momentum_buffer" in {v.name for v in g.inputs}
    # (the in-place writes, attrs["into"], are not in the text form: runner.writes)
    assert str(parse(str(g))) == str(g)


def test_fullgraph_accepts_a_captured_step_and_raises_on_an_uncaptured_one():
    ember.manual_seed(0)
    model = MLP().double()
    for opt, ok in ((ember.optim.AdamW(model.parameters()), True),
                    (_CustomSGD(model.parameters()), False)):
        def step(x, y, o=opt):
            o.zero_grad()
            F.cross_entropy(model(x), y).backward()
            o.step()
        compiled = ember.compile(step, fullgraph=True)
        x, y = _data(model, 4, 0, ember.float64)
        if ok:
            for _ in range(3):
                compiled(x, y)
            assert compiled._compiled.traces == 1
        else:
            with pytest.raises(GraphBreakError, match=r"_CustomSGD.step\(\): ember.compile "
                               r"traces"):
                compiled(x, y)


def _grad_step(model, lr):
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        grads = ember.autograd.grad(loss, list(model.parameters()))
        with ember.no_grad():
            for p, g in zip(model.parameters(), grads):
                p.sub_(lr * g)
        return loss.detach(), grads
    return step


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32])
def test_autograd_grad_is_traced_into_the_program(dtype):
    # autograd.grad inside a compiled function (not a whole step: no .grad, no optimizer): the
    # gradients are traced as loss.backward()'s and returned; a manual SGD update with them in
    # the same program; 10 steps against eager
    ember.manual_seed(0)
    model = MLP().to(dtype)
    twin = copy.deepcopy(model)
    eager, compiled = _grad_step(model, 0.1), ember.compile(_grad_step(twin, 0.1))
    tol = dict(rtol=0, atol=1e-10) if dtype == ember.float64 else dict(rtol=1e-4, atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphBreakWarning)
        for i in range(10):
            x, y = _data(model, 4, i, dtype)
            (le, ge), (lc, gc) = eager(x, y), compiled(x, y)
            np.testing.assert_allclose(lc.numpy(), le.numpy(), **tol)
            for a, b in zip(gc, ge):
                assert a.dtype == b.dtype and not a.requires_grad
                np.testing.assert_allclose(a.numpy(), b.numpy(), **tol)
    _close(model, twin, dtype)
    cf = compiled._compiled
    assert (cf.traces, cf.breaks) == (1, []) and isinstance(cf._last.traced, WholeStep)
    assert all(p.grad is None for p in twin.parameters())


def test_autograd_grad_with_respect_to_an_input():
    ember.manual_seed(0)
    model = MLP().double()

    def f(x, y):
        loss = F.cross_entropy(model(x), y)
        (dx,) = ember.autograd.grad(loss, x)
        return dx.abs().sum(dim=1)
    compiled = ember.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphBreakWarning)
        for i in range(3):
            x, y = _data(model, 4, i, ember.float64)
            x.requires_grad_(True)
            np.testing.assert_allclose(compiled(x, y).numpy(), f(x, y).numpy(), rtol=0,
                                       atol=1e-12)
    assert compiled._compiled.traces == 1 and compiled._compiled.breaks == []


def test_autograd_grad_with_create_graph_is_a_named_break():
    model = MLP().double()

    def f(x, y):
        loss = F.cross_entropy(model(x), y)
        g = ember.autograd.grad(loss, list(model.parameters()), create_graph=True)
        return loss + sum((t * t).sum() for t in g)
    x, y = _data(model, 4, 0, ember.float64)
    with pytest.warns(GraphBreakWarning, match=r"autograd.grad\(create_graph=True\) \(double "
                      r"backward is not captured\)"):
        out = ember.compile(f)(x, y)
    np.testing.assert_allclose(out.detach().numpy(), f(x, y).detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("opt", ["adamw", "nadam", "asgd_t0"])
def test_load_state_dict_between_calls_keeps_the_program_exact(opt):
    # load_state_dict replaces each parameter's state dict: the program's step counts and
    # bias corrections are read from opt.state at every call (they were the dicts seen when
    # tracing: the loaded state's step stayed put while the old dict's advanced)
    ember.manual_seed(0)
    (me, oe, _, step_e), (mc, oc, _, step_c) = _setup(MLP, opt, ember.float64)
    compiled = ember.compile(step_c)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphBreakWarning)
        for i in range(8):
            if i == 4:
                for o in (oe, oc):
                    o.load_state_dict(o.state_dict())
            x, y = _data(me, 4, i, ember.float64)
            step_e(x, y)
            compiled(x, y)
    _close(me, mc, ember.float64)
    _state_close(me, mc, oe, oc, dict(rtol=0, atol=1e-10))
    assert oc.state[next(iter(mc.parameters()))]["step"] == 8


@pytest.mark.parametrize("cls", [MLP, LeNet5])
def test_memory_plan_keeps_the_steps_results_and_returns_no_arena_memory(cls, monkeypatch):
    """The step program with its memory plan -- in-place reuse, with and without the arena --
    against the program without one: the same parameters, losses and gradients; no gradient
    in arena memory."""
    import ember.jit.arena as arena_mod
    import ember.jit.passes.memory as memory_mod
    results = {}
    real_plan = memory_mod.plan_memory
    for setting in ("arena", "in place", "none"):
        ember.compiler.reset()
        monkeypatch.setattr(arena_mod, "ARENA", setting == "arena")
        monkeypatch.setattr(memory_mod, "plan_memory", real_plan if setting != "none" else
                            lambda g, operator=None, arena=True: memory_mod.MemoryPlan())
        (_, _, _, _), (mc, oc, _, step_c) = _setup(cls, "adamw", ember.float64)
        compiled = ember.compile(step_c)
        losses, grads = [], []
        for i in range(4):
            x, y = _data(mc, 8, i, ember.float64)
            losses.append(compiled(x, y))
            grads.append([p.grad for p in mc.parameters()])
        runner = compiled._compiled._last.traced
        assert isinstance(runner, WholeStep)
        results[setting] = ([p.numpy(force=True).copy() for p in mc.parameters()],
                            [l.item() for l in losses], grads, runner)
    arena_run, in_place, none = results["arena"], results["in place"], results["none"]
    assert len(arena_run[3].plan.buffers) > 0 and "arena_" in arena_run[3].code
    assert len(in_place[3].plan.into) > 0 and not in_place[3].plan.buffers
    assert "arena_" not in in_place[3].code and not len(none[3].plan)
    for params, losses, grads, runner in (arena_run, in_place):
        for a, b in zip(params + [np.array(losses)], none[0] + [np.array(none[1])]):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
        for step_grads, step_grads0 in zip(grads, none[2]):   # earlier steps' gradients kept
            for g, g0 in zip(step_grads, step_grads0):
                np.testing.assert_allclose(g.numpy(), g0.numpy(), rtol=0, atol=1e-12)
    for step_grads in arena_run[2]:
        for g in step_grads:
            assert not any(np.shares_memory(g.numpy(), a) for a in arena_run[3]._fn.arena)


def _allclose_oracle(a, b):
    """The check call's rule written with np.allclose: tol 1e-9 (float64) or 1e-3, atol scaled
    by the largest |b| of a float b (at least 1)."""
    tol = 1e-9 if a.dtype == np.float64 else 1e-3
    scale = max(1.0, float(np.max(np.abs(b))) if b.size and b.dtype.kind == "f" else 1.0)
    return bool(np.allclose(a, b, rtol=tol, atol=tol * scale, equal_nan=True))


@pytest.mark.filterwarnings("ignore:One of rtol or atol is not valid")
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_check_comparison_agrees_with_allclose(dtype):
    """WholeStep.differ's in-place closeness test decides as np.allclose does: at and past the
    bound, NaN and infinities on either side, a dtype mismatch, integers, empty arrays."""
    from ember.compiler.step import _close
    rng = np.random.default_rng(0)
    b = (rng.standard_normal(200) * 50).astype(dtype)
    tol = 1e-9 if dtype == np.float64 else 1e-3
    bound = (np.abs(b) * dtype(tol) + dtype(tol * max(1.0, float(np.abs(b).max())))).astype(dtype)
    cases = [b.copy(), b + bound, b + 2 * bound, b - 3 * bound, np.nextafter(b + bound, dtype(np.inf))]
    for c in list(cases):
        for pos, val in ((3, np.nan), (5, np.inf), (7, -np.inf)):
            x, y = c.copy(), b.copy()
            x[pos] = val
            cases.append(x)
            y[pos] = val
            cases.append((c, y))
            cases.append((x, y))
    cases.append((b.astype(np.float64), b))
    cases.append((np.arange(5), np.arange(5)))
    cases.append((np.arange(5), np.arange(5) + 1))
    cases.append((np.zeros(0, dtype), np.zeros(0, dtype)))
    cases.append((np.asarray(b[0]), np.asarray(b[0])))
    cases.append((np.asarray(b[0] + 2 * bound[0]), np.asarray(b[0])))
    decided = set()
    for c in cases:
        x, y = c if isinstance(c, tuple) else (c, b)
        want = _allclose_oracle(x, y)
        decided.add(want)
        assert _close(x, y) == want, (x.dtype, y.dtype)
        assert (WholeStep.differ([x], [y]) is None) == want
    assert decided == {True, False}


@pytest.mark.parametrize("opt", ["sgd_momentum", "adamw", "adam_l2_amsgrad", "nadam", "asgd_t0",
                                 "rprop_maximize", "rmsprop_centered_momentum"])
def test_update_recorded_from_shapes_is_the_computed_trace(opt, monkeypatch):
    """The tracing call takes the update's values from the optimizer's eager step and records
    its ops from shapes alone: the program is the one the computing trace makes (same text, same
    in-place writes), the counters the eager step advanced are not advanced twice (10 steps
    against eager in float64), and the tracing call's own results are eager's."""
    import ember.compiler.step as step_mod
    programs = []
    for shapes_only in (False, True):
        monkeypatch.setattr(step_mod, "SHAPES_ONLY", shapes_only)
        ember.compiler.reset()
        me, mc, oe, oc, cf = _train(MLP, opt, ember.float64)
        _close(me, mc, ember.float64)
        _state_close(me, mc, oe, oc, dict(rtol=0, atol=1e-10))
        programs.append((str(cf._last.traced.graph), cf._last.traced.writes))
    assert programs[0] == programs[1]
    # the tracing call (call 2) alone: its parameters and state are those of eager's step
    monkeypatch.setattr(step_mod, "SHAPES_ONLY", True)
    me, mc, oe, oc, cf = _train(MLP, opt, ember.float64, steps=2)
    assert cf.traces == 1 and isinstance(cf._last.traced, WholeStep)
    assert cf._last.traced.verified is False   # not yet run: the values are the trace's
    _close(me, mc, ember.float64)
    _state_close(me, mc, oe, oc, dict(rtol=0, atol=1e-10))


def test_update_recorded_from_shapes_follows_the_dtype():
    """The recorded update's ops are learnt once per operand kinds (dtype, rank): a float32
    step and then a float64 step in one process each get their own dtype's program (float64
    exact against eager)."""
    for dtype in (ember.float32, ember.float64, ember.float32):
        ember.compiler.reset()
        me, mc, oe, oc, cf = _train(MLP, "adamw", dtype, batch=8)
        _close(me, mc, dtype)
        g = cf._last.traced.graph
        kinds = {str(v.dtype) for n in g.nodes for v in n.outputs
                 if n.kind in ("fusion_group", "mul", "add", "sub", "div", "sqrt")}
        assert kinds == {"float32" if dtype == ember.float32 else "float64"}


class _LayerNormNet(nn.Module):
    """Linear 20 -> 48, LayerNorm over the last dim (``ns=1``) or the last two of a (12, 4)
    view (``ns=2``), GELU, Linear -> 5."""

    def __init__(self, ns=1, affine=True):
        super().__init__()
        self.fc1 = nn.Linear(20, 48)
        self.shape = (48,) if ns == 1 else (12, 4)
        self.ln = nn.LayerNorm(self.shape, elementwise_affine=affine)
        self.fc2 = nn.Linear(48, 5)

    def forward(self, x):
        h = self.ln(self.fc1(x).view((x.shape[0],) + self.shape))
        return self.fc2(F.gelu(h).reshape(x.shape[0], 48))


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32])
@pytest.mark.parametrize("ns", [1, 2])
def test_layer_norm_backward_is_one_op_in_the_step(dtype, ns):
    """The traced backward records layer_norm's gradients as one ``layer_norm_backward`` op
    (eager's one-pass kernel): no mean recomputing the forward's statistics left in the
    program; 10 AdamW steps match eager (float64 to 1e-10)."""
    me, mc, *_, cf = _train(lambda: _LayerNormNet(ns), "adamw", dtype)
    _close(me, mc, dtype)
    assert cf.breaks == [] and isinstance(cf._last.traced, WholeStep)
    g = cf._last.traced.graph
    kinds = [n.kind for n in g.nodes] + \
        [n.kind for grp in g.find_nodes("fusion_group") for n in grp.attrs["graph"].nodes]
    assert kinds.count("layer_norm_backward") == 1 and "mean" not in kinds


def test_layer_norm_without_affine_keeps_the_formula_and_matches_eager():
    """Without a weight the formula's ops are traced (its mean of the input among them); the
    step matches eager to 1e-10."""
    me, mc, *_, cf = _train(lambda: _LayerNormNet(1, affine=False), "adamw", ember.float64)
    _close(me, mc, ember.float64)
    g = cf._last.traced.graph
    kinds = [n.kind for n in g.nodes] + \
        [n.kind for grp in g.find_nodes("fusion_group") for n in grp.attrs["graph"].nodes]
    assert "layer_norm_backward" not in kinds and "mean" in kinds


def test_layer_norm_double_backward_outside_a_trace_is_differentiable():
    """Outside ember.compile's traced backward layer_norm's gradient is still its formula's
    ops: a gradient of the input's gradient (create_graph) matches torch."""
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(3)
    arrays = [r.standard_normal(s) for s in ((4, 6), (6,), (6,))]
    outs = []
    for lib, fn in ((ember, F.layer_norm), (torch, torch.nn.functional.layer_norm)):
        x, w, b = (lib.tensor(a, requires_grad=True) for a in arrays)
        y = fn(x, (6,), w, b)
        (gx,) = lib.autograd.grad((y * y).sum(), [x], create_graph=True)
        assert gx.requires_grad
        gx.pow(2).sum().backward()
        outs.append([t.grad.numpy() for t in (x, w, b)])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("cls", [MLP, LeNet5])
@pytest.mark.parametrize("opt", ["sgd_momentum", "adamw"])
def test_whole_step_runs_numpy_forms_until_its_kernels_load_then_switches(cls, opt, monkeypatch):
    """A process's first calls run each fusion group's NumPy form while its kernel loads on the
    compile thread (EMBER_JIT_COMPILE=background); then the program switches to the kernels.
    Both sides of the switch match eager in float64. The compile thread's jobs run here when the
    test says, so the first calls cannot have a kernel."""
    from ember.jit import fused
    from ember.kernels.pointwise import engine
    from ember.kernels.runtime import compiler
    monkeypatch.setattr(fused, "FORCE", "kernel")          # every group through the engine
    monkeypatch.setattr(engine, "MIN_COMPILED_SIZE", 0)     # at this test's small sizes too
    monkeypatch.setattr(engine, "MIN_WARM_SIZE", 0)
    monkeypatch.setattr(engine, "_forms", {})               # no kernel built in this process
    monkeypatch.setattr(fused, "_GROUPS", type(fused._GROUPS)(fused.MAX_CACHED_GROUPS))
    monkeypatch.setattr(engine, "_kernels", type(engine._kernels)(engine.MAX_CACHED_KERNELS))
    queued = []
    monkeypatch.setattr(compiler, "submit", lambda key, name, job, **kw: queued.append(job))
    ran = []   # per engine call of the compiled step: "kernel" or "numpy" (the NumPy form)
    on = []
    run_compiled, run_numpy = engine.PointwiseKernel._run_compiled, engine.NumpyPlan.run

    def spy_compiled(self, *a, **kw):
        done = run_compiled(self, *a, **kw)
        if done and on:
            ran.append("kernel")
        return done

    def spy_numpy(self, *a, **kw):
        if on:
            ran.append("numpy")
        return run_numpy(self, *a, **kw)
    monkeypatch.setattr(engine.PointwiseKernel, "_run_compiled", spy_compiled)
    monkeypatch.setattr(engine.NumpyPlan, "run", spy_numpy)
    previous = compiler.set_compile_mode("background")
    try:
        (me, oe, _, step_e), (mc, oc, _, step_c) = _setup(cls, opt, ember.float64)
        compiled = ember.compile(step_c)
        for i in range(8):   # 1: eager (creates the state), 2: traced, 3: checked, then the program
            del ran[:]
            x, y = _data(me, 4, i, ember.float64)
            le = step_e(x, y)
            on.append(1)
            lc = compiled(x, y)
            on.pop()
            assert abs(le.item() - lc.item()) <= 1e-10 * max(1.0, abs(le.item()))
            _close(me, mc, ember.float64)
            if i == 3:
                assert set(ran) == {"numpy"} and queued, "the first calls should run NumPy forms"
            if i >= 3:
                while queued:        # the compile thread's imports, loads and compiles
                    queued.pop(0)()
        assert set(ran) == {"kernel"}, "the program never switched to its kernels"
        cf = compiled._compiled
        assert (cf.traces, cf.breaks, cf.recompiles) == (1, [], [])
        assert isinstance(cf._last.traced, WholeStep)
    finally:
        compiler.set_compile_mode(previous)
