"""DataParallel (ember/nn/parallel/data_parallel.py): on the CPU it runs the wrapped module
unchanged, with torch's state-dict keys (``module.`` prefix)."""
import numpy as np
import pytest

import ember
import ember.nn as nn

torch = pytest.importorskip("torch")


def test_data_parallel_runs_the_module_on_the_cpu():
    lin = nn.Linear(3, 2)
    dp = nn.parallel.DataParallel(lin, device_ids=[0])
    assert dp.module is lin and nn.DataParallel is nn.parallel.DataParallel
    assert list(dp.state_dict()) == list(torch.nn.DataParallel(torch.nn.Linear(3, 2))
                                         .state_dict()) == ["module.weight", "module.bias"]
    x = ember.randn(4, 3)
    np.testing.assert_array_equal(dp(x).detach().numpy(), lin(x).detach().numpy())
    np.testing.assert_array_equal(
        nn.parallel.data_parallel(lin, x).detach().numpy(), lin(x).detach().numpy())

