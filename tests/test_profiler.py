"""ember.profiler (torch.profiler's API): profile as a context manager and with start/stop/step,
activities, schedule's ProfilerAction sequence against torch's, on_trace_ready, key_averages
tables and Chrome traces, tensorboard_trace_handler. Timings: structure only."""
import json
import os
import subprocess
import sys
import warnings

import pytest

import ember
from ember.autograd import dispatch as _dispatch
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError
from ember.profiler import (ProfilerAction, ProfilerActivity, profile, record_function,
                            schedule, supported_activities, tensorboard_trace_handler)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _mlp_step(x, w1, w2):
    h = (x @ w1).relu()
    return ((h @ w2) @ w2.t()).sum()


def test_the_torch_program_runs_unchanged():
    x, w1 = ember.randn(8, 16), ember.randn(16, 32, requires_grad=True)
    w2 = ember.randn(32, 32, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("model_inference"):
            loss = _mlp_step(x, w1, w2)
        loss.backward()
    avgs = prof.key_averages()
    counts = {a.key: a.count for a in avgs}
    forward = [e.name for e in prof.events() if e.cpu_parent is not None
               and e.cpu_parent.name == "model_inference"]
    assert forward.count("aten::matmul") == 3 and forward.count("aten::relu") == 1
    assert counts["aten::relu"] == 1 and counts["aten::matmul"] > 3   # backward's matmuls
    assert counts["model_inference"] == 1
    assert any(k.startswith("autograd::engine::evaluate_function: ") for k in counts)
    table = avgs.table(sort_by="cpu_time_total", row_limit=10)
    assert "model_inference" in table and "aten::matmul" in table and "# of Calls" in table
    rows = [line for line in table.splitlines()[3:] if line and not line.startswith(("-", "Self"))]
    assert len(rows) == 10
    by_total = sorted(avgs, key=lambda a: a.cpu_time_total, reverse=True)[:10]
    assert [r.split()[0] for r in rows] == [a.key.split()[0] for a in by_total]   # sort_by
    for a in avgs:
        assert a.cpu_time_total >= a.self_cpu_time_total - 1e-9 and a.cpu_time >= 0
    ev = prof.events()
    top = next(e for e in ev if e.name == "model_inference")
    assert top.cpu_time_total >= sum(c.cpu_time_total for c in top.cpu_children)


def test_ember_profiler_is_lazy_and_an_attribute():
    code = ("import sys, ember; assert 'ember.profiler' not in sys.modules; "
            "assert 'ember.autograd.profiler' not in sys.modules; p = ember.profiler; "
            "assert p.profile and sys.modules['ember.profiler'] is p; "
            "assert ember.autograd.profiler.record_function is p.record_function")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr


def test_cuda_activity_warns_and_profiles_the_cpu():
    assert supported_activities() == {ProfilerActivity.CPU}
    x = ember.ones(2)
    for acts in ([ProfilerActivity.CPU, ProfilerActivity.CUDA], [ProfilerActivity.CUDA]):
        with pytest.warns(UserWarning, match="CUDA is not available, disabling CUDA profiling"):
            with profile(activities=acts) as prof:
                x.exp()
        assert [e.name for e in prof.events()] == ["aten::exp"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with profile() as prof:   # default: the supported activities, no warning
            ember.ones(2).exp()


def test_bad_activities():
    with pytest.raises(EmberValueError, match="specified more than once"):
        profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CPU])
    with pytest.raises(EmberValueError, match="no valid profiler activities"):
        profile(activities=[])
    with pytest.raises(EmberTypeError, match="profile: activities holds ProfilerActivity"):
        profile(activities=["cpu"])


def _torch_actions(torch, kwargs, n):
    fn = torch.profiler.schedule(**kwargs)
    return [fn(i).name for i in range(n)]


@pytest.mark.parametrize("kwargs", [
    dict(wait=1, warmup=1, active=2),
    dict(wait=1, warmup=1, active=2, repeat=2),
    dict(wait=0, warmup=2, active=1, repeat=1, skip_first=3),
    dict(wait=2, warmup=1, active=3, repeat=0, skip_first=1),
    dict(wait=5, warmup=1, active=1, repeat=2, skip_first=2, skip_first_wait=1),
    dict(wait=0, warmup=1, active=1),
])
def test_schedule_matches_torch(kwargs):
    torch = pytest.importorskip("torch")
    ours = schedule(**kwargs)
    assert [ours(i).name for i in range(30)] == _torch_actions(torch, kwargs, 30)


def test_schedule_checks_its_arguments():
    with pytest.raises(EmberValueError, match="schedule: invalid arguments"):
        schedule(wait=1, warmup=1, active=0)
    with pytest.raises(EmberValueError, match="schedule: invalid arguments"):
        schedule(wait=-1, warmup=1, active=1)
    with pytest.raises(EmberTypeError, match="schedule: wait must be an int"):
        schedule(wait=1.5, warmup=1, active=1)
    with pytest.warns(UserWarning, match="won't be using warmup"):
        schedule(wait=1, warmup=0, active=1)
    with pytest.raises(EmberValueError, match="step must be non-negative"):
        schedule(wait=1, warmup=1, active=1)(-1)


def _run_steps(lib, n, **kwargs):
    """(step_num at each on_trace_ready, ProfilerStep events in it, add ops in it) for a loop
    of ``n`` steps, each one add."""
    calls = []

    def ready(p):
        names = [e.name for e in p.events()]
        calls.append((p.step_num, names.count("ProfilerStep*"), names.count("aten::add")))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with lib.profiler.profile(schedule=lib.profiler.schedule(**kwargs),
                                  on_trace_ready=ready) as p:
            for i in range(n):
                lib.ones(2) + i
                p.step()
    return calls


@pytest.mark.parametrize("kwargs, n", [
    (dict(wait=1, warmup=1, active=2, repeat=2), 10),
    (dict(wait=0, warmup=1, active=1), 5),
    (dict(wait=1, warmup=1, active=3, repeat=1), 4),   # stops inside the cycle: saved at exit
])
def test_on_trace_ready_and_recorded_steps_match_torch(kwargs, n):
    torch = pytest.importorskip("torch")
    ours = _run_steps(ember, n, **kwargs)
    theirs = _run_steps(torch, n, **kwargs)
    assert ours == theirs and ours


def test_step_without_a_schedule_records_everything():
    with profile() as p:
        for _ in range(3):
            ember.ones(2).neg()
            p.step()
    names = [e.name for e in p.events()]
    assert names.count("aten::neg") == 3 and "ProfilerStep*" not in names


def test_step_ranges_hold_the_step_s_ops():
    with profile(schedule=schedule(wait=0, warmup=1, active=2, repeat=1)) as p:
        for _ in range(4):
            ember.ones(2).neg()
            p.step()
    ev = p.events()
    steps = [e for e in ev if e.name == "ProfilerStep*"]
    assert [e.trace_name for e in steps] == ["ProfilerStep#1", "ProfilerStep#2"]
    assert all(e.cpu_parent.name == "ProfilerStep*" for e in ev if e.name == "aten::neg")


def test_start_stop_and_nothing_outside():
    p = profile()
    x = ember.ones(2)
    x + 1
    p.start()
    x * 2
    p.stop()
    x - 1
    assert [e.name for e in p.events()] == ["aten::mul"]
    assert _dispatch._profile is None
    with pytest.raises(EmberRuntimeError, match="profile.stop: the profiler was not started"):
        p.stop()
    p.start()
    with pytest.raises(EmberRuntimeError, match="profile.start: the profiler is already"):
        p.start()
    p.stop()


def test_results_before_anything_was_recorded():
    p = profile(schedule=schedule(wait=5, warmup=1, active=1))
    with pytest.raises(EmberRuntimeError, match="profile.key_averages: nothing recorded"):
        p.key_averages()
    with p:
        ember.ones(1) + 1   # step 0 waits: nothing records
    with pytest.raises(EmberRuntimeError, match="profile.events: nothing recorded"):
        p.events()


def test_acc_events_keeps_every_cycle():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(schedule=schedule(wait=0, warmup=1, active=1, repeat=3),
                     acc_events=True) as p:
            for _ in range(8):
                ember.ones(2).neg()
                p.step()
    assert [e.name for e in p.events()].count("aten::neg") == 3


def test_export_chrome_trace_atomic_json(tmp_path):
    x = ember.ones(3, 2)
    with profile(record_shapes=True) as prof:
        with record_function("block"):
            x.relu()
    path = tmp_path / "trace.json"
    path.write_text("old")
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    assert data["schemaVersion"] == 1 and data["traceName"] == str(path)
    assert data["record_shapes"] == 1 and data["trace_id"] == prof.get_trace_id()
    spans = {e["name"]: e for e in data["traceEvents"] if e["ph"] == "X"}
    assert set(spans) == {"block", "aten::relu"}
    assert spans["aten::relu"]["args"]["Input Dims"] == [[3, 2]]
    assert os.listdir(tmp_path) == ["trace.json"]


def test_tensorboard_trace_handler_writes_one_file_per_trace(tmp_path):
    out = tmp_path / "logs"
    handler = tensorboard_trace_handler(str(out), worker_name="w0")
    with profile(schedule=schedule(wait=0, warmup=1, active=1, repeat=2),
                 on_trace_ready=handler) as p:
        for _ in range(5):
            ember.ones(2).neg()
            p.step()
    files = sorted(os.listdir(out))
    assert len(files) == 2 and all(f.startswith("w0.") and f.endswith(".pt.trace.json")
                                   for f in files)
    data = json.loads((out / files[0]).read_text())
    assert any(e.get("name") == "aten::neg" for e in data["traceEvents"])
    handler = tensorboard_trace_handler(str(tmp_path / "gz"), use_gzip=True)
    with profile(on_trace_ready=handler):
        ember.ones(2).neg()
    assert os.listdir(tmp_path / "gz")[0].endswith(".pt.trace.json.gz")


def test_a_schedule_must_return_profiler_actions():
    with pytest.raises(EmberTypeError, match="not a ProfilerAction"):
        profile(schedule=lambda step: "record")


def test_autograd_profiler_names():
    from ember.autograd import profiler as ap
    x = ember.ones(2)
    with ap.profile(record_shapes=True) as prof:
        with ap.record_function("x"):
            x.abs()
    assert {e.key for e in prof.key_averages()} == {"x", "aten::abs"}
    assert "aten::abs" in prof.table() and ProfilerAction.RECORD.value == 2
