"""Inference latency: ember eager and traced + optimised vs torch eager and frozen vs onnxruntime.

Usage: python benchmarks/jit.py [--quick] [--repeats 3] [--only lenet,mlp,resnet]
       python benchmarks/jit.py --worker ember|torch|ort --case lenet [--onnx-dir DIR]

Models (eval mode, float32, the same weights in every library: ``_harness.load_seeded``), each at
batch 1 and 64: LeNet-5 (28x28), the MLP 784-512-512-10, and a ResNet-style block net (3x32x32
input, a 16-channel stem, three residual blocks with batch norm, the second strided with a 1x1
downsample, global average pool, linear). Columns, each library in its own process with its
default threads:
  ember eager            ``model(x)`` under ``ember.no_grad()``
  ember traced + opt     ``ember.jit.optimize(ember.jit.trace(model, (x,)))`` (frozen weights,
                         batch norm folded, pointwise chains fused; calls run through an
                         inference plan per input shape, docs/jit.md)
  ember.compile          ``ember.compile(model)`` called under ``ember.no_grad()`` (live
                         parameters: the plan of the graph frozen on their values,
                         ``ember.jit.plan_live``; timed once the plan is built and tuned)
  torch eager            ``model(x)`` under ``torch.inference_mode()``
  torch frozen + opt     ``torch.jit.optimize_for_inference(torch.jit.freeze(
                         torch.jit.trace(model, (x,))))``
  onnxruntime            the model exported by ``ember.onnx.export`` (dynamic batch axis), run by
                         an ``InferenceSession`` with default options (all graph optimisations,
                         its default thread pool), in a process that imports neither ember nor torch;
                         the ``ort_1thread`` column the same with ``intra_op_num_threads=1``
The first rows of every variant's output at batch 64 are compared. Nothing is asserted. README
tables: ``inference`` (every row) and ``batch1`` (the batch-1 rows on their own, with
``ember.compile`` against onnxruntime at one thread and at its defaults).
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402

SCRIPT = "jit.py"
CASES = ("lenet", "mlp", "resnet")
QUICK_CASES = ("lenet", "mlp")
AVX2_CASES = ("lenet",)
BATCHES = (1, 64)
LABELS = {"lenet": "LeNet-5", "mlp": "MLP 784-512-512-10", "resnet": "ResNet-style blocks"}
INPUT = {"lenet": (1, 28, 28), "mlp": (784,), "resnet": (3, 32, 32)}
ORT_THREADS = "EMBER_BENCH_ORT_THREADS"   # onnxruntime's intra_op_num_threads (unset: default)


def resnet(nn):
    F = nn.functional

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))
                         if stride != 1 or cin != cout else None)

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return F.relu(y + (self.down(x) if self.down is not None else x))

    return nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         Block(16, 16, 1), Block(16, 32, 2), Block(32, 32, 1),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def build(case, nn):
    from train_step import lenet, mlp
    return {"lenet": lenet, "mlp": mlp, "resnet": resnet}[case](nn)


def inputs(case, batch):
    import numpy as np
    return np.random.default_rng(batch).standard_normal((batch,) + INPUT[case]).astype(np.float32)


def _compiled(model, x, opts):
    """``ember.compile(model)`` warmed at ``x`` (under ``no_grad``) until its live inference plan
    is built and past its retuning (``plan.RETUNE_AFTER`` runs), as a step for ``measure``."""
    import ember
    from ember.jit import plan, plan_live
    compiled = ember.compile(model)
    plan_live.wait_kernels(600)
    for _ in range(plan_live.STABLE_CALLS + 1):
        compiled(x)
    H._wait_ember_compiles(opts.compile_wait)
    for _ in range(plan.RETUNE_AFTER + 2):
        compiled(x)
    return lambda: compiled(x)


def _ember(case, opts):
    import warnings
    import ember
    import ember.jit
    model = H.load_seeded(build(case, ember.nn), ember.tensor).eval()
    out = {}
    for batch in BATCHES:
        x = ember.tensor(inputs(case, batch))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fast = ember.jit.optimize(ember.jit.trace(model, (x,)))
        with ember.no_grad():
            out[f"eager_{batch}"] = H.measure(lambda: model(x), "ember", opts)
            out[f"opt_{batch}"] = H.measure(lambda: fast(x), "ember", opts)
            compiled = _compiled(model, x, opts)
            out[f"compiled_{batch}"] = H.measure(compiled, "ember", opts)
            if batch == BATCHES[-1]:
                out["sample_eager"] = H.sample(model(x).numpy())
                out["sample_opt"] = H.sample(fast(x).numpy())
                out["sample_compiled"] = H.sample(compiled().numpy())
    return out


def _torch(case, opts):
    import torch
    model = H.load_seeded(build(case, torch.nn), torch.from_numpy).eval()
    out = {}
    for batch in BATCHES:
        x = torch.from_numpy(inputs(case, batch))
        with torch.no_grad():
            traced = torch.jit.trace(model, (x,))
            frozen = torch.jit.optimize_for_inference(torch.jit.freeze(traced))
        with torch.inference_mode():
            out[f"eager_{batch}"] = H.measure(lambda: model(x), "torch", opts)
        with torch.no_grad():
            out[f"opt_{batch}"] = H.measure(lambda: frozen(x), "torch", opts)
        if batch == BATCHES[-1]:
            with torch.no_grad():
                out["sample_eager"] = H.sample(model(x).numpy())
                out["sample_opt"] = H.sample(frozen(x).numpy())
    return out


def _ort(case, opts, onnx_dir):
    import onnxruntime as ort
    so = ort.SessionOptions()
    if os.environ.get(ORT_THREADS):   # the ort_1thread column
        so.intra_op_num_threads = int(os.environ[ORT_THREADS])
    sess = ort.InferenceSession(os.path.join(onnx_dir, f"{case}.onnx"), so,
                                providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    out = {}
    for batch in BATCHES:
        feed = {name: inputs(case, batch)}
        out[f"opt_{batch}"] = H.measure(lambda: sess.run(None, feed), "ort", opts)
        if batch == BATCHES[-1]:
            out["sample_opt"] = H.sample(sess.run(None, feed)[0])
    return out


def _export(case, onnx_dir):
    import ember
    import ember.onnx
    model = H.load_seeded(build(case, ember.nn), ember.tensor).eval()
    x = ember.tensor(inputs(case, 2))
    ember.onnx.export(model, (x,), os.path.join(onnx_dir, f"{case}.onnx"), input_names=["x"],
                      dynamic_axes={"x": [0]})
    return {"exported": os.path.join(onnx_dir, f"{case}.onnx")}


def worker(lib, case, opts, onnx_dir=None):
    return H.export_or_run(lib, case, lambda: _export(case, onnx_dir),
                           lambda: ({"ember": _ember, "torch": _torch}[lib](case, opts)
                                    if lib != "ort" else _ort(case, opts, onnx_dir)))


# ----------------------------------------------------------------------------- runner
def collect(opts, machine, log=None, only=None):
    cases = list(only or (QUICK_CASES if opts.quick else CASES))
    onnx_dir = tempfile.mkdtemp(prefix="ember-bench-onnx-")
    try:
        exported = H.export_all(SCRIPT, cases, opts, onnx_dir, log)
        cols = {"ember": ("ember", None), "torch": ("torch", None), "ort": ("ort", None),
                "ort_1thread": ("ort", {ORT_THREADS: "1"})}
        ok = [c for c in cases if "error" not in exported[c]]
        plan = {"ember": cases, "torch": cases, "ort": ok, "ort_1thread": ok}
        if machine.get("host_isa") == "avx512":
            cols["ember_avx2"] = ("ember", {"EMBER_CPU_ISA": "avx2"})
            plan["ember_avx2"] = [c for c in cases if c in AVX2_CASES]
        res = H.run_matrix(SCRIPT, plan, cols, opts, log, extra_args=("--onnx-dir", onnx_dir))
    finally:
        shutil.rmtree(onnx_dir, ignore_errors=True)
    for case in cases:
        if "error" in exported[case]:
            res[case]["ort"] = res[case]["ort_1thread"] = [exported[case]]
    return res


def render(res):
    avx2 = any("ember_avx2" in v for v in res.values())
    rows = []
    for case, cols in res.items():
        e, t, o = cols.get("ember", []), cols.get("torch", []), cols.get("ort", [])
        samples = [{"sample": r.get(k)} for c in cols.values() for r in c
                   for k in ("sample_eager", "sample_opt", "sample_compiled")]
        same = {True: "yes", False: "**no**", None: "-"}[H.agree(samples)]
        for batch in BATCHES:
            ee, eo = H.metric(e, f"eager_{batch}", "median"), H.metric(e, f"opt_{batch}", "median")
            te, to = H.metric(t, f"eager_{batch}", "median"), H.metric(t, f"opt_{batch}", "median")
            oo = H.metric(o, f"opt_{batch}", "median")
            ec = H.metric(e, f"compiled_{batch}", "median")
            row = [LABELS[case], batch, H.cell(ee), H.cell(te), H.ratio(ee, te),
                   H.cell(eo), H.cell(ec), H.cell(to), H.cell(oo), H.ratio(eo, to),
                   H.ratio(eo, oo)]
            if avx2:
                a = cols.get("ember_avx2", [])
                ae, ao = (H.metric(a, f"eager_{batch}", "median"),
                          H.metric(a, f"opt_{batch}", "median"))
                row += ([f"{H.cell(ae)} / {H.cell(ao)}",
                         f"{H.ratio(ae, te)} / {H.ratio(ao, oo)}"] if ae else ["", ""])
            row.append(same)
            rows.append(row)
    head = ["model", "batch", "ember eager", "torch eager", "ratio", "ember traced + opt",
            "ember.compile", "torch frozen + opt", "onnxruntime", "opt / torch frozen",
            "opt / onnxruntime"]
    if avx2:
        head += ["ember forced AVX2 (AVX-512 host) eager / opt", "ratios (/ torch eager, / ORT)"]
    head.append("same outputs")
    return {"inference": H.table(head, rows), "batch1": batch1(res)}


def batch1(res):
    """The batch-1 rows (a single request served by the model as written) on their own: eager
    against torch, the traced and the compiled model against onnxruntime (its defaults, and one
    thread)."""
    rows = []
    for case, cols in res.items():
        e, t, o = cols.get("ember", []), cols.get("torch", []), cols.get("ort", [])
        o1 = cols.get("ort_1thread", [])
        ee, te = H.metric(e, "eager_1", "median"), H.metric(t, "eager_1", "median")
        eo, oo = H.metric(e, "opt_1", "median"), H.metric(o, "opt_1", "median")
        ec, o1 = H.metric(e, "compiled_1", "median"), H.metric(o1, "opt_1", "median")
        rows.append([LABELS[case], H.cell(ee), H.cell(te), H.ratio(ee, te), H.cell(eo),
                     H.cell(ec), H.cell(oo), H.cell(o1), H.ratio(eo, oo), H.ratio(ec, oo),
                     H.ratio(ec, o1)])
    return H.table(["model, batch 1", "ember eager", "torch eager", "ratio",
                    "ember traced + opt", "ember.compile", "onnxruntime",
                    "onnxruntime 1 thread", "opt / onnxruntime", "compile / onnxruntime",
                    "compile / onnxruntime 1 thread"], rows)


def main():
    H.script_main(__doc__, "inference", worker, collect, render, CASES, onnx_dir=True)


if __name__ == "__main__":
    main()
