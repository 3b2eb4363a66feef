"""Autograd of views and in-place ops (ember/autograd/views.py), checked against torch: each case
is written once against a module handle ``lib`` (``ember`` or ``torch``) and run on both."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

rng = np.random.default_rng(7)


def _t(lib, a, requires_grad=False):
    return lib.tensor(np.array(a), requires_grad=requires_grad)


def _run_both(case, arrays, requires):
    """Run ``case(lib, *tensors)`` (returns a scalar loss) on torch and ember; compare the loss
    and the gradients of the inputs that require grad."""
    out = {}
    for lib in (torch, ember):
        ts = [_t(lib, a, r) for a, r in zip(arrays, requires)]
        loss = case(lib, *ts)
        loss.backward()
        out[lib] = (loss.detach().numpy().copy(),
                    [t.grad.numpy().copy() if r else None for t, r in zip(ts, requires)])
    (lt, gt), (le, ge) = out[torch], out[ember]
    np.testing.assert_allclose(le, lt, rtol=1e-6, atol=1e-9)
    for a, b in zip(ge, gt):
        if b is not None:
            assert a is not None
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)


# ------------------------------------------------------------------ views taken before in-place
def _view_before_relu(lib, a, w):
    h = a @ w
    flat = h.view(-1)
    h.relu_()
    return (flat * lib.arange(flat.shape[0], dtype=flat.dtype)).sum()


def _views_before_inplace_on_view(lib, x):
    y = x * 1
    v = y.view(3, 4)          # taken before the in-place op on another view
    col = y.t()[1]
    y[1:].mul_(3)
    return (v * v).sum() + col.sum() + y.sum()


def test_view_taken_before_inplace_on_its_base_sees_the_new_history():
    a = np.array([[1.0], [-1.0], [2.0]])
    w = np.array([[1.0, -1.0]])
    _run_both(_view_before_relu, [a, w], [False, True])
    _run_both(_views_before_inplace_on_view, [rng.standard_normal((4, 3))], [True])


# ------------------------------------------------------------ writes into views of plain tensors
def _write_into_plain_buffer(lib, w):
    buf = lib.zeros(3, dtype=w.dtype)
    buf[1:2].copy_(w * 3)
    return buf.sum() + w.sum()


def _rnn_out_buffer(lib, x, wh, wx):
    steps, n = x.shape[0], wh.shape[0]
    out = lib.zeros(steps, n, dtype=x.dtype)
    early = out[0]            # a view taken before any write
    h = lib.zeros(n, dtype=x.dtype)
    for t in range(steps):
        h = lib.tanh(h @ wh + x[t] @ wx)
        out[t].copy_(h)
    return (out * out).sum() + early.sum() * 2


def test_write_into_view_of_plain_tensor_makes_the_base_require_grad():
    _run_both(_write_into_plain_buffer, [np.array([1.0])], [True])
    _run_both(_rnn_out_buffer, [rng.standard_normal((4, 2)), rng.standard_normal((3, 3)) * 0.5,
                                rng.standard_normal((2, 3))], [False, True, True])
    w = ember.ones(1, requires_grad=True)
    buf = ember.zeros(3)
    early = buf[0:1]
    buf[1:2].copy_(w * 3)
    assert buf.grad_fn.name() == "CopySlices" and buf.requires_grad
    assert early.requires_grad and early.grad_fn is not None
    (early * 2).sum().backward()     # early's region of buf holds no gradient
    np.testing.assert_array_equal(w.grad.numpy(), [0.0])


# ------------------------------------------------------ in-place ops on views that require grad
def _vit_pos_embedding(lib, patches, pos):
    x = patches * 1
    x = x.reshape(2, 3, 4).transpose(1, 2)   # (batch, tokens, dim)
    x += pos
    return (x * x).sum()


def _column_assignment(lib, x, v):
    y = x * 2
    y[:, 0] = v * 3
    return (y * y).sum()


def _masked_inplace(lib, x):
    y = x * 1
    y[y > 0] *= 2
    return (y * y).sum()


def _view_add_(lib, x, b):
    y = x.sin()
    y.view(-1).add_(b)
    return (y * y).sum()


def _t_mul_(lib, x, s):
    y = x * 1
    y.t().mul_(s)
    return (y * y).sum()


def _view_of_view(lib, x):
    y = x * 1
    v = y[1:].t()[0]
    v.mul_(v.detach() + 1)
    v2 = y.view(-1)[2:5]
    v2.sin_()
    return (y * y).sum()


def _inplace_with_self_on_view(lib, x):
    y = x * 1
    v = y[0]
    v.add_(v, alpha=2)   # the very same memory: allowed
    v.mul_(3)
    return (y * lib.arange(6.0, dtype=y.dtype).reshape(2, 3)).sum()


def _view_relu_then_base_use(lib, x, w):
    h = x @ w
    h.diagonal().mul_(3)
    h[:, 1:].relu_()
    return (h * h).sum()


def _two_bases_one_chain(lib, x, y):
    a = x * 1
    b = y * 1
    a[0].copy_(b[1])
    b[1].mul_(a[1])
    return (a * b).sum()


@pytest.mark.parametrize("case,shapes,requires", [
    (_vit_pos_embedding, [(2, 12), (4, 3)], [True, True]),
    (_column_assignment, [(3, 4), (3,)], [True, True]),
    (_masked_inplace, [(3, 4)], [True]),
    (_view_add_, [(2, 3), (6,)], [True, True]),
    (_t_mul_, [(2, 3), (3, 1)], [True, True]),
    (_view_of_view, [(3, 3)], [True]),
    (_inplace_with_self_on_view, [(2, 3)], [True]),
    (_view_relu_then_base_use, [(3, 2), (2, 3)], [True, True]),
    (_two_bases_one_chain, [(2, 3), (2, 3)], [True, True]),
], ids=lambda v: getattr(v, "__name__", None))
def test_inplace_on_views_of_tensors_that_require_grad_match_torch(case, shapes, requires):
    _run_both(case, [rng.standard_normal(s) for s in shapes], requires)


@pytest.mark.parametrize("write", [
    lambda lib, y: y.real.mul_(2),
    lambda lib, y: y.imag.add_(y.real.detach()),
    lambda lib, y: lib.view_as_real(y)[:, 0].mul_(3),
    lambda lib, y: lib.view_as_real(y).mul_(y.real.clone().unsqueeze(1)),
])
def test_inplace_on_complex_part_views_matches_torch(write):
    z = rng.standard_normal(3) + 1j * rng.standard_normal(3)

    def case(lib, x):
        y = x * 1
        write(lib, y)
        return (y.abs() ** 2).sum()
    _run_both(case, [z], [True])


@pytest.mark.parametrize("write", [
    lambda y: y.as_strided((2,), (2,), 1).mul_(3),
    lambda y: y.unfold(0, 2, 2).mul_(3),
    lambda y: y.view(2, 3).diagonal().exp_(),
    lambda y: y.view(2, 3).narrow(1, 1, 2).pow_(2),
    lambda y: y.view(2, 3).movedim(0, 1)[0].mul_(3),
    lambda y: y.view(1, 6).squeeze(0)[None, 2:].sigmoid_(),
    lambda y: y.view(2, 3)[:, 1:].scatter_(1, type(y)([[1], [0]]).long(), 5.0),
])
def test_inplace_through_other_view_ops_matches_torch(write):
    def case(lib, x):
        y = x * 1
        write(y)
        return (y * y * lib.arange(6.0, dtype=y.dtype)).sum()
    _run_both(case, [rng.standard_normal(6)], [True])


def test_views_have_history_after_rebase():
    x = ember.ones(2, 3, requires_grad=True)
    y = x * 1
    v = y[1]
    v.mul_(2)
    assert y.grad_fn.name() == "CopySlices"
    assert v.grad_fn.next_functions[0][0] is y.grad_fn    # regenerated from the base
    assert y.grad_fn.next_functions[0][0].name() == "MulBackward0"


# ----------------------------------------------------------------------- double backward
def _gradcheck_cases(lib):
    def f1(x, s):
        y = x * 1
        y[1:].mul_(s)
        y.t()[0].sin_()
        return y

    def f2(x, v):
        y = x.sin()
        y[:, 1] = v * v
        y.view(-1)[::2].mul_(y.view(-1)[1::2].clone() + 1)
        return y

    def f3(x, w):
        buf = lib.zeros(3, 2, dtype=x.dtype)
        for t in range(3):
            buf[t].copy_(lib.tanh(x[t] * w))
        return buf

    def f4(x):
        y = x * 1
        y.as_strided((2,), (2,), 1).mul_(y[:2].clone())
        y.view(2, 3).t()[1].exp_()
        return y

    return [(f1, [(3, 2), (1,)]), (f2, [(2, 3), (2,)]), (f3, [(3, 2), (2,)]), (f4, [(6,)])]


def test_gradcheck_and_gradgradcheck_through_views_and_inplace_ops():
    for fn, shapes in _gradcheck_cases(ember):
        inputs = [ember.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]
        assert ember.autograd.gradcheck(fn, inputs)
        assert ember.autograd.gradgradcheck(fn, inputs)


def test_double_backward_through_copy_slices_matches_torch():
    x0 = rng.standard_normal((2, 3))
    res = {}
    for lib in (torch, ember):
        x = lib.tensor(x0, requires_grad=True)
        y = x * 1
        y[0].mul_(y[1].detach() + x[1] * x[1])
        (g,) = lib.autograd.grad((y * y).sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), x)
        res[lib] = (g.detach().numpy().copy(), gg.numpy().copy())
    for a, b in zip(res[ember], res[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-10)


# ---------------------------------------------------------------------- errors torch raises
def _error(lib, fn):
    with pytest.raises(RuntimeError) as e:
        fn(lib)
    return str(e.value)


def _both_raise(fn, *phrases):
    for lib in (torch, ember):
        msg = _error(lib, fn)
        for p in phrases:
            assert p in msg, (lib.__name__, msg)


@pytest.mark.parametrize("split", [lambda y: y.unbind(0), lambda y: y.split(1),
                                   lambda y: y.chunk(2)])
def test_inplace_on_an_output_of_a_multi_view_op_is_refused(split):
    def direct(lib):
        y = lib.ones(2, 3, requires_grad=True) * 1
        split(y)[0].mul_(2)

    def view_of_it(lib):
        y = lib.ones(2, 3, requires_grad=True) * 1
        split(y)[0].view(-1).mul_(2)

    def indirect(lib):
        y = lib.ones(2, 3, requires_grad=True) * 1
        a = split(y)[0]
        y.mul_(2)
        return a.grad_fn

    def plain_with_grad_value(lib):
        z = lib.zeros(2, 3)
        split(z)[0].copy_(lib.ones(3, requires_grad=True) * 1)

    multi = "This view is the output of a function that returns multiple views"
    _both_raise(direct, "is a view and is being modified inplace", multi)
    _both_raise(view_of_it, "is a view and is being modified inplace", multi)
    _both_raise(indirect, "its base or another view of its base has been modified inplace", multi)
    _both_raise(plain_with_grad_value, multi)
    z = ember.zeros(2, 3)
    split(z)[0].mul_(2)          # nothing requires grad: allowed, as in torch


def test_inplace_on_a_view_of_a_leaf_that_requires_grad_is_refused():
    def view_of_leaf(lib):
        x = lib.ones(3, requires_grad=True)
        x[0:2].mul_(2)

    _both_raise(view_of_leaf, "a view of a leaf Variable that requires grad is being used in an "
                              "in-place operation.")
    for lib in (torch, ember):
        x = lib.ones(3, requires_grad=True)
        with lib.no_grad():
            x[0:2].mul_(2)       # allowed outside autograd
        np.testing.assert_array_equal(x.detach().numpy(), [2, 2, 1])


def test_inplace_on_a_view_made_in_no_grad_mode_is_refused():
    def of_leaf(lib):
        x = lib.ones(3, requires_grad=True)
        with lib.no_grad():
            v = x[0:2]
        v.mul_(2)

    def of_non_leaf(lib):
        y = lib.ones(3, requires_grad=True) * 1
        with lib.no_grad():
            v = y[0:2]
        v.mul_(2)

    def base_modified(lib):
        y = lib.ones(3, requires_grad=True) * 1
        with lib.no_grad():
            v = y[0:2]
        y.mul_(2)
        return v.grad_fn

    nograd = "A view was created in no_grad mode and"
    _both_raise(of_leaf, nograd, "is being modified inplace with grad mode enabled")
    _both_raise(of_non_leaf, nograd, "is being modified inplace with grad mode enabled")
    _both_raise(base_modified, nograd, "its base or another view of its base has been modified")


def test_detached_views_are_outside_the_graph():
    res = {}
    for lib in (torch, ember):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2
        d = y.detach()[0:2]
        d.mul_(10)               # allowed: detach() gives a view outside autograd
        y.sum().backward()       # MulBackward by a number kept nothing that changed
        res[lib] = (y.detach().numpy().copy(), x.grad.numpy().copy())
    for a, b in zip(res[ember], res[torch]):
        np.testing.assert_array_equal(a, b)


def test_inplace_on_a_view_of_a_saved_result_is_caught():
    def fn(lib):
        x = lib.ones(2, 3, requires_grad=True)
        y = x.exp()
        y.view(-1).add_(1)
        y.sum().backward()
    _both_raise(fn, "modified by an inplace operation")


def test_detach_in_place_of_a_view_is_refused():
    def fn(lib):
        y = lib.ones(3, requires_grad=True) * 1
        y[0:2].detach_()
    _both_raise(fn, "Can't detach views in-place. Use detach() instead.")


# -------------------------------------------------------------------- backward twice, .data
def test_backward_twice_through_nodes_that_saved_no_tensor():
    for lib in (torch, ember):
        x = lib.ones(3, requires_grad=True)
        s = (x.expand(2, 3) + 1).sum()
        s.backward()
        s.backward()             # expand, add and sum keep no tensor: no "graph freed" error
        np.testing.assert_array_equal(x.grad.numpy(), [4, 4, 4])

    def saved(lib):
        x = lib.ones(3, requires_grad=True)
        s = x.exp().sum()
        s.backward()
        s.backward()
    _both_raise(saved, "Trying to backward through the graph a second time")


def test_in_place_change_through_data_is_not_tracked():
    res = {}
    for lib in (torch, ember):
        x = lib.tensor([0.5, 1.0, 2.0], requires_grad=True)
        y = x.exp()
        d = y.data
        d.mul_(2)                 # its own version counter: no "modified by an inplace" error
        assert y._version == 0 and d._version == 1
        (y * y).sum().backward()
        res[lib] = x.grad.numpy().copy()
    np.testing.assert_allclose(res[ember], res[torch], rtol=1e-6)


# --------------------------------------------------------------------------------- overlap
@pytest.mark.parametrize("write", [
    lambda x: x.add_(x.t()), lambda x: x[1:].add_(x[:-1]), lambda x: x.mul_(x[0]),
    lambda x: x.clamp_(min=x[0, 0]), lambda x: x.__setitem__(slice(1, None), x[:-1]),
    lambda x: x.__setitem__(ember.tensor([0, 1]) if isinstance(x, ember.Tensor) else
                            torch.tensor([0, 1]), x[2:]),
    lambda x: x[1:].copy_(x[:-1]), lambda x: x.view(-1)[1:].sub_(x.view(-1)[:-1]),
])
def test_partially_overlapping_inplace_ops_are_refused(write):
    def fn(lib):
        write(lib.ones(3, 3))
    _both_raise(fn, "unsupported operation: some elements of the input tensor and the "
                    "written-to tensor refer to a single memory location")


@pytest.mark.parametrize("write", [
    lambda x: x.add_(x), lambda x: x.mul_(x.view(3, 3)), lambda x: x[1:].mul_(x[0]),
    lambda x: x[:1].add_(x[2:]), lambda x: x[0].add_(x[:, 0]), lambda x: x.copy_(x.detach()),
    lambda x: x.__setitem__(0, x[1]), lambda x: x.__setitem__(slice(None), x),
    lambda x: x.masked_fill_(x > 4, x[0, 0]), lambda x: x[0, 1].add_(1),
    lambda x: x.view(-1)[4].mul_(x[2, 2]),
])
def test_identical_or_disjoint_memory_is_allowed(write):
    res = {}
    for lib in (torch, ember):
        x = lib.tensor(np.arange(9.0).reshape(3, 3))
        write(x)
        res[lib] = x.numpy().copy()
    np.testing.assert_array_equal(res[ember], res[torch])


def test_writing_an_expanded_tensor_is_refused():
    def fn(lib):
        lib.ones(3).expand(2, 3).mul_(2)
    _both_raise(fn, "more than one element of the written-to tensor refers to a single memory "
                    "location")


def test_inplace_on_a_view_returned_by_a_custom_function_is_refused():
    def fn(lib):
        class Head(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x[0]

            @staticmethod
            def backward(ctx, g):
                return g.expand(2, 3)   # not the real gradient; never reached

        y = lib.ones(2, 3, requires_grad=True) * 1
        Head.apply(y).mul_(2)
    _both_raise(fn, "is a view and is being modified inplace",
                "This view was created inside a custom Function")


def test_inplace_on_a_view_that_is_a_leaf_requiring_grad_is_refused():
    def fn(lib):
        z = lib.zeros(3)
        v = z[0:2]
        v.requires_grad_()
        v.mul_(2)
    _both_raise(fn, "a view of a leaf Variable that requires grad is being used in an in-place "
                    "operation.")


def test_as_strided_backward_keeps_the_geometry_not_the_input():
    res = {}
    for lib in (torch, ember):
        x = lib.tensor(np.arange(6.0), requires_grad=True)
        y = x * 1
        z = (y.as_strided((2, 2), (1, 2), 1) * 3).sum()
        y.add_(1)                # torch's AsStridedBackward0 saved no tensor: still fine
        z.backward()
        res[lib] = x.grad.numpy().copy()
    np.testing.assert_array_equal(res[ember], res[torch])


@pytest.mark.parametrize("write", [lambda y: y.mul_(3), lambda y: y[1:].mul_(3)])
def test_retain_grad_follows_the_tensors_latest_value(write):
    res = {}
    for lib in (torch, ember):
        x = lib.ones(3, requires_grad=True)
        y = x * 2
        y.retain_grad()
        write(y)
        (y * lib.arange(3.0)).sum().backward()
        res[lib] = y.grad.numpy().copy()
    np.testing.assert_array_equal(res[ember], res[torch])


def test_inplace_on_as_strided_view_of_a_tensor_not_owning_its_storage_is_unsupported():
    w = ember.ones(2, dtype=ember.float64, requires_grad=True)
    b = ember.from_numpy(np.zeros(8)[2:])     # its storage starts before it
    with pytest.raises(ember.errors.UnsupportedError, match="as_strided view"):
        b.as_strided((2,), (2,), 3).copy_(w * 2)
    assert not b.requires_grad and b.tolist() == [0.0] * 6     # refused before writing
    y = (ember.ones(8, dtype=ember.float64, requires_grad=True) * 1)[2:]
    y.as_strided((2,), (2,), 3).mul_(w)       # a view of a tensor owning its storage: fine
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0])
