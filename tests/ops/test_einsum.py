"""einsum against torch: ellipses (broadcast, summed when absent from the output), spaces,
implicit output (ASCII order), size-1 broadcasting, repeated subscripts (diagonals) — forward,
backward and float64 gradcheck / gradgradcheck."""
import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck
from ember.errors import EmberError

torch = pytest.importorskip("torch")

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("...ik, ...j -> ij", [(1, 2, 3), (3,)]),
    ("i...->...", [(3, 3)]),
    ("...ij,...j->...i", [(2, 1, 2, 3), (5, 3)]),
    ("b...,a...", [(2, 3), (4, 3)]),
    ("ij,Ab", [(2, 3), (4, 4)]),
    ("ij,ij->ij", [(2, 3), (1, 3)]),
    ("iji->j", [(2, 3, 2)]),
    ("iij->ji", [(3, 3, 2)]),
    ("ii", [(3, 3)]),
    ("i,i", [(3,), (3,)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("bn,anm,bm->ba", [(0, 3), (4, 3, 5), (0, 5)]),      # empty batch (F.bilinear)
    ("ij,ij->ij", [(0, 3), (1, 3)]),                      # size 1 broadcast to 0
]


@pytest.mark.parametrize("eq,shapes", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_einsum_matches_torch(eq, shapes):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s) for s in shapes]
    t = [torch.tensor(x, requires_grad=True) for x in xs]
    e = [ember.tensor(x, requires_grad=True) for x in xs]
    rt, re_ = torch.einsum(eq, *t), ember.einsum(eq, *e)
    assert tuple(re_.shape) == tuple(rt.shape)
    np.testing.assert_allclose(re_.detach().numpy(), rt.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(tuple(rt.shape))
    rt.backward(torch.tensor(g))
    re_.backward(ember.tensor(g))
    for a, b in zip(e, t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12)
    inp = tuple(ember.tensor(x, requires_grad=True) for x in xs)
    assert gradcheck(lambda *a: ember.einsum(eq, *a), inp)
    assert gradgradcheck(lambda *a: ember.einsum(eq, *a), inp)


@pytest.mark.parametrize("eq,shapes,msg", [
    ("ij,jk->ik", [(3, 4)], "names 2 operands"),
    ("ijk->i", [(3, 4)], "do not match"),
    ("i1->i", [(3, 4)], "invalid subscript"),
])
def test_einsum_errors_name_the_equation(eq, shapes, msg):
    with pytest.raises(EmberError, match=msg):
        ember.einsum(eq, *[ember.ones(*s) for s in shapes])


@pytest.mark.parametrize("eq,n", [("ij->j", 1), ("ij->", 1), ("ii", 1), ("ii->i", 1),
                                  ("ij->ji", 1), ("ij,jk->ik", 2), ("i,i->", 2)])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "bool"])
def test_einsum_integer_dtypes_like_torch(eq, n, dtype):
    """One operand summed over a label is torch's sum (int64 for integers and bools; int8
    kept and wrapped before); with more operands, or no label summed, the dtype stays (found by
    tests/differential)."""
    a = np.arange(16).reshape(4, 4).astype(dtype) * (1 if dtype == "bool" else 50)
    ops = [a if eq.split("->")[0].split(",")[k].__len__() == 2 else a[0] for k in range(n)]
    try:
        want = torch.einsum(eq, *[torch.from_numpy(o.copy()) for o in ops])
    except (RuntimeError, NotImplementedError):
        pytest.skip("torch has no kernel for this dtype")
    got = ember.einsum(eq, *[ember.from_numpy(o.copy()) for o in ops])
    assert got.dtype.name == str(want.dtype).replace("torch.", "")
    np.testing.assert_array_equal(got._data, want.numpy())
