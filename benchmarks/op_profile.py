"""Where a traced + optimised model's time goes, against onnxruntime's per-operator profile of
the same model: the profile behind an inference row that is slower than onnxruntime.

Usage: python benchmarks/op_profile.py --case jit:resnet [--batch 1] [--calls 300] [--top 12]
       cases: jit:lenet, jit:mlp, jit:resnet (benchmarks/jit.py's models; the zoo cases at
       batch 1): zoo:resnet50, zoo:squeezenet1_1, zoo:densenet121, zoo:googlenet
       (benchmarks/zoo_models.py, exported by torch as benchmarks/onnx_zoo.py does)

The model is exported to a temporary ONNX file by the benchmark's own export worker, then two
processes run one after the other, each with its library's defaults: onnxruntime's
``InferenceSession`` with ``enable_profiling`` (its "Node" events summed per operator type:
each type's share of the node time, applied to the unprofiled call), and ember's traced +
optimised model (jit cases: ember's own model, as benchmarks/jit.py
times it; zoo cases: ``ember.onnx.load_model`` of the file, as benchmarks/onnx_zoo.py) warmed
until its kernels are compiled and its plan tuned, then ``--calls`` calls under ``cProfile``
(its functions' own time, per call). Each side also prints its median call time without a
profiler. Nothing is asserted; the profilers' own cost is in their figures.
"""
import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402


def _inputs(kind, case, batch):
    if kind == "jit":
        import jit
        return jit.inputs(case, batch)
    import onnx_zoo
    return onnx_zoo.inputs()


def _export(kind, case, onnx_dir):
    if kind == "jit":
        import jit
        return jit._export(case, onnx_dir)
    import onnx_zoo
    return onnx_zoo._export(case, onnx_dir)


def _median_call(fn, lib):
    """``fn``'s median call in us, timed as the benchmarks time it (``_harness.measure``)."""
    return H.measure(fn, lib, H.Options(repeats=1, min_time=2.0))["median"] * 1e3


def _ort_side(path, x, calls, top):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(os.path.dirname(path), "ort_profile")   # the temp dir
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: x}
    for _ in range(50):
        sess.run(None, feed)
    for _ in range(calls):
        sess.run(None, feed)
    profile = sess.end_profiling()
    with open(profile) as f:
        events = json.load(f)
    os.remove(profile)
    by_op, runs = {}, [e["dur"] for e in events if e.get("name") == "model_run"]
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            op = e["args"].get("op_name", "?")
            by_op[op] = by_op.get(op, 0) + e["dur"]
    plain = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    median = _median_call(lambda: plain.run(None, feed), "ort")
    total = sum(by_op.values()) or 1
    print(f"onnxruntime: median call {median:.1f} us without profiling; profiled runs "
          f"{statistics.median(runs[-calls:]):.1f} us; operators' shares of the profiled node "
          "time, and that share of the unprofiled call:")
    for op, us in sorted(by_op.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {op:<28} {100 * us / total:5.1f}%  ~{median * us / total:8.1f} us a call")


def _ember_side(kind, case, path, x, calls, top):
    import warnings
    import ember
    import ember.jit
    from ember.kernels.runtime import compiler
    if kind == "jit":
        import jit
        model = H.load_seeded(jit.build(case, ember.nn), ember.tensor).eval()
    else:
        import ember.onnx
        model = ember.onnx.load_model(path).eval()
    xt = ember.tensor(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = ember.jit.optimize(ember.jit.trace(model, (xt,)))
    with ember.no_grad():
        for _ in range(3):
            for _ in range(30):
                fast(xt)
            compiler.wait_compiles()
        print(f"ember traced + opt: median call {_median_call(lambda: fast(xt), 'ember'):.1f} us "
              "without profiling")
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(calls):
            fast(xt)
        prof.disable()
    stats = pstats.Stats(prof).stats
    rows = sorted(((tt, nc, f"{os.path.basename(fn)}:{line}({name})")
                   for (fn, line, name), (cc, nc, tt, ct, callers) in stats.items()),
                  reverse=True)[:top]
    for tt, nc, where in rows:
        print(f"  {where:<60} {tt / calls * 1e6:9.1f} us a call ({nc / calls:.0f} calls)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--side", choices=("ort", "ember"), help=argparse.SUPPRESS)
    ap.add_argument("--onnx", help=argparse.SUPPRESS)
    a = ap.parse_args()
    kind, _, case = a.case.partition(":")
    if kind not in ("jit", "zoo") or not case:
        ap.error(f"--case must be jit:NAME or zoo:NAME, got {a.case!r}")
    if a.side:
        x = _inputs(kind, case, a.batch)
        if a.side == "ort":
            _ort_side(a.onnx, x, a.calls, a.top)
        else:
            _ember_side(kind, case, a.onnx, x, a.calls, a.top)
        return
    with tempfile.TemporaryDirectory(prefix="ember-op-profile-") as d:
        path = _export(kind, case, d)["exported"]
        env = dict(os.environ)
        env["PYTHONPATH"] = H.ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for side in ("ort", "ember"):
            subprocess.run([sys.executable, os.path.abspath(__file__), "--case", a.case,
                            "--batch", str(a.batch), "--calls", str(a.calls), "--top",
                            str(a.top), "--side", side, "--onnx", path], env=env, check=True)


if __name__ == "__main__":
    main()
