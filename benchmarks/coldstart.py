"""A fresh install's first seconds: training steps finished in a new process's first window.

Usage: python benchmarks/coldstart.py [--cases lenet,gpt] [--repeats 2] [--window 10]
                                      [--libs ember,torch] [--ember-env KEY=VALUE ...]
                                      [--variant NAME=ember,KEY=VALUE,ROOT=other/checkout ...]
                                      [--threads N] [--timeline] [--json results.jsonl]
       python benchmarks/coldstart.py --worker ember|torch --case lenet|gpt   (one process)

Each run is its own process with fresh, empty ``NUMBA_CACHE_DIR`` and ``EMBER_CACHE_DIR`` (a
new install), libraries alternating in order round by round; each library runs with its
defaults (ember: ``EMBER_JIT_COMPILE=background``, its compile process). The window is counted
from the process's start (``/proc``), import included. Cases: ``lenet`` (LeNet-5 28x28, batch
64, SGD momentum: ``train_step.py``'s model and data) and ``gpt`` (``gpt_step.py``'s nanoGPT
step, manual attention, AdamW and gradient clipping).

A worker reports the steps finished in the window, a timeline (steps finished by each whole
second, and the median step time within each second), its CPU seconds, and for ember each
background compile (name, seconds, when it finished, since the process started). The runner
prints one line per process with the machine's load average (a shared host's counts move with
its load: compare libraries run in the same minutes). ``--ember-env`` adds variables to ember's
processes only (``EMBER_JIT_COMPILE=off``: fallbacks only, no compiles). Nothing is asserted.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import _harness as H  # noqa: E402

MARK = "COLDSTART-JSON: "


def make_step(lib, case):
    """One training step of ``case`` for ``lib`` (a callable of no arguments)."""
    if case == "gpt":
        import gpt_step
        return gpt_step.build(lib, "manual")
    import numpy as np
    import train_step
    builder, data = train_step.MODELS["lenet"]
    x, y = data(np.random.default_rng(0))
    make = train_step.ember_step if lib == "ember" else train_step.torch_step
    return make(builder, x, y, "sgd", seeded=True)


def _compiles():
    runtime = sys.modules.get("ember.kernels.runtime.compiler")
    if runtime is None:
        return [], []
    return runtime.background_compiles()


def timeline(ends, window):
    """[(second, steps finished by it, median step ms of the steps ending in it)]."""
    out, prev = [], 0.0
    for s in range(1, int(window) + 1):
        inside = [e for e in ends if s - 1 < e <= s]
        times = []
        last = prev
        for e in inside:
            times.append((e - last) * 1e3)
            last = e
        if inside:
            prev = inside[-1]
        out.append((s, sum(1 for e in ends if e <= s),
                    round(statistics.median(times), 2) if times else None))
    return out


def worker(lib, case, window, cpu_window=0.0):
    start = time.perf_counter() - H.process_age()
    t0 = time.perf_counter()
    if lib == "ember":
        import ember  # noqa: F401
    else:
        import torch  # noqa: F401
    import_s = time.perf_counter() - t0
    step = make_step(lib, case)
    ends, cpu_ends, arrived, seen = [], [], [], 0
    cpu = 0.0
    while True:
        step()
        t = time.perf_counter() - start
        c = time.process_time()
        if c <= cpu_window:
            cpu_ends.append(c)
        done, failed = _compiles()
        if len(done) + len(failed) > seen:
            for name, secs in (done + [(n, None) for n, _ in failed])[seen:]:
                arrived.append((name, secs, round(t, 2)))
            seen = len(done) + len(failed)
        if t > window and c > cpu_window:
            break
        if t <= window:
            ends.append(t)
            cpu = c
    out = {"lib": lib, "case": case, "window_s": window, "steps": len(ends),
           "import_s": round(import_s, 3), "first_step_end_s": ends[0] if ends else None,
           "cpu_s": round(cpu, 2), "timeline": timeline(ends, window),
           "cpu_window_s": cpu_window, "steps_in_cpu_window": len(cpu_ends),
           "first_step_cpu_s": cpu_ends[0] if cpu_ends else None,
           "compiles": arrived, "compile_s": round(sum(s or 0 for _, s, _ in arrived), 2)}
    if lib == "ember":
        from ember.kernels.runtime import compiler
        out["jit_compile"] = compiler.compile_mode()
        out["queued_at_end"] = len(compiler._pending)
    print(MARK + json.dumps(out))


def spawn(lib, case, window, env_extra, timeout, root=ROOT, cpu_window=0.0):
    tmp = tempfile.mkdtemp(prefix="ember-cold-")
    try:
        env = dict(os.environ)
        env.update(env_extra)
        env["NUMBA_CACHE_DIR"] = os.path.join(tmp, "numba")
        env["EMBER_CACHE_DIR"] = os.path.join(tmp, "ember")
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
            env.pop(v, None)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib, "--case", case,
               "--window", str(window), "--cpu-window", str(cpu_window)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout} s"}
        for line in reversed(proc.stdout.splitlines()):
            if line.startswith(MARK):
                return json.loads(line[len(MARK):])
        return {"error": f"exit {proc.returncode}: " + (proc.stderr or proc.stdout)[-600:]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker")
    p.add_argument("--case", default="lenet")
    p.add_argument("--cases", default="lenet,gpt")
    p.add_argument("--libs", default="ember,torch")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--window", type=float, default=10.0)
    p.add_argument("--cpu-window", type=float, default=0.0,
                   help="also count the steps done within this many seconds of the process's "
                        "CPU time (import included; a loaded host's wall window is its load)")
    p.add_argument("--ember-env", action="append", default=[])
    p.add_argument("--variant", action="append", default=[],
                   help="another column: NAME=LIB[,KEY=VALUE...][,ROOT=checkout to import]")
    p.add_argument("--threads", type=int, default=0,
                   help="OMP_NUM_THREADS for every process (both libraries read it)")
    p.add_argument("--timeline", action="store_true", help="print each run's timeline")
    p.add_argument("--json", help="append each run's result here (one JSON line per run)")
    a = p.parse_args()
    if a.worker:
        worker(a.worker, a.case, a.window, a.cpu_window)
        return
    ember_env = dict(kv.split("=", 1) for kv in a.ember_env)
    libs = a.libs.split(",")
    if a.threads:
        os.environ["OMP_NUM_THREADS"] = str(a.threads)
    variants = {lib: (lib, ember_env if lib == "ember" else {}, ROOT) for lib in libs}
    for spec in a.variant:   # NAME=LIB[,KEY=VALUE...][,ROOT=checkout]
        name, rest = spec.split("=", 1)
        lib, *kvs = rest.split(",")
        env = dict(kv.split("=", 1) for kv in kvs)
        variants[name] = (lib, env, os.path.abspath(env.pop("ROOT", ROOT)))
        libs.append(name)
    for case in a.cases.split(","):
        counts = {lib: [] for lib in libs}
        for r in range(a.repeats):
            for lib in (libs if r % 2 == 0 else libs[::-1]):
                load = os.getloadavg()[0]
                kind, env, root = variants[lib]
                res = spawn(kind, case, a.window, env, max(a.window, a.cpu_window) * 12 + 120,
                            root, a.cpu_window)
                res.update(load_1min=round(load, 2), round=r, env=env, variant=lib, root=root)
                if a.json:
                    with open(a.json, "a") as f:
                        f.write(json.dumps(res) + "\n")
                if "error" in res:
                    print(f"{case} {lib} #{r}: {res['error']}")
                    continue
                counts[lib].append(res["steps"] if not a.cpu_window else
                                   (res["steps"], res["steps_in_cpu_window"]))
                comp = (f", compiles {len(res['compiles'])} ({res['compile_s']} s)"
                        if kind == "ember" else "")
                print(f"{case} {lib} #{r}: {res['steps']} steps in {a.window:g} s, import "
                      f"{res['import_s']} s, 1st step done {res['first_step_end_s']}, "
                      f"CPU {res['cpu_s']} s{comp}, load {load:.2f}"
                      + (f"; {res['steps_in_cpu_window']} steps in {a.cpu_window:g} s of CPU, "
                         f"1st at {res['first_step_cpu_s'] and round(res['first_step_cpu_s'], 2)}"
                         if a.cpu_window else ""), flush=True)
                if a.timeline:
                    print("   by second (done, median ms):",
                          " ".join(f"{s}:{n}/{m}" for s, n, m in res["timeline"]))
                    for name, secs, at in res.get("compiles", []):
                        print(f"   compile {name}: {secs and round(secs, 2)} s, done {at} s")
        print(f"{case}: " + "; ".join(f"{lib} {v}" for lib, v in counts.items()), flush=True)


if __name__ == "__main__":
    main()
