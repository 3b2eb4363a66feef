"""ONNX export time (ember alone): trace + convert + constant folding + checker, to memory.

Usage: python benchmarks/onnx_export.py [--quick] [--repeats 3]
       python benchmarks/onnx_export.py --worker ember --case export

Models: the JIT test models ``resnet`` (ResNet-style net with batch norm) and ``lstm_lm`` (2-layer
LSTM word language model, unrolled), tests/jit/models.py. Inference latency of the exported
models in onnxruntime against ember and torch is in benchmarks/jit.py.
"""
import argparse
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402

SCRIPT = "onnx_export.py"
MODELS = ("resnet", "lstm_lm")


def worker(lib, case, opts):
    import ember
    import ember.onnx
    if H.ROOT not in sys.path:
        sys.path.insert(0, H.ROOT)
    from tests.jit import models as M
    out = {"lib": lib, "case": case, "info": H.library_info(lib)}
    for name in MODELS:
        m = M.MODELS[name]().eval()
        x = (M.example(m),)
        out[name] = H.measure(lambda: ember.onnx.export(m, x, io.BytesIO()), lib, opts)
        mp = ember.onnx.build_model(m, x)
        out[name].update(nodes=len(mp.graph.node), initializers=len(mp.graph.initializer))
    return out


def collect(opts, machine, log=None, only=None):
    return H.run_matrix(SCRIPT, ["export"], {"ember": ("ember", None)}, opts, log)


def render(res):
    e = res.get("export", {}).get("ember", [])
    rows = []
    for name in MODELS:
        nodes = next((r[name]["nodes"] for r in e if name in r), "-")
        rows.append([name, H.cell(H.metric(e, name, "median")), H.cell(H.metric(e, name, "first")),
                     nodes])
    return {"onnx_export": H.table(["model", "export", "first export in the process",
                                    "ONNX nodes"], rows)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    H.add_worker_arguments(ap)
    args = ap.parse_args()
    if args.worker:
        H.emit(worker(args.worker, args.case, H.worker_options(args)))
        return
    H.collect_and_report(args, "onnx_export", collect, render)


if __name__ == "__main__":
    main()
