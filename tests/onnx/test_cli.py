"""``ember onnx run`` (an ONNX model run in ember on .npy inputs, outputs and timing printed) and
``ember onnx check-backend`` (ONNX's backend tests through ember.onnx.backend)."""
import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember.onnx import cli  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


@pytest.fixture
def model_file(tmp_path):
    """y = a @ w + b (w an initializer), z = a's row sums: two inputs, two outputs."""
    w = onnx.numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "w")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["aw"]),
         helper.make_node("Add", ["aw", "b"], ["y"]),
         helper.make_node("ReduceSum", ["a"], ["z"], keepdims=0)],
        "two", [_vi("a", ["n", 4]), _vi("b", [3])], [_vi("y", ["n", 3]), _vi("z", [])], [w])
    p = tmp_path / "m.onnx"
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
                  .SerializeToString())
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.array([1.0, -1.0, 0.5], np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    return p, a, b


def _cli(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_run_prints_outputs_and_timing_and_saves(model_file, tmp_path, capsys):
    p, a, b = model_file
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    rc, out, err = _cli(capsys, "run", p, "--input", f"a={tmp_path / 'a.npy'}", "--input",
                        f"b={tmp_path / 'b.npy'}", "--repeat", "3", "--save", tmp_path / "o.npz")
    assert rc == 0, err
    y = a @ w + b
    assert "output y: shape (2, 3) float32" in out and f"max {y.max():.6g}" in out
    assert "output z: shape () float32" in out
    assert "load " in out and "first run " in out and "median of 3 runs" in out
    with np.load(tmp_path / "o.npz") as f:
        assert sorted(f.files) == ["y", "z"]
        np.testing.assert_allclose(f["y"], y, rtol=1e-6)
        np.testing.assert_allclose(f["z"], a.sum(), rtol=1e-6)
    # by position (graph order), mixed with by name, and one .npz holding inputs by name
    rc, out2, err = _cli(capsys, "run", p, "-i", tmp_path / "a.npy", "-i",
                         f"b={tmp_path / 'b.npy'}", "--repeat", "0")
    assert rc == 0, err
    assert "median" not in out2 and out2.split("load ")[0] == out.split("load ")[0]
    np.savez(tmp_path / "in.npz", a=a, b=b)
    rc, out3, err = _cli(capsys, "run", p, "-i", tmp_path / "in.npz")
    assert rc == 0, err
    assert out3.split("load ")[0] == out.split("load ")[0]


def test_run_input_errors_name_the_input_and_its_shape(model_file, tmp_path, capsys):
    p, a, _ = model_file
    rc, _, err = _cli(capsys, "run", p, "-i", f"q={tmp_path / 'a.npy'}")
    assert rc == 2 and "no input named 'q'" in err and "a: float32 ['n', 4]" in err
    rc, _, err = _cli(capsys, "run", p, "-i", tmp_path / "a.npy")
    assert rc == 2 and "missing input(s): b: float32 [3]" in err
    np.save(tmp_path / "bad.npy", np.zeros((2, 5), np.float32))
    rc, _, err = _cli(capsys, "run", p, "-i", f"a={tmp_path / 'bad.npy'}", "-i",
                      tmp_path / "b.npy")
    assert rc == 1 and "input 'a' expects size 4 at dim 1 (shape ['n', 4]), got shape (2, 5)" \
        in err
    np.save(tmp_path / "a64.npy", a.astype(np.float64))
    rc, _, err = _cli(capsys, "run", p, "-i", f"a={tmp_path / 'a64.npy'}", "-i",
                      tmp_path / "b.npy")
    assert rc == 1 and "input 'a' expects dtype float32" in err
    rc, _, err = _cli(capsys, "run", p, "-i", tmp_path / "a.npy", "-i", tmp_path / "b.npy", "-i",
                      tmp_path / "b.npy")
    assert rc == 2 and "3 inputs given by position" in err
    rc, _, err = _cli(capsys, "run", p, "-i", f"a={tmp_path / 'nope.npy'}")
    assert rc == 2 and "input 'a': no such file" in err
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(p.read_bytes()[:40])
    rc, _, err = _cli(capsys, "run", cut, "-i", tmp_path / "a.npy")
    assert rc == 1 and "OnnxImportError" in err and "cut.onnx" in err
    rc, _, err = _cli(capsys, "run", tmp_path / "missing.onnx")
    assert rc == 2 and "no such file" in err


def test_ember_command_runs_an_exported_model(tmp_path):
    """The installed entry point path: ``python -m ember onnx run`` on an ember export."""
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(5, 4), ember.nn.Tanh()).eval()
    x = ember.randn(3, 5)
    ember.onnx.export(model, (x,), str(tmp_path / "lin.onnx"), input_names=["x"],
                      output_names=["h"])
    np.save(tmp_path / "x.npy", x.numpy())
    r = subprocess.run([sys.executable, "-m", "ember", "onnx", "run", str(tmp_path / "lin.onnx"),
                        "--input", f"x={tmp_path / 'x.npy'}", "--save", str(tmp_path / "h.npz")],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "output h: shape (3, 4) float32" in r.stdout
    with ember.no_grad():
        want = model(x).numpy()
    with np.load(tmp_path / "h.npz") as f:
        np.testing.assert_allclose(f["h"], want, rtol=1e-6, atol=1e-7)


def test_check_backend_model_cases(capsys):
    rc, out, err = _cli(capsys, "check-backend", "--models-only", "-k", "simple/test_(sign|expand)")
    assert rc == 0, err
    assert "model tests" in out and "passed (100.0%)" in out
    rc, out, err = _cli(capsys, "check-backend", "--models-only", "-k", "pytorch-operator/")
    assert rc == 0 and "35/35 passed (100.0%)" in out
    rc, _, err = _cli(capsys, "check-backend", "--models-only", "-k", "no_such_case_anywhere")
    assert rc == 2 and "no case matches" in err


@pytest.mark.slow
def test_check_backend_node_cases(capsys):
    """collect_testcases() alone takes 4-12 s on two busy cores."""
    rc, out, err = _cli(capsys, "check-backend", "-k", "^test_(relu|lstm_defaults|if)$", "-v")
    assert rc == 0, err
    assert "node tests" in out and "3/3 passed (100.0%)" in out


