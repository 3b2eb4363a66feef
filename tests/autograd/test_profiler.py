"""The recorder behind ember.profiler (ember/autograd/profiler.py): op ranges from dispatch,
backward nodes from the engine, record_function ranges, their nesting and self times, averages,
tables and Chrome traces. Timings are checked for structure only (>= 0, parent >= children)."""
import json
import threading

import numpy as np
import pytest

import ember
from ember.autograd import dispatch as _dispatch
from ember.autograd import engine as _engine
from ember.autograd import profiler as P
from ember.errors import EmberRuntimeError, EmberValueError


def _names(events):
    return [e.name for e in events]


def _count(events, name):
    return sum(e.name == name for e in events)


def _model_step(x, w):
    h = (x @ w).relu()
    h = h @ w
    return h @ w


def test_ops_are_recorded_with_their_counts():
    x, w = ember.randn(3, 4), ember.randn(4, 4)
    with P.profile() as prof:
        _model_step(x, w)
    ev = prof.function_events
    assert _count(ev, "aten::matmul") == 3 and _count(ev, "aten::relu") == 1
    avg = {a.key: a for a in prof.key_averages()}
    assert avg["aten::matmul"].count == 3 and avg["aten::relu"].count == 1
    for e in ev:
        assert e.cpu_time_total >= 0 and e.self_cpu_time_total >= 0
        assert e.time_range.end >= e.time_range.start >= 0


def test_nothing_is_recorded_outside_the_profiler_and_hooks_are_removed():
    x = ember.randn(3, 3)
    x + x
    with P.profile() as prof:
        x * x
    x - x
    assert _names(prof.function_events) == ["aten::mul"]
    assert _dispatch._profile is None and _engine._profile is None and not P.is_recording()


def test_the_hooks_are_removed_when_the_block_raises():
    with pytest.raises(ValueError):
        with P.profile():
            ember.ones(2) + 1
            raise ValueError("boom")
    assert _dispatch._profile is None and _engine._profile is None


def test_record_function_nesting_and_self_time():
    x = ember.randn(4, 4)
    with P.profile() as prof:
        with P.record_function("outer"):
            x + x
            with P.record_function("inner"):
                x @ x
                x.relu()
    ev = {e.name: e for e in prof.function_events}
    outer, inner = ev["outer"], ev["inner"]
    assert inner.cpu_parent is outer and ev["aten::matmul"].cpu_parent is inner
    assert [c.name for c in outer.cpu_children] == ["aten::add", "inner"]
    assert [c.name for c in inner.cpu_children] == ["aten::matmul", "aten::relu"]
    for parent in (outer, inner):
        kids = sum(c.cpu_time_total for c in parent.cpu_children)
        assert parent.cpu_time_total >= kids
        assert parent.self_cpu_time_total == pytest.approx(parent.cpu_time_total - kids)
        for c in parent.cpu_children:
            assert c.time_range.start >= parent.time_range.start
            assert c.time_range.end <= parent.time_range.end
    assert outer.is_user_annotation and not ev["aten::add"].is_user_annotation


def test_record_function_as_a_decorator_and_outside_a_profiler():
    @P.record_function("block")
    def f(t):
        return t * 2

    with P.record_function("ignored"):
        f(ember.ones(2))   # nothing records: no error, no state left behind
    with P.profile() as prof:
        f(ember.ones(2))
        f(ember.ones(2))
    ev = prof.function_events
    assert _count(ev, "block") == 2 and "ignored" not in _names(ev)
    assert all(e.cpu_parent.name == "block" for e in ev if e.name == "aten::mul")


def test_backward_nodes_are_recorded_with_their_ops_inside():
    a = ember.randn(3, 3, requires_grad=True)
    b = ember.randn(3, 3)
    with P.profile() as prof:
        (a * b).sum().backward()
    names = _names(prof.function_events)
    assert "autograd::engine::evaluate_function: MulBackward0" in names
    assert "autograd::engine::evaluate_function: SumBackward0" in names
    assert "autograd::engine::evaluate_function: AccumulateGrad" in names
    node = next(e for e in prof.function_events if e.name.endswith("MulBackward0"))
    assert node.cpu_children and all(c.name.startswith("aten::") for c in node.cpu_children)
    assert node.scope == 1


def test_in_place_ops_are_named_with_an_underscore():
    x = ember.zeros(4)
    with P.profile() as prof:
        x.add_(1)
        x.mul_(ember.ones(4))
    names = _names(prof.function_events)
    assert "aten::add_" in names and "aten::mul_" in names


def test_record_shapes_and_group_by_input_shape():
    a, b = ember.randn(2, 3), ember.randn(5, 3)
    with P.profile(record_shapes=True) as prof:
        a.relu()
        a.relu()
        b.relu()
    ev = [e for e in prof.function_events if e.name == "aten::relu"]
    assert [e.input_shapes for e in ev] == [[[2, 3]], [[2, 3]], [[5, 3]]]
    plain = [k for k in prof.key_averages() if k.key == "aten::relu"]
    assert len(plain) == 1 and plain[0].count == 3 and plain[0].input_shapes == ""
    grouped = {str(k.input_shapes): k.count for k in prof.key_averages(group_by_input_shape=True)
               if k.key == "aten::relu"}
    assert grouped == {"[[2, 3]]": 2, "[[5, 3]]": 1}
    table = prof.key_averages(group_by_input_shape=True).table()
    assert "Input Shapes" in table and "[[5, 3]]" in table
    assert "Input Shapes" not in prof.key_averages().table()


def test_shapes_are_not_recorded_unless_asked():
    with P.profile() as prof:
        ember.ones(2, 2).relu()
    assert all(e.input_shapes == [] for e in prof.function_events)


def test_key_averages_sums_times_and_counts():
    x = ember.randn(8, 8)
    with P.profile() as prof:
        for _ in range(4):
            x.tanh()
    evs = [e for e in prof.function_events if e.name == "aten::tanh"]
    avg = next(a for a in prof.key_averages() if a.key == "aten::tanh")
    assert avg.count == 4
    assert avg.cpu_time_total == pytest.approx(sum(e.cpu_time_total for e in evs))
    assert avg.self_cpu_time_total == pytest.approx(sum(e.self_cpu_time_total for e in evs))
    assert avg.cpu_time == pytest.approx(avg.cpu_time_total / 4)
    total = prof.key_averages().total_average()
    assert total.key == "Total" and total.count == len(prof.function_events)


def test_table_columns_sorting_and_row_limit():
    x = ember.randn(16, 16)
    with P.profile() as prof:
        for _ in range(3):
            x @ x
        x.relu()
        x.sum()
    avgs = prof.key_averages()
    table = avgs.table(sort_by="count", row_limit=2)
    for col in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                "# of Calls", "Self CPU time total:"):
        assert col in table
    rows = [line for line in table.splitlines() if "aten::" in line]
    assert len(rows) == 2 and rows[0].split()[0] == "aten::matmul"
    assert rows[0].split()[-1] == "3"
    full = avgs.table(sort_by="cpu_time_total", row_limit=-1)
    rows = [line for line in full.splitlines() if "aten::" in line]
    assert {r.split()[0] for r in rows} == {"aten::matmul", "aten::relu", "aten::sum"}
    by_total = sorted(avgs, key=lambda a: a.cpu_time_total, reverse=True)
    assert [r.split()[0] for r in rows] == [a.key for a in by_total]
    assert "ms" in avgs.table(time_unit="ms") and avgs.table(row_limit=0).count("aten::") == 0
    assert "This report only display top-level" in avgs.table(top_level_events_only=True)
    assert P.EventList().table() == ""
    with pytest.raises(EmberValueError, match="table: unknown sort_by 'nope'"):
        avgs.table(sort_by="nope")


def test_long_names_are_cut_to_the_name_column():
    with P.profile() as prof:
        with P.record_function("x" * 80):
            pass
    line = next(line for line in prof.key_averages().table().splitlines() if "xxx" in line)
    assert "x" * 52 + "..." in line and "x" * 53 not in line


def test_chrome_trace_is_json_with_the_events(tmp_path):
    x = ember.randn(4, 4, requires_grad=True)
    with P.profile(record_shapes=True) as prof:
        with P.record_function("fwd"):
            y = (x @ x).sum()
        y.backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(prof.function_events)
    by_name = {e["name"]: e for e in spans}
    assert by_name["fwd"]["cat"] == "user_annotation"
    assert by_name["aten::matmul"]["cat"] == "cpu_op"
    assert by_name["aten::matmul"]["args"]["Input Dims"] == [[4, 4], [4, 4]]
    assert any(n.startswith("autograd::engine::evaluate_function") for n in by_name)
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
    assert not [p for p in tmp_path.iterdir() if p.name != "trace.json"]   # no temp file left


def test_chrome_trace_gz_and_event_list_export(tmp_path):
    import gzip
    with P.profile() as prof:
        ember.ones(3).exp()
    prof.export_chrome_trace(str(tmp_path / "t.json.gz"))
    data = json.loads(gzip.decompress((tmp_path / "t.json.gz").read_bytes()))
    assert any(e.get("name") == "aten::exp" for e in data["traceEvents"])
    prof.function_events.export_chrome_trace(tmp_path / "list.json")
    assert json.loads((tmp_path / "list.json").read_text())["traceEvents"]


def test_results_are_refused_while_recording_and_before_any():
    prof = P.profile()
    with pytest.raises(EmberRuntimeError, match="profile.key_averages: nothing recorded"):
        prof.key_averages()
    with prof:
        with pytest.raises(EmberRuntimeError, match="profile.table: the profiler is still "
                                                    "recording"):
            prof.table()


def test_one_profiler_at_a_time():
    with P.profile():
        with pytest.raises(EmberRuntimeError, match="another profiler is already recording"):
            with P.profile():
                pass
    with P.profile() as again:   # the first one's exit freed the hook
        ember.ones(1) + 1
    assert "aten::add" in _names(again.function_events)


def test_not_reentrant_and_disabled_profile():
    prof = P.profile()
    with prof:
        with pytest.raises(EmberRuntimeError, match="not reentrant"):
            prof.__enter__()
    with P.profile(enabled=False) as off:
        ember.ones(1) + 1
    assert len(off.function_events) == 0 and _dispatch._profile is None


def test_an_op_that_raises_leaves_a_consistent_tree():
    x = ember.ones(2, 3)
    with P.profile() as prof:
        with P.record_function("outer"):
            with pytest.raises(EmberRuntimeError):
                x @ x
            x + 1
    ev = {e.name: e for e in prof.function_events}
    assert ev["aten::add"].cpu_parent is ev["outer"]
    assert ev["aten::matmul"].cpu_parent is ev["outer"]


def test_ops_on_other_threads_are_recorded_with_their_own_nesting():
    def work():
        with P.record_function("worker"):
            ember.ones(3).sin()

    with P.profile() as prof:
        with P.record_function("main"):
            t = threading.Thread(target=work)
            t.start()
            t.join()
            ember.ones(3).cos()
    ev = {e.name: e for e in prof.function_events}
    assert ev["aten::sin"].cpu_parent is ev["worker"] and ev["worker"].cpu_parent is None
    assert ev["aten::cos"].cpu_parent is ev["main"]
    assert ev["worker"].thread != ev["main"].thread


def test_profile_memory_counts_output_bytes():
    x = ember.zeros(10, 10)   # float32: 400 bytes a result
    with P.profile(profile_memory=True) as prof:
        with P.record_function("block"):
            x + 1
            x.view(100)
    ev = {e.name: e for e in prof.function_events}
    assert ev["aten::add"].cpu_memory_usage == 400
    assert ev["block"].cpu_memory_usage == 400 and ev["block"].self_cpu_memory_usage == 0
    table = prof.key_averages().table()
    assert "CPU Mem" in table and "Self CPU Mem" in table


def test_with_flops_estimates_matmul():
    a, b = ember.randn(2, 3), ember.randn(3, 5)
    with P.profile(with_flops=True) as prof:
        a @ b
        a.relu()
    ev = {e.name: e for e in prof.function_events}
    assert ev["aten::matmul"].flops == 2 * 2 * 3 * 5 and ev["aten::relu"].flops == 0
    assert "FLOPs" in prof.key_averages().table()


def test_with_flops_estimates_linear_and_conv2d():
    import ember.nn.functional as F
    x, w = ember.randn(1, 2, 5, 5), ember.randn(3, 2, 3, 3)
    a, lw = ember.randn(4, 6), ember.randn(7, 6)
    with P.profile(with_flops=True) as prof:
        F.conv2d(x, w)
        F.linear(a, lw)
        F.linear(a, lw)
    flops = {k.key: k.flops for k in prof.key_averages()}
    # 2 x output elements x (in channels x kernel) ; 2 x output elements x in features, twice
    assert flops == {"aten::conv2d": 2 * (3 * 3 * 3) * (2 * 3 * 3),
                     "aten::linear": 2 * 2 * (4 * 7) * 6}


def test_with_stack_records_the_callers_frames(tmp_path):
    with P.profile(with_stack=True) as prof:
        ember.ones(2).neg()
    ev = next(e for e in prof.function_events if e.name == "aten::neg")
    assert ev.stack and __file__ in ev.stack[0] and "test_with_stack" in ev.stack[0]
    assert all("/ember/" not in s.split("(")[0] or "/tests/" in s for s in ev.stack)
    assert "Source Location" in prof.key_averages(group_by_stack_n=1).table()
    prof.export_stacks(str(tmp_path / "stacks.txt"))
    assert (tmp_path / "stacks.txt").exists()


def test_numbers_match_numpy_while_profiling():
    x = np.random.default_rng(0).random((3, 3)).astype(np.float32)
    t = ember.from_numpy(x.copy()).requires_grad_()
    with P.profile():
        y = (t * t).sum()
        y.backward()
    np.testing.assert_allclose(t.grad.numpy(), 2 * x, rtol=1e-6)
