"""Complex-number kernels on ndarrays against torch: parts, conjugates, angle, view_as_real /
view_as_complex (views sharing memory, torch's stride rules), complex, polar, sgn."""
import numpy as np
import pytest

from ember.kernels import complex as K
from ember.kernels.errors import KernelError

torch = pytest.importorskip("torch")
rng = np.random.default_rng(31)


def _c(shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_parts_conjugate_angle_sgn_match_torch(dtype):
    a = _c((3, 4), dtype)
    a[0, 0] = 0
    t = torch.tensor(a)
    for ours, theirs in ((K.conj(a), torch.conj(t).resolve_conj()),
                         (K.conj_physical(a), torch.conj_physical(t)), (K.real(a), t.real),
                         (K.imag(a), t.imag), (K.angle(a), torch.angle(t)),
                         (K.sgn(a), torch.sgn(t))):
        assert ours.dtype == theirs.numpy().dtype
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-6, atol=1e-7)
    assert np.shares_memory(K.real(a), a) and np.shares_memory(K.imag(a), a)
    assert not np.shares_memory(K.conj_physical(a), a)
    assert np.shares_memory(K.resolve(a), a)


def test_real_inputs_follow_torch():
    x = np.array([-2.0, 0.0, 3.0, np.nan])
    assert np.shares_memory(K.conj(x), x) and np.shares_memory(K.real(x), x)
    assert not np.shares_memory(K.conj_physical(x), x)
    np.testing.assert_array_equal(K.angle(x), torch.angle(torch.tensor(x)).numpy())
    i = np.array([-3, 0, 4])
    assert K.angle(i).dtype == np.float32
    np.testing.assert_array_equal(K.angle(i), torch.angle(torch.tensor(i)).numpy())
    np.testing.assert_array_equal(K.sgn(x[:3]), [-1.0, 0.0, 1.0])
    with pytest.raises(KernelError, match="imag is not implemented"):
        K.imag(x)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_view_as_real_and_back_share_memory(dtype):
    a = _c((2, 3), dtype)
    r = K.view_as_real(a)
    np.testing.assert_array_equal(r, torch.view_as_real(torch.tensor(a)).numpy())
    assert np.shares_memory(r, a)
    r[0, 1, 1] = 7
    assert a[0, 1].imag == 7
    c = K.view_as_complex(r)
    assert c.dtype == dtype and np.shares_memory(c, a)
    np.testing.assert_array_equal(c, a)
    strided = K.view_as_real(a[:, ::2])
    np.testing.assert_array_equal(strided, torch.view_as_real(torch.tensor(a)[:, ::2]).numpy())


@pytest.mark.parametrize("bad, message", [
    (np.zeros((3, 2), np.int64), "only supported for float and double"),
    (np.zeros((3, 3)), "last dimension of size 2"),
    (np.zeros((2, 4))[:, ::2], "stride 1"),
    (np.zeros((3, 3))[:, 1:], "stride divisible by 2"),
])
def test_view_as_complex_refuses_what_torch_refuses(bad, message):
    """torch's messages: non-float dtypes, a last dimension other than 2, its stride, odd
    strides elsewhere."""
    with pytest.raises(KernelError, match=message):
        K.view_as_complex(bad)


def test_view_as_real_of_a_real_array_is_an_error():
    with pytest.raises(KernelError, match="only supported for complex"):
        K.view_as_real(np.zeros(3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_complex_and_polar_match_torch(dtype):
    re, im = rng.standard_normal((3, 1)).astype(dtype), rng.standard_normal(4).astype(dtype)
    np.testing.assert_array_equal(K.complex(re, im),
                                  torch.complex(torch.tensor(re), torch.tensor(im)).numpy())
    ab, an = np.abs(re), im
    np.testing.assert_allclose(K.polar(ab, an), torch.polar(torch.tensor(ab), torch.tensor(an))
                               .numpy(), rtol=1e-6)
    with pytest.raises(KernelError, match="Expected both inputs"):
        K.complex(re, im.astype(np.float64 if dtype == np.float32 else np.float32))
    with pytest.raises(KernelError, match="Expected both inputs"):
        K.polar(np.zeros(2, np.int64), np.zeros(2, np.int64))
