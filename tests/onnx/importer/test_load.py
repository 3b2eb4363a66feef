"""Loading an ONNX model (ember/onnx/importer/load.py): ember-exported models load back and
match, train, trace and re-export; inputs by position and name; bad files and unsupported graphs
are clear errors at load time, bad calls at run time."""
import io

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember import nn  # noqa: E402
from ember.onnx.importer import OnnxImportError, UnsupportedOnnxError  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from tests.onnx.models import tiny_model, vi  # noqa: E402
from tests.onnx.test_models import ALL, _as_tuple, _flat, _make  # noqa: E402


def _export(model, ex, opset=17, dynamic=True, batch_axis=0):
    n_out = len(_flat(model(*ex)))
    ins = [f"input{i}" for i in range(len(ex))]
    outs = [f"output{i}" for i in range(n_out)]
    dyn = {n: {batch_axis: "batch"} for n in ins} if dynamic else None
    return ember.onnx.build_model(model, ex, opset_version=opset, input_names=ins,
                                  output_names=outs, dynamic_axes=dyn)


@pytest.mark.parametrize("name", ALL)
def test_exported_models_round_trip(name):
    model, factory, batch_axis = _make(name)
    ex = _as_tuple(factory.example(2))
    with ember.no_grad():   # every input's batch axis dynamic (bilstm: x, h0 and c0 on axis 1)
        proto = _export(model, ex, batch_axis=batch_axis)
    assert all(i.type.tensor_type.shape.dim[batch_axis].dim_param == "batch"
               for i in proto.graph.input)
    imported = ember.onnx.load_model(proto)
    for batch in (2, 5):
        args = _as_tuple(factory.example(batch))
        with ember.no_grad():
            want = [t.numpy() for t in _flat(model(*args))]
            got = [t.numpy() for t in _flat(imported(*args))]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{name} b={batch}")


def _cnn():
    ember.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 4))


def _data(n=8):
    rng = np.random.default_rng(3)
    return (ember.tensor(rng.standard_normal((n, 3, 8, 8)).astype(np.float32)),
            ember.tensor(rng.integers(0, 4, n)))


def test_state_dict_names_come_from_the_graph():
    model = _cnn()
    x, _ = _data(2)
    proto = ember.onnx.build_model(model, (x,), input_names=["x"])
    imported = ember.onnx.load_model(proto)
    names = {t.name for t in proto.graph.initializer}
    sd = imported.state_dict()
    assert set(imported.onnx_names.values()) == names
    assert {imported.onnx_names[k] for k in sd} == names
    assert "0.weight" in sd and isinstance(imported.get_parameter("0.weight"), nn.Parameter)
    # nested names load straight back into the original architecture
    fresh = _cnn()
    with ember.no_grad():
        for p in fresh.parameters():
            p.mul_(0.0)
    fresh.load_state_dict(sd)
    with ember.no_grad():
        np.testing.assert_allclose(fresh(x).numpy(), model(x).numpy(), rtol=1e-6)


def test_sanitised_names_keep_a_mapping():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    w = onnx.numpy_helper.from_array(np.ones((2, 3), np.float32), "layer..w/0")
    idx = onnx.numpy_helper.from_array(np.array([1], np.int64), "steps")
    g = helper.make_graph([helper.make_node("Add", ["x", "layer..w/0"], ["y"])], "g", [x], [y],
                          [w, idx])
    m = ember.onnx.load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert m.onnx_names == {"layer__w_0": "layer..w/0", "steps": "steps"}
    assert isinstance(m.get_parameter("layer__w_0"), nn.Parameter)
    assert "steps" in dict(m.named_buffers())   # integer initializers are buffers
    out = m(ember.zeros(2, 3))
    np.testing.assert_allclose(out.detach().numpy(), np.ones((2, 3)))


def test_imported_cnn_trains_with_the_original_gradients():
    model = _cnn()
    x, y = _data()
    imported = ember.onnx.load_model(ember.onnx.build_model(model, (x,)))
    F = ember.nn.functional
    F.cross_entropy(model(x), y).backward()
    F.cross_entropy(imported(x), y).backward()
    orig = dict(model.named_parameters())
    for key, p in imported.named_parameters():
        q = orig[imported.onnx_names[key]]
        assert p.grad is not None, key
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=key)
    opt = ember.optim.SGD(imported.parameters(), lr=0.1)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.cross_entropy(imported(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    assert losses[-1] < losses[0], losses


def test_imported_model_traces_and_reexports():
    ort = pytest.importorskip("onnxruntime")
    model = _cnn()
    x, _ = _data(3)
    imported = ember.onnx.load_model(ember.onnx.build_model(model, (x,)))
    traced = ember.jit.trace(imported, (x,))
    with ember.no_grad():
        want = model(x).numpy()
        np.testing.assert_allclose(traced(x).numpy(), want, rtol=1e-5, atol=1e-6)
    buf = io.BytesIO()
    ember.onnx.export(imported, (x,), buf, input_names=["x"])
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": x.numpy()})[0], want, rtol=1e-4, atol=1e-5)


def test_inputs_by_position_and_by_name_outputs_as_declared():
    m = tiny_model([helper.make_node("Sub", ["a", "b"], ["d"]),
                    helper.make_node("Add", ["a", "b"], ["s"])],
                   [vi("a", [2]), vi("b", [2])], [vi("d", [2]), vi("s", [2])])
    mod = ember.onnx.load_model(m)
    a, b = ember.tensor([5.0, 1.0]), ember.tensor([1.0, 1.0])
    d, s = mod(a, b=b)
    assert d.tolist() == [4.0, 0.0] and s.tolist() == [6.0, 2.0]
    d2, _ = mod(b=b, a=a)
    assert d2.tolist() == [4.0, 0.0]


def test_unsupported_op_and_attribute_are_named_at_load():
    m = tiny_model([helper.make_node("Relu", ["x"], ["h"], name="first"),
                    helper.make_node("FancyOp", ["h"], ["y"], name="my_fancy_node")],
                   [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(UnsupportedOnnxError) as ei:
        ember.onnx.load_model(m)
    msg = str(ei.value)
    assert "'FancyOp' (opset 17) at node 'my_fancy_node'" in msg and "first" not in msg
    m = tiny_model([helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha=0.1,
                                     wobble=2)], [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(UnsupportedOnnxError, match=r"'LeakyRelu' \(opset 17\) at node 'lr': "
                                                   r"attribute 'wobble'"):
        ember.onnx.load_model(m)
    m = tiny_model([helper.make_node("Conv", ["x", "w"], ["y"], name="c",
                                     auto_pad="SIDEWAYS")],
                   [vi("x", [1, 1, 3, 3]), vi("w", [1, 1, 1, 1])], [vi("y", [1, 1, 3, 3])])
    with pytest.raises(UnsupportedOnnxError, match="attribute 'auto_pad'"):
        ember.onnx.load_model(m)


def test_truncated_and_corrupt_files(tmp_path):
    data = ember.onnx.build_model(_cnn(), (_data(2)[0],)).SerializeToString()
    p = tmp_path / "cut.onnx"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(OnnxImportError, match="cut.onnx"):
        ember.onnx.load_model(str(p))
    p.write_bytes(b"definitely not a protobuf \xff\xfe")
    with pytest.raises(OnnxImportError, match="cut.onnx"):
        ember.onnx.load_model(p)
    with pytest.raises(OnnxImportError, match="cannot read"):
        ember.onnx.load_model(tmp_path / "missing.onnx")


def test_missing_initializer_and_dangling_input_are_named():
    proto = ember.onnx.build_model(_cnn(), (_data(2)[0],))
    gone = proto.graph.initializer[0].name
    del proto.graph.initializer[0]
    with pytest.raises(OnnxImportError, match=f"'{gone}'.*missing initializer"):
        ember.onnx.load_model(proto)
    m = tiny_model([helper.make_node("Add", ["x", "nowhere"], ["y"], name="adder")],
                   [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(OnnxImportError, match="node 'adder' .*'nowhere'"):
        ember.onnx.load_model(m)


def test_wrong_input_rank_names_the_input():
    proto = ember.onnx.build_model(_cnn(), (_data(2)[0],), input_names=["images"],
                                   dynamic_axes={"images": {0: "batch"}})
    mod = ember.onnx.load_model(proto)
    with pytest.raises(ember.errors.EmberRuntimeError, match="input 'images' expects rank 4"):
        mod(ember.zeros(3, 8, 8))
    with pytest.raises(ember.errors.EmberRuntimeError,
                       match="input 'images' expects size 3 at dim 1"):
        mod(ember.zeros(2, 4, 8, 8))
    with pytest.raises(ember.errors.EmberTypeError, match="input 'images' expects dtype"):
        mod(ember.zeros(2, 3, 8, 8, dtype=ember.float64))


def test_old_opset_goes_through_the_version_converter():
    m = tiny_model([helper.make_node("Relu", ["x"], ["h"]),
                    helper.make_node("Add", ["h", "x"], ["y"])],
                   [vi("x", [3])], [vi("y", [3])], opset=6)
    mod = ember.onnx.load_model(m)
    assert mod.opsets[""] == 13
    assert mod(ember.tensor([-1.0, 0.0, 2.0])).tolist() == [-1.0, 0.0, 4.0]


def test_run_time_errors_name_the_node():
    m = tiny_model([helper.make_node("Add", ["a", "b"], ["y"], name="the_add")],
                   [vi("a", [2, "n"]), vi("b", [3, "n"])], [vi("y", [2, "n"])])
    mod = ember.onnx.load_model(m)
    with pytest.raises(ember.errors.EmberRuntimeError, match="node 'the_add' \\(Add\\)"):
        mod(ember.zeros(2, 4), ember.zeros(3, 4))


def test_more_bad_files_graphs_and_calls():
    with pytest.raises(OnnxImportError, match="holds no ONNX graph .*0 bytes"):
        ember.onnx.load_model(b"")
    tensor = onnx.numpy_helper.from_array(np.ones(3, np.float32), "t").SerializeToString()
    with pytest.raises(OnnxImportError, match="not a valid ONNX model"):
        ember.onnx.load_model(tensor)
    # a dangling input inside an If branch names the inner node
    then = helper.make_graph([helper.make_node("Add", ["x", "ghost"], ["z"], name="inner_add")],
                             "then", [], [vi("z", [2])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["z"])], "else", [],
                              [vi("z", [2])])
    m = tiny_model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                   [vi("c", [], TensorProto.BOOL), vi("x", [2])], [vi("y", [2])])
    with pytest.raises(OnnxImportError, match="node 'inner_add' \\(Add\\) reads input 1 'ghost'"):
        ember.onnx.load_model(m)
    m = tiny_model([helper.make_node("Relu", ["x"], ["h"])], [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(OnnxImportError, match="graph output 'y' is produced by no node"):
        ember.onnx.load_model(m)
    mod = ember.onnx.load_model(tiny_model([helper.make_node("Add", ["a", "b"], ["y"])],
                                           [vi("a", [2]), vi("b", [2])], [vi("y", [2])]))
    one = ember.ones(2)
    with pytest.raises(ember.errors.EmberTypeError, match="missing input 'b'"):
        mod(one)
    with pytest.raises(ember.errors.EmberTypeError, match="takes 2 inputs"):
        mod(one, one, one)
    with pytest.raises(ember.errors.EmberTypeError, match="no input named 'q'"):
        mod(a=one, q=one)
    with pytest.raises(ember.errors.EmberTypeError, match="input 'a' given twice"):
        mod(one, a=one)


