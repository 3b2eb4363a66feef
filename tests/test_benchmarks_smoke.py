"""The benchmark scripts keep working (benchmarks/, run by benchmarks/run_all.py). No timing is
asserted: the tests check the harness's rules (a worker's environment is the caller's, ember's
warm-up waits for its background compiles), that every script's workers run and their results
render into the README's marked tables, and a real ``--quick`` run end to end."""
import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import _harness as H  # noqa: E402
import run_all  # noqa: E402


def tiny():
    opts = H.Options(quick=True, repeats=1, min_time=0.0)
    opts.min_steps, opts.warmup, opts.compile_wait = 1, 0, 30.0
    return opts


def test_spawn_passes_the_callers_environment_unchanged(monkeypatch):
    seen = {}

    class Done:
        returncode = 0
        stdout = H.MARK + json.dumps({"ok": 1}) + "\n"
        stderr = ""

    def fake_run(cmd, env=None, **kw):
        seen["cmd"], seen["env"] = cmd, env
        return Done()
    monkeypatch.setattr(H.subprocess, "run", fake_run)
    out = H.spawn("train_step.py", "torch", "mlp", tiny(), {"EMBER_CPU_ISA": "avx2"})
    assert out["ok"] == 1
    expected = dict(os.environ, EMBER_CPU_ISA="avx2")
    env = dict(seen["env"])
    assert env.pop("PYTHONPATH").split(os.pathsep)[0] == ROOT
    expected.pop("PYTHONPATH", None)
    assert env == expected      # no thread count, wait policy or BLAS variable added
    assert seen["cmd"][2:6] == ["--worker", "torch", "--case", "mlp"]


def test_measure_waits_until_a_step_queues_no_background_compile():
    from ember.kernels.runtime import compiler as R
    done = []
    calls = []
    seen_during_timing = []

    def job(tag):
        def run():
            time.sleep(0.2)
            done.append(tag)
        return run

    def step():
        calls.append(len(done))
        if len(calls) == 1:     # the first call queues a compile ...
            R.submit(("bench-test", 1), "bench-test-1", job(1))
        elif len(calls) == 2:   # ... and the call after it another one (a new specialisation)
            R.submit(("bench-test", 2), "bench-test-2", job(2))
        if threading.current_thread() is threading.main_thread() and len(calls) > 3:
            seen_during_timing.append(len(done))
    res = H.measure(step, "ember", tiny())
    assert done == [1, 2]
    assert res["steady"] is True and res["warmup_steps"] >= 3
    assert calls[1] == 1 and calls[2] == 2      # each step ran after the compiles before it
    assert seen_during_timing and all(n == 2 for n in seen_during_timing)
    assert res["compile_wait_s"] >= 0.3


def _assemble(specs):
    """{case: {column: [worker result]}} from in-process worker runs."""
    out = {}
    for mod, case, libs in specs:
        out[case] = {lib: [mod.worker(lib, case, tiny())] for lib in libs}
    return out


@pytest.mark.slow
def test_every_script_renders_its_readme_table_from_real_worker_results(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    import conv
    import eager_overhead
    import jit
    import networks
    import onnx_export
    import onnx_zoo
    import pointwise
    import train_step
    results = {
        "train_step": _assemble([(train_step, "mlp", ("ember", "torch"))]),
        "networks": _assemble([(networks, "gpt_sdpa", ("ember", "torch"))]),
        "conv": _assemble([(conv, "c3_5x5", ("ember", "torch"))]),
        "pointwise": _assemble([(pointwise, "1e4", ("ember", "torch"))]),
        "eager": _assemble([(eager_overhead, "ops", ("ember", "torch"))]),
        "onnx_export": _assemble([(onnx_export, "export", ("ember",))]),
    }
    results["eager"]["import"] = {"ember": [{"ms": 90.0}], "torch": [{"ms": 1000.0}]}
    cold = dict(results["train_step"]["mlp"]["ember"][0], first_steps=[300.0, 9.0, 8.0, 8.0, 8.0])
    results["train_step"]["lenet_cold"] = {"ember": [cold], "torch": []}
    results["train_step"]["lenet_cold10"] = {
        "ember": [{"steps_in_window": 70, "first_step_end_s": 1.3, "import_ms": 150.0,
                   "compiles_in_window": 7, "compile_s_in_window": 8.5}],
        "torch": [{"steps_in_window": 35, "first_step_end_s": 2.5, "import_ms": 900.0,
                   "compiles_in_window": 0, "compile_s_in_window": 0.0}],
        "ember_prebuilt": [{"steps_in_window": 105, "first_step_end_s": 1.2, "import_ms": 150.0,
                            "compiles_in_window": 0, "compile_s_in_window": 0.0,
                            "prebuild_s": 57.0}]}
    results["networks"]["resnet18"] = {   # its workers run in their own processes (see below)
        lib: [{"infer_1": {"median": m}, "train_8": {"median": 20 * m}, "sample": [1.0, 2.0],
               "loss": [7.0]}] for lib, m in (("ember", 30.0), ("torch", 20.0))}
    onnx_zoo.worker("export", "squeezenet1_1", tiny(), str(tmp_path))
    results["onnx_zoo"] = {"squeezenet1_1": {lib: [onnx_zoo.worker(lib, "squeezenet1_1", tiny(),
                                                                   str(tmp_path))]
                                             for lib in ("ember", "ort")}}
    jit.worker("export", "mlp", tiny(), str(tmp_path))
    results["inference"] = {"mlp": {lib: [jit.worker(lib, "mlp", tiny(), str(tmp_path))]
                                    for lib in ("ember", "torch", "ort")}}
    machine = {"cpu": "test CPU", "host_isa": "avx2", "env": {}, "loadavg_start": [0.0] * 3}
    tables = run_all.render_all({"machine": machine, "results": results})
    for name in ("machine", "eager", "train_step", "first_step", "cold_start", "gpt", "resnet",
                 "conv", "inference", "batch1", "pointwise", "onnx_export", "onnx zoo"):
        assert name in tables
    assert "| yes |" in tables["train_step"]          # the same first loss in both libraries
    assert "| yes |" in tables["gpt"]                 # gpt_step's model, seeded the same
    assert "| ember / torch | 2.00 |" in tables["cold_start"]
    assert "| ember after `ember prebuild` / torch | 3.00 |" in tables["cold_start"]
    assert "its install step: 57 s" in tables["cold_start"]
    assert "| 70 |" in tables["cold_start"] and "| 1.50 |" in tables["resnet"]
    assert tables["onnx zoo"].count("| yes |") == 1   # eager, traced + opt and ORT agree
    assert tables["conv"].count("| yes |") == 1       # the same output
    assert tables["inference"].count("| yes |") == 2  # batch 1 and 64, every variant agrees
    timed = re.compile(r"\| [0-9.]+ (µs|ms|s)( \([0-9.]+-[0-9.]+\))? \|")
    for name in ("eager", "train_step", "first_step", "gpt", "conv", "inference", "batch1",
                 "pointwise", "onnx_export", "onnx zoo"):
        assert timed.search(tables[name]), name
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    new, missing = run_all.update_readme(readme, tables)
    assert missing == []                              # every table has its README markers
    assert tables["train_step"] in new and tables["inference"] in new


@pytest.mark.slow
def test_quick_run_end_to_end_writes_json_and_readme(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.delenv("EMBER_JIT_COMPILE", raising=False)   # workers run ember's default
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- bench:train_step -->\nold\n<!-- /bench -->\n"
                      "<!-- bench:first_step -->\nold\n<!-- /bench -->\nend\n")
    out = tmp_path / "quick.json"
    rc = run_all.main(["--quick", "--only", "train_step", "--json", str(out),
                       "--readme", str(readme)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["machine"]["cpu_count"] >= 1 and data["options"]["quick"] is True
    cold = data["results"]["train_step"]["lenet_cold"]["ember"][0]
    assert cold["cache_dirs"]["NUMBA_CACHE_DIR"] and len(cold["first_steps"]) == 5
    assert cold["info"]["jit_compile"] == "background"
    cold10 = data["results"]["train_step"]["lenet_cold10"]
    for lib in ("ember", "torch"):       # a count, whatever the machine's speed
        r = cold10[lib][0]
        assert r["window_s"] == 10.0 and r["steps_in_window"] >= 0, r
        assert r["cache_dirs"]["EMBER_CACHE_DIR"] and r["loss"]
    text = readme.read_text()
    assert "old" not in text and text.startswith("intro\n") and text.endswith("end\n")
    assert "MLP 784-512-512-10" in text and "| ember |" in text


@pytest.mark.slow
@pytest.mark.parametrize("lib", ["ember", "torch"])
def test_resnet_worker_runs_torchvisions_definition_in_its_own_process(lib):
    """networks.py's ResNet rows: the torchvision stand-in, on ember through the import-torch
    alias (which is why its workers are never run inside this test process)."""
    pytest.importorskip("torch")
    import networks
    out = H.spawn("networks.py", lib, "resnet18", tiny())
    assert "error" not in out, out
    assert out["info"]["version"] and len(out["sample"]) == 8 and out["loss"]
    assert out["infer_1"]["steps"] >= 1 and out["train_8"]["steps"] >= 1
    assert networks.TRAIN_BATCH == 8


@pytest.mark.slow
def test_gpt_table_reports_the_step_through_ember_compile_against_torch_compile():
    """networks.py's GPT row: the whole step through ``ember.compile`` (its first three calls
    reported: the eager call, the trace and compile, the check), beside torch eager and
    ``torch.compile`` (a made-up result here: Inductor compiles for about a minute)."""
    pytest.importorskip("torch")
    import networks
    assert networks.COMPILED_CASES == ("gpt_manual",)
    res = {"gpt_manual": {"ember_compiled": [networks.worker("ember_compiled", "gpt_manual",
                                                             tiny())]}}
    out = res["gpt_manual"]["ember_compiled"][0]
    assert len(out["first_calls"]) == 3 and out["train"]["steps"] >= 1
    loss = out["loss"][0]
    res["gpt_manual"].update({
        "ember": [{"train": {"median": 60.0, "first": 800.0}, "loss": [loss]}],
        "torch": [{"train": {"median": 50.0, "first": 90.0}, "loss": [loss]}],
        "torch_compiled": [{"train": {"median": 40.0}, "first_calls": [60000.0, 45.0, 41.0],
                            "loss": [loss]}]})
    table = networks.render(res)["gpt"]
    row = table.splitlines()[-1]
    compiled = out["train"]["median"]
    assert "| ember.compile | ratio to torch | torch.compile |" in table
    assert f"| {H.ratio(H.spread([compiled]), H.spread([50.0]))} |" in row
    assert f"| {H.ratio(H.spread([compiled]), H.spread([40.0]))} |" in row
    assert "| 60 s / 45 ms |" in row and row.endswith("| yes |")


def test_op_scan_times_each_op_in_both_libraries_and_lists_the_slowest_first():
    """op_scan.py: a case's worker runs the op (and its backward) on each library; the table
    sorts by ember / torch."""
    pytest.importorskip("torch")
    import op_scan
    res = {c: {lib: [op_scan.worker(lib, c, tiny())] for lib in ("ember", "torch")}
           for c in ("pad_reflect", "gather")}
    for c in res:
        assert all(r[0]["steps"] >= 1 and r[0]["median"] > 0 for r in res[c].values())
    res["pad_reflect"]["ember"][0]["median"] = 100 * res["pad_reflect"]["torch"][0]["median"]
    table = op_scan.render(res)["op_scan"]
    assert table.index("`pad_reflect`") < table.index("`gather`") and "| 100.00 |" in table


@pytest.mark.slow
def test_programs_workers_run_karpathys_makemore_on_both_libraries_from_one_start():
    """programs.py: makemore's own Transformer and loop body, ember through the import-torch
    alias (in its own process), torch beside it: the same first loss, rendered as a row."""
    pytest.importorskip("torch")
    import programs
    res = {"makemore": {lib: [H.spawn("programs.py", lib, "makemore", tiny())]
                        for lib in ("ember", "torch")}}
    for lib, (out,) in res["makemore"].items():
        assert "error" not in out, out
        assert out["train"]["steps"] >= 1 and out["loss"][0] > 0
    assert abs(res["makemore"]["ember"][0]["loss"][0] - res["makemore"]["torch"][0]["loss"][0]) < 1e-4
    table = programs.render(res)["programs"]
    assert "makemore" in table and table.count("| yes |") == 1


@pytest.mark.slow
def test_op_profile_prints_onnxruntimes_operators_and_embers_kernels(tmp_path):
    """op_profile.py: the model exported, then onnxruntime's per-operator profile and cProfile of
    ember's plan, each side in its own process; a bad case names the forms it takes."""
    pytest.importorskip("onnxruntime")
    script = os.path.join(ROOT, "benchmarks", "op_profile.py")
    p = subprocess.run([sys.executable, script, "--case", "jit:mlp", "--calls", "5", "--top", "3"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "onnxruntime: median call" in p.stdout and "FusedGemm" in p.stdout
    assert "ember traced + opt: median call" in p.stdout and "us a call (" in p.stdout
    assert list(tmp_path.iterdir()) == []           # onnxruntime's profile file written elsewhere
    bad = subprocess.run([sys.executable, script, "--case", "mlp"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0 and "jit:NAME or zoo:NAME" in bad.stderr


def test_machine_record_names_vendor_isa_and_the_openblas_variables(monkeypatch):
    monkeypatch.setattr(H.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(
        H.subprocess.TimeoutExpired("probe", 1)))       # no library probes here
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "1048576")
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    m = H.machine_info()
    assert m["vendor"] and m["cpu"]
    assert m["openblas_set"] == {"OPENBLAS_CORETYPE": False, "OPENBLAS_L2_SIZE": True}
    m.update(host_isa="avx512", ember_isa="avx2")
    line = H.machine_line(m)
    assert f"vendor {m['vendor']}" in line and "AVX-512 as ember detects it" in line
    assert "kernels built for avx2" in line and "`OPENBLAS_L2_SIZE=1048576`" in line


def test_cold_window_counts_only_the_steps_finished_within_the_window(monkeypatch):
    import train_step
    clock = [100.0]
    monkeypatch.setattr(train_step.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(train_step.H, "process_age", lambda: 2.0)    # started 2 s ago

    # the background compiles this process ran (the suite's own, on a cold cache): reported
    monkeypatch.setattr(H, "_ember_compiles", lambda: (4, 1.5))

    def step():
        clock[0] += 3.0        # steps end 5, 8 and 11 s after the process started
    out = train_step.cold_window(step, "torch")
    assert out["steps_in_window"] == 2 and out["first_step_end_s"] == 5.0
    assert (out["compiles_in_window"], out["compile_s_in_window"]) == (4, 1.5)


def test_cold_start_table_says_when_torch_finished_no_step_in_the_window():
    import train_step
    res = {"lenet_cold10": {lib: [{"steps_in_window": n, "first_step_end_s": None,
                                   "import_ms": 100.0, "compiles_in_window": 0,
                                   "compile_s_in_window": 0.0}]
                            for lib, n in (("ember", 60), ("torch", 0))}}
    table = train_step.render(res)["cold_start"]
    assert "| ember / torch | torch finished none |" in table and "| 0 |" in table


def test_process_age_is_the_time_since_this_process_started():
    """A fresh interpreter is seconds old, not the machine's uptime; this process is at least as
    old as the time since _harness was imported (less /proc's 10 ms tick)."""
    assert H.process_age() >= time.perf_counter() - H._IMPORTED - 0.02
    p = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'benchmarks'); "
                        "import _harness; print(_harness.process_age())"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    age = float(p.stdout.strip().splitlines()[-1])
    assert 0.0 <= age < 60.0, p.stderr


def test_readme_sections_with_empty_bodies_are_filled_each_on_its_own():
    """An empty section (a new marker pair) must not swallow the next one (it did: the body
    matched across to the next section's closing marker)."""
    text = "a\n<!-- bench:x -->\n<!-- /bench -->\n\n<!-- bench:y -->\nold\n<!-- /bench -->\n"
    new, missing = run_all.update_readme(text, {"x": "X", "y": "Y"})
    assert new == "a\n<!-- bench:x -->\nX\n<!-- /bench -->\n\n<!-- bench:y -->\nY\n<!-- /bench -->\n"
    assert missing == []


@pytest.mark.parametrize("script", ["conv.py", "train_step.py", "jit.py", "onnx_import.py",
                                    "networks.py", "onnx_zoo.py", "programs.py", "op_scan.py"])
def test_unknown_only_case_stops_before_measuring_and_names_the_known_ones(script):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script), "--only", "no_such_case"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "unknown case(s) no_such_case; known: " in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
