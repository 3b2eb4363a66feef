"""Index keys (ember/ops/indexing.py) against torch: uint8 masks."""
import warnings

import numpy as np
import pytest
import torch

import ember


def _run(lib, fn):
    """(result as a list or the exception's builtin class, number of warnings)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r = fn(lib)
            r = r.tolist()
        except Exception as e:  # noqa: BLE001 - compared with torch's
            r = [c for c in (IndexError, RuntimeError, TypeError, ValueError) if isinstance(e, c)]
    return r, len(w)


def _setitem(key, value):
    def f(m):
        y = m.arange(6).reshape(2, 3)
        y[key(m)] = value(m)
        return y
    return f


CASES = {
    "getitem mask": lambda m: (lambda x: x[(x > 25).to(m.uint8)])(m.arange(20, 30)),
    "getitem 2-d mask": lambda m: m.arange(6).reshape(2, 3)[
        m.tensor([[1, 0, 1], [0, 1, 1]], dtype=m.uint8)],
    "getitem mask after a slice": lambda m: m.arange(6).reshape(2, 3)[
        :, m.tensor([1, 0, 1], dtype=m.uint8)],
    "getitem 0-d byte": lambda m: m.arange(6).reshape(2, 3)[m.tensor(1, dtype=m.uint8)],
    "getitem 0-d zero byte": lambda m: m.arange(6).reshape(2, 3)[m.tensor(0, dtype=m.uint8)],
    "getitem mask shape mismatch": lambda m: m.arange(6).reshape(2, 3)[
        m.tensor([1, 0, 1], dtype=m.uint8)],
    "setitem rows": _setitem(lambda m: m.tensor([1, 0], dtype=m.uint8),
                             lambda m: m.tensor([[5, 6, 7]])),
    "setitem two masks": _setitem(lambda m: (m.tensor([1, 0], dtype=m.uint8),
                                             m.tensor([1, 0, 1], dtype=m.uint8)),
                                  lambda m: 5),
    "setitem one-element value": _setitem(lambda m: m.tensor([1, 0], dtype=m.uint8),
                                          lambda m: 5),
    "setitem one-element tensor": _setitem(lambda m: (slice(None), m.tensor([1, 0, 1],
                                                                           dtype=m.uint8)),
                                           lambda m: m.tensor([5])),
    "setitem 0-d byte": _setitem(lambda m: m.tensor(1, dtype=m.uint8), lambda m: 5),
    "index_put": lambda m: m.index_put(m.arange(6.), ((m.arange(6) > 2).to(m.uint8),),
                                       m.tensor([7., 8., 9.])),
    "index_put accumulate": lambda m: m.index_put(m.arange(6.), ((m.arange(6) > 2).to(m.uint8),),
                                                  m.tensor(5.), accumulate=True),
    "index_put one-element": lambda m: m.index_put(m.arange(6.), ((m.arange(6) > 2).to(m.uint8),),
                                                   m.tensor(5.)),
    "index_put other dtype": lambda m: m.index_put(m.zeros(3), (m.tensor([0, 1]),),
                                                   m.tensor([1.0, 2.0], dtype=m.float64)),
    "index_put_ long value": lambda m: m.zeros(3).index_put_((m.tensor([0]),), m.tensor(1)),
    "setitem casts": _setitem(lambda m: m.tensor([0, 1]), lambda m: m.tensor([1.5, 2.5])),
    "index_put_": lambda m: m.arange(6.).index_put_(((m.arange(6) > 2).to(m.uint8),),
                                                    m.tensor([7., 8., 9.])),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_uint8_index_is_a_mask_as_in_torch(name):
    assert _run(ember, CASES[name]) == _run(torch, CASES[name])


def test_uint8_ndarray_index_is_a_mask():
    x = ember.arange(4)
    with pytest.warns(UserWarning, match="uint8"):
        assert x[np.array([1, 0, 0, 1], np.uint8)].tolist() == [0, 3]


def test_uint8_mask_gradient_matches_bool_mask():
    x = ember.arange(6.).requires_grad_()
    with pytest.warns(UserWarning, match="uint8"):
        x[(x > 2).to(ember.uint8)].sum().backward()
    assert x.grad.tolist() == [0, 0, 0, 1, 1, 1]
