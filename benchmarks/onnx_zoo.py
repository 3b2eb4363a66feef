"""ONNX model zoo classifiers at batch 1: imported with ``ember.onnx.load_model`` against
onnxruntime on the same file, each in its own process.

Usage: python benchmarks/onnx_zoo.py [--quick] [--repeats 3]
                                     [--only resnet50,squeezenet1_1,densenet121,googlenet]
       python benchmarks/onnx_zoo.py --worker export|ember|ort --case googlenet --onnx-dir D

Models (benchmarks/zoo_models.py, 3x224x224, batch 1): ResNet-50, SqueezeNet 1.1, DenseNet-121
and Inception v1 (GoogLeNet as the zoo's BVLC model, with LRN), written in torch with generated
weights and exported once by ``torch.onnx.export`` (TorchScript exporter, opset 17) to a
temporary file: there is no network here, and the zoo's weights do not change the work. Columns:
  ember eager        ``ember.onnx.load_model(file)`` called under ``no_grad``
  ember traced + opt ``ember.jit.optimize(ember.jit.trace(imported, (x,)))``
  ember best         the faster of the two (what a user who tries both keeps)
  onnxruntime        ``InferenceSession(file)`` with default session options and threads, in a
                     process that imports neither ember nor torch
The outputs (logits) of every variant are compared. Nothing is asserted; see
benchmarks/run_all.py for the README table (``onnx zoo``).
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402

SCRIPT = "onnx_zoo.py"
CASES = ("resnet50", "squeezenet1_1", "densenet121", "googlenet")
QUICK_CASES = ("squeezenet1_1", "googlenet")
LABELS = {"resnet50": "ResNet-50", "squeezenet1_1": "SqueezeNet 1.1",
          "densenet121": "DenseNet-121", "googlenet": "Inception v1 (GoogLeNet)"}


def inputs():
    import numpy as np
    return np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)


def _path(onnx_dir, case):
    return os.path.join(onnx_dir, f"{case}.onnx")


def _export(case, onnx_dir):
    import warnings
    import torch
    from zoo_models import build
    model = build(case)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.from_numpy(inputs()),), _path(onnx_dir, case),
                          dynamo=False, opset_version=17, input_names=["x"],
                          output_names=["logits"])
    return {"exported": _path(onnx_dir, case), "bytes": os.path.getsize(_path(onnx_dir, case))}


def _ember(case, opts, onnx_dir):
    import warnings
    import ember
    import ember.jit
    import ember.onnx
    model = ember.onnx.load_model(_path(onnx_dir, case)).eval()
    x = ember.tensor(inputs())
    out = {}
    with ember.no_grad():
        out["eager"] = H.measure(lambda: model(x), "ember", opts)
        out["sample_eager"] = H.sample(model(x).numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = ember.jit.optimize(ember.jit.trace(model, (x,)))
    with ember.no_grad():
        out["opt"] = H.measure(lambda: fast(x), "ember", opts)
        out["sample_opt"] = H.sample(fast(x).numpy())
    return out


def _ort(case, opts, onnx_dir):
    import onnxruntime as ort
    sess = ort.InferenceSession(_path(onnx_dir, case), providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: inputs()}
    return {"opt": H.measure(lambda: sess.run(None, feed), "ort", opts),
            "sample_opt": H.sample(sess.run(None, feed)[0])}


def worker(lib, case, opts, onnx_dir=None):
    return H.export_or_run(lib, case, lambda: _export(case, onnx_dir),
                           lambda: (_ember if lib == "ember" else _ort)(case, opts, onnx_dir))


# ----------------------------------------------------------------------------- runner
def collect(opts, machine, log=None, only=None):
    cases = list(only or (QUICK_CASES if opts.quick else CASES))
    onnx_dir = tempfile.mkdtemp(prefix="ember-bench-onnx-zoo-")
    extra = ("--onnx-dir", onnx_dir)
    try:
        exported = H.export_all(SCRIPT, cases, opts, onnx_dir, log)
        ok = [c for c in cases if "error" not in exported[c]]
        cols = {"ember": ("ember", None), "ort": ("ort", None)}
        res = H.run_matrix(SCRIPT, ok, cols, opts, log, extra_args=extra)
    finally:
        shutil.rmtree(onnx_dir, ignore_errors=True)
    for case in cases:
        if "error" in exported[case]:
            res[case] = {"ember": [exported[case]]}
    return res


def best(results):
    """The spread over processes of each process's faster variant (eager or traced + opt)."""
    vals = []
    for r in results:
        ms = [r[k]["median"] for k in ("eager", "opt") if isinstance(r.get(k), dict)]
        if ms:
            vals.append(min(ms))
    return H.spread(vals)


def render(res):
    rows = []
    for case, cols in res.items():
        e, o = cols.get("ember", []), cols.get("ort", [])
        samples = [{"sample": r.get(k)} for c in cols.values() for r in c
                   for k in ("sample_eager", "sample_opt")]
        same = {True: "yes", False: "**no**", None: "-"}[H.agree(samples)]
        ee, eo, eb = H.metric(e, "eager", "median"), H.metric(e, "opt", "median"), best(e)
        oo = H.metric(o, "opt", "median")
        rows.append([LABELS[case], H.cell(ee), H.cell(eo), H.cell(eb), H.cell(oo),
                     H.ratio(eb, oo), same])
    return {"onnx zoo": H.table(["model (batch 1, 224x224)", "ember eager", "ember traced + opt",
                                 "ember best", "onnxruntime", "best / onnxruntime",
                                 "same outputs"], rows)}


def main():
    H.script_main(__doc__, "onnx_zoo", worker, collect, render, CASES, onnx_dir=True)


if __name__ == "__main__":
    main()
