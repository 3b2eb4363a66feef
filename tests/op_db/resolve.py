"""Resolve the entries of torch's operator database (``op_db``) to ember and run them.

For one OpInfo, :func:`resolve` finds ember's equivalent by the entry's name and its aliases:
``ember.<name>``, a dotted namespace (``ember.nn.functional.<x>``, ``ember.linalg.<x>``, ...), or a
Tensor method / attribute. :func:`run_entry` runs the OpInfo's own ``sample_inputs`` through torch
and ember, in every dtype the OpInfo lists that ember has (float32 and float64 first), on
contiguous and non-contiguous inputs, and compares outputs (shape, dtype, values) and, in float64
where torch differentiates, gradients for a random ``grad_output``.
"""
import functools
import inspect
import math
import os
import types

import numpy as np
import yaml

import ember

HERE = os.path.dirname(__file__)

# Tolerances per output dtype (rtol, atol; atol is scaled by the output's largest magnitude);
# float32 is looser than torch's defaults because ember's NumPy kernels accumulate in a
# different order.
TOLERANCES = {"float16": (1e-3, 1e-3), "float32": (1e-4, 1e-5), "float64": (1e-7, 1e-7),
              "complex64": (1e-4, 1e-5), "complex128": (1e-7, 1e-7)}
GRAD_TOLERANCES = {"float32": (1e-3, 1e-4), "float64": (1e-6, 1e-7),
                   "complex128": (1e-6, 1e-7)}
# dtypes tried, in this order, when the OpInfo lists them and ember has them (by torch's name)
DTYPES = ("float32", "float64", "int64", "bool", "complex64", "complex128")
# Entries whose values come from a random generator or are uninitialised memory: only the
# shape and dtype of their outputs can be compared with torch.
SHAPE_ONLY = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "normal", "uniform",
    "multinomial", "rand_like", "randn", "randn_like", "randint", "randint_like",
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu", "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d", "svd_lowrank", "pca_lowrank",
}
# Decompositions whose vectors are defined up to sign: {name: {output: axis of each vector}}.
# Each vector is compared after flipping it so that its largest entry is positive.
SIGN_FREE = {"linalg.eigh": {1: -2}, "linalg.svd": {0: -2, 2: -1}, "svd": {0: -2, 2: -2},
             "linalg.eig": {1: -2}}   # complex vectors: defined up to a phase
# Ops whose index output may legitimately differ from torch's where values tie:
# {name: (index output, position of dim in args, position of keepdim in args or None)}.
# There the indices are checked by what they select, not compared.
TIED_INDICES = {"sort": (1, 0, None), "argsort": (0, 0, None), "topk": (1, 1, None),
                "kthvalue": (1, 1, 2), "mode": (1, 0, 1), "median": (1, 0, 1),
                "nanmedian": (1, 0, 1)}
# Samples run per pass (a few OpInfos generate hundreds of near-duplicate ones): forward-only
# passes, the float64 pass with gradients, and the non-contiguous pass (spread evenly).
MAX_SAMPLES = {"forward": 64, "gradient": 32, "noncontiguous": 16}


@functools.lru_cache(maxsize=None)
def op_db():
    """torch's OpInfo list (imported on first use: the import takes a few seconds)."""
    from torch.testing._internal.common_methods_invocations import op_db as db
    return tuple(db)


def entry_id(op):
    """``name`` or ``name.variant``: the key used by excluded.yaml and known_failures.yaml."""
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def area(name):
    """The namespace an entry belongs to, for the per-area coverage table."""
    for prefix in ("nn.functional", "linalg", "fft", "special", "signal", "masked", "sparse"):
        if name.startswith(prefix + "."):
            return prefix
    if name.startswith(("torch.", "jiterator")) or (name.startswith("_")
                                                     and not name.startswith("__")):
        return "private/cuda"
    return "torch / Tensor"


def _load_list(filename):
    with open(os.path.join(HERE, filename)) as f:
        text = f.read()
    data = yaml.safe_load(text) or {}
    keys = [line.split(":", 1)[0] for line in text.splitlines() if line and line[0] not in "# "]
    doubled = sorted({k for k in keys if keys.count(k) > 1})
    if doubled:
        raise ValueError(f"{filename}: entries listed twice: {doubled}")
    if not isinstance(data, dict) or not all(isinstance(v, str) and v for v in data.values()):
        raise ValueError(f"{filename}: expected a mapping 'entry: reason' with a reason for each")
    return data


@functools.lru_cache(maxsize=None)
def excluded():
    """Entries ember deliberately does not provide: {entry id: reason}."""
    return _load_list("excluded.yaml")


@functools.lru_cache(maxsize=None)
def known_failures():
    """Resolved entries that fail today (temporary; each xfail(strict)): {entry id: reason}."""
    return _load_list("known_failures.yaml")


class Resolved:
    """How ember provides an entry: ``kind`` is function, method or attribute; ``where`` reads
    like the ember spelling (``ember.nn.functional.relu``, ``Tensor.view``)."""

    def __init__(self, kind, name, target):
        self.kind, self.name, self.target = kind, name, target
        self.where = f"Tensor.{name}" if kind != "function" else f"ember.{name}"

    def __repr__(self):
        return self.where


def _lookup_function(name):
    obj = ember
    for part in name.split("."):
        try:
            obj = getattr(obj, part)
        except (AttributeError, ImportError):
            return None
    if isinstance(obj, (types.ModuleType, type)) or not callable(obj):
        return None
    return obj


def _lookup_tensor(name, in_place_too):
    for cand in (name, name + "_") if in_place_too else (name,):
        attr = getattr(ember.Tensor, cand, None)
        if attr is None:
            continue
        if isinstance(attr, property):
            return Resolved("attribute", cand, attr)
        if callable(attr):
            return Resolved("method", cand, attr)
    return None


def resolve(op):
    """ember's equivalent of OpInfo ``op`` (a :class:`Resolved`), or None."""
    names = [op.name] + [a.name for a in getattr(op, "aliases", ()) or ()]
    for name in names:
        fn = _lookup_function(name)
        if fn is not None:
            return Resolved("function", name, fn)
    # torch's own wrappers of random ops call the in-place method (``x.cauchy_()``)
    in_place_too = _is_wrapper(op.op) and op.name in SHAPE_ONLY
    for name in names:
        if "." not in name:
            found = _lookup_tensor(name, in_place_too)
            if found is not None:
                return found
    return None


def classify(op):
    """('excluded', reason) | ('unresolved', None) | ('resolved', Resolved)."""
    eid = entry_id(op)
    if eid in excluded():
        return "excluded", excluded()[eid]
    r = resolve(op)
    return ("resolved", r) if r is not None else ("unresolved", None)


# ---------------------------------------------------------------- calling ember


def _transplant(fn):
    """The OpInfo's own Python wrapper (a lambda from torch's test files) with ``torch`` bound
    to ember, so ``lambda x, *a: x.view(*a)`` or ``torch.where(c, x, y)`` run ember's ops."""
    g = dict(fn.__globals__)
    g["torch"] = ember
    new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


def _is_wrapper(fn):
    """True for a Python function written in torch's test files (not a torch operator)."""
    return (isinstance(fn, types.FunctionType)
            and (fn.__module__ or "").startswith("torch.testing"))


def ember_callable(op, resolved):
    """A function called like ``op(input, *args, **kwargs)`` that runs ember."""
    fn = op.op
    if _is_wrapper(fn):
        return _transplant(fn)
    if resolved.kind == "function":
        return resolved.target
    if resolved.kind == "attribute":
        name = resolved.name

        def attribute(x, *args, **kwargs):
            return getattr(x, name)

        return attribute
    name = resolved.name

    def method(x, *args, **kwargs):
        return getattr(x, name)(*args, **kwargs)

    return method


# ---------------------------------------------------------------- torch -> ember


class Unrepresentable(Exception):
    """A sample holds a value ember has no equivalent of (a dtype, a layout, ...)."""


def _ember_dtype(tdtype):
    name = str(tdtype).replace("torch.", "")
    d = getattr(ember, name, None)
    if not isinstance(d, ember.dtype):
        raise Unrepresentable(f"dtype {name}")
    return d


def _noncontiguous(arr):
    """A copy of ``arr`` laid out with every other element of a doubled last dimension."""
    if arr.ndim == 0 or arr.size <= 1:
        return arr.copy()
    buf = np.empty(arr.shape[:-1] + (2 * arr.shape[-1],), arr.dtype)
    view = buf[..., ::2]
    view[...] = arr
    return view


class Converter:
    """Turns torch values into ember values (tensors through NumPy copies), remembering the
    torch/ember pairs of tensors that require grad."""

    def __init__(self, torch, noncontiguous=False):
        self.torch = torch
        self.noncontiguous = noncontiguous
        self.leaves = []  # (torch tensor, ember tensor)
        self._memo = {}

    def __call__(self, v):
        torch = self.torch
        if isinstance(v, torch.Tensor):
            key = id(v)
            if key not in self._memo:
                self._memo[key] = self._tensor(v)
            return self._memo[key]
        if isinstance(v, torch.dtype):
            return _ember_dtype(v)
        if isinstance(v, torch.device):
            return str(v.type)
        if isinstance(v, torch.Size):
            return tuple(v)
        if isinstance(v, (torch.memory_format, torch.layout)):
            name = str(v).replace("torch.", "")
            if not hasattr(ember, name):
                raise Unrepresentable(f"torch.{name}")
            return getattr(ember, name)
        if isinstance(v, torch.Generator):
            raise Unrepresentable("torch.Generator")
        if isinstance(v, torch.nn.Module):
            return self._module(v)
        if callable(v) and not isinstance(v, type) and \
                (getattr(v, "__module__", None) or "").startswith("torch"):
            name = getattr(v, "__name__", "")
            prefix = "nn.functional." if "functional" in v.__module__ else ""
            fn = _lookup_function(prefix + name)
            if fn is None:
                raise Unrepresentable(f"torch.{prefix}{name}")
            return fn
        if isinstance(v, list):
            return [self(x) for x in v]
        if isinstance(v, tuple):
            items = [self(x) for x in v]
            return type(v)(*items) if hasattr(v, "_fields") else tuple(items)
        if isinstance(v, dict):
            return {k: self(x) for k, x in v.items()}
        return v

    def _module(self, m):
        """ember's module of the same class, built from the torch module's attributes."""
        cls = getattr(ember.nn, type(m).__name__, None)
        if cls is None or any(True for _ in m.parameters()):
            raise Unrepresentable(f"torch.nn.{type(m).__name__}")
        params = inspect.signature(cls).parameters
        return cls(**{k: getattr(m, k) for k in params if hasattr(m, k)})

    def _tensor(self, t):
        d = t.detach()
        if d.layout != self.torch.strided:
            raise Unrepresentable(f"layout {d.layout}")
        _ember_dtype(d.dtype)
        arr = d.numpy(force=True)
        arr = _noncontiguous(arr) if self.noncontiguous else arr.copy()
        e = ember.from_numpy(arr)
        if t.requires_grad:
            e.requires_grad_(True)
            self.leaves.append((t, e))
        return e


# ---------------------------------------------------------------- comparing


class Mismatch(Exception):
    """ember's result differs from torch's."""


def flatten(out):
    """Tensors and Python values of a (nested) result, in order."""
    if isinstance(out, (tuple, list)) and not _is_size(out):
        res = []
        for o in out:
            res.extend(flatten(o))
        return res
    return [out]


def _is_size(v):
    return type(v).__name__ == "Size"


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def _selected(torch, inp, idx, dim, keepdim):
    """What indices ``idx`` of a reduction over ``dim`` pick from ``inp``."""
    if inp.dim() == 0:
        return inp.reshape(idx.shape)
    if not keepdim and idx.dim() < inp.dim():
        idx = idx.unsqueeze(dim)
    return torch.gather(inp.detach(), dim, idx)


def _check_tied_indices(op, sample, t_out, e_out, torch):
    """For sort-like ops: ember's indices must select what torch's select (ties may differ).
    Returns the output position it checked, or None."""
    spec = TIED_INDICES.get(op.name)
    if spec is None:
        return None
    pos, dim_at, keep_at = spec
    t_flat, e_flat = flatten(t_out), flatten(e_out)
    if len(t_flat) <= pos or len(e_flat) <= pos or not isinstance(e_flat[pos], ember.Tensor):
        return None
    t_idx, e_idx = t_flat[pos], e_flat[pos]
    if t_idx.dtype != torch.int64 or tuple(e_idx.shape) != tuple(t_idx.shape) \
            or e_idx.dtype.name != "int64":
        return None
    args, kwargs = sample.args, sample.kwargs
    dim = kwargs.get("dim", args[dim_at] if len(args) > dim_at else -1)
    keepdim = kwargs.get("keepdim", args[keep_at] if keep_at is not None and
                         len(args) > keep_at else False)
    if not isinstance(dim, int) or isinstance(dim, bool):
        return None
    inp = sample.input
    got = torch.from_numpy(np.array(e_idx.detach().numpy(), copy=True))
    size = inp.shape[dim] if inp.dim() else 1
    if got.numel() and (got.min() < 0 or got.max() >= size):
        raise Mismatch(f"output[{pos}]: index out of range [0, {size})")
    want = _selected(torch, inp, t_idx, dim, keepdim)
    have = _selected(torch, inp, got, dim, keepdim)
    if not torch.equal(want, have) and not (want.is_floating_point() and torch.allclose(
            want, have, equal_nan=True)):
        raise Mismatch(f"output[{pos}]: ember's indices select other values than torch's")
    return pos


def _sign_normalized(arr, axis):
    if arr.size == 0 or arr.ndim < 2:
        return arr
    pick = np.take_along_axis(arr, np.expand_dims(np.abs(arr).argmax(axis=axis), axis), axis)
    if arr.dtype.kind == "c":   # the phase that makes the largest entry real and positive
        return arr * (np.conj(pick) / np.maximum(np.abs(pick), 1e-300)).astype(arr.dtype)
    return arr * np.where(pick < 0, -1, 1).astype(arr.dtype)


def _unsign(op, t_out, e_out, torch):
    """(torch's, ember's) outputs with SIGN_FREE vectors normalised (as NumPy-backed values)."""
    spec = SIGN_FREE.get(op.name)
    if spec is None:
        return t_out, e_out
    t_flat, e_flat = flatten(t_out), flatten(e_out)
    if len(t_flat) != len(e_flat):
        return t_out, e_out
    t_new, e_new = list(t_flat), list(e_flat)
    for pos, axis in spec.items():
        t, e = t_flat[pos], e_flat[pos]
        if not (isinstance(e, ember.Tensor) and tuple(e.shape) == tuple(t.shape)):
            continue
        ta, ea = t.numpy(force=True), np.asarray(e.detach().numpy())
        if "svd" in op.name:  # full_matrices: vectors past min(m, n) span a null space freely
            k = t_flat[1].shape[-1]
            cut = (Ellipsis, slice(None), slice(0, k)) if axis == -2 else \
                (Ellipsis, slice(0, k), slice(None))
            ta, ea = ta[cut], ea[cut]
        t_new[pos] = torch.from_numpy(_sign_normalized(ta, axis))
        e_new[pos] = ember.from_numpy(_sign_normalized(ea, axis))
    return t_new, e_new


def compare_values(t_out, e_out, torch, what="output", tolerances=TOLERANCES, values=True,
                   skip=None):
    """Raise Mismatch unless ember's (nested) result equals torch's (output ``skip`` is
    checked for shape and dtype only)."""
    t_flat, e_flat = flatten(t_out), flatten(e_out)
    if len(t_flat) != len(e_flat):
        raise Mismatch(f"{what}: torch returns {len(t_flat)} values, ember {len(e_flat)}")
    for k, (t, e) in enumerate(zip(t_flat, e_flat)):
        label = f"{what}[{k}]" if len(t_flat) > 1 else what
        values_k = values and k != skip
        if isinstance(t, torch.Tensor):
            if not isinstance(e, ember.Tensor):
                raise Mismatch(f"{label}: torch returns a tensor, ember a {type(e).__name__}")
            if tuple(t.shape) != tuple(e.shape):
                raise Mismatch(f"{label}: shape {tuple(e.shape)}, torch {tuple(t.shape)}")
            if _dtype_name(t) != e.dtype.name:
                raise Mismatch(f"{label}: dtype {e.dtype.name}, torch {_dtype_name(t)}")
            if values_k:
                if t.dtype == torch.bfloat16:   # NumPy has no bfloat16: compare the values
                    t, e = t.float(), e.float()
                _close(t.numpy(force=True),
                       np.asarray(e.detach().numpy()), _dtype_name(t), label, tolerances)
        elif _is_size(t):
            if tuple(t) != tuple(e):
                raise Mismatch(f"{label}: {tuple(e)}, torch {tuple(t)}")
        elif isinstance(t, (bool, int, float, complex)) or t is None:
            if isinstance(e, ember.Tensor) or type(e) is not type(t) and not (
                    isinstance(t, (int, float)) and isinstance(e, (int, float))
                    and not isinstance(e, bool) and not isinstance(t, bool)):
                raise Mismatch(f"{label}: torch returns {type(t).__name__} {t!r}, "
                               f"ember {type(e).__name__}")
            if values_k and t is not None and not (
                    t == e or (isinstance(t, float) and math.isnan(t) and math.isnan(e))
                    or math.isclose(t, e, rel_tol=1e-6, abs_tol=1e-7)):
                raise Mismatch(f"{label}: {e!r}, torch {t!r}")
        elif values_k and t != e:
            raise Mismatch(f"{label}: {e!r}, torch {t!r}")


def differ(want, got, rtol, atol, label, names=("ember", "torch")):
    """None when ``got`` matches ``want`` (floats within rtol and atol times want's largest
    finite magnitude, at least 1, NaN equal to NaN; others exactly), else a message naming the
    first element that differs (``names``: got's and want's)."""
    if want.dtype.kind in "fc":
        # absolute error scales with the output's magnitude (sums of many large products)
        finite = np.abs(want[np.isfinite(want)])
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        ok = np.isclose(got, want, rtol=rtol, atol=atol * scale, equal_nan=True)
    else:
        ok = got == want
    if np.all(ok):
        return None
    bad = np.argwhere(~np.asarray(ok))
    idx = tuple(bad[0]) if want.ndim else ()
    return (f"{label}: {bad.shape[0]} of {want.size} values differ, e.g. at {list(idx)} "
            f"{names[0]} {got[idx]!r}, {names[1]} {want[idx]!r}")


def _close(want, got, dtype, label, tolerances):
    msg = differ(want, got, *tolerances.get(dtype, (1e-7, 1e-7)), label)
    if msg is not None:
        raise Mismatch(msg)


# ---------------------------------------------------------------- running


class Result:
    """What happened to one entry: ``failures`` (first few messages), counts of samples."""

    def __init__(self):
        self.failures = []
        self.ran = 0
        self.skipped = 0
        self.grads = 0

    def fail(self, msg):
        self.failures.append(msg)


def _describe(sample, dtype, noncontiguous):
    shape = getattr(sample.input, "shape", None)
    desc = f"{dtype}{' non-contiguous' if noncontiguous else ''}"
    return f"{desc} input {tuple(shape) if shape is not None else type(sample.input).__name__}" \
           f" args={_short(sample.args)} kwargs={_short(sample.kwargs)}"


def _short(v):
    text = repr(v) if not hasattr(v, "shape") else f"tensor{tuple(v.shape)}"
    if isinstance(v, (tuple, list)):
        text = "(" + ", ".join(_short(x) for x in v) + ")"
    elif isinstance(v, dict):
        text = "{" + ", ".join(f"{k}: {_short(x)}" for k, x in v.items()) + "}"
    return text if len(text) < 120 else text[:117] + "..."


def _random_sample(op, sample):
    """Attention samples with dropout draw random numbers: compare shapes only."""
    if op.name == "nn.functional.scaled_dot_product_attention":
        return sample.kwargs.get("dropout_p", 0.0) > 0
    if op.name == "nn.functional.multi_head_attention_forward":
        p = sample.args[9] if len(sample.args) > 9 else sample.kwargs.get("dropout_p", 0.0)
        return p > 0 and sample.kwargs.get("training", True)
    return False


def _as_ember(fn):
    return _transplant(fn) if _is_wrapper(fn) else fn


def _gradient_outputs(op, call, sample, ember_sample, t_out, e_out):
    """The outputs to differentiate, as torch's own gradient tests choose them: through the
    OpInfo's gradcheck_wrapper where it has one (e.g. symmetrising the input of eigh), then
    its ``output_process_fn_grad`` (e.g. ``U.abs()`` of an SVD, whose signs are arbitrary)."""
    wrapper = op.gradcheck_wrapper
    if getattr(wrapper, "__name__", "<lambda>") != "<lambda>":
        e_in, e_args, e_kwargs = ember_sample
        t_out = wrapper(op, sample.input, *sample.args, **sample.kwargs)
        try:
            e_out = _as_ember(wrapper)(call, e_in, *e_args, **e_kwargs)
        except Exception as exc:  # noqa: BLE001
            raise Mismatch(f"ember raised {type(exc).__name__} under the OpInfo's "
                           f"gradcheck_wrapper: {str(exc)[:300]}") from None
    process = sample.output_process_fn_grad
    t_out = process(t_out)
    try:
        e_out = _as_ember(process)(e_out)
    except Exception as exc:  # noqa: BLE001
        raise Mismatch(f"ember raised {type(exc).__name__} in the OpInfo's "
                       f"output_process_fn_grad: {str(exc)[:300]}") from None
    return t_out, e_out


def _run_sample(op, call, sample, dtype, torch, noncontiguous, with_grad, shape_only, result):
    shape_only = shape_only or _random_sample(op, sample)
    torch.default_generator.manual_seed(0)
    ember.manual_seed(0)  # ember's random ops draw the same numbers on every run
    try:
        t_out = op(sample.input, *sample.args, **sample.kwargs)
    except Exception:  # noqa: BLE001 - a sample torch itself rejects says nothing about ember
        result.skipped += 1
        return
    conv = Converter(torch, noncontiguous)
    try:
        e_in, e_args, e_kwargs = conv(sample.input), conv(sample.args), conv(sample.kwargs)
    except Unrepresentable as exc:
        if str(exc).startswith("dtype") or str(exc).startswith("layout"):
            result.skipped += 1
            return
        raise Mismatch(f"ember has no {exc}") from None
    result.ran += 1
    try:
        e_out = call(e_in, *e_args, **e_kwargs)
    except Exception as exc:  # noqa: BLE001 - reported as the entry's failure
        raise Mismatch(f"ember raised {type(exc).__name__}: {str(exc)[:300]}") from None
    tied = None if shape_only else _check_tied_indices(op, sample, t_out, e_out, torch)
    compare_values(*_unsign(op, t_out, e_out, torch), torch, values=not shape_only, skip=tied)
    if not with_grad or shape_only:
        return
    t_out, e_out = _gradient_outputs(op, call, sample, (e_in, e_args, e_kwargs), t_out, e_out)
    t_flat, e_flat = flatten(t_out), flatten(e_out)
    pairs = [(t, e) for t, e in zip(t_flat, e_flat)
             if isinstance(t, torch.Tensor) and t.requires_grad and (
                 t.dtype.is_floating_point or t.dtype.is_complex)]
    leaves = conv.leaves
    if not pairs or not leaves:
        return
    rng = np.random.default_rng(0)
    gos = [rng.standard_normal(tuple(t.shape)) + (
        1j * rng.standard_normal(tuple(t.shape)) if t.dtype.is_complex else 0)
        for t, _ in pairs]
    try:
        t_grads = torch.autograd.grad([t for t, _ in pairs], [t for t, _ in leaves],
                                      [torch.from_numpy(g).to(t.dtype) for g, (t, _) in
                                       zip(gos, pairs)], allow_unused=True)
    except Exception:  # noqa: BLE001 - torch cannot differentiate this sample
        return
    for k, (_, e) in enumerate(pairs):
        if not (isinstance(e, ember.Tensor) and e.requires_grad):
            raise Mismatch(f"output[{k}] does not require grad in ember (torch differentiates it)")
    try:
        e_grads = ember.autograd.grad(
            [e for _, e in pairs], [e for _, e in leaves],
            [ember.tensor(g, dtype=e.dtype) for g, (_, e) in zip(gos, pairs)],
            allow_unused=True)
    except Exception as exc:  # noqa: BLE001
        raise Mismatch(f"ember backward raised {type(exc).__name__}: {str(exc)[:300]}") from None
    result.grads += 1
    for k, (tg, eg) in enumerate(zip(t_grads, e_grads)):
        label = f"grad of input {k}"
        if tg is None or eg is None:
            other = eg if tg is None else tg
            arr = np.zeros(1) if other is None else (
                np.asarray(other.detach().numpy()) if isinstance(other, ember.Tensor)
                else other.numpy(force=True))
            if np.any(arr != 0):
                side = "ember" if tg is not None else "torch"
                raise Mismatch(f"{label}: {side} gives no gradient, the other a nonzero one")
            continue
        compare_values(tg, eg, torch, what=label, tolerances=GRAD_TOLERANCES)


def takes_complex(op):
    """Whether ember takes complex tensors for this entry (``ember.fft`` and the ops listed in
    ember/autograd/complex_support.py): only those run their complex64/complex128 samples."""
    from ember.autograd.complex_support import FORWARD
    base = op.name.split(".")[0]
    return op.name.startswith("fft.") or (base in FORWARD and base == op.name) or \
        op.name in COMPLEX_ENTRIES


# entries that, as in torch, refuse an input whose last dim is not contiguous (torch's own
# samples are contiguous; the non-contiguous pass would hand ember what torch never sees)
CONTIGUOUS_ONLY = {"view_as_complex",
                   # as_strided reads the storage: a non-contiguous copy with the same values
                   # lays them out differently, so the same sizes and strides read others
                   "as_strided", "as_strided_copy"}
# op_db entries beyond the spec-op names of complex_support.FORWARD that take complex inputs
COMPLEX_ENTRIES = {"view_as_real", "view_as_complex", "polar", "complex", "imag", "real",
                   "conj", "conj_physical", "resolve_conj", "resolve_neg", "angle", "abs",
                   "stft", "istft",
                   "nn.functional.silu"}


def run_entry(op, resolved, torch):
    """Run every sample of ``op`` through torch and ember; a :class:`Result`."""
    result = Result()
    call = ember_callable(op, resolved)
    shape_only = op.name in SHAPE_ONLY
    supported = {str(d).replace("torch.", "") for d in op.supported_dtypes("cpu")}
    backward_ok = {str(d).replace("torch.", "") for d in op.supported_backward_dtypes("cpu")}
    dtypes = [d for d in DTYPES if d in supported and isinstance(getattr(ember, d, None),
                                                                 ember.dtype)
              and (not d.startswith("complex") or takes_complex(op))]
    if not dtypes:
        result.fail(f"no dtype of {sorted(supported)} exists in ember")
        return result
    plan = [(d, False) for d in dtypes]
    # non-contiguous inputs: in float64 where available (with gradients), else the first dtype
    if op.name not in CONTIGUOUS_ONLY:
        plan.append(("float64" if "float64" in dtypes else dtypes[0], True))
    for dtype_name, noncontiguous in plan:
        tdtype = getattr(torch, dtype_name)
        with_grad = (op.supports_autograd and dtype_name in ("float64", "complex128")
                     and dtype_name in backward_ok)
        # The OpInfo's generator itself: op.sample_inputs wraps it in an iterator that calls
        # inspect.stack() and torch.manual_seed (which records a stack trace for lazy CUDA
        # seeding) per sample, costing more than most samples under pytest's deep stacks.
        torch.default_generator.manual_seed(0)
        try:
            samples = list(op.sample_inputs_func(op, "cpu", tdtype, with_grad))
        except Exception as exc:  # noqa: BLE001 - torch's own generator failing is not ember's
            result.skipped += 1
            continue
        if noncontiguous:
            step = -(-len(samples) // MAX_SAMPLES["noncontiguous"])
            samples = samples[::step]
        else:
            samples = samples[:MAX_SAMPLES["gradient" if with_grad else "forward"]]
        for sample in samples:
            try:
                _run_sample(op, call, sample, dtype_name, torch, noncontiguous, with_grad,
                            shape_only, result)
            except Mismatch as exc:
                result.fail(f"{exc} [{_describe(sample, dtype_name, noncontiguous)}]")
                if len(result.failures) >= 3:
                    return result
    if result.ran == 0 and not result.failures:
        result.fail("no sample could be expressed in ember (all dtypes/layouts unrepresentable)")
    return result
