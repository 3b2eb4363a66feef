"""The random importers (ember/onnx/importer/ops_random.py): RandomUniform/RandomNormal and their
*Like forms give the declared shape and dtype and the declared distribution (moments within 5
standard errors), Bernoulli draws 0/1 at the given probabilities; a non-float dtype is refused
at load."""
import numpy as np
import pytest

from tests.onnx.importer.reference import TensorProto, helper, model

import ember  # noqa: E402
from ember.onnx import backend  # noqa: E402
from ember.onnx.importer import UnsupportedOnnxError  # noqa: E402

N = 20000


def _run(nodes, feeds, outs):
    ember.manual_seed(0)
    return backend.prepare(model(nodes, feeds, outs)).run([feeds[k] for k in feeds])


def test_uniform_and_normal_moments():
    like = np.zeros((N,), np.float64)
    u, n, ul, nl = _run([helper.make_node("RandomUniform", [], ["u"], low=-1.0, high=3.0,
                                          shape=[N]),
                         helper.make_node("RandomNormal", [], ["n"], mean=2.0, scale=0.5,
                                          shape=[N], dtype=TensorProto.DOUBLE),
                         helper.make_node("RandomUniformLike", ["z"], ["ul"]),
                         helper.make_node("RandomNormalLike", ["z"], ["nl"])], {"z": like},
                        ["u", "n", "ul", "nl"])
    assert u.dtype == np.float32 and u.shape == (N,) and n.dtype == np.float64
    assert ul.dtype == nl.dtype == np.float64 and ul.shape == nl.shape == (N,)
    assert u.min() >= -1 and u.max() < 3 and abs(u.mean() - 1.0) < 5 * np.sqrt(16 / 12 / N)
    assert abs(n.mean() - 2.0) < 5 * 0.5 / np.sqrt(N) and abs(n.std() - 0.5) < 0.02
    assert 0 <= ul.min() and ul.max() < 1 and abs(nl.mean()) < 5 / np.sqrt(N)


def test_bernoulli():
    p = np.full(N, 0.3, np.float32)
    (b,) = _run([helper.make_node("Bernoulli", ["p"], ["b"])], {"p": p}, ["b"])
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 5 * np.sqrt(0.21 / N)


def test_a_non_float_dtype_is_refused_at_load():
    with pytest.raises(UnsupportedOnnxError, match="RandomUniformLike"):
        backend.prepare(model([helper.make_node("RandomUniformLike", ["z"], ["u"],
                                                dtype=TensorProto.INT64)],
                              {"z": np.zeros(3, np.float32)}, ["u"]))
