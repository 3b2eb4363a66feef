"""Every public function, handed a bad argument, raises ember's own error naming the function.

The sweep enumerates the public API (``ember.*`` functions, ``ember.Tensor`` methods and
operators, ``ember.nn.functional.*``), builds a plausible call for each from its signature and
replaces one argument at a time by a bad value (a str, None, a list, a dict, a bool / int / 0-d /
5-d / empty tensor, a huge, a negative or a NaN number, ...). Whatever a call raises must be an
``ember.EmberError`` (which also subclasses the builtin torch raises, e.g. RuntimeError) whose
message names the function (or the op it is an alias of): never a raw NumPy, Numba, KeyError or
AttributeError from inside ember. Calls that succeed are fine: many bad-looking values are valid.
"""
import inspect
import math
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.errors import EmberError

# global state: changing it would leak into other tests (checked by hand in test_errors.py)
_GLOBAL_STATE = {"manual_seed", "seed", "set_default_dtype", "set_memory_reuse", "set_num_threads",
                 "set_rng_state", "get_rng_state", "initial_seed", "get_num_threads",
                 "get_memory_reuse", "get_default_dtype", "is_grad_enabled",
                 "is_inference_mode_enabled", "from_dlpack"}
# Tensor attributes that are Python protocol plumbing, not user-facing ops
_PLUMBING = {"__init__", "__repr__", "__format__", "__deepcopy__", "__reduce_ex__", "__hash__",
             "__dlpack__", "__dlpack_device__", "__array__"}
# the op name a message may carry instead of the alias the user called
_ALIASES = {
    "clip": "clamp", "clip_": "clamp", "absolute": "abs", "arctan2": "atan2", "greater": "gt",
    "less": "lt", "multiply": "mul", "divide": "div", "subtract": "sub", "truediv": "div",
    "floordiv": "div", "mod": "remainder", "and": "bitwise_and", "or": "bitwise_or",
    "xor": "bitwise_xor", "invert": "bitwise_not", "getitem": "index", "setitem": "index",
    "square": "mul", "len": "len", "bool": "Boolean value", "iter": "iteration",
    "contains": "eq", "T": "permute", "mT": "transpose", "relu6": "hardtanh",
}


def _t():
    return ember.ones(2, 3)


def _bad_values():
    return [("str", "x"), ("None", None), ("list", [1.0, 2.0]), ("dict", {}),
            ("bool tensor", ember.ones(2, 3, dtype=ember.bool)),
            ("int tensor", ember.ones(2, 3, dtype=ember.int64)),
            ("0-d tensor", ember.tensor(1.5)), ("5-d tensor", ember.ones(1, 1, 1, 2, 3)),
            ("empty tensor", ember.ones(0, 3)), ("huge int", 2 ** 70), ("negative int", -7),
            ("nan", math.nan), ("inf", math.inf), ("float", 2.5), ("tuple", (1, -1))]


# a plausible value for a required parameter, by name (a 2x3 float tensor otherwise)
_DEFAULTS = {
    "dim": 0, "dim0": 0, "dim1": 1, "start_dim": 0, "size": (2, 3), "shape": (2, 3), "dims": (0,),
    "n": 2, "steps": 3, "num_samples": 1, "chunks": 1, "split_size_or_sections": 1, "k": 1,
    "kernel_size": 1, "num_classes": 3, "upscale_factor": 1, "downscale_factor": 1,
    "output_size": 1, "repeats": (1, 1), "num_groups": 1, "groups": 1, "equation": "ij->ji",
    "fill_value": 1.0, "value": 1.0, "start": 0, "end": 3, "low": 0, "high": 3, "p": 0.5,
    "scale_factor": 1, "normalized_shape": (3,), "pad": (1, 1), "sizes": (3,), "exponent": 2.0,
    "index": lambda: ember.zeros(2, 3, dtype=ember.int64),
    "indices": lambda: (ember.tensor([0]),),
    "mask": lambda: ember.ones(2, 3, dtype=ember.bool),
    "condition": lambda: ember.ones(2, 3, dtype=ember.bool),
    "tensors": lambda: [_t(), _t()], "data": lambda: [1.0, 2.0], "obj": lambda: _t(),
}


def _default(param):
    v = _DEFAULTS.get(param.name, _t)
    return v() if callable(v) else v


def _entries():
    out = []
    for n in sorted(dir(ember)):
        f = getattr(ember, n)
        if n.startswith("_") or n in _GLOBAL_STATE or inspect.isclass(f) or inspect.ismodule(f) \
                or not callable(f):
            continue
        out.append((f"ember.{n}", n, f, False))
    for n in F.__all__:
        out.append((f"F.{n}", n, getattr(F, n), False))
    for n in sorted(vars(ember.Tensor)):
        f = getattr(ember.Tensor, n)
        if n in _PLUMBING or inspect.isclass(f) or isinstance(inspect.getattr_static(
                ember.Tensor, n), property):
            continue
        if callable(f) and (not n.startswith("_") or n.startswith("__") and n.endswith("__")):
            out.append((f"Tensor.{n}", n, f, True))
    return out


def _names(name):
    """The names a message for public function ``name`` may carry."""
    base = name.strip("_")
    names = {name, base, base.rstrip("_")}
    if name.startswith("__") and base[:1] in "ri" and base[1:] in (
            "add", "sub", "mul", "truediv", "pow", "and", "or", "xor", "matmul"):
        names.add(base[1:])
    for n in list(names):
        if n in _ALIASES:
            names.add(_ALIASES[n])
    return names


def _calls(name, fn, method):
    """(description, thunk) for each bad-argument call of ``fn``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
           and p.default is p.empty]
    kw = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
          and p.default is not p.empty]
    var = any(p.kind == p.VAR_POSITIONAL for p in params)
    slots = [("pos", i) for i in range(1 if method else 0, len(pos))] + [("kw", p.name) for p in kw]
    if var:
        slots.append(("var", None))
    calls = []
    for slot in slots:
        for bad_name, _ in _bad_values():
            def thunk(slot=slot, bad_name=bad_name):
                bad = dict(_bad_values())[bad_name]
                args = [_default(p) for p in pos]
                if method:
                    args[:1] = [_t()]
                kwargs = {}
                if slot[0] == "pos":
                    args[slot[1]] = bad
                elif slot[0] == "kw":
                    kwargs[slot[1]] = bad
                else:
                    args.append(bad)
                if method:
                    return getattr(args[0], name)(*args[1:], **kwargs)
                return fn(*args, **kwargs)
            what = slot[1] if slot[0] != "var" else "*args"
            calls.append((f"{what}={bad_name}", thunk))
    return calls


# entries whose bad-input errors are not yet ember's (qualified name -> reason); keep it short
XFAIL = {}

_ENTRIES = _entries()


@pytest.mark.parametrize("qual, name, fn, method", _ENTRIES, ids=[e[0] for e in _ENTRIES])
def test_bad_inputs_raise_ember_errors_naming_the_function(qual, name, fn, method):
    if qual in XFAIL:
        pytest.xfail(XFAIL[qual])
    names = _names(name)
    wrong = []
    for what, thunk in _calls(name, fn, method):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                thunk()
        except EmberError as e:
            if not any(n in str(e) for n in names):
                wrong.append(f"{what}: message does not name {name}: {type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - the point of the test
            wrong.append(f"{what}: raw {type(e).__module__}.{type(e).__name__}: {e}")
    assert not wrong, f"{qual}:\n  " + "\n  ".join(w[:300] for w in wrong)


def test_the_sweep_covers_the_public_api():
    quals = {e[0] for e in _ENTRIES}
    assert len(quals) > 450
    for q in ("ember.add", "ember.tensor", "F.conv2d", "F.cross_entropy", "Tensor.view",
              "Tensor.__add__", "Tensor.__getitem__", "Tensor.backward", "Tensor.to"):
        assert q in quals
    assert sum(len(_calls(e[1], e[2], e[3])) for e in _ENTRIES) > 10000


def test_error_classes_subclass_the_builtins_torch_raises():
    from ember import errors
    for cls, builtin in ((errors.EmberRuntimeError, RuntimeError),
                         (errors.EmberTypeError, TypeError), (errors.EmberValueError, ValueError),
                         (errors.EmberIndexError, IndexError),
                         (errors.EmberOverflowError, OverflowError),
                         (errors.UnsupportedError, NotImplementedError)):
        assert issubclass(cls, EmberError) and issubclass(cls, builtin)
    with pytest.raises(TypeError):
        ember.add(ember.ones(2), "x")
    with pytest.raises(IndexError):
        ember.ones(3)[7]
