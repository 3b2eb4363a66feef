"""Training-step speed: ember vs PyTorch eager, each library in its own process, float32.

Usage: python benchmarks/train_step.py [--quick] [--repeats 3]
                                       [--only mlp,mlp_adam,lenet,lm,lenet_cold,lenet_cold10,
                                               gpt_cold10]
       python benchmarks/train_step.py --worker ember|torch --case lenet   (one process's side)

Cases (one optimizer step each: zero_grad, forward, cross-entropy, backward, optimizer step):
  mlp         784-512-512-10 MLP, batch 128, SGD with momentum
  mlp_adam    the same with Adam (ember's Adam runs its fused one-pass update from 65536
              elements; torch: ``Adam(fused=True)``)
  lenet       LeNet-5 on 28x28 inputs, batch 64, SGD with momentum
  lm          word language model: embedding 10000x200, 2-layer LSTM 200, seq 35, batch 20, decoder
  lenet_cold  LeNet-5's first step in a fresh process with a fresh (empty) NUMBA_CACHE_DIR and
              EMBER_CACHE_DIR: a new user's first call
  lenet_cold10  the same fresh process and caches: how many LeNet-5 training steps finish within
              the first 10 s of the process (counted from its start, import included), as a
              new user's first short run meets it; ember's background compiles run meanwhile
  gpt_cold10  the same window for ``gpt_step.py``'s nanoGPT step (manual attention, AdamW,
              gradient clipping)
The ``*_cold10`` cases also run ``ember_prebuilt``: ember after its install step, ``ember
prebuild``, run once by the runner into a temporary ``EMBER_PREBUILT_DIR`` (its time is
reported); each such process still starts with empty ``NUMBA_CACHE_DIR`` and ``EMBER_CACHE_DIR``.
Columns: ember and torch eager; ``ember_compiled`` (the step function through ``ember.compile``:
one captured program for zero_grad, forward, backward and the optimizer's update) and
``torch_compiled`` (``torch.compile`` of the same function) on COMPILED_CASES; each compiled
worker also reports its first three calls (``first_calls``: the first runs eagerly and creates
the optimizer's state, the second traces and compiles; torch: Dynamo + Inductor).
Each worker times steps back to back after warm-up (``_harness.measure``: for ember, until no
background compile is pending) with the library's default thread settings, and reports the first
step separately. Both libraries start from the same weights (``_harness.load_seeded``) and the
first loss is compared. Nothing is asserted; see benchmarks/run_all.py for the README tables.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402

SCRIPT = "train_step.py"
CASES = ("mlp", "mlp_adam", "lenet", "lm", "lenet_cold", "lenet_cold10", "gpt_cold10")
QUICK_CASES = ("mlp", "lenet_cold", "lenet_cold10")
COLD = ("lenet_cold", "lenet_cold10", "gpt_cold10")   # fresh, empty kernel cache directories
WINDOW = ("lenet_cold10", "gpt_cold10")   # steps counted in the process's first WINDOW_S
WINDOW_S = 10.0
AVX2_CASES = ("lenet",)       # the ones that run ember's ISA-specific (direct conv) kernels
COMPILED_CASES = ("mlp", "mlp_adam", "lenet")   # with ember.compile and torch.compile columns
LABELS = {"mlp": "MLP 784-512-512-10, batch 128, SGD momentum",
          "mlp_adam": "MLP 784-512-512-10, batch 128, Adam (torch `fused=True`)",
          "lenet": "LeNet-5 28x28, batch 64, SGD momentum",
          "lm": "word LM (emb 10000x200, 2-layer LSTM 200, seq 35, batch 20), SGD momentum"}
COLD_LABELS = {"lenet_cold10": "LeNet-5, batch 64, SGD momentum",
               "gpt_cold10": "GPT step of `gpt_step.py` (manual attention)"}


def mlp(nn):
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def lenet(nn):
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def word_lm(nn):
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(10000, 200)
            self.rnn = nn.LSTM(200, 200, 2)
            self.decoder = nn.Linear(200, 10000)

        def forward(self, x):
            out, _ = self.rnn(self.encoder(x))
            return self.decoder(out).reshape(-1, 10000)

    return LM()


def _data(shape_x, n_classes, n_y, tokens=False):
    def make(r):
        import numpy as np
        x = (r.integers(0, 10000, shape_x) if tokens
             else r.standard_normal(shape_x).astype(np.float32))
        return x, r.integers(0, n_classes, n_y)
    return make


MODELS = {"mlp": (mlp, _data((128, 784), 10, 128)),
          "lenet": (lenet, _data((64, 1, 28, 28), 10, 64)),
          "lm": (word_lm, _data((35, 20), 10000, 700, tokens=True))}


def _case(case):
    """(model name, optimizer name) of a case."""
    return {"mlp_adam": ("mlp", "adam"), "lenet_cold": ("lenet", "sgd"),
            "lenet_cold10": ("lenet", "sgd"), "gpt_cold10": ("gpt", "adamw")}.get(case,
                                                                              (case, "sgd"))


def ember_step(builder, x, y, optimizer="sgd", seeded=False, losses=None):
    """A callable running one ember training step (also used by memory_reuse.py)."""
    import ember
    from ember import nn, optim
    ember.manual_seed(0)
    model = builder(nn)
    if seeded:
        H.load_seeded(model, ember.tensor)
    opt = (optim.Adam(model.parameters(), lr=1e-3) if optimizer == "adam"
           else optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
    xt, yt = ember.tensor(x), ember.tensor(y)

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        if losses is not None and not losses:
            losses.append(float(loss.item()))
        return loss
    return step


def torch_step(builder, x, y, optimizer="sgd", seeded=False, losses=None):
    import torch
    torch.manual_seed(0)
    model = builder(torch.nn)
    if seeded:
        H.load_seeded(model, torch.from_numpy)
    opt = (torch.optim.Adam(model.parameters(), lr=1e-3, fused=True) if optimizer == "adam"
           else torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        if losses is not None and not losses:
            losses.append(float(loss.item()))
        return loss
    return step


def cold_window(step, lib):
    """Steps ``step()`` back to back until ``WINDOW_S`` seconds after the process started;
    the count of those finished within the window, when the first one ended, and the CPU
    seconds this process had used by the window's end (ember's compile process, a child, not
    counted: on a loaded machine steps per CPU second compare where the count does not)."""
    start = time.perf_counter() - H.process_age()
    ends = []
    cpu = 0.0
    while True:
        step()
        t = time.perf_counter() - start
        if t > WINDOW_S:
            break
        ends.append(t)
        cpu = time.process_time()
    done, secs = H._ember_compiles()
    return {"steps_in_window": len(ends), "window_s": WINDOW_S,
            "first_step_end_s": ends[0] if ends else None, "cpu_s_in_window": cpu,
            "compiles_in_window": done, "compile_s_in_window": secs}


def worker(lib, case, opts):
    import numpy as np
    t0 = time.perf_counter()
    if lib.startswith("ember"):
        import ember  # noqa: F401
    else:
        import torch  # noqa: F401
    import_ms = (time.perf_counter() - t0) * 1e3
    name, optimizer = _case(case)
    losses = []
    compiled = lib.endswith("_compiled")
    if name == "gpt":
        import gpt_step
        step = gpt_step.build("ember" if lib.startswith("ember") else "torch", "manual")
    else:
        builder, data = MODELS[name]
        x, y = data(np.random.default_rng(0))
        make = ember_step if lib.startswith("ember") else torch_step
        step = make(builder, x, y, optimizer, seeded=True, losses=None if compiled else losses)
    out = {"lib": lib, "case": case, "import_ms": import_ms}
    if compiled:   # (the loss read outside the step: item() inside would break its graph)
        step = H.compiled(lib, step)
        out["info"] = H.library_info("ember" if lib.startswith("ember") else "torch")
        out["first_calls"], loss = H.first_calls(step)
        losses.append(float(loss.item()))
        out.update(H.measure(step, lib, opts))
        out["loss"] = losses[:1]
        return out
    if case in WINDOW:
        out.update(cold_window(step, lib))
        out["info"] = H.library_info(lib)
        out["cache_dirs"] = {v: os.environ.get(v) for v in ("NUMBA_CACHE_DIR", "EMBER_CACHE_DIR")}
        out["loss"] = losses[:1]
        return out
    out["info"] = H.library_info(lib)
    if case == "lenet_cold":
        # the first steps as a new user meets them, then (after waiting for the compiles) warm
        times = []
        for _ in range(5):
            t = time.perf_counter()
            step()
            times.append((time.perf_counter() - t) * 1e3)
        out["first_steps"] = times
        out["cache_dirs"] = {v: os.environ.get(v) for v in ("NUMBA_CACHE_DIR", "EMBER_CACHE_DIR")}
    out.update(H.measure(step, lib, opts))
    out["loss"] = losses[:1]
    return out


# ----------------------------------------------------------------------------- runner
def columns(avx512):
    cols = {"ember": ("ember", None), "torch": ("torch", None)}
    if avx512:
        cols["ember_avx2"] = ("ember", {"EMBER_CPU_ISA": "avx2"})
    cols["ember_compiled"] = ("ember_compiled", None)
    cols["torch_compiled"] = ("torch_compiled", None)
    return cols


def collect(opts, machine, log=None, only=None):
    cases = list(only or (QUICK_CASES if opts.quick else CASES))
    warm = [c for c in cases if c not in COLD]
    cols = columns(machine.get("host_isa") == "avx512")
    plan = {"ember": warm, "torch": warm}
    if "ember_avx2" in cols:
        plan["ember_avx2"] = [c for c in warm if c in AVX2_CASES]
    for col in ("ember_compiled", "torch_compiled"):
        plan[col] = [c for c in warm if c in COMPILED_CASES]
    res = H.run_matrix(SCRIPT, plan, cols, opts, log) if warm else {}
    cold = [c for c in COLD if c in cases]
    installed = tempfile.mkdtemp(prefix="ember-prebuilt-")
    try:
        # (not in a --quick smoke run: the install step compiles for about a minute)
        prebuilt = (_prebuild(installed, log) if not opts.quick and any(c in WINDOW for c in cold)
                    else None)
        for case in cold:
            libs = ["ember", "torch"] + (["ember_prebuilt"] if case in WINDOW and prebuilt
                                         else [])
            res[case] = {lib: [] for lib in libs}
            for r in range(opts.repeats):
                for lib in libs[r % len(libs):] + libs[:r % len(libs)]:
                    env = ({"EMBER_PREBUILT_DIR": prebuilt["dir"]} if lib == "ember_prebuilt"
                           else {})
                    out = _spawn_fresh(case, lib, opts, env)
                    if lib == "ember_prebuilt":
                        out["prebuild_s"] = prebuilt["seconds"]
                    res[case][lib].append(out)
                    if log:
                        log(f"  {SCRIPT} {case} {lib} #{r + 1}: " + out.get("error", "ok"))
    finally:
        shutil.rmtree(installed, ignore_errors=True)
    return res


def _spawn_fresh(case, lib, opts, env):
    """One worker process with new, empty kernel cache directories (a new install's)."""
    tmp = tempfile.mkdtemp(prefix="ember-cold-")
    try:
        env = dict(env, NUMBA_CACHE_DIR=os.path.join(tmp, "numba"),
                   EMBER_CACHE_DIR=os.path.join(tmp, "ember"))
        return H.spawn(SCRIPT, lib, case, opts, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _prebuild(root, log=None):
    """ember's install step, ``ember prebuild``, into ``root``/prebuilt with its own fresh
    caches: {"dir", "seconds"}, or None when it failed."""
    env = dict(os.environ, EMBER_PREBUILT_DIR=os.path.join(root, "prebuilt"),
               NUMBA_CACHE_DIR=os.path.join(root, "numba"),
               EMBER_CACHE_DIR=os.path.join(root, "ember"))
    env["PYTHONPATH"] = H.ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                  else "")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ember", "prebuild"], env=env, cwd=H.ROOT,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if log:
        log(f"  ember prebuild: rc {proc.returncode}, {seconds:.1f} s")
    if proc.returncode:
        return None
    return {"dir": env["EMBER_PREBUILT_DIR"], "seconds": seconds}


def render(res):
    """{"train_step": markdown, "first_step": markdown} from ``collect``'s results."""
    out = {}
    rows = []
    avx2 = any("ember_avx2" in v for v in res.values())
    for case, cols in res.items():
        if case in COLD:
            continue
        e, t = H.metric(cols.get("ember", []), "median"), H.metric(cols.get("torch", []), "median")
        row = [LABELS[case], H.cell(e), H.cell(t), H.ratio(e, t),
               H.cell(H.metric(cols.get("ember", []), "first")),
               H.cell(H.metric(cols.get("torch", []), "first"))]
        if avx2:
            a = H.metric(cols.get("ember_avx2", []), "median")
            row += [H.cell(a), H.ratio(a, t)] if a else ["", ""]
        ec = H.metric(cols.get("ember_compiled", []), "median")
        tc = H.metric(cols.get("torch_compiled", []), "median")
        row += [H.cell(ec), H.ratio(ec, t) if ec else "", H.cell(tc), H.ratio(ec, tc) if ec and tc
                else "", H.first_calls_cell(cols.get("ember_compiled", [])),
                H.first_calls_cell(cols.get("torch_compiled", []))]
        loss = H.agree([{"sample": r.get("loss")} for c in cols.values() for r in c])
        row.append({True: "yes", False: "**no**", None: "-"}[loss])
        rows.append(row)
    head = ["model", "ember", "torch", "ratio", "ember 1st step", "torch 1st step"]
    if avx2:
        head += ["ember, forced AVX2 (AVX-512 host)", "ratio"]
    head += ["ember.compile", "ratio to torch", "torch.compile", "ember.compile / torch.compile",
             "ember.compile 1st / 2nd call", "torch.compile 1st / 2nd call"]
    head.append("same 1st loss")
    if rows:
        out["train_step"] = H.table(head, rows)
    cold = res.get("lenet_cold")
    if cold:
        rows = []
        for lib in ("ember", "torch"):
            rs = [r for r in cold.get(lib, []) if "first_steps" in r]
            first = H.spread([r["first_steps"][0] for r in rs])
            nxt = H.spread([max(r["first_steps"][1:]) for r in rs])
            excess = H.spread([r["first_steps"][0] - r["median"] for r in rs])
            compiles = _compiles(lib, rs, "compiles", "compile_s")
            rows.append([lib, H.cell(H.metric(rs, "import_ms")), H.cell(first),
                         H.cell(nxt), H.cell(H.metric(rs, "median")), H.cell(excess),
                         compiles])
        out["first_step"] = H.table(["library", "import (NumPy already imported)", "1st step",
                                     "slowest of steps 2-5",
                                     "warm step", "1st step - warm step",
                                     "background compiles (one thread)"], rows)
    windows = [c for c in WINDOW if res.get(c)]
    if windows:
        rows = []
        build = next((r["prebuild_s"] for c in windows for r in res[c].get("ember_prebuilt", [])
                      if "prebuild_s" in r), None)
        names = {"ember": "ember", "torch": "torch",
                 "ember_prebuilt": "ember after `ember prebuild`"
                                   + (f" (its install step: {build:.0f} s)" if build else "")}
        for case in windows:
            counts = {}
            for lib in ("ember", "ember_prebuilt", "torch"):
                rs = [r for r in res[case].get(lib, []) if "steps_in_window" in r]
                if not rs:
                    continue
                counts[lib] = H.metric(rs, "steps_in_window")
                compiles = _compiles(lib, rs, "compiles_in_window", "compile_s_in_window")
                rows.append([COLD_LABELS[case], names[lib], _count(counts[lib]),
                             H.cell(H.metric(rs, "import_ms")),
                             H.cell(H.scaled(H.metric(rs, "first_step_end_s"), 1e3), "s"),
                             compiles])
            t = counts.get("torch")
            for lib in ("ember", "ember_prebuilt"):
                e = counts.get(lib)
                if e and t:
                    ratio = ("torch finished none" if not t["median"] and e["median"]
                             else H.ratio(e, t))
                    rows.append([COLD_LABELS[case], names[lib].split(" (")[0] + " / torch",
                                 ratio, "", "", ""])
        out["cold_start"] = H.table(
            ["training", "library", f"steps finished in the process's first {WINDOW_S:g} s",
             "import (NumPy already imported)", "1st step done, since process start",
             "background compiles finished in the window"], rows)
    return out


def _count(s):
    """'median (min-max)' of a spread of counts."""
    if s is None:
        return "-"
    if s["n"] == 1 or s["min"] == s["max"]:
        return f"{s['median']:.0f}"
    return f"{s['median']:.0f} ({s['min']:.0f}-{s['max']:.0f})"


def _compiles(lib, rs, count_key, seconds_key):
    """The background-compiles cell: ember's kernel count and compile time (ms), "none" when no
    process compiled, "-" for torch or without the metric."""
    comp = H.metric(rs, count_key)
    if not lib.startswith("ember") or comp is None:
        return "-"
    return (f"{comp['median']:.0f} kernels, {H.cell(H.scaled(H.metric(rs, seconds_key), 1e3))}"
            if comp["max"] else "none")


def main():
    H.script_main(__doc__, "train_step", worker, collect, render, CASES)


if __name__ == "__main__":
    main()
