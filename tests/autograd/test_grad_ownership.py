"""Autograd never writes into memory the user holds.

Each script is written once against a module handle ``lib`` (``ember`` or ``torch``), run on both,
and everything the user still holds afterwards is compared: values, and whether ``.grad`` kept
its identity (a leaf's ``.grad`` accumulates in place, as in torch; nothing else is written).
"""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _x(lib, vals=(1.0, 2.0, 3.0)):
    return lib.tensor(list(vals), dtype=lib.float64, requires_grad=True)


def _g(lib, vals=(1.0, 2.0, 3.0)):
    return lib.tensor(list(vals), dtype=lib.float64)


def gradient_arg_backward_twice(lib):
    x, g = _x(lib), _g(lib)
    (x + 1.0).backward(g)
    (x + 1.0).backward(g)
    return {"g": g, "x.grad": x.grad}


def gradient_arg_on_leaf_twice(lib):
    x, g = _x(lib), _g(lib)
    x.backward(g)
    x.backward(g)
    return {"g": g, "x.grad": x.grad}


def gradient_arg_backward_inputs(lib):
    x, g = _x(lib), _g(lib)
    (x + 1.0).backward(g, inputs=[x])
    (x + 1.0).backward(g)
    return {"g": g, "x.grad": x.grad}


def gradient_arg_create_graph_then_plain(lib):
    x, g = _x(lib), _g(lib)
    (x + 1.0).backward(g, create_graph=True)
    (x + 1.0).backward(g)
    return {"g": g, "x.grad": x.grad}


def hook_saved_on_intermediate(lib):
    x = _x(lib)
    saved = []
    for _ in range(2):
        y = x + 1.0
        y.register_hook(saved.append)
        (y * 3.0).sum().backward()
    return {"saved0": saved[0], "saved1": saved[1], "x.grad": x.grad}


def hook_saved_on_leaf(lib):
    x = _x(lib)
    saved = []
    x.register_hook(saved.append)
    (x * 3.0).sum().backward()
    (x * 2.0).sum().backward()
    return {"saved0": saved[0], "saved1": saved[1], "x.grad": x.grad}


def hook_returns_user_tensor(lib):
    x, h = _x(lib), _g(lib, (5.0, 6.0, 7.0))
    x.register_hook(lambda grad: h)
    (x * 3.0).sum().backward()
    (x * 3.0).sum().backward()
    return {"h": h, "x.grad": x.grad}


def leaf_hook_result_with_grad_and_inputs(lib):
    x = _x(lib)
    calls = []
    x.register_hook(lambda grad: (calls.append(1), grad * 2.0)[1])
    (gx,) = lib.autograd.grad((x * 3.0).sum(), x)
    (x * 3.0).sum().backward(inputs=[x])
    return {"gx": gx, "x.grad": x.grad, "hook calls": len(calls)}


def autograd_grad_result_reused(lib):
    x = _x(lib)
    (r,) = lib.autograd.grad((x * 3.0).sum(), x)
    (x + 1.0).backward(r)
    (x + 1.0).backward(r)
    return {"r": r, "x.grad": x.grad}


def retained_grad_create_graph_then_plain(lib):
    x = _x(lib)
    y = x + 1.0
    y.retain_grad()
    out = (y * 3.0).sum()
    out.backward(create_graph=True)
    r = y.grad
    out.backward()
    return {"r": r, "y.grad": y.grad, "x.grad": x.grad, "y.grad is r": y.grad is r}


def leaf_grad_identity_across_backwards(lib):
    x = _x(lib)
    (x * 3.0).sum().backward()
    g1 = x.grad
    (x * 2.0).sum().backward()
    same_plain = x.grad is g1
    (x * 4.0).sum().backward(create_graph=True)
    same_create = x.grad is g1
    return {"g1": g1, "x.grad": x.grad, "same after plain": same_plain,
            "same after create_graph": same_create}


def user_assigned_grad_accumulates_in_place(lib):
    x, u = _x(lib), _g(lib, (10.0, 20.0, 30.0))
    x.grad = u
    (x * 3.0).sum().backward()
    return {"u": u, "x.grad": x.grad, "x.grad is u": x.grad is u}


# Guards of the engine's in-place reuse of its own buffers: these pass on the old engine too
# (it never accumulated into its buffers in place), and fail on an engine that reuses a buffer
# something outside it has seen.
def captured_grad_then_accumulated(lib):
    x = _x(lib)
    y = x * 2.0
    w = y * 5.0  # made before z, so z's gradient reaches y's buffer first
    z = y + 1.0
    gz, gx = lib.autograd.grad((z * 3.0 + w).sum(), [z, x])
    return {"gz": gz, "gx": gx}


def hooked_grad_then_accumulated(lib):
    x = _x(lib)
    saved = []
    y = x * 2.0
    w = y * 5.0
    z = y + 1.0
    z.register_hook(saved.append)
    (z * 3.0 + w).sum().backward()
    return {"saved": saved[0], "x.grad": x.grad}


def shared_passthrough_two_leaves(lib):
    a, b = _x(lib), _x(lib, (4.0, 5.0, 6.0))
    for _ in range(2):
        ((a + b) * 3.0).sum().backward()
    a.grad.mul_(10.0)
    return {"a.grad": a.grad, "b.grad": b.grad}


REGRESSIONS = [gradient_arg_backward_twice, gradient_arg_on_leaf_twice,
               gradient_arg_backward_inputs, gradient_arg_create_graph_then_plain,
               hook_saved_on_intermediate, hook_saved_on_leaf, hook_returns_user_tensor,
               leaf_hook_result_with_grad_and_inputs,
               autograd_grad_result_reused, retained_grad_create_graph_then_plain]
BEHAVIOUR = [leaf_grad_identity_across_backwards, user_assigned_grad_accumulates_in_place,
             captured_grad_then_accumulated, hooked_grad_then_accumulated,
             shared_passthrough_two_leaves]


def _value(v, lib):
    if isinstance(v, lib.Tensor):
        return v.detach().numpy().copy()
    return v


@pytest.mark.parametrize("script", REGRESSIONS + BEHAVIOUR, ids=lambda s: s.__name__)
def test_held_tensors_match_torch(script):
    mine = {k: _value(v, ember) for k, v in script(ember).items()}
    ref = {k: _value(v, torch) for k, v in script(torch).items()}
    assert mine.keys() == ref.keys()
    for k in ref:
        if isinstance(ref[k], np.ndarray):
            np.testing.assert_array_equal(mine[k], ref[k], err_msg=f"{script.__name__}: {k}")
        else:
            assert mine[k] == ref[k], f"{script.__name__}: {k} is {mine[k]}, torch {ref[k]}"

