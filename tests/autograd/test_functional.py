"""ember.autograd.functional against torch.autograd.functional (torch 2.13) in float64: each case
is written once against a module handle ``lib`` (``ember`` or ``torch``) and run on both; values,
result structure (Tensor, tuple, tuple of tuples), dtypes and whether results require grad must
match, and errors must be of torch's class."""
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.autograd.functional as AF
from ember.errors import EmberError

torch = pytest.importorskip("torch")
import torch.autograd.functional as TF  # noqa: E402

LIBS = {"ember": (ember, AF), "torch": (torch, TF)}


def _arrays(seed, shapes):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.0, 1.0, size=s) for s in shapes]


def _tensors(lib, arrays, requires_grad=False):
    return tuple(lib.tensor(a, dtype=lib.float64, requires_grad=requires_grad) for a in arrays)


def _pack(ts, as_tuple):
    return ts if as_tuple else ts[0]


def _assert_same(got, want, check_grad=True):
    """``got`` (ember) has ``want``'s (torch) structure, shapes, dtypes, values and grad flags.
    torch's forward-mode jacobian gives lists where its reverse mode gives tuples; ember gives
    tuples for both."""
    if isinstance(want, list):
        want = tuple(want)
    if isinstance(want, torch.Tensor):
        assert isinstance(got, ember.Tensor), type(got)
        assert tuple(got.shape) == tuple(want.shape)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        if check_grad:
            assert got.requires_grad == want.requires_grad
        tol = 1e-10 if want.dtype == torch.float64 else 1e-5
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(),
                                   rtol=tol, atol=tol * 1e-2)
        return
    assert type(got) is tuple and type(want) is tuple, (type(got), type(want))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _assert_same(g, w, check_grad)


def _both(case, check_grad=True):
    got = case(*LIBS["ember"])
    want = case(*LIBS["torch"])
    _assert_same(got, want, check_grad)
    return got, want


# functions written with Tensor methods, so that one definition runs on both libraries
def exp_reducer(x):
    return x.exp().sum(dim=1)


def adder(x, y):
    return 2 * x + 3 * y


def two_outputs(x, y):
    return x * y.sin(), (x ** 2).sum() + y.prod()


def unused_second(x, y):
    return x.exp() * 2


def constant(x):
    return x.detach() * 2


def scalar_of_two(x, y):
    return (x ** 2 * y.exp()).sum() + (x * y).sin().sum()


def cube_sum(x):
    return (x ** 3).sum()


def matrix_fn(x):
    return x.matmul(x.t()).tanh()


# (name, func, input shapes, inputs as a tuple, v shapes or None, v as a tuple)
VJP_CASES = [
    ("single", exp_reducer, [(4, 3)], False, [(4,)], False),
    ("tuple_inputs", adder, [(2,), (2,)], True, [(2,)], False),
    ("two_outputs", two_outputs, [(3,), (3,)], True, [(3,), ()], True),
    ("default_v", cube_sum, [(3,)], False, None, False),
    ("default_v_tuple_inputs", scalar_of_two, [(3,), (3,)], True, None, False),
    ("unused_input", unused_second, [(3,), (2,)], True, [(3,)], False),
    ("constant_output", constant, [(3,)], False, [(3,)], False),
    ("matrix", matrix_fn, [(2, 3)], False, [(2, 2)], False),
]


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name,func,shapes,in_tuple,vshapes,v_tuple", VJP_CASES,
                         ids=[c[0] for c in VJP_CASES])
def test_vjp_matches_torch(name, func, shapes, in_tuple, vshapes, v_tuple, create_graph):
    xs = _arrays(0, shapes)
    vs = None if vshapes is None else _arrays(1, vshapes)

    def case(lib, F):
        inputs = _pack(_tensors(lib, xs, requires_grad=create_graph), in_tuple)
        v = None if vs is None else _pack(_tensors(lib, vs), v_tuple)
        return F.vjp(func, inputs, v, create_graph=create_graph)

    _both(case)


# (name, func, input shapes, inputs as a tuple); v has the inputs' shapes
JVP_CASES = [
    ("single", exp_reducer, [(4, 3)], False),
    ("tuple_inputs", adder, [(2,), (2,)], True),
    ("two_outputs", two_outputs, [(3,), (3,)], True),
    ("unused_input", unused_second, [(3,), (2,)], True),
    ("constant_output", constant, [(3,)], False),
    ("matrix", matrix_fn, [(2, 3)], False),
]


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name,func,shapes,in_tuple", JVP_CASES, ids=[c[0] for c in JVP_CASES])
def test_jvp_matches_torch(name, func, shapes, in_tuple, create_graph):
    xs = _arrays(2, shapes)
    vs = _arrays(3, shapes)

    def case(lib, F):
        inputs = _pack(_tensors(lib, xs, requires_grad=create_graph), in_tuple)
        v = _pack(_tensors(lib, vs), in_tuple)
        return F.jvp(func, inputs, v, create_graph=create_graph)

    _both(case)


@pytest.mark.parametrize("which", ["vjp", "jvp", "vhp", "hvp"])
def test_create_graph_on_inputs_that_do_not_require_grad(which):
    """The results still carry a graph (to the fresh tensors func received), as torch's."""
    xs = _arrays(19, [(3,), (3,)])
    vs = _arrays(20, [(3,), (3,)])
    func = scalar_of_two if which in ("vhp", "hvp") else two_outputs
    if which == "vjp":
        vs = [vs[0], np.array(0.5)]
    _both(lambda lib, F: getattr(F, which)(func, _tensors(lib, xs), _tensors(lib, vs),
                                            create_graph=True))


def test_jvp_default_v_for_a_one_element_input():
    x = _arrays(4, [(1,)])
    _both(lambda lib, F: F.jvp(lambda t: t.exp() * lib.arange(3.0, dtype=lib.float64),
                               _tensors(lib, x)[0]))


JACOBIAN_CASES = [
    ("single_single", exp_reducer, [(4, 3)], False),
    ("tuple_inputs", adder, [(2,), (2,)], True),
    ("tuple_outputs", lambda x: (x.sin(), x.sum(), x.matmul(x.t())), [(2, 3)], False),
    ("tuple_tuple", two_outputs, [(3,), (3,)], True),
    ("one_input_as_tuple", cube_sum, [(3,)], True),
    ("unused_input", unused_second, [(3,), (2,)], True),
    ("constant_output", constant, [(3,)], False),
    ("scalar_input", lambda x: x * x.exp(), [()], False),
]


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name,func,shapes,in_tuple", JACOBIAN_CASES,
                         ids=[c[0] for c in JACOBIAN_CASES])
def test_jacobian_matches_torch(name, func, shapes, in_tuple, create_graph, vectorize):
    xs = _arrays(5, shapes)

    def case(lib, F):
        inputs = _pack(_tensors(lib, xs, requires_grad=create_graph), in_tuple)
        return F.jacobian(func, inputs, create_graph=create_graph, vectorize=vectorize)

    # torch's vmap path marks some constant blocks as requiring grad under create_graph (a
    # linear output's); ember computes vectorize=True by the loop, as vectorize=False
    _both(case, check_grad=not vectorize)


@pytest.mark.parametrize("name,func,shapes,in_tuple", JACOBIAN_CASES,
                         ids=[c[0] for c in JACOBIAN_CASES])
def test_jacobian_forward_mode_vectorized_matches_torch(name, func, shapes, in_tuple):
    xs = _arrays(6, shapes)
    _both(lambda lib, F: F.jacobian(func, _pack(_tensors(lib, xs), in_tuple), vectorize=True,
                                    strategy="forward-mode"))


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_jacobian_dtype_follows_torch_per_strategy(strategy):
    """reverse mode gives the inputs' dtype, forward mode the outputs'."""
    x = _arrays(7, [(3,)])[0]

    def case(lib, F):
        inp = lib.tensor(x, dtype=lib.float32)
        return F.jacobian(lambda t: (t.double() ** 2, t.sin()), inp, vectorize=True,
                          strategy=strategy)

    got, _ = _both(case)
    assert got[0].dtype == (ember.float64 if strategy == "forward-mode" else ember.float32)


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("shape", [(3,), (2, 2)])
def test_hessian_of_one_input(shape, create_graph):
    x = _arrays(8, [shape])
    _both(lambda lib, F: F.hessian(lambda t: (t ** 3).sum() * t.exp().sum(),
                                   _tensors(lib, x, requires_grad=create_graph)[0],
                                   create_graph=create_graph))


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("create_graph", [False, True])
def test_hessian_of_a_scalar_function_of_two_inputs_is_nested(create_graph, vectorize):
    xs = _arrays(9, [(3,), (3,)])
    got, _ = _both(lambda lib, F: F.hessian(scalar_of_two,
                                            _tensors(lib, xs, requires_grad=create_graph),
                                            create_graph=create_graph, vectorize=vectorize))
    assert [[tuple(h.shape) for h in row] for row in got] == [[(3, 3)] * 2] * 2


def test_hessian_with_an_unused_input_and_a_one_element_tuple():
    xs = _arrays(10, [(2,), (3,)])
    _both(lambda lib, F: F.hessian(lambda x, y: (x ** 4).sum(), _tensors(lib, xs)))
    _both(lambda lib, F: F.hessian(cube_sum, _tensors(lib, xs[:1])))


def test_hessian_forward_mode_outer_jacobian_vectorized():
    xs = _arrays(11, [(3,), (3,)])
    # torch's forward-mode result keeps a grad_fn here; the values and structure are compared
    _both(lambda lib, F: F.hessian(scalar_of_two, _tensors(lib, xs), vectorize=True,
                                   outer_jacobian_strategy="forward-mode"), check_grad=False)


# (name, func, input shapes, inputs as a tuple, v given)
HVP_CASES = [
    ("single", cube_sum, [(3,)], False, True),
    ("matrix_input", lambda x: x.matmul(x.t()).tanh().sum(), [(2, 3)], False, True),
    ("tuple_inputs", scalar_of_two, [(3,), (3,)], True, True),
    ("unused_input", lambda x, y: (x ** 4).sum(), [(2,), (3,)], True, True),
    ("default_v", lambda x: (x.exp() * x).sum(), [(1,)], False, False),
    ("default_v_0d", lambda x: x.exp() * x, [()], False, False),
]


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("which", ["vhp", "hvp"])
@pytest.mark.parametrize("name,func,shapes,in_tuple,with_v", HVP_CASES,
                         ids=[c[0] for c in HVP_CASES])
def test_vhp_and_hvp_match_torch(name, func, shapes, in_tuple, with_v, which, create_graph):
    xs = _arrays(12, shapes)
    vs = _arrays(13, shapes)

    def case(lib, F):
        inputs = _pack(_tensors(lib, xs, requires_grad=create_graph), in_tuple)
        v = _pack(_tensors(lib, vs), in_tuple) if with_v else None
        return getattr(F, which)(func, inputs, v, create_graph=create_graph)

    _both(case)


def test_hvp_equals_vhp_for_a_smooth_function():
    xs = _arrays(14, [(3,), (3,)])
    vs = _tensors(ember, _arrays(15, [(3,), (3,)]))
    _, a = AF.hvp(scalar_of_two, _tensors(ember, xs), vs)
    _, b = AF.vhp(scalar_of_two, _tensors(ember, xs), vs)
    for p, q in zip(a, b):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-12, atol=1e-12)


# create_graph=True, then the result is differentiated again w.r.t. the inputs
SECOND_ORDER = {
    "vjp": lambda F, x, w: F.vjp(exp_reducer, x, w[:4, 0], create_graph=True)[1],
    "jvp": lambda F, x, w: F.jvp(exp_reducer, x, w, create_graph=True)[1],
    "jacobian": lambda F, x, w: F.jacobian(exp_reducer, x, create_graph=True),
    "hessian": lambda F, x, w: F.hessian(lambda t: (t.sin() * t).sum(), x, create_graph=True),
    "vhp": lambda F, x, w: F.vhp(lambda t: (t.sin() * t).sum(), x, w, create_graph=True)[1],
    "hvp": lambda F, x, w: F.hvp(lambda t: (t.sin() * t).sum(), x, w, create_graph=True)[1],
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_create_graph_result_differentiates_again(name):
    xa, wa = _arrays(16, [(4, 3), (4, 3)])

    def case(lib, F):
        x = lib.tensor(xa, dtype=lib.float64, requires_grad=True)
        w = lib.tensor(wa, dtype=lib.float64, requires_grad=True)
        res = SECOND_ORDER[name](F, x, w)
        assert res.requires_grad
        weight = lib.tensor(np.linspace(-1.0, 1.0, res.numel()).reshape(tuple(res.shape)),
                            dtype=lib.float64)
        return lib.autograd.grad((res * weight).sum(), (x, w), allow_unused=True,
                                 materialize_grads=True)

    _both(case)


def test_results_are_detached_without_create_graph_and_inputs_untouched():
    x = ember.tensor([0.5, -1.0, 2.0], dtype=ember.float64, requires_grad=True)
    out, (g,) = AF.vjp(lambda t: (t ** 2).sum(), (x,))
    assert not out.requires_grad and not g.requires_grad
    assert AF.jacobian(lambda t: t.exp(), x).grad_fn is None
    assert x.grad is None and x.requires_grad and x.is_leaf


def test_the_function_sees_a_fresh_tensor_not_the_captured_one():
    """``func`` closing over the input it is given differentiates only its argument (torch makes
    a fresh tensor for the argument, as ember does)."""
    xa = _arrays(17, [(3,)])[0]

    def case(lib, F):
        x = lib.tensor(xa, dtype=lib.float64, requires_grad=True)
        return (F.jacobian(lambda t: t * x, x), F.vjp(lambda t: (t * x).sum(), x)[1],
                F.hessian(lambda t: (t * t * x).sum(), x))

    _both(case)


def test_works_under_no_grad():
    xa = _arrays(18, [(3,)])[0]

    def case(lib, F):
        x = lib.tensor(xa, dtype=lib.float64)
        with lib.no_grad():
            return (F.vjp(cube_sum, x)[1], F.jvp(lambda t: t.sin(), x, x)[1],
                    F.jacobian(lambda t: t.sin(), x), F.hessian(cube_sum, x),
                    F.hvp(cube_sum, x, x)[1], F.vhp(cube_sum, x, x)[1])

    _both(case)


def test_empty_output_has_an_empty_jacobian():
    """torch's stack of no rows raises here; ember returns the (0, n) Jacobian."""
    x = ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64)
    jac = AF.jacobian(lambda t: t[:0] * 2, x)
    assert tuple(jac.shape) == (0, 3)


def _x(lib, n=3):
    return lib.tensor(np.linspace(0.5, 1.5, n), dtype=lib.float64)


def _xy(lib):
    return _x(lib), _x(lib, 2)


# (name, call(lib, F), ember's error class, a phrase both messages contain)
ERRORS = [
    ("vjp_strict_unused", lambda lib, F: F.vjp(unused_second, _xy(lib), _x(lib), strict=True),
     RuntimeError, "independent of input 1"),
    ("vjp_strict_constant_output",
     lambda lib, F: F.vjp(constant, _x(lib), _x(lib), strict=True),
     RuntimeError, "output 0 of the user-provided function does not require gradients"),
    ("vjp_v_shape", lambda lib, F: F.vjp(lambda t: t * 2, _x(lib), _x(lib, 2)),
     RuntimeError, "v has invalid size"),
    ("vjp_v_tuple_entry_shape",
     lambda lib, F: F.vjp(lambda t: (t * 2, t.sum()), _x(lib), (_x(lib), _x(lib))),
     RuntimeError, "entry 1 in v has invalid size"),
    ("vjp_v_tuple_length",
     lambda lib, F: F.vjp(lambda t: (t * 2, t * 3), _x(lib), (_x(lib),)),
     RuntimeError, "v is a tuple of invalid length: should be 2 but got 1"),
    ("vjp_v_not_single", lambda lib, F: F.vjp(lambda t: t * 2, _x(lib), (_x(lib), _x(lib))),
     RuntimeError, "v should contain a single tensor"),
    ("vjp_v_none_non_scalar", lambda lib, F: F.vjp(lambda t: t * 2, _x(lib)),
     RuntimeError, "v can only be none if the user-provided function returns a single"),
    ("vjp_list_inputs", lambda lib, F: F.vjp(cube_sum, [_x(lib)]),
     TypeError, "must be either a tensor or a tuple of tensors"),
    ("vjp_output_not_tensor", lambda lib, F: F.vjp(lambda t: 3.0, _x(lib)),
     TypeError, "must be either a tensor or a tuple of tensors"),
    ("jvp_v_none", lambda lib, F: F.jvp(lambda t: t * 2, _x(lib)),
     RuntimeError, "v can only be none if the input to the user-provided function is a"),
    ("jvp_v_shape", lambda lib, F: F.jvp(lambda t: t * 2, _xy(lib), (_x(lib), _x(lib))),
     RuntimeError, "entry 1 in v has invalid size"),
    ("jvp_strict_unused",
     lambda lib, F: F.jvp(unused_second, _xy(lib), _xy(lib), strict=True),
     RuntimeError, "output of the user-provided function is independent of input 1"),
    ("jvp_strict_constant_output", lambda lib, F: F.jvp(constant, _x(lib), _x(lib), strict=True),
     RuntimeError, "output 0 of the user-provided function does not require gradients"),
    ("jacobian_strict_unused", lambda lib, F: F.jacobian(unused_second, _xy(lib), strict=True),
     RuntimeError, "output 0 of the user-provided function is independent of input 1"),
    ("jacobian_strict_constant_output",
     lambda lib, F: F.jacobian(constant, _x(lib), strict=True),
     RuntimeError, "output 0 of the user-provided function does not require gradients"),
    ("jacobian_strict_linear_create_graph",
     lambda lib, F: F.jacobian(lambda t: t * 2, _x(lib), create_graph=True, strict=True),
     RuntimeError, "is not allowed in strict mode when create_graph=true"),
    ("jacobian_strict_vectorize",
     lambda lib, F: F.jacobian(cube_sum, _x(lib), strict=True, vectorize=True),
     RuntimeError, "strict=true.{0,2} and .{0,2}vectorized?=true.{0,2} are not supported"),
    ("jacobian_bad_strategy", lambda lib, F: F.jacobian(cube_sum, _x(lib), strategy="sideways"),
     (ValueError, AssertionError), "strategy to be either \"forward-mode\" or \"reverse-mode\""),
    ("jacobian_forward_not_vectorized",
     lambda lib, F: F.jacobian(cube_sum, _x(lib), strategy="forward-mode"),
     NotImplementedError, "only implemented for .?vectorize=true"),
    ("jacobian_forward_create_graph",
     lambda lib, F: F.jacobian(cube_sum, _x(lib), create_graph=True, vectorize=True,
                               strategy="forward-mode"),
     NotImplementedError, "create_graph=true.{0,2} and .?strategy=\"forward-mode\".{0,2} are not"),
    ("jacobian_forward_strict",
     lambda lib, F: F.jacobian(cube_sum, _x(lib), strict=True, vectorize=True,
                               strategy="forward-mode"),
     RuntimeError, "strict=true.{0,2} and .?strategy=\"forward-mode\".{0,2} are not"),
    ("hessian_strict_linear", lambda lib, F: F.hessian(lambda t: (t * 2).sum(), _x(lib),
                                                       strict=True),
     RuntimeError, "jacobian of the user-provided function with respect to input 0 is "
                   "independent"),
    ("hessian_strict_unused",
     lambda lib, F: F.hessian(lambda x, y: (x ** 3).sum(), _xy(lib), strict=True),
     RuntimeError, "with respect to input 1 is independent of the input"),
    ("hessian_not_scalar", lambda lib, F: F.hessian(lambda t: t ** 2, _x(lib)),
     RuntimeError, "should contain a single element"),
    ("hessian_tuple_output", lambda lib, F: F.hessian(lambda t: (t.sum(),), _x(lib)),
     RuntimeError, "should return a single tensor"),
    ("hessian_bad_strategy",
     lambda lib, F: F.hessian(cube_sum, _x(lib), outer_jacobian_strategy="sideways"),
     (ValueError, AssertionError), "strategy to be either \"forward-mode\" or \"reverse-mode\""),
    ("hessian_forward_not_vectorized",
     lambda lib, F: F.hessian(cube_sum, _x(lib), outer_jacobian_strategy="forward-mode"),
     NotImplementedError, "only implemented for .?vectorize=true"),
    ("vhp_strict_unused",
     lambda lib, F: F.vhp(lambda x, y: (x ** 3).sum(), _xy(lib), _xy(lib), strict=True),
     RuntimeError, "independent of input 1"),
    ("vhp_strict_linear", lambda lib, F: F.vhp(lambda t: (t * 2).sum(), _x(lib), _x(lib),
                                               strict=True),
     RuntimeError, "jacobian of the user-provided function with respect to input 0 is "
                   "independent"),
    ("vhp_not_scalar", lambda lib, F: F.vhp(lambda t: t ** 2, _x(lib), _x(lib)),
     RuntimeError, "the tensor returned by the function given to vhp should contain a single"),
    ("vhp_tuple_output", lambda lib, F: F.vhp(lambda t: (t.sum(),), _x(lib), _x(lib)),
     RuntimeError, "the function given to vhp should return a single tensor"),
    ("vhp_v_none", lambda lib, F: F.vhp(cube_sum, _x(lib)),
     RuntimeError, "v can only be none if the input to the user-provided function is a"),
    ("hvp_strict_unused",
     lambda lib, F: F.hvp(lambda x, y: (x ** 3).sum(), _xy(lib), _xy(lib), strict=True),
     RuntimeError, "independent of input 1"),
    ("hvp_v_shape", lambda lib, F: F.hvp(cube_sum, _x(lib), _x(lib, 2)),
     RuntimeError, "v has invalid size"),
    ("hvp_not_scalar", lambda lib, F: F.hvp(lambda t: t ** 2, _x(lib), _x(lib)),
     RuntimeError, "the tensor returned by the function given to hvp should contain a single"),
]


@pytest.mark.parametrize("name,call,exc,phrase", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, call, exc, phrase):
    torch_exc, ember_exc = (exc[1], exc[0]) if isinstance(exc, tuple) else (exc, exc)
    with pytest.raises(torch_exc, match="(?i)" + phrase.replace("(", r"\(")):
        call(*LIBS["torch"])
    with pytest.raises(ember_exc, match="(?i)" + phrase.replace("(", r"\(")) as info:
        call(*LIBS["ember"])
    assert isinstance(info.value, EmberError)
    function = name.split("_")[0]
    assert str(info.value).startswith(f"{function}: "), str(info.value)


def test_user_errors_from_the_function_pass_through():
    def boom(t):
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        AF.jacobian(boom, _x(ember))


def test_reachable_lazily_from_ember_autograd():
    code = ("import sys, ember\n"
            "assert 'ember.autograd.functional' not in sys.modules\n"
            "F = ember.autograd.functional\n"
            "from ember.autograd.functional import jacobian, hessian, vjp, jvp, vhp, hvp\n"
            "import ember.autograd.functional as G\n"
            "assert F is G is sys.modules['ember.autograd.functional'] and jacobian is F.jacobian\n"
            "assert not hasattr(ember.autograd, 'no_such_name')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
