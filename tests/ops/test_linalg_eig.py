"""linalg.eig / eigvals against torch: values and unit-norm eigenvectors (both LAPACK geev),
real and complex, batched, and gradients of phase-invariant losses (eigenvalues, |V|^2) for
real and complex inputs."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("complex_input", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_eig_matches_torch(complex_input, dtype):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((2, 4, 4))
    if complex_input:
        A = A + 1j * rng.standard_normal((2, 4, 4))
    A = A.astype(np.result_type(dtype, np.complex64) if complex_input else dtype)
    At, Ae = torch.tensor(A, requires_grad=True), ember.tensor(A, requires_grad=True)
    Lt, Vt = torch.linalg.eig(At)
    Le, Ve = ember.linalg.eig(Ae)
    assert str(Le.dtype).split(".")[1] == str(Lt.dtype).split(".")[1]
    tol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(Le.detach().numpy(), Lt.detach().numpy(), atol=tol)
    # eigenvectors are defined up to a phase per column (LAPACK builds differ): compare them
    # with the largest entry of each column made real and positive
    def unphase(V):
        V = V.detach().numpy()
        pick = np.take_along_axis(V, np.abs(V).argmax(-2)[..., None, :], -2)
        return V * np.conj(pick) / np.abs(pick)
    np.testing.assert_allclose(unphase(Ve), unphase(Vt), atol=tol)
    wL, wV = rng.standard_normal((2, 4)), rng.standard_normal((2, 4, 4))
    (torch.view_as_real(Lt) * torch.tensor(np.stack([wL, -wL], -1))).sum().add(
        (Vt.abs() ** 2 * torch.tensor(wV)).sum()).backward()
    (ember.view_as_real(Le) * ember.tensor(np.stack([wL, -wL], -1))).sum().add(
        (Ve.abs() ** 2 * ember.tensor(wV)).sum()).backward()
    np.testing.assert_allclose(Ae.grad.numpy(), At.grad.numpy(), atol=tol * 10)


def test_eigvals_gradient_matches_torch():
    A = np.random.default_rng(1).standard_normal((3, 3))
    At, Ae = torch.tensor(A, requires_grad=True), ember.tensor(A, requires_grad=True)
    torch.linalg.eigvals(At).abs().sum().backward()
    ember.linalg.eigvals(Ae).abs().sum().backward()
    np.testing.assert_allclose(Ae.grad.numpy(), At.grad.numpy(), atol=1e-10)


def test_eig_needs_square_matrices():
    with pytest.raises(ember.EmberError, match="square"):
        ember.linalg.eig(ember.randn(3, 4))


def test_complex_solve_matches_torch():
    """linalg.solve takes complex matrices (eig's gradient uses it): forward and backward."""
    rng = np.random.default_rng(2)
    A = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    B = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))
    At, Bt = torch.tensor(A, requires_grad=True), torch.tensor(B, requires_grad=True)
    Ae, Be = ember.tensor(A, requires_grad=True), ember.tensor(B, requires_grad=True)
    Xt, Xe = torch.linalg.solve(At, Bt), ember.linalg.solve(Ae, Be)
    np.testing.assert_allclose(Xe.detach().numpy(), Xt.detach().numpy(), atol=1e-12)
    (Xt.abs() ** 2).sum().backward()
    (Xe.abs() ** 2).sum().backward()
    np.testing.assert_allclose(Ae.grad.numpy(), At.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(Be.grad.numpy(), Bt.grad.numpy(), atol=1e-10)
