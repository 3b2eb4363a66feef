"""gradcheck and gradgradcheck fail exactly where torch's fail: each case is written once against
a module handle ``lib`` (``ember`` or ``torch``) and run on both."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _fns(lib):
    """Custom Functions for the cases, built against ``lib``."""

    class WrongSquare(lib.autograd.Function):  # d(x^2) = 3x, wrong
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3.0 * x

    class NoisySquare(lib.autograd.Function):  # right, plus a tiny drift on every call
        calls = [0]

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            NoisySquare.calls[0] += 1
            return g * (2.0 * x + NoisySquare.calls[0] * 1e-9)

    class ZeroGradLeaks(lib.autograd.Function):  # right Jacobian, but nonzero for a zero grad
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0 + (1.0 if g.abs().sum().item() == 0 else 0.0)

    class DetachedBackward(lib.autograd.Function):  # right first derivative, no double backward
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g.detach() * 2.0 * x.detach()

    class UnconjugatedSquare(lib.autograd.Function):  # complex: conj(2z) * g is right
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2.0 * x

    return WrongSquare, NoisySquare, ZeroGradLeaks, DetachedBackward, UnconjugatedSquare


def _x(lib, noncontig=False, complex_=False):
    arr = np.random.default_rng(0).standard_normal((3, 4))
    if complex_:
        arr = arr + 1j * np.random.default_rng(1).standard_normal((3, 4))
    if noncontig:
        arr = arr[:, ::2]
    return lib.from_numpy(arr.copy() if not noncontig else arr).requires_grad_(True)


CASES = {
    # name: (check, fn(lib, fns), kwargs, torch's verdict)
    "detached output": ("grad", lambda lib, F: lambda x: x.detach() * 2, {}, False),
    "detached output, fast": ("grad", lambda lib, F: lambda x: x.detach() * 2,
                              {"fast_mode": True}, False),
    "detached output beside a differentiable one":
        ("grad", lambda lib, F: lambda x: (x * 2, x.detach() * 3), {}, True),
    "constant output": ("grad", lambda lib, F: lambda x: x.detach() * 0, {}, True),
    "right derivative": ("grad", lambda lib, F: lambda x: (x.sin() * x, x.exp()), {}, True),
    "right derivative, fast": ("grad", lambda lib, F: lambda x: (x.sin() * x, x.exp()),
                               {"fast_mode": True}, True),
    "wrong derivative": ("grad", lambda lib, F: F[0].apply, {}, False),
    "wrong derivative, fast": ("grad", lambda lib, F: F[0].apply, {"fast_mode": True}, False),
    "nondeterministic backward": ("grad", lambda lib, F: F[1].apply, {}, False),
    "nondeterministic backward, fast": ("grad", lambda lib, F: F[1].apply,
                                        {"fast_mode": True}, False),
    "nondeterministic backward within nondet_tol":
        ("grad", lambda lib, F: F[1].apply, {"nondet_tol": 1e-6}, True),
    "nonzero gradient from a zero grad_output": ("grad", lambda lib, F: F[2].apply, {}, False),
    "noncontiguous input": ("grad_noncontig", lambda lib, F: lambda x: x * x.cos(), {}, True),
    "gradgrad right": ("gradgrad", lambda lib, F: lambda x: x.sin() * x, {}, True),
    "gradgrad right, fast": ("gradgrad", lambda lib, F: lambda x: x.sin() * x,
                             {"fast_mode": True}, True),
    "gradgrad noncontiguous grad_outputs":
        ("gradgrad", lambda lib, F: lambda x: x.sin() * x,
         {"gen_non_contig_grad_outputs": True}, True),
    "gradgrad without double backward": ("gradgrad", lambda lib, F: F[3].apply, {}, False),
    "gradgrad without double backward, fast":
        ("gradgrad", lambda lib, F: F[3].apply, {"fast_mode": True}, False),
    "complex right derivative":
        ("grad_complex", lambda lib, F: lambda z: (z * z.conj() + z.exp(), z.abs(), z.angle()),
         {}, True),
    "complex right derivative, fast":
        ("grad_complex", lambda lib, F: lambda z: lib.fft.fft(z) * 1j, {"fast_mode": True}, True),
    "complex output of a real input":
        ("grad", lambda lib, F: lambda x: lib.polar(x.exp(), x) ** 2, {}, True),
    "complex custom Function": ("grad_complex", lambda lib, F: F[4].apply, {}, False),
    "complex custom Function, fast":
        ("grad_complex", lambda lib, F: F[4].apply, {"fast_mode": True}, False),
    "complex custom Function, real input": ("grad", lambda lib, F: F[4].apply, {}, True),
    "complex gradgrad": ("gradgrad_complex", lambda lib, F: lambda z: (z * z).abs(), {}, True),
}


def _verdict(lib, name):
    kind, make, kwargs, _ = CASES[name]
    fn = make(lib, _fns(lib))
    x = _x(lib, noncontig=kind == "grad_noncontig", complex_=kind.endswith("complex"))
    check = lib.autograd.gradgradcheck if kind.startswith("gradgrad") else \
        lib.autograd.gradcheck
    with np.errstate(all="ignore"):
        verdict = check(fn, (x,), raise_exception=False, **kwargs)
    if not verdict:  # raising mode agrees, with the documented error class
        with pytest.raises(RuntimeError):
            check(fn, (x,), **kwargs)
    return verdict


@pytest.mark.parametrize("name", list(CASES))
def test_gradcheck_verdict_matches_torch(name):
    expected = CASES[name][3]
    assert _verdict(torch, name) is expected  # the case itself is what we think it is
    assert _verdict(ember, name) is expected


def test_no_input_requires_grad_is_an_error():
    x = ember.ones(3, dtype=ember.float64)
    with pytest.raises(ValueError, match="require"):
        ember.autograd.gradcheck(lambda t: t * 2, (x,))
    with pytest.raises(ValueError):
        torch.autograd.gradcheck(lambda t: t * 2, (torch.ones(3, dtype=torch.float64),))


@pytest.mark.parametrize("kwarg", ["check_batched_grad", "check_batched_forward_grad",
                                   "check_forward_ad", "masked"])
def test_unsupported_checks_are_refused_by_name(kwarg):
    x = ember.ones(3, dtype=ember.float64, requires_grad=True)
    with pytest.raises(NotImplementedError, match=kwarg):
        ember.autograd.gradcheck(lambda t: t * 2, (x,), **{kwarg: True})


@pytest.mark.parametrize("kwarg", ["check_batched_grad", "check_fwd_over_rev", "masked"])
def test_unsupported_gradgrad_checks_are_refused_by_name(kwarg):
    x = ember.ones(3, dtype=ember.float64, requires_grad=True)
    with pytest.raises(NotImplementedError, match=kwarg):
        ember.autograd.gradgradcheck(lambda t: t * t, (x,), **{kwarg: True})


def test_mismatch_names_the_output_and_input():
    x = _x(ember)
    y = _x(ember)
    WrongSquare = _fns(ember)[0]
    with pytest.raises(ember.autograd.GradcheckError, match="output 1 with respect to input 1"):
        ember.autograd.gradcheck(lambda a, b: (a * b, WrongSquare.apply(b)), (x, y))
