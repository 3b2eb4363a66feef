"""The public namespace and Tensor's methods built by ember/ops/namespace.py: every table entry is
installed, torch's aliases are the ops they name, and every hand-written public function and
method raises ember's errors naming it (ember.errors.public) while a spec op's generated entry
and the hot ``view`` stay unwrapped."""
import types

import pytest

import ember
from ember.autograd.dispatch import named_by_dispatch
from ember.errors import EmberError
from ember.ops import namespace


def _wrapped(fn):
    return hasattr(fn, "__wrapped_public__")


def test_every_family_entry_point_is_in_ember_and_wrapped():
    for family, names in namespace.FUNCTIONS.items():
        for name in names:
            fn = getattr(ember, name)
            assert _wrapped(fn) or named_by_dispatch(name, fn), (family.__name__, name)
    with pytest.raises(EmberError, match="^native_batch_norm: "):   # named as torch's op
        ember.native_batch_norm(ember.ones(2, 3), ember.ones(4), None, None, None, True, 0.1, 1e-5)
    assert ember.FloatTensor is namespace.tensor_types.LEGACY["FloatTensor"]


def test_every_public_function_and_method_names_itself_in_its_errors():
    bad = [n for n, f in vars(ember).items() if n[0] != "_" and isinstance(f, types.FunctionType)
           and not _wrapped(f) and not named_by_dispatch(n, f)]
    assert not bad, bad
    bad = [n for n, f in vars(ember.Tensor).items()
           if (n[0] != "_" or n[:2] == "__" == n[-2:]) and isinstance(f, types.FunctionType)
           and f.__module__ != ember.Tensor.__module__ and not _wrapped(f)
           and not named_by_dispatch(n, f) and n not in namespace.NOT_WRAPPED]
    assert not bad, bad
    assert not _wrapped(ember.Tensor.view)   # hot: raises only ember's errors already
    with pytest.raises(EmberError, match="^max: "):
        ember.ones(2, 3).max(dim=5)
    with pytest.raises(EmberError, match="atleast_2d"):
        ember.atleast_2d(ember.ones(2), "x")


def test_methods_properties_and_aliases_are_installed():
    T = ember.Tensor
    for name in list(namespace.METHODS) + list(namespace.LATE_METHODS) + list(
            namespace.SORTING_METHODS):
        assert callable(getattr(T, name)), name
    for name in namespace.PROPERTIES:
        assert isinstance(vars(T)[name], property), name
    x = ember.tensor([0.25, -0.5])
    for alias, target in namespace.ALIASES.items():
        assert getattr(ember, alias) is not None and hasattr(T, alias), alias
    assert ember.arcsin(x).tolist() == ember.asin(x).tolist() == x.arcsin().tolist()
    y = x.clone()
    y.arcsin_()
    assert y.tolist() == ember.asin(x).tolist()
    for name in namespace.INPLACE_COMPOSITES:
        assert callable(getattr(T, name + "_")), name
    z = ember.tensor([2.0, 3.0])
    assert z.square_().tolist() == [4.0, 9.0] and z.tolist() == [4.0, 9.0]
    assert ember.slogdet is namespace.linalg.TOPLEVEL["slogdet"] and not hasattr(T, "lu_unpack")


def test_only_the_namespace_module_installs_on_tensor():
    import os
    import re
    root = os.path.dirname(ember.__file__)
    install = re.compile(r"setattr\((Tensor|tensor_cls)\b|^\s*(Tensor|tensor_cls)\.\w+\s*=", re.M)
    bad = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
           if f.endswith(".py") and os.path.join(d, f) != namespace.__file__
           and install.search(open(os.path.join(d, f)).read())]
    assert not bad, f"Tensor methods installed outside ember/ops/namespace.py: {bad}"


# ---------------------------------------------------------------- torch's top-level functions
# every name below is ember.<name> with torch.<name>'s arguments, values, dtypes,
# in-place identity and version bump, gradients and errors.
import warnings  # noqa: E402

import numpy as np  # noqa: E402

torch = pytest.importorskip("torch")


def _pair(arr, requires_grad=False):
    e, t = ember.tensor(arr), torch.tensor(arr)
    if requires_grad:
        e.requires_grad_(True)
        t.requires_grad_(True)
    return e, t


def _close(e, t, atol=1e-6):
    if isinstance(t, (tuple, list)):
        assert len(e) == len(t)
        for a, b in zip(e, t):
            _close(a, b, atol)
        return
    if not isinstance(t, torch.Tensor):
        assert e == t
        return
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=atol)


_RS = np.random.RandomState(0)
_U = _RS.uniform(0.1, 0.9, (2, 3))           # in every unary op's domain
# name -> (input, extra args) for ember.<name>(input, *args) / torch.<name>(input, *args)
_INPLACE_ARGS = {
    "acosh_": (_U + 1.0, ()), "clamp_": (_U, (0.3, 0.6)), "clip_": (_U, (0.3, 0.6)),
    "clamp_min_": (_U, (0.5,)), "clamp_max_": (_U, (0.5,)), "fill_": (_U, (2.5,)),
    "logit_": (_U, (1e-3,)), "nan_to_num_": (np.array([np.nan, np.inf, -np.inf, 1.0]), (0.5,)),
    "gcd_": (np.array([12, 18, -9]), (np.array([8, 12, 6]),)),
    "lcm_": (np.array([4, 6, 3]), (np.array([6, 4, 5]),)),
    "ldexp_": (_U, (np.array([1, 2, -1]),)), "xlogy_": (_U, (_U[::-1].copy(),)),
    "addmv_": (_U[0], (_RS.randn(3, 4), _RS.randn(4))),
    "index_put_": (_U, ((np.array([0, 1]), np.array([2, 0])), np.array([5.0, 6.0]))),
}
_NO_GRAD = {"ceil_", "floor_", "round_", "trunc_", "fix_", "frac_", "fill_", "gcd_", "lcm_",
            "relu_"}   # relu_ is differentiable, but checked with the others' code path below
# torch.ldexp_'s gradient is 0 where the exponent is negative (it multiplies by the integer
# power 2 ** other, which is 0 there); the mathematics is torch.ldexp's (out of place)
# (and so is torch.ldexp's); torch.nan_to_num_'s gradient is NaN at +-inf, where the op is the
# constant it writes (derivative 0): the mathematics, from these references
_TORCH_INPLACE_GRAD_WRONG = {
    "ldexp_": lambda x, e: x * 2.0 ** e.double(),
    "nan_to_num_": lambda x, nan: torch.where(torch.isfinite(x), x, torch.nan_to_num(x.detach(), nan))}
_INPLACE = [n for n in namespace.METHOD_FUNCTIONS if n.endswith("_") and n != "detach_"]


def _as(v, tensor_mod):
    if isinstance(v, tuple):
        return tuple(_as(a, tensor_mod) for a in v)
    return tensor_mod.tensor(v) if isinstance(v, np.ndarray) else v


@pytest.mark.parametrize("name", _INPLACE)
def test_inplace_function_is_the_method_in_place(name):
    arr, args = _INPLACE_ARGS.get(name, (_U, ()))
    e, t = _pair(arr.copy())
    v = e._version
    out_e = getattr(ember, name)(e, *_as(args, ember))
    out_t = getattr(torch, name)(t, *_as(args, torch))
    assert out_e is e and out_t is t           # in place, returns its input
    assert e._version > v
    _close(e, t)
    # gradients through the in-place write, as torch (on a non-leaf copy)
    if arr.dtype.kind == "f" and name not in _NO_GRAD:
        le, lt = _pair(arr.copy(), requires_grad=True)
        ye, yt = le * 1.0, lt * 1.0
        getattr(ember, name)(ye, *_as(args, ember))
        getattr(torch, name)(yt, *_as(args, torch))
        (ye * ye).sum().backward()
        try:
            (yt * yt).sum().backward()
            if name in _TORCH_INPLACE_GRAD_WRONG:
                raise NotImplementedError
        except NotImplementedError:   # torch lacks this in-place derivative (or is wrong)
            lt.grad = None
            ref = _TORCH_INPLACE_GRAD_WRONG.get(name) or getattr(torch, name[:-1])
            (ref(lt * 1.0, *_as(args, torch)) ** 2).sum().backward()
        _close(le.grad, lt.grad, atol=1e-5)
    # a leaf that requires grad cannot be written in place (torch's error kind)
    if arr.dtype.kind == "f":
        leaf = ember.tensor(arr.copy(), requires_grad=True)
        with pytest.raises(RuntimeError):
            getattr(ember, name)(leaf, *_as(args, ember))


@pytest.mark.parametrize("name", namespace.METHOD_FUNCTIONS)
def test_method_function_rejects_a_non_tensor(name):
    with pytest.raises(TypeError, match=f"{name}.*must be Tensor"):
        getattr(ember, name)(3)
    with pytest.raises(TypeError):
        getattr(torch, name)(3)


def test_tensor_queries_and_detach():
    e, t = _pair(np.array([[1.0, -2.0]]))
    for name, args in [("is_conj", ()), ("is_neg", ()), ("is_signed", ()),
                       ("is_same_size", (e,)), ("is_nonzero", None)]:
        if args is None:
            assert ember.is_nonzero(ember.tensor([0.5])) is torch.is_nonzero(torch.tensor([0.5]))
            with pytest.raises(RuntimeError, match="ambiguous"):
                ember.is_nonzero(e)
            continue
        targs = tuple(t for _ in args)
        assert getattr(ember, name)(e, *args) == getattr(torch, name)(t, *targs)
    assert ember.is_signed(ember.tensor([1], dtype=ember.uint8)) is False
    le = ember.tensor([1.0, 2.0], requires_grad=True)
    d = ember.detach(le * 2)
    assert not d.requires_grad and d.tolist() == [2.0, 4.0]
    y = le * 2
    assert ember.detach_(y) is y and not y.requires_grad and y.grad_fn is None
    assert ember.typename(e) == "torch.DoubleTensor" == torch.typename(t)   # torch's spelling
    assert ember.typename(3) == "int"
    assert ember.typename(np.ndarray) == torch.typename(np.ndarray) == "numpy.ndarray"
    assert ember.is_storage(e) is False


# torch's top-level functions: (name, input shapes, extra args[, kwargs]); shapes that are
# tuples of ints are random float64 tensors (requiring grad), "sign34" / "rate34" constant
# tensors of signs / positive rates, _Lit(v) the value v itself; the nn ones (NN_NAMES) run in
# tests/nn/test_toplevel.py
class _Lit:
    """A case's argument passed to both as it is (not a tensor)."""
    def __init__(self, value):
        self.value = value


CASES = [
    ("conv1d", [(2, 3, 9), (4, 3, 3), (4,)], (2, 1, 1, 1)),
    ("conv2d", [(2, 3, 7, 7), (4, 3, 3, 3), (4,)], (1, 1, 1, 1)),
    ("conv2d", [(2, 4, 7, 7), (4, 2, 3, 3), None], (1, "same", 1, 2)),
    ("conv3d", [(1, 2, 5, 5, 5), (3, 2, 3, 3, 3), (3,)], (1, 1)),
    ("conv_transpose1d", [(2, 3, 6), (3, 4, 3), (4,)], (2, 1, 1)),
    ("conv_transpose2d", [(2, 3, 5, 5), (3, 2, 3, 3), (2,)], (2, 1, 1, 1, 1)),
    ("conv_transpose3d", [(1, 2, 3, 3, 3), (2, 3, 2, 2, 2), None], (2,)),
    ("convolution", [(2, 3, 7, 7), (4, 3, 3, 3), (4,)],
     ([1, 1], [1, 1], [1, 1], False, [0, 0], 1)),
    ("convolution", [(2, 3, 5, 5), (3, 2, 3, 3), None],
     ([2, 2], [1, 1], [1, 1], True, [1, 1], 1)),
    ("convolution", [(2, 3, 9), (4, 3, 3), (4,)], ([1], [0], [2], False, [0], 1)),
    ("layer_norm", [(2, 3, 4), _Lit([3, 4]), (3, 4), (3, 4)], ()),
    ("layer_norm", [(2, 3, 4), _Lit((4,))], ()),
    ("rms_norm", [(2, 3, 4), _Lit([4]), (4,)], (1e-3,)),
    ("rms_norm", [(2, 3, 4), _Lit([3, 4])], ()),
    ("max_pool1d", [(2, 3, 9)], (3,)),
    ("max_pool1d", [(2, 3, 9)], (3, 2, 1)),
    ("max_pool2d", [(2, 3, 8, 8)], (2,)),
    ("max_pool3d", [(1, 2, 4, 4, 4)], (2, (), 0, 1, True)),
    ("max_pool1d_with_indices", [(2, 3, 9)], (3, 2)),
    ("avg_pool1d", [(2, 3, 9)], (3, (), 1, False, False)),
    ("adaptive_avg_pool1d", [(2, 3, 9)], (4,)),
    ("adaptive_max_pool1d", [(2, 3, 9)], (4,)),
    ("channel_shuffle", [(2, 6, 3, 3)], (3,)),
    ("native_channel_shuffle", [(2, 6, 3, 3)], (2,)),
    ("pixel_shuffle", [(2, 8, 3, 3)], (2,)),
    ("pixel_unshuffle", [(2, 2, 4, 4)], (2,)),
    ("pairwise_distance", [(4, 5), (4, 5)], (3.0, 1e-6, True)),
    ("cosine_similarity", [(4, 5), (4, 5)], (0,)),
    ("pdist", [(5, 3)], (1.5,)),
    ("prelu", [(2, 3, 4), (3,)], ()),
    ("rrelu", [(3, 4)], (0.1, 0.3, False)),
    ("celu", [(3, 4)], (0.7,)),
    ("hardshrink", [(3, 4)], (0.3,)),
    ("threshold", [(3, 4)], (0.1, -2.0)),
    ("bilinear", [(4, 3), (4, 5), (2, 3, 5), (2,)], ()),
    ("rnn_tanh_cell", [(3, 4), (3, 5), (5, 4), (5, 5), (5,), (5,)], ()),
    ("rnn_relu_cell", [(3, 4), (3, 5), (5, 4), (5, 5)], ()),
    ("gru_cell", [(3, 4), (3, 5), (15, 4), (15, 5), (15,), (15,)], ()),
    ("gru_cell", [(3, 4), (3, 5), (15, 4), (15, 5)], ()),
    ("affine_grid_generator", [(2, 2, 3)], ([2, 1, 4, 5], False)),
    ("grid_sampler", [(1, 2, 4, 4), (1, 3, 3, 2)], (0, 0, False)),
    ("split_with_sizes", [(5, 3)], ([2, 3],)),
    ("kl_div", [(3, 4), "rate34"], ()),
    ("kl_div", [(3, 4), "rate34"], (2,)),
    ("kl_div", [(3, 4), (3, 4)], (1,), {"log_target": True}),
    ("binary_cross_entropy_with_logits", [(3, 4), "rate34", "rate4", "rate4"], (1,)),
    ("binary_cross_entropy_with_logits", [(3, 4), "rate34"], ()),
    ("margin_ranking_loss", [(5,), (5,), "sign5"], (0.2, 1)),
    ("hinge_embedding_loss", [(3, 4), "sign34"], (0.5, 2)),
    ("cosine_embedding_loss", [(3, 4), (3, 4), "sign3"], (0.1,)),
    ("triplet_margin_loss", [(3, 4), (3, 4), (3, 4)], (1.0, 2.0, 1e-6, True, 1)),
    ("poisson_nll_loss", [(3, 4), "rate34"], (True, True, 1e-8, 1)),
    ("poisson_nll_loss", [(3, 4), "rate34"], (False, False, 1e-8, 0)),
    ("nuclear_norm", [(3, 4)], ()),
    ("nuclear_norm", [(2, 3, 4)], ((1, 2), True)),
    ("frobenius_norm", [(2, 3, 4)], ((0, 2),)),
    ("frobenius_norm", [(2, 3, 4)], ([1], True)),
    ("vander", [(4,)], ()),
    ("vander", [(4,)], (3, True)),
    ("concat", "list", (1,)), ("concatenate", "list", (1,)), ("row_stack", "list", ()),
    ("swapaxes", [(2, 3, 4)], (0, 2)), ("swapdims", [(2, 3, 4)], (1, -1)),
    ("adjoint", [(2, 3, 4)], ()),
    ("select_copy", [(3, 4)], (1, -1)), ("slice_copy", [(5, 4)], (0, 1, None, 2)),
    ("slice_copy", [(5, 4)], (-1, 1, 3)),
    ("split_copy", [(5, 4)], (2, 0)), ("detach_copy", [(3,)], ()),
    ("ger", [(3,), (4,)], ()),
    ("unsafe_split_with_sizes", [(5, 3)], ([1, 4], 0)),
    ("orgqr", [(4, 3), (2,)], ()),
    ("conv_tbc", [(5, 2, 3), (3, 3, 4), (4,)], (1,)),
]


NN_NAMES = set(namespace.NN_TOPLEVEL) | {"rnn_tanh_cell", "rnn_relu_cell", "gru_cell",
                                          "cosine_similarity", "pixel_shuffle", "pixel_unshuffle",
                                          "grid_sampler", "affine_grid_generator", "conv_tbc"}


def _materialise(spec, rs):
    if spec is None:
        return None, None
    if isinstance(spec, _Lit):
        return spec.value, spec.value
    if isinstance(spec, str):
        n = [int(c) for c in spec if c.isdigit()]
        arr = np.sign(rs.randn(*n)) if spec.startswith("sign") else rs.uniform(0.5, 2.0, n)
        if spec.startswith("rate") and len(n) == 2:
            arr[0, 0] = 0.0   # a zero target: kl_div's and poisson_nll_loss's special case
        return ember.tensor(arr), torch.tensor(arr)
    arr = rs.randn(*spec)
    return _pair(arr, requires_grad=True)


def _grad_leaves(pairs):
    return [(e, t) for e, t in pairs if isinstance(e, ember.Tensor) and e.requires_grad]


# torch has no derivative for these (ember's is that of the op they copy or alias): the
# gradient is checked against the torch op named here
_TORCH_GRAD_OF = {"native_channel_shuffle": "channel_shuffle", "detach_copy": None,
                  # torch.vander's backward fails (it writes its own saved output in place)
                  "vander": lambda x, n=None, inc=False: (
                      torch.linalg.vander(x, N=n) if inc else torch.linalg.vander(x, N=n).flip(-1))}


def run_case(case):
    """ember.<name> against torch.<name> on one case: values, dtypes, shapes, and the
    gradients of every float64 input that requires grad (tests/nn/test_toplevel.py uses it)."""
    name, shapes, args = case[:3]
    kwargs = case[3] if len(case) > 3 else {}
    rs = np.random.RandomState(len(name))
    if shapes == "list":
        pairs = [_pair(rs.randn(2, 3), True), _pair(rs.randn(2, 2), True)]
        if name == "row_stack":
            pairs[1] = _pair(rs.randn(1, 3), True)
        e_in, t_in = [[p[0] for p in pairs]], [[p[1] for p in pairs]]
    else:
        pairs = [_materialise(s, rs) for s in shapes]
        if name == "prelu":   # torch's weight is per channel (dim 1)
            pairs[1] = _pair(rs.rand(3), True)
        e_in, t_in = [p[0] for p in pairs], [p[1] for p in pairs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out_t = getattr(torch, name)(*t_in, *args, **kwargs)
        out_e = getattr(ember, name)(*e_in, *args, **kwargs)
    _close(out_e, out_t, atol=1e-5)
    if name in _TORCH_GRAD_OF:
        if _TORCH_GRAD_OF[name] is None:
            assert not out_e.requires_grad
            return
        ref = _TORCH_GRAD_OF[name]
        ref = getattr(torch, ref) if isinstance(ref, str) else ref
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out_t = ref(*t_in, *args, **kwargs)
    outs = [(a, b) for a, b in zip(out_e if isinstance(out_e, (tuple, list)) else [out_e],
                                   out_t if isinstance(out_t, (tuple, list)) else [out_t])
            if b.dtype.is_floating_point and b.requires_grad]
    leaves = _grad_leaves(pairs)
    if not outs or not leaves:
        return
    sum(((a * a).sum() for a, _ in outs), ember.tensor(0.0, dtype=ember.float64)).backward()
    sum((b * b).sum() for _, b in outs).backward()
    for e, t in leaves:
        if t.grad is None:
            assert e.grad is None or not e.grad.numpy().any()
        else:
            _close(e.grad, t.grad, atol=1e-5)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] not in NN_NAMES],
                         ids=lambda c: c[0])
def test_toplevel_function_matches_torch(case):
    run_case(case)


def test_chain_matmul_vander_and_norm_errors():
    rs = np.random.RandomState(7)
    ms = [rs.randn(2, 3), rs.randn(3, 4), rs.randn(4, 2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _close(ember.chain_matmul(*[ember.tensor(m) for m in ms]),
               torch.chain_matmul(*[torch.tensor(m) for m in ms]))
        one = ember.tensor(ms[0])
        c = ember.chain_matmul(one)
        assert c is not one and c.tolist() == one.tolist()
        with pytest.raises(RuntimeError, match="one or more"):
            ember.chain_matmul()
        with pytest.raises(RuntimeError, match="2D"):
            ember.chain_matmul(ember.ones(2))
    with pytest.warns(UserWarning, match="deprecated"):
        ember.chain_matmul(ember.ones(2, 2), ember.ones(2, 2))
    for xs, n in [([1, 2, 3], None), ([True, False], 3), ([2.0, 3.0], 0), ([2.0, 3.0], 1)]:
        _close(ember.vander(ember.tensor(xs), n), torch.vander(torch.tensor(xs), n))
    with pytest.raises(RuntimeError, match="one-dimensional"):
        ember.vander(ember.ones(2, 2))
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.vander(ember.ones(2), -1)
    with pytest.raises(RuntimeError, match="at most 2"):
        ember.frobenius_norm(ember.ones(2, 2, 2), (0, 1, 2))
    _close(ember.nuclear_norm(ember.tensor(ms[0]), True),
           torch.nuclear_norm(torch.tensor(ms[0]), True))


def test_range_includes_its_end_as_torch():
    for args, kw in [((0, 3), {}), ((1, 2, 0.3), {}), ((0, 3), {"dtype": ember.int64}),
                     ((3, 0, -1), {}), ((0.5, 2.5, 0.5), {"dtype": ember.float64})]:
        tkw = {"dtype": getattr(torch, str(kw["dtype"]).split(".")[-1])} if kw else {}
        with pytest.warns(UserWarning, match="deprecated"):
            e = ember.range(*args, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _close(e, torch.range(*args, **tkw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args, msg in [((0, 3, 0), "nonzero"), ((3, 0), "inconsistent"),
                          ((0, float("inf")), "unsupported range")]:
            with pytest.raises(RuntimeError, match=msg):
                ember.range(*args)
            with pytest.raises(RuntimeError, match=msg):
                torch.range(*args)
        assert ember.range(0, 1, requires_grad=True).requires_grad
    assert ember.get_device(ember.ones(2)) == ember.ones(2).get_device() == -1 == \
        torch.get_device(torch.ones(2))


@pytest.mark.parametrize("name", ["matrix_rank", "lstsq", "eig", "symeig", "solve"])
def test_removed_functions_raise_as_torch(name):
    with pytest.raises(RuntimeError, match="deprecated since version 1.9 and is now removed"):
        getattr(torch, name)(torch.ones(2, 2), torch.ones(2, 2))
    with pytest.raises(RuntimeError,
                       match=f"^{name}: .*deprecated since version 1.9 and is now removed. .*linalg"):
        getattr(ember, name)(ember.ones(2, 2), ember.ones(2, 2))


def test_asarray_shares_memory_unless_a_copy_is_needed():
    t = ember.ones(3)
    assert ember.asarray(t) is t
    assert ember.asarray(t, copy=True) is not t
    c = ember.asarray(t, dtype=ember.float64)
    assert c.dtype == ember.float64 and c.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="can't alias"):
        ember.asarray(t, dtype=ember.float64, copy=False)
    a = np.ones(3)
    s = ember.asarray(a)
    s[0] = 5.0
    assert a[0] == 5.0 and s.dtype == ember.float64 == ember.asarray(np.float64(2)).dtype
    k = ember.asarray(a, copy=True)
    k[1] = 7.0
    assert a[1] == 1.0
    with pytest.raises(ValueError, match="can't alias"):
        ember.asarray(a, dtype=ember.float32, copy=False)
    with pytest.raises(ValueError, match="arbitrary sequence"):
        ember.asarray([1, 2], copy=False)
    for obj in ([1.0, 2.0], [1, 2], 3.0, [[True], [False]]):
        _close(ember.asarray(obj), torch.asarray(obj))
    r = ember.asarray([1.0, 2.0], requires_grad=True)
    assert r.requires_grad and r.is_leaf
    with pytest.raises(RuntimeError, match="floating point"):
        ember.asarray([1, 2], requires_grad=True)
    buf = bytearray(np.array([1.0, 2.0], np.float32).tobytes())
    view = ember.asarray(buf)          # a buffer is read as the default dtype, shared
    _close(view, torch.asarray(bytearray(buf)))
    buf[0:4] = np.array([3.0], np.float32).tobytes()
    assert view.tolist() == [3.0, 2.0]
    with pytest.raises(Exception, match="cuda|CUDA"):
        ember.asarray([1.0], device="cuda")


def test_frombuffer_matches_torch():
    data = bytearray(np.arange(4, dtype=np.float32).tobytes())
    for kw in [{}, {"count": 2}, {"count": 1, "offset": 8}, {"offset": 4}]:
        _close(ember.frombuffer(data, dtype=ember.float32, **kw),
               torch.frombuffer(bytearray(data), dtype=torch.float32, **kw))
    shared = ember.frombuffer(data, dtype=ember.float32)
    data[0:4] = np.array([9.0], np.float32).tobytes()
    assert shared[0].item() == 9.0
    for kw, msg in [({"count": 5}, "requested buffer length"), ({"offset": 16}, "offset"),
                    ({"offset": -1}, "offset"), ({"offset": 2}, "multiple of element size")]:
        with pytest.raises(ValueError, match=msg):
            ember.frombuffer(data, dtype=ember.float32, **kw)
        with pytest.raises(ValueError):
            torch.frombuffer(bytearray(data), dtype=torch.float32, **kw)
    with pytest.raises(ValueError, match="must not be 0"):
        ember.frombuffer(bytearray(), dtype=ember.float32)
    with pytest.raises(TypeError):
        ember.frombuffer(data)
    assert ember.frombuffer(data, dtype=ember.float32, requires_grad=True).requires_grad


_INPLACE_CASES = {   # x.<name>_ of an op without an in-place spec variant, as torch's
    "addcmul_": lambda L, x, b, c, i: x.addcmul_(b, c, value=0.3),
    "addcdiv_": lambda L, x, b, c, i: x.addcdiv_(b, c, value=-0.5),
    "addmm_": lambda L, x, b, c, i: x.addmm_(b, c, beta=0.5, alpha=2.0),
    "cumsum_": lambda L, x, b, c, i: x.cumsum_(1),
    "cumprod_": lambda L, x, b, c, i: x.cumprod_(0),
    "tril_": lambda L, x, b, c, i: x.tril_(-1),
    "triu_": lambda L, x, b, c, i: x.triu_(1),
    "renorm_": lambda L, x, b, c, i: x.renorm_(2, 0, 1.0),
    "index_reduce_": lambda L, x, b, c, i: x.index_reduce_(0, i, b, "prod", include_self=False),
}


@pytest.mark.parametrize("name", sorted(_INPLACE_CASES))
def test_in_place_forms_of_ops_without_a_spec_variant_match_torch(name):
    """The hand-written optimizers of community programs (``exp_avg_sq.mul_(b2).addcmul_(g, g,
    value=1 - b2)``, ``p.addcdiv_(m, denom, value=-lr)``) and masks (``tril_``): the result in
    place (self returned) and the gradient through it, float64."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    c, idx = rng.random((4, 4)) + 0.5, np.array([0, 2, 0, 1])
    res = []
    for L in (torch, ember):
        w = L.tensor(a, requires_grad=True)
        x = w * 1.0
        y = _INPLACE_CASES[name](L, x, L.tensor(b), L.tensor(c), L.tensor(idx))
        assert y is x
        (y * L.tensor(b)).sum().backward()
        res.append((x.detach().numpy(), w.grad.numpy()))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-10, atol=1e-10)


def test_torch_constants_are_python_values():
    """torch.inf, torch.nan, torch.e, torch.pi and torch.newaxis: ``masked_fill(m, -torch.inf)``,
    ``x[:, torch.newaxis]``."""
    import math
    assert ember.inf == math.inf and type(ember.inf) is float and math.isnan(ember.nan)
    assert ember.e == math.e and ember.pi == math.pi and ember.newaxis is None
    x = ember.arange(3.0)
    assert x[:, ember.newaxis].shape == (3, 1)
    assert x.masked_fill(x > 0, -ember.inf).tolist() == [0.0, -math.inf, -math.inf]
