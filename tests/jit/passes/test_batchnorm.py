"""Batch-norm folding into convolutions and linear layers (ember/jit/passes/batchnorm.py)."""
import numpy as np

import ember
import ember.jit as jit
from ember.jit import passes
from tests.jit.passes.helpers import kinds


def test_fold_batchnorm_conv_and_linear():
    from tests.jit.models import LeNetBN, example
    m = LeNetBN().eval()
    t = jit.trace(m, (example(m),))
    for freeze in (False, True):
        g = t.graph.copy()
        state = t.state_tensors()
        if freeze:
            g = passes.freeze(g, state)
            state = []
        g = passes.fold_batchnorm(g).lint()
        assert "native_batch_norm" not in kinds(g)
        if freeze:
            g = passes.constant_fold(g).lint()
            assert set(kinds(g)) <= {"constant", "conv2d", "relu", "max_pool2d_with_indices",
                                      "size", "reshape", "linear"}
        x = example(m, 3, seed=4)
        with ember.no_grad():
            got = jit.run_forward(g, x, *state)[0]
            np.testing.assert_allclose(got._data, m(x)._data, rtol=1e-4, atol=1e-5)
