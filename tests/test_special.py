"""The ``ember.special`` namespace (ember/special.py) is torch.special's: every function
torch.special has is there under the same name, everything ember.special exports is a
torch.special name, and a sample of them give torch's values (float64)."""
import numpy as np
import pytest

import ember
import ember.special as E

torch = pytest.importorskip("torch")
T = torch.special


def test_the_names_are_torchs():
    theirs = {n for n in dir(T) if not n.startswith("_") and callable(getattr(T, n))
              and n != "Tensor"}
    assert theirs <= set(dir(E)), sorted(theirs - set(dir(E)))
    assert set(E.__all__) <= set(dir(T)), sorted(set(E.__all__) - set(dir(T)))
    assert all(callable(getattr(E, n)) for n in E.__all__)


X = np.linspace(0.05, 3.0, 13)


@pytest.mark.parametrize("name", ["erf", "erfc", "erfinv", "expit", "logit", "gammaln",
                                  "digamma", "i0", "i0e", "i1", "ndtr", "ndtri", "sinc",
                                  "entr", "log_ndtr", "expm1", "xlog1py"])
def test_values_are_torchs(name):
    x = X / 3.2 if name in ("erfinv", "logit", "ndtri") else X
    args = (x, x[::-1].copy()) if name == "xlog1py" else (x,)
    a = getattr(E, name)(*map(ember.tensor, args)).numpy()
    b = getattr(T, name)(*map(torch.tensor, args)).numpy()
    assert a.dtype == b.dtype
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)

