"""ember.kernels.runtime.fpstate: the cheap "ignore" floating-point error state of the kernels."""
import threading
import warnings

import numpy as np
import pytest

from ember.kernels.runtime import fpstate


def test_quiet_ignores_until_restore_and_nests():
    x = np.array([-1.0, 0.0], np.float32)
    before = np.geterr()
    outer = fpstate.quiet()
    inner = fpstate.quiet()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = np.sqrt(x) / x   # nan and 0/0: no warning
    fpstate.restore(inner)
    assert np.geterr()["invalid"] == "ignore"
    fpstate.restore(outer)
    assert np.geterr() == before and np.isnan(r).all()
    with np.errstate(invalid="raise"):
        with pytest.raises(FloatingPointError):
            np.sqrt(x)


@pytest.mark.skipif(fpstate._extobj_contextvar is None,
                    reason="NumPy 1's error state is process-wide (np.errstate's too)")
def test_quiet_is_per_thread():
    """Another thread's kernel does not change this thread's error state."""
    seen = []
    token = fpstate.quiet()
    try:
        t = threading.Thread(target=lambda: seen.append(np.geterr()["invalid"]))
        t.start()
        t.join()
    finally:
        fpstate.restore(token)
    assert seen == [np.geterr()["invalid"]] != ["ignore"]


def _inf_nan_work():
    """ember calls whose kernels meet inf - inf, x / 0, log(0), overflow: forward ops, the
    in-place write into self, backward (a gradient summed from two uses, accumulated twice into
    ``.grad``), a traced function; returns their results as arrays."""
    import ember
    x = ember.tensor([np.inf, 0.0, -1.0, 3e38], dtype=ember.float32)
    y = ember.tensor([np.inf, 0.0, -np.inf, 3e38], dtype=ember.float32)
    out = [(x - y).numpy(), (x / 0.0).numpy(), x.log().numpy(), (x * y).numpy(),
           ember.tensor([np.inf, -np.inf]).sum().numpy()]
    z = x.clone()
    z += y                       # the write into self (dispatch's ufunc into its memory)
    z.add_(y, alpha=2.0)
    out.append(z.numpy())
    w = ember.tensor([np.inf, 0.0, -1.0], requires_grad=True)
    for _ in range(2):           # the second backward adds into .grad
        ((w.log() * w) + w / w.exp()).sum().backward()
    out.append(w.grad.numpy())
    traced = ember.jit.trace(lambda a, b: (a - b).exp() / a, (x, y))
    out.append(traced(x, y).numpy())
    return out


def test_ember_calls_keep_the_callers_error_state():
    """Under a caller's np.errstate(all="raise") ember's kernels still give inf and nan as
    values (torch has no such state), and the caller's state is in force again after each
    call: on the old code the first inf - inf raised FloatingPointError."""
    with np.errstate(all="raise"):
        outs = _inf_nan_work()
        assert np.geterr() == {"divide": "raise", "over": "raise", "under": "raise",
                               "invalid": "raise"}
        with pytest.raises(FloatingPointError):
            np.log(np.zeros(1))
    assert np.isnan(outs[0][0]) and outs[1][0] == np.inf and outs[2][1] == -np.inf
    assert np.isnan(outs[-2]).any()


def test_no_runtime_warning_and_numpy_warns_again_after():
    """With NumPy's default state and RuntimeWarnings raised as errors (``-W error``) ember's
    calls go through; the caller's own NumPy code still warns right after."""
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        _inf_nan_work()
        assert np.geterr() == before
        with pytest.raises(RuntimeWarning, match="divide by zero"):
            np.divide(np.ones(1), np.zeros(1))


def test_a_users_function_runs_under_the_users_state():
    """A custom Function's forward and backward are the user's code: the user's error state,
    not the kernels' "ignore" (ember's own Functions, the compiler's step, run as kernels)."""
    import ember
    from ember.autograd.function import ember_own

    class Log(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return ember.from_numpy(np.log(x.detach().numpy()))

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * ember.from_numpy(np.reciprocal(x.detach().numpy()))

    assert not ember_own(Log)
    x = ember.tensor([0.0, 1.0], requires_grad=True)
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            Log.apply(x)
    with np.errstate(divide="ignore"):
        y = Log.apply(x)
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            y.sum().backward()


def test_pool_workers_take_the_callers_state():
    """A kernel's chunks on ember's pool threads run under the kernel's "ignore" state (a new
    thread starts with NumPy's default: the workers' inf - inf warned)."""
    from ember.kernels.runtime import threadpool
    a = np.full(1000, np.inf)

    def chunk(lo, hi):
        return float((a[lo:hi] - a[lo:hi]).sum())

    token = fpstate.enter(fpstate.IGNORE)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            for _ in range(20):
                assert np.isnan(threadpool.run_chunks(chunk, 1000, 4, 2)).all()
    finally:
        fpstate.leave(token)
    with np.errstate(invalid="raise"):   # outside a kernel: the caller's state, as NumPy's
        with pytest.raises(FloatingPointError):
            threadpool.run_chunks(chunk, 1000, 4, 2)
