"""Symbolic functions, one module per op family (the families of ``ember/ops/``; ``complex``:
complex values, ``rnn``: recurrent layers as ONNX LSTM/GRU); importing this package registers
them all."""
from ember.onnx.symbolics import (creation, indexing, linalg, loss, nn, pointwise,  # noqa
                                  reduction, rnn, shape, sorting)
