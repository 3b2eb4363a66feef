"""The IR: building, editing, visiting, linting, text round trip of every constant kind."""
import math

import numpy as np
import pytest

import ember
import ember.jit as jit
from ember.jit.ir import ArrayRef, GenRef, Graph, GraphVisitor, LintError, SymRef, parse


def small_graph():
    g = Graph()
    x = g.add_input("x", np.float32, (2, 3))
    w = g.add_input("fc.weight", np.float32, (4, 3), role="param")
    a = g.add_node("linear", [x, w, None], {}, [(np.float32, (2, 4))]).output
    b = g.add_node("relu", [a], {}, [(np.float32, (2, 4))]).output
    g.outputs = [b]
    return g


def test_build_print_parse():
    g = small_graph().lint()
    text = str(g)
    assert "%fc.weight : f32[4, 3] = param" in text
    assert "%1 : f32[2, 4] = linear(%x, %fc.weight, None)" in text
    assert text.strip().endswith("return (%2)")
    assert parse(text) == g


def test_text_example_from_the_design():
    text = """graph(%11 : i64[35, 20],
      %0 : f32[100, 200] = param):
  %14 : f32[35, 20, 200] = embedding(%11, %0, padding_idx=-1)
  return (%14)"""
    g = parse(text)
    n = g.nodes[0]
    assert n.kind == "embedding" and n.attrs == {"padding_idx": -1}
    assert n.output.shape == (35, 20, 200) and n.output.dtype == np.float32
    assert [v.name for v in n.inputs] == ["11", "0"]
    assert str(parse(str(g))) == str(g)


def test_constants_of_every_kind_roundtrip():
    g = Graph()
    x = g.add_input("x", np.float32, (4, 4))
    s = g.add_node("size", [x], {"dim": 0}, [(np.int64, ())]).output
    g.constants["c0"] = np.arange(2)
    attrs = {"indices": (slice(None, SymRef(s), None), Ellipsis, None, ArrayRef("c0"), -1),
             "f": (math.inf, -math.inf, 1e-5, 0.1, True, "mode's", None, [1, 2], (3,)),
             "dt": np.dtype("float64"), "et": ember.int32, "gen": GenRef("default"),
             "g2": GenRef("g0")}
    n = g.add_node("getitem", [x], attrs, [(np.float32, (4,))])
    g.outputs = [n.output]
    g2 = parse(str(g), constants=g.constants)
    assert g2 == g and str(g2) == str(g)
    assert math.isnan(parse(str(g).replace("1e-05", "nan")).nodes[1].attrs["f"][2])


def test_editing_api():
    g = small_graph()
    lin, relu = g.nodes
    x = g.inputs[0]
    assert x.uses == [lin] and lin.inputs == [x, g.inputs[1]]
    assert relu.inputs[0].node is lin and lin.output.users == [relu]
    # insert a node between linear and relu: relu(mul(linear, 2))
    m = g.create_node("mul", [lin.output, 2.0], {}, [(np.float32, (2, 4))])
    g.insert(m, after=lin)
    relu.replace_input(lin.output, m.output)
    g.lint()
    assert [n.kind for n in g] == ["linear", "mul", "relu"]
    # replace all uses and remove
    relu.output.replace_all_uses_with(m.output)
    assert g.outputs == [m.output]
    g.remove(relu)
    g.lint()
    with pytest.raises(ValueError, match="still used"):
        g.remove(lin)
    assert g.find_nodes("mul")[0].arg("other") == 2.0
    m.set_arg("other", 3.0)
    assert "mul(%1, 3.0)" in str(g)


def test_remove_nodes_at_once():
    g = small_graph()
    lin, relu = g.nodes
    with pytest.raises(ValueError, match="still used"):
        g.remove_nodes([lin])                  # relu reads it
    with pytest.raises(ValueError, match="still used"):
        g.remove_nodes([lin, relu])            # relu's output is returned
    g.outputs = [g.inputs[0]]
    g.remove_nodes([lin, relu])                # a chain: read only among themselves
    assert g.nodes == [] and all(v.uses == [] for v in g.inputs)
    assert lin.graph is None and "1" not in g._names
    g.lint()


def test_visitor_dispatches_on_kind():
    class Count(GraphVisitor):
        def __init__(self):
            self.seen = []

        def visit_relu(self, node):
            self.seen.append("relu")

        def generic_visit(self, node):
            self.seen.append("other:" + node.kind)
    v = Count()
    v.visit(small_graph())
    assert v.seen == ["other:linear", "relu"]


def test_lint_catches_violations():
    g = small_graph()
    g.nodes.reverse()                      # relu before linear: use before def
    with pytest.raises(LintError, match="before it is defined"):
        g.lint()
    g = small_graph()
    g.nodes[1].output.uses.append(g.nodes[0])  # inconsistent use list
    with pytest.raises(LintError, match="use list"):
        g.lint()
    g = small_graph()
    g.outputs = [g.add_input("y", np.float32, (1,))]
    g.inputs.pop()
    with pytest.raises(LintError, match="not defined"):
        g.lint()
    g = small_graph()
    g.nodes[0].kind = "no_such_op"
    with pytest.raises(LintError, match="unknown node kind"):
        g.lint()


def test_code_has_last_use_deletes():
    t = jit.trace(lambda x: ((x * 2).relu() + 1).sum(), (ember.randn(3),))
    code = t.code
    assert code.startswith("def ")
    assert "del " in code
    lines = code.splitlines()
    # every intermediate is deleted right after its last reader
    assert any(ln.strip().startswith("del v1") for ln in lines)


def test_graph_copy_is_independent():
    g = small_graph()
    h = g.copy()
    assert h == g
    h.nodes[1].kind = "sigmoid"
    assert h != g


def _structure(g):
    """Everything copy() must reproduce: the text, and per value its identity-free links."""
    vals = g.values()
    index = {id(v): i for i, v in enumerate(vals)}
    links = [(v.name, v.dtype, v.shape, v.role, v.index, v.graph is g,
              None if v.node is None else g.nodes.index(v.node),
              [g.nodes.index(u) for u in v.uses]) for v in vals]
    groups = [_structure(n.attrs["graph"]) for n in g.nodes if n.kind == "fusion_group"]
    return (str(g), links, [index[id(o)] for o in g.outputs], sorted(g._names), g._next,
            [n.source for n in g.nodes], groups)


def test_graph_copy_is_what_the_text_form_reads_back():
    # copy() builds the graph parse(str(g)) gives, without the text: constants of every
    # kind, NumPy scalars normalised as the text writes them, traced ints, fusion groups
    g = Graph()
    x = g.add_input("x", np.float32, (4, 4))
    s = g.add_node("size", [x], {"dim": 0}, [(np.int64, ())]).output
    g.constants["c0"] = np.arange(2)
    attrs = {"indices": (slice(None, SymRef(s), None), Ellipsis, None, ArrayRef("c0"), -1),
             "f": (math.inf, -math.inf, np.float32(0.5), np.int64(3), True, "m", None, [1, 2]),
             "dt": np.dtype("float64"), "st": np.float32, "et": ember.int32,
             "gen": GenRef("default"), "g2": GenRef("g0"), "z": 1 + 2j}
    n = g.add_node("getitem", [x], attrs, [(np.float32, (4,))])
    n.source = "f.py:3"
    g.outputs = [n.output, s]
    h = g.copy()
    back = parse(str(g), constants=g.constants)
    for a, b in zip(g.nodes, back.nodes):
        b.source = a.source
    assert _structure(h) == _structure(back) and h == back
    assert type(h.nodes[1].attrs["f"][2]) is float and type(h.nodes[1].attrs["f"][3]) is int
    assert h.nodes[1].attrs["st"] == np.dtype(np.float32)
    assert h.constants == g.constants and h.constants is not g.constants
    h.nodes[1].attrs["f"][7].append(3)            # no list is shared
    assert g.nodes[1].attrs["f"][7] == [1, 2]
    h.lint()
    # a traced training graph with fusion groups
    m = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU(), ember.nn.Linear(8, 2))
    t = jit.trace(lambda a: (m(a).sigmoid() * 2 + 1).tanh().sum(), (ember.randn(3, 4),))
    opt = jit.optimize(t).graph
    assert any(n.kind == "fusion_group" for n in opt.nodes)
    for graph in (t.graph, opt):
        back = parse(str(graph))
        for a, b in zip(graph.nodes, back.nodes):
            b.source = a.source
        assert _structure(graph.copy()) == _structure(back)
        graph.copy().lint()


def test_state_formals_never_read_as_values():
    # a Sequential's parameters are 0.weight, 2.bias, ...: printed as %0.weight they read as
    # something of the value %0 (%2.bias beside %2 = relu(...)). They print as %self.0.weight
    # (Value.ref), keep their state-dict names, and the text reads back into an equal graph
    m = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU(), ember.nn.Linear(8, 2))
    g = jit.trace(m, (ember.randn(2, 4),)).graph
    text = str(g)
    assert "%self.2.weight : f32[2, 8] = param" in text
    assert "linear(%2, %self.2.weight, %self.2.bias)" in text
    import re
    assert not re.search(r"%\d+\.", text)        # no %<value>.<something>
    back = parse(text)
    assert back == g and str(back) == text
    assert [v.name for v in back.inputs] == ["input", "0.weight", "0.bias", "2.weight", "2.bias"]
    # a fused group's formal too, and an int(%...) reference to one
    h = Graph()
    w = h.add_input("0.weight", np.float32, (3,), role="param")
    n = h.add_node("size", [w], {"dim": 0}, [(np.int64, ())]).output
    r = h.add_node("reshape", [w], {"shape": (SymRef(n), 1)}, [(np.float32, (3, 1))]).output
    h.outputs = [r, w]
    assert "size(%self.0.weight, dim=0)" in str(h) and str(h).strip().endswith(
        "return (%2, %self.0.weight)")
    assert parse(str(h)) == h
