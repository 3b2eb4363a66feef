"""ember/jit/codegen.py: generated code in array and tensor mode."""
import warnings

import numpy as np

import ember
from ember.jit.codegen import compile_graph
from ember.jit.ir import ArrayRef


def test_an_index_array_attribute_stays_an_ndarray_in_tensor_mode():
    # x[[1, 2]] dispatches getitem with an ndarray index (an ArrayRef attribute in the IR);
    # tensor mode passed it as a Tensor, which autograd saved and getitem_backward's kernel
    # then refused ("operand 'Tensor' does not support ufuncs"), so ember.compile's eager
    # fallback for such a function could not run a backward
    x = ember.randn(5, 4, 3, dtype=ember.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = ember.jit.trace(lambda t: t[[1, 2]] * 2, (x,))
    g = traced.graph
    n = g.find_nodes("getitem")[0]
    assert isinstance(n.attrs["indices"], ArrayRef)
    fn, _ = compile_graph(g, "tensor", "f")
    y = fn(x)[0]
    (gx,) = ember.autograd.grad([y], [x], [ember.ones_like(y)])
    want = np.zeros((5, 4, 3))
    want[[1, 2]] = 2
    np.testing.assert_array_equal(gx.numpy(), want)
    # array mode: the same ndarray
    out = compile_graph(g, "array", "f")[0](x._data)[0]
    np.testing.assert_array_equal(out, x._data[[1, 2]] * 2)


def test_compiled_list_index_backward_matches_eager():
    x = ember.randn(5, 4, dtype=ember.float64, requires_grad=True)
    f = ember.compile(lambda t, i: t[i].sin())
    f(x, [3, 1])
    y = f(x, [3, 1])
    y.sum().backward()
    want = np.zeros((5, 4))
    want[[3, 1]] = np.cos(x._data[[3, 1]])
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=0, atol=1e-15)
    assert f._compiled.backward_fallbacks == []


def _scaled_relu_graph():
    x = ember.randn(3, 4, dtype=ember.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = ember.jit.trace(lambda t: (ember.relu(t * 2.0) + 1.0).reshape(t.shape[0], -1),
                                 (x,))
    return traced.graph, x._data


def test_a_lowering_rule_writes_a_node_and_folds_the_next_into_it():
    """codegen is the one writer: a rule answers a node's Statement (here ``mul`` and the
    ``relu`` after it as one NumPy call) and SKIP for the node it folded; everything else
    (names, dels, the return) is written as for any program, and the result is the
    interpreter's."""
    from ember.jit.codegen import SKIP, Statement, generate
    from ember.jit.interpreter import run_forward
    g, x = _scaled_relu_graph()
    mul = g.find_nodes("mul")[0]
    relu = mul.output.uses[0]
    assert relu.kind == "relu"
    asked = []

    def rule(node, w):
        asked.append(node.kind)
        if node is mul:
            return Statement(rhs=f"{w.bind(np.maximum, 'maximum')}({w.ref(node.args[0])} * "
                                 f"{w.ref(node.args[1])}, 0.0)", defines=[relu.output])
        return SKIP if node is relu else None
    fn, src = compile_graph(g, "array", "f", specialize=False, rules=(rule,))
    assert "maximum(" in src and "relu(" not in src and "mul(" not in src
    np.testing.assert_array_equal(fn(x)[0], run_forward(g, x, mode="array")[0])
    assert "mul" in asked and "relu" in asked
    # a rule that answers None leaves every node to its kernel
    src_plain = generate(g, "f", rules=(lambda n, w: None,))[0]
    assert src_plain == generate(g, "f")[0]


def test_known_sizes_are_literals_and_their_nodes_vanish():
    from ember.jit.codegen import generate
    from ember.jit.fastpath import int_values
    from ember.jit.interpreter import run_forward
    g, x = _scaled_relu_graph()
    sizes = {i: 3 for i in int_values(g)}
    assert sizes
    fn, src = compile_graph(g, "array", "f", consts=sizes)
    assert "size(" not in src and ".shape[" not in src and "reshape((3, -1))" in src
    np.testing.assert_array_equal(fn(x)[0], run_forward(g, x, mode="array")[0])
    # without them, the size is read from the input at every call
    assert ".shape[0]" in generate(g, "f", specialize=True)[0]
