"""Optional features without their package: each raises MissingDependencyError naming the
feature and the pip extra to install (ember/_optional.py), never a bare ModuleNotFoundError.
A missing package is simulated by ``sys.modules[name] = None`` (import then fails)."""
import sys

import numpy as np
import pytest

import ember
from ember._optional import message, require
from ember.errors import EmberError, MissingDependencyError


def _hide(monkeypatch, *packages):
    for name in list(sys.modules):
        if name.split(".")[0] in packages:
            monkeypatch.delitem(sys.modules, name)
    for p in packages:
        monkeypatch.setitem(sys.modules, p, None)


def test_require_returns_the_module_and_names_the_extra(monkeypatch):
    assert require("json", feature="x") is sys.modules["json"]
    _hide(monkeypatch, "onnx")
    with pytest.raises(MissingDependencyError) as e:
        require("onnx.helper", feature="ONNX export", extra="onnx")
    assert str(e.value) == ("ONNX export needs onnx, which is not installed: "
                            "pip install 'ember[onnx]'")
    assert isinstance(e.value, (EmberError, ModuleNotFoundError, RuntimeError))
    assert e.value.name == "onnx"
    assert message("safetensors", "ember.save") == \
        "ember.save needs safetensors, which is not installed: pip install safetensors"


def _model():
    return ember.nn.Linear(2, 1)


CASES = {
    "onnx.export": (("onnx",), "ember[onnx]", lambda tmp: ember.onnx.export(
        _model(), (ember.ones(1, 2),), str(tmp / "m.onnx"))),
    "onnx.load_model": (("onnx",), "ember[onnx]", lambda tmp: ember.onnx.load_model(b"")),
    "onnx.to_text": (("onnx",), "ember[onnx]", lambda tmp: ember.onnx.to_text(b"")),
    "onnx.verify": (("onnxruntime",), "ember[onnx]", lambda tmp: ember.onnx.verify(
        _model(), (ember.ones(1, 2),))),
    "linalg.ldl_factor": (("scipy",), "ember[fast]", lambda tmp: ember.linalg.ldl_factor(
        ember.eye(3, dtype=ember.float64))),
    "special.airy_ai": (("scipy",), "ember[fast]", lambda tmp: ember.special.airy_ai(
        ember.ones(2))),
    "distributed": (("mpi4py",), "ember[distributed]", lambda tmp: ember.distributed
                    .init_process_group("mpi")),
    "save": (("safetensors",), "pip install safetensors", lambda tmp: ember.save(
        {"w": ember.ones(2)}, str(tmp / "w.safetensors"))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_missing_package_names_feature_and_extra(case, monkeypatch, tmp_path):
    packages, hint, call = CASES[case]
    import ember.distributed._mpi as mpi_mod
    import ember.kernels.special as special_kernels
    import ember.linalg  # noqa: F401  (attributes used by the cases are loaded first)
    import ember.onnx.importer  # noqa: F401
    monkeypatch.setattr(mpi_mod, "_MPI", None)
    monkeypatch.setattr(special_kernels, "_scipy", None)
    _hide(monkeypatch, *packages)
    with pytest.raises(EmberError) as e:
        call(tmp_path)
    assert hint in str(e.value) and packages[0] in str(e.value), str(e.value)


@pytest.mark.parametrize("module", ["ember.onnx.backend", "ember.onnx.backend_check"])
def test_onnx_backend_modules_name_the_extra(module, monkeypatch):
    for name in [m for m in sys.modules if m == module or m.startswith("ember.onnx.importer")]:
        monkeypatch.delitem(sys.modules, name)
    _hide(monkeypatch, "onnx")
    with pytest.raises(MissingDependencyError, match=r"pip install 'ember\[onnx\]'"):
        __import__(module)


def test_ember_onnx_command_names_the_extra(monkeypatch, tmp_path, capsys):
    from ember import cli
    path = tmp_path / "m.onnx"
    path.write_bytes(b"\x08\x07")
    _hide(monkeypatch, "onnx")
    assert cli.main(["onnx", "show", str(path)]) == 1
    assert "pip install 'ember[onnx]'" in capsys.readouterr().err


def test_without_numba_kernels_take_their_numpy_paths(monkeypatch):
    """Numba missing: remembered after one look (no search per call), and convolution, pooling
    and the fused Adam update take their NumPy paths."""
    from ember.kernels import conv as C
    from ember.kernels.pool import pool2d as pool
    from ember.kernels.conv import direct, winograd
    from ember.kernels.runtime import compiler as nr
    from ember.optim import _fused
    r = np.random.default_rng(0)
    x = r.standard_normal((4, 6, 14, 14)).astype(np.float32)
    w = r.standard_normal((16, 6, 5, 5)).astype(np.float32)
    want_y, (want_p, want_i) = C.conv2d_forward(x, w, None, 1, 0, 1, 1), \
        pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    for mod, name, value in ((nr, "_checked", False), (nr, "_numba", None), (nr, "_mode", None),
                             (nr, "_found", False),   # set by a look made before numba's import
                             (direct, "_kernels", None), (winograd, "_numba_kernels", None),
                             (nr, "_modules", {}), (nr, "_tiers", {})):   # tiers kept earlier
        monkeypatch.setattr(mod, name, value)
    monkeypatch.setenv("EMBER_JIT_COMPILE", "background")
    _hide(monkeypatch, "numba")
    assert not nr.available() and nr._checked and not nr.has_compiler()
    g = C.geometry("conv2d", x.shape, w.shape, 1, 0, 1, 1)
    assert not direct.supports(g, "forward") and not _fused.usable(x, x, x, x)
    np.testing.assert_allclose(C.conv2d_forward(x, w, None, 1, 0, 1, 1), want_y, rtol=1e-4,
                               atol=1e-4)
    p, i = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    np.testing.assert_array_equal(p, want_p)
    np.testing.assert_array_equal(i, want_i)


def test_demo_names_the_extra_for_its_progress_bar(monkeypatch, tmp_path):
    from ember import cli
    _hide(monkeypatch, "tqdm")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    lines = []
    cli.demo(epochs=0, out=str(tmp_path), progress=True, log=lines.append)
    assert "progress bar: skipped (install ember[io] for tqdm)" in lines


def test_numpy_paths_need_no_scipy(monkeypatch):
    """erf falls back to math.erf without scipy (core ops never need an extra)."""
    import ember.kernels.elementwise as ew
    monkeypatch.setattr(ew, "_erf_impl", None)
    _hide(monkeypatch, "scipy")
    x = np.array([-1.0, 0.0, 0.5])
    np.testing.assert_allclose(ember.erf(ember.tensor(x)).numpy(),
                               [-0.8427007929497149, 0.0, 0.5204998778130465], rtol=1e-12)
