"""The helpers shared by the symbolic modules (ember/onnx/symbolics/_util.py): argument pairs,
fixed-value checks, dtype mapping and promotion, tensor-or-scalar operands, rank-1 views."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from ember.onnx.context import Dyn, GraphContext  # noqa: E402
from ember.onnx.symbolics._util import (Rank1, SymbolicError, onnx_dtype, pair,  # noqa: E402
                                        promote, static, tensor_or_scalar)


def test_pair_repeats_a_scalar_or_a_one_element_list():
    assert pair(3) == (3, 3) and pair(2, n=3) == (2, 2, 2)
    assert pair([4]) == (4, 4) and pair((1, 2)) == (1, 2) and pair([1, 2, 3], n=3) == (1, 2, 3)


def test_static_refuses_a_traced_size_naming_the_argument():
    assert static(5) == 5
    with pytest.raises(SymbolicError, match="kernel_size is a traced size"):
        static(Dyn("n"), "kernel_size")
    with pytest.raises(SymbolicError, match="stride is a traced size"):
        pair((1, Dyn("n")), name="stride")


@pytest.mark.parametrize("dtype,want", [(np.float32, TensorProto.FLOAT),
                                        (np.float64, TensorProto.DOUBLE),
                                        (np.int64, TensorProto.INT64), (np.bool_, TensorProto.BOOL),
                                        (np.float16, TensorProto.FLOAT16)])
def test_onnx_dtype(dtype, want):
    assert onnx_dtype(dtype) == want


class _V:
    """Stands in for a JIT IR value (dtype and shape)."""

    def __init__(self, dtype, shape=()):
        self.dtype, self.shape = np.dtype(dtype), shape


class _Node:
    def __init__(self, args, outputs):
        self.args, self.outputs = args, outputs


def test_promote_follows_the_tensor_arguments_not_the_scalars(monkeypatch):
    from ember.jit import ir
    monkeypatch.setattr(ir, "Value", _V)
    node = _Node([_V(np.float32), 2.5, _V(np.float16)], [_V(np.float64)])
    assert promote(node) == np.float32 == np.result_type(np.float32, np.float16)
    assert promote(_Node([_V(np.int32), _V(np.int64)], [_V(np.int64)])) == np.int64
    assert promote(_Node([1.0, 2], [_V(np.float64)])) == np.float64   # no tensors: the output's


def test_tensor_or_scalar():
    g = GraphContext(17, helper)
    g.set_type("x", np.float32)
    assert tensor_or_scalar(g, "x", np.float32) == "x" and tensor_or_scalar(g, None, "f4") is None
    c = tensor_or_scalar(g, 3, np.float64)
    assert g.dtype(c) == np.float64 and g.shape(c) == ()
    y = tensor_or_scalar(g, "x", np.int64)
    assert g.nodes[-1].op_type == "Cast" and g.dtype(y) == np.int64
    n = tensor_or_scalar(g, Dyn("n"), np.float32)
    assert list(g.nodes[-1].input) == ["n"] and g.nodes[-1].output[0] == n


def test_rank1_sees_zero_d_arguments_as_vectors():
    r = Rank1(_Node([_V(np.float32, ()), _V(np.int64, (3, 2))], [_V(np.float32, ())]))
    assert [a.shape for a in r.args] == [(1,), (3, 2)] and r.outputs[0].shape == (1,)
    assert r.args[1].dtype == np.int64
