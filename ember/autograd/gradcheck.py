"""Finite-difference checks of first and second derivatives (float64)."""
import numpy as np

from ember.autograd.engine import grad as autograd_grad


class GradcheckError(RuntimeError):
    """Analytical and numerical derivatives disagree."""


def _tensor_cls():
    from ember.tensor import Tensor
    return Tensor


def _outputs(fn, inputs):
    Tensor = _tensor_cls()
    out = fn(*inputs)
    outs = (out,) if isinstance(out, Tensor) else tuple(out)
    return tuple(o for o in outs if isinstance(o, Tensor) and o._data.dtype.kind == "f"
                 and (o._requires_grad or not any(x._requires_grad for x in inputs
                                                  if isinstance(x, Tensor))))


def _numerical(fn, inputs, diff_idx, eps):
    """Jacobian columns per input by central differences: list of arrays (n_in, n_out_total)."""
    jacs = []
    if True:
        for i in diff_idx:
            x = inputs[i]._data
            flat = x.reshape(-1)
            if not x.flags.c_contiguous:
                raise GradcheckError("gradcheck needs contiguous inputs")
            cols = []
            for k in range(flat.size):
                orig = flat[k]
                flat[k] = orig + eps
                plus = [o._data.astype(np.float64).ravel().copy() for o in _outputs(fn, inputs)]
                flat[k] = orig - eps
                minus = [o._data.astype(np.float64).ravel().copy() for o in _outputs(fn, inputs)]
                flat[k] = orig
                cols.append(np.concatenate([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
                            if plus else np.zeros(0))
            jacs.append(np.stack(cols) if cols else np.zeros((0, 0)))
    return jacs


def _analytical(fn, inputs, diff_idx):
    Tensor = _tensor_cls()
    outs = _outputs(fn, inputs)
    sizes = [o._data.size for o in outs]
    total = int(np.sum(sizes))
    jacs = [np.zeros((inputs[i]._data.size, total)) for i in diff_idx]
    col = 0
    for o in outs:
        for k in range(o._data.size):
            seed = np.zeros(o._data.shape, o._data.dtype)
            seed.reshape(-1)[k] = 1
            if o.grad_fn is None and not o._requires_grad:
                col += 1
                continue
            gs = autograd_grad((o,), [inputs[i] for i in diff_idx], (Tensor._make(seed),),
                               retain_graph=True, allow_unused=True)
            for j, g in enumerate(gs):
                if g is not None:
                    jacs[j][:, col] = g._data.astype(np.float64).ravel()
            col += 1
    return jacs


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, fast_mode=False):
    """Compare autograd's Jacobian of ``func`` with central finite differences.

    Inputs that require grad must be float64. Returns True, or raises GradcheckError (or returns
    False when ``raise_exception`` is false) naming the input and the largest difference.
    """
    Tensor = _tensor_cls()
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._requires_grad]
    for i in diff_idx:
        if inputs[i]._data.dtype != np.float64:
            import warnings
            warnings.warn(f"gradcheck: input {i} is {inputs[i]._data.dtype}, not float64; the "
                          "check may fail from rounding alone", stacklevel=2)
    num = _numerical(func, inputs, diff_idx, eps)
    ana = _analytical(func, inputs, diff_idx)
    for j, i in enumerate(diff_idx):
        a, n = ana[j], num[j]
        if a.shape != n.shape or not np.allclose(a, n, rtol=rtol, atol=atol):
            diff = np.max(np.abs(a - n)) if a.shape == n.shape else float("nan")
            msg = (f"Jacobian mismatch for output 0 with respect to input {i}: max abs difference "
                   f"{diff:.3e}\nnumerical:\n{n}\nanalytical:\n{a}")
            if raise_exception:
                raise GradcheckError(msg)
            return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, fast_mode=False):
    """Check second derivatives: gradcheck of (inputs, grad_outputs) -> d(outputs)/d(inputs)."""
    Tensor = _tensor_cls()
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(Tensor._make(rng.standard_normal(o._data.shape).astype(o._data.dtype))
                             .requires_grad_(True) for o in outs)
    n_in = len(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._requires_grad]

    def first_grads(*args):
        xs, gos = args[:n_in], args[n_in:]
        outs = _outputs(func, xs)
        gs = autograd_grad(outs, [xs[i] for i in diff_idx], gos, create_graph=True,
                           allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grads, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception)
