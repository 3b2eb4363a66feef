"""Per-op export checks generated from the symbolic registry, shared by the test file of each
symbolic family (tests/onnx/symbolics/test_<family>.py): every registered op is exported on its
spec samples (``test:`` in ember/ops/spec/), checked by onnx.checker (full) and run in
onnxruntime against ember, at opsets 13, 17 and 21 (or the op's first opset)."""
import io

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember.autograd._generated import functions as G  # noqa: E402
from ember.onnx import registry  # noqa: E402
from tests.autograd.spec_samples import Leaf, cases  # noqa: E402

CASES = {c.name: c for c in cases()}
REGISTERED = ember.onnx.registered_ops()
RANDOM = {"rand", "randn", "normal", "uniform_like", "normal_like", "bernoulli", "empty",
          "empty_like", "native_dropout"}
# samples ONNX cannot express or onnxruntime does not run (the reason is the value)
SKIP_SAMPLE = {("unique", 4): "ONNX Unique merges NaNs; torch (and ember) keep each NaN apart"}
# outputs kept per op (the others are internal workspaces, not exported)
INTERNAL_OUTPUTS = {"lstm_step": (0, 1), "gru_step": (0,), "native_dropout": (0,),
                    "adaptive_max_pool2d": (0,), "lstm_layer": (0, 1, 2),
                    "adaptive_max_pool3d": (0,)}
# ops covered by model tests instead of spec samples (no samples, or step ops of RNN layers)
NO_SAMPLES = sorted(op for op in REGISTERED if op not in CASES or not CASES[op].samples)


def _materialize(case, args, kwargs, rng):
    leaves = []
    tpos = case.tensor_positions()
    tnames = case.tensor_names()
    names = [a.name for a in case.args]

    def conv(v, is_slot):
        if isinstance(v, Leaf):
            arr = v.make(rng, np.float32)
            t = ember.from_numpy(arr)
            leaves.append(t)
            return t
        if isinstance(v, list):
            return [conv(x, True) for x in v]
        if is_slot and isinstance(v, np.ndarray):
            t = ember.from_numpy(v.copy())
            leaves.append(t)
            return t
        return v

    eargs = [conv(v, i in tpos) for i, v in enumerate(args)]
    ekw = {k: conv(v, k in tnames) for k, v in kwargs.items()}
    del names
    return eargs, ekw, leaves


def _rebind(x, mapping):
    if isinstance(x, ember.Tensor):
        return mapping.get(id(x), x)
    if isinstance(x, list):
        return [_rebind(y, mapping) for y in x]
    return x


def _outputs(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o for o in outs if isinstance(o, ember.Tensor)]


def _opsets(op):
    first = REGISTERED[op][0]
    return sorted({max(13, first), 17 if first <= 17 else first, 21})


PARAMS = [(op, opset) for op in sorted(REGISTERED) if op in CASES and CASES[op].samples
          for opset in _opsets(op)]


def family(op):
    """The symbolic module that registers ``op`` (``ember.onnx.symbolics.<family>``)."""
    mods = {fn.__module__ for _, fn in registry._REGISTRY[op]}
    assert len(mods) == 1, (op, mods)
    return mods.pop().rsplit(".", 1)[1]


def params(name):
    """(op, opset) pairs of the ops registered by ``ember/onnx/symbolics/<name>.py``, and their
    pytest ids."""
    ps = [(op, opset) for op, opset in PARAMS if family(op) == name]
    return ps, [f"{o}-{v}" for o, v in ps]


def check_op_exports_and_matches(op, opset):
    """Export ``op`` on each spec sample at ``opset``; the graph passes the full checker and
    onnxruntime's outputs match ember's (shape, dtype, values)."""
    case = CASES[op]
    rng = np.random.default_rng(0)
    ran = limited = 0
    for si, (args, kwargs) in enumerate(case.samples):
        if (op, si) in SKIP_SAMPLE:
            continue
        eargs, ekw, leaves = _materialize(case, args, kwargs, rng)
        if any(t.numel() == 0 for t in leaves):
            continue  # size-0 tensors: onnxruntime kernels disagree on empty inputs
        order = [id(t) for t in leaves]

        def fn(*xs, eargs=eargs, ekw=ekw):
            m = dict(zip(order, xs))
            return tuple(_outputs(getattr(G, op)(*_rebind(eargs, m),
                                                 **{k: _rebind(v, m) for k, v in ekw.items()})))

        if op in INTERNAL_OUTPUTS:
            keep = INTERNAL_OUTPUTS[op]

            def fn(*xs, inner=fn):
                return tuple(o for i, o in enumerate(inner(*xs)) if i in keep)
        expected = fn(*leaves)
        if not expected:
            continue
        buf = io.BytesIO()
        try:
            mp = ember.onnx.export(fn, tuple(leaves), buf, opset_version=opset)
        except ember.onnx.OnnxExportError as e:
            if "or later" in str(e) and f"at opset {opset}" in str(e):
                limited += 1  # a clear "needs opset N" error is the expected outcome
                continue
            raise
        onnx.checker.check_model(mp, full_check=True)
        sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        got = sess.run(None, {n: t.numpy() for n, t in zip(names, leaves)})
        assert len(got) == len(expected)
        for a, e in zip(got, expected):
            e = e.numpy()
            assert a.shape == e.shape, f"sample {si}: shape {a.shape} != {e.shape}"
            assert a.dtype == e.dtype, f"sample {si}: dtype {a.dtype} != {e.dtype}"
            if op in RANDOM:
                continue
            if e.dtype.kind == "f":
                np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5, equal_nan=True,
                                           err_msg=f"sample {si}")
            else:
                np.testing.assert_array_equal(a, e, err_msg=f"sample {si}")
        ran += 1
    if not ran and not limited:
        pytest.skip("no sample exportable at this size")


