"""Every op of the spec (ember/ops/spec/), tested from its spec entry alone: float64 gradcheck and
gradgradcheck, forward and backward against torch in float32 and float64, non-contiguous inputs,
and the tracer hook. A new op with a ``test:`` entry is covered without writing a test."""
import numpy as np
import pytest

import ember
from ember.autograd._generated import functions as G
from ember.autograd.gradcheck import gradcheck, gradgradcheck
from ember.autograd.state import STATE
from tests.autograd.spec_samples import Leaf, cases

CASES = [c for c in cases()]
TESTED = [c for c in CASES if c.samples]
FACTORIES = {c.name for c in CASES if not c.tensor_names()}


def _ids(c):
    return c.name


def _materialize(case, args, kwargs, dtype, rng, requires_grad, noncontig=False):
    """Build (ember_args, ember_kwargs, leaves) for one sample."""
    tpos = case.tensor_positions()
    tnames = case.tensor_names()
    nograd = set(case.test.get("nograd", []))
    nograd |= {i for i, a in enumerate(case.args)
               if case.entry.get(a.name) in ("non_differentiable", "refuses_grad")}
    names = [a.name for a in case.args]
    leaves = []

    def conv(v, is_slot, idx=None):
        if isinstance(v, Leaf):
            arr = v.make(rng, dtype)
            if noncontig and arr.ndim >= 2:
                arr = np.ascontiguousarray(arr.swapaxes(-1, -2)).swapaxes(-1, -2)
            t = ember.from_numpy(arr)
            if requires_grad and v.is_float and idx not in nograd:
                t.requires_grad_(True)
            leaves.append(t)
            return t
        if isinstance(v, list):
            return [conv(x, True) for x in v]
        if is_slot and isinstance(v, np.ndarray):
            return ember.from_numpy(v.copy())
        return v

    eargs = [conv(v, i in tpos, i) for i, v in enumerate(args)]
    ekw = {k: conv(v, k in tnames, names.index(k) if k in names else None)
           for k, v in kwargs.items()}
    return eargs, ekw, leaves


def _call(case, eargs, ekw):
    return getattr(G, case.name)(*eargs, **ekw)


def _float_outputs(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o for o in outs if isinstance(o, ember.Tensor) and o._data.dtype.kind == "f"]


@pytest.mark.parametrize("case", [c for c in TESTED if c.differentiable], ids=_ids)
def test_gradcheck(case):
    rng = np.random.default_rng(0)
    only = case.test.get("gradcheck_samples")
    for si, (args, kwargs) in enumerate(case.samples):
        if only is not None and si not in only:
            continue
        eargs, ekw, leaves = _materialize(case, args, kwargs, np.float64, rng, True)
        diff = [t for t in leaves if t.requires_grad]
        if not diff or any(t.numel() == 0 for t in diff):
            continue
        order = [id(t) for t in diff]

        def fn(*xs, eargs=eargs, ekw=ekw):
            mapping = dict(zip(order, xs))
            rebuilt = _rebind(eargs, mapping)
            rekw = {k: _rebind([v], mapping)[0] for k, v in ekw.items()}
            return tuple(_float_outputs(_call(case, rebuilt, rekw)))

        assert gradcheck(fn, diff, eps=1e-6, atol=1e-6, rtol=1e-4)
        if case.test.get("gradgrad", True):
            assert gradgradcheck(fn, diff, eps=1e-6, atol=1e-5, rtol=1e-3)


def _rebind(values, mapping):
    out = []
    for v in values:
        if isinstance(v, list):
            out.append(_rebind(v, mapping))
        elif isinstance(v, ember.Tensor) and id(v) in mapping:
            out.append(mapping[id(v)])
        else:
            out.append(v)
    return out


def _torch_fn(case):
    torch = pytest.importorskip("torch")
    spec = case.test.get("torch")
    if spec:
        return eval(spec, {"torch": torch, "np": np})
    for ns in (torch, torch.nn.functional, torch.Tensor):
        fn = getattr(ns, case.name, None)
        if fn is not None:
            return fn
    pytest.skip(f"no torch reference for {case.name}")


def _to_torch(v, torch):
    if isinstance(v, ember.Tensor):
        t = torch.from_numpy(v._data.copy())
        if v.requires_grad:
            t.requires_grad_(True)
        return t
    if isinstance(v, list):
        return [_to_torch(x, torch) for x in v]
    if isinstance(v, np.dtype) or v in (np.float32, np.float64):
        return v
    return v


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", [c for c in TESTED if c.test.get("compare", True) is not False],
                         ids=_ids)
def test_against_torch(case, dtype):
    torch = pytest.importorskip("torch")
    tfn = _torch_fn(case)
    rtol, atol = (1e-4, 1e-5) if dtype == np.float32 else (1e-7, 1e-9)
    for si, (args, kwargs) in enumerate(case.samples):
        rng = np.random.default_rng(si)
        eargs, ekw, leaves = _materialize(case, args, kwargs, dtype, rng, case.differentiable)
        targs = [_to_torch(v, torch) for v in eargs]
        tkw = {k: _to_torch(v, torch) for k, v in ekw.items()}
        tleaves = _torch_leaves(targs, tkw, torch)
        out = _call(case, eargs, ekw)
        tout = tfn(*targs, **tkw)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        touts = list(tout) if isinstance(tout, (tuple, list)) else [tout]
        assert len(outs) == len(touts), f"{case.name}: {len(outs)} outputs vs torch {len(touts)}"
        for o, to in zip(outs, touts):
            to_np = to.detach().numpy()
            assert o.shape == tuple(to_np.shape), f"{case.name} sample {si}: shape {o.shape} vs {to_np.shape}"
            if to_np.dtype.kind == "f":
                np.testing.assert_allclose(o._data, to_np, rtol=rtol, atol=atol,
                                           err_msg=f"{case.name} sample {si} forward")
                assert o._data.dtype == to_np.dtype, f"{case.name}: dtype {o._data.dtype} vs {to_np.dtype}"
            else:
                np.testing.assert_array_equal(o._data, to_np)
        if not case.differentiable:
            continue
        diff = [t for t in leaves if t.requires_grad]
        tdiff = [t for t in tleaves if t.requires_grad]
        # every output torch differentiates has a backward node linked, and no other does
        for k, (o, to) in enumerate(zip(outs, touts)):
            linked = isinstance(o, ember.Tensor) and o.grad_fn is not None
            assert linked == to.requires_grad, (
                f"{case.name} sample {si}: output {k} grad_fn is {o.grad_fn}, torch "
                f"requires_grad={to.requires_grad}")
        if case.test.get("compare") == "partial":
            continue
        pairs = [(o, to) for o, to in zip(outs, touts) if to.requires_grad]
        if not pairs:
            assert not tdiff, f"{case.name} sample {si}: torch differentiates no output"
            continue
        fouts = [o for o, _ in pairs]
        seeds = [rng.standard_normal(o.shape).astype(dtype) for o in fouts]
        grads = ember.autograd.grad(fouts, diff, [ember.from_numpy(s) for s in seeds],
                                    allow_unused=True)
        tgrads = torch.autograd.grad([to for _, to in pairs], tdiff,
                                     [torch.from_numpy(s) for s in seeds], allow_unused=True)
        assert len(grads) == len(tgrads)
        for g, tg, leaf in zip(grads, tgrads, diff):
            if tg is None:
                assert g is None or np.allclose(g._data, 0)
                continue
            assert g is not None, f"{case.name}: missing gradient"
            assert g.shape == leaf.shape
            np.testing.assert_allclose(g._data, tg.numpy(), rtol=rtol * 10, atol=atol * 10,
                                       err_msg=f"{case.name} sample {si} backward")


def _torch_leaves(targs, tkw, torch):
    out = []
    for v in list(targs) + list(tkw.values()):
        if isinstance(v, list):
            out += [x for x in v if isinstance(x, torch.Tensor)]
        elif isinstance(v, torch.Tensor):
            out.append(v)
    return out


# ops whose result depends on the memory layout (as_strided reads the storage itself)
LAYOUT_DEPENDENT = {"as_strided", "as_strided_copy"}


@pytest.mark.parametrize("case", [c for c in TESTED if c.differentiable and
                                  c.name not in LAYOUT_DEPENDENT and
                                  not c.entry.get("random")], ids=_ids)   # (draws differ)
def test_noncontiguous_matches_contiguous(case):
    args, kwargs = case.samples[0]
    a = _materialize(case, args, kwargs, np.float64, np.random.default_rng(1), True)
    b = _materialize(case, args, kwargs, np.float64, np.random.default_rng(1), True, True)
    out_a = _call(case, a[0], a[1])
    try:
        out_b = _call(case, b[0], b[1])
    except RuntimeError as e:  # view of a non-contiguous tensor: torch refuses too
        assert "reshape" in str(e), e
        return
    fa, fb = _float_outputs(out_a), _float_outputs(out_b)
    assert len(fa) == len(fb)
    for x, y in zip(fa, fb):
        np.testing.assert_allclose(x._data, y._data, rtol=1e-12, atol=1e-12)
        assert (x.grad_fn is None) == (y.grad_fn is None), case.name
    da = [t for t in a[2] if t.requires_grad]
    db = [t for t in b[2] if t.requires_grad]
    la = [o for o in fa if o.grad_fn is not None]
    lb = [o for o in fb if o.grad_fn is not None]
    if da and la:
        ga = ember.autograd.grad([o.sum() for o in la], da, allow_unused=True)
        gb = ember.autograd.grad([o.sum() for o in lb], db, allow_unused=True)
        for x, y in zip(ga, gb):
            assert (x is None) == (y is None), case.name
            if x is not None:
                np.testing.assert_allclose(x._data, y._data, rtol=1e-12, atol=1e-12)


class RecordingTracer:
    def __init__(self):
        self.records = []

    def record(self, op, tensors, consts, outputs):
        self.records.append((op, tuple(tensors), tuple(consts), tuple(outputs)))

    def record_inplace(self, target, result):
        self.records.append(("inplace", target, result))

    def size(self, tensor, dim):
        return tensor._data.shape[dim]

    def python_value(self, tensor, what):
        pass


@pytest.mark.parametrize("case", TESTED, ids=_ids)
def test_every_op_reaches_tracer_hook(case):
    args, kwargs = case.samples[0]
    eargs, ekw, leaves = _materialize(case, args, kwargs, np.float32, np.random.default_rng(2),
                                      False)
    tracer = RecordingTracer()
    STATE.tracer = tracer
    try:
        out = _call(case, eargs, ekw)
    finally:
        STATE.tracer = None
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    assert tracer.records, f"{case.name} did not reach the tracer"
    if case.entry.get("composite"):
        last = tracer.records[-1]
        assert any(o is outs[0] for o in last[3])
        return
    mine = [r for r in tracer.records if r[0] != "inplace" and r[0].name == case.name]
    assert len(mine) == 1, f"{case.name}: {len(mine)} records"
    op, tensors, consts, routs = mine[0]
    assert len(consts) == len(op.const_names)
    assert [id(o) for o in routs] == [id(o) for o in outs]
    for leaf in leaves:
        assert any(leaf is t for t in tensors) or any(
            isinstance(t, list) and any(leaf is x for x in t) for t in tensors), (
            f"{case.name}: input {leaf.shape} missing from the recorded tensors")


def test_spec_entries_all_have_samples_or_are_factories():
    missing = [c.name for c in CASES if not c.samples and c.name not in FACTORIES]
    assert not missing, f"ops without test samples: {missing}"


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factories_reach_tracer(name):
    tracer = RecordingTracer()
    STATE.tracer = tracer
    try:
        calls = {
            "zeros": lambda: ember.zeros(2, 3), "ones": lambda: ember.ones(2),
            "full": lambda: ember.full((2,), 1.5), "empty": lambda: ember.empty(3),
            "arange": lambda: ember.arange(5), "linspace": lambda: ember.linspace(0, 1, 5),
            "eye": lambda: ember.eye(3), "rand": lambda: ember.rand(2, 2),
            "randn": lambda: ember.randn(2), "randint": lambda: ember.randint(0, 5, (3,)),
            "randperm": lambda: ember.randperm(4), "normal": lambda: ember.normal(0.0, 1.0, (3,)),
        }
        if name not in calls:
            pytest.skip(f"{name} takes a tensor input and is covered by the op tests")
        out = calls[name]()
    finally:
        STATE.tracer = None
    assert any(r[0].name == name and r[3][0] is out for r in tracer.records)
