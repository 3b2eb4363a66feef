"""``verify``: export a model, run it in onnxruntime and compare with ember eager."""
import io

import numpy as np

from ember._optional import require

__all__ = ["verify", "VerificationResult"]


class VerificationResult:
    """Per output: name, shape, max |onnxruntime - ember|, and whether it is within tolerance."""

    def __init__(self, names, diffs, ok, shapes, model, rtol, atol):
        self.names = names
        self.max_abs_diff = diffs
        self.ok_per_output = ok
        self.shapes = shapes
        self.model = model
        self.rtol, self.atol = rtol, atol

    @property
    def ok(self):
        return all(self.ok_per_output)

    def __bool__(self):
        return self.ok

    def report(self):
        lines = []
        for n, s, d, k in zip(self.names, self.shapes, self.max_abs_diff, self.ok_per_output):
            lines.append(f"  {n} {list(s)}: max |onnxruntime - ember| = {d:.3e} "
                         f"{'ok' if k else 'MISMATCH'}")
        head = "onnxruntime matches ember" if self.ok else "onnxruntime DIFFERS from ember"
        return f"{head} (rtol={self.rtol:g}, atol={self.atol:g}):\n" + "\n".join(lines)

    __str__ = report

    def __repr__(self):
        return f"<VerificationResult ok={self.ok} max_abs_diff={self.max_abs_diff}>"


def _flat_tensors(obj, out):
    from ember.tensor import Tensor
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _flat_tensors(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _flat_tensors(x, out)
    return out


def run_onnxruntime(model, feeds):
    """Run a ModelProto (or serialized bytes) in onnxruntime on CPU; returns the outputs."""
    ort = require("onnxruntime", feature="running an ONNX model in onnxruntime", extra="onnx")
    data = model if isinstance(model, (bytes, bytearray)) else model.SerializeToString()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(bytes(data), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def verify(model, args, opset_version=17, rtol=1e-4, atol=1e-5, input_names=None,
           output_names=None, dynamic_axes=None, check_args=None, raise_on_mismatch=False,
           **export_kwargs):
    """Export ``model`` on ``args``, run it in onnxruntime (on ``check_args`` when given: other
    inputs, e.g. another batch size with ``dynamic_axes``) and compare each output with ember
    eager mode. Returns a ``VerificationResult`` (``.max_abs_diff`` per output, ``.ok``,
    ``.report()``). Raises MissingDependencyError without onnxruntime, AssertionError on a
    mismatch when ``raise_on_mismatch``, and whatever ``export`` raises."""
    from ember.autograd.grad_mode import no_grad
    from ember.onnx.exporter import TrainingMode, export
    require("onnxruntime", feature="ember.onnx.verify", extra="onnx")
    if not isinstance(args, tuple):
        args = (args,)
    buf = io.BytesIO()
    mp = export(model, args, buf, opset_version=opset_version, input_names=input_names,
                output_names=output_names, dynamic_axes=dynamic_axes, **export_kwargs)
    run_args = args if check_args is None else (check_args if isinstance(check_args, tuple)
                                                else (check_args,))
    training = export_kwargs.get("training", TrainingMode.EVAL)
    saved = [(m, getattr(m, "training", None)) for m in
             (model.modules() if hasattr(model, "modules") else [model])]
    try:
        if training == TrainingMode.EVAL and hasattr(model, "eval"):
            model.eval()
        with no_grad():
            expected = _flat_tensors(model(*run_args), [])
    finally:
        for m, mode in saved:
            if mode is not None:
                m.training = mode
    flat_in = _flat_tensors(run_args, [])
    inputs = [i.name for i in mp.graph.input if i.name not in
              {t.name for t in mp.graph.initializer}]
    feeds = {n: t.numpy() for n, t in zip(inputs, flat_in)}
    got = run_onnxruntime(buf.getvalue(), feeds)
    names = [o.name for o in mp.graph.output]
    diffs, ok, shapes = [], [], []
    for n, a, e in zip(names, got, expected):
        e = e.numpy()
        a = np.asarray(a)
        shapes.append(e.shape)
        if a.shape != e.shape:
            diffs.append(float("inf"))
            ok.append(False)
            continue
        if e.dtype.kind in "fc":
            d = float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64)))) \
                if e.size else 0.0
            ok.append(bool(np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)))
        else:
            d = float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64)))) \
                if e.size else 0.0
            ok.append(bool(np.array_equal(a, e)))
        diffs.append(d)
    res = VerificationResult(names, diffs, ok, shapes, mp, rtol, atol)
    if raise_on_mismatch and not res.ok:
        raise AssertionError(res.report())
    return res
