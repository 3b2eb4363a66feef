"""Finite-difference checks of first and second derivatives (float64), as torch.autograd.gradcheck.

The outputs checked are those that require grad; when none does, every floating output must have
a zero numerical derivative (it is treated as having a zero analytical Jacobian). The analytical
Jacobian is computed twice and the two must agree within ``nondet_tol`` (backward is
reentrant). ``fast_mode`` compares ``v^T J u`` for random ``u``, ``v`` instead of whole Jacobians.

A complex input or output counts as its real and imaginary parts (``view_as_real``): the seed 1
of a complex output element gives the gradient of its real part, the seed 1j that of its
imaginary part, and a complex gradient ``g`` holds the derivatives by the input's real part in
``g.real`` and by its imaginary part in ``g.imag`` (torch's convention, so the same backward
formulas pass torch's Wirtinger gradcheck).
"""
import warnings

import numpy as np

from ember.autograd.engine import grad as autograd_grad
from ember.errors import EmberRuntimeError, EmberValueError, UnsupportedError


class GradcheckError(EmberRuntimeError):
    """Analytical and numerical derivatives disagree (or backward misbehaves)."""


def _tensor_cls():
    from ember.tensor import Tensor
    return Tensor


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _refuse(fn_name, **flags):
    why = {"check_batched_grad": "ember has no vmap (batched gradients)",
           "check_batched_forward_grad": "ember has no vmap or forward-mode AD",
           "check_forward_ad": "ember has no forward-mode AD",
           "check_fwd_over_rev": "ember has no forward-mode AD",
           "masked": "ember has no sparse or masked tensors"}
    for name, value in flags.items():
        if value:
            raise UnsupportedError(f"{fn_name}: {name}={value!r} is not supported: {why[name]}")


def _float_positions(out):
    Tensor = _tensor_cls()
    return [k for k, o in enumerate(out) if isinstance(o, Tensor) and o._data.dtype.kind in "fc"]


def _parts(a, complex_=None):
    """``a`` flattened to float64 real components: a complex array's elements as (real,
    imaginary) pairs (``complex_`` forces either layout: a real gradient of a complex input
    gets zero imaginary parts)."""
    if complex_ is None:
        complex_ = a.dtype.kind == "c"
    if not complex_:
        return np.asarray(a.real if a.dtype.kind == "c" else a, np.float64).ravel()
    a = np.asarray(a, np.complex128)
    return np.stack((a.real, a.imag), axis=-1).ravel()


def _size(a):
    """How many real components ``a`` has (``_parts``)."""
    return a.size * (2 if a.dtype.kind == "c" else 1)


def _from_parts(v, like):
    """The flat real components ``v`` as an array of ``like``'s shape and dtype."""
    if like.dtype.kind == "c":
        v = v[0::2] + 1j * v[1::2]
    return v.reshape(like.shape).astype(like.dtype)


def _eval(fn, inputs, positions):
    out = _as_tuple(fn(*inputs))
    # copies: a view op's output shares the input the next evaluation perturbs
    return [_parts(out[k]._data).copy() for k in positions]


def _numerical(fn, inputs, diff_idx, positions, eps):
    """Central differences: ``jac[p][q]`` is d(output positions[q]) / d(input diff_idx[p]),
    shaped (input numel, output numel)."""
    jacs = []
    for i in diff_idx:
        x = inputs[i]._data
        if not x.flags.writeable:
            raise GradcheckError(f"gradcheck: input {i} is read-only; finite differences perturb "
                                 "it in place")
        cols = [[] for _ in positions]
        for k in range(x.size):
            idx = np.unravel_index(k, x.shape)
            orig = x[idx].copy()
            for step in ((eps, 1j * eps) if x.dtype.kind == "c" else (eps,)):
                x[idx] = orig + step
                plus = _eval(fn, inputs, positions)
                x[idx] = orig - step
                minus = _eval(fn, inputs, positions)
                x[idx] = orig
                for q, (p, m) in enumerate(zip(plus, minus)):
                    cols[q].append((p - m) / (2 * eps))
        if x.size:
            jacs.append([np.stack(c) for c in cols])
        else:
            jacs.append([np.zeros((0, o.size)) for o in _eval(fn, inputs, positions)])
    return jacs


def _numerical_jvp(fn, inputs, i, u, positions, eps):
    """d(outputs)/d(input i) applied to direction ``u`` (flat), by central differences."""
    x = inputs[i]._data
    if not x.flags.writeable:
        raise GradcheckError(f"gradcheck: input {i} is read-only; finite differences perturb it "
                             "in place")
    orig = x.copy()
    step = _from_parts(eps * u, x)
    try:
        x[...] = orig + step
        plus = _eval(fn, inputs, positions)
        x[...] = orig - step
        minus = _eval(fn, inputs, positions)
    finally:
        x[...] = orig
    return [(p - m) / (2 * eps) for p, m in zip(plus, minus)]


def _vjp(out, xs, seed, check_grad_dtypes):
    """Gradients of ``out`` seeded with ``seed`` w.r.t. ``xs``, flattened, zeros where unused."""
    Tensor = _tensor_cls()
    gs = autograd_grad((out,), xs, (Tensor._make(seed),), retain_graph=True, allow_unused=True)
    rows = []
    for x, g in zip(xs, gs):
        if g is None:
            rows.append(np.zeros(_size(x._data)))
            continue
        if g._data.shape != x._data.shape:
            raise GradcheckError(f"Analytical gradient has incorrect size: {list(g._data.shape)} "
                                 f"for an input of shape {list(x._data.shape)}")
        if check_grad_dtypes and g._data.dtype != x._data.dtype:
            raise GradcheckError(f"Gradient has dtype mismatch: {g._data.dtype} for an input of "
                                 f"dtype {x._data.dtype}")
        rows.append(_parts(g._data, x._data.dtype.kind == "c"))
    return rows


def _analytical(out, xs, check_grad_dtypes):
    """``jac[p]`` of shape (input components, output components) (``_parts``): one backward
    per output element, two (seeds 1 and 1j) for a complex one."""
    cols = [[] for _ in xs]
    for k in range(out._data.size):
        for unit in ((1, 1j) if out._data.dtype.kind == "c" else (1,)):
            seed = np.zeros(out._data.shape, out._data.dtype)
            seed.reshape(-1)[k] = unit
            for p, r in enumerate(_vjp(out, xs, seed, check_grad_dtypes)):
                cols[p].append(r)
    return [np.stack(c, axis=1) if c else np.zeros((_size(x._data), 0))
            for c, x in zip(cols, xs)]


def _check_reentrant(a1, a2, nondet_tol, j):
    for p, (x, y) in enumerate(zip(a1, a2)):
        if x.size and np.max(np.abs(x - y)) > nondet_tol:
            raise GradcheckError(
                f"Backward is not reentrant, i.e., running backward with same input and "
                f"grad_output multiple times gives different values (output {j}: max difference "
                f"{np.max(np.abs(x - y)):.3e}). The tolerance for nondeterminism was {nondet_tol}.")


def _unit(rng, n):
    v = rng.random(n)
    norm = np.linalg.norm(v)
    return v / norm if norm else v


def _check(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad, check_grad_dtypes,
           fast_mode):
    Tensor = _tensor_cls()
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._requires_grad]
    if not diff_idx:
        raise EmberValueError("gradcheck: expects at least one input tensor to require gradient, "
                              "but none of them have requires_grad=True")
    for i in diff_idx:
        if inputs[i]._data.dtype not in (np.float64, np.complex128):
            warnings.warn(f"gradcheck: input {i} is {inputs[i]._data.dtype}, not float64 or "
                          "complex128; the check may fail from rounding alone", stacklevel=3)
    xs = [inputs[i] for i in diff_idx]
    out = _as_tuple(func(*inputs))
    diff_pos = [k for k, o in enumerate(out) if isinstance(o, Tensor) and o._requires_grad]
    rng = np.random.default_rng(0)
    if not diff_pos:
        # no output requires grad: a zero analytical Jacobian, so the numerical one must be zero
        pos = _float_positions(out)
        for p, i in enumerate(diff_idx):
            if fast_mode:
                jv = _numerical_jvp(func, inputs, i, _unit(rng, _size(xs[p]._data)), pos, eps)
            else:
                jv = _numerical(func, inputs, [i], pos, eps)[0]
            for q, n in enumerate(jv):
                if np.any(n != 0):
                    raise GradcheckError(
                        f"Numerical gradient for function expected to be zero: output {pos[q]} "
                        f"does not require grad (it has no grad_fn) but its numerical derivative "
                        f"with respect to input {i} is not zero (max abs "
                        f"{np.max(np.abs(n)):.3e})")
        return
    if fast_mode:
        us = [_unit(rng, _size(x._data)) for x in xs]
        vs = [_unit(rng, _size(out[k]._data)) for k in diff_pos]
        num = [_numerical_jvp(func, inputs, i, u, diff_pos, eps) for i, u in zip(diff_idx, us)]
        for q, (k, v) in enumerate(zip(diff_pos, vs)):
            o = out[k]
            seed = _from_parts(v, o._data)
            r1 = _vjp(o, xs, seed, check_grad_dtypes)
            r2 = _vjp(o, xs, seed, check_grad_dtypes)
            _check_reentrant(r1, r2, nondet_tol, k)
            for p, i in enumerate(diff_idx):
                a = float(r1[p] @ us[p])
                n = float(v @ num[p][q])
                tol = atol * float(us[p].sum()) * float(v.sum())
                if not abs(a - n) <= tol + rtol * abs(n):
                    raise GradcheckError(
                        f"Jacobian mismatch for output {k} with respect to input {i} (fast mode: "
                        f"v^T J u for random unit u, v),\nnumerical:{n}\nanalytical:{a}\n"
                        "Run with fast_mode=False to see the full Jacobians.")
    else:
        num = _numerical(func, inputs, diff_idx, diff_pos, eps)
        for q, k in enumerate(diff_pos):
            a1 = _analytical(out[k], xs, check_grad_dtypes)
            a2 = _analytical(out[k], xs, check_grad_dtypes)
            _check_reentrant(a1, a2, nondet_tol, k)
            for p, i in enumerate(diff_idx):
                a, n = a1[p], num[p][q]
                if not np.allclose(a, n, rtol=rtol, atol=atol):
                    raise GradcheckError(
                        f"Jacobian mismatch for output {k} with respect to input {i}: max abs "
                        f"difference {np.max(np.abs(a - n)):.3e}\nnumerical:\n{n}\n"
                        f"analytical:\n{a}")
    _check_zero_grad_outputs([out[k] for k in diff_pos], xs)
    if check_undefined_grad:
        _check_undefined_grad(func, inputs, xs)


def _check_zero_grad_outputs(outs, xs):
    """Backward must be linear in grad_output: zero grad_outputs give zero (or no) gradients."""
    Tensor = _tensor_cls()
    gs = autograd_grad(outs, xs, [Tensor._make(np.zeros_like(o._data)) for o in outs],
                       retain_graph=True, allow_unused=True)
    for i, (g, x) in enumerate(zip(gs, xs)):
        if g is None:
            continue
        if np.any(g._data != 0):
            raise GradcheckError(f"backward not multiplied by grad_output: zero grad_outputs give "
                                 f"a nonzero gradient for differentiable input {i}")
        if g._data.shape != x._data.shape:
            raise GradcheckError(f"grad is incorrect size: {list(g._data.shape)} for an input of "
                                 f"shape {list(x._data.shape)}")


def _check_undefined_grad(func, inputs, xs):
    """Backward must accept missing output gradients: all of them, or one at a time."""
    from ember.autograd.function import Function

    class UndefinedGrad(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return None

    def outputs():
        return [o for o in _as_tuple(func(*inputs)) if isinstance(o, _tensor_cls())
                and o._requires_grad]

    n = len(outputs())
    undefined = [set(range(n))] + ([{k} for k in range(n)] if n > 1 else [])
    Tensor = _tensor_cls()
    for which in undefined:
        outs = [UndefinedGrad.apply(o) if k in which else o for k, o in enumerate(outputs())]
        seeds = [Tensor._make(np.zeros_like(o._data)) for o in outs]
        try:
            gs = autograd_grad(outs, xs, seeds, allow_unused=True)
        except RuntimeError as e:
            raise GradcheckError(f"Expected backward function to handle undefined output grads "
                                 f"(outputs {sorted(which)} had none): {e}") from e
        for g in gs:
            if g is not None and np.any(g._data != 0):
                raise GradcheckError("Expected all input grads to be undefined or zero when all "
                                     "output grads are undefined or zero")


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False, check_forward_ad=False,
              check_backward_ad=True, fast_mode=False, masked=None):
    """Compare autograd's Jacobian of ``func`` with central finite differences (see the module
    docstring). Inputs that require grad should be float64.

    Returns True, or raises GradcheckError (returns False when ``raise_exception`` is false)
    naming the output, the input and the difference. Batched, forward-mode and masked checks
    are refused with UnsupportedError.
    """
    _refuse("gradcheck", check_batched_grad=check_batched_grad,
            check_batched_forward_grad=check_batched_forward_grad,
            check_forward_ad=check_forward_ad, masked=masked)
    if not check_backward_ad:
        raise EmberValueError("gradcheck: check_backward_ad=False leaves nothing to check (ember "
                              "has no forward-mode AD)")
    inputs = _as_tuple(inputs)
    try:
        _check(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
               check_grad_dtypes, fast_mode)
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """Check second derivatives: gradcheck of (inputs, grad_outputs) -> d(outputs)/d(inputs).

    Random ``grad_outputs`` (non-contiguous with ``gen_non_contig_grad_outputs``) are made for
    the outputs that require grad when none are given.
    """
    _refuse("gradgradcheck", check_batched_grad=check_batched_grad,
            check_fwd_over_rev=check_fwd_over_rev, masked=masked)
    if not check_rev_over_rev:
        raise EmberValueError("gradgradcheck: check_rev_over_rev=False leaves nothing to check "
                              "(ember has no forward-mode AD)")
    Tensor = _tensor_cls()
    inputs = _as_tuple(inputs)

    def diff_outputs(xs):
        return [o for o in _as_tuple(func(*xs)) if isinstance(o, Tensor) and o._requires_grad]

    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = []
        for o in diff_outputs(inputs):
            shape = o._data.shape
            if gen_non_contig_grad_outputs and o._data.size > 1:
                big = rng.uniform(-1, 1, shape[:-1] + (2 * shape[-1],) if shape else (2,))
                arr = big[..., ::2] if shape else big[:1].reshape(())
            else:
                arr = rng.uniform(-1, 1, shape)
            grad_outputs.append(Tensor._make(arr.astype(o._data.dtype, copy=False))
                                .requires_grad_(True))
    grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._requires_grad]

    def first_grads(*args):
        xs, gos = args[:n_in], args[n_in:]
        gs = autograd_grad(diff_outputs(xs), [xs[i] for i in diff_idx], gos, create_graph=True,
                           allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grads, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, fast_mode=fast_mode)
