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

# process-wide state: set_*/get_* pairs are swept by test_setters_reject_bad_values (which
# restores the state); these others would leak into other tests
_GLOBAL_STATE = {"manual_seed", "seed", "initial_seed", "is_grad_enabled",
                 "is_inference_mode_enabled"}


def _stateful(name):
    return name in _GLOBAL_STATE or name.startswith(("set_", "get_"))
# Tensor attributes that are Python protocol plumbing, not user-facing ops
_PLUMBING = {"__init__", "__repr__", "__format__", "__deepcopy__", "__reduce_ex__", "__hash__",
             "__dlpack__", "__dlpack_device__", "__array__", "__array_ufunc__",
             "__array_wrap__"}
# the op name a message may carry instead of the alias the user called
_ALIASES = {
    "clip": "clamp", "clip_": "clamp", "absolute": "abs", "arctan2": "atan2", "greater": "gt",
    "less": "lt", "multiply": "mul", "divide": "div", "subtract": "sub", "truediv": "div",
    "floordiv": "div", "mod": "remainder", "and": "bitwise_and", "or": "bitwise_or",
    "xor": "bitwise_xor", "invert": "bitwise_not", "getitem": "index", "setitem": "index",
    "square": "mul", "len": "len", "bool": "Boolean value", "iter": "iteration",
    "contains": "eq", "T": "permute", "mT": "transpose", "relu6": "hardtanh",
    "not_equal": "ne", "greater_equal": "ge", "less_equal": "le",
    "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift",
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
    "parameters": lambda: [ember.ones(2, 3, requires_grad=True)], "max_norm": 1.0, "val": 1.0,
    "sparsity": 0.5, "clip_value": 1.0, "vec": lambda: ember.ones(6),
    "nonlinearity": "relu",
}


def _default(param):
    v = _DEFAULTS.get(param.name, _t)
    return v() if callable(v) else v


def _i64(*v):
    return ember.tensor(list(v))


# a call that succeeds, for functions whose inputs need particular shapes: the sweep then
# replaces each argument of a *valid* call, so it reaches the checks past the first one (keyed
# by name, or by qualified name where two entries share a name)
_GOOD = {
    "conv2d": lambda: ([ember.ones(1, 2, 5, 5), ember.ones(3, 2, 3, 3)], {}),
    "conv1d": lambda: ([ember.ones(1, 2, 5), ember.ones(3, 2, 3)], {}),
    "conv_transpose2d": lambda: ([ember.ones(1, 2, 5, 5), ember.ones(2, 3, 3, 3)], {}),
    "conv_transpose1d": lambda: ([ember.ones(1, 2, 5), ember.ones(2, 3, 3)], {}),
    "max_pool2d": lambda: ([ember.ones(1, 2, 4, 4), 2], {}),
    "max_pool2d_with_indices": lambda: ([ember.ones(1, 2, 4, 4), 2], {}),
    "avg_pool2d": lambda: ([ember.ones(1, 2, 4, 4), 2], {}),
    "lp_pool2d": lambda: ([ember.ones(1, 2, 4, 4), 2.0, 2], {}),
    "adaptive_avg_pool2d": lambda: ([ember.ones(1, 2, 4, 4), 2], {}),
    "adaptive_max_pool2d": lambda: ([ember.ones(1, 2, 4, 4), 2], {}),
    "max_pool1d": lambda: ([ember.ones(1, 2, 4), 2], {}),
    "avg_pool1d": lambda: ([ember.ones(1, 2, 4), 2], {}),
    "adaptive_avg_pool1d": lambda: ([ember.ones(1, 2, 4), 2], {}),
    "adaptive_max_pool1d": lambda: ([ember.ones(1, 2, 4), 2], {}),
    "batch_norm": lambda: ([ember.ones(2, 3, 4), ember.zeros(3), ember.ones(3)], {}),
    "instance_norm": lambda: ([ember.ones(2, 3, 4)], {}),
    # torch's top-level forms (ember/nn/toplevel.py): torch's argument order, not F's
    "ember.batch_norm": lambda: ([ember.ones(2, 3, 4), ember.ones(3), ember.zeros(3),
                                 ember.zeros(3), ember.ones(3), True, 0.1, 1e-5, False], {}),
    "ember.instance_norm": lambda: ([ember.ones(2, 3, 4), None, None, None, None, True, 0.1,
                                    1e-5, False], {}),
    "ember.embedding": lambda: ([ember.ones(3, 4), _i64(0, 1)], {}),
    "layer_norm": lambda: ([_t(), (3,)], {}),
    "rms_norm": lambda: ([_t(), (3,)], {}),
    "group_norm": lambda: ([ember.ones(2, 4, 3), 2], {}),
    "local_response_norm": lambda: ([ember.ones(1, 4, 3, 3), 2], {}),
    "embedding": lambda: ([_i64(0, 1), ember.ones(3, 4)], {}),
    "embedding_bag": lambda: ([_i64(0, 1).unsqueeze(0), ember.ones(3, 4)], {}),
    "bilinear": lambda: ([_t(), ember.ones(2, 4), ember.ones(5, 3, 4)], {}),
    "one_hot": lambda: ([_i64(0, 2), 3], {}),
    "prelu": lambda: ([_t(), ember.ones(3)], {}),
    "glu": lambda: ([ember.ones(2, 4)], {}),
    "pixel_shuffle": lambda: ([ember.ones(1, 4, 2, 2), 2], {}),
    "pixel_unshuffle": lambda: ([ember.ones(1, 1, 4, 4), 2], {}),
    "interpolate": lambda: ([ember.ones(1, 1, 4, 4)], {"scale_factor": 2}),
    "upsample": lambda: ([ember.ones(1, 1, 4, 4)], {"scale_factor": 2}),
    "upsample_nearest": lambda: ([ember.ones(1, 1, 4, 4)], {"scale_factor": 2}),
    "upsample_bilinear": lambda: ([ember.ones(1, 1, 4, 4)], {"scale_factor": 2}),
    "F.unfold": lambda: ([ember.ones(1, 2, 4, 4), 2], {}),
    "cross_entropy": lambda: ([_t(), _i64(0, 2)], {}),
    "nll_loss": lambda: ([_t(), _i64(0, 2)], {}),
    "multi_margin_loss": lambda: ([_t(), _i64(0, 2)], {}),
    "binary_cross_entropy": lambda: ([ember.full((2, 3), 0.5), ember.ones(2, 3)], {}),
    "margin_ranking_loss": lambda: ([ember.ones(3), ember.ones(3), ember.ones(3)], {}),
    "cosine_embedding_loss": lambda: ([_t(), _t(), ember.tensor([1.0, -1.0])], {}),
    "triplet_margin_loss": lambda: ([_t(), _t(), _t()], {}),
    "gaussian_nll_loss": lambda: ([_t(), _t(), _t()], {}),
    "scaled_dot_product_attention": lambda: ([ember.ones(1, 2, 3)] * 3, {}),
    "mm": lambda: ([_t(), ember.ones(3, 2)], {}),
    "matmul": lambda: ([_t(), ember.ones(3, 2)], {}),
    "bmm": lambda: ([ember.ones(1, 2, 3), ember.ones(1, 3, 2)], {}),
    "addmm": lambda: ([ember.ones(2, 2), _t(), ember.ones(3, 2)], {}),
    "dot": lambda: ([ember.ones(3), ember.ones(3)], {}),
    "outer": lambda: ([ember.ones(2), ember.ones(3)], {}),
    "gather": lambda: ([_t(), 1, ember.zeros(2, 3, dtype=ember.int64)], {}),
    "scatter": lambda: ([_t(), 1, ember.zeros(2, 3, dtype=ember.int64), _t()], {}),
    "scatter_add": lambda: ([_t(), 1, ember.zeros(2, 3, dtype=ember.int64), _t()], {}),
    "index_select": lambda: ([_t(), 0, _i64(0)], {}),
    "index_add": lambda: ([_t(), 0, _i64(0), ember.ones(1, 3)], {}),
    "masked_fill": lambda: ([_t(), ember.ones(2, 3, dtype=ember.bool), 1.0], {}),
    "where": lambda: ([ember.ones(2, 3, dtype=ember.bool), _t(), _t()], {}),
    "Tensor.where": lambda: ([_t(), ember.ones(2, 3, dtype=ember.bool), _t()], {}),
    "narrow": lambda: ([_t(), 0, 0, 1], {}),
    "unflatten": lambda: ([_t(), 1, (3, 1)], {}),
    "multinomial": lambda: ([_t(), 1], {}),
    "einsum": lambda: (["ij->ji", _t()], {}),
}


def _entries():
    out = []
    for n in sorted(dir(ember)):
        f = getattr(ember, n)
        if n.startswith("_") or _stateful(n) or inspect.isclass(f) or inspect.ismodule(f) \
                or not callable(f):
            continue
        out.append((f"ember.{n}", n, f, False))
    for n in F.__all__:
        out.append((f"F.{n}", n, getattr(F, n), False))
    for n in sorted(dir(ember.nn.init)):
        f = getattr(ember.nn.init, n)
        if not n.startswith("_") and inspect.isfunction(f) and f.__module__ == "ember.nn.init":
            out.append((f"init.{n}", n, f, False))
    for n in ember.nn.utils.__all__:
        if n != "rnn":
            out.append((f"nn.utils.{n}", n, getattr(ember.nn.utils, n), False))
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
            "add", "sub", "mul", "truediv", "pow", "and", "or", "xor", "matmul", "lshift", "rshift"):
        names.add(base[1:])
    for n in list(names):
        if n in _ALIASES:
            names.add(_ALIASES[n])
    return names


def _good(qual, name):
    return _GOOD.get(qual) or _GOOD.get(name.strip("_"))


def _calls(name, fn, method, qual=""):
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
    good = _good(qual, name)
    n_pos = len(good()[0]) if good else len(pos)
    slots = [("pos", i) for i in range(1 if method else 0, n_pos)] + [("kw", p.name) for p in kw]
    if var and not good:
        slots.append(("var", None))
    calls = []
    for slot in slots:
        for bad_name, _ in _bad_values():
            def thunk(slot=slot, bad_name=bad_name):
                bad = dict(_bad_values())[bad_name]
                if good:
                    args, kwargs = good()
                else:
                    args, kwargs = [_default(p) for p in pos], {}
                    if method:
                        args[:1] = [_t()]
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
    for what, thunk in _calls(name, fn, method, qual):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                thunk()
        except EmberError as e:
            msg = str(e)
            if not any(n in msg for n in names):
                wrong.append(f"{what}: message does not name {name}: {type(e).__name__}: {e}")
            head = msg.split(":")[0]
            if head and msg.startswith(f"{head}: {head}:"):
                wrong.append(f"{what}: message names {head} twice: {msg}")
        except Exception as e:  # noqa: BLE001 - the point of the test
            wrong.append(f"{what}: raw {type(e).__module__}.{type(e).__name__}: {e}")
    assert not wrong, f"{qual}:\n  " + "\n  ".join(w[:300] for w in wrong)


@pytest.mark.parametrize("name", sorted(_GOOD))
def test_good_calls_succeed(name):
    """The valid calls the sweep starts from are valid, for every entry of that name."""
    found = [e for e in _ENTRIES if e[0] == name or e[1] == name and e[0] not in _GOOD]
    assert found, name
    for qual, short, fn, method in found:
        args, kwargs = _GOOD[name]()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if method:
                getattr(args[0], short)(*args[1:], **kwargs)
            else:
                fn(*args, **kwargs)


def _setters():
    """``set_X`` functions of one value whose ``get_X`` takes no argument (not
    ``set_autocast_dtype(device_type, dtype)``, whose getter takes the device, as torch's)."""
    import inspect

    def plain_getter(n):
        getter = getattr(ember, "get_" + n[4:], None)
        return getter is not None and all(
            p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            for p in inspect.signature(getter).parameters.values())
    return sorted(n for n in dir(ember) if n.startswith("set_") and plain_getter(n))


@pytest.mark.parametrize("name", _setters())
def test_setters_reject_bad_values(name):
    """Each ``ember.set_X`` refuses values of the wrong type with an ember error naming it (the
    process-wide state is restored whatever the call did)."""
    setter, getter = getattr(ember, name), getattr(ember, "get_" + name[4:])
    wrong = []
    for bad_name, bad in _bad_values():
        saved = getter()
        try:
            setter(bad)
        except EmberError as e:
            if name not in str(e):
                wrong.append(f"{bad_name}: message does not name {name}: {e}")
        except Exception as e:  # noqa: BLE001 - the point of the test
            wrong.append(f"{bad_name}: raw {type(e).__module__}.{type(e).__name__}: {e}")
        finally:
            setter(saved)
        now = getter()      # get_rng_state is a tensor (torch's ByteTensor)
        assert ember.equal(now, saved) if isinstance(saved, ember.Tensor) else now == saved
    assert not wrong, f"{name}:\n  " + "\n  ".join(w[:300] for w in wrong)


def test_the_sweep_covers_the_public_api():
    quals = {e[0] for e in _ENTRIES}
    assert len(quals) > 450
    assert {"set_num_threads", "set_default_dtype", "set_memory_reuse"} <= set(_setters())
    for q in ("ember.add", "ember.tensor", "F.conv2d", "F.cross_entropy", "Tensor.view",
              "Tensor.__add__", "Tensor.__getitem__", "Tensor.backward", "Tensor.to"):
        assert q in quals
    assert sum(len(_calls(e[1], e[2], e[3], e[0])) for e in _ENTRIES) > 10000


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


# ---------------------------------------------------------------- empty and 0-d tensors vs torch
def _edge_cases():
    """(name, fn(lib, make) -> result): ``lib`` is ember or torch (or their functional module
    via ``lib.nn.functional``), ``make(shape)`` makes a float tensor of that shape."""
    un = ["abs", "neg", "exp", "log", "sqrt", "sigmoid", "tanh", "relu", "floor", "sign",
          "clone", "contiguous", "flatten", "t", "isnan", "logical_not", "square", "reciprocal"]
    cases = [(n, lambda L, m, n=n: getattr(L, n)(m(S))) for n in un]
    cases += [
        ("add", lambda L, m: L.add(m(S), m(S))), ("mul scalar", lambda L, m: L.mul(m(S), 2.0)),
        ("sub broadcast", lambda L, m: L.sub(m(S), m(())) ),
        ("div", lambda L, m: L.div(m(S), m(S))), ("pow", lambda L, m: L.pow(m(S), 2.0)),
        ("maximum", lambda L, m: L.maximum(m(S), m(S))), ("where", lambda L, m: L.where(
            m(S) > 0, m(S), m(S))), ("clamp", lambda L, m: L.clamp(m(S), 0.0, 1.0)),
        ("sum", lambda L, m: L.sum(m(S))), ("sum dim", lambda L, m: L.sum(m(S), -1)),
        ("mean", lambda L, m: L.mean(m(S))), ("prod", lambda L, m: L.prod(m(S))),
        ("amax dim", lambda L, m: L.amax(m(S), -1)), ("amin dim", lambda L, m: L.amin(m(S), 0)), ("argmax", lambda L, m: L.argmax(m(S))),
        ("max", lambda L, m: L.max(m(S))), ("all", lambda L, m: L.all(m(S) > 0)),
        ("any", lambda L, m: L.any(m(S) > 0)), ("logsumexp", lambda L, m: L.logsumexp(m(S), -1)),
        ("norm", lambda L, m: L.norm(m(S))), ("cumsum", lambda L, m: L.cumsum(m(S), -1)),
        ("var", lambda L, m: L.var(m(S))), ("softmax", lambda L, m: L.softmax(m(S), -1)),
        ("log_softmax", lambda L, m: L.log_softmax(m(S), -1)),
        ("reshape", lambda L, m: L.reshape(m(S), (-1,))),
        ("unsqueeze", lambda L, m: L.unsqueeze(m(S), 0)), ("squeeze", lambda L, m: L.squeeze(m(S))),
        ("transpose", lambda L, m: L.transpose(m(S), 0, -1)),
        ("cat", lambda L, m: L.cat([m(S), m(S)])), ("stack", lambda L, m: L.stack([m(S), m(S)])),
        ("flip", lambda L, m: L.flip(m(S), (0,))), ("tril", lambda L, m: L.tril(m(S))),
        ("matmul", lambda L, m: L.matmul(m(S), m(S[::-1]))),
        ("getitem", lambda L, m: m(S)[..., None]), ("item-like", lambda L, m: m(S).tolist()),
        ("F.relu", lambda L, m: L.nn.functional.relu(m(S))),
        ("F.gelu", lambda L, m: L.nn.functional.gelu(m(S))),
        ("F.softplus", lambda L, m: L.nn.functional.softplus(m(S))),
        ("F.mse_loss", lambda L, m: L.nn.functional.mse_loss(m(S), m(S))),
        ("F.l1_loss sum", lambda L, m: L.nn.functional.l1_loss(m(S), m(S), reduction="sum")),
        ("F.linear", lambda L, m: L.nn.functional.linear(m(S), m((4,) + S[-1:]))),
        ("F.layer_norm", lambda L, m: L.nn.functional.layer_norm(m(S), S[-1:])),
        ("F.dropout eval", lambda L, m: L.nn.functional.dropout(m(S), 0.5, False)),
        ("F.normalize", lambda L, m: L.nn.functional.normalize(m(S), dim=-1)),
    ]
    return cases


S = None  # the shape a case runs on; set per test (0-d or empty)


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (2, 0)], ids=str)
def test_empty_and_0d_tensors_behave_as_in_torch(shape):
    """Where torch accepts an empty or 0-d tensor, ember does, with the same shape and values;
    where torch refuses it, ember raises an ember error."""
    torch = pytest.importorskip("torch")
    global S
    S = shape
    rng = np.random.default_rng(0)
    wrong = []
    for name, case in _edge_cases():
        data = {}

        def make_t(sh):
            return torch.tensor(data.setdefault(sh, rng.standard_normal(sh).astype(np.float32)))

        def make_e(sh):
            return ember.tensor(data.setdefault(sh, rng.standard_normal(sh).astype(np.float32)))
        try:
            want = case(torch, make_t)
        except Exception:  # noqa: BLE001 - torch refuses: ember must refuse with its own error
            want = None
        try:
            got = case(ember, make_e)
        except EmberError as e:
            if want is not None:
                wrong.append(f"{name}: torch accepts {shape}, ember raised {e}")
            continue
        except Exception as e:  # noqa: BLE001
            wrong.append(f"{name}: raw {type(e).__name__}: {e}")
            continue
        if want is None:
            continue  # ember accepts what torch refuses: fine where the result is well defined
        w = want.detach().numpy() if hasattr(want, "detach") else np.asarray(want)
        g = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
        if w.shape != g.shape or not np.allclose(w, g, rtol=1e-5, atol=1e-6, equal_nan=True):
            wrong.append(f"{name}: torch gives {w.shape} {w.ravel()[:4]}, ember {g.shape} "
                         f"{g.ravel()[:4]}")
    assert not wrong, "\n".join(wrong)


# ---------------------------------------------------------------- nn layers
_LAYER_ARGS = {
    "Linear": (3, 4), "Bilinear": (3, 3, 2), "LazyLinear": (4,), "Conv1d": (2, 3, 3),
    "Conv2d": (2, 3, 3), "ConvTranspose1d": (2, 3, 3), "ConvTranspose2d": (2, 3, 3),
    "BatchNorm1d": (3,), "BatchNorm2d": (3,), "BatchNorm3d": (3,), "InstanceNorm1d": (3,),
    "InstanceNorm2d": (3,), "LayerNorm": (3,), "RMSNorm": (3,), "GroupNorm": (1, 3),
    "LocalResponseNorm": (2,), "Embedding": (5, 3), "EmbeddingBag": (5, 3), "LSTM": (3, 4),
    "GRU": (3, 4), "RNN": (3, 4), "LSTMCell": (3, 4), "GRUCell": (3, 4), "RNNCell": (3, 4),
    "MultiheadAttention": (4, 2), "TransformerEncoderLayer": (4, 2, 8), "MaxPool1d": (2,),
    "MaxPool2d": (2,), "AvgPool1d": (2,), "AvgPool2d": (2,), "LPPool2d": (2.0, 2),
    "AdaptiveAvgPool1d": (2,), "AdaptiveAvgPool2d": (2,), "AdaptiveMaxPool1d": (2,),
    "AdaptiveMaxPool2d": (2,), "PixelShuffle": (2,), "PixelUnshuffle": (2,), "Upsample": (None, 2),
    "ChannelShuffle": (1,), "Threshold": (0.1, 0.0), "Unflatten": (1, (3, 1)),
    "ConstantPad1d": (1, 0.0), "ConstantPad2d": (1, 0.0), "ZeroPad1d": (1,), "ZeroPad2d": (1,),
    "ReflectionPad1d": (1,), "ReflectionPad2d": (1,), "ReplicationPad1d": (1,),
    "ReplicationPad2d": (1,), "CircularPad1d": (1,), "CircularPad2d": (1,),
    "Conv3d": (2, 3, 3), "ConvTranspose3d": (2, 3, 3), "MaxPool3d": (2,), "AvgPool3d": (2,),
    "AdaptiveAvgPool3d": (2,), "AdaptiveMaxPool3d": (2,), "LPPool1d": (2.0, 2),
    "LPPool3d": (2.0, 2), "ConstantPad3d": (1, 0.0), "ZeroPad3d": (1,), "ReflectionPad3d": (1,),
    "ReplicationPad3d": (1,), "CircularPad3d": (1,), "InstanceNorm3d": (3,), "Fold": (4, 2),
    "Unfold": (2,), "MaxUnpool1d": (2,), "MaxUnpool2d": (2,), "MaxUnpool3d": (2,),
    "FractionalMaxPool2d": (1, 1), "FractionalMaxPool3d": (1, 1), "LinearCrossEntropyLoss": (3, 2),
    "AdaptiveLogSoftmaxWithLoss": (8, 4, [2]), "TransformerDecoderLayer": (4, 2, 8),
    "LazyConv1d": (2, 3), "LazyConv2d": (2, 3), "LazyConv3d": (2, 3),
    "LazyConvTranspose1d": (2, 3), "LazyConvTranspose2d": (2, 3), "LazyConvTranspose3d": (2, 3),
}
# containers (they run the user's modules) and abstract bases
_NOT_LAYERS = {"Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
               "ParameterDict", "TransformerEncoder", "RNNBase", "RNNCellBase",
               "TransformerDecoder", "Transformer", "LazyModuleMixin"}


def _layers():
    import ember.nn.modules as M
    out = []
    for n in sorted(dir(M)):
        cls = getattr(M, n)
        if isinstance(cls, type) and issubclass(cls, ember.nn.Module) and n not in _NOT_LAYERS:
            out.append(n)
    return out


@pytest.mark.parametrize("name", _layers())
def test_layer_forward_bad_inputs_raise_ember_errors(name):
    cls = getattr(ember.nn, name)
    layer = cls(*_LAYER_ARGS.get(name, ()))
    n_in = len([p for p in inspect.signature(layer.forward).parameters.values()
                if p.default is p.empty and p.kind == p.POSITIONAL_OR_KEYWORD])
    wrong = []
    for bad_name, bad in _bad_values():
        for i in range(max(n_in, 1)):
            args = [_t() for _ in range(max(n_in, 1))]
            args[i] = bad
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    layer(*args)
            except EmberError as e:
                msg = str(e)
                head = msg.split(":")[0]
                if not msg or msg.startswith(f"{head}: {head}:"):
                    wrong.append(f"input {i}={bad_name}: badly named: {msg}")
            except Exception as e:  # noqa: BLE001 - the point of the test
                wrong.append(f"input {i}={bad_name}: raw {type(e).__module__}.{type(e).__name__}: "
                             f"{e}")
    assert not wrong, f"{name}:\n  " + "\n  ".join(w[:300] for w in wrong)


_OPTIMIZER_BAD = [dict(params="x"), dict(params=[]), dict(params=5), dict(params=[{"x": 1}]),
                  dict(lr=-1.0), dict(lr="x"), dict(lr=float("nan")), dict(weight_decay=None),
                  dict(betas="x"), dict(betas=(2.0, 0.9)), dict(eps=-1.0), dict(momentum=[1]),
                  dict(alpha="x"), dict(lr_decay=-1.0)]


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_optimizers_reject_bad_arguments(name):
    cls = getattr(ember.optim, name)
    accepted = inspect.signature(cls).parameters
    wrong = []
    for bad in _OPTIMIZER_BAD:
        if not set(bad) <= set(accepted):
            continue
        kwargs = {"params": [ember.ones(2, requires_grad=True)], **bad}
        try:
            cls(**kwargs)
        except EmberError as e:
            if name not in str(e):
                wrong.append(f"{bad}: message does not name {name}: {e}")
        except Exception as e:  # noqa: BLE001 - the point of the test
            wrong.append(f"{bad}: raw {type(e).__module__}.{type(e).__name__}: {e}")
        else:
            if bad.get("lr") is not None or "params" in bad:
                wrong.append(f"{bad}: accepted")
    assert not wrong, "\n".join(wrong)


def test_user_module_errors_stay_the_users():
    """Only ember's own code is wrapped: an exception a user's module raises inside a container
    reaches the user unchanged."""
    class Mine(ember.nn.Module):
        def forward(self, x):
            raise KeyError("mine")

    with pytest.raises(KeyError) as info:
        ember.nn.Sequential(ember.nn.Linear(3, 3), Mine())(_t())
    assert type(info.value) is KeyError and info.value.args == ("mine",)

    class MyLinear(ember.nn.Linear):
        def forward(self, x):
            super().forward(x)
            raise ValueError("mine too")  # the user's own error, after ember's forward ran

    with pytest.raises(ValueError) as info:
        MyLinear(3, 3)(_t())
    assert type(info.value) is ValueError
