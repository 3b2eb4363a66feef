"""The ``ember.linalg`` namespace (ember/linalg.py) is torch.linalg's: every function torch.linalg
has is there under the same name, everything ember.linalg exports is a torch.linalg name, and a
sample of them give torch's values (float64)."""
import numpy as np
import pytest

import ember
import ember.linalg as E

torch = pytest.importorskip("torch")
T = torch.linalg


def test_the_names_are_torchs():
    theirs = {n for n in dir(T) if not n.startswith("_") and callable(getattr(T, n))
              and n != "Tensor"}
    assert theirs <= set(dir(E)), sorted(theirs - set(dir(E)))
    assert set(E.__all__) <= set(dir(T)), sorted(set(E.__all__) - set(dir(T)))
    assert all(callable(getattr(E, n)) for n in E.__all__)


A = np.random.default_rng(0).standard_normal((3, 4, 4)) + 4 * np.eye(4)


@pytest.mark.parametrize("call", [lambda m, a: m.linalg.det(a), lambda m, a: m.linalg.inv(a),
                                  lambda m, a: m.linalg.norm(a, dim=(-2, -1)),
                                  lambda m, a: m.linalg.matrix_norm(a, ord="nuc"),
                                  lambda m, a: m.linalg.solve(a, a[..., :1]),
                                  lambda m, a: m.linalg.slogdet(a).logabsdet,
                                  lambda m, a: m.linalg.eigvalsh(a + a.transpose(-1, -2))])
def test_values_are_torchs(call):
    a = call(ember, ember.tensor(A)).numpy()
    b = call(torch, torch.tensor(A)).numpy()
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)

