"""Symbolic functions, one module per op family; importing this package registers them all."""
from ember.onnx.symbolics import (creation, index, linalg, loss, nn, pointwise, reduce,  # noqa
                                  rnn, shape, shape_index, sorting)
