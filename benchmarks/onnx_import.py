"""ONNX import: inference of a model imported with ``ember.onnx.load_model`` against onnxruntime
and against the same model written in ember and traced, and the load time of a ~100 MB model.

Usage: python benchmarks/onnx_import.py [--quick] [--repeats 3] [--only lenet,resnet,lm,load]
       python benchmarks/onnx_import.py --worker ember|ember_import|ort --case lenet --onnx-dir D

Models (eval mode, float32, the weights of ``_harness.load_seeded``), batch 1 and 64 each:
LeNet-5 (1x28x28), the ResNet-style block net of benchmarks/jit.py (3x32x32) and the word
language model of benchmarks/train_step.py (embedding 10000x200, 2-layer LSTM 200, decoder;
35 tokens). Each is exported once by ``ember.onnx.export`` (dynamic batch axis) to a temporary
file, then every column runs in its own process with the library's default settings:
  ember imported          ``ember.onnx.load_model(file)`` called eagerly under no_grad
  imported traced + opt   ``ember.jit.optimize(ember.jit.trace(imported, (x,)))``
  ember traced + opt      the ember model itself, traced and optimised (what the file came from)
  onnxruntime             an ``InferenceSession`` on the file (default options and threads), in
                          a process that imports neither ember nor torch
Load: a 1024-4096-4096-1024 MLP (about 100 MB of float32 initializers; --quick: a 13 MB one),
``ember.onnx.load_model(path)`` against ``onnxruntime.InferenceSession(path)``, each timed from
the file on disk (a fresh process's first load includes importing onnx and the importers).
The outputs of every variant are compared at batch 64. Nothing is asserted.
"""
import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402

SCRIPT = "onnx_import.py"
CASES = ("lenet", "resnet", "lm", "load")
QUICK_CASES = ("lenet", "load")
BATCHES = (1, 64)
LABELS = {"lenet": "LeNet-5", "resnet": "ResNet-style blocks", "lm": "LSTM word LM (seq 35)"}
INPUT = {"lenet": (1, 28, 28), "resnet": (3, 32, 32)}
LOAD_WIDTH = {False: 4096, True: 1024}    # hidden width of the load-time MLP (quick: smaller)


def build(case, nn):
    from jit import resnet
    from train_step import lenet, word_lm
    if case == "load_model":
        w = LOAD_WIDTH[_QUICK]
        return nn.Sequential(nn.Linear(1024, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(),
                             nn.Linear(w, 1024))
    return {"lenet": lenet, "resnet": resnet, "lm": word_lm}[case](nn)


_QUICK = False


def inputs(case, batch):
    """The input array at ``batch`` (tokens [35, batch] for the LM)."""
    import numpy as np
    r = np.random.default_rng(batch)
    if case == "lm":
        return r.integers(0, 10000, (35, batch))
    return r.standard_normal((batch,) + INPUT[case]).astype(np.float32)


def _path(onnx_dir, case):
    return os.path.join(onnx_dir, f"{case}.onnx")


def _export(case, onnx_dir):
    import warnings
    import ember
    import ember.onnx
    model = H.load_seeded(build(case, ember.nn), ember.tensor).eval()
    if case == "load_model":
        x, axis = ember.randn(2, 1024), 0
    else:
        x, axis = ember.tensor(inputs(case, 2)), 1 if case == "lm" else 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ember.onnx.export(model, (x,), _path(onnx_dir, case), input_names=["x"],
                          dynamic_axes={"x": {axis: "batch"}})
    return {"exported": _path(onnx_dir, case), "bytes": os.path.getsize(_path(onnx_dir, case))}


def _ember_variants(lib, case, opts, onnx_dir):
    """``ember``: the ember model traced + optimised; ``ember_import``: the imported model,
    eager and traced + optimised."""
    import warnings
    import ember
    import ember.jit
    import ember.onnx
    if lib == "ember":
        model = H.load_seeded(build(case, ember.nn), ember.tensor).eval()
    else:
        model = ember.onnx.load_model(_path(onnx_dir, case)).eval()
    out = {}
    for batch in BATCHES:
        x = ember.tensor(inputs(case, batch))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fast = ember.jit.optimize(ember.jit.trace(model, (x,)))
        with ember.no_grad():
            if lib == "ember_import":
                out[f"eager_{batch}"] = H.measure(lambda: model(x), lib, opts)
            out[f"opt_{batch}"] = H.measure(lambda: fast(x), lib, opts)
            if batch == BATCHES[-1]:
                if lib == "ember_import":
                    out["sample_eager"] = H.sample(model(x).numpy())
                out["sample_opt"] = H.sample(fast(x).numpy())
    return out


def _ort(case, opts, onnx_dir):
    import onnxruntime as ort
    sess = ort.InferenceSession(_path(onnx_dir, case), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    out = {}
    for batch in BATCHES:
        feed = {name: inputs(case, batch)}
        out[f"opt_{batch}"] = H.measure(lambda: sess.run(None, feed), "ort", opts)
        if batch == BATCHES[-1]:
            out["sample_opt"] = H.sample(sess.run(None, feed)[0])
    return out


def _load(lib, opts, onnx_dir):
    """Load time of the large model from disk (the first load timed on its own)."""
    path = _path(onnx_dir, "load_model")
    if lib == "ort":
        import onnxruntime as ort

        def load():
            return ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    else:
        import ember.onnx

        def load():
            return ember.onnx.load_model(path)
    res = H.measure(load, lib, opts, wait_for_compiles=False)
    res["bytes"], res["width"] = os.path.getsize(path), LOAD_WIDTH[_QUICK]
    return {"load": res}


def worker(lib, case, opts, onnx_dir=None):
    out = {"lib": lib, "case": case}
    if lib == "export":
        out.update(_export(case, onnx_dir))
        return out
    out["info"] = H.library_info("ember" if lib.startswith("ember") else lib)
    if case == "load":
        out.update(_load(lib, opts, onnx_dir))
    elif lib == "ort":
        out.update(_ort(case, opts, onnx_dir))
    else:
        out.update(_ember_variants(lib, case, opts, onnx_dir))
    return out


# ----------------------------------------------------------------------------- runner
def collect(opts, log=None, only=None):
    cases = list(only or (QUICK_CASES if opts.quick else CASES))
    onnx_dir = tempfile.mkdtemp(prefix="ember-bench-onnx-import-")
    extra = ["--onnx-dir", onnx_dir] + (["--quick"] if opts.quick else [])
    try:
        exported = {}
        for case in cases:
            model = "load_model" if case == "load" else case
            exported[case] = H.spawn(SCRIPT, "export", model, opts, extra_args=extra)
            if log:
                log(f"  {SCRIPT} {case} export: " + exported[case].get("error", "ok"))
        ok = [c for c in cases if "error" not in exported[c]]
        cols = {"ember_import": ("ember_import", None), "ort": ("ort", None),
                "ember": ("ember", None)}
        plan = {"ember_import": ok, "ort": ok, "ember": [c for c in ok if c != "load"]}
        res = H.run_matrix(SCRIPT, plan, cols, opts, log, extra_args=extra)
    finally:
        shutil.rmtree(onnx_dir, ignore_errors=True)
    for case in cases:
        if "error" in exported[case]:
            res[case] = {"ember_import": [exported[case]]}
    return res


def render(res):
    rows = []
    for case, cols in res.items():
        if case == "load":
            continue
        imp, o, e = cols.get("ember_import", []), cols.get("ort", []), cols.get("ember", [])
        samples = [{"sample": r.get(k)} for c in cols.values() for r in c
                   for k in ("sample_eager", "sample_opt")]
        same = {True: "yes", False: "**no**", None: "-"}[H.agree(samples)]
        for batch in BATCHES:
            ie, io = H.metric(imp, f"eager_{batch}", "median"), \
                H.metric(imp, f"opt_{batch}", "median")
            oo, eo = H.metric(o, f"opt_{batch}", "median"), H.metric(e, f"opt_{batch}", "median")
            rows.append([LABELS[case], batch, H.cell(ie), H.cell(io),
                         H.cell(eo), H.cell(oo), H.ratio(ie, oo), H.ratio(io, oo),
                         H.ratio(io, eo), same])
    head = ["model", "batch", "ember imported", "imported traced + opt", "ember traced + opt",
            "onnxruntime", "imported / ORT", "imported opt / ORT", "imported opt / ember opt",
            "same outputs"]
    tables = {"onnx import inference": H.table(head, rows)}
    if "load" in res:
        cols = res["load"]
        done = [r["load"] for c in cols.values() for r in c if "load" in r]
        size, w = (done[0]["bytes"], done[0]["width"]) if done else (None, "?")
        lrows = []
        mb = f"{size / 1e6:.0f} MB" if size else "?"
        for col, label in (("ember_import", "ember.onnx.load_model"),
                           ("ort", "onnxruntime.InferenceSession")):
            r = cols.get(col, [])
            lrows.append([f"MLP 1024-{w}-{w}-1024, {mb}", label,
                          H.cell(H.metric(r, "load", "first"), "ms"),
                          H.cell(H.metric(r, "load", "median"), "ms")])
        tables["onnx import load time"] = \
            H.table(["model", "loader", "first load", "median load"], lrows)
    errs = [f"{case} {col}: {m}" for case, cols in res.items() for col, rs in cols.items()
            for m in H.errors(rs)]
    if errs:
        tables["errors"] = "\n".join(errs)
    return tables


def main():
    global _QUICK
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    H.add_worker_arguments(ap)
    ap.add_argument("--only", default=None, help="cases: lenet,resnet,lm,load")
    ap.add_argument("--onnx-dir", default=None)
    args = ap.parse_args()
    _QUICK = args.quick
    if args.worker:
        H.emit(worker(args.worker, args.case, H.worker_options(args), args.onnx_dir))
        return
    H.collect_and_report(args, "onnx_import", collect, render, machine_arg=False, cases=CASES)


if __name__ == "__main__":
    main()
