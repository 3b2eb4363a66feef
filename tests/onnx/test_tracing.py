"""Tracing for export (ember/onnx/tracing.py): every IR node carries the user's source line that
called its op, custom autograd Functions are recorded with their class, and export refuses to
run inside another trace."""
import inspect

import pytest

import ember
from ember.onnx.errors import OnnxExportError
from ember.onnx.tracing import trace_for_export


class _Double(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _model(x):
    y = x.relu()
    return _Double.apply(y) + 1


def test_nodes_carry_the_calling_line_and_functions_their_class():
    traced, functions = trace_for_export(_model, (ember.randn(2, 3),))
    _, start = inspect.getsourcelines(_model)
    relu_line = start + 1
    nodes = traced.graph.nodes
    assert nodes and all(n.source for n in nodes)
    relu = [n for n in nodes if n.kind == "relu"]
    assert len(relu) == 1 and relu[0].source == f"{__file__}:{relu_line}: y = x.relu()"
    assert [cls for _, cls in functions.values()] == [_Double]
    out = traced(ember.ones(2, 3))
    assert (out.numpy() == 3).all()


def test_export_inside_a_trace_is_refused():
    def outer(x):
        trace_for_export(lambda t: t + 1, (x,))
        return x

    with pytest.raises(OnnxExportError, match="cannot be called while a trace is recording"):
        ember.jit.trace(outer, (ember.randn(2),))
