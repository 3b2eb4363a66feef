"""The export API: files, names, errors (unsupported op with the user's line, bad opset, bad
dynamic_axes), custom Function symbolics, training modes and the CLI."""
import io
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember import nn  # noqa: E402
from ember.autograd._generated import functions as G  # noqa: E402
from tests.jit import models as jit_models  # noqa: E402
from tests.onnx.models import NN_MODELS, mlp  # noqa: E402


def _ort():
    return pytest.importorskip("onnxruntime")


# ---------------------------------------------------------------------------------- API
def test_import_ember_does_not_import_onnx():
    import subprocess
    import sys
    code = "import sys, ember, ember.onnx; print('onnx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.stdout.strip() == "False", out.stderr


def test_export_to_path_is_atomic_and_loadable(tmp_path):
    m = mlp()
    path = tmp_path / "m.onnx"
    mp = ember.onnx.export(m, (ember.randn(2, 4),), str(path))
    assert isinstance(mp, onnx.ModelProto)
    assert onnx.load(str(path)) == mp
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]   # no temp file left behind


def test_export_to_file_object_and_pathlike(tmp_path):
    m = mlp()
    buf = io.BytesIO()
    ember.onnx.export(m, ember.randn(2, 4), buf)
    with open(tmp_path / "b.onnx", "wb") as fh:
        ember.onnx.export(m, ember.randn(2, 4), fh)
    ember.onnx.export(m, ember.randn(2, 4), tmp_path / "c.onnx")
    assert onnx.load_from_string(buf.getvalue()).graph.node
    assert onnx.load(str(tmp_path / "b.onnx")).graph.node
    assert onnx.load(str(tmp_path / "c.onnx")).graph.node
    with pytest.raises(TypeError, match="binary"):
        ember.onnx.export(m, ember.randn(2, 4), io.StringIO())


def test_params_are_initializers_named_by_state_dict():
    m = NN_MODELS["vgg_bn"]()
    mp = ember.onnx.build_model(m, (m.example(2),), do_constant_folding=False)
    inits = {i.name for i in mp.graph.initializer}
    keys = set(m.state_dict())
    assert {k for k in keys if "num_batches" not in k} <= inits
    assert [i.name for i in mp.graph.input] == ["x"]


def test_names_dtypes_shapes_and_dynamic_axes():
    m = mlp()
    mp = ember.onnx.build_model(m, (ember.randn(2, 4),), input_names=["features"],
                                output_names=["logits"],
                                dynamic_axes={"features": {0: "N"}, "logits": [0]})
    (inp,), (out,) = mp.graph.input, mp.graph.output
    assert inp.name == "features" and out.name == "logits"
    assert inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim] == ["N", 4]
    assert [d.dim_param or d.dim_value for d in out.type.tensor_type.shape.dim] == \
        ["logits_dynamic_axes_1", 3]
    static = ember.onnx.build_model(m, (ember.randn(2, 4),))
    assert [d.dim_value for d in static.graph.output[0].type.tensor_type.shape.dim] == [2, 3]


def test_export_params_false_and_keep_initializers_as_inputs():
    m = mlp()
    x = (ember.randn(2, 4),)
    mp = ember.onnx.build_model(m, x, export_params=False)
    assert not mp.graph.initializer
    assert {i.name for i in mp.graph.input} == {"input", "0.weight", "0.bias", "2.weight",
                                                "2.bias"}
    mp = ember.onnx.build_model(m, x, keep_initializers_as_inputs=True)
    assert {i.name for i in mp.graph.initializer} <= {i.name for i in mp.graph.input}


def test_custom_opsets_are_declared():
    mp = ember.onnx.build_model(mlp(), (ember.randn(2, 4),), custom_opsets={"com.ember": 1})
    assert {(o.domain, o.version) for o in mp.opset_import} == {("", 17), ("com.ember", 1)}


def test_verbose_prints_text(capsys):
    ember.onnx.export(mlp(), (ember.randn(2, 4),), io.BytesIO(), verbose=True)
    out = capsys.readouterr().out
    assert "Gemm" in out and "opsets: ai.onnx=17" in out


# ---------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("bad", [12, 22, 7, "17", None, 17.0])
def test_bad_opset_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="opset_version 13 to 21"):
        ember.onnx.export(mlp(), (ember.randn(2, 4),), io.BytesIO(), opset_version=bad)


def test_bad_dynamic_axes_names_are_a_clear_error():
    with pytest.raises(ValueError, match=r"'imgs'.*inputs are \['x'\].*outputs are \['y'\]"):
        ember.onnx.export(mlp(), (ember.randn(2, 4),), io.BytesIO(), input_names=["x"],
                          output_names=["y"], dynamic_axes={"imgs": [0]})
    with pytest.raises(ValueError, match="out of range"):
        ember.onnx.export(mlp(), (ember.randn(2, 4),), io.BytesIO(), input_names=["x"],
                          dynamic_axes={"x": [2]})
    with pytest.raises(ValueError, match="names given"):
        ember.onnx.export(mlp(), (ember.randn(2, 4),), io.BytesIO(), input_names=["a", "b"])


def test_unsupported_op_names_op_opset_and_user_line(monkeypatch):
    from ember.onnx import registry
    monkeypatch.setitem(registry._REGISTRY, "cumsum", [])

    def f(x):
        y = x.relu()
        return y.cumsum(0)  # <- the line the error must name

    with pytest.raises(ember.onnx.UnsupportedOperatorError) as ei:
        ember.onnx.export(f, (ember.randn(3, 4),), io.BytesIO(), opset_version=15)
    msg = str(ei.value)
    assert "'cumsum'" in msg and "opset 15" in msg
    assert "test_exporter.py" in msg and "return y.cumsum(0)" in msg
    assert ei.value.ops[0][:2] == ("cumsum", 15)


def test_op_that_needs_a_later_opset_says_so():
    x = ember.tensor(np.array([[1, 2], [3, 4]]))
    with pytest.raises(ember.onnx.OnnxExportError, match="opset 18 or later"):
        ember.onnx.export(lambda a: G.bitwise_and(a, a), (x,), io.BytesIO(), opset_version=17)
    with pytest.raises(ember.onnx.UnsupportedOperatorError, match="'triu' at opset 13"):
        ember.onnx.export(lambda a: a.float().triu(), (x,), io.BytesIO(), opset_version=13)


class _Cube(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x

    @staticmethod
    def symbolic(g, x):
        return g.op("Mul", x, g.op("Mul", x, x))


class _NoSymbolic(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x + 1

    @staticmethod
    def backward(ctx, g):
        return g


def test_custom_function_symbolic():
    ort = _ort()
    x = ember.randn(3, 4)
    buf = io.BytesIO()
    mp = ember.onnx.export(lambda t: _Cube.apply(t).relu(), (x,), buf)
    assert [n.op_type for n in mp.graph.node] == ["Mul", "Mul", "Relu"]
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {mp.graph.input[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, np.maximum(x.numpy() ** 3, 0), rtol=1e-5)


def test_custom_function_without_symbolic_is_reported():
    with pytest.raises(ember.onnx.UnsupportedOperatorError, match="_NoSymbolic"):
        ember.onnx.export(lambda t: _NoSymbolic.apply(t), (ember.randn(2),), io.BytesIO())


def test_training_modes():
    m = NN_MODELS["vgg_bn"]()
    m.train()
    x = (m.example(4),)
    ev = ember.onnx.build_model(m, x)
    assert m.training   # restored
    assert "BatchNormalization" in {n.op_type for n in ev.graph.node}
    tr = ember.onnx.build_model(m, x, training=ember.onnx.TrainingMode.TRAINING)
    assert "BatchNormalization" not in {n.op_type for n in tr.graph.node}   # batch statistics
    m.eval()
    pr = ember.onnx.build_model(m, x, training=ember.onnx.TrainingMode.PRESERVE)
    assert "BatchNormalization" in {n.op_type for n in pr.graph.node}
    assert not m.training


# ---------------------------------------------------------------------------------- CLI
def test_cli_show_and_verify(tmp_path, capsys):
    _ort()
    from ember.onnx.cli import main
    src = tmp_path / "model_def.py"
    src.write_text("import ember\nfrom ember import nn\n"
                   "model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))\n"
                   "example_inputs = (ember.randn(3, 4),)\n")
    out = tmp_path / "m.onnx"
    assert main(["verify", str(src), "--dynamic-batch", "-o", str(out), "--opset", "13"]) == 0
    text = capsys.readouterr().out
    assert "onnxruntime matches ember" in text and out.exists()
    assert main(["show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Gemm x2" in text and "input0: float32[batch, 4]" in text
    assert main(["show", str(tmp_path / "missing.onnx")]) == 2


def test_ember_cli_has_onnx_subcommand(tmp_path, capsys):
    cli = pytest.importorskip("ember.cli")
    ember.onnx.export(mlp(), (ember.randn(2, 4),), str(tmp_path / "m.onnx"))
    assert cli.main(["onnx", "show", str(tmp_path / "m.onnx"), "--summary-only"]) == 0
    assert "Gemm x2" in capsys.readouterr().out
