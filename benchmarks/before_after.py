"""CPU time per step of benchmark cases in two ember trees, in interleaved processes.

For a shared machine, where wall time moves far more than the few percent a before/after check
needs: every selected measurement of a suite's ember worker (the worker processes
``benchmarks/run_all.py``'s suites spawn, listed as ``instructions.py list`` lists them) runs in
its own process per round, tree A then tree B, round after round, and each process reports the
CPU time (``time.process_time``) of fixed windows of N steps. Compare the minima over rounds; the
spread over rounds shows how much the load moved them.

Usage:
  python benchmarks/before_after.py run --a TREE_A --b TREE_B --out FILE.json
         --cases WORKER[:KEY,KEY...] [--cases ...] [--rounds 7] [--window 0.4] [--windows 3]
  python benchmarks/before_after.py table FILE.json

``WORKER`` is a worker's name as ``instructions.py list`` prints it (``conv/ember/r64``);
``KEY``s pick its measurements (substrings of the keys, e.g. ``fwd_bwd`` or ``_64``; default:
all). Each tree runs its own benchmark script (``PYTHONPATH=TREE``, the tree's ``benchmarks/``
first on ``sys.path``) with ``_harness.measure`` replaced, so the step code is the tree's script's:
check that the two scripts' workers time the same thing. Both trees run with one thread
(``EMBER_NUM_THREADS`` / ``OMP`` / ``OPENBLAS`` / ``MKL`` / ``NUMBA_NUM_THREADS`` = 1 and
``ember.set_num_threads(1)``), ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` unset, and private
``NUMBA_CACHE_DIR`` / ``EMBER_CACHE_DIR`` per tree (next to ``FILE``), warmed by one untimed run
of each tree's worker first (which also times a few steps to choose N: the largest count whose
window takes about ``--window`` CPU seconds). ONNX files the workers read are exported once, by
tree A's export worker, and read by both. Inference plans time their convolution modes when
built; to run the same code in both trees, every timed process sets the modes tree A's warm run
chose (``instructions._pin_plans``; each tree's own choices are recorded too).

In a timed process each selected measurement runs until ember queues no background compile,
once more, then ``--windows`` windows of N steps, each after ``gc.collect()``; the round's figure
is the smallest window's CPU seconds / N. ``FILE`` keeps every window, the load average at each
process's start, the trees' commits and the host, and is rewritten after every process.
"""
import argparse
import gc
import json
import os
import platform
import runpy
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _harness as H  # noqa: E402
import instructions as I  # noqa: E402

THREAD_VARS = ("EMBER_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "NUMBA_NUM_THREADS")


def environment(tree, cache):
    """A worker's environment: ``tree`` on the path, one thread, private caches under
    ``cache``."""
    env = dict(os.environ)
    for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONPATH", "NUMBA_CPU_NAME",
              "NUMBA_CPU_FEATURES", "EMBER_CPU_ISA"):
        env.pop(v, None)
    env.update({v: "1" for v in THREAD_VARS})
    env.update(PYTHONPATH=tree, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1",
               NUMBA_CACHE_DIR=os.path.join(cache, "numba"),
               EMBER_CACHE_DIR=os.path.join(cache, "ember"))
    return env


# ----------------------------------------------------------------------------- worker side
def _worker_inner(args):
    """(in the timed process) Run one worker of the tree's suite with ``measure`` replaced."""
    I._tree_benchmarks(args.tree)
    import _harness as H
    import ember
    ember.set_num_threads(1)
    counts = json.loads(args.counts) if args.counts else None   # {index: N}; None: warm run
    pins = json.loads(args.pins) if args.pins else None
    record = open(args.record, "a")
    index = [0]

    def measure(step, who, opts, wait_for_compiles=True):
        I._pin_plans(pins, record if pins is None else None)
        k = index[0]
        index[0] += 1
        if counts is None:
            I.steady(step, who, wait_for_compiles)
            cpu = []
            for _ in range(3):
                t = time.process_time()
                step()
                cpu.append(time.process_time() - t)
            record.write(json.dumps({"index": k, "cpu_s": min(cpu)}) + "\n")
        elif str(k) in counts:
            n = counts[str(k)]
            I.steady(step, who, wait_for_compiles)
            compiles = H._ember_compiles()[0]
            windows = []
            for _ in range(args.windows):
                gc.collect()
                t = time.process_time()
                for _ in range(n):
                    step()
                windows.append((time.process_time() - t) / n)
            record.write(json.dumps({"index": k, "n": n, "windows": windows,
                                     "compiles": H._ember_compiles()[0] - compiles}) + "\n")
        record.flush()
        return {"_instr_index": k, "first": 0.0, "median": 0.0, "min": 0.0, "mean": 0.0,
                "steps": 0, "warmup_steps": 0, "steady": True, "compiles": 0, "compile_s": 0.0,
                "compile_wait_s": 0.0}
    H.measure = measure
    script = os.path.join(args.tree, "benchmarks", args.script)
    sys.argv = [script, "--worker", args.lib, "--case", args.case, "--min-time", "0",
                "--min-steps", "1", "--warmup", "1", "--compile-wait", "600", *args.extra]
    runpy.run_path(script, run_name="__main__")


# ----------------------------------------------------------------------------- driver side
def _process(w, tree, cache, onnx, rec, counts=None, pins=None, windows=3, timeout=1800):
    """Run one worker process; ({index: record}, {index: key}, the worker's result, error)."""
    extra = list(w["extra"])
    if "--onnx-dir" in extra:
        extra[extra.index("--onnx-dir") + 1] = onnx
    if os.path.exists(rec):
        os.remove(rec)
    cmd = [sys.executable, os.path.abspath(__file__), "_worker", "--tree", tree,
           "--script", w["script"], "--lib", w["lib"], "--case", w["case"],
           "--record", rec, "--windows", str(windows), "--extra=" + json.dumps(extra)]
    if counts is not None:
        cmd += ["--counts", json.dumps(counts)]
    if pins:
        cmd += ["--pins", json.dumps(pins)]
    rc, so, se = I._run(cmd, environment(tree, cache), tree, timeout)
    emitted = [ln for ln in so.splitlines() if ln.startswith("BENCH-JSON: ")]
    result = json.loads(emitted[-1][len("BENCH-JSON: "):]) if emitted else {}
    keys = I._keys(result)
    lines = [json.loads(ln) for ln in open(rec)] if os.path.exists(rec) else []
    err = None if rc == 0 and emitted else f"exit {rc}: " + " | ".join(
        se.strip().splitlines()[-3:])
    return lines, keys, result, err


def _pins(lines):
    pins = {}
    for r in lines:
        if "pin" in r:
            pins.setdefault(r["pin"], {}).update({k: v for k, v in r.items() if k != "pin"})
    return pins


def _export(listing, tree, cache, onnx, scripts):
    for e in listing["exports"]:
        done = os.path.join(onnx, f".exported-{e['script']}-{e['case']}")
        if e["script"] not in scripts or os.path.exists(done):
            continue
        extra = list(e["extra"])
        if "--onnx-dir" in extra:
            extra[extra.index("--onnx-dir") + 1] = onnx
        rc, _, se = I._run([sys.executable, os.path.join(tree, "benchmarks", e["script"]),
                            "--worker", "export", "--case", e["case"], *extra],
                           environment(tree, cache), tree, 900)
        if rc != 0:
            raise SystemExit(f"export {e['script']} {e['case']} failed: {se.strip()[-500:]}")
        open(done, "w").close()


def run(args):
    out = os.path.abspath(args.out)
    base = os.path.splitext(out)[0]
    trees = {"a": os.path.abspath(args.a), "b": os.path.abspath(args.b)}
    cache = {t: f"{base}-cache-{t}" for t in trees}
    onnx = f"{base}-onnx"
    os.makedirs(onnx, exist_ok=True)
    wanted = {}
    for c in args.cases:
        name, _, keys = c.partition(":")
        wanted[name] = keys.split(",") if keys else None
    listings = {t: I.list_workers(tree) for t, tree in trees.items()}
    workers = {t: {w["name"]: w for w in listings[t]["workers"]} for t in trees}
    missing = [n for n in wanted if n not in workers["a"] or n not in workers["b"]]
    if missing:
        raise SystemExit(f"not a worker of both trees: {missing}")
    result = {}
    if args.resume and os.path.exists(out):
        with open(out) as f:
            result = json.load(f)
    result.update(trees={t: {"path": p, "commit": I._commit(p)} for t, p in trees.items()},
                  host={"cpu": H.cpuinfo()[0], "cpus": os.cpu_count(), "node": platform.node(),
                        "python": platform.python_version()},
                  method=__doc__.split("\n\n")[1].replace("\n", " "))
    result.setdefault("started", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    result.setdefault("cases", {})
    _export(listings["a"], trees["a"], cache["a"], onnx,
            {workers["a"][n]["script"] for n in wanted})

    def save():
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
        os.replace(tmp, out)

    for name, keys in wanted.items():
        entry = result["cases"].setdefault(name, {})
        if args.resume and entry.get("rounds_done", 0) >= args.rounds:
            continue
        print(f"{name}: warm-up runs", file=sys.stderr, flush=True)
        warm, pins = {}, {}
        for t in trees:
            lines, kmap, res, err = _process(workers[t][name], trees[t], cache[t], onnx,
                                             f"{base}-{t}.jsonl")
            if err:
                entry["error"] = f"warm run of {t}: {err}"
                break
            warm[t] = {kmap.get(r["index"], str(r["index"])): (r["index"], r["cpu_s"])
                       for r in lines if "index" in r}
            pins[t] = _pins(lines)
        if "error" in entry:
            save()
            print("  " + entry["error"], file=sys.stderr, flush=True)
            continue
        sel = [k for k in warm["a"] if k in warm["b"]
               and (keys is None or any(s in k for s in keys))]
        n = {}
        for k in sel:
            cpu = max(warm["a"][k][1], warm["b"][k][1], 1e-6)
            n[k] = max(1, int(args.window / cpu))
        entry.update(keys=sel, n=n, warm_cpu_s={t: {k: warm[t][k][1] for k in sel}
                                                 for t in trees},
                     pins={t: pins[t] for t in trees if pins[t]}, rounds=entry.get("rounds", []))
        for r in range(len(entry["rounds"]), args.rounds):
            rnd = {}
            for t in trees:
                counts = {str(warm[t][k][0]): n[k] for k in sel}
                load = os.getloadavg()[0]
                t0 = time.perf_counter()
                lines, kmap, res, err = _process(workers[t][name], trees[t], cache[t], onnx,
                                                 f"{base}-{t}.jsonl", counts, pins.get("a"),
                                                 args.windows)
                idx = {warm[t][k][0]: k for k in sel}
                rnd[t] = {"load": load, "wall_s": round(time.perf_counter() - t0, 1),
                          "per_step_s": {idx[x["index"]]: min(x["windows"]) for x in lines
                                         if x.get("index") in idx and "windows" in x},
                          "windows": {idx[x["index"]]: x["windows"] for x in lines
                                      if x.get("index") in idx and "windows" in x},
                          "compiles": {idx[x["index"]]: x["compiles"] for x in lines
                                       if x.get("index") in idx and "compiles" in x}}
                if "algorithms" in res:
                    rnd[t]["algorithms"] = res["algorithms"]
                if err:
                    rnd[t]["error"] = err
            entry["rounds"].append(rnd)
            entry["rounds_done"] = len(entry["rounds"])
            result["ended"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            save()
            print(f"  round {r + 1}: " + "; ".join(
                f"{k} {1e3 * rnd['a']['per_step_s'].get(k, float('nan')):.3f} / "
                f"{1e3 * rnd['b']['per_step_s'].get(k, float('nan')):.3f} ms"
                for k in sel), file=sys.stderr, flush=True)
    save()
    print(table(result))


def summary(entry, key):
    """{tree: {"min", "max", "median", "n"}} of a measurement's per-round figures (seconds)."""
    out = {}
    for t in ("a", "b"):
        vals = sorted(r[t]["per_step_s"][key] for r in entry.get("rounds", [])
                      if key in r.get(t, {}).get("per_step_s", {}))
        if vals:
            out[t] = {"min": vals[0], "max": vals[-1], "median": vals[len(vals) // 2],
                      "n": len(vals)}
    return out


def _ms(s):
    ms = s * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def table(result):
    """Markdown: per case, A's and B's minimum (ms per step), B / A, and each tree's spread
    ((max - min) / min over rounds)."""
    ca, cb = result["trees"]["a"]["commit"], result["trees"]["b"]["commit"]
    lines = [f"| case | rounds | N | {ca} min ms | {cb} min ms | {cb} / {ca} | spread {ca} / {cb} |",
             "|---|---|---|---|---|---|---|"]
    for name, entry in result["cases"].items():
        if "error" in entry:
            lines.append(f"| {name} | - | - | - | - | - | {entry['error'][:80]} |")
            continue
        for key in entry["keys"]:
            s = summary(entry, key)
            if "a" not in s or "b" not in s:
                continue
            a, b = s["a"], s["b"]
            ratio = b["min"] / a["min"]
            sa, sb = (a["max"] - a["min"]) / a["min"], (b["max"] - b["min"]) / b["min"]
            cell = f"**{ratio:.3f}**" if ratio > 1.03 else f"{ratio:.3f}"
            lines.append(f"| {name} {key} | {min(a['n'], b['n'])} | {entry['n'][key]} | "
                         f"{_ms(a['min'])} | {_ms(b['min'])} | {cell} | "
                         f"{100 * sa:.1f}% / {100 * sb:.1f}% |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("run", "table", "_worker"))
    ap.add_argument("file", nargs="?", help="(table) a result file")
    ap.add_argument("--a")
    ap.add_argument("--b")
    ap.add_argument("--out")
    ap.add_argument("--cases", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--window", type=float, default=0.4, help="CPU seconds aimed at per window")
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--resume", action="store_true", help="(run) keep cases already in OUT")
    ap.add_argument("--tree")
    ap.add_argument("--script")
    ap.add_argument("--lib")
    ap.add_argument("--case")
    ap.add_argument("--extra", default="[]")
    ap.add_argument("--record")
    ap.add_argument("--counts")
    ap.add_argument("--pins")
    args = ap.parse_args(argv)
    if args.command == "_worker":
        args.extra = json.loads(args.extra)
        _worker_inner(args)
    elif args.command == "run":
        if not (args.a and args.b and args.out and args.cases):
            ap.error("run needs --a, --b, --out and --cases")
        run(args)
    else:
        with open(args.file) as f:
            print(table(json.load(f)))


if __name__ == "__main__":
    main()
