"""The CTC loss kernels on ndarrays against torch's ctc_loss (reduction='none') and its gradient
in float64 (through log_softmax: torch's kernel returns the gradient of the logits, ember's the
gradient of log_probs itself): padded (N, S) and concatenated targets, repeated labels, a non-zero blank, an
impossible alignment with and without zero_infinity; argument errors."""
import numpy as np
import pytest

from ember.kernels import ctc
from ember.kernels.errors import KernelError

torch = pytest.importorskip("torch")
rng = np.random.default_rng(53)


def _problem(T=12, N=4, C=6, blank=0):
    logits = rng.standard_normal((T, N, C))
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    il = np.array([12, 10, 12, 3])[:N]
    tl = np.array([4, 3, 0, 4])[:N]                     # sample 3 cannot align: 4 labels, 3 steps
    labels = [c for c in range(C) if c != blank]
    targets = rng.choice(labels, (N, 5))
    targets[0, :3] = labels[1]                          # repeated labels need a blank between
    return log_probs, targets, il, tl


def _torch(log_probs, targets, il, tl, blank, zero_inf, grad):
    """torch's loss and the gradient of the logits whose log_softmax is ``log_probs``."""
    logits = torch.tensor(log_probs, requires_grad=True)
    lp = torch.log_softmax(logits, -1)
    loss = torch.nn.functional.ctc_loss(lp, torch.tensor(targets), torch.tensor(il),
                                        torch.tensor(tl), blank, "none", zero_inf)
    loss.backward(torch.tensor(grad))
    return loss.detach().numpy(), logits.grad.numpy()


@pytest.mark.parametrize("blank", [0, 3])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("concatenated", [False, True])
def test_loss_and_gradient_match_torch(blank, zero_infinity, concatenated):
    log_probs, targets, il, tl = _problem(blank=blank)
    if concatenated:
        targets = np.concatenate([targets[n, :tl[n]] for n in range(len(tl))])
    grad = rng.standard_normal(len(il))
    nll, alpha = ctc.ctc_loss_forward(log_probs, targets, il, tl, blank, zero_infinity)
    want, want_grad = _torch(log_probs, targets, il, tl, blank, zero_infinity, grad)
    np.testing.assert_allclose(nll, want, rtol=1e-10, atol=1e-10)
    assert np.isinf(nll[3]) != zero_infinity
    gx = ctc.ctc_loss_backward(grad, log_probs, targets, nll, alpha, il, tl, blank,
                               zero_infinity)
    g_logits = gx - np.exp(log_probs) * gx.sum(-1, keepdims=True)    # through log_softmax
    finite = [0, 1, 2] if not zero_infinity else [0, 1, 2, 3]
    np.testing.assert_allclose(g_logits[:, finite], want_grad[:, finite], rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("args, message", [
    ((np.zeros((3, 4)), np.zeros((1, 1), np.int64), [3], [1], 0), "expected log_probs"),
    ((np.zeros((3, 1, 4), np.int64), np.zeros((1, 1), np.int64), [3], [1], 0), "floating-point"),
    ((np.zeros((3, 1, 4)), np.zeros((1, 1), np.int64), [3, 3], [1], 0), "input and target"),
    ((np.zeros((3, 1, 4)), np.zeros((1, 1), np.int64), [3], [1], 4), "blank must be in"),
    ((np.zeros((3, 1, 4)), np.zeros((1, 1), np.int64), [4], [1], 0), "input lengths"),
    ((np.zeros((3, 1, 4)), np.zeros((1, 1)), [3], [1], 0), "integer targets"),
    ((np.zeros((3, 1, 4)), np.zeros((1, 1), np.int64), [3], [2], 0), "too short"),
    ((np.zeros((3, 1, 4)), np.array([1]), [3], [2], 0), "fewer than"),
    ((np.zeros((3, 1, 4)), np.array([[5]]), [3], [1], 0), "target labels must be in"),
])
def test_argument_errors(args, message):
    with pytest.raises(KernelError, match=message):
        ctc.ctc_loss_forward(*args, False)
