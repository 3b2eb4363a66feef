"""Symbolic functions, one module per area; importing this package registers them all."""
from ember.onnx.symbolics import (creation, elementwise, index, linalg, loss, nn, reduce,  # noqa
                                  rnn, shape, shape_index, sorting, special)
from ember.onnx.symbolics import breadth  # noqa: F401
