"""torch's op_db samples through ``ember.compile`` match eager ember.

For every op_db entry ember resolves (tests/op_db/resolve.py), its first float64 samples (with
``requires_grad`` where the OpInfo differentiates) and its first float32 sample run as
``ember.compile(lambda *a, **k: op(*a, **k))``: the first call traces (its result is the eager
run's own), the second call, on fresh inputs whose floating-point values are scaled by 1.0625 and
whose integer and bool elements are permuted (a value the trace froze would show), runs the compiled program (or the compiled forward and
backward) and must give eager's outputs (shape, dtype, values) and gradients on those inputs,
random draws included (both seeded alike). A function that cannot be traced must say so with a
``GraphBreakWarning`` and run eagerly: it may break, never differ. The breaks are counted by
reason (``EMBER_OPDB_COMPILE_REPORT=<file>`` writes them and every failure)."""
import collections
import math
import os
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")

import ember  # noqa: E402
from ember.compiler.frontend import GraphBreakWarning, RecompileWarning  # noqa: E402
from tests.op_db import resolve as R  # noqa: E402

# samples per entry and dtype (EMBER_OPDB_COMPILE_SAMPLES="8,4": more float64, float32 ones)
_N = [int(n) for n in os.environ.get("EMBER_OPDB_COMPILE_SAMPLES", "2,1").split(",")]
SAMPLES = {"float64": _N[0], "float32": _N[1]}
# entries whose outputs are uninitialised memory: shape and dtype only
UNINITIALISED = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty",
                 "new_empty_strided"}
TOL = {"float64": 1e-9, "float32": 1e-5}
BREAKS = collections.Counter()
REPORT = []


@pytest.fixture(autouse=True)
def _reset():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


def _entries():
    out = []
    for op in R.op_db():
        status, info = R.classify(op)
        if status == "resolved":
            out.append(pytest.param(op, info, id=R.entry_id(op)))
    return out


class _Scaled(R.Converter):
    """op_db's converter with other values: floating-point tensors scaled by ``factor``
    (structure kept: signs, symmetry, definiteness, order, zeros), integer and bool tensors'
    elements permuted (the same values, so indices stay in range; masks and indices select
    other elements, data-dependent output shapes change)."""

    def __init__(self, torch, factor):
        super().__init__(torch)
        self.factor = factor
        self.count = 0

    def _tensor(self, t):
        e = super()._tensor(t)
        d = e._data
        if self.factor != 1 and d.dtype.kind in "fc":
            d *= self.factor
        elif self.factor != 1 and d.dtype.kind in "iub" and d.size > 1:
            self.count += 1
            flat = d.reshape(-1).copy()
            d[...] = np.random.default_rng(self.count).permutation(flat).reshape(d.shape)
        return e


def _convert(sample, factor):
    conv = _Scaled(torch, factor)
    return conv, conv(sample.input), conv(sample.args), conv(sample.kwargs)


def _flat(out):
    return R.flatten(out)


def _same(want, got, label, tol, values=True):
    """None when ``got`` (compiled) is ``want`` (eager), else what differs."""
    w, g = _flat(want), _flat(got)
    if len(w) != len(g):
        return f"{label}: eager returns {len(w)} values, compiled {len(g)}"
    for k, (a, b) in enumerate(zip(w, g)):
        lab = f"{label}[{k}]"
        if isinstance(a, ember.Tensor):
            if not isinstance(b, ember.Tensor):
                return f"{lab}: eager a tensor, compiled a {type(b).__name__}"
            if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
                return (f"{lab}: eager {a.dtype.name}{list(a.shape)}, compiled "
                        f"{b.dtype.name}{list(b.shape)}")
            if a.requires_grad != b.requires_grad:
                return f"{lab}: requires_grad {b.requires_grad}, eager {a.requires_grad}"
            if not values:
                continue
            msg = R.differ(np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()), tol,
                           tol, lab, ("compiled", "eager"))
            if msg is not None:
                return msg
        elif type(a) is not type(b) or (values and a != b and not (
                isinstance(a, float) and math.isnan(a) and math.isnan(b))):
            return f"{lab}: compiled {b!r}, eager {a!r}"
    return None


def _grads(out, leaves):
    outs = [o for o in _flat(out) if isinstance(o, ember.Tensor) and o.requires_grad and
            o.dtype.is_floating_point]
    if not outs or not leaves:
        return None
    rng = np.random.default_rng(0)
    cot = [ember.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype) for o in outs]
    return ember.autograd.grad(outs, leaves, cot, allow_unused=True)


def _call(fn, inp, args):
    ember.manual_seed(0)
    return fn(inp, *args)


def run_sample(op, call, sample, dtype):
    """(outcome, detail): 'same', 'break' (with the reason), 'skip' (eager rejects the sample
    or it cannot be expressed) or 'differs' (what)."""
    values = op.name not in UNINITIALISED
    tol = TOL[dtype]
    try:
        conv_a, ia, aa, ka = _convert(sample, 1.0)
        conv_b, ib, ab, kb = _convert(sample, 1.0625)
        conv_e, ie, ae, ke = _convert(sample, 1.0625)
    except R.Unrepresentable:
        return "skip", None
    try:
        want = _call(lambda x, *a: call(x, *a, **ke), ie, ae)
        want_g = _grads(want, [e for _, e in conv_e.leaves])
    except Exception:  # noqa: BLE001 - eager rejects the sample: nothing to compare
        return "skip", None

    def fn(x, *a, **k):
        return call(x, *a, **k)
    compiled = ember.compile(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            _call(lambda x, *a: compiled(x, *a, **ka), ia, aa)   # traces (eager's own result)
            got = _call(lambda x, *a: compiled(x, *a, **kb), ib, ab)  # the compiled program
            got_g = _grads(got, [e for _, e in conv_b.leaves])
        except Exception as e:  # noqa: BLE001 - eager ran this sample: a compiled failure
            return "differs", f"compiled call raised {type(e).__name__}: {str(e)[:200]}"
    cf = compiled._compiled
    breaks = [str(w.message) for w in caught if issubclass(w.category, GraphBreakWarning)]
    if cf.breaks and not breaks:
        return "differs", f"graph break without a GraphBreakWarning: {cf.breaks[0]}"
    why = _same(want, got, "output", tol, values)
    if why is None and want_g is not None:
        why = _same(tuple(want_g), tuple(got_g), "grad", tol * 100)
    if why is not None:
        return "differs", why + (f" (after a graph break: {cf.breaks[0].reason})"
                                 if cf.breaks else "")
    if cf.breaks:
        return "break", cf.breaks[0].reason
    if not any(issubclass(w.category, RecompileWarning) for w in caught) and cf.traces < 1 \
            and not cf._last:
        return "differs", "neither traced nor a graph break"
    return "same", None


def run_entry(op, resolved):
    """[(dtype, outcome, detail)] for the entry's first samples."""
    call = R.ember_callable(op, resolved)
    supported = {str(d).replace("torch.", "") for d in op.supported_dtypes("cpu")}
    backward_ok = {str(d).replace("torch.", "") for d in op.supported_backward_dtypes("cpu")}
    out = []
    for dtype, n in SAMPLES.items():
        if dtype not in supported:
            continue
        grad = op.supports_autograd and dtype == "float64" and dtype in backward_ok
        torch.default_generator.manual_seed(0)
        try:
            samples = list(op.sample_inputs_func(op, "cpu", getattr(torch, dtype), grad))
        except Exception:  # noqa: BLE001 - torch's own generator failing
            continue
        for sample in samples[:n]:
            try:
                torch.default_generator.manual_seed(0)
                op(sample.input, *sample.args, **sample.kwargs)
            except Exception:  # noqa: BLE001 - torch rejects its own sample
                continue
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outcome, detail = run_sample(op, call, sample, dtype)
            out.append((dtype, outcome, detail))
    return out


@pytest.mark.parametrize("op,resolved", _entries())
def test_op_db_sample_compiled_matches_eager(op, resolved):
    results = run_entry(op, resolved)
    eid = R.entry_id(op)
    for dtype, outcome, detail in results:
        if outcome == "break":
            BREAKS[detail.split(" (")[0][:80]] += 1
        REPORT.append((eid, dtype, outcome, detail))
    bad = [f"{dtype}: {detail}" for dtype, outcome, detail in results if outcome == "differs"]
    assert not bad, f"{eid}: compiled differs from eager:\n" + "\n".join(bad)


def teardown_module(module):
    path = os.environ.get("EMBER_OPDB_COMPILE_REPORT")
    if path:
        with open(path, "w") as f:
            for row in REPORT:
                f.write(repr(row) + "\n")
