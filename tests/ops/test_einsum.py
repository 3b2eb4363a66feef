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


def test_einsum_sublist_form_matches_torch():
    """``einsum(op1, sublist1, op2, sublist2, ..., [out])``: integer subscripts 0-25 are A-Z,
    26-51 a-z, ``...`` an ellipsis; without the output list the implicit output applies."""
    a = np.arange(24.0).reshape(2, 3, 4)
    b = np.arange(20.0).reshape(4, 5) / 7
    cases = [lambda x, y: (x, [Ellipsis, 1, 2], y, [2, 30], [Ellipsis, 1, 30]),
             lambda x, y: (x, [0, 1, 2], y, [2, 51]),
             lambda x, y: (x, [5, 6, 7], x, [5, 6, 7], [])]
    for case in cases:
        want = torch.einsum(*case(torch.from_numpy(a.copy()), torch.from_numpy(b.copy())))
        got = ember.einsum(*case(ember.from_numpy(a.copy()), ember.from_numpy(b.copy())))
        np.testing.assert_allclose(got._data, want.numpy(), rtol=1e-12)
    x = ember.from_numpy(a.copy()).requires_grad_()
    ember.einsum(x, [0, 1, 2], [2]).sum().backward()
    assert x.grad.tolist() == np.ones_like(a).tolist()


def test_einsum_sublist_form_errors_as_torch():
    x = ember.ones(2)
    with pytest.raises(ValueError, match=r"^einsum\(\): must specify the equation string"):
        ember.einsum(x)
    with pytest.raises(ValueError, match=r"^einsum\(\): subscript in subscript list is not "
                                         r"within the valid range \[0, 52\)"):
        ember.einsum(x, [52])


@pytest.mark.parametrize("eq, shapes", [
    ("bij,bjk->bik", [(4, 16, 32), (4, 32, 24)]),           # a batched product
    ("bhqd,bhkd->bhqk", [(2, 3, 16, 16), (2, 3, 20, 16)]),   # attention scores
    ("bqk,bkd->qbd", [(3, 16, 20), (3, 20, 32)]),           # the output reordered
    ("ik,jk->ji", [(40, 30), (20, 30)]),
    ("abc,cd->dab", [(4, 5, 30), (30, 32)]),
    ("bij,bij->b", [(8, 40, 60), (8, 40, 60)]),            # a batch of dot products
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_two_operand_einsum_runs_as_a_matrix_product_as_torch(eq, shapes, dtype):
    """Two-operand contractions above ``EINSUM_GEMM_MIN_MACS`` run as one (batched) matmul,
    as torch's einsum: values and gradients as torch's (float32 within its rounding)."""
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    from ember.kernels.linalg import _einsum_as_matmul, explicit_einsum
    (sa, sb), rhs = explicit_einsum(eq, shapes)
    assert _einsum_as_matmul(arrays[0], sa, arrays[1], sb, rhs) is not None
    ours = [ember.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    y, ty = ember.einsum(eq, *ours), torch.einsum(eq, *theirs)
    g = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    y.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    tol = 2e-5 if dtype == np.float32 else 1e-12
    assert y.dtype == ember.tensor(arrays[0]).dtype and y.shape == tuple(ty.shape)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)
