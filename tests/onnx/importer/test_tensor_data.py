"""ember.onnx.importer.tensor_data: external data is read from the model's folder only, wherever
the tensor sits (initializers, sparse initializers, Constant attributes, subgraph initializers),
whatever the working directory; malformed tensors and runaway sizes are ember errors naming the
tensor or node, checked before anything is allocated."""
import io
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember.errors import EmberRuntimeError, EmberValueError  # noqa: E402
from ember.onnx.importer import OnnxImportError  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

DATA = np.arange(4, dtype=np.float32)


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def _model(nodes, inputs, outputs, inits=(), sparse=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits), sparse_initializer=list(sparse))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _external(name, location, n=4, **keys):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[n],
                    data_location=TensorProto.EXTERNAL)
    for k, v in {"location": location, **keys}.items():
        e = t.external_data.add()
        e.key, e.value = k, str(v)
    return t


def _add_const(tensor):
    """y = x + tensor, the tensor as a Constant node's attribute."""
    return _model([helper.make_node("Constant", [], ["c"], value=tensor, name="the_const"),
                   helper.make_node("Add", ["x", "c"], ["y"])], [_vi("x", [4])], [_vi("y", [4])])


def _add_init(tensor):
    return _model([helper.make_node("Add", ["x", tensor.name], ["y"])], [_vi("x", [4])],
                  [_vi("y", [4])], [tensor])


def _add_in_if(tensor):
    """y = If(c, then: x + tensor (an initializer of the branch), else: x)."""
    then = helper.make_graph([helper.make_node("Add", ["x", tensor.name], ["z"])], "then_g", [],
                             [_vi("z", [4])], [tensor])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["z"])], "else_g", [],
                              [_vi("z", [4])])
    return _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other,
                                    name="the_if")],
                  [_vi("c", [], TensorProto.BOOL), _vi("x", [4])], [_vi("y", [4])])


def _sparse(tensor):
    idx = numpy_helper.from_array(np.array([0], np.int64), "idx")
    tensor.dims[:] = [1]
    sp = helper.make_sparse_tensor(tensor, idx, [4])
    return _model([helper.make_node("Identity", ["x"], ["y"])], [_vi("x", [4])],
                  [_vi("y", [4])], sparse=[sp])


WHERE = {"constant": _add_const, "initializer": _add_init, "if_branch": _add_in_if}


def _run(mod, model_kind):
    x = ember.zeros(4)
    return (mod(ember.tensor(True), x) if model_kind == "if_branch" else mod(x)).detach().numpy()


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A model folder with data.bin = DATA, and a working directory (the current one) holding a
    decoy data.bin; a secret file beside the model folder."""
    model_dir, cwd = tmp_path / "model", tmp_path / "cwd"
    model_dir.mkdir()
    cwd.mkdir()
    (model_dir / "data.bin").write_bytes(DATA.tobytes())
    (cwd / "data.bin").write_bytes((DATA * 100).tobytes())
    (tmp_path / "secret").write_bytes((DATA + 7).tobytes())
    monkeypatch.chdir(cwd)
    return model_dir


@pytest.mark.parametrize("kind", sorted(WHERE))
def test_external_data_is_read_from_the_models_folder_not_the_working_directory(folders, kind):
    path = folders / "m.onnx"
    onnx.save(WHERE[kind](_external("w", "data.bin")), str(path))
    np.testing.assert_array_equal(_run(ember.onnx.load_model(str(path)), kind), DATA)
    with open(path, "rb") as f:   # a file object with a name: its folder, as onnx.load
        np.testing.assert_array_equal(_run(ember.onnx.load_model(f), kind), DATA)
    # bytes and nameless file objects have no folder: refused unless base_dir is given
    data = path.read_bytes()
    for src in (data, io.BytesIO(data)):
        with pytest.raises(OnnxImportError, match="'w'.*folder is unknown.*base_dir"):
            ember.onnx.load_model(src)
    np.testing.assert_array_equal(_run(ember.onnx.load_model(data, base_dir=folders), kind), DATA)
    proto = onnx.load(str(path), load_external_data=False)
    with pytest.raises(OnnxImportError, match="'w'.*folder is unknown"):
        ember.onnx.load_model(proto)
    np.testing.assert_array_equal(
        _run(ember.onnx.load_model(proto, base_dir=str(folders)), kind), DATA)
    assert proto.graph.node[0].op_type and onnx.load(str(path), load_external_data=False) == proto


def _escapes(model_dir):
    os.symlink(model_dir.parent / "secret", model_dir / "link.bin")
    return {"dotdot": ("../secret", "leaves the model's folder"),
            "absolute": (str(model_dir.parent / "secret"), "is an absolute path"),
            "symlink": ("link.bin", "outside the model's folder .*symbolic link"),
            "nested_dotdot": ("sub/../../secret", "leaves the model's folder")}


@pytest.mark.parametrize("kind", sorted(WHERE) + ["sparse"])
def test_external_data_leaving_the_folder_is_refused_naming_the_tensor(folders, kind):
    build = _sparse if kind == "sparse" else WHERE[kind]
    for name, (location, why) in _escapes(folders).items():
        path = folders / f"{name}.onnx"
        onnx.save(build(_external("stolen", location)), str(path))
        with pytest.raises(OnnxImportError, match=f"'stolen'.*{why}"):
            ember.onnx.load_model(str(path))
        with pytest.raises(OnnxImportError, match=f"'stolen'.*{why}"):
            ember.onnx.load_model(path.read_bytes(), base_dir=folders)
        with pytest.raises(OnnxImportError, match=f"'stolen'.*{why}"):
            ember.onnx.to_text(str(path))


def test_external_data_errors_name_the_tensor(folders):
    (folders / "sub").mkdir()
    (folders / "sub" / "inner.bin").write_bytes(DATA.tobytes())
    (folders / "inner_link.bin").symlink_to(folders / "sub" / "inner.bin")
    for loc in ("sub/inner.bin", "inner_link.bin"):   # inside the folder: read
        onnx.save(_add_init(_external("w", loc)), str(folders / "ok.onnx"))
        np.testing.assert_array_equal(ember.onnx.load_model(str(folders / "ok.onnx"))(
            ember.zeros(4)).detach().numpy(), DATA)
    cases = {"missing.bin": "cannot read external data 'missing.bin'",
             "sub": "not a regular file"}
    for loc, why in cases.items():
        onnx.save(_add_init(_external("w", loc)), str(folders / "bad.onnx"))
        with pytest.raises(OnnxImportError, match=f"initializer 'w'.*{why}"):
            ember.onnx.load_model(str(folders / "bad.onnx"))
    for keys, why in (({"length": 12}, "length 12 does not match dims \\[4\\]"),
                      ({"offset": 8}, "holds 16 bytes, the tensor needs 16 from offset 8"),
                      ({"offset": -1}, "offset '-1' is not an integer >= 0"),
                      ({"offset": "x"}, "offset 'x' is not an integer")):
        onnx.save(_add_init(_external("w", "data.bin", **keys)), str(folders / "bad.onnx"))
        with pytest.raises(OnnxImportError, match=f"initializer 'w'.*{why}"):
            ember.onnx.load_model(str(folders / "bad.onnx"))
    part = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [2])], [_vi("y", [2])],
                  [_external("w", "data.bin", offset=4, length=8, n=2)])
    onnx.save(part, str(folders / "part.onnx"))
    m = ember.onnx.load_model(str(folders / "part.onnx"))
    np.testing.assert_array_equal(m(ember.zeros(2)).detach().numpy(), DATA[1:3])


def test_an_onnx_module_never_reads_unresolved_external_data(folders):
    """OnnxModule built straight from a ModelProto (no read_model): refused, not read from the
    working directory."""
    from ember.onnx.importer import OnnxModule
    with pytest.raises(OnnxImportError, match="'w'.*external data that was not read"):
        OnnxModule(_add_const(_external("w", "data.bin")))


def _raw(dims, data_type=TensorProto.FLOAT, raw=None, floats=None):
    t = TensorProto(name="w", data_type=data_type, dims=dims)
    if raw is not None:
        t.raw_data = raw
    if floats is not None:
        t.float_data.extend(floats)
    return t


@pytest.mark.parametrize("tensor,why", [
    (_raw([3], floats=[1.0, 2.0]), "dims \\[3\\] \\(3 elements of FLOAT\\) do not match its data"),
    (_raw([3], raw=b"\0" * 7), "need 12 bytes of raw_data, it holds 7"),
    (_raw([3], raw=b"\0" * 16), "need 12 bytes of raw_data, it holds 16"),
    (_raw([-1]), "negative dims \\[-1\\]"),
    (_raw([3], TensorProto.INT4, raw=b"\0" * 5), "3 elements of INT4\\) need 2 bytes"),
    (_raw([10 ** 6, 10 ** 6], raw=b"\0" * 8), "need 4000000000000 bytes of raw_data, it holds 8"),
    (_raw([10 ** 6, 10 ** 6]), "would take 4,000,000,000,000 bytes"),
])
@pytest.mark.parametrize("where", ["initializer", "constant"])
def test_malformed_tensors_are_named_at_load(tensor, why, where):
    model = _add_init(tensor) if where == "initializer" else _add_const(tensor)
    with pytest.raises(OnnxImportError, match=f"'w'.*{why}"):
        ember.onnx.load_model(model)


def test_a_string_tensor_with_raw_data_is_named():
    from ember.onnx.importer.tensor_data import tensor_array
    with pytest.raises(OnnxImportError, match="initializer 'w' of type STRING cannot hold raw_data"):
        tensor_array(_raw([2], TensorProto.STRING, raw=b"ab"), "initializer 'w'")


def _const_model(nodes, consts):
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()]
    return _model(nodes, [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)


@pytest.mark.parametrize("start,limit,delta,why", [
    (0, 5, 0, "delta must be nonzero"),
    (np.float32(0), np.float32(1), np.float32(0), "delta must be nonzero"),
    (np.float32(0), np.float32(np.inf), np.float32(1), "start 0.0, limit inf, delta 1.0 give no finite"),
    (0, 10 ** 12, 1, "output .*shape \\[1000000000000\\] would take 8,000,000,000,000 bytes"),
])
def test_range_errors_name_the_node(start, limit, delta, why):
    m = _const_model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="rng")],
                     {"s": np.array(start), "l": np.array(limit), "d": np.array(delta)})
    with pytest.raises(EmberRuntimeError, match=f"node 'rng' \\(Range\\): {why}"):
        ember.onnx.load_model(m)()


def test_range_counts_like_onnx():
    for s, l, d in ((0, 5, 2), (5, 0, -2), (0, 0, 1), (2 ** 62, 2 ** 62 + 3, 1), (1, 0, 1)):
        m = _const_model([helper.make_node("Range", ["s", "l", "d"], ["y"])],
                         {"s": np.int64(s), "l": np.int64(l), "d": np.int64(d)})
        assert ember.onnx.load_model(m)().tolist() == list(range(s, l, d))


@pytest.mark.parametrize("shape", [[10 ** 12], [10 ** 6, 10 ** 6], [-1, 2]])
def test_constant_of_shape_beyond_memory_is_refused_before_allocating(shape):
    m = _const_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos")],
                     {"s": np.array(shape, np.int64)})
    with pytest.raises(EmberRuntimeError, match="node 'cos' \\(ConstantOfShape\\): output"):
        ember.onnx.load_model(m)()


def test_a_builtin_error_inside_an_importer_is_an_ember_error_naming_the_node():
    from ember.onnx.importer import importer

    @importer("RaisesValueError", since=1, domain="com.example.ember_tensor_data")
    def raises(a, x):
        raise ValueError("bad value 3")

    node = helper.make_node("RaisesValueError", ["x"], ["y"], name="odd",
                            domain="com.example.ember_tensor_data")
    g = helper.make_graph([node], "g", [_vi("x", [2])], [_vi("y", [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.example.ember_tensor_data", 1)])
    with pytest.raises(EmberValueError, match="node 'odd' \\(RaisesValueError\\): ValueError: "
                                              "bad value 3"):
        ember.onnx.load_model(m)(ember.zeros(2))
