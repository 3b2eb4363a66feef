"""No op gives a NumPy RuntimeWarning ("divide by zero encountered", "invalid value
encountered", "overflow encountered", "Mean of empty slice"): torch gives none, the values
(inf, nan) are the results. Every spec entry's ``test:`` samples run forward (float16,
float32, float64) and backward (float64), and torch's op_db samples of every entry ember
resolves (the public functions and methods, composites included) forward (float32, float64)
and backward (float64), with their float inputs holding inf, -inf, nan, 0, -0, negatives and
near-overflow values, under ``warnings.simplefilter("error", RuntimeWarning)`` and again
recording; the ops that warn are listed (none may)."""
import math
import warnings

import numpy as np
import pytest

import ember
from ember.autograd._generated import functions as G
from tests.autograd.spec_samples import Leaf, cases

DTYPES = (np.float16, np.float32, np.float64)


def _specials(dtype):
    big = float(np.finfo(dtype).max) / 2   # doubling, squaring or exp of it overflows
    return (math.inf, -math.inf, math.nan, 0.0, -0.0, -1.5, big, -big, 0.5, 2.0)


def _materialize(case, args, kwargs, dtype, shift, grad):
    """The sample's arguments with each float leaf's element i set to
    ``specials[(i + shift) % n]`` (a 0-d leaf takes every special over the shifts) and a Python
    float in a tensor slot replaced the same way; index and bool leaves keep their values."""
    rng = np.random.default_rng(shift)
    specials = _specials(dtype)
    tpos, tnames = case.tensor_positions(), case.tensor_names()
    nograd = set(case.test.get("nograd", [])) | {
        i for i, a in enumerate(case.args)
        if case.entry.get(a.name) in ("non_differentiable", "refuses_grad")}
    names = [a.name for a in case.args]
    leaves = []

    def conv(v, is_slot, idx=None):
        if isinstance(v, Leaf):
            arr = v.make(rng, dtype)
            if v.is_float:
                flat = arr.reshape(-1)
                for i in range(flat.size):
                    flat[i] = specials[(i + shift) % len(specials)]
            t = ember.from_numpy(arr)
            if grad and v.is_float and idx not in nograd:
                t.requires_grad_(True)
                leaves.append(t)
            return t
        if isinstance(v, list):
            return [conv(x, True) for x in v]
        if is_slot and isinstance(v, np.ndarray):
            return ember.from_numpy(v.copy())
        if is_slot and v.__class__ is float:
            return specials[shift % len(specials)]
        return v

    eargs = [conv(v, i in tpos, i) for i, v in enumerate(args)]
    ekw = {k: conv(v, k in tnames, names.index(k) if k in names else None)
           for k, v in kwargs.items()}
    return eargs, ekw, leaves


def _float_outputs(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o for o in outs if isinstance(o, ember.Tensor) and o.dtype.is_floating_point
            and o.requires_grad]


def _call(case, eargs, ekw, leaves):
    out = getattr(G, case.name)(*eargs, **ekw)
    if leaves:
        outs = _float_outputs(out)
        if outs:   # seeded with ones: a sum of inf and -inf would warn of its own
            ember.autograd.backward(outs, [ember.ones_like(o) for o in outs])


def _warns(case, eargs, ekw, leaves):
    """The RuntimeWarnings of one call: raised as errors, and (a second run) recorded, so that
    one an op's own code catches is still seen."""
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            _call(case, eargs, ekw, leaves)
        except RuntimeWarning as w:
            found.append(f"{type(w).__name__}: {w}")
        except Exception:  # noqa: BLE001 - an op's error on these values is not what is tested
            pass
    for t in leaves:
        t.grad = None
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        try:
            _call(case, eargs, ekw, leaves)
        except Exception:  # noqa: BLE001 - as above
            pass
    found[:0] = [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in log
              if issubclass(w.category, RuntimeWarning)]
    return found


def warning_ops():
    """{op name: first warning seen (where, dtype, sample)} over every spec op with samples."""
    seen = {}
    for case in cases():
        if not case.samples or not hasattr(G, case.name):
            continue
        for si, (args, kwargs) in enumerate(case.samples):
            for dtype in DTYPES:
                grad = case.differentiable and dtype is np.float64
                for shift in range(len(_specials(dtype))):
                    try:
                        eargs, ekw, leaves = _materialize(case, args, kwargs, dtype, shift, grad)
                    except Exception:  # noqa: BLE001 - a sample this dtype cannot hold
                        continue
                    found = _warns(case, eargs, ekw, leaves)
                    if found and case.name not in seen:
                        seen[case.name] = (f"{found[0]} [{np.dtype(dtype).name}, sample {si}, "
                                           f"shift {shift}]")
                    if case.name in seen:
                        break
                if case.name in seen:
                    break
            if case.name in seen:
                break
    return seen


@pytest.mark.slow
def test_no_op_gives_a_floating_point_runtime_warning():
    """191 spec ops warned before the error state was set at dispatch and in the engine."""
    before = np.geterr()
    seen = warning_ops()
    assert np.geterr() == before
    assert not seen, f"{len(seen)} ops warn:\n" + "\n".join(
        f"{name}: {what}" for name, what in sorted(seen.items()))


def _fill(t, shift):
    """Element i of float tensor ``t`` (in place) set to ``specials[(i + shift) % n]``."""
    a = t._data
    if a.dtype.kind == "f" and a.size:
        specials = _specials(a.dtype)
        a[...] = np.array([specials[(i + shift) % len(specials)] for i in range(a.size)],
                          a.dtype).reshape(a.shape)


def opdb_warning_entries(torch, samples=3, shifts=(0, 3, 6)):
    """{op_db entry id: first warning seen} over the entries ember resolves: torch's first
    ``samples`` samples per dtype, converted to ember, their float tensors filled with the
    specials (each shift), run forward and (float64) backward."""
    from tests.op_db import resolve as R
    seen = {}
    for op in R.op_db():
        status, resolved = R.classify(op)
        if status != "resolved":
            continue
        eid = R.entry_id(op)
        call = R.ember_callable(op, resolved)
        supported = {str(d).replace("torch.", "") for d in op.supported_dtypes("cpu")}
        for dname in ("float32", "float64"):
            if dname not in supported or eid in seen:
                continue
            grad = dname == "float64" and op.supports_autograd
            torch.default_generator.manual_seed(0)
            try:
                found = list(op.sample_inputs_func(op, "cpu", getattr(torch, dname), grad))
            except Exception:  # noqa: BLE001 - torch's own generator failing
                continue
            for sample in found[:samples]:
                for shift in shifts:
                    conv = R.Converter(torch)
                    try:
                        args = (conv(sample.input), conv(sample.args), conv(sample.kwargs))
                    except Exception:  # noqa: BLE001 - a sample ember cannot express
                        break
                    for v in conv._memo.values():
                        if isinstance(v, ember.Tensor):
                            _fill(v, shift)
                    leaves = [e for _, e in conv.leaves]
                    warned = _opdb_warns(call, args, leaves)
                    if warned:
                        seen[eid] = f"{warned} [{dname}, shift {shift}]"
                        break
                if eid in seen:
                    break
    return seen


def _opdb_warns(call, args, leaves):
    from tests.op_db import resolve as R

    def run():
        out = call(args[0], *args[1], **args[2])
        outs = [o for o in R.flatten(out) if isinstance(o, ember.Tensor) and o.requires_grad]
        if outs and leaves:
            ember.autograd.grad(outs, leaves, [ember.ones_like(o) for o in outs],
                                allow_unused=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            run()
        except RuntimeWarning as w:
            return f"{type(w).__name__}: {w}"
        except Exception:  # noqa: BLE001 - an op's error on these values is not tested here
            pass
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        try:
            run()
        except Exception:  # noqa: BLE001 - as above
            pass
    for w in log:
        if issubclass(w.category, RuntimeWarning):
            return f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})"
    return None


@pytest.mark.slow
def test_no_op_db_entry_gives_a_runtime_warning():
    """The public functions and methods op_db reaches (composites included): var/std with no
    degrees of freedom and the mean of no elements warned (NumPy's words) before."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("expecttest")
    before = np.geterr()
    seen = opdb_warning_entries(torch)
    assert np.geterr() == before
    assert not seen, f"{len(seen)} op_db entries warn:\n" + "\n".join(
        f"{name}: {what}" for name, what in sorted(seen.items()))


if __name__ == "__main__":
    import sys
    import time
    t0 = time.time()
    result = warning_ops()
    for name, what in sorted(result.items()):
        print(f"{name}: {what}")
    print(f"{len(result)} ops warn ({time.time() - t0:.0f} s)", file=sys.stderr)
    import torch
    t0 = time.time()
    result = opdb_warning_entries(torch)
    for name, what in sorted(result.items()):
        print(f"{name}: {what}")
    print(f"{len(result)} op_db entries warn ({time.time() - t0:.0f} s)", file=sys.stderr)
