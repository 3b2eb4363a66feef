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
