"""Instructions per iteration of the benchmark cases, counted by valgrind's callgrind.

Wall-clock figures on a shared machine move far more than a few percent between runs; the number
of instructions a step executes does not. This tool runs the ember side of the benchmark suites'
own workers (``benchmarks/run_all.py`` SUITES: each suite's ``collect`` is called with the
process spawner replaced by a recorder, so the cases are exactly the suite's) under
``valgrind --tool=callgrind`` and reports, for every ``_harness.measure`` call of a worker,
instructions per iteration = (I(2N) - I(N)) / N, where I(k) is the count of k back-to-back
calls of the step (a callgrind client request zeroes the counters before and dumps them after
each window; the difference removes the request's own cost). A first window of N steps comes
before those two and is not used: Python 3.11's re-specialising interpreter and the collector's
first full pass after the freeze below land in it (without it, the first window of a 4x4 add
read 2.4 M instructions more than the next one, and the difference came out negative). The
2N window alone, I(2N) / 2N, is kept too (``per_iter_2n``): it agreed within 0.3% between
separate runs where the difference did not.

Usage:
  python benchmarks/instructions.py list [--tree DIR] [--suites eager,conv]
  python benchmarks/instructions.py run  [--tree DIR] [--suites ...] [--cases SUBSTR,...]
                                         [--keys SUBSTR,...] [--out DIR] [--plan OTHER.json]
                                         [--timeout S] [--resume]
  python benchmarks/instructions.py table BEFORE.json [MID.json ...] HEAD.json
  python benchmarks/instructions.py calls --tree DIR --worker eager/ember/ops --key add
                                         [--against OTHER_DIR] [-n 10]

``--tree``: a checkout of ember (default: this one); its own ``benchmarks/`` scripts and its
``ember`` package are used (``PYTHONPATH=DIR``), so one copy of this file measures any revision
whose suites have ``collect`` and ``_harness.measure``. ``run`` writes ``OUT/instructions.json``
({worker: {measurement: {"n", "per_iter", "I_n", "I_2n"}}}, plus workers that could not run and
why) and keeps callgrind's dumps (``OUT/<worker>/cg.out.*``: ``callgrind_annotate`` them to see
where the instructions go). ``--plan``: take each measurement's N from an earlier result, so
that every tree runs the same counts. ``--keys``: count only the measurements whose key contains
one of the substrings (the others do not run under callgrind; with ``--resume`` the worker's
earlier counts are kept), for workers whose measurements together pass the timeout. ``table``:
a markdown table of instructions per iteration and the ratios to the first file. ``calls``:
Python function calls per iteration of one measurement (cProfile, natively; with
``--against``, the functions whose counts differ between two trees), because callgrind's
profile names C functions only.

Each worker process first runs natively (warming private ``NUMBA_CACHE_DIR`` /
``EMBER_CACHE_DIR`` under ``OUT``, exporting the ONNX files the ONNX suites read, and timing
each step to choose N), then under callgrind with ``--smc-check=all-non-file``. Both runs set
``NUMBA_CPU_NAME=haswell`` and ``EMBER_CPU_ISA=avx2`` (valgrind shows LLVM a Haswell-class CPU
without AVX-512, so the valgrind run then loads the native run's compiled kernels instead of
compiling), one thread everywhere (``EMBER_NUM_THREADS``,
``OMP``/``OPENBLAS``/``MKL``/``NUMBA_NUM_THREADS`` = 1) and ``PYTHONHASHSEED=0``. Before the
counted windows the step runs until ember queues no background compile, then once more, and the
garbage collector's generations are collected and frozen (``gc.freeze``); each window starts
after a ``gc.collect()``. Inference plans (``ember.jit.plan``) choose each convolution's mode
and their thread setting by timing, so the same tree counted twice could run different code:
the native run records every plan's final choices (``pins_native`` in the result), and the
valgrind run sets those choices instead of timing (``_pin_plans``; the 100th run's retune
too); with ``--plan`` the other result's ``pins`` are used, so both trees run the same modes.
An ONNX export runs only for a selected worker's script, once per ``OUT``. Cases run with
fresh caches (the cold-start rows), torch, onnxruntime and ``import`` times are not iteration
counts and are left out.

What instruction counts do not show: cache misses, memory bandwidth and page faults (a change
that moves more memory, or allocates more, at the same instruction count looks free here);
branch mispredictions and instruction-level parallelism (SIMD width is fixed at AVX2, and
valgrind executes some vector instructions differently from the hardware); threads (everything
runs on one, so thread-pool overheads and parallel speed-ups are absent); and system time
spent in the kernel. A ratio near 1 says the code path costs the same; it does not prove the
wall time is.
"""
import argparse
import glob
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SLOWDOWN = 1000         # callgrind's rough slowdown on this code, to choose N from native time
WINDOW_S = 30.0        # aimed-for valgrind seconds of the 3N counted steps of one measurement
NICE = (1, 2, 3, 5, 10, 20, 30, 50)
# the features LLVM reports under valgrind 3.19 on x86-64 (a Haswell-class CPU): Numba's cache
# key holds the CPU name and features, so both runs name these and the valgrind run hits the
# native run's cache (NUMBA_CPU_NAME alone leaves the host's features in the key)
FEATURES = ("+64bit,+aes,+avx,+avx2,+bmi,+bmi2,+cmov,+crc32,+cx16,+cx8,+f16c,+fma,+fxsr,"
            "+invpcid,+lzcnt,+mmx,+movbe,+pclmul,+popcnt,+rdrnd,+rdseed,+sahf,+sse,+sse2,+sse3,"
            "+sse4.1,+sse4.2,+ssse3,+xsave")
SHIM = r"""
#include <valgrind/callgrind.h>
void instr_zero(void) { CALLGRIND_ZERO_STATS; }
void instr_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
"""


# ----------------------------------------------------------------------------- environment
def environment(tree, out):
    """The environment of both runs of a worker of ``tree`` (see the module docstring)."""
    env = dict(os.environ)
    for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONPATH"):
        env.pop(v, None)
    env.update(PYTHONPATH=tree, PYTHONHASHSEED="0", NUMBA_CPU_NAME="haswell",
               NUMBA_CPU_FEATURES=FEATURES,
               EMBER_CPU_ISA="avx2", NUMBA_CACHE_DIR=os.path.join(out, "cache", "numba"),
               EMBER_CACHE_DIR=os.path.join(out, "cache", "ember"), EMBER_NUM_THREADS="1",
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               NUMBA_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def shim_library(out):
    """Path of the compiled client-request shim (built on first need under ``out``)."""
    path = os.path.join(out, "libinstr_shim.so")
    if not os.path.exists(path):
        src = os.path.join(out, "instr_shim.c")
        with open(src, "w") as f:
            f.write(SHIM)
        subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", path, src], check=True)
    return path


def _tree_benchmarks(tree):
    """Put ``tree``'s benchmarks first on sys.path (and this file's folder off it), and forget
    the benchmark modules already imported from this folder (``_harness``), so that an import
    gets ``tree``'s."""
    bench = os.path.join(tree, "benchmarks")
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if f and name not in ("instructions", "__main__") and \
                os.path.dirname(os.path.abspath(f)) == HERE:
            del sys.modules[name]
    sys.path.insert(0, bench)
    sys.path.insert(1, tree)
    return bench


# ----------------------------------------------------------------------------- listing
def _list_inner(tree, suites):
    """(in a process of its own) The worker processes each suite's ``collect`` would spawn."""
    _tree_benchmarks(tree)
    import _harness as H
    import run_all
    spawned = []

    def record(script, lib, case, opts, env_extra=None, extra_args=()):
        spawned.append({"suite": current[0], "script": script, "lib": lib, "case": case,
                        "env": dict(env_extra or {}), "extra": list(extra_args)})
        if lib == "export":   # an export "succeeded": the cases that read it are planned
            return {"lib": lib, "case": case, "exported": "listed, not run"}
        return {"error": "listed, not run", "lib": lib, "case": case}
    H.spawn = record
    current = [None]
    out = {"suites": [], "errors": {}}
    for name, mod in run_all.SUITES:
        if suites and name not in suites:
            continue
        current[0] = name
        out["suites"].append(name)
        if hasattr(mod, "import_times"):
            mod.import_times = lambda m, runs: []
        opts = H.Options(quick=False, repeats=1)
        try:
            import inspect
            if "machine" in inspect.signature(mod.collect).parameters:
                mod.collect(opts, {"host_isa": "avx2"}, None)
            else:
                mod.collect(opts, log=None)
        except Exception as e:   # collect's post-processing of the placeholder results
            out["errors"][name] = f"{type(e).__name__}: {e}"
    out["spawned"] = spawned
    print("INSTR-JSON: " + json.dumps(out))


def list_workers(tree, suites=None):
    """{"suites", "workers" (ember workers to count), "exports" (ONNX files they read),
    "skipped" ((worker, reason))} of ``tree``."""
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "_list", "--tree", tree]
                          + (["--suites", ",".join(suites)] if suites else []),
                          capture_output=True, text=True, cwd=tree,
                          env=environment(tree, tempfile.gettempdir()), timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("INSTR-JSON: ")]
    if not lines:
        raise RuntimeError(f"listing {tree} failed: {proc.stderr.strip()[-2000:]}")
    data = json.loads(lines[-1][len("INSTR-JSON: "):])
    workers, exports, skipped, seen = [], [], [], set()
    for s in data["spawned"]:
        name = f"{s['suite']}/{s['lib']}/{s['case']}"
        if s["lib"] == "export":
            exports.append(s)
        elif not s["lib"].startswith("ember"):
            continue
        elif "NUMBA_CACHE_DIR" in s["env"] or "EMBER_CACHE_DIR" in s["env"]:
            skipped.append((name, "fresh caches: a cold-start row, not an iteration count"))
        elif s["env"]:
            skipped.append((name, f"column with {s['env']}: the same code under callgrind"))
        elif name not in seen:
            seen.add(name)
            workers.append(dict(s, name=name))
    return {"suites": data["suites"], "workers": workers, "exports": exports,
            "skipped": skipped, "errors": data["errors"]}


# ----------------------------------------------------------------------------- worker side
def _pin_plans(pins, record):
    """Make inference plans' timed choices repeatable (``ember.jit.plan.InferencePlan``):
    natively each plan tunes as usual and its choices (every convolution step's mode after
    ``autotune``, the thread setting after ``tune_threads``; the last call's win) are written to
    ``record`` under the plan's key (its input shapes and how many plans of those shapes came
    before); with ``pins`` ({key: {"modes", "threads"}}) ``autotune`` and ``tune_threads`` set
    the pinned choices without timing anything (the ``RETUNE_AFTER``-th run's retune too), and a
    plan whose key or steps the pins do not match raises (the traced call then takes its
    eager fallback: a count far above the pinned tree's is the sign). Pins with one mode per
    convolution step, from a revision whose linear steps were not tuned, set the convolution
    steps and leave the linear steps at the mode they are built with ("gemm", which such a
    revision ran)."""
    try:
        import ember.jit.plan as P
    except ImportError:
        return
    cls = P.InferencePlan
    if getattr(cls, "_instr_pinned", False):
        return
    cls._instr_pinned = True
    init, autotune, tune_threads = cls.__init__, cls.autotune, cls.tune_threads
    built = {}

    def pinned_init(self, graph, arrays, *rest, **kw):
        init(self, graph, arrays, *rest, **kw)
        shapes = ";".join("x".join(map(str, getattr(a, "shape", ()))) + ":" + str(
            getattr(a, "dtype", type(a).__name__)) for a in arrays)
        built[shapes] = built.get(shapes, -1) + 1
        self._instr_key = f"{shapes}#{built[shapes]}"

    def write(self, what, value):
        if record is None:
            return
        record.write(json.dumps({"pin": self._instr_key, what: value}) + "\n")
        record.flush()

    def pinned_autotune(self):
        if pins is None:
            autotune(self)
            write(self, "modes", [st.mode for st, _, _ in self._tuned])
            return
        modes = pins.get(self._instr_key, {}).get("modes")
        tune, self._tune = self._tune, []
        self._tuned = tune
        conv = [i for i, (st, _, _) in enumerate(tune) if "Conv" in type(st).__name__]
        if modes is not None and len(modes) != len(tune) and len(modes) == len(conv):
            # pins of a revision that tuned only the convolution steps (before linear steps
            # chose between "gemm" and "direct"): they go to the convolution steps in order,
            # the other steps keep the mode they are built with
            full = [None] * len(tune)
            for i, mode in zip(conv, modes):
                full[i] = mode
            modes = full
        if modes is None or len(modes) != len(tune):
            raise RuntimeError(f"pinned plan {self._instr_key}: {len(tune)} convolution steps, "
                               f"pins {modes}")
        for (st, _, _), mode in zip(tune, modes):
            if mode is None:
                continue
            if mode not in st.modes():
                raise RuntimeError(f"pinned plan {self._instr_key}: mode {mode!r} not among "
                                   f"{st.modes()}")
            st.mode = mode
        self._check_blas_free()

    def pinned_tune_threads(self, arrays):
        if pins is None:
            tune_threads(self, arrays)
            write(self, "threads", [bool(self.parallel), bool(self.one_blas_thread)])
            return
        threads = pins.get(self._instr_key, {}).get("threads")
        if threads is None:
            raise RuntimeError(f"pinned plan {self._instr_key}: no thread setting pinned")
        if self._thread_settings is None:
            self._thread_settings = [(self.parallel, self.one_blas_thread), (False, False)]
        self.parallel, self.one_blas_thread = threads
    cls.__init__, cls.autotune, cls.tune_threads = (pinned_init, pinned_autotune,
                                                    pinned_tune_threads)


def steady(step, who, wait_for_compiles, freeze=False):
    """(in a worker process, its tree's ``_harness`` imported) Run ``step`` until a call
    queues no background compile, then once more, and collect the garbage; ``freeze`` also
    freezes the collector's generations, so that a full collection of the start-up objects
    does not land in a measured window."""
    import gc
    import _harness as H
    step()
    if who.startswith("ember") and wait_for_compiles:
        H._wait_ember_compiles(600)
        for _ in range(50):
            before = H._ember_compiles()[0]
            step()
            H._wait_ember_compiles(600)
            if H._ember_compiles()[0] == before:
                break
    step()
    gc.collect()
    if freeze:
        gc.freeze()


def _worker_inner(args):
    """(in the measured process) Run one worker of the tree's suite with ``measure`` replaced:
    natively it times and warms every measurement; under callgrind it counts the selected
    ones."""
    _tree_benchmarks(args.tree)
    import ctypes
    import gc
    import _harness as H
    plan = json.loads(args.plan) if args.plan else {}
    pins = json.loads(args.pins) if args.pins else None
    native = args.mode == "native"
    if args.mode == "valgrind":   # bound and called once first: the first call's symbol lookups and
        shim = ctypes.CDLL(args.shim)   # ctypes set-up stay out of the first window
        zero, dump = shim.instr_zero, shim.instr_dump
        zero()
        dump(b"prime")
    record = open(args.record, "a")
    index = [0]

    def measure(step, who, opts, wait_for_compiles=True):
        if "ember" in sys.modules:
            _pin_plans(pins, record if native else None)
        k = index[0]
        index[0] += 1
        if native:
            t0 = time.process_time()
            steady(step, who, wait_for_compiles, freeze=True)
            times = []
            for _ in range(3):
                t = time.perf_counter()
                step()
                times.append(time.perf_counter() - t)
            record.write(json.dumps({"index": k, "native_ms": min(times) * 1e3,
                                     "warm_s": time.process_time() - t0}) + "\n")
            record.flush()
        elif args.mode == "calls" and str(k) in plan:
            import cProfile
            import pstats
            n = plan[str(k)]
            steady(step, who, wait_for_compiles, freeze=True)
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(n):
                step()
            prof.disable()
            stats = pstats.Stats(prof).stats
            calls = {}   # by file and name (line numbers move between revisions)
            for (f, ln, name), c in stats.items():
                f = os.path.relpath(f, args.tree) if f.startswith(args.tree) else f
                key = f"{f}({re.sub(r' at 0x[0-9a-f]+', '', name)})"
                calls[key] = calls.get(key, 0) + c[1] / n
            record.write(json.dumps({"index": k, "n": n, "calls": calls}) + "\n")
            record.flush()
        elif str(k) in plan:
            n = plan[str(k)]
            steady(step, who, wait_for_compiles, freeze=True)
            # a first window of N steps, not used: the interpreter's re-specialisation and the
            # collector's first full pass after the freeze land in it (it read up to 2.4 M
            # instructions more than the next N-step window on a 4x4 add)
            for reps, tag in ((n, "w"), (n, "n"), (2 * n, "n")):
                name = f"m{k}-{tag}{reps}".encode()
                gc.collect()
                zero()
                for _ in range(reps):
                    step()
                dump(name)
            record.write(json.dumps({"index": k, "n": n, "done": True}) + "\n")
            record.flush()
        return {"_instr_index": k, "first": 0.0, "median": 0.0, "min": 0.0, "mean": 0.0,
                "steps": 0, "warmup_steps": 0, "steady": True, "compiles": 0, "compile_s": 0.0,
                "compile_wait_s": 0.0}
    H.measure = measure
    script = os.path.join(args.tree, "benchmarks", args.script)
    sys.argv = [script, "--worker", args.lib, "--case", args.case, "--min-time", "0",
                "--min-steps", "1", "--warmup", "1", "--compile-wait", "600", *args.extra]
    runpy.run_path(script, run_name="__main__")


def _keys(result, path=()):
    """{measurement index: "key" path} of the ``_instr_index`` markers in a worker's result."""
    out = {}
    if isinstance(result, dict):
        if "_instr_index" in result:
            out[result["_instr_index"]] = "/".join(path)
        for k, v in result.items():
            if isinstance(v, dict):
                out.update(_keys(v, path + (k,)))
    return out


def _run(cmd, env, cwd, timeout):
    """(return code or "timeout", stdout, stderr) of a command."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return "timeout", (e.stdout or b"").decode(errors="replace") if isinstance(
            e.stdout, bytes) else (e.stdout or ""), ""


def choose_n(native_ms):
    """The largest NICE count whose 3N valgrind steps fit WINDOW_S (at least 1)."""
    fits = [n for n in NICE if 3 * n * native_ms * 1e-3 * SLOWDOWN <= WINDOW_S]
    return fits[-1] if fits else 1


def planned_counts(native, keys, plan, only=None):
    """{measurement index (a string): N} of the measurements to count: ``native`` {index:
    native run's record}, ``keys`` {index: key}, ``plan`` {key: N} (else ``choose_n``), ``only``
    substrings of the keys to count (None: all)."""
    counts = {}
    for k, r in native.items():
        key = keys.get(k, str(k))
        if not only or any(s in key for s in only):
            counts[str(k)] = plan.get(key, choose_n(r["native_ms"]))
    return counts


def totals(path):
    """(trigger description, instructions, whether LLVM ran) of one callgrind dump file (LLVM
    in a window: a kernel compiled while it was counted, so the count is not a step's)."""
    desc, total, llvm = None, None, False
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("ob=") and "libllvm" in line:
                llvm = True
            if line.startswith("desc: Trigger:"):
                desc = line.split("Trigger:", 1)[1].strip()
                if desc.startswith("Client Request:"):
                    desc = desc[len("Client Request:"):].strip()
            elif line.startswith(("totals:", "summary:")):
                total = int(line.split()[1])
    return desc, total, llvm


def measure_worker(w, tree, out, shim, plan, timeout, plan_pins=None, only=None):
    """Native warm-up run, then the callgrind run, of one worker; its result dict. ``plan``:
    {measurement: N}; ``plan_pins``: the inference plans' choices to count under (another
    tree's, ``_pin_plans``; default: this worker's native run's); ``only``: substrings, the
    measurements counted (the others do not run under callgrind at all)."""
    env = environment(tree, out)
    wdir = os.path.join(out, w["name"].replace("/", "__"))
    shutil.rmtree(wdir, ignore_errors=True)
    os.makedirs(wdir)
    extra = list(w["extra"])
    if "--onnx-dir" in extra:
        extra[extra.index("--onnx-dir") + 1] = os.path.join(out, "onnx")
    base = [sys.executable, os.path.abspath(__file__), "_worker", "--tree", tree,
            "--script", w["script"], "--lib", w["lib"], "--case", w["case"],
            "--shim", shim, "--extra=" + json.dumps(extra)]
    rec = os.path.join(wdir, "native.jsonl")
    t0 = time.perf_counter()
    rc, so, se = _run(base + ["--mode", "native", "--record", rec], env, tree, timeout)
    res = {"native_s": round(time.perf_counter() - t0, 1)}
    if rc != 0:
        res["error"] = f"native run: exit {rc}: " + " | ".join(se.strip().splitlines()[-3:])
        return res
    emitted = [ln for ln in so.splitlines() if ln.startswith("BENCH-JSON: ")]
    keys = _keys(json.loads(emitted[-1][len("BENCH-JSON: "):])) if emitted else {}
    lines = [json.loads(ln) for ln in open(rec)]
    native = {r["index"]: r for r in lines if "index" in r}
    counts = planned_counts(native, keys, plan, only)
    pins = {}
    for r in lines:   # the plans' choices, the last of each kind
        if "pin" in r:
            pins.setdefault(r["pin"], {}).update({k: v for k, v in r.items() if k != "pin"})
    if pins:
        res["pins_native"] = pins
        res["pins_from"] = "plan file" if plan_pins else "native run"
        pins = res["pins"] = plan_pins or pins
    cg = os.path.join(wdir, "cg.out")
    vrec = os.path.join(wdir, "valgrind.jsonl")
    t0 = time.perf_counter()
    rc, so, se = _run(["valgrind", "--tool=callgrind", "--smc-check=all-non-file",
                       f"--callgrind-out-file={cg}", "--dump-line=no"] + base
                      + ["--mode", "valgrind", "--record", vrec, "--plan", json.dumps(counts)]
                      + (["--pins", json.dumps(pins)] if pins else []),
                      env, tree, timeout)
    res["valgrind_s"] = round(time.perf_counter() - t0, 1)
    dumps, compiled = {}, set()
    for path in glob.glob(cg + ".*"):
        desc, total, llvm = totals(path)
        m = re.search(r"m(\d+)-n(\d+)", desc or "")
        if m and total is not None:
            dumps[(int(m.group(1)), int(m.group(2)))] = total
            if llvm:
                compiled.add(int(m.group(1)))
    res["measurements"] = {}
    for k, r in sorted(native.items()):
        if str(k) not in counts:
            continue   # not selected (``only``)
        n = counts[str(k)]
        entry = {"native_ms": round(r["native_ms"], 3), "n": n}
        if (k, n) in dumps and (k, 2 * n) in dumps:
            entry.update(I_n=dumps[(k, n)], I_2n=dumps[(k, 2 * n)],
                         per_iter=(dumps[(k, 2 * n)] - dumps[(k, n)]) / n,
                         per_iter_2n=dumps[(k, 2 * n)] / (2 * n))
            if k in compiled:
                entry["error"] = "LLVM ran in a counted window (a compile): not a step's count"
                del entry["per_iter"]
        else:
            entry["error"] = ("valgrind run timed out first" if rc == "timeout"
                              else f"no dump (valgrind exit {rc})")
        res["measurements"][keys.get(k, str(k))] = entry
    if rc not in (0, "timeout"):
        res["valgrind_error"] = " | ".join(se.strip().splitlines()[-3:])
    return res


def run(args):
    tree = os.path.abspath(args.tree)
    out = os.path.abspath(args.out)
    os.makedirs(os.path.join(out, "onnx"), exist_ok=True)
    suites = args.suites.split(",") if args.suites else None
    listing = list_workers(tree, suites)
    shim = shim_library(out)
    plan, plan_pins = {}, {}
    if args.plan:
        with open(args.plan) as f:
            for wname, wres in json.load(f)["workers"].items():
                for key, m in wres.get("measurements", {}).items():
                    plan[f"{wname}::{key}"] = m["n"]
                if wres.get("pins"):
                    plan_pins[wname] = wres["pins"]
    path = os.path.join(out, "instructions.json")
    result = {"tree": tree, "commit": _commit(tree), "date": time.strftime(
        "%Y-%m-%d %H:%M UTC", time.gmtime()), "suites": listing["suites"],
        "skipped": listing["skipped"], "listing_errors": listing["errors"], "workers": {}}
    if os.path.exists(path) and args.resume:
        with open(path) as f:
            result["workers"] = json.load(f).get("workers", {})
    env = environment(tree, out)
    cases = args.cases.split(",") if args.cases else None
    scripts = {w["script"] for w in listing["workers"]
               if not cases or any(c in w["name"] for c in cases)}
    for e in listing["exports"]:
        target = os.path.join(out, "onnx")
        done = os.path.join(target, f".exported-{e['script']}-{e['case']}")
        if e["script"] not in scripts or os.path.exists(done):   # not read, or already there
            continue
        extra = list(e["extra"])
        if "--onnx-dir" in extra:
            extra[extra.index("--onnx-dir") + 1] = target
        rc, _, se = _run([sys.executable, os.path.join(tree, "benchmarks", e["script"]),
                          "--worker", "export", "--case", e["case"], *extra], env, tree, 600)
        if rc != 0:
            print(f"export {e['script']} {e['case']} failed: {se.strip()[-300:]}",
                  file=sys.stderr)
        else:
            open(done, "w").close()
    skip = args.skip.split(",") if args.skip else None
    for w in listing["workers"]:
        if cases and not any(c in w["name"] for c in cases):
            continue
        if skip and any(c in w["name"] for c in skip):
            result["workers"].setdefault(w["name"], {"error": "not run (--skip)"})
            continue
        if args.resume and not args.keys and "measurements" in result["workers"].get(w["name"], {}):
            continue
        wplan = {k.split("::", 1)[1]: v for k, v in plan.items()
                 if k.startswith(w["name"] + "::")}
        print(f"{w['name']} ...", file=sys.stderr, flush=True)
        res = measure_worker(w, tree, out, shim, wplan, args.timeout, plan_pins.get(w["name"]),
                             args.keys.split(",") if args.keys else None)
        if args.keys and args.resume and w["name"] in result["workers"]:
            # counted one --keys selection at a time: earlier selections' counts stay
            kept = result["workers"][w["name"]].get("measurements", {})
            res["measurements"] = dict(kept, **res.get("measurements", {}))
        result["workers"][w["name"]] = res
        for key, m in res.get("measurements", {}).items():
            print(f"  {key}: N={m['n']} "
                  + (f"{m['per_iter']:.0f} instr/iter" if "per_iter" in m else m["error"]),
                  file=sys.stderr, flush=True)
        if "error" in res:
            print("  " + res["error"], file=sys.stderr, flush=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
        os.replace(tmp, path)
    print(path)


def python_calls(tree, worker, key, n, out):
    """{Python function: calls per iteration} of measurement ``key`` of ``worker`` (a name as
    ``list`` prints it) in ``tree``, counted natively with cProfile over ``n`` steps (call
    counts are exact; callgrind's profile names only C functions, the interpreter's among
    them)."""
    tree = os.path.abspath(tree)
    listing = list_workers(tree)
    w = next((w for w in listing["workers"] if w["name"] == worker), None)
    if w is None:
        raise SystemExit(f"{worker}: no such worker in {tree}")
    env = environment(tree, out)
    extra = list(w["extra"])
    if "--onnx-dir" in extra:
        extra[extra.index("--onnx-dir") + 1] = os.path.join(out, "onnx")
    base = [sys.executable, os.path.abspath(__file__), "_worker", "--tree", tree,
            "--script", w["script"], "--lib", w["lib"], "--case", w["case"],
            "--extra=" + json.dumps(extra)]
    rec = os.path.join(out, "native-keys.jsonl")
    rc, so, se = _run(base + ["--mode", "native", "--record", os.devnull], env, tree, 900)
    emitted = [ln for ln in so.splitlines() if ln.startswith("BENCH-JSON: ")]
    if rc != 0 or not emitted:
        raise SystemExit(f"native run failed: {se.strip()[-1000:]}")
    index = {v: k for k, v in _keys(json.loads(emitted[-1][len("BENCH-JSON: "):])).items()}
    if os.path.exists(rec):
        os.remove(rec)
    rc, so, se = _run(base + ["--mode", "calls", "--record", rec,
                              "--plan", json.dumps({str(index[key]): n})], env, tree, 900)
    for line in open(rec):
        return json.loads(line)["calls"]
    raise SystemExit(f"profile run failed: {se.strip()[-1000:]}")


def _commit(tree):
    p = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True,
                       text=True)
    return p.stdout.strip() or None


# ----------------------------------------------------------------------------- table
def rows(results):
    """[(worker, measurement, [per_iter or None for each result])] over the union of cases."""
    order = []
    for r in results:
        for w, wres in r["workers"].items():
            for key in wres.get("measurements", {}):
                if (w, key) not in order:
                    order.append((w, key))
    out = []
    for w, key in order:
        vals = []
        for r in results:
            m = r["workers"].get(w, {}).get("measurements", {}).get(key)
            vals.append(m.get("per_iter") if m else None)
        out.append((w, key, vals))
    return out


def table(results, threshold=1.03):
    """A markdown table: instructions per iteration in each result and ratios to the first."""
    names = [r.get("commit") or r["tree"] for r in results]
    head = ["case", "N"] + [f"instr/iter {n}" for n in names] + [
        f"{n} / {names[0]}" for n in names[1:]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w, key, vals in rows(results):
        n = results[0]["workers"].get(w, {}).get("measurements", {}).get(key, {}).get("n", "")
        cells = [f"{w} {key}", str(n)] + [f"{v:,.0f}" if v is not None else "-" for v in vals]
        for v in vals[1:]:
            if v is None or vals[0] in (None, 0):
                cells.append("-")
            else:
                ratio = v / vals[0]
                cells.append(f"**{ratio:.3f}**" if ratio > threshold else f"{ratio:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("list", "run", "table", "calls", "_list", "_worker"))
    ap.add_argument("files", nargs="*", help="(table) instructions.json files, first = base")
    ap.add_argument("--tree", default=ROOT)
    ap.add_argument("--suites", default=None)
    ap.add_argument("--cases", default=None, help="(run) only workers whose name contains one")
    ap.add_argument("--skip", default=None, help="(run) not the workers whose name contains one")
    ap.add_argument("--keys", default=None, help="(run) only the measurements whose key contains "
                    "one (with --resume, added to the worker's earlier counts)")
    ap.add_argument("--out", default=None, help="(run) results folder")
    ap.add_argument("--plan", default=None)
    ap.add_argument("--timeout", type=float, default=900, help="(run) seconds per process")
    ap.add_argument("--resume", action="store_true", help="(run) keep workers already in OUT")
    ap.add_argument("--script")
    ap.add_argument("--lib")
    ap.add_argument("--case")
    ap.add_argument("--shim")
    ap.add_argument("--extra", default="[]")
    ap.add_argument("--mode")
    ap.add_argument("--worker", help="(calls) a worker's name as list prints it")
    ap.add_argument("--key", help="(calls) the measurement")
    ap.add_argument("--against", default=None, help="(calls) a second tree: the differences")
    ap.add_argument("-n", type=int, default=10, help="(calls) steps profiled")
    ap.add_argument("--record")
    ap.add_argument("--pins", default=None)
    args = ap.parse_args(argv)
    if args.command == "_list":
        _list_inner(os.path.abspath(args.tree), args.suites.split(",") if args.suites else None)
    elif args.command == "_worker":
        args.extra = json.loads(args.extra)
        _worker_inner(args)
    elif args.command == "list":
        listing = list_workers(os.path.abspath(args.tree),
                               args.suites.split(",") if args.suites else None)
        for w in listing["workers"]:
            print(f"{w['name']}  ({w['script']} {' '.join(w['extra'])})")
        for name, why in listing["skipped"]:
            print(f"{name}  skipped: {why}")
        for name, err in listing["errors"].items():
            print(f"{name}: collect raised after listing: {err}", file=sys.stderr)
    elif args.command == "calls":
        out = tempfile.mkdtemp(prefix="ember-instr-calls-")
        os.makedirs(os.path.join(out, "onnx"))
        a = python_calls(args.tree, args.worker, args.key, args.n, out)
        b = (python_calls(args.against, args.worker, args.key, args.n, out)
             if args.against else {})
        both = sorted(set(a) | set(b), key=lambda f: -abs(b.get(f, 0) - a.get(f, 0))
                      if args.against else -a[f])
        for f in both:
            if args.against and b.get(f, 0) == a.get(f, 0):
                continue
            print(f"{a.get(f, 0):10.1f}" + (f" {b.get(f, 0):10.1f}" if args.against else "")
                  + f"  {f}")
    elif args.command == "run":
        if not args.out:
            ap.error("run needs --out")
        run(args)
    else:
        results = []
        for path in args.files:
            with open(path) as f:
                results.append(json.load(f))
        print(table(results))


if __name__ == "__main__":
    main()
