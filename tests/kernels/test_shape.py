"""Shape kernels on ndarrays against torch: views and copies (reshape, flatten, unflatten,
permute, transpose, squeeze, unsqueeze, expand, repeat, tile, cat, stack, split, chunk, unbind,
narrow, flip, roll, tril, triu, diagonal, diag_embed, unfold), padding in every mode with negative
widths, and the backward kernels (pad, diagonal, unfold, sum_to_shape) against torch autograd;
shape errors as KernelError."""
import numpy as np
import pytest

from ember.kernels import shape as S
from ember.kernels.errors import KernelError

torch = pytest.importorskip("torch")
TF = torch.nn.functional
rng = np.random.default_rng(71)
A = rng.standard_normal((2, 3, 4))
T = torch.tensor(A)


def _eq(ours, theirs):
    theirs = theirs.numpy() if isinstance(theirs, torch.Tensor) else theirs
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("ours, theirs", [
    (lambda: S.reshape(A, (4, -1)), lambda: T.reshape(4, -1)),
    (lambda: S.view(A, (6, 4)), lambda: T.view(6, 4)),
    (lambda: S.flatten(A, 1), lambda: T.flatten(1)),
    (lambda: S.unflatten(A, 2, (2, 2)), lambda: T.unflatten(2, (2, 2))),
    (lambda: S.permute(A, (2, 0, 1)), lambda: T.permute(2, 0, 1)),
    (lambda: S.transpose(A, 0, -1), lambda: T.transpose(0, -1)),
    (lambda: S.t(A[0]), lambda: T[0].t()),
    (lambda: S.squeeze(A[:, :1], 1), lambda: T[:, :1].squeeze(1)),
    (lambda: S.squeeze(A[:1, :, :1]), lambda: T[:1, :, :1].squeeze()),
    (lambda: S.unsqueeze(A, -1), lambda: T.unsqueeze(-1)),
    (lambda: S.expand(A[:, :1], (5, 2, 3, 4)), lambda: T[:, :1].expand(5, 2, 3, 4)),
    (lambda: S.expand(A[:, :1], (-1, 3, -1)), lambda: T[:, :1].expand(-1, 3, -1)),
    (lambda: S.repeat(A, (2, 1, 1, 2)), lambda: T.repeat(2, 1, 1, 2)),
    (lambda: S.tile(A, (2,)), lambda: T.tile((2,))),
    (lambda: S.cat([A, A[:, :1]], 1), lambda: torch.cat([T, T[:, :1]], 1)),
    (lambda: S.stack([A, A], -1), lambda: torch.stack([T, T], -1)),
    (lambda: S.narrow(A, 2, 1, 2), lambda: T.narrow(2, 1, 2)),
    (lambda: S.flip(A, (0, 2)), lambda: T.flip((0, 2))),
    (lambda: S.roll(A, (1, -2), (1, 2)), lambda: T.roll((1, -2), (1, 2))),
    (lambda: S.roll(A, 3), lambda: T.roll(3)),
    (lambda: S.tril(A, -1), lambda: T.tril(-1)),
    (lambda: S.triu(A, 1), lambda: T.triu(1)),
    (lambda: S.diagonal(A, 1, 1, 2), lambda: T.diagonal(1, 1, 2)),
    (lambda: S.diag_embed(A, -1, 0, 2), lambda: torch.diag_embed(T, -1, 0, 2)),
    (lambda: S.unfold(A, 2, 2, 1), lambda: T.unfold(2, 2, 1)),
])
def test_matches_torch(ours, theirs):
    _eq(ours(), theirs())


def test_splits_match_torch():
    for ours, theirs in ((S.split(A, 2, 2), T.split(2, 2)),
                         (S.split_with_sizes(A, (1, 2), 1), T.split_with_sizes((1, 2), 1)),
                         (S.chunk(A, 3, 2), T.chunk(3, 2)), (S.unbind(A, 1), T.unbind(1))):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _eq(o, t)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [(0, 2, 1, 1), (2, 1, 0, 1), (-1, 2, 1, -1), (3, 2, 1, 3, 0, 1)])
def test_pad_and_its_backward_match_torch(mode, pad):
    x = rng.standard_normal((2, 3, 5, 6) if len(pad) == 4 else (2, 3, 6, 5, 7))
    tx = torch.tensor(x, requires_grad=True)
    ty = TF.pad(tx, pad, mode=mode, **({"value": 0.5} if mode == "constant" else {}))
    y = S.pad(x, pad, mode, 0.5 if mode == "constant" else None)
    _eq(y, ty.detach())
    g = rng.standard_normal(y.shape)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(S.pad_backward(g, x.shape, pad, mode), tx.grad.numpy(),
                               rtol=1e-12, atol=1e-12)


def test_diagonal_and_unfold_backward_match_torch():
    tx = torch.tensor(A, requires_grad=True)
    d = tx.diagonal(-1, 2, 0)
    g = rng.standard_normal(tuple(d.shape))
    d.backward(torch.tensor(g))
    np.testing.assert_array_equal(S.diagonal_backward(g, A.shape, -1, 2, 0), tx.grad.numpy())
    tx = torch.tensor(A, requires_grad=True)
    u = tx.unfold(2, 3, 1)                               # overlapping windows add up
    g = rng.standard_normal(tuple(u.shape))
    u.backward(torch.tensor(g))
    np.testing.assert_allclose(S.unfold_backward(g, A.shape, 2, 3, 1), tx.grad.numpy(),
                               rtol=1e-14, atol=1e-14)


def test_sum_to_shape_undoes_broadcasting():
    g = rng.standard_normal((5, 2, 3, 4))
    assert S.broadcast_axes((5, 2, 3, 4), (2, 1, 4)) == (0, 2)
    np.testing.assert_allclose(S.sum_to_shape(g, (2, 1, 4)), g.sum(axis=(0, 2))[:, None, :],
                               rtol=1e-14)
    assert S.sum_to_shape(g, g.shape) is g
    assert S.sum_to_shape(g.astype(np.float32), (4,)).dtype == np.float32


def test_views_share_memory_and_copies_do_not():
    assert np.shares_memory(S.view(A, (24,)), A) and np.shares_memory(S.permute(A, (1, 0, 2)), A)
    assert np.shares_memory(S.unfold(A, 1, 2, 1), A)
    c = S.clone(A)
    assert not np.shares_memory(c, A) and c.flags.c_contiguous
    assert S.contiguous(A) is A or np.shares_memory(S.contiguous(A), A)
    assert S.to_dtype(A, np.float32).dtype == np.float32 and S.to_dtype(A, np.float64) is A


@pytest.mark.parametrize("call", [
    lambda: S.view(A.transpose(0, 2, 1), (24,)),          # not viewable: torch refuses too
    lambda: S.reshape(A, (5, -1)),
    lambda: S.reshape(A, (-1, -1)),
    lambda: S.unfold(A, 2, 5, 1),
    lambda: S.unfold(A, 2, 2, 0),
    lambda: S.expand(A, (3, 3, 4)),
])
def test_shape_errors(call):
    with pytest.raises(KernelError):
        call()


@pytest.mark.parametrize("shape", [(700, 512), (3, 300, 256), (64, 64), (40, 900), (5, 6)])
def test_copies_of_swapped_views_equal_numpys(shape):
    """contiguous, clone and reshape of a last-two-axes-swapped view (the tiled copy where it
    applies, ``kernels.transpose``): NumPy's values, C order; a reshape that can be a view stays
    one."""
    a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    t = np.swapaxes(a, -1, -2)
    for got in (S.contiguous(t), S.clone(t)):
        assert got.flags.c_contiguous and not np.shares_memory(got, a)
        np.testing.assert_array_equal(got, t)
    flat = S.reshape(t, (-1,))
    np.testing.assert_array_equal(flat, t.reshape(-1))
    split = S.reshape(t, t.shape[:-1] + (t.shape[-1] // 2, 2)) if t.shape[-1] % 2 == 0 else None
    if split is not None:   # the last axis split in two: a view of a, as NumPy's reshape
        assert np.shares_memory(split, a)
        np.testing.assert_array_equal(split, t.reshape(split.shape))


@pytest.mark.parametrize("pad", [(4, 0), (0, 4), (3, 3), (-1, 4), (-1, 3), (4, 0, 0, 0), (0, 0, 4, 0), (0, 0, 3, 3)])
def test_circular_pad_wraps_at_most_once_as_torch(pad):
    import torch.nn.functional as F
    KS = S
    x = np.arange(24.0).reshape(1, 2, 3, 4) if len(pad) == 4 else np.arange(6.0).reshape(1, 2, 3)
    try:
        want = F.pad(torch.from_numpy(x), pad, mode="circular").numpy()
    except RuntimeError as e:
        with pytest.raises(KernelError, match=str(e)):
            KS.pad(x, pad, mode="circular")
        return
    np.testing.assert_array_equal(KS.pad(x, pad, mode="circular"), want)
