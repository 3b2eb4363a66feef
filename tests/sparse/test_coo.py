"""Sparse COO tensors against torch: construction, coalesce (duplicates), to_dense / to_sparse,
empty and hybrid tensors, dtype conversion, repr, the errors of what ember does not support
(storage readers, autograd with respect to a sparse tensor, compressed layouts), and a GAT-style
layer end to end. The ops on them: tests/sparse/test_ops.py."""
import numpy as np
import pytest

import ember
from ember.errors import EmberRuntimeError, EmberTypeError, UnsupportedError

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:Sparse:UserWarning")

# an uncoalesced 3x4 pattern: (0, 2) three times, (1, 0) twice, unsorted
IDX = [[0, 1, 2, 0, 1, 0, 2], [2, 0, 3, 2, 0, 2, 1]]
VALS = [1.5, -2.0, 0.5, 3.0, 1.0, -0.25, 2.0]
SIZE = (3, 4)


def _pair(idx=IDX, vals=VALS, size=SIZE, dtype=np.float64, grad=False):
    """The same sparse tensor in ember and torch (a leaf that requires grad with ``grad``)."""
    i, v = np.array(idx, np.int64), np.array(vals, dtype)
    e = ember.sparse_coo_tensor(ember.tensor(i), ember.tensor(v), size, requires_grad=grad)
    t = torch.sparse_coo_tensor(torch.tensor(i), torch.tensor(v), size, requires_grad=grad)
    return e, t


def _same(e, t, tol=1e-12):
    """ember ``e`` equals torch ``t`` (layout, dtype, shape; dense values; and for sparse the
    coalesced indices and values)."""
    assert e.is_sparse == t.is_sparse
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    if t.is_sparse:
        ec, tc = e.coalesce(), t.coalesce()
        np.testing.assert_array_equal(ec.indices().numpy(), tc.indices().numpy())
        np.testing.assert_allclose(ec.values().detach().numpy(), tc.values().detach().numpy(),
                                   rtol=tol, atol=tol)
        e, t = e.to_dense(), t.to_dense()
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


# ------------------------------------------------------------------------- construction
def test_construction_metadata_matches_torch():
    e, t = _pair()
    assert e.layout is ember.sparse_coo and e.is_sparse and not ember.ones(2).is_sparse
    assert ember.ones(2).layout is ember.strided
    assert (e.sparse_dim(), e.dense_dim(), e._nnz(), e.is_coalesced()) == \
        (t.sparse_dim(), t.dense_dim(), t._nnz(), t.is_coalesced())
    assert e.shape == ember.Size(SIZE) and e.size(1) == 4 and e.dim() == 2 and len(e) == 3
    assert e.numel() == 12 and isinstance(e, ember.Tensor)
    np.testing.assert_array_equal(e._indices().numpy(), t._indices().numpy())
    np.testing.assert_array_equal(e._values().numpy(), t._values().numpy())
    assert e._indices().dtype is ember.int64


def test_size_and_dtype_inferred_as_torch():
    e = ember.sparse_coo_tensor([[0, 4], [1, 0]], [1, 2])
    t = torch.sparse_coo_tensor([[0, 4], [1, 0]], [1, 2])
    assert tuple(e.shape) == tuple(t.shape) == (5, 2)
    assert e.dtype is ember.int64 and t.dtype is torch.int64
    e = ember.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], dtype=ember.float64)
    assert e.dtype is ember.float64
    e = ember.sparse_coo_tensor(ember.tensor([[0, 1]], dtype=ember.int32), [1.0, 2.0], (3,))
    assert e._indices().dtype is ember.int64


def test_is_coalesced_argument():
    e = ember.sparse_coo_tensor([[0, 1, 2]], [1.0, 2.0, 3.0], (3,), is_coalesced=True)
    assert e.is_coalesced() and e.indices().tolist() == [[0, 1, 2]]
    with pytest.raises(EmberRuntimeError, match="sparse_coo_tensor: is_coalesced=True"):
        ember.sparse_coo_tensor([[1, 0]], [1.0, 2.0], (3,), is_coalesced=True)


def test_coalesced_flag_setter():
    e = ember.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (3,))
    assert e._coalesced_(True) is e and e.is_coalesced() and e.values().tolist() == [1.0, 2.0]
    with pytest.raises(EmberRuntimeError, match="_coalesced_: the indices are not sorted"):
        ember.sparse_coo_tensor([[2, 0]], [1.0, 2.0], (3,))._coalesced_(True)


@pytest.mark.parametrize("idx, vals, size, match", [
    ([[0, 1, 1]], [1.0, 2.0], (3,), "same nnz"),
    ([[0, 1], [1, 0]], [1.0, 2.0], (3, 3, 3), "len\\(size\\) == sparse_dim \\+ dense_dim"),
    ([0, 1], [1.0, 2.0], (3,), "sparse_dim x nnz"),
    ([[0, 3]], [1.0, 2.0], (3,), "index 3 in dimension 0 is out of bounds for size 3"),
    ([[0, -1]], [1.0, 2.0], (3,), "index -1 in dimension 0"),
])
def test_construction_errors(idx, vals, size, match):
    with pytest.raises(EmberRuntimeError, match="sparse_coo_tensor: .*" + match):
        ember.sparse_coo_tensor(idx, vals, size)


def test_non_integer_indices_are_a_type_error():
    with pytest.raises(EmberTypeError, match="sparse_coo_tensor: indices must be an integer"):
        ember.sparse_coo_tensor(np.array([[True, False]]), [1.0, 2.0], (3,))


def test_repr_matches_torch():
    for grad in (False, True):
        e, t = _pair(grad=grad)
        expect = repr(t).replace("torch.", "ember.").replace("Backward0", "Backward")
        assert repr(e) == expect
    e = ember.sparse_coo_tensor(ember.zeros(2, 0, dtype=ember.int64), ember.zeros(0), (2, 3))
    t = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (2, 3))
    assert repr(e) == repr(t).replace("torch.", "ember.")


@pytest.mark.parametrize("idx,values,size,dtype", [
    ([[0, 1, 1], [2, 0, 2]], np.arange(300.).reshape(3, 100) / 3, (2, 3, 100), "float64"),
    (np.zeros((2, 0), np.int64), np.zeros((0,)), (2, 3), "float64"),
    ([[0, 2, 4]], [1, 2, 3], (5,), "int64")], ids=["wrapped_values", "empty", "int"])
def test_repr_values_layout_matches_torch(idx, values, size, dtype):
    e = ember.sparse_coo_tensor(ember.tensor(np.asarray(idx)),
                                ember.tensor(values, dtype=getattr(ember, dtype)), size)
    t = torch.sparse_coo_tensor(torch.tensor(np.asarray(idx)),
                                torch.tensor(values, dtype=getattr(torch, dtype)), size)
    assert repr(e) == repr(t).replace("torch.", "ember.")


# ------------------------------------------------------------------ coalesce and dense forms
def test_coalesce_sums_duplicates_and_sorts():
    e, t = _pair()
    ec, tc = e.coalesce(), t.coalesce()
    assert ec.is_coalesced() and ec.coalesce() is ec
    np.testing.assert_array_equal(ec.indices().numpy(), tc.indices().numpy())
    np.testing.assert_allclose(ec.values().numpy(), tc.values().numpy())
    with pytest.raises(EmberRuntimeError, match="values: Cannot get values on an uncoalesced"):
        e.values()
    with pytest.raises(EmberRuntimeError, match="indices: Cannot get indices on an uncoalesced"):
        e.indices()


def test_coalesce_and_to_dense_gradients_to_values():
    rng = np.random.default_rng(0)
    w = rng.standard_normal(SIZE)
    e, t = _pair(grad=True)
    ((e.to_dense() * ember.tensor(w)).sum() + (e.coalesce().values() ** 2).sum()).backward()
    ((t.to_dense() * torch.tensor(w)).sum() + (t.coalesce().values() ** 2).sum()).backward()
    assert e.is_leaf and e.grad.is_sparse
    _same(e.grad, t.grad)


def test_values_gradient_through_constructor_with_duplicates():
    rng = np.random.default_rng(1)
    w = rng.standard_normal(SIZE)
    ve = ember.tensor(np.array(VALS), requires_grad=True)
    vt = torch.tensor(np.array(VALS), requires_grad=True)
    se = ember.sparse_coo_tensor(IDX, ve, SIZE)
    st = torch.sparse_coo_tensor(IDX, vt, SIZE)
    assert not se.is_leaf and se.grad_fn is not None
    (se.to_dense() * ember.tensor(w)).sum().backward()
    (st.to_dense() * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(ve.grad.numpy(), vt.grad.numpy())


def test_to_sparse_round_trip_and_gradient():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 4)) * (rng.random((3, 4)) < 0.5)
    de, dt = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    se, st = de.to_sparse(), dt.to_sparse()
    assert se.is_coalesced() == st.is_coalesced()
    _same(se, st)
    w = rng.standard_normal((3, 4))
    (se.to_dense() * ember.tensor(w)).sum().backward()
    (st.to_dense() * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(de.grad.numpy(), dt.grad.numpy())
    assert de.to_dense() is de and se.to_sparse() is se


def test_hybrid_tensors():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 3, 2)) * (rng.random((4, 1, 1)) < 0.6)
    se, st = ember.tensor(a).to_sparse(1), torch.tensor(a).to_sparse(1)
    assert (se.sparse_dim(), se.dense_dim()) == (st.sparse_dim(), st.dense_dim()) == (1, 2)
    _same(se, st)
    i, v = [[2, 0, 2]], rng.standard_normal((3, 2))
    e = ember.sparse_coo_tensor(i, ember.tensor(v), (4, 2))
    t = torch.sparse_coo_tensor(i, torch.tensor(v), (4, 2))
    _same(e, t)
    _same(e * 2.0, t * 2.0)
    _same(ember.sparse.sum(e, 0), torch.sparse.sum(t, 0))
    _same(ember.sparse.sum(e, 1), torch.sparse.sum(t, 1))
    with pytest.raises(UnsupportedError, match="mm: a hybrid operand"):
        ember.sparse.mm(e, ember.ones(2, 3, dtype=ember.float64))
    with pytest.raises(UnsupportedError, match="sparse.softmax: a hybrid tensor"):
        ember.sparse.softmax(e, 0)


def test_empty_nnz():
    e = ember.sparse_coo_tensor(ember.zeros(2, 0, dtype=ember.int64),
                                ember.zeros(0, dtype=ember.float64), (3, 4))
    t = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long),
                                torch.zeros(0, dtype=torch.float64), (3, 4))
    assert e.is_coalesced() == t.is_coalesced()
    _same(e, t)
    _same(e.coalesce(), t.coalesce())
    d = np.ones((4, 2))
    _same(ember.sparse.mm(e, ember.tensor(d)), torch.sparse.mm(t, torch.tensor(d)))
    _same(ember.sparse.softmax(e, 1), torch.sparse.softmax(t, 1))
    _same(ember.sparse.sum(e), torch.sparse.sum(t))
    _same(ember.sparse.sum(e, 1), torch.sparse.sum(t, 1))
    _same(ember.zeros(3, 4).to_sparse(), torch.zeros(3, 4).to_sparse())


def test_to_dtype():
    e, t = _pair()
    _same(e.float(), t.float())
    _same(e.to(ember.float32), t.to(torch.float32))
    assert e.double() is not None and e.to(ember.float64).dtype is ember.float64


# --------------------------------------------------------------------------- unsupported
@pytest.mark.parametrize("call, name", [
    (lambda s: ember.save(s, "unused.safetensors"), "save"),
    (lambda s: ember.save({"adj": s}, "unused.safetensors"), "save"),
    (lambda s: __import__("pickle").dumps(s), "pickling"),
    (lambda s: ember.jit.trace(lambda a, x: a @ x, (s, ember.ones(4, 2))), "trace"),
    (lambda s: s.item(), "item"),
])
def test_storage_readers_name_the_call(call, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    e, _ = _pair()
    with pytest.raises(UnsupportedError, match=rf"^{name}: sparse COO tensors .* no strided"):
        call(e)
    assert not list(tmp_path.iterdir())


def test_autograd_grad_with_respect_to_a_sparse_tensor_is_unsupported():
    e, _ = _pair(grad=True)
    out = ember.sparse.mm(e, ember.ones(4, 2, dtype=ember.float64)).sum()
    with pytest.raises(UnsupportedError, match="^grad: autograd with respect to a sparse COO"):
        ember.autograd.grad(out, [e])
    with pytest.raises(UnsupportedError, match="^backward: "):
        e.backward()


@pytest.mark.parametrize("name", ["to_sparse_csr", "to_sparse_csc", "to_sparse_bsr",
                                  "to_sparse_bsc"])
def test_compressed_layouts_are_unsupported(name):
    args = ((1, 1),) if name.endswith(("bsr", "bsc")) else ()
    with pytest.raises(UnsupportedError, match=rf"^{name}: the compressed sparse layouts"):
        getattr(ember.ones(2, 2), name)(*args)
    for layout in (ember.sparse_csr, ember.sparse_csc, ember.sparse_bsr, ember.sparse_bsc):
        with pytest.raises(UnsupportedError, match="to_sparse: layout ember.sparse_"):
            ember.ones(2, 2).to_sparse(layout=layout)
    assert repr(ember.sparse_csr) == "ember.sparse_csr"


def test_import_ember_does_not_load_sparse():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", "import sys, ember; ember.sparse_coo; "
                        "print('ember.sparse' in sys.modules)"], capture_output=True, text=True,
                       timeout=120)
    assert r.stdout.strip() == "False", r.stderr[-2000:]


# ----------------------------------------------------------------------------- GAT layer
def _gat(lib, sparse, x, w, a_src, a_dst, edges, n):
    """One graph-attention head: h = x W, e_ij = leaky_relu(a_src.h_i + a_dst.h_j) on the
    edges, attention = sparse softmax over each node's edges, out = attention @ h."""
    h = x @ w
    src, dst = edges
    score = (h @ a_src)[src] + (h @ a_dst)[dst]
    score = lib.nn.functional.leaky_relu(score, 0.2)
    att = sparse.softmax(lib.sparse_coo_tensor(lib.stack([src, dst]), score, (n, n)), dim=1)
    return lib.nn.functional.elu(sparse.mm(att, h))


def test_gat_layer_matches_torch():
    rng = np.random.default_rng(12)
    n, f_in, f_out = 7, 5, 4
    src = np.concatenate([np.arange(n), rng.integers(0, n, 15)])
    dst = np.concatenate([np.arange(n), rng.integers(0, n, 15)])  # self loops, duplicates
    arrays = [rng.standard_normal(s) for s in [(n, f_in), (f_in, f_out), (f_out,), (f_out,)]]
    te = [ember.tensor(a, requires_grad=True) for a in arrays]
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    oe = _gat(ember, ember.sparse, *te, (ember.tensor(src), ember.tensor(dst)), n)
    ot = _gat(torch, torch.sparse, *tt, (torch.tensor(src), torch.tensor(dst)), n)
    np.testing.assert_allclose(oe.detach().numpy(), ot.detach().numpy(), rtol=1e-10)
    g = rng.standard_normal((n, f_out))
    (oe * ember.tensor(g)).sum().backward()
    (ot * torch.tensor(g)).sum().backward()
    for a, b in zip(te, tt):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_check_sparse_tensor_invariants_switch_as_torch():
    """The switch's state as torch's (context manager, decorator, enable/disable); ember checks
    the indices whatever it says."""
    torch = pytest.importorskip("torch")
    for m in (torch, ember):
        c = m.sparse.check_sparse_tensor_invariants
        seen = [c.is_enabled()]
        with c():
            seen.append(c.is_enabled())
            with pytest.raises(RuntimeError):
                m.sparse_coo_tensor(m.tensor([[5]]), m.tensor([1.0]), (3,))
        seen.append(c.is_enabled())
        c.enable()
        seen.append(c.is_enabled())
        c.disable()
        with c(enable=False):
            seen.append(c.is_enabled())
        seen.append(c()(lambda: c.is_enabled())())
        assert seen == [False, True, False, True, False, True], m.__name__
