"""Inference plans (ember.jit.plan): a frozen trace's fast calls run one generated function per
input shape, with fused conv/linear epilogues and reused buffers; outputs equal eager's."""
import re
import warnings

import numpy as np
import pytest

import ember
import ember.jit as jit
import ember.jit.plan as plan_module
import ember.nn as nn
import ember.nn.functional as F

pytest.importorskip("numba")


def _fast(model, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jit.optimize(jit.trace(model.eval(), (x,)))


def _lenet():
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def _mlp():
    return nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(),
                         nn.Linear(32, 10))


class _Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                   nn.BatchNorm2d(cout)) if stride != 1 or cin != cout else None)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


def _resnet():
    m = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                      _Block(8, 8, 1), _Block(8, 16, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(16, 10))
    with ember.no_grad():  # non-trivial batch-norm statistics
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.copy_(ember.randn(mod.running_mean.shape) * 0.1)
                mod.running_var.copy_(ember.rand(mod.running_var.shape) + 0.5)
    return m


MODELS = {"lenet": (_lenet, (1, 28, 28)), "mlp": (_mlp, (784,)),
          "resnet": (_resnet, (3, 12, 12))}


def _planned(fast):
    planner = fast._planner
    assert planner is not None and not planner.errors
    return planner.plans()


def _only_plan(fast):
    """The one inference plan ``fast`` has built."""
    return next(iter(_planned(fast).values()))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_plan_equals_eager(name, dtype):
    ember.manual_seed(0)
    build, shape = MODELS[name]
    model = build().to(getattr(ember, dtype)).eval()
    x = ember.randn((2,) + shape, dtype=getattr(ember, dtype))
    fast = _fast(model, x)
    assert fast.inference_plan
    tol = 1e-5 if dtype == "float32" else 1e-12
    with ember.no_grad():
        for batch in (1, 3):   # another batch size: a plan of its own
            xb = ember.randn((batch,) + shape, dtype=getattr(ember, dtype))
            want = model(xb).numpy()
            got = fast(xb)
            assert got.numpy().dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)
            again = fast(xb).numpy()
            np.testing.assert_allclose(got.numpy(), again, rtol=0, atol=0)
    assert {k[0][0] for k in _planned(fast)} == {1, 3}


def test_plan_matches_torch_lenet():
    torch = pytest.importorskip("torch")
    ember.manual_seed(1)
    model = _lenet().eval()
    tm = torch.nn.Sequential(torch.nn.Conv2d(1, 6, 5, padding=2), torch.nn.ReLU(),
                             torch.nn.MaxPool2d(2), torch.nn.Conv2d(6, 16, 5), torch.nn.ReLU(),
                             torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                             torch.nn.Linear(400, 120), torch.nn.ReLU(), torch.nn.Linear(120, 84),
                             torch.nn.ReLU(), torch.nn.Linear(84, 10)).eval()
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                        for k, v in model.state_dict().items()})
    x = ember.randn(5, 1, 28, 28)
    fast = _fast(model, x)
    with torch.no_grad():
        want = tm(torch.from_numpy(x.numpy().copy())).numpy()
    np.testing.assert_allclose(fast(x).numpy(), want, rtol=1e-4, atol=1e-5)
    assert _planned(fast)


class _Odd(nn.Module):
    """Strided, dilated, padded, non-square convolutions; a pool that drops a row; a 1x1
    convolution; a residual add whose other operand comes later; a returned intermediate and
    a returned view of a reused buffer."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 5, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2))
        self.b = nn.Conv2d(5, 5, 1)
        self.c = nn.Conv2d(5, 5, 3, padding=1)
        self.d = nn.Conv2d(5, 4, 3)

    def forward(self, x):
        y = F.relu(self.a(x))
        z = self.c(y)
        w = F.relu(z + self.b(y))         # the 1x1 conv's epilogue adds z
        p = F.max_pool2d(F.relu(self.d(w)), 2)
        return p.flatten(1), y


@pytest.mark.parametrize("batch", [1, 2])
def test_plan_odd_shapes_and_returned_buffers(batch):
    ember.manual_seed(2)
    model = _Odd().eval()
    x = ember.randn(batch, 3, 11, 9)
    fast = _fast(model, x)
    with ember.no_grad():
        want = [t.numpy() for t in model(x)]
        first = [t.numpy().copy() for t in fast(x)]
        kept = fast(x)
        fast(ember.randn(batch, 3, 11, 9))   # must not overwrite what the last call returned
    for a, b, c in zip(first, [t.numpy() for t in kept], want):
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(a, b)
    plan = _only_plan(fast)
    assert len(plan._steps) == 4   # every convolution fused with its epilogue


def test_plan_nan_propagates_like_eager():
    ember.manual_seed(3)
    model = _lenet().eval()
    x = ember.randn(2, 1, 28, 28)
    fast = _fast(model, x)
    xn = x.numpy().copy()
    xn[0, 0, 3, 4] = np.nan
    xn = ember.tensor(xn)
    with ember.no_grad():
        want, got = model(xn).numpy(), fast(xn).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert _planned(fast)


def test_plan_changed_shape_and_rank():
    ember.manual_seed(4)
    model = _lenet().eval()
    fast = _fast(model, ember.randn(1, 1, 28, 28))
    with ember.no_grad():
        fast(ember.randn(1, 1, 28, 28))
        with pytest.raises(ember.errors.EmberValueError, match="4-d input"):
            fast(ember.randn(1, 28, 28))
        # a spatial size the layers cannot take: the error eager mode gives, naming the op
        with pytest.raises(Exception, match="linear|shape"):
            fast(ember.randn(1, 1, 32, 32))
    # the bad shape's plan failed at its recording run, and that call took the ordinary path
    assert list(fast._planner.plans()) == [((1, 1, 28, 28),)]
    assert len(fast._planner.errors) == 1


def test_plan_not_used_when_grad_or_live_params():
    ember.manual_seed(5)
    model = _lenet().eval()
    x = ember.randn(2, 1, 28, 28)
    live = jit.optimize(jit.trace(model, (x,)), freeze_params=False)
    assert not live.inference_plan
    fast = _fast(model, x)
    xg = x.detach().requires_grad_(True)
    out = fast(xg)                    # needs a gradient: the dispatch path, autograd records
    out.sum().backward()
    assert xg.grad is not None and fast._planner is None


def test_plan_after_save_load(tmp_path):
    ember.manual_seed(6)
    model = _resnet().eval()
    x = ember.randn(2, 3, 12, 12)
    fast = _fast(model, x)
    path = tmp_path / "m.ejit"
    jit.save(fast, str(path))
    loaded = jit.load(str(path))
    assert loaded.inference_plan
    with ember.no_grad():
        np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
    assert _planned(loaded)


def test_plan_large_batch_runs_under_either_thread_setting():
    """A plan with GEMMs above plan.PARALLEL_MIN_FLOPS times itself on ember's chunks and on
    BLAS's threads (``tune_threads``) and keeps the faster; both give eager's result."""
    ember.manual_seed(7)
    model = _lenet().eval()
    x = ember.randn(65, 1, 28, 28)    # an odd batch
    fast = _fast(model, x)
    with ember.no_grad():
        want = model(x).numpy()
        got = fast(x).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        plan = _only_plan(fast)
        timings = plan.thread_timings
        assert set(timings) == {"ember's chunks", "BLAS threads"}
        free = timings["BLAS threads"] < plan_module.BLAS_THREADS_MARGIN * timings["ember's chunks"]
        assert plan.parallel != free
        for setting in ((True, False), (False, False)):
            plan.parallel, plan.one_blas_thread = setting
            np.testing.assert_allclose(fast(x).numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("on_blas_threads", [False, True])
def test_plan_retunes_once_keeping_the_best_times_of_both_moments(on_blas_threads, monkeypatch):
    """At the RETUNE_AFTER-th run the plan times its convolution modes again, and its thread
    settings when it runs on BLAS's threads; each choice rests on the minimum over both timings
    (a slow moment cannot raise a time)."""
    monkeypatch.setattr(plan_module, "RETUNE_AFTER", 3)
    ember.manual_seed(7)
    model = _lenet().eval()
    x = ember.randn(65, 1, 28, 28)
    fast = _fast(model, x)
    with ember.no_grad():
        want = model(x).numpy()
        fast(x)
        plan = _only_plan(fast)
        steps = [s for s, _, _ in plan._tuned]
        assert steps and all(s.mode_times for s in steps)
        first = [dict(s.mode_times) for s in steps]
        if on_blas_threads:
            plan.parallel, plan.one_blas_thread = plan._thread_settings[1]
        else:
            plan.parallel, plan.one_blas_thread = plan._thread_settings[0]
        first_threads = dict(plan.thread_timings)
        timed = []
        real_threads = plan.tune_threads
        monkeypatch.setattr(plan, "tune_threads", lambda a: timed.append(1) or real_threads(a))
        calls = []
        real = plan.retune
        monkeypatch.setattr(plan, "retune", lambda a: calls.append(1) or real(a))
        for _ in range(4):
            np.testing.assert_allclose(fast(x).numpy(), want, rtol=1e-5, atol=1e-6)
    assert calls == [1]                       # once, at the third run
    assert timed == ([1] if on_blas_threads else [])
    for s, before in zip(steps, first):
        assert set(s.mode_times) == set(before)
        assert all(s.mode_times[m] <= before[m] for m in before)
        situ = plan.situ_timings   # (timed inside whole runs too: ``tune_in_situ``)
        kept = s.situ_times if s.situ_times and situ["in situ"] < situ["isolated"] else \
            s.mode_times
        assert s.mode == min(kept, key=kept.get)
    assert all(plan.thread_timings[k] <= first_threads[k] for k in first_threads)


@pytest.mark.parametrize("batch", [1, 3])
def test_steady_plan_drops_the_weights_of_modes_it_does_not_run(batch, monkeypatch):
    """Once steady, each convolution step keeps only its own mode's weight copy (``direct``'s
    packed weight, or the GEMM orientation or the engine's weight) and the plan still equals
    eager on new inputs; ``plan.RELEASE_OTHER_MODES = False`` keeps every copy."""
    monkeypatch.setattr(plan_module, "RETUNE_AFTER", 3)
    ember.manual_seed(17)
    model = _resnet().eval()
    xs = [ember.randn(batch, 3, 16, 16) for _ in range(3)]
    fast = _fast(model, xs[0])
    modes = ("kxp", "pxk", "engine", "direct")
    with ember.no_grad():
        fast(xs[0])
        plan = _only_plan(fast)
        convs = [s for s in plan._steps if isinstance(s, plan_module._ConvStep)]
        for i, s in enumerate(convs):   # every mode the steps offer, chosen by someone
            s.mode = [m for m in modes if m in s.modes()][i % len([m for m in modes
                                                                    if m in s.modes()])]
        plan._tune = plan._tuned = []
        for _ in range(4):
            fast(xs[0])
        assert plan.steady
        kept = {"kxp": "w2", "pxk": "wt", "engine": "w", "direct": "direct"}
        for s in convs:
            assert getattr(s, kept[s.mode]) is not None, s.mode
            for m, attr in kept.items():
                if m != s.mode:
                    assert getattr(s, attr) is None, (s.mode, attr)
        assert {s.mode for s in convs} >= ({"kxp", "engine", "direct"} if batch == 1
                                           else {"kxp", "engine"})
        for x in xs:
            np.testing.assert_allclose(fast(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(plan_module, "RELEASE_OTHER_MODES", False)
    fast = _fast(model, xs[0])
    with ember.no_grad():
        for _ in range(5):
            fast(xs[0])
        plan = _only_plan(fast)
        assert plan.steady
        assert all(s.w is not None and s.w2 is not None for s in plan._steps
                   if isinstance(s, plan_module._ConvStep))


def test_autotune_times_again_a_mode_whose_first_timing_was_slow(monkeypatch):
    """A mode whose one first timing ran 2.5x slow (a busy moment) is timed again in the
    interleaved rounds, and wins when it is the faster: the choice does not rest on one run."""
    import contextlib
    import time
    clock = [0.0]
    # seconds each call of a mode takes: warm-up, first timing, then the interleaved rounds
    script = {"kxp": iter([1.0, 2.5, 0.5, 0.5]), "direct": iter([1.0, 1.0, 1.0, 1.0])}

    class Step:
        mode, mode_times = "kxp", {}

        def modes(self):
            return ["kxp", "direct"]

        def __call__(self, x, r):
            clock[0] += next(script[self.mode])

    class Plan:
        _tune = [(Step(), None, None)]
        _threads = staticmethod(contextlib.nullcontext)
        blas_free = None

        def _check_blas_free(self):
            pass

    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    plan = Plan()
    plan_module.InferencePlan.autotune(plan)
    step = plan._tuned[0][0]
    assert step.mode_times == {"kxp": 0.5, "direct": 1.0}
    assert step.mode == "kxp"


@pytest.mark.parametrize("together_slower", [False, True])
def test_in_situ_tuning_keeps_each_step_s_fastest_mode_inside_whole_runs(together_slower,
                                                                          monkeypatch):
    """``tune_in_situ`` times the modes within IN_SITU_CLOSE of a step's best isolated time
    where the plan's function calls the step, and puts the step objects back; a mode far slower
    in isolation is not tried. Each step's fastest mode there is kept when the plan as a whole
    runs faster with them; where a mode was fast only beside a neighbour's other mode
    (``together_slower``) the isolated choices stay."""
    import time
    clock = [0.0]
    # seconds per call inside the plan, by step and mode (isolated, "kxp" looked fastest)
    cost = {"a": {"kxp": 2.0, "direct": 1.0, "pxk": 0.1}, "b": {"kxp": 1.0, "engine": 3.0}}

    class Step:
        def __init__(self, name, mode_times):
            self.name, self.mode_times, self.situ_times = name, mode_times, {}
            self.mode = min(mode_times, key=mode_times.get)

        def __call__(self, x):
            t = cost[self.name][self.mode]
            if together_slower and self.name == "b" and self.mode == "engine" and \
                    a.mode == "kxp":
                t = 0.5     # (the rotation runs b's "engine" beside a's "kxp" only)
            clock[0] += t
            seen.append((self.name, self.mode))
            return x

    a = Step("a", {"kxp": 1.0, "direct": 1.5, "pxk": 9.0})     # pxk: over 2x the best
    b = Step("b", {"kxp": 1.0, "engine": 1.2})
    seen = []
    g = {"step_a": a, "step_b": b}
    exec("def plan(x):\n    return step_a(step_b(x))\n", g)   # as codegen binds steps

    class Plan:
        _tuned = [(a, None, None), (b, None, None)]
        _fn = staticmethod(g["plan"])

        def run(self, arrays):
            return self._fn(*arrays)

    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    plan = Plan()
    plan_module.InferencePlan.tune_in_situ(plan, (0,))
    assert g["step_a"] is a and g["step_b"] is b
    assert a.situ_times == {"kxp": 2.0, "direct": 1.0}
    assert {m for n, m in seen if n == "a"} == {"kxp", "direct"}
    runs = plan_module.IN_SITU_ROUNDS * 2 + plan_module.IN_SITU_CHECKS * 2
    assert len(seen) == 2 * runs
    if together_slower:
        assert b.situ_times == {"kxp": 1.0, "engine": 0.5}
        assert plan.situ_timings == {"isolated": 3.0, "in situ": 4.0}
        assert (a.mode, b.mode) == ("kxp", "kxp")
    else:
        assert b.situ_times == {"kxp": 1.0, "engine": 3.0}
        assert plan.situ_timings == {"isolated": 3.0, "in situ": 2.0}
        assert (a.mode, b.mode) == ("direct", "kxp")


def test_plan_tuned_in_situ_equals_eager(monkeypatch):
    """A ResNet-style plan at a batch of one through its in-situ tuning (the RETUNE_AFTER-th
    run): every step timed there chose among its modes, and the plan equals eager."""
    monkeypatch.setattr(plan_module, "RETUNE_AFTER", 3)
    monkeypatch.setattr(plan_module, "IN_SITU_CLOSE", 1e9)   # every mode, on any host
    ember.manual_seed(5)
    model = _resnet().eval()
    xs = [ember.randn(1, 3, 16, 16) for _ in range(2)]
    fast = _fast(model, xs[0])
    with ember.no_grad():
        for _ in range(4):
            fast(xs[0])
        plan = _only_plan(fast)
        timed = [s for s, _, _ in plan._tuned if s.situ_times]
        assert timed
        situ = plan.situ_timings
        for s in timed:
            assert set(s.situ_times) == set(s.mode_times)
            kept = s.situ_times if situ["in situ"] < situ["isolated"] else s.mode_times
            assert s.mode == min(kept, key=kept.get)
        for x in xs:
            np.testing.assert_allclose(fast(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", [3, 1])
@pytest.mark.parametrize("mode", ["engine", "pxk", "kxp"])
@pytest.mark.parametrize("name", ["resnet", "lenet", "odd"])
def test_plan_convolution_modes_equal_eager(name, mode, batch, monkeypatch):
    """Each of the autotuner's choices: W @ col ("kxp"), col.T @ W.T ("pxk", one GEMM row per
    output pixel) and ember's convolution engine, each with its fused epilogue. The GEMM modes'
    products are ``conv.parallel.matmul``'s (one image's rows split over the TBB threads under
    the plan's thread policy)."""
    from ember.kernels.conv import parallel
    ember.manual_seed(8)
    if name == "odd":
        model, x = _Odd().eval(), ember.randn(batch, 3, 11, 9)
    else:
        build, shape = MODELS[name]
        model, x = build().eval(), ember.randn((batch,) + shape)
    fast = _fast(model, x)
    calls = []
    real = parallel.matmul

    def spy(a, b, out):
        calls.append(out.shape)
        return real(a, b, out)
    with ember.no_grad():
        want = model(x)
        fast(x)
        plan = _only_plan(fast)
        engine = [s for s in plan._steps if hasattr(s, "can_use_engine") and s.can_use_engine()]
        assert engine
        for s in engine:
            assert mode in s.modes()
            s.mode = mode
        monkeypatch.setattr(parallel, "matmul", spy)
        got = fast(x)
    if mode != "engine":
        assert len(calls) >= len(engine)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def _one_image(name, dtype):
    """(model in ``dtype``, an input of one image, the same input with a NaN)."""
    dt = getattr(ember, dtype)
    if name == "odd":
        model, x = _Odd().to(dt).eval(), ember.randn(1, 3, 11, 9, dtype=dt)
    else:
        build, shape = MODELS[name]
        model = build().to(dt).eval()
        x = ember.randn((1,) + (shape[:1] + (32, 32) if name == "resnet" else shape), dtype=dt)
    xn = x.clone()
    xn[0, -1, 5, 7] = float("nan")
    return model, x, xn


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["resnet", "lenet", "odd"])
def test_plan_direct_mode_at_batch_one_equals_eager(name, dtype, monkeypatch):
    """A batch of one: each convolution step can run the direct kernel on operands packed at
    build time (mode "direct"), also with a max pool after it and with rows shorter than a
    vector (LeNet's; ``direct_numba.forward_image``); all in it (with the linear a GEMV) the
    plan calls no BLAS and runs without a thread-count switch. Equal to eager, also with NaN in
    the input, and with direct disabled (``plan.DIRECT``) the mode is not offered."""
    ember.manual_seed(9)
    model, x, xn = _one_image(name, dtype)
    fast = _fast(model, x)

    def first(out):
        return (out[0] if isinstance(out, tuple) else out).numpy()
    with ember.no_grad():
        want, want_n = first(model(x)), first(model(xn))
        fast(x)
        plan = _only_plan(fast)
        convs = [s for s in plan._steps if isinstance(s, plan_module._ConvStep)]
        assert convs and all("direct" in s.modes() for s in convs)
        for s in convs:
            s.mode = "direct"
        plan._check_blas_free()
        assert plan.blas_free
        got, got_n = first(fast(x)), first(fast(xn))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert np.isnan(want_n).any()
        np.testing.assert_array_equal(np.isnan(got_n), np.isnan(want_n))
        np.testing.assert_allclose(got_n, want_n, rtol=1e-5, atol=1e-6)
        convs[0].mode = "kxp"
        plan._check_blas_free()
        assert not plan.blas_free
        for setting in ((True, False), (False, True), (False, False)):
            plan.parallel, plan.one_blas_thread = setting
            np.testing.assert_allclose(first(fast(x)), want, rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(plan_module, "DIRECT", False)
    fast = _fast(model, x)
    with ember.no_grad():
        np.testing.assert_allclose(first(fast(x)), want, rtol=1e-5, atol=1e-6)
        plan = _only_plan(fast)
        assert not any("direct" in s.modes() for s in plan._steps
                       if isinstance(s, plan_module._ConvStep))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["resnet", "lenet", "odd"])
def test_plan_direct_split_mode_gives_direct_bits(name, dtype, monkeypatch):
    """Mode "direct_split" (a batch of one's output rows in runs over Numba's threads:
    ``direct_numba.forward_rows_split`` and ``forward_image_split``, with a residual, a pool
    after the convolution, rows shorter than a vector, more runs than rows) gives the bits of
    mode "direct", through the step and inlined in a steady plan, NaN included. It is offered
    only where ``direct.row_parts`` gives runs: not with one thread, nor under
    ``plan.DIRECT_SPLIT_MIN_FLOPS`` (the plan's own threshold, not eager's
    ``direct.SPLIT_MIN_FLOPS``), nor with ``plan.DIRECT_SPLIT`` off."""
    ember.manual_seed(21)
    from ember.kernels.runtime import threads
    threads.parallel_layer()   # ember starts Numba's layer first, as ``_split_parts`` does
    monkeypatch.setattr(plan_module, "_split_parts", lambda g, P: 5)   # any host, any threads
    model, x, xn = _one_image(name, dtype)
    fast = _fast(model, x)

    def arrays(out):
        return [np.array(getattr(t, "numpy", lambda: t)())
                for t in (out if isinstance(out, tuple) else (out,))]
    with ember.no_grad():
        fast(x)
        plan = _only_plan(fast)
        convs = [s for s in plan._steps if isinstance(s, plan_module._ConvStep)]
        split = [s for s in convs if "direct_split" in s.modes()]
        assert split and all(s.direct.parts == 5 for s in split)
        got = {}
        for mode in ("direct", "direct_split"):
            for s in split:
                s.mode = mode
            got[mode] = [arrays(fast(x)), arrays(fast(xn))]
            plan.specialise()
            got[mode + " inlined"] = [arrays(plan._fn(x.numpy())), arrays(plan._fn(xn.numpy()))]
        ref = got.pop("direct")
        assert np.isnan(ref[1][0]).any()
        for mode, outs in got.items():
            for a, b in zip(outs, ref):
                for u, v in zip(a, b):
                    np.testing.assert_array_equal(u, v, err_msg=mode)
    monkeypatch.undo()
    with ember.no_grad():
        from ember.kernels.conv import direct
        monkeypatch.setattr(direct, "SPLIT_MIN_FLOPS", float("inf"))
        monkeypatch.setattr(plan_module, "DIRECT_SPLIT_MIN_FLOPS", 0.0)
        threads = ember.get_num_threads()
        try:
            ember.set_num_threads(2)
            fast = _fast(model, x)
            fast(x)
        finally:
            ember.set_num_threads(threads)
        import numba
        from ember.kernels.runtime import threads as runtime_threads
        if numba.config.NUMBA_NUM_THREADS >= 2 and runtime_threads.parallel_layer() == "tbb":
            assert any("direct_split" in s.modes() for s in _only_plan(fast)._steps
                       if isinstance(s, plan_module._ConvStep))
        monkeypatch.undo()
        for module, setting in ((plan_module, {"DIRECT_SPLIT": False}),
                                (plan_module, {"DIRECT_SPLIT_MIN_FLOPS": float("inf")}),
                                (None, {})):
            for k, v in setting.items():
                monkeypatch.setattr(module, k, v)
            threads = ember.get_num_threads()
            try:
                if not setting:
                    ember.set_num_threads(1)
                fast = _fast(model, x)
                fast(x)
            finally:
                ember.set_num_threads(threads)
            plan = _only_plan(fast)
            assert not any("direct_split" in s.modes() for s in plan._steps
                           if isinstance(s, plan_module._ConvStep))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, batch", [("mlp", 16), ("lenet", 9), ("resnet", 5)])
def test_plan_linear_direct_mode_equals_eager(name, batch, dtype):
    """A linear step of several rows can run the direct convolution's micro-kernel
    (``direct_numba.linear_rows``, mode "direct", timed against BLAS's GEMM), its columns
    padded to whole vectors where needed (LeNet's 120, 84 and 10), on ember's threads or one;
    equal to eager, NaN propagating."""
    ember.manual_seed(10)
    dt = getattr(ember, dtype)
    build, shape = MODELS[name]
    model = build().to(dt).eval()
    x = ember.randn((batch,) + shape, dtype=dt)
    xn_np = x.numpy().copy()
    xn_np.reshape(batch, -1)[1, 3] = np.nan
    xn = ember.tensor(xn_np)
    fast = _fast(model, x)
    with ember.no_grad():
        want, want_n = model(x).numpy(), model(xn).numpy()
        fast(x)
        plan = _only_plan(fast)
        lins = [s for s in plan._steps if isinstance(s, plan_module._LinearStep)]
        assert lins and all(s.modes() == ("gemm", "direct") for s in lins)
        for s in lins:
            s.mode = "direct"
        for setting in ((True, False), (False, True), (False, False)):
            plan.parallel, plan.one_blas_thread = setting
            got, got_n = fast(x).numpy(), fast(xn).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
            assert np.isnan(want_n).any()
            np.testing.assert_array_equal(np.isnan(got_n), np.isnan(want_n))
            np.testing.assert_allclose(got_n, want_n, rtol=1e-5, atol=1e-6)


def test_plan_skips_random_graphs():
    def f(x):
        return F.dropout(F.relu(x), 0.5, training=True)
    x = ember.randn(4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = jit.optimize(jit.trace(f, (x,), check_trace=False))
    with ember.no_grad():
        a, b = fast(x).numpy(), fast(x).numpy()
    assert not np.array_equal(a, b)          # fresh masks: the ordinary path ran
    assert fast._planner is not None and not fast._planner.enabled


@pytest.mark.parametrize("rows", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_plan_linear_of_few_rows_is_a_gemv_equal_to_eager(rows, dtype, monkeypatch):
    """Linear layers of at most linalg.GEMV_MAX_ROWS input rows run ``gemv_runs`` /
    ``gemv_rows`` (split over TBB from linalg.GEMV_MIN_BYTES of weight: lowered here so a small
    model takes both); more rows take the GEMM. Bias and ReLU as eager, NaN kept. (Chains off:
    each layer its own step.)"""
    from ember.kernels import linalg
    monkeypatch.setattr(linalg, "GEMV_MIN_BYTES", 8 << 10)
    monkeypatch.setattr(plan_module, "GEMV_CHAIN", False)
    ember.manual_seed(5)
    model = nn.Sequential(nn.Linear(300, 37), nn.ReLU(), nn.Linear(37, 10, bias=False)).eval()
    model = model.to(getattr(ember, dtype))
    x = ember.randn(rows, 300, dtype=getattr(ember, dtype))
    x[0, 3] = float("nan")
    fast = _fast(model, x)
    with ember.no_grad():
        want = model(x).numpy()
        got = fast(x).numpy()
    plan = _only_plan(fast)
    linear = [s for s in plan._steps if isinstance(s, plan_module._LinearStep)]
    assert [s.gemv for s in linear] == [rows <= linalg.GEMV_MAX_ROWS] * 2
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert np.isnan(got[0]).all() and not np.isnan(got[1:]).any()


@pytest.mark.parametrize("n", [1, 3, 4, 5, 37, 130])
def test_gemv_runs_cover_every_row_for_any_part_count(n):
    kn = plan_module._kernels()
    if kn is None:
        pytest.skip("needs Numba")
    r = np.random.default_rng(n)
    w = r.standard_normal((n, 19))
    x = r.standard_normal((2, 19))
    b = r.standard_normal(n)
    want = x @ w.T + b
    for relu in (False, True):
        for parts in (1, 2, 3, 7):
            y = np.full((2, n), np.nan)
            kn.linear.gemv_runs(w, x, b, y, relu, parts)
            np.testing.assert_allclose(y, np.maximum(want, 0) if relu else want, rtol=1e-12,
                                       atol=1e-12)


def _tanh_gelu(x):
    return x * 0.5 * ((x + x * x * x * 0.044715) * 0.7978845608028654).tanh().add(1.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_plan_runs_a_large_fusion_group_as_one_fused_kernel(dtype, monkeypatch):
    """A pointwise chain that no conv/linear epilogue takes runs as its group's fused kernel
    from ``MIN_FUSED_SIZE`` elements (the plan ran the group's nine ops one by one: a traced
    tanh-GELU over 1e6 elements was slower than eager), op by op below it; equal to eager."""
    from ember.jit import fused
    calls = []
    run = fused.FusedGroup.run_arrays
    monkeypatch.setattr(fused.FusedGroup, "run_arrays",
                        lambda self, *a: calls.append(a[0].size) or run(self, *a))
    dt = getattr(ember, dtype)
    for n, fused_run in ((fused.MIN_FUSED_SIZE + 3, True), (100, False)):
        x = ember.randn(n, dtype=dt)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fast = jit.optimize(jit.trace(_tanh_gelu, (x,), check_trace=False))
        assert fast.graph.find_nodes("fusion_group")
        calls.clear()
        with ember.no_grad():
            want = _tanh_gelu(x).numpy()
            for _ in range(3):
                got = fast(x).numpy()
        assert _planned(fast)
        assert bool(calls) == fused_run and all(c == n for c in calls)
        tol = 2e-6 if dtype == "float32" else 1e-14
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
class _InplaceBlock(nn.Module):
    """torchvision's BasicBlock form: ``nn.ReLU(inplace=True)`` and ``out += identity``."""

    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return self.relu(out)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_plan_runs_graphs_with_in_place_writes_of_local_values(dtype):
    """In-place ReLUs and ``out += identity`` (every torchvision ResNet) are ``copy_`` nodes
    into values the graph itself made; the plan drops them (their readers read the written
    value) instead of refusing the whole graph (ResNet-50 never got a plan). Equal to eager."""
    ember.manual_seed(0)
    dt = getattr(ember, dtype)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.ReLU(inplace=True), _InplaceBlock(8),
                          _InplaceBlock(8)).to(dt).eval()
    x = ember.randn(2, 3, 10, 10, dtype=dt)
    fast = _fast(model, x)
    assert fast.graph.find_nodes("copy_")
    tol = 1e-5 if dtype == "float32" else 1e-12
    with ember.no_grad():
        for _ in range(3):
            want = model(x).numpy()
            got = fast(x).numpy()
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert _planned(fast) and fast._planner.enabled
    assert not fast._planner.graph.find_nodes("copy_")


def test_plan_keeps_in_place_writes_that_a_view_or_an_input_sees():
    """A write into a value a view was taken of (the view is read after the write) or into an
    input changes what other readers see: such a ``copy_`` stays and the graph runs the
    ordinary path, with eager's results."""
    def viewed(x):
        a = x * 2.0
        v = a.view(-1)
        a.relu_()
        return v + 1.0

    def into_input(x):
        y = x * 3.0
        x.add_(1.0)
        return x + y

    for f in (viewed, into_input):
        x = ember.randn(3, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fast = jit.optimize(jit.trace(f, (x.clone(),), check_trace=False))
        with ember.no_grad():
            want = f(x.clone()).numpy()
            got = fast(x.clone()).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        assert fast._planner is None or fast._planner.graph.find_nodes("copy_")


def test_plan_runs_before_the_other_modes_kernels_are_ready(monkeypatch):
    """The plan runs once its own kernels are compiled, every convolution step in mode "kxp",
    while the kernels only the other modes need still compile (it took the ordinary path until
    all were ready); the first call that finds them ready times the modes. Equal to eager."""
    from ember.kernels.conv import fused_numba
    from ember.kernels.runtime import compiler as rt
    real, held = rt.ready, [True]

    def ready(disp, sig, force=False, later=False):
        if held[0] and disp is fused_numba.im2col_t:   # a kernel of mode "pxk" only
            return False
        return real(disp, sig, force, later)
    monkeypatch.setattr(rt, "ready", ready)
    ember.manual_seed(0)
    model = _resnet().eval()
    x = ember.randn(1, 3, 12, 12)
    fast = _fast(model, x)
    with ember.no_grad():
        want = model(x).numpy()
        got = fast(x).numpy()
        (plan,) = _planned(fast).values()
        assert plan.ready_now and plan.tuning_pending
        assert all(st.mode == "kxp" and not st.mode_times for st, _, _ in plan._tune)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        fast(x)
        assert plan.tuning_pending
        held[0] = False
        got = fast(x).numpy()
        assert not plan.tuning_pending
        assert plan._tuned and all(st.mode_times for st, _, _ in plan._tuned)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_plan_chains_small_linear_layers_of_few_rows(rows, dtype):
    """Consecutive small linear layers of at most linalg.GEMV_MAX_ROWS rows, each the next one's
    only input, run as one ``_LinearChain`` step (bias, ReLU and a bias-less layer as eager, NaN
    kept); an intermediate the graph returns ends the chain; more rows take the GEMM steps."""
    from ember.kernels import linalg

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(50, 37), nn.Linear(37, 20, bias=False)
            self.c, self.d = nn.Linear(20, 11), nn.Linear(11, 6)

        def forward(self, x):
            h = self.c(F.relu(self.b(F.relu(self.a(x)))))
            return self.d(F.relu(h)), h        # h returned: d does not join the chain

    ember.manual_seed(11)
    dt = getattr(ember, dtype)
    model = Net().to(dt).eval()
    x = ember.randn(rows, 50, dtype=dt)
    x[0, 3] = float("nan")
    fast = _fast(model, x)
    with ember.no_grad():
        want = [t.numpy() for t in model(x)]
        got = [t.numpy() for t in fast(x)]
        again = [t.numpy().copy() for t in fast(x)]
    plan = _only_plan(fast)
    chains = [s for s in plan._steps if isinstance(s, plan_module._LinearChain)]
    if rows <= linalg.GEMV_MAX_ROWS:
        assert len(chains) == 1 and len(chains[0].links) == 3
    else:
        assert not chains
    tol = 1e-5 if dtype == "float32" else 1e-12
    for g, w, a in zip(got, want, again):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
        np.testing.assert_array_equal(g, a)
        assert np.isnan(g[0]).all() and not np.isnan(g[1:]).any()


@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize("parts", [None, 0, 2])
def test_plan_chain_splits_its_large_layers(rows, parts, monkeypatch):
    """A chain whose first layer's weight has linalg.GEMV_MIN_BYTES or more runs as one call
    of ``gemv_chain_runs`` with that layer split into the runs ``linalg.gemv_parts`` gives at
    each call (``parts``: forced; None: this host's), equal to eager."""
    from ember.kernels import linalg
    if parts is not None:
        monkeypatch.setattr(linalg, "gemv_parts", lambda w: parts)
    ember.manual_seed(14)
    model = nn.Sequential(nn.Linear(300, 256), nn.ReLU(), nn.Linear(256, 30), nn.ReLU(),
                          nn.Linear(30, 7)).eval()
    assert 256 * 300 * 4 >= linalg.GEMV_MIN_BYTES > 256 * 30 * 4
    x = ember.randn(rows, 300)
    fast = _fast(model, x)
    with ember.no_grad():
        want = model(x).numpy()
        for _ in range(6):   # steady: the specialised function calls the kernel directly
            got = fast(x).numpy()
    plan = _only_plan(fast)
    chains = [s for s in plan._steps if isinstance(s, plan_module._LinearChain)]
    assert len(plan._steps) == len(chains) == 1 and len(chains[0].links) == 3
    assert chains[0].split_at.tolist() == [True, False, False]
    assert "gemv_chain_runs" in str(chains[0].signatures(None)[0][0])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_plan_chain_off_runs_a_step_per_layer(monkeypatch):
    monkeypatch.setattr(plan_module, "GEMV_CHAIN", False)
    ember.manual_seed(12)
    model = _lenet().eval()
    x = ember.randn(1, 1, 28, 28)
    fast = _fast(model, x)
    with ember.no_grad():
        want = model(x).numpy()
        got = fast(x).numpy()
    plan = _only_plan(fast)
    assert not any(isinstance(s, plan_module._LinearChain) for s in plan._steps)
    assert sum(isinstance(s, plan_module._LinearStep) for s in plan._steps) == 3
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["lenet", "lenet_no_chain", "odd", "resnet"])
def test_steady_plan_calls_its_kernels_directly(name, dtype, monkeypatch):
    """Once steady, the plan's function is generated again with its direct convolutions (with
    and without padding or a pool after them), GEMV chains and single GEMVs calling their
    kernels (``InferencePlan.specialise``; a GEMV whose weight may be split over threads asks
    ``linalg.gemv_parts`` at each call, as its step does: LeNet-5's first layer in float64); a
    convolution with a residual keeps its step. Equal
    to eager on new inputs, each call's returned arrays its own; ``plan.SPECIALISE = False``
    leaves the function as built."""
    monkeypatch.setattr(plan_module, "RETUNE_AFTER", 3)
    monkeypatch.setattr(plan_module, "RELEASE_OTHER_MODES", False)   # the modes are set below
    monkeypatch.setattr(plan_module, "GEMV_CHAIN", name != "lenet_no_chain")
    ember.manual_seed(13)
    dt = getattr(ember, dtype)
    if name == "odd":
        model, shape = _Odd().to(dt).eval(), (3, 11, 9)
    else:
        build, shape = MODELS[name.split("_")[0]]
        model = build().to(dt).eval()
        shape = (3, 32, 32) if name == "resnet" else shape
    xs = [ember.randn((1,) + shape, dtype=dt) for _ in range(3)]
    fast = _fast(model, xs[0])

    def arrays(out):
        return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]
    tol = 1e-5 if dtype == "float32" else 1e-10
    with ember.no_grad():
        for _ in range(6):
            fast(xs[0])
        plan = _only_plan(fast)
        assert plan.specialised   # steady: done by Planner.run
        for s in plan._steps:     # every step in the mode that has an inline form
            if isinstance(s, plan_module._ConvStep):
                s.mode = "direct"
        plan.specialise()
        inlined = [s for s in plan._steps if (isinstance(s, plan_module._ConvStep) and
                                              s.res is None) or
                   isinstance(s, plan_module._LinearChain) or
                   (isinstance(s, plan_module._LinearStep) and s.gemv)]
        assert plan.specialised == len(inlined) > 0
        if name == "lenet_no_chain" and dtype == "float32":   # single GEMVs, the last returned
            assert sum(isinstance(s, plan_module._LinearStep) for s in inlined) == 3
        if name == "lenet" and dtype == "float64":   # the first layer splits over threads
            assert any(isinstance(s, plan_module._LinearChain) and s.split_at is not None
                       for s in inlined)
        calls = re.findall(r"= step(?:_\d+)?\(", plan.source)
        assert len(calls) == len(plan._steps) - len(inlined)
        if name == "resnet":
            assert any(s.res is not None for s in plan._steps
                       if isinstance(s, plan_module._ConvStep))
        wants = [arrays(model(x)) for x in xs]
        got = [arrays(fast(x)) for x in xs]
        kept = [[a.copy() for a in g] for g in got]
        for g, k, w in zip(got, kept, wants):
            for a, b, c in zip(g, k, w):
                np.testing.assert_array_equal(a, b)   # not overwritten by the later calls
                np.testing.assert_allclose(a, c, rtol=tol, atol=tol)
    if name == "lenet" and dtype == "float64":   # the split chain's branch (gemv_chain_runs)
        from ember.kernels import linalg
        monkeypatch.setattr(linalg, "gemv_parts", lambda w: 2)
        fast = _fast(model, xs[0])
        with ember.no_grad():
            for _ in range(6):
                fast(xs[0])
            assert _only_plan(fast).specialised
            for a, c in zip(arrays(fast(xs[2])), wants[2]):
                np.testing.assert_allclose(a, c, rtol=tol, atol=tol)
    monkeypatch.setattr(plan_module, "SPECIALISE", False)
    fast = _fast(model, xs[0])
    with ember.no_grad():
        for _ in range(6):
            fast(xs[0])
        plan = _only_plan(fast)
        assert plan.steady and not plan.specialised
        for a, c in zip(arrays(fast(xs[1])), wants[1]):
            np.testing.assert_allclose(a, c, rtol=tol, atol=tol)


def test_engine_mode_convolutions_transform_their_weight_once(monkeypatch):
    """A convolution step's weight is an immutable copy (``memory.frozen_copy``), so the
    Winograd engine keeps its transform of it: the plan's calls do not transform it again (an
    imported ResNet-50's plan spent 1.1 ms a call transforming) and still equal eager."""
    from ember.backends import conv as conv_settings
    from ember.kernels.conv import winograd
    ember.manual_seed(5)
    model = _resnet().eval()
    x = ember.randn(2, 3, 16, 16)
    with ember.no_grad():
        want = model(x).numpy()
    fast = _fast(model, x)
    with ember.no_grad():
        fast(x)
        plan = _only_plan(fast)
        convs = [s for s in plan._steps if isinstance(s, plan_module._ConvStep)]
        assert convs and all(winograd.immutable(s.w) for s in convs)
        unit3x3 = [s for s in convs if s.args == (3, 3, 1, 1, 1, 1)]
        assert unit3x3
        for s in unit3x3:
            s.mode = "engine"
        plan._tune = plan._tuned = []
        monkeypatch.setattr(conv_settings, "algorithm", "winograd")
        calls = []
        real = winograd._weight_transform
        monkeypatch.setattr(winograd, "_weight_transform",
                            lambda *a: calls.append(1) or real(*a))
        fast(x)
        assert len(calls) == len(unit3x3)      # the first call transforms each weight ...
        for _ in range(3):
            np.testing.assert_allclose(fast(x).numpy(), want, rtol=1e-4, atol=1e-4)
    assert len(calls) == len(unit3x3)          # ... and no call after it
