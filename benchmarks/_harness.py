"""Shared harness: every library runs in its own process, as a user's program runs it.

A benchmark script has a *worker* side (``python benchmarks/x.py --worker LIB --case CASE``: one
library, one configuration, in a fresh process, printing one JSON line) and a *runner* side that
spawns the workers (``run_matrix``), several processes per library in alternating order, and
summarises the spread. The runner imports neither ember nor torch, and never sets a library's
thread counts, wait policy or anything else in a worker's environment: each library runs with
its defaults (ember's too, including ``EMBER_JIT_COMPILE=background``). The only variables it
adds are the ones a row is *about*: ``EMBER_CPU_ISA=avx2`` for the forced-AVX2 column and a fresh
``NUMBA_CACHE_DIR`` / ``EMBER_CACHE_DIR`` for the cold first step (and this checkout on
``PYTHONPATH``, so that workers import the ember being measured).

Timing in a worker (``measure``): the first call is timed on its own; then warm-up calls until
the process is steady (for ember: until a call queues no background compile, waiting for the
queued ones between calls); then calls back to back, each timed, for ``min_time`` seconds and at
least ``min_steps`` calls (at least 5 when they take over 4 x ``min_time``). A worker reports
the median, minimum and mean of those calls.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MARK = "BENCH-JSON: "
ENV_REPORTED = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                "OMP_WAIT_POLICY", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "NUMBA_CACHE_DIR",
                "EMBER_JIT_COMPILE", "EMBER_CPU_ISA", "EMBER_CACHE_DIR", "EMBER_THREADING_LAYER",
                "EMBER_MEMORY_REUSE", "EMBER_CONV_BLAS_LIMIT")


# ----------------------------------------------------------------------------- options
class Options:
    """How long to measure. ``quick``: a smoke run (one process per library, few steps)."""

    def __init__(self, quick=False, repeats=None, min_time=None, timeout=None):
        self.quick = quick
        self.repeats = repeats if repeats is not None else (1 if quick else 3)
        self.min_time = min_time if min_time is not None else (0.02 if quick else 0.25)
        self.min_steps = 2 if quick else 10
        self.warmup = 1 if quick else 3
        # seconds a worker waits for ember's background compiles before timing (quick: none, so
        # a quick run may time the fallback paths; the result then says steady=False)
        self.compile_wait = 0.0 if quick else 240.0
        self.timeout = timeout if timeout is not None else (120 if quick else 420)

    def worker_args(self):
        return ["--min-time", str(self.min_time), "--min-steps", str(self.min_steps),
                "--warmup", str(self.warmup), "--compile-wait", str(self.compile_wait)]


def process_age():
    """Seconds since this process started (from /proc; elsewhere since this module was
    imported)."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - _IMPORTED


_IMPORTED = time.perf_counter()


def add_worker_arguments(parser):
    parser.add_argument("--worker", help="run one library's side (ember, torch, ort) here")
    parser.add_argument("--case", help="the configuration a worker runs")
    parser.add_argument("--min-time", type=float, default=0.4)
    parser.add_argument("--min-steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--compile-wait", type=float, default=240.0)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--repeats", type=int, default=None, help="processes per library")
    parser.add_argument("--json", default=None, help="write the raw results here")


def worker_options(args):
    """The Options a worker process was started with."""
    opts = Options(quick=args.quick, repeats=1, min_time=args.min_time)
    opts.min_steps, opts.warmup, opts.compile_wait = args.min_steps, args.warmup, args.compile_wait
    return opts


# ----------------------------------------------------------------------------- worker side
def library_info(lib):
    """Thread counts and version of ``lib`` as this process runs it (its defaults)."""
    info = {"pid": os.getpid()}
    if lib.startswith("ember"):
        import ember
        from ember.kernels.runtime import cpu
        from ember.kernels.runtime import compiler
        info.update(version=getattr(ember, "__version__", "?"), threads=ember.get_num_threads(),
                    isa=cpu.isa(), host_isa=cpu.host_isa(),
                    jit_compile=compiler.compile_mode())
    elif lib == "torch":
        import torch
        info.update(version=torch.__version__, threads=torch.get_num_threads(),
                    interop_threads=torch.get_num_interop_threads(),
                    isa=torch.backends.cpu.get_cpu_capability())
    elif lib == "ort":
        import onnxruntime
        info.update(version=onnxruntime.__version__, threads="default (intra_op_num_threads=0)")
    return info


def _ember_compiles():
    """(number of background compiles finished or failed so far, seconds they took)."""
    if "ember.kernels.runtime.compiler" not in sys.modules:
        return 0, 0.0
    from ember.kernels.runtime import compiler
    done, failed = compiler.background_compiles()
    return len(done) + len(failed), sum(s for _, s in done)


def _wait_ember_compiles(limit):
    """Wait up to ``limit`` seconds for ember's background compile queue; True when empty."""
    runtime = sys.modules.get("ember.kernels.runtime.compiler")
    queue = getattr(runtime, "_queue", None)
    if queue is None or queue.unfinished_tasks == 0:
        return True
    if limit <= 0:
        return False
    t = threading.Thread(target=runtime.wait_compiles, daemon=True)
    t.start()
    t.join(limit)
    return not t.is_alive()


def measure(step, lib, opts, wait_for_compiles=True):
    """Time ``step()`` as a user's loop runs it (see the module docstring). Returns a dict of
    milliseconds: ``first``, ``median``, ``min``, ``mean``, and ``steps``, ``warmup_steps``,
    ``steady`` (False when ember's compiles were still running as timing started),
    ``compiles`` / ``compile_s`` (ember's background compiles in this process) and
    ``compile_wait_s`` (seconds spent waiting for them)."""
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    warm = 1
    steady = True
    waited = 0.0
    if lib.startswith("ember") and wait_for_compiles:
        deadline = time.perf_counter() + opts.compile_wait

        def wait():
            w0 = time.perf_counter()
            ok = _wait_ember_compiles(max(0.0, deadline - time.perf_counter()))
            return ok, time.perf_counter() - w0
        steady, waited = wait()
        for _ in range(50):   # until a step (run with the compile queue empty) queues nothing
            if not steady:
                break
            before, _ = _ember_compiles()
            step()
            warm += 1
            steady, w = wait()
            waited += w
            if steady and _ember_compiles()[0] == before:
                break
    for _ in range(opts.warmup):
        step()
        warm += 1
    if lib.startswith("ember"):
        steady = steady and _wait_ember_compiles(0)
    times = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - start
        if len(times) >= opts.min_steps and elapsed >= opts.min_time:
            break
        if len(times) >= min(5, opts.min_steps) and elapsed >= 4 * opts.min_time:
            break   # slow steps: five are enough for a median
    n, secs = _ember_compiles()
    return {"first": first * 1e3, "median": statistics.median(times) * 1e3,
            "min": min(times) * 1e3, "mean": statistics.fmean(times) * 1e3, "steps": len(times),
            "warmup_steps": warm, "steady": bool(steady), "compiles": n, "compile_s": secs,
            "compile_wait_s": waited}


def compiled(lib, step):
    """``step`` (a function of no arguments) through ``ember.compile`` or ``torch.compile``."""
    if lib.startswith("ember"):
        import ember
        return ember.compile(step)
    import torch
    return torch.compile(step)


def first_calls(step, n=3):
    """Run ``step()`` ``n`` times: (milliseconds of each call, the first call's result). A
    compiled step's first calls are its compile: for ``ember.compile`` an eager call that
    creates the optimizer's state, then the trace and compile, then the check; for
    ``torch.compile`` Dynamo and Inductor."""
    calls, first = [], None
    for i in range(n):
        t = time.perf_counter()
        out = step()
        calls.append((time.perf_counter() - t) * 1e3)
        if i == 0:
            first = out
    return calls, first


def first_calls_cell(results):
    """'first / second call' (ms, medians over the processes) of compiled workers."""
    rs = [r for r in results if "first_calls" in r]
    if not rs:
        return ""
    return " / ".join(cell(spread([r["first_calls"][i] for r in rs])) for i in (0, 1))


def seeded_array(name, shape):
    """The value every library's model gets for state-dict entry ``name`` (float32, seeded by
    the name): uniform(+-1/sqrt(fan_in)) for matrices and kernels, uniform(-0.1, 0.1) for
    biases, uniform(0.5, 1.5) for norm weights and running variances, normal(0, 0.1) for
    running means."""
    import zlib
    import numpy as np
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    last = name.rsplit(".", 1)[-1]
    if last == "running_mean":
        a = rng.normal(0, 0.1, shape)
    elif last == "running_var" or (last == "weight" and len(shape) == 1):
        a = rng.uniform(0.5, 1.5, shape)
    elif "bias" in last:
        a = rng.uniform(-0.1, 0.1, shape)
    else:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        a = rng.uniform(-1, 1, shape) / np.sqrt(fan_in)
    return a.astype(np.float32)


def load_seeded(model, to_tensor):
    """Give ``model`` (an ember or torch Module) the weights of ``seeded_array``; integer
    buffers keep their values. ``to_tensor``: the library's NumPy-array-to-tensor function."""
    state = {k: (to_tensor(seeded_array(k, tuple(v.shape))) if v.dtype.is_floating_point else v)
             for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    return model


def sample(values, n=8):
    """The first ``n`` numbers of an array, as floats (to check that libraries agree)."""
    import numpy as np
    return [float(v) for v in np.asarray(values, dtype=np.float64).ravel()[:n]]


def agree(results, key="sample", rtol=2e-3, atol=2e-3):
    """Whether every result's ``key`` list matches the first one's (None when fewer than 2)."""
    import math
    vals = [r[key] for r in results if isinstance(r, dict) and r.get(key) is not None]
    if len(vals) < 2:
        return None
    ref = vals[0]
    return all(len(v) == len(ref) and all(math.isclose(a, b, rel_tol=rtol, abs_tol=atol)
                                          for a, b in zip(v, ref)) for v in vals[1:])


def emit(result):
    """Print a worker's result as the JSON line the runner reads."""
    sys.stdout.write(MARK + json.dumps(result) + "\n")
    sys.stdout.flush()


# ----------------------------------------------------------------------------- runner side
def spawn(script, lib, case, opts, env_extra=None, extra_args=()):
    """Run one worker process; returns its JSON result, or {"error": ...}."""
    env = dict(os.environ)
    env.update(env_extra or {})
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, os.path.join(HERE, script), "--worker", lib, "--case", case,
           *opts.worker_args(), *extra_args]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT,
                              timeout=opts.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {opts.timeout} s", "lib": lib, "case": case}
    wall = time.perf_counter() - t0
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            out = json.loads(line[len(MARK):])
            out["process_s"] = wall
            return out
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
    return {"error": f"exit {proc.returncode}: " + " | ".join(tail), "lib": lib, "case": case}


def run_matrix(script, cases, columns, opts, log=None, extra_args=()):
    """Each case x column, ``opts.repeats`` processes per column, the column order reversed on
    every other repeat. ``columns``: {column name: (worker lib, extra env)}. ``cases``: a list,
    or {column: list} for columns that run only some cases. Returns
    {case: {column: [result, ...]}}."""
    out = {}
    all_cases = cases if isinstance(cases, list) else list(dict.fromkeys(
        c for cs in cases.values() for c in cs))
    for case in all_cases:
        cols = [c for c in columns if isinstance(cases, list) or case in cases.get(c, ())]
        out[case] = {c: [] for c in cols}
        for r in range(opts.repeats):
            for col in (cols if r % 2 == 0 else cols[::-1]):
                lib, env = columns[col]
                res = spawn(script, lib, case, opts, env, extra_args)
                out[case][col].append(res)
                if log:
                    log(f"  {script} {case} {col} #{r + 1}: "
                        + (res["error"] if "error" in res else "ok"))
    return out


def spread(values):
    """{"median", "min", "max", "n"} of a list of numbers (None when empty)."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def metric(results, *path):
    """The spread over repeats of ``result[path[0]][path[1]]...`` (errors skipped)."""
    vals = []
    for res in results:
        if "error" in res:
            continue
        v = res
        for p in path:
            v = v.get(p) if isinstance(v, dict) else None
        if isinstance(v, (int, float)):
            vals.append(v)
    return spread(vals)


def scaled(s, factor):
    """A spread with its numbers multiplied by ``factor`` (None stays None)."""
    if s is None:
        return None
    return {k: (v * factor if k != "n" else v) for k, v in s.items()}


def errors(results):
    return [r["error"] for r in results if "error" in r]


_PROBES = {
    "ember": "import ember, numpy, numba; from ember.kernels.runtime import cpu; "
             "from ember.kernels.runtime import compiler as r; "
             "print({'ember': getattr(ember, '__version__', '?'), "
             "'numpy': numpy.__version__, 'numba': numba.__version__, 'host_isa': cpu.host_isa(), "
             "'ember_isa': cpu.isa(), "
             "'ember_threads': ember.get_num_threads(), 'ember_jit_compile': r.compile_mode(), "
             "'blas_table': sorted(set(__import__('ember.kernels.runtime.blas_core', "
             "fromlist=['chosen']).chosen().values()))})",
    "numpy": "import numpy, threadpoolctl; print({'numpy_blas_table': sorted({i.get("
             "'architecture') for i in threadpoolctl.threadpool_info() if 'numpy' in "
             "i.get('filepath', '') and i.get('architecture')})})",
    "torch": "import torch; print({'torch': torch.__version__, 'torch_threads': "
             "torch.get_num_threads(), 'torch_interop_threads': torch.get_num_interop_threads(), "
             "'torch_isa': torch.backends.cpu.get_cpu_capability()})",
    "ort": "import onnxruntime; print({'onnxruntime': onnxruntime.__version__})",
}


def cpuinfo():
    """(model name, vendor, feature flags) of the first CPU in /proc/cpuinfo."""
    model, vendor, flags = "unknown", "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model == "unknown":
                    model = value.strip()
                elif key == "vendor_id" and vendor == "unknown":
                    vendor = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        import platform
        model = platform.processor() or "unknown"
    return model, vendor, flags


def machine_info():
    """The machine and the libraries as each runs by default (each probed in its own process):
    CPU model and vendor, ember's detected ISA (``host_isa``) and the one its kernels use
    (``ember_isa``), and whether ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` were set
    (``openblas_set``), with the environment variables of ``ENV_REPORTED``."""
    import ast
    import datetime
    import platform
    model, vendor, flags = cpuinfo()
    info = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "cpu": model, "vendor": vendor, "cpu_count": os.cpu_count(),
            "openblas_set": {v: v in os.environ for v in ("OPENBLAS_CORETYPE",
                                                          "OPENBLAS_L2_SIZE")},
            "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "flags": sorted(flags & {"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni",
                                     "avx512_bf16", "amx_tile"}),
            "python": platform.python_version(), "loadavg_start": list(os.getloadavg()),
            "env": {v: os.environ[v] for v in ENV_REPORTED if v in os.environ}}
    for name, code in _PROBES.items():
        try:
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  timeout=120, cwd=ROOT,
                                  env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep
                                           + os.environ.get("PYTHONPATH", "")))
            info.update(ast.literal_eval(proc.stdout.strip().splitlines()[-1]))
        except (subprocess.TimeoutExpired, IndexError, ValueError, SyntaxError):
            info[name] = None
    return info


def _blas_tables(m):
    """NumPy's OpenBLAS kernel table: as OpenBLAS picks it (NumPy alone) and as ember runs it
    (``blas_core``: the fastest the host executes)."""
    alone, ember = m.get("numpy_blas_table"), m.get("blas_table")
    if not alone and not ember:
        return "OpenBLAS kernel table unknown"
    alone, ember = "/".join(alone or ["?"]), "/".join(ember or ["?"])
    if alone == ember:
        return f"OpenBLAS kernels {alone}"
    return f"OpenBLAS kernels {ember} under ember, {alone} as OpenBLAS picks them"


def machine_line(m):
    """One README sentence describing ``machine_info()``."""
    env = m.get("env", {})
    blas = ", ".join(f"`{v}={env[v]}`" for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
                     if v in env) or "`OPENBLAS_CORETYPE` and `OPENBLAS_L2_SIZE` unset"
    others = ", ".join(f"`{k}={v}`" for k, v in env.items()
                       if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"))
    isa = {"avx512": "AVX-512", "avx2": "AVX2 + FMA", "sse": "SSE2"}.get(m.get("host_isa"),
                                                                        m.get("host_isa"))
    used = m.get("ember_isa")
    used = f", kernels built for {used} (`EMBER_CPU_ISA`)" if used and used != m.get(
        "host_isa") else ""
    return (f"Measured {m.get('date')} on {m.get('cpu')} (vendor {m.get('vendor', '?')}, "
            f"{m.get('cpu_count')} logical CPUs; "
            f"vector ISA: {isa} as ember detects it{used} (flags: "
            f"{' '.join(m.get('flags', []))}), "
            f"torch's CPU capability "
            f"{m.get('torch_isa')}), Python {m.get('python')}, ember {m.get('ember')} (NumPy "
            f"{m.get('numpy')}, Numba {m.get('numba')}; {_blas_tables(m)}), PyTorch "
            f"{m.get('torch')}, onnxruntime "
            f"{m.get('onnxruntime')}. Each library ran with its default threads (ember "
            f"{m.get('ember_threads')}, torch {m.get('torch_threads')} intra-op / "
            f"{m.get('torch_interop_threads')} inter-op, onnxruntime its default), {blas}"
            + (f", {others}" if others else "") + f"; load average at the start "
            + " ".join(f"{v:.2f}" for v in m.get("loadavg_start", [])) + ".")


def report(machine, raw, tables, json_path=None):
    """Print the tables (markdown) and, with ``json_path``, write the raw results there."""
    print(machine_line(machine) + "\n")
    for name, text in tables.items():
        print(f"{name}:\n{text}\n")
    if json_path:
        write_json(json_path, {"machine": machine, "results": raw})


def collect_and_report(args, key, collect, render, machine_arg=True, cases=None):
    """A benchmark script's main run: ``collect`` (with ``--only`` when the script has it) and
    print / save the report under ``key``. With ``cases`` (the script's case names) an unknown
    ``--only`` name stops the run before anything is measured, naming the known ones."""
    opts = Options(quick=args.quick, repeats=args.repeats)
    kw = {"log": lambda s: print(s, file=sys.stderr)}
    if hasattr(args, "only"):
        kw["only"] = args.only.split(",") if args.only else None
        unknown = sorted(set(kw["only"]) - set(cases)) if cases and kw["only"] else ()
        if unknown:
            sys.exit(f"--only: unknown case(s) {', '.join(unknown)}; known: {', '.join(cases)}")
    machine = machine_info()
    res = collect(opts, machine, **kw) if machine_arg else collect(opts, **kw)
    report(machine, {key: res}, render(res), args.json)


def script_main(doc, key, worker, collect, render, cases, onnx_dir=False):
    """A benchmark script's command line (``doc`` its docstring): a worker run (``--worker``)
    emits ``worker``'s result, else ``collect_and_report`` under ``key``; ``--only`` picks
    cases, ``--onnx-dir`` (with ``onnx_dir``) is where the export workers write."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    add_worker_arguments(ap)
    ap.add_argument("--only", default=None)
    if onnx_dir:
        ap.add_argument("--onnx-dir", default=None)
    args = ap.parse_args()
    if args.worker:
        emit(worker(args.worker, args.case, worker_options(args),
                    *((args.onnx_dir,) if onnx_dir else ())))
        return
    collect_and_report(args, key, collect, render, cases=cases)


def export_or_run(lib, case, export, run):
    """A worker's result for an ONNX script: ``export()``'s for ``lib`` "export", else the
    library's info and ``run()``'s."""
    out = {"lib": lib, "case": case}
    if lib == "export":
        out.update(export())
        return out
    out["info"] = library_info(lib)
    out.update(run())
    return out


def export_all(script, cases, opts, onnx_dir, log=None):
    """Each case's export worker (``--worker export``) run into ``onnx_dir``: {case: its
    result}."""
    exported = {}
    for case in cases:
        exported[case] = spawn(script, "export", case, opts, extra_args=("--onnx-dir", onnx_dir))
        if log:
            log(f"  {script} {case} export: " + exported[case].get("error", "ok"))
    return exported


def write_json(path, obj):
    """Write ``obj`` as JSON to ``path`` atomically (temporary file, then rename)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- formatting
def _unit(ms):
    return "us" if ms < 1 else "ms" if ms < 1000 else "s"


def fmt(x, unit=None):
    """A time given in milliseconds, three significant figures, in ``unit`` (us, ms or s;
    default: the one that keeps the number between 1 and 1000)."""
    if x is None:
        return "-"
    unit = unit or _unit(x)
    v = x * {"ms": 1.0, "us": 1e3, "s": 1e-3}[unit]
    return f"{v:.3g}" if v < 1000 else f"{v:.0f}"


def cell(s, unit=None):
    """'median unit (min-max)' of a spread of milliseconds, or '-'; the unit as ``fmt``."""
    if s is None:
        return "-"
    unit = unit or _unit(s["median"])
    u = {"ms": " ms", "us": " µs", "s": " s"}[unit]
    if s["n"] == 1 or fmt(s["min"], unit) == fmt(s["max"], unit):
        return f"{fmt(s['median'], unit)}{u}"
    return f"{fmt(s['median'], unit)}{u} ({fmt(s['min'], unit)}-{fmt(s['max'], unit)})"


def ratio(a, b):
    """Ratio of two spreads' medians, two decimals."""
    if a is None or b is None or not b["median"]:
        return "-"
    return f"{a['median'] / b['median']:.2f}"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)
