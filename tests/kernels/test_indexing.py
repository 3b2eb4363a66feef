"""Indexing kernels (ember.kernels.indexing) against torch: index ranges."""
import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as EF
import torch.nn.functional as TF

OPS = {
    "embedding": lambda m, F, x, i: F.embedding(i, x),
    "embedding_bag": lambda m, F, x, i: F.embedding_bag(i.view(1, 2), x),
    "gather": lambda m, F, x, i: m.gather(x, 0, i.view(2, 1)),
    "scatter": lambda m, F, x, i: m.scatter(x, 0, i.view(2, 1), m.ones(2, 1)),
    "scatter value": lambda m, F, x, i: m.scatter(x, 0, i.view(2, 1), 5.0),
    "scatter_add": lambda m, F, x, i: m.scatter_add(x, 0, i.view(2, 1), m.ones(2, 1)),
    "scatter_reduce": lambda m, F, x, i: m.scatter_reduce(x, 0, i.view(2, 1), m.ones(2, 1),
                                                         "sum"),
    "index_select": lambda m, F, x, i: m.index_select(x, 0, i),
    "index_add": lambda m, F, x, i: m.index_add(x, 0, i, m.ones(2, 4)),
    "index_copy": lambda m, F, x, i: m.index_copy(x, 0, i, m.ones(2, 4)),
    "index_fill": lambda m, F, x, i: m.index_fill(x, 0, i, 3.0),
    "index_reduce": lambda m, F, x, i: x.index_reduce(0, i, m.ones(2, 4), "prod"),
    "take_along_dim": lambda m, F, x, i: m.take_along_dim(x, i.view(2, 1), 0),
    "take_along_dim flat": lambda m, F, x, i: m.take_along_dim(x, i),
    "take": lambda m, F, x, i: m.take(x, i),
    "put": lambda m, F, x, i: m.put(x, i, m.ones(2)),
}
INDICES = {"negative": [-1, 0], "too negative": [-4, 0], "too large": [3, 0], "both": [100, -1],
           "far": [100, 0]}


def _outcome(m, F, op, idx):
    x = m.arange(12.0).reshape(3, 4)
    try:
        return OPS[op](m, F, x, m.tensor(idx)).tolist()
    except (IndexError, RuntimeError) as e:
        return IndexError if isinstance(e, IndexError) else RuntimeError, str(e)


@pytest.mark.filterwarnings("ignore:index_reduce")
@pytest.mark.parametrize("which", sorted(INDICES))
@pytest.mark.parametrize("op", sorted(OPS))
def test_index_range_as_torch(op, which):
    """Negative indices wrap where torch's op wraps them (index_fill, take, put; take_along_dim
    with a dim wraps modulo the size) and raise, with torch's error class, where it raises."""
    got = _outcome(ember, EF, op, INDICES[which])
    want = _outcome(torch, TF, op, INDICES[which])
    if isinstance(want, list):
        assert got == want
    else:
        assert isinstance(got, tuple) and got[0] is want[0], got
        assert got[1].startswith(op.split()[0]), got[1]
        named = [str(v) for v in INDICES[which] if v and str(v) in got[1]]
        assert named or op in ("embedding", "take", "put"), got[1]


def test_take_along_dim_wrapped_gradient_as_torch():
    idx = [[-1, 4, 0, 0]]
    x = ember.arange(12.0).reshape(3, 4).requires_grad_()
    ember.take_along_dim(x, ember.tensor(idx), 0).sum().backward()
    tx = torch.arange(12.0).reshape(3, 4).requires_grad_()
    torch.take_along_dim(tx, torch.tensor(idx), 0).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()


def test_range_error_names_size_and_dim():
    with pytest.raises(ember.EmberError, match=r"gather\(\): index -2 is out of bounds for "
                                               r"dimension 1 with size 4"):
        ember.gather(ember.zeros(3, 4), 1, ember.tensor([[0, -2]]))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_add_at_axis_gives_np_add_at_bits_along_any_axis(axis):
    """index_add's (and index_select's gradient's) scatter along an axis: rows through
    ``nn.scatter_add_rows``, repeated and negative indices added in index order, as
    ``np.add.at`` adds them, once the compiled loop runs and before."""
    from ember.kernels.indexing import add_at_axis
    from ember.kernels.runtime import compiler
    r = np.random.default_rng(3)
    base = r.standard_normal((5, 6, 7)).astype(np.float32)
    n = base.shape[axis]
    index = np.array([0, n - 1, 1, 0, -1, 2, 0])
    vals_shape = list(base.shape)
    vals_shape[axis] = index.size
    vals = r.standard_normal(vals_shape).astype(np.float32)
    want = base.copy()
    np.add.at(np.moveaxis(want, axis, 0), index, np.moveaxis(vals, axis, 0))
    for _ in range(2):
        got = base.copy()
        add_at_axis(got, axis, index, vals)
        np.testing.assert_array_equal(got, want)
        compiler.wait_compiles()


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_gather_and_scatter_add_by_flat_positions_match_torch(dim):
    """From ``FLAT_MIN_SIZE`` index elements gather takes flat positions and scatter_add adds
    through ``nn.scatter_add_rows``: torch's values, repeated indices added in index order."""
    from ember.kernels import indexing as K
    r = np.random.default_rng(9)
    a = r.standard_normal((8, 16, 64)).astype(np.float32)
    shape = [8, 16, 64]
    shape[dim] = 40
    index = r.integers(0, a.shape[dim], shape)
    assert index.size >= K.FLAT_MIN_SIZE
    src = r.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(
        K.gather(a, index, dim), torch.gather(torch.tensor(a), dim, torch.tensor(index)).numpy())
    want = np.zeros_like(a)
    np.add.at(want, K._grid(index, dim), src)
    got = K.scatter_add(np.zeros_like(a), index, src, dim)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, torch.zeros(a.shape).scatter_add(
        dim, torch.tensor(index), torch.tensor(src)).numpy(), rtol=1e-5, atol=1e-5)


def test_add_at_axis_of_nothing_leaves_the_array_as_it_is():
    """An empty index (pdist of one row, combinations of too few elements, take of nothing)
    or an empty array adds nothing."""
    from ember.kernels.indexing import add_at_axis
    for out, index, values in ((np.ones(3), np.zeros(0, np.int64), np.zeros(0)),
                               (np.ones((2, 0)), np.array([1, 0]), np.zeros((2, 0))),
                               (np.ones((1, 5)), np.zeros(0, np.int64), np.zeros((0, 5)))):
        before = out.copy()
        add_at_axis(out, 0, index, values)
        np.testing.assert_array_equal(out, before)


@pytest.mark.parametrize("shape,dim,ishape", [((32, 64, 100), 2, (32, 64, 1)),
                                              ((8, 600), 1, (8, 600)), ((5, 6), 0, (3, 6)),
                                              ((4, 5, 6), 1, (4, 2, 6))])
@pytest.mark.parametrize("scalar", [True, False])
def test_scatter_into_writes_what_scatter_returns(shape, dim, ishape, scalar):
    """``scatter_into`` writes into its array what ``scatter`` returns (flat positions from
    FLAT_MIN_SIZE index elements into a C-contiguous array, the index grid below or into a
    strided view), and torch's scatter agrees where the index has no duplicates."""
    from ember.kernels import indexing as K
    r = np.random.default_rng(sum(shape))
    a = r.standard_normal(shape)
    idx = np.stack([r.permutation(shape[dim])[:ishape[dim]] for _ in
                    range(int(np.prod(ishape)) // ishape[dim])]).reshape(
        tuple(s for k, s in enumerate(ishape) if k != dim) + (ishape[dim],))
    idx = np.moveaxis(idx, -1, dim)
    src = 2.5 if scalar else r.standard_normal(ishape)
    want = K.scatter(a, idx, src, dim)
    got = a.copy()
    assert K.scatter_into(got, idx, src, dim) is got
    np.testing.assert_array_equal(got, want)
    strided = np.asfortranarray(a)          # not C-contiguous: the grid path, into the view
    K.scatter_into(strided, idx, src, dim)
    np.testing.assert_array_equal(strided, want)
    t = torch.tensor(a).scatter(dim, torch.tensor(idx),
                                src if scalar else torch.tensor(src))
    np.testing.assert_array_equal(want, t.numpy())


@pytest.mark.parametrize("key", [np.s_[:2], np.s_[1, 1::2], np.s_[..., 1], np.s_[None, 2, 1:3],
                                 np.s_[np.int64(1)], np.s_[[0, 0, 2]], np.s_[[True, False, True]],
                                 np.s_[:, [1, 1, 3]]])
def test_getitem_backward_equals_the_sum_of_grad_over_the_key(key):
    """``getitem_backward``: basic keys by one assignment, advanced ones summing repeats;
    against torch's ``index``'s backward, and a basic key keeps a gradient's -0.0."""
    from ember.kernels.indexing import getitem_backward
    x = np.arange(12.0).reshape(3, 4)
    grad = np.random.default_rng(0).standard_normal(x[key].shape)
    got = getitem_backward(grad, x.shape, key)
    t = torch.tensor(x, requires_grad=True)
    tkey = tuple(torch.tensor(k) if isinstance(k, list) else k
                 for k in (key if isinstance(key, tuple) else (key,)))
    t[tkey].backward(torch.tensor(grad))
    np.testing.assert_array_equal(got, t.grad.numpy())
    zero = getitem_backward(np.full((2, 4), -0.0), x.shape, np.s_[:2])
    assert np.signbit(zero[:2]).all() and not np.signbit(zero[2]).any()
