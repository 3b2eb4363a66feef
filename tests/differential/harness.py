"""Draw cases and compare ember with torch 2.13 (docs/differential.md).

A :class:`Case` is one call, fully described: the op (a spec entry of
ember/ops/spec/ or an OpInfo of torch's op_db), the form (function, method,
in-place, ``out=``), every argument (tensors as :class:`T`: values, dtype, layout; Python scalars
and constants as themselves) and whether gradients are compared. :func:`check` builds the same
inputs in both libraries, runs the call and compares

- the outcome: both raise (ember's error an ``ember.errors`` class under the builtin torch raises)
  or neither does;
- every output: shape, dtype, values (dtype-aware tolerances, NaN at the same places), and after
  an in-place op or ``out=`` the written tensor and the storage under it;
- for float64 cases marked ``grad``: ``autograd.grad`` at first and second order.

A divergence raises :class:`Divergence` with a reproducer to paste (``replay(Case(...))``),
unless the exclusion tables of tests/differential/exclusions.py name it. The hypothesis
strategies :func:`spec_cases` and :func:`opdb_cases` draw cases.
"""
import atexit
import collections
import functools
import json
import os
import random
import re
import types
import warnings

import numpy as np
from hypothesis import strategies as st

import ember
from ember.autograd._generated import functions as G
from tests.op_db.resolve import _is_size, flatten

LONG = os.environ.get("EMBER_DIFFERENTIAL", "") == "long"
# EMBER_DIFFERENTIAL_SURVEY=<file>: record every divergence there (JSON lines) instead of failing
SURVEY = os.environ.get("EMBER_DIFFERENTIAL_SURVEY")
# EMBER_DIFFERENTIAL_STATS=<file>: write the counts of what was checked at exit
STATS_FILE = os.environ.get("EMBER_DIFFERENTIAL_STATS")

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128")
INEXACT = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
# (rtol, atol); atol is scaled by max(1, the largest finite |value| torch returns). float16 and
# bfloat16 allow two units in the last place: torch rounds once from float32, so more is an
# intermediate rounded to the narrow type (or a narrow accumulator).
TOLERANCES = {"float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 8e-3), "float32": (1e-4, 1e-5),
              "float64": (1e-7, 1e-7), "complex64": (1e-4, 1e-5), "complex128": (1e-7, 1e-7)}
GRAD_TOLERANCES = {"float64": (1e-6, 1e-7), "complex128": (1e-6, 1e-7),
                   "float32": (1e-4, 1e-5), "complex64": (1e-4, 1e-5)}  # float32 leaves of
# mixed samples (cov's weights)
FILL = 5  # what the unused elements of a strided buffer hold (reading one shows)


# ---------------------------------------------------------------- the case


class T:
    """A tensor argument: its values (nested list or ndarray), dtype name, layout steps and
    whether it is a leaf that requires grad. Layout steps, applied in order to the buffer the
    values are laid out in: ``("t", i, j)`` transpose, ``("slice", d, off)`` every other element
    of dim ``d`` from ``off``, ``("expand", d, n)`` a size-1 dim expanded to ``n`` (stride 0),
    ``("neg", d)`` ember reads the buffer through a negative stride on ``d`` (torch has no
    negative strides: it gets the values contiguous)."""

    def __init__(self, values, dtype, layout=(), grad=False):
        self.dtype = dtype
        self.values = np.asarray(values, dtype=np_dtype(dtype)) if not isinstance(
            values, np.ndarray) or values.dtype != np_dtype(dtype) else values
        self.layout = tuple(tuple(s) for s in layout)
        self.grad = grad

    @property
    def shape(self):
        return self.values.shape

    def __repr__(self):
        wide = self.values.astype(_wide(self.dtype))
        text = repr(wide.tolist()) if wide.ndim else repr(wide.item())
        extra = (f", layout={self.layout!r}" if self.layout else "") + (
            ", grad=True" if self.grad else "")
        return f"T({text}, {self.dtype!r}{extra})"

    def describe(self):
        return f"{self.dtype}{list(self.shape)} layout={_layout_name(self.layout)}"


class Case:
    """One call to compare (see the module docstring). ``source``: 'spec' or 'op_db'; ``op``:
    the spec name or the op_db entry id; ``form``: function, method, inplace or out."""

    def __init__(self, source, op, form, args, kwargs=None, grad=False, seed=0):
        self.source, self.op, self.form = source, op, form
        self.args, self.kwargs = list(args), dict(kwargs or {})
        self.grad, self.seed = grad, seed

    def __repr__(self):
        kw = f", {self.kwargs!r}" if self.kwargs else ", {}"
        return (f"Case({self.source!r}, {self.op!r}, {self.form!r}, {self.args!r}{kw}, "
                f"grad={self.grad}, seed={self.seed})")

    def tensors(self):
        return [t for t in _walk(list(self.args) + list(self.kwargs.values()))
                if isinstance(t, T)]

    def scalars(self):
        return [v for v in self.args + list(self.kwargs.values())
                if isinstance(v, (bool, int, float, complex))]

    def signature(self):
        """What a combination is, for counting: op, form, dtypes, layouts, scalar types."""
        ts = self.tensors()
        return (self.source, self.op, self.form, tuple(t.dtype for t in ts),
                tuple(_layout_name(t.layout) for t in ts),
                tuple(type(s).__name__ for s in self.scalars()), self.grad)

    def describe(self):
        lines = [f"op {self.source}:{self.op}  form {self.form}  grad {self.grad}"]
        for i, v in enumerate(self.args):
            lines.append(f"  arg {i}: {_describe_value(v)}")
        for k, v in self.kwargs.items():
            lines.append(f"  {k}=: {_describe_value(v)}")
        return "\n".join(lines)


def _describe_value(v):
    if isinstance(v, T):
        strides = _ember_strides(v)
        return f"{v.describe()} strides={strides}"
    if isinstance(v, (list, tuple)) and any(isinstance(x, T) for x in v):
        return "[" + ", ".join(_describe_value(x) for x in v) + "]"
    return f"{type(v).__name__} {v!r}"


def _ember_strides(t):
    try:
        return tuple(build(t, "ember")[0].stride())
    except Exception:  # noqa: BLE001 - only a description
        return "?"


def _walk(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _walk(v)
        elif isinstance(v, dict):
            yield from _walk(list(v.values()))
        else:
            yield v


def _layout_name(layout):
    if not layout:
        return "contiguous"
    return "+".join({"t": "transposed", "slice": "strided", "expand": "expanded",
                     "neg": "negative"}[s[0]] for s in layout)


# ---------------------------------------------------------------- dtypes and building


def np_dtype(name):
    return ember.bfloat16.numpy if name == "bfloat16" else np.dtype(name)


def _wide(name):
    if name == "bool":
        return bool
    if name.startswith("complex"):
        return np.complex128
    return np.int64 if name.startswith(("int", "uint")) else np.float64


def _torch():
    import torch
    return torch


def _torch_from(arr, name):
    torch = _torch()
    if name == "bfloat16":
        return torch.from_numpy(arr.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.array(arr, order="C"))


def _buffer(values, layout):
    """The contiguous buffer that, read through ``layout``, gives ``values``."""
    arr = values
    for step in reversed(layout):
        kind = step[0]
        if kind == "t":
            arr = np.swapaxes(arr, step[1], step[2])
        elif kind == "slice":
            d, off = step[1], step[2]
            shape = list(arr.shape)
            shape[d] = 2 * shape[d] + off
            buf = np.full(shape, FILL if arr.dtype != bool else True, dtype=arr.dtype)
            idx = [slice(None)] * arr.ndim
            idx[d] = slice(off, None, 2)
            buf[tuple(idx)] = arr
            arr = buf
        elif kind == "expand":
            arr = np.take(arr, [0], axis=step[1])
        elif kind == "neg":
            arr = np.flip(arr, step[1])
    return np.array(arr, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)


def build(t, lib):
    """(tensor, leaf) of ``lib`` ('ember' or 'torch') holding ``t``'s values in its layout; the
    leaf is the tensor made from the buffer (requires grad when ``t.grad``)."""
    buf = _buffer(t.values, t.layout)
    neg = [s for s in t.layout if s[0] == "neg"]
    if lib == "ember":
        arr = buf.copy()
        for s in neg:
            arr = np.flip(arr, s[1])
        leaf = ember.from_numpy(arr)
    else:
        arr = buf
        for s in neg:
            arr = np.flip(arr, s[1])
        leaf = _torch_from(arr, t.dtype)
    if t.grad:
        leaf.requires_grad_(True)
    x = leaf
    for step in t.layout:
        kind = step[0]
        if kind == "t":
            x = x.transpose(step[1], step[2])
        elif kind == "slice":
            x = x[(slice(None),) * step[1] + (slice(step[2], None, 2),)]
        elif kind == "expand":
            shape = list(x.shape)
            shape[step[1]] = step[2]
            x = x.expand(*shape)
    return x, leaf


def _convert(v, lib, leaves, opdb_convert):
    if isinstance(v, T):
        x, leaf = build(v, lib)
        leaves.append((v, x, leaf))
        return x
    if isinstance(v, list):
        return [_convert(x, lib, leaves, opdb_convert) for x in v]
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        items = tuple(_convert(x, lib, leaves, opdb_convert) for x in v)
        return type(v)(items) if type(v) is not tuple and _is_size(v) else items
    if isinstance(v, dict):
        return {k: _convert(x, lib, leaves, opdb_convert) for k, x in v.items()}
    if lib == "ember" and opdb_convert is not None:
        return opdb_convert(v)
    return v



# ---------------------------------------------------------------- ops: the spec


class SpecOp:
    """A spec entry that can be compared: how to call it in each library and in which forms."""

    def __init__(self, case):
        self.case = case
        self.name = case.name
        entry = case.entry
        custom = case.test.get("torch")
        self.torch_expr = custom or self._torch_name()
        ns = {n.strip() for n in str(entry.get("namespace", "ember")).split(",")}  # "ember, functional"
        variants = entry.get("variants", "function, method")
        if "ember" in ns and "function" in variants and callable(getattr(ember, self.name, None)):
            self.ember_expr = f"ember.{self.name}"
        elif "functional" in ns and hasattr(ember.nn.functional, self.name):
            self.ember_expr = f"ember.nn.functional.{self.name}"
        else:
            self.ember_expr = f"G.{self.name}"
        torch = _torch()
        forms = ["function"]
        if not custom and "method" in variants and hasattr(torch.Tensor, self.name) \
                and hasattr(ember.Tensor, self.name):
            forms.append("method")
        if not custom and entry.get("inplace") and hasattr(torch.Tensor, self.name + "_") \
                and hasattr(ember.Tensor, self.name + "_"):
            forms.append("inplace")
        if not custom and self.torch_expr == f"torch.{self.name}" and \
                case.returns[0] == "single" and self.ember_expr.startswith("ember."):
            forms.append("out")
        self.forms = forms

    def _torch_name(self):
        torch = _torch()
        for prefix, ns in (("torch", torch), ("torch.nn.functional", torch.nn.functional),
                           ("torch.Tensor", torch.Tensor)):
            if getattr(ns, self.case.name, None) is not None:
                return f"{prefix}.{self.case.name}"
        return None


@functools.lru_cache(maxsize=None)
def spec_ops():
    """Every spec entry with ``test:`` samples, a torch reference and results torch defines."""
    from tests.autograd.spec_samples import cases
    ops = []
    for c in cases():
        if not c.samples or c.test.get("compare", True) is False or c.entry.get("random"):
            continue
        op = SpecOp(c)
        if op.torch_expr is not None:
            ops.append(op)
    return ops


@functools.lru_cache(maxsize=None)
def _spec_by_name():
    return {op.name: op for op in spec_ops()}


def _eval_expr(expr):
    torch = _torch()
    return eval(expr, {"torch": torch, "np": np, "ember": ember, "G": G})


# ---------------------------------------------------------------- ops: op_db


@functools.lru_cache(maxsize=None)
def opdb_ops():
    """(OpInfo, Resolved) for each op_db entry ember resolves whose values are defined (not
    random) and that passes tests/op_db today (known failures are already tracked there)."""
    from tests.op_db import resolve as R
    out = []
    known = R.known_failures()
    for op in R.op_db():
        status, info = R.classify(op)
        eid = R.entry_id(op)
        if status != "resolved" or eid in known or op.name in R.SHAPE_ONLY:
            continue
        out.append((op, info))
    return out


@functools.lru_cache(maxsize=None)
def _opdb_by_id():
    from tests.op_db import resolve as R
    return {R.entry_id(op): (op, res) for op, res in opdb_ops()}


@functools.lru_cache(maxsize=256)
def opdb_samples(eid, dtype, grad):
    """The OpInfo's own sample inputs for ``dtype`` (torch's generator, seeded)."""
    from tests.op_db import resolve as R
    torch = _torch()
    op, _ = _opdb_by_id()[eid]
    torch.default_generator.manual_seed(0)
    # a few generators draw from the random module or NumPy's global generator: seed both,
    # and leave them as they were
    state, np_state = random.getstate(), np.random.get_state()
    random.seed(0)
    np.random.seed(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return tuple(s for s in op.sample_inputs_func(op, "cpu", getattr(torch, dtype), grad)
                         if not R._random_sample(op, s))
    except Exception:  # noqa: BLE001 - torch's own generator failing says nothing of ember
        return ()
    finally:
        random.setstate(state)
        np.random.set_state(np_state)


def _opdb_dtypes(op):
    names = {str(d).replace("torch.", "") for d in op.supported_dtypes("cpu")}
    return [d for d in DTYPES if d in names]


def _opdb_grad_ok(op):
    back = {str(d).replace("torch.", "") for d in op.supported_backward_dtypes("cpu")}
    return op.supports_autograd and "float64" in back


def _opdb_forms(op, resolved):
    forms = ["function"]
    if op.inplace_variant is not None and "." not in op.name and \
            hasattr(ember.Tensor, op.name + "_"):
        forms.append("inplace")
    if op.supports_out and resolved.kind == "function":
        forms.append("out")
    return forms


# ---------------------------------------------------------------- drawing (hypothesis)


def _values(rng, kind, shape, dtype, high=None, specials=False):
    """Values of ``dtype`` for a sample leaf of ``kind`` (spec_samples' letters)."""
    if kind == "i":
        return rng.integers(0, high, shape).astype(np_dtype(dtype))
    if kind == "b":
        return (rng.random(shape) > 0.5).astype(np_dtype(dtype))
    if kind == "p":
        base = np.abs(rng.standard_normal(shape)) + 0.5
    elif kind == "u":
        base = rng.uniform(0.1, 0.9, shape)
    elif kind == "w":
        base = rng.standard_normal(shape) + 3 * np.eye(shape[-1])
    elif kind == "h":
        x = rng.standard_normal(shape)
        base = x @ np.swapaxes(x, -1, -2) / shape[-1] + np.eye(shape[-1])
    else:
        base = rng.standard_normal(shape)
    base = np.asarray(base, dtype=np.float64)
    if dtype == "bool":
        return base > 0.3 if kind in "pu" else base > 0
    if dtype.startswith(("int", "uint")):
        scaled = np.round(base * 3)
        if kind in "pu" or dtype == "uint8":
            scaled = np.abs(scaled) + (1 if kind in "pu" else 0)
        return scaled.astype(np_dtype(dtype))
    if dtype.startswith("complex"):
        base = base + 1j * rng.standard_normal(shape)
    arr = base.astype(np_dtype(dtype))
    if specials and arr.size:
        flat = arr.reshape(-1)
        picks = rng.choice(arr.size, size=min(arr.size, 2), replace=False)
        choices = [np.nan, np.inf, -np.inf, 0.0, -0.0]
        for p in picks:
            flat[p] = choices[rng.integers(len(choices))]
    return arr


@st.composite
def layouts(draw, shape):
    """A layout for a tensor of ``shape`` (see :class:`T`)."""
    nd = len(shape)
    names = ["contiguous"]
    if nd >= 1:
        names += ["strided", "negative"]
    if nd >= 2:
        names += ["transposed", "view_of_view"]
    if any(s > 1 for s in shape):
        names += ["expanded"]
    name = draw(st.sampled_from(names))
    if name == "contiguous":
        return ()
    if name in ("strided", "negative"):
        d = draw(st.integers(0, nd - 1))
        return (("slice", d, draw(st.integers(0, 1))),) if name == "strided" else (("neg", d),)
    if name == "expanded":
        d = draw(st.sampled_from([i for i, s in enumerate(shape) if s > 1]))
        return (("expand", d, shape[d]),)
    i, j = draw(st.sampled_from([(a, b) for a in range(nd) for b in range(a + 1, nd)]))
    if name == "transposed":
        return (("t", i, j),)
    return (("t", i, j), ("slice", draw(st.integers(0, nd - 1)), draw(st.integers(0, 1))))


def _expand_values(values, layout):
    """Values constant along an expanded dim (what an expanded tensor holds)."""
    for step in layout:
        if step[0] == "expand":
            values = np.broadcast_to(np.take(values, [0], axis=step[1]), values.shape).copy()
    return values


SCALAR_TYPES = ("int", "float", "bool", "complex")


def _scalar(kind, base):
    if kind == "int":
        return int(round(base)) or 2
    if kind == "bool":
        return base > 0
    if kind == "complex":
        return complex(base, 0.5)
    return float(base)


@functools.lru_cache(maxsize=None)
def _differentiable_spec_ops():
    return [op for op in spec_ops() if op.case.differentiable]


def spec_op_names(grad_only=False):
    """The names of the spec ops the tester draws cases for (``grad_only``: differentiable)."""
    return [op.name for op in (_differentiable_spec_ops() if grad_only else spec_ops())]


@st.composite
def spec_cases(draw, name, grad_only=False):
    """A Case over the spec entry ``name``: one of its samples with dtypes, layouts, scalar
    types and a form drawn; ``grad`` cases are float64 throughout (``grad_only``: only those).
    The draws depend on this entry alone, so adding or reordering other entries leaves its
    cases as they were."""
    from tests.autograd.spec_samples import Leaf
    op = _spec_by_name()[name]
    case = op.case
    sample_i = draw(st.integers(0, len(case.samples) - 1), label="sample")
    args, kwargs = case.samples[sample_i]
    forms = [f for f in op.forms if f in ("function", "method")] if grad_only else op.forms
    form = draw(st.sampled_from(forms), label="form")
    grad = form in ("function", "method") and case.differentiable and (
        grad_only or draw(st.booleans()))
    specials = not grad and draw(st.booleans())
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    tpos, tnames = case.tensor_positions(), case.tensor_names()
    names = [a.name for a in case.args]
    nograd = set(case.test.get("nograd", [])) | {
        i for i, a in enumerate(case.args)
        if case.entry.get(a.name) in ("non_differentiable", "refuses_grad")}
    first = []

    def leaf_dtype(leaf):
        if leaf.kind == "i":
            return draw(st.sampled_from(["int64", "int32"]))
        if leaf.kind == "b":
            return draw(st.sampled_from(["bool", "uint8"]))
        if grad:
            return "float64"
        pool = INEXACT if leaf.kind in "wh" else DTYPES
        if first and draw(st.booleans()):
            return first[0] if first[0] in pool else draw(st.sampled_from(pool))
        return draw(st.sampled_from(pool))

    def make(v, is_slot, idx):
        if isinstance(v, Leaf):
            dtype = leaf_dtype(v)
            if v.kind not in "ib":
                first.append(dtype)
            layout = draw(layouts(v.shape))
            vals = _expand_values(_values(rng, v.kind, v.shape, dtype, v.high, specials),
                                  layout)
            return T(vals, dtype, layout, grad=grad and v.is_float and idx not in nograd)
        if isinstance(v, list):
            return [make(x, True, None) for x in v]
        if is_slot and isinstance(v, np.ndarray):
            dtype = str(v.dtype)
            return T(v.copy(), dtype, draw(layouts(v.shape)),
                     grad=grad and v.dtype.kind == "f" and idx not in nograd)
        if is_slot and isinstance(v, (int, float)) and not isinstance(v, bool) and \
                case.entry.get("scalar_ok"):
            return _scalar(draw(st.sampled_from(SCALAR_TYPES)), float(v))
        return v

    cargs = [make(v, i in tpos, i) for i, v in enumerate(args)]
    ckw = {k: make(v, k in tnames, names.index(k) if k in names else None)
           for k, v in kwargs.items()}
    if grad and not any(t.grad for t in _walk(cargs + list(ckw.values())) if isinstance(t, T)):
        grad = False
    if form != "function" and not (cargs and isinstance(cargs[0], T)):
        form = "function"
    return Case("spec", op.name, form, cargs, ckw, grad=grad, seed=seed)


@st.composite
def opdb_cases(draw):
    """A Case over an op_db entry: one of torch's own samples in a drawn dtype (float64 with
    gradients, when the entry supports autograd, in half the cases), every tensor in a drawn
    layout, and a drawn form."""
    from tests.op_db import resolve as R
    torch = _torch()
    op, resolved = draw(st.sampled_from(opdb_ops()), label="op")
    eid = R.entry_id(op)
    dtypes = _opdb_dtypes(op)
    if not dtypes:
        return None
    grad = _opdb_grad_ok(op) and "float64" in dtypes and draw(st.booleans())
    dtype = "float64" if grad else draw(st.sampled_from(dtypes))
    samples = opdb_samples(eid, dtype, grad)
    if not samples:
        return None
    idx = draw(st.integers(0, len(samples) - 1), label="sample")
    sample = samples[idx]
    form = "function" if grad else draw(st.sampled_from(_opdb_forms(op, resolved)))

    def conv(v):
        if isinstance(v, torch.Tensor):
            if v.layout != torch.strided:
                raise _Skip("layout")
            name = str(v.dtype).replace("torch.", "")
            if name not in DTYPES:
                raise _Skip("dtype")
            d = v.detach()
            arr = d.float().numpy() if name == "bfloat16" else d.numpy()
            arr = np.asarray(arr).astype(np_dtype(name))
            layout = draw(layouts(arr.shape))
            return T(_expand_values(arr, layout), name, layout,
                     grad=grad and v.requires_grad)
        if isinstance(v, list):
            return [conv(x) for x in v]
        if isinstance(v, tuple) and not _is_size(v) and not hasattr(v, "_fields"):
            return tuple(conv(x) for x in v)
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v

    try:
        args = [conv(sample.input)] + [conv(a) for a in sample.args]
        kwargs = {k: conv(v) for k, v in sample.kwargs.items()}
    except _Skip:
        return None
    if grad and not any(t.grad for t in _walk(args + list(kwargs.values())) if isinstance(t, T)):
        grad = False
    if form == "inplace" and not isinstance(args[0], T):
        form = "function"
    case = Case("op_db", eid, form, args, kwargs, grad=grad, seed=idx)
    case.sample = sample
    return case


class _Skip(Exception):
    pass


# ---------------------------------------------------------------- running


class Divergence(AssertionError):
    """ember and torch differ on a case; the message ends with a reproducer."""

    def __init__(self, what, case):
        self.what, self.case = what, case
        super().__init__(f"{what}\n{reproducer(case)}")


def reproducer(case):
    """What to paste (from the repository root) to see the divergence again."""
    return (f"--- case\n{case.describe()}\n--- reproduce (repository root):\n"
            "from numpy import nan, inf\nimport torch\n"
            "from tests.differential.harness import Case, T, replay\n"
            f"replay({case!r})")


def _callables(case):
    """(torch fn, ember fn) for ``case.form`` called as fn(*args, **kwargs)."""
    if case.source == "spec":
        op = _spec_by_name()[case.op]
        if case.form == "function" or case.form == "out":
            return _eval_expr(op.torch_expr), _eval_expr(op.ember_expr)
        name = op.name + ("_" if case.form == "inplace" else "")
    else:
        from tests.op_db import resolve as R
        op, resolved = _opdb_by_id()[case.op]
        if case.form == "function":
            return op.op, R.ember_callable(op, resolved)
        if case.form == "out":  # a torch-side wrapper (argument order) runs transplanted
            return op.op, R.ember_callable(op, resolved)
        name = op.name + "_"
        if case.form == "inplace":
            return op.inplace_variant, _method(name)
    return _method(name), _method(name)


def _method(name):
    def call(x, *args, **kwargs):
        return getattr(x, name)(*args, **kwargs)
    return call


def _inputs(case, lib):
    leaves = []
    conv = None
    if case.source == "op_db" and lib == "ember":
        from tests.op_db import resolve as R
        # one converter per case: its memo is keyed by id() of torch tensors, which a later
        # case's tensors reuse once these are freed (a shared one handed stale inputs over)
        base = R.Converter(_torch())

        def conv(v):
            try:
                return base(v)
            except R.Unrepresentable as exc:
                raise _Skip(str(exc)) from None
    args = [_convert(v, lib, leaves, conv) for v in case.args]
    kwargs = {k: _convert(v, lib, leaves, conv) for k, v in case.kwargs.items()}
    return args, kwargs, leaves


def _run(fn, args, kwargs, out=None):
    if out is not None:
        kwargs = dict(kwargs, out=out)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return fn(*args, **kwargs), None
        except Exception as exc:  # noqa: BLE001 - the outcome being compared
            return None, exc


BUILTINS = (IndexError, KeyError, OverflowError, TypeError, ValueError, NotImplementedError,
            RuntimeError)


def builtin_of(exc):
    """The builtin exception class ``exc`` is (torch's own errors subclass these)."""
    for cls in BUILTINS:
        if isinstance(exc, cls):
            return cls
    return type(exc)


TORCH_DTYPE_GAP = re.compile(r"not implemented for '|\"\w+\" not implemented for|"
                             r"does not support (automatic differentiation for )?outputs with "
                             r"complex dtype|Unsupported dtype|is not supported for \w+ dtype|"
                             r"not supported for (Half|BFloat16|complex|Bool)|Low precision "
                             r"dtypes not supported|only supports floating-point dtypes|"
                             r"expected a floating point or complex tensor|"
                             r"floating point .*dtype")


class Outcome:
    """What a check found: ``status`` 'match', 'both_raised', 'torch_gap', 'unsupported',
    'skipped', 'excluded' or 'known_open' (with the exclusion's name)."""

    def __init__(self, status, detail=""):
        self.status, self.detail = status, detail


STATS = collections.Counter()
COMBOS = set()


def check(case, torch=None):
    """Compare ember with torch on ``case``; raises Divergence unless they agree or an
    exclusion table names the difference. Returns an :class:`Outcome`."""
    from tests.differential.exclusions import classify, never_run
    if case is None:
        STATS["skipped"] += 1
        return Outcome("skipped")
    crash = never_run(case)
    if crash is not None:
        STATS[f"not run: {crash}"] += 1
        return Outcome("excluded", crash)
    try:
        outcome = _check(case)
    except _Skip as exc:
        outcome = Outcome("skipped", str(exc))
    except Divergence as div:
        name, status = classify(case, div.what)
        if status is None:
            STATS["divergence"] += 1
            if SURVEY:
                _survey(case, div)
                return Outcome("divergence", div.what)
            raise
        outcome = Outcome(status, name)
        STATS[f"{status}: {name}"] += 1
    STATS[outcome.status] += 1
    if outcome.status != "skipped":
        COMBOS.add(case.signature())
    return outcome


def _survey(case, div):
    with open(SURVEY, "a") as fh:
        fh.write(json.dumps({"op": f"{case.source}:{case.op}", "form": case.form,
                             "dtypes": [t.dtype for t in case.tensors()], "grad": case.grad,
                             "what": div.what, "reproducer": reproducer(case)}) + "\n")


def _check(case):
    torch = _torch()
    t_fn, e_fn = _callables(case)
    t_args, t_kw, t_leaves = _inputs(case, "torch")
    e_args, e_kw, e_leaves = _inputs(case, "ember")
    t_out = e_out = None
    if case.form == "out":
        ref, exc = _run(t_fn, *_inputs(case, "torch")[:2])
        if exc is not None or not isinstance(ref, torch.Tensor):
            raise _Skip("out= needs a single tensor result")
        if _tname(ref) not in DTYPES:   # complex32 (torch.complex of float16 halves), ...
            raise _Skip("dtype")
        t_out = torch.zeros(ref.shape, dtype=ref.dtype)
        e_out = ember.zeros(tuple(ref.shape), dtype=getattr(ember, _tname(ref)))
    t_res, t_exc = _run(t_fn, t_args, t_kw, t_out)
    if t_exc is not None and isinstance(t_exc, TypeError) and "out" in str(t_exc) and \
            case.form == "out":
        raise _Skip("torch's function takes no out=")
    e_res, e_exc = _run(e_fn, e_args, e_kw, e_out)
    if t_exc is not None or e_exc is not None:
        return _compare_errors(case, t_exc, e_exc)
    _compare(t_res, e_res, case, "result")
    if case.form == "inplace":
        _compare(t_args[0], e_args[0], case, "the in-place target after the op")
        for (spec, tx, tl), (_, ex, el) in zip(t_leaves, e_leaves):
            if spec is case.args[0] and spec.layout and not any(
                    s[0] == "neg" for s in spec.layout):
                _compare(tl, el, case, "the storage under the in-place target")
    if case.form == "out":
        _compare(t_out, e_out, case, "the out= tensor")
        if isinstance(e_res, ember.Tensor) and e_res is not e_out:
            raise Divergence("out=: ember returns a tensor other than out", case)
    if case.grad:
        _compare_grads(case, t_res, e_res, t_leaves, e_leaves, (t_fn, e_fn), (t_args, t_kw),
                       (e_args, e_kw))
    return Outcome("match")


def _tname(t):
    return str(t.dtype).replace("torch.", "")


def _compare_errors(case, t_exc, e_exc):
    if t_exc is not None and e_exc is not None:
        want = builtin_of(t_exc)
        # torch's dtype-coverage gaps raise NotImplementedError or RuntimeError by accident of
        # its dispatch macros: there any ember error class answers
        gap = TORCH_DTYPE_GAP.search(str(t_exc)) and isinstance(e_exc, ember.errors.EmberError)
        if not gap and not isinstance(e_exc, want):
            raise Divergence(f"error class: torch raises {type(t_exc).__name__} ({want.__name__}):"
                             f" {_first_line(t_exc)}\n  ember raises {type(e_exc).__name__}: "
                             f"{_first_line(e_exc)}", case)
        if not isinstance(e_exc, ember.errors.EmberError):
            raise Divergence(f"ember raises a bare {type(e_exc).__name__} (not an ember.errors "
                             f"class): {_first_line(e_exc)}", case)
        return Outcome("both_raised")
    if t_exc is not None:
        if TORCH_DTYPE_GAP.search(str(t_exc)):
            return Outcome("torch_gap", _first_line(t_exc))
        raise Divergence(f"torch raises {type(t_exc).__name__}: {_first_line(t_exc)}\n  "
                         "ember returns a result", case)
    if isinstance(e_exc, ember.errors.UnsupportedError):
        return Outcome("unsupported", _first_line(e_exc))
    raise Divergence(f"ember raises {type(e_exc).__name__}: {_first_line(e_exc)}\n  torch "
                     "returns a result", case)


def _first_line(exc):
    text = str(exc).strip().splitlines()
    return (text[0] if text else "")[:300]


def _compare(t_res, e_res, case, what, tolerances=TOLERANCES):
    torch = _torch()
    t_flat, e_flat = flatten(t_res), flatten(e_res)
    if len(t_flat) != len(e_flat):
        raise Divergence(f"{what}: torch returns {len(t_flat)} values, ember {len(e_flat)}", case)
    for k, (t, e) in enumerate(zip(t_flat, e_flat)):
        label = f"{what}[{k}]" if len(t_flat) > 1 else what
        if isinstance(t, torch.Tensor):
            if not isinstance(e, ember.Tensor):
                raise Divergence(f"{label}: torch returns a tensor, ember a {type(e).__name__}",
                                 case)
            if tuple(t.shape) != tuple(e.shape):
                raise Divergence(f"{label}: shape {tuple(e.shape)}, torch {tuple(t.shape)}",
                                 case)
            if _tname(t) != e.dtype.name:
                raise Divergence(f"{label}: dtype {e.dtype.name}, torch {_tname(t)}", case)
            want = t.detach()
            want = (want.float() if want.dtype == torch.bfloat16 else want).numpy(force=True)
            got = np.asarray(e._data)
            got = got.astype(np.float32) if e.dtype.name == "bfloat16" else got
            bad = _mismatch(want, got, _tname(t), tolerances)
            if bad:
                raise Divergence(f"{label} ({_tname(t)}{list(want.shape)}): {bad}", case)
        elif isinstance(t, (bool, int, float, complex)) or t is None:
            if isinstance(e, ember.Tensor) or (t is None) != (e is None) or (
                    isinstance(t, bool) != isinstance(e, bool)):
                raise Divergence(f"{label}: torch returns {type(t).__name__} {t!r}, ember "
                                 f"{type(e).__name__} {e!r}", case)
            if t is not None and not (t == e or (t != t and e != e) or np.isclose(
                    complex(t), complex(e), rtol=1e-6, atol=1e-7)):
                raise Divergence(f"{label}: {e!r}, torch {t!r}", case)
        elif _is_size(t):
            if tuple(t) != tuple(e):
                raise Divergence(f"{label}: {tuple(e)}, torch {tuple(t)}", case)


def _mismatch(want, got, dtype, tolerances):
    if want.dtype.kind in "fc":
        rtol, atol = tolerances.get(dtype, (1e-7, 1e-7))
        finite = np.abs(want[np.isfinite(want)])
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        with np.errstate(all="ignore"):
            if want.dtype.kind == "c":  # by parts: inf + xj next to inf + yj is inf - inf away
                ok = np.isclose(got.real, want.real, rtol=rtol, atol=atol * scale,
                                equal_nan=True) & np.isclose(
                    got.imag, want.imag, rtol=rtol, atol=atol * scale, equal_nan=True)
            else:
                ok = np.isclose(got, want, rtol=rtol, atol=atol * scale, equal_nan=True)
    else:
        ok = got == want
    ok = np.asarray(ok)
    if ok.all():
        return None
    bad = np.argwhere(~ok)
    idx = tuple(bad[0]) if want.ndim else ()
    return (f"{bad.shape[0]} of {want.size} values differ, e.g. at {list(idx)} ember "
            f"{got[idx]!r}, torch {want[idx]!r}")


def _grad_outputs(case, t_res, e_res, fns, t_call, e_call):
    """The (torch, ember) outputs to differentiate: for op_db through the OpInfo's
    gradcheck_wrapper and output_process_fn_grad, as torch's own gradient tests do."""
    if case.source != "op_db":
        return t_res, e_res
    from tests.op_db import resolve as R
    op, _ = _opdb_by_id()[case.op]
    sample = types.SimpleNamespace(input=t_call[0][0], args=t_call[0][1:], kwargs=t_call[1],
                                   output_process_fn_grad=case.sample.output_process_fn_grad)
    try:
        return R._gradient_outputs(op, fns[1], sample, (e_call[0][0], e_call[0][1:], e_call[1]),
                                   t_res, e_res)
    except R.Mismatch as exc:
        raise Divergence(str(exc), case) from None


def _compare_grads(case, t_res, e_res, t_leaves, e_leaves, fns, t_call, e_call):
    torch = _torch()
    t_res, e_res = _grad_outputs(case, t_res, e_res, fns, t_call, e_call)
    t_flat, e_flat = flatten(t_res), flatten(e_res)
    pairs = [(t, e) for t, e in zip(t_flat, e_flat) if isinstance(t, torch.Tensor)
             and t.requires_grad and (t.dtype.is_floating_point or t.dtype.is_complex)]
    tl = [leaf for spec, _, leaf in t_leaves if spec.grad]
    el = [leaf for spec, _, leaf in e_leaves if spec.grad]
    if not pairs or not tl:
        return
    for k, (_, e) in enumerate(pairs):
        if not (isinstance(e, ember.Tensor) and e.requires_grad):
            raise Divergence(f"output {k} does not require grad in ember (torch differentiates "
                             "it)", case)
    rng = np.random.default_rng(case.seed)
    gos = [rng.standard_normal(tuple(t.shape)) + (
        1j * rng.standard_normal(tuple(t.shape)) if t.dtype.is_complex else 0) for t, _ in pairs]
    try:
        t_g = torch.autograd.grad([t for t, _ in pairs], tl,
                                  [torch.from_numpy(g).to(t.dtype) for g, (t, _) in
                                   zip(gos, pairs)], allow_unused=True, create_graph=True)
    except Exception:  # noqa: BLE001 - torch cannot differentiate this case
        return
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            e_g = ember.autograd.grad([e for _, e in pairs], el,
                                      [ember.tensor(g, dtype=e.dtype) for g, (_, e) in
                                       zip(gos, pairs)], allow_unused=True, create_graph=True)
        except Exception as exc:  # noqa: BLE001
            raise Divergence(f"ember backward raises {type(exc).__name__}: {_first_line(exc)}",
                             case) from None
    _compare_grad_list(t_g, e_g, case, "first-order gradient")
    # second order: d/d(inputs) of sum_k <grad_k, v_k>
    vs = [rng.standard_normal(tuple(leaf.shape)) for leaf in tl]
    t_terms = [(g * torch.from_numpy(v).to(g.dtype)).sum() for g, v in zip(t_g, vs)
               if g is not None and g.requires_grad]
    if not t_terms:
        return
    try:
        t_g2 = torch.autograd.grad(sum(t_terms), tl, allow_unused=True)
    except Exception:  # noqa: BLE001 - torch has no second derivative here
        return
    e_terms = [(g * ember.tensor(v, dtype=g.dtype)).sum() for g, v in zip(e_g, vs)
               if g is not None and g.requires_grad]
    if not e_terms:
        e_g2 = [None] * len(el)
    else:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                e_g2 = ember.autograd.grad(sum(e_terms[1:], e_terms[0]), el, allow_unused=True)
            except Exception as exc:  # noqa: BLE001
                raise Divergence(f"ember double backward raises {type(exc).__name__}: "
                                 f"{_first_line(exc)}", case) from None
    _compare_grad_list(t_g2, e_g2, case, "second-order gradient")


def _compare_grad_list(t_g, e_g, case, what):
    for k, (tg, eg) in enumerate(zip(t_g, e_g)):
        label = f"{what} of leaf {k}"
        if tg is None or eg is None:
            other = eg if tg is None else tg
            if other is None:
                continue
            arr = np.asarray(other._data) if isinstance(other, ember.Tensor) else \
                other.detach().numpy(force=True)
            if np.any(arr != 0):
                side = "torch" if tg is None else "ember"
                raise Divergence(f"{label}: {side} gives none, the other a nonzero one", case)
            continue
        _compare(tg, eg, case, label, GRAD_TOLERANCES)


def replay(case):
    """Run ``case`` and print both libraries' results and the verdict (for a reproducer)."""
    t_fn, e_fn = _callables(case)
    t_args, t_kw, _ = _inputs(case, "torch")
    e_args, e_kw, _ = _inputs(case, "ember")
    print(case.describe())
    if case.form != "out":
        print("torch:", _run(t_fn, t_args, t_kw))
        print("ember:", _run(e_fn, e_args, e_kw))
    try:
        _check(case)
        print("verdict: agree")
    except Divergence as div:
        print("verdict:", div.what)
    except _Skip as exc:
        print("verdict: not comparable:", exc)


# ---------------------------------------------------------------- budget and stats


def examples(ci):
    """max_examples: ``ci`` in CI, 50x that with EMBER_DIFFERENTIAL=long."""
    return ci * 50 if LONG else ci


def _write_stats():
    if STATS_FILE and (STATS or COMBOS):
        combos = collections.Counter(s[0] for s in COMBOS)
        with open(STATS_FILE, "a") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "outcomes": dict(STATS),
                                 "combinations": dict(combos),
                                 "ops": len({s[:2] for s in COMBOS})}) + "\n")


atexit.register(_write_stats)
