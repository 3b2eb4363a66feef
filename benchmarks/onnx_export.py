"""ONNX export benchmark: export time for the ResNet-style net and the LSTM word language model,
then inference latency of onnxruntime vs ember eager vs ember traced (ember.jit) at batch 1 and
64 for the LeNet (with BatchNorm) and the MLP. Models are the JIT test models (tests/jit).

    python benchmarks/onnx_export.py [--repeat N]
"""
import argparse
import io
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from tests.jit import models as M  # noqa: E402


def _best(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def export_times(repeat):
    rows = []
    for name in ("resnet", "lstm_lm"):
        m = M.MODELS[name]().eval()
        x = (M.example(m),)
        t = _best(lambda: ember.onnx.export(m, x, io.BytesIO()), max(2, repeat // 10))
        mp = ember.onnx.build_model(m, x)
        rows.append((name, t * 1e3, len(mp.graph.node), len(mp.graph.initializer)))
    print("export time (trace + convert + fold + check)")
    print(f"  {'model':10s} {'ms':>8s} {'nodes':>6s} {'inits':>6s}")
    for r in rows:
        print(f"  {r[0]:10s} {r[1]:8.1f} {r[2]:6d} {r[3]:6d}")


def latency(repeat):
    import onnxruntime as ort
    print("inference latency, best of %d (ms); ratios are ember / onnxruntime" % repeat)
    print(f"  {'model':8s} {'batch':>5s} {'ort':>8s} {'eager':>8s} {'traced':>8s} "
          f"{'eager/ort':>9s} {'traced/ort':>10s}")
    for name in ("lenet_bn", "mlp"):
        m = M.MODELS[name]().eval()
        ex = M.example(m, batch=2)
        buf = io.BytesIO()
        ember.onnx.export(m, (ex,), buf, input_names=["x"], dynamic_axes={"x": [0]})
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(buf.getvalue(), so, providers=["CPUExecutionProvider"])
        traced = ember.jit.trace(m, (ex,))
        for batch in (1, 64):
            x = M.example(m, batch=batch)
            feed = {"x": x.numpy()}
            with ember.no_grad():
                t_ort = _best(lambda: sess.run(None, feed), repeat)
                t_eager = _best(lambda: m(x), repeat)
                t_traced = _best(lambda: traced(x), repeat)
                diff = float(np.max(np.abs(sess.run(None, feed)[0] - traced(x).numpy())))
            print(f"  {name:8s} {batch:5d} {t_ort * 1e3:8.3f} {t_eager * 1e3:8.3f} "
                  f"{t_traced * 1e3:8.3f} {t_eager / t_ort:9.1f} {t_traced / t_ort:10.1f}"
                  f"   (max diff {diff:.1e})")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=30)
    a = p.parse_args()
    export_times(a.repeat)
    latency(a.repeat)


if __name__ == "__main__":
    main()
