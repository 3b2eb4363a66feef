"""Indexing ops (ember/ops/indexing.py) against torch: uint8 masks, masked_fill, gather and
scatter (reduce keyword, 0-d and empty indices)."""
import importlib
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


def test_masked_fill_broadcasts_self_out_of_place():
    x = ember.randn(5, requires_grad=True)
    m = ember.tensor([[True, False, True, False, False]] * 3)
    y = x.masked_fill(m, 2.0)
    assert y.shape == (3, 5)
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 3.0, 0.0, 3.0, 3.0]
    with pytest.raises(RuntimeError, match="masked_fill_"):
        ember.zeros(5).masked_fill_(m, 1.0)


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_scatter_reduce_keyword_matches_torch_and_exports():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x, s = rng.standard_normal((4, 3)), rng.standard_normal((2, 3))
    i = np.array([[0, 1, 2], [0, 0, 1]])
    for reduce in ("add", "multiply"):
        for src in (s, 2.5):
            ref = torch.tensor(x).scatter(0, torch.tensor(i), torch.tensor(src) if
                                          isinstance(src, np.ndarray) else src, reduce=reduce)
            got = ember.tensor(x).scatter(0, ember.tensor(i), ember.tensor(src) if
                                          isinstance(src, np.ndarray) else src, reduce=reduce)
            np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-12)
    X = ember.tensor(x, requires_grad=True)
    S = ember.tensor(s, requires_grad=True)
    gx, gs = ember.autograd.grad(ember.scatter(X, 0, ember.tensor(i), S, reduce="add").sum(),
                                 [X, S])
    assert gx.tolist() == np.ones((4, 3)).tolist() and gs.tolist() == np.ones((2, 3)).tolist()
    with pytest.raises(ember.UnsupportedError, match="multiply"):
        ember.autograd.grad(ember.scatter(X, 0, ember.tensor(i), S, reduce="multiply").sum(), [X])
    with pytest.raises(RuntimeError, match="reduce argument"):
        ember.scatter(ember.tensor(x), 0, ember.tensor(i), 1.0, reduce="max")
    ort = pytest.importorskip("onnxruntime")
    import io
    onnx_export = importlib.import_module("ember.onnx").export

    class M(ember.nn.Module):
        def forward(self, a, b):
            return a.scatter(0, ember.tensor(i), b, reduce="multiply")

    buf = io.BytesIO()
    onnx_export(M(), (ember.tensor(x), ember.tensor(s)), buf, opset_version=17)
    sess = ort.InferenceSession(buf.getvalue())
    names = [n.name for n in sess.get_inputs()]
    out = sess.run(None, dict(zip(names, (x, s))))[0]
    np.testing.assert_allclose(out, M()(ember.tensor(x), ember.tensor(s)).numpy(), rtol=1e-12)


def test_gather_scatter_zero_d_and_empty_index_and_cat_backward_with_empty():
    torch = pytest.importorskip("torch")
    assert ember.gather(ember.tensor(3.0), 0, ember.tensor([0])).tolist() == [3.0]
    assert ember.gather(ember.tensor(3.0), 0, ember.tensor(0)).shape == ()
    x = ember.randn(5, requires_grad=True)
    g = ember.gather(x, 0, ember.zeros(2, 0, dtype=ember.int64))
    assert g.shape == (2, 0)
    (gx,) = ember.autograd.grad(g.sum(), [x])
    assert gx.tolist() == [0.0] * 5
    assert float(ember.scatter_add(ember.tensor(3.0), 0, ember.tensor(0), ember.tensor(2.0))) == 5.0
    assert float(ember.scatter(ember.tensor(3.0), 0, ember.tensor(0), ember.tensor(2.0))) == 2.0
    a = ember.randn(5, 2, requires_grad=True)
    e = ember.zeros(0, requires_grad=True)
    y = ember.cat([e, a, e], dim=1)
    ga, ge = ember.autograd.grad((y * 2).sum(), [a, e])
    assert ga.tolist() == (2 * np.ones((5, 2))).tolist() and ge.shape == (0,)
    ref = torch.cat([torch.zeros(0), torch.ones(5, 2)], dim=1)
    assert tuple(ref.shape) == tuple(y.shape)
