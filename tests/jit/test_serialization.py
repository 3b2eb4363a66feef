"""jit.save / jit.load: one safetensors file (IR text + weights), no pickle, loadable in a
fresh process that has only ember (not the model's code)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.jit as jit
from tests.jit.models import LSTMLM, ResNetish, TransformerLayer, example

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r"""
import json, sys
import numpy as np
import ember, ember.jit
assert "tests" not in sys.modules and not any(m.startswith("tests.") for m in sys.modules)
m = ember.jit.load(sys.argv[1])
x = ember.tensor(np.load(sys.argv[2]))
with ember.no_grad():
    out = m(x)
outs = out if isinstance(out, tuple) else (out,)
np.save(sys.argv[3], outs[0].numpy())
print(json.dumps({"kinds": sorted({n.kind for n in m.graph.nodes})}))
"""


@pytest.mark.parametrize("cls,opt", [(ResNetish, True), (TransformerLayer, False),
                                     (LSTMLM, False)])
def test_save_load_fresh_subprocess(tmp_path, cls, opt):
    model = cls().eval()
    traced = jit.trace(model, (example(model),), optimize=opt)
    path = tmp_path / "model.ejit"
    jit.save(traced, path)
    with open(path, "rb") as fh:
        assert b"pickle" not in fh.read(4096).lower()
    x = example(model, 2, seed=9)
    np.save(tmp_path / "x.npy", x.numpy())
    env = dict(os.environ, PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, "-c", SCRIPT, str(path), str(tmp_path / "x.npy"),
                          str(tmp_path / "y.npy")], capture_output=True, text=True, env=env,
                         cwd=str(tmp_path), timeout=120)
    assert res.returncode == 0, res.stderr
    json.loads(res.stdout.strip().splitlines()[-1])
    with ember.no_grad():
        ref = model(x)
    ref = ref[0] if isinstance(ref, tuple) else ref
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), ref.numpy(), rtol=1e-4, atol=1e-5)


def test_loaded_params_are_trainable(tmp_path):
    w = ember.randn(3, requires_grad=True)
    traced = jit.trace(lambda x: (x * w).sum(), (ember.randn(3),))
    jit.save(traced, tmp_path / "f.ejit")
    loaded = jit.load(tmp_path / "f.ejit")
    assert loaded.state_names == ["param0"]
    x = ember.randn(3)
    loaded(x).backward()
    np.testing.assert_allclose(loaded.state_tensors()[0].grad._data, x._data)


def test_not_a_jit_file(tmp_path):
    from safetensors.numpy import save_file
    from ember.serialization import SerializationError
    save_file({"a": np.zeros(2, np.float32)}, str(tmp_path / "w.safetensors"))
    with pytest.raises(SerializationError, match="w.safetensors.*not an ember.jit file"):
        jit.load(tmp_path / "w.safetensors")


# ------------------------------------------------------------------ loading never runs code
def _jit_file(path, ir, arrays=None, **meta_changes):
    """A jit file with IR text ``ir`` over one f32[3] input, metadata as ``save`` writes it."""
    from safetensors.numpy import save as to_bytes
    traced = jit.trace(lambda x: x * 2, (ember.randn(3),))
    jit.save(traced, path)
    from safetensors import safe_open
    with safe_open(str(path), framework="np") as f:
        meta = json.loads(f.metadata()["ember_jit_meta"])
    meta.update(meta_changes)
    path.write_bytes(to_bytes(arrays or {"unused": np.zeros(1, np.float32)},
                              metadata={"ember_jit_ir": ir, "ember_jit_meta": json.dumps(meta)}))


CRAFTED = r"""
import json, sys
import ember, ember.jit
from ember.errors import EmberError
results = []
for path in sys.argv[1:]:
    out = {}
    try:
        m = ember.jit.load(path)
        m(ember.ones(3))
        out["loaded"] = True
    except EmberError as e:
        out["error"], out["msg"] = type(e).__name__, str(e)
    out["imported"] = "this" in sys.modules
    results.append(out)
print(json.dumps(results))
"""

CALLS = ["python_function([%x], cls='this:s')", "python_function([%x], cls=function('this:s'))",
         "python_function([%x], cls=function('this.s'))"]


def test_load_never_imports_what_the_file_names(tmp_path):
    paths = []
    for i, call in enumerate(CALLS):
        paths.append(tmp_path / f"evil{i}.ejit")
        _jit_file(paths[-1], "graph(%x : f32[3]):\n  %1 : f32[3] = " + call + "\n  return (%1)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, "-c", CRAFTED, *map(str, paths)], capture_output=True,
                         text=True, env=env, cwd=str(tmp_path), timeout=120)
    assert res.returncode == 0, res.stderr
    assert "Beautiful is better than ugly" not in res.stdout
    results = json.loads(res.stdout.strip().splitlines()[-1])
    for i, out in enumerate(results):
        assert out["imported"] is False and out.get("error") == "SerializationError", out
        assert f"evil{i}.ejit" in out["msg"] and ("this" in out["msg"] or "Function" in out["msg"])


def test_unknown_op_and_bad_dtype_are_clear_errors(tmp_path):
    from ember.serialization import SerializationError
    path = tmp_path / "bad.ejit"
    _jit_file(path, "graph(%x : f32[3]):\n  %1 : f32[3] = system(%x)\n  return (%1)")
    with pytest.raises(SerializationError, match="bad.ejit.*unknown node kind 'system'"):
        jit.load(path)
    _jit_file(path, "graph(%x : f32[3]):\n  %1 : f32[3] = to(%x, dtype=ember.np)\n"
                    "  return (%1)")
    with pytest.raises(SerializationError, match="bad.ejit.*unknown dtype 'ember.np'"):
        jit.load(path)


# ------------------------------------------------------------------ custom Functions by identity
def _scale_function(k):
    class Scale(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * k
    return Scale


@pytest.mark.parametrize("optimize", [False, True])
def test_factory_functions_in_one_trace_run_their_own_class(optimize):
    two, three = _scale_function(2.0), _scale_function(3.0)
    assert two.__qualname__ == three.__qualname__
    t = jit.trace(lambda x: two.apply(x) + three.apply(x) * 10, (ember.randn(4),),
                  optimize=optimize)
    x = ember.randn(4, requires_grad=True)
    np.testing.assert_allclose(t(x)._data, 32 * x._data, rtol=1e-6)
    t(x).sum().backward()
    np.testing.assert_allclose(x.grad._data, 32.0)
    copy = t.graph.copy()
    assert [n.attrs["cls"] for n in copy.nodes if n.kind == "python_function"] == [two, three]


def test_save_of_unregistered_function_is_refused_and_registered_round_trips(tmp_path):
    from ember.serialization import SerializationError, safe_globals
    two, three = _scale_function(2.0), _scale_function(3.0)
    t = jit.trace(lambda x: two.apply(x) - three.apply(x), (ember.randn(4),))
    path = tmp_path / "f.ejit"
    with pytest.raises(SerializationError, match="f.ejit.*no registered name.*register_function"):
        jit.save(t, path)
    assert not path.exists()
    with safe_globals([(two, "tests.scale2"), (three, "tests.scale3")]):
        jit.save(t, path)
        with pytest.raises(ValueError, match="already registered"):
            jit.register_function(two, "tests.scale3")
        loaded = jit.load(path)
        x = ember.randn(4)
        np.testing.assert_allclose(loaded(x)._data, -x._data, rtol=1e-6)
        assert "function('tests.scale2')" in str(loaded.graph)
    with pytest.raises(SerializationError, match=r"f.ejit.*unknown custom Function "
                                                 r"'tests.scale2'.*register_function"):
        jit.load(path)


# ------------------------------------------------------------------ clear errors for bad files
def test_load_refuses_pickles(tmp_path):
    import pickle
    import zipfile
    from ember.serialization import UnsafeFileError
    (tmp_path / "p.pt").write_bytes(pickle.dumps({"a": 1}, protocol=4))
    with pytest.raises(UnsafeFileError, match="p.pt.*pickle.*refuses to unpickle"):
        jit.load(tmp_path / "p.pt")
    with zipfile.ZipFile(tmp_path / "z.pt", "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"a": 1}))
    with pytest.raises(UnsafeFileError, match="z.pt.*zip.*refuses to unpickle"):
        jit.load(tmp_path / "z.pt")
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.zeros(2)}, tmp_path / "t.pt")
    with pytest.raises(UnsafeFileError, match="t.pt.*refuses to unpickle"):
        jit.load(tmp_path / "t.pt")


def _good_file(path):
    w = ember.randn(3, requires_grad=True)
    jit.save(jit.trace(lambda x: (x * w + ember.tensor([1.0, 2.0, 3.0])).sum(),
                       (ember.randn(3),)), path)
    return path.read_bytes()


def _rewrite(data, edit):
    import struct
    from safetensors.numpy import load, save
    (n,) = struct.unpack("<Q", data[:8])
    md = json.loads(data[8:8 + n])["__metadata__"]
    arrays = load(data)
    edit(md, arrays)
    return save(arrays, metadata=md)


def _meta_edit(**changes):
    def edit(md, arrays):
        meta = json.loads(md["ember_jit_meta"])
        meta.update(changes)
        md["ember_jit_meta"] = json.dumps(meta)
    return edit


@pytest.mark.parametrize("damage,match", [
    (lambda d: d[:-5], "truncated"),
    (lambda d: d[:40], "truncated"),
    (lambda d: d[:8] + b"{" + b"\x00" * (len(d) - 9), "corrupt safetensors header"),
    (lambda d: _rewrite(d, _meta_edit(format="ember.jit/99")), "format 'ember.jit/99'"),
    (lambda d: _rewrite(d, lambda md, a: a.pop("param0")), "state tensor 'param0' is missing"),
    (lambda d: _rewrite(d, lambda md, a: [a.pop(k) for k in list(a) if k.startswith("__const")]),
     "does not contain"),
    (lambda d: _rewrite(d, lambda md, a: md.update(ember_jit_meta="{")), "not JSON"),
    (lambda d: _rewrite(d, lambda md, a: md.update(ember_jit_ir="graph(")), "cannot read"),
])
def test_damaged_files_are_clear_errors(tmp_path, damage, match):
    from ember.serialization import SerializationError
    path = tmp_path / "m.ejit"
    data = _good_file(path)
    path.write_bytes(damage(data))
    with pytest.raises(SerializationError, match="m.ejit.*" + match):
        jit.load(path)


def test_file_object_load(tmp_path):
    import io
    data = _good_file(tmp_path / "m.ejit")
    x = ember.randn(3)
    np.testing.assert_allclose(jit.load(io.BytesIO(data))(x)._data,
                               jit.load(tmp_path / "m.ejit")(x)._data)


def test_state_keys_outside_the_ir_charset_trace_save_and_load(tmp_path):
    """An imported ONNX model's state keys look like 'onnx::w/1': the IR's names take '_' for
    the characters it does not allow, the traced module still finds its state by key, and the
    file round-trips (into a path and into a file object, as torch.jit.save accepts)."""
    import io

    class M(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_parameter("onnx::w/1", ember.nn.Parameter(ember.arange(3.0)))

        def forward(self, x):
            return x * getattr(self, "onnx::w/1")

    tm = ember.jit.trace(M(), ember.ones(3))
    assert "%onnx__w_1" in str(tm.graph)
    p = tmp_path / "m.ej"
    ember.jit.save(tm, p)
    buf = io.BytesIO()
    ember.jit.save(tm, buf)
    for src in (p, io.BytesIO(buf.getvalue())):
        np.testing.assert_array_equal(ember.jit.load(src)(ember.ones(3)).detach().numpy(),
                                      [0.0, 1.0, 2.0])


def test_strings_from_the_file_reach_generated_code_only_as_literals(tmp_path):
    """The traced function's Python source is generated from the file's graph: a string
    attribute holding Python code stays a string literal (an unknown pad mode, reported as
    such) and names outside the IR's charset cannot be written, so nothing is imported."""
    path = tmp_path / "evil_str.ejit"
    _jit_file(path, "graph(%x : f32[3]):\n  %1 : f32[5] = pad(%x, pad=(1, 1), "
                    "mode='__import__(\"this\")', value=0.0)\n  return (%1)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, "-c", CRAFTED, str(path)], capture_output=True,
                         text=True, env=env, cwd=str(tmp_path), timeout=120)
    assert res.returncode == 0, res.stderr
    assert "Beautiful is better than ugly" not in res.stdout
    out = json.loads(res.stdout.strip().splitlines()[-1])[0]
    assert out["imported"] is False and "loaded" not in out, out
    assert "__import__" in out["msg"], out


# ------------------------------------------------------------------ crafted metadata, fuzzed
def _rich_file(path):
    """A trace with a parameter, nested inputs, a dict/list output and a shape guard."""
    import warnings
    w = ember.randn(3, requires_grad=True)

    def f(x, y):
        h = x * w + y[0].reshape(2, 3)
        return {"a": h.sum(), "b": [h * 2 if x.shape[0] > 1 else h]}
    args = (ember.randn(2, 3), (ember.randn(6),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jit.save(jit.trace(f, args), path)
    return path.read_bytes(), args


def _meta_of(data):
    import struct
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(json.loads(data[8:8 + n])["__metadata__"]["ember_jit_meta"])


def _with_meta(data, meta_text):
    return _rewrite(data, lambda md, a: md.update(ember_jit_meta=meta_text))


def _deep(n):
    spec = "T"
    for _ in range(n):
        spec = {"tuple": [spec]}
    return spec


GUARDS = {"checks": [["cmp", ["out", 0], 1, True, ">", ["f.py", 5, ""], "x.size(0) > 1"]],
          "shapes": [[2, 3], [6]], "state": [],
          "ir": "graph(%x : f32[2, 3], %y.0 : f32[6], %param0 : f32[3] = param):\n"
                "  %2 : i64[] = size(%x, dim=0)\n  return (%2)\n"}
BAD_META = {
    "name": [None, 5, "", "a b", "\u00b2", "x" * 300, ["x"], {"a": 1}, "__import__('os')"],
    "n_inputs": [None, "2", 2.0, True, -1, 1, 3, 10 ** 9, [2]],
    "in_spec": [None, "T", [], {"tuple": "T"}, {"list": ["T", {"tuple": ["T"]}]},
                {"tuple": ["T"]}, {"tuple": ["T", {"tuple": ["T"]}], "x": 1},
                {"tuple": ["T", {"dict": [[None, "T"]]}]}, {"tuple": ["T", {"const": [1]}]},
                {"tuple": ["T", {"set": ["T"]}]}, {"tuple": ["T", _deep(200)]},
                {"tuple": ["T", {"dict": [["k"]]}]}, {"tuple": ["T", "T", "T"]}],
    "out_spec": [None, "X", "T", {"dict": [["a", "T"]]}, {"dict": "T"},
                 {"dict": [["a"], ["b", "T"]]}, [["a", "T"], ["b", "T"]],
                 {"dict": [["a", "T"], ["b", {"list": ["T", "T"]}]]}, _deep(100)],
    "state": [None, "param0", [["param0"]], [["param0", 1]], [[1, True]], [["nope", True]],
              [], [["param0", True], ["param0", True]], [["param0", True, 3]], {"param0": True}],
    "generators": [None, "g", [1], ["g", "g"], {"g": 1}],
    "random": ["yes", 1, None, []],
    "shape_guards": ["x", [], {"checks": []}, dict(GUARDS, checks="x"),
                     dict(GUARDS, shapes=[[2, 3]]), dict(GUARDS, shapes=[[2, -3], [6]]),
                     dict(GUARDS, shapes=[["2", 3], [6]]), dict(GUARDS, state=[1]),
                     dict(GUARDS, state=["missing"]), dict(GUARDS, ir=5),
                     dict(GUARDS, ir="graph(%x : f32[2, 3]):\n  return (%x)\n"),
                     dict(GUARDS, checks=[["cmp", ["out", 5], 1, True, ">", ["f", 1, ""], ""]]),
                     dict(GUARDS, checks=[["cmp", ["out", 0], 1, True, "<>", ["f", 1, ""], ""]]),
                     dict(GUARDS, checks=[["eval", ["out", 0], 1, True, ">", ["f", 1, ""], ""]]),
                     dict(GUARDS, checks=[["cmp", ["out", 0], 1, True, ">", ["f", "1"], ""]]),
                     dict(GUARDS, checks=[["cmp", ["out", 0], 1, True, ">", ["f", 1, ""]]]),
                     dict(GUARDS, checks=[["cmp", "out", 1, True, ">", ["f", 1, ""], ""]]),
                     dict(GUARDS, checks=[["cmp", ["out", 0], "1", True, ">", ["f", 1, ""], 3]]),
                     dict(GUARDS, checks=[["value", ["out", 0], None, "2", "int", ["f", 1, ""],
                                           ""]]),
                     dict(GUARDS, checks=[None])],
}
CASES = [(k, v) for k, vs in BAD_META.items() for v in vs] + \
    [(k, "<missing>") for k in ("format", "name", "n_inputs", "in_spec", "out_spec", "state",
                                "generators")]


@pytest.mark.parametrize("key,value", CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)])
def test_crafted_metadata_is_refused_at_load(tmp_path, key, value):
    """Every field of the metadata is checked when the file is read: a bad name, call spec,
    state list or guard used to load and then fail at the first call with a raw IndexError,
    AttributeError, TypeError or KeyError (or a SyntaxError from generated code)."""
    from ember.serialization import SerializationError
    data, args = _rich_file(tmp_path / "good.ejit")
    assert jit.load(tmp_path / "good.ejit")(*args)["a"] is not None
    meta = _meta_of(data)
    if value == "<missing>":
        del meta[key]
    else:
        meta[key] = value
    path = tmp_path / "bad.ejit"
    path.write_bytes(_with_meta(data, json.dumps(meta)))
    with pytest.raises(SerializationError, match="bad.ejit"):
        jit.load(path)


def test_truncated_metadata_and_ir_are_refused_at_load(tmp_path):
    from ember.serialization import SerializationError
    data, _ = _rich_file(tmp_path / "good.ejit")
    text = json.dumps(_meta_of(data))
    path = tmp_path / "cut.ejit"
    for cut in range(0, len(text), 7):
        path.write_bytes(_with_meta(data, text[:cut]))
        with pytest.raises(SerializationError, match="cut.ejit"):
            jit.load(path)
    ir = jit.load(tmp_path / "good.ejit").graph.__str__()
    for cut in range(0, len(ir), 11):
        path.write_bytes(_rewrite(data, lambda md, a: md.update(ember_jit_ir=ir[:cut])))
        try:
            loaded = jit.load(path)
        except SerializationError:
            continue
        assert len(loaded.graph.outputs) == 2   # a cut that still parses is a whole graph


def _random_json(rng, depth=0):
    r = rng.integers(9)
    if depth > 2 or r < 5:
        return [None, True, -1, 0, 1, 2, 10 ** 6, 1.5, "", "T", "out", "param0", "x",
                ">"][rng.integers(14)]
    if r < 7:
        return [_random_json(rng, depth + 1) for _ in range(rng.integers(4))]
    return {str(_random_json(rng, depth + 1)): _random_json(rng, depth + 1)
            for _ in range(rng.integers(3))}


def _paths(obj, prefix=()):
    yield prefix
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) \
        else ()
    for k, v in items:
        yield from _paths(v, prefix + (k,))


def test_fuzzed_metadata_never_gives_a_raw_error(tmp_path):
    """Random replacements anywhere in the metadata: each file is refused at load with ember's
    SerializationError, or loads and runs (an ember error at most); never a raw exception."""
    import warnings
    from ember.errors import EmberError
    from ember.serialization import SerializationError
    data, args = _rich_file(tmp_path / "good.ejit")
    meta = _meta_of(data)
    meta["shape_guards"] = meta.get("shape_guards") or GUARDS
    paths = [p for p in _paths(meta) if p]
    rng = np.random.default_rng(0)
    path = tmp_path / "fuzz.ejit"
    refused = 0
    for _ in range(150):
        m = json.loads(json.dumps(meta))
        where = paths[rng.integers(len(paths))]
        parent = m
        for k in where[:-1]:
            parent = parent[k]
        parent[where[-1]] = _random_json(rng)
        path.write_bytes(_with_meta(data, json.dumps(m)))
        try:
            loaded = jit.load(path)
        except SerializationError:
            refused += 1
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                loaded(*args)
            except EmberError:
                pass
    assert refused > 100


def test_a_loaded_trace_called_with_a_non_tensor_names_the_input(tmp_path):
    t = jit.trace(lambda x, y: x + y, (ember.randn(2), ember.randn(2)))
    jit.save(t, tmp_path / "add.ejit")
    loaded = jit.load(tmp_path / "add.ejit")
    for f in (t, loaded):
        with pytest.raises(ember.errors.EmberTypeError, match="input 1 must be a Tensor, got tuple"):
            f(ember.randn(2), (ember.randn(2),))


def test_a_returned_size_round_trips(tmp_path):
    traced = jit.trace(lambda x: (x.shape, x + 1), (ember.ones(2, 3),), strict=False)
    jit.save(traced, tmp_path / "f.ejit")
    shape, y = jit.load(tmp_path / "f.ejit")(ember.ones(2, 3))
    assert type(shape) is ember.Size and shape == (2, 3)
