"""Higher-order autograd on functions, as ``torch.autograd.functional``: ``vjp``, ``jvp``,
``jacobian``, ``hessian``, ``vhp`` and ``hvp``.

Each takes a function of Tensors and the point (a Tensor or a tuple of Tensors) and returns its
results shaped as torch's: a single Tensor where the inputs (outputs) were a single Tensor, a tuple
where they were a tuple, a tuple of tuples for the Jacobian of several outputs and inputs or the
Hessian of several inputs. The function runs on fresh tensors that require grad (views of the
inputs under ``create_graph=True``, so the results stay differentiable with respect to them;
detached copies otherwise), and every product is computed with ``ember.autograd.grad``:

- ``jvp`` and ``hvp`` use the double-backward trick (the backward of the backward is linear in its
  seed, so differentiating it with respect to a seed of zeros gives the forward product), as torch
  does; ember has no forward-mode AD;
- ``jacobian`` runs one backward per output element; ``vectorize=True`` (torch's vmap) gives the
  same result by the same loop, and ``strategy="forward-mode"`` (which torch runs only vectorized)
  computes the same Jacobian in reverse mode, with the dtype of the outputs as torch's forward mode.

An input the outputs do not depend on gets zeros, or an error under ``strict=True``.
"""
from ember.autograd._generated import functions as _G
from ember.autograd.engine import grad as _grad
from ember.autograd.grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError, UnsupportedError
from ember.tensor import Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]

_STRATEGIES = ("forward-mode", "reverse-mode")
_OUTPUTS = "outputs of the user-provided function"


def _tupled(value, what, fn):
    """(whether ``value`` was a tuple, ``value`` as a tuple of Tensors). A list is not a tuple
    here, as in torch: it is one (wrong) value."""
    was_tuple = isinstance(value, tuple)
    items = value if was_tuple else (value,)
    for i, item in enumerate(items):
        if not isinstance(item, Tensor):
            which = f"the value at index {i}" if was_tuple else f"the given {what}"
            raise EmberTypeError(f"{fn}: the {what} must be either a Tensor or a tuple of "
                                 f"Tensors but {which} has type {type(item)}.")
    return was_tuple, items


def _untupled(result, was_tuple):
    """Undo ``_tupled`` on a result: ``was_tuple`` is one flag, or (outer, inner) flags for a
    tuple of tuples."""
    if isinstance(was_tuple, tuple):
        outer, inner = was_tuple
        if not inner:
            result = tuple(row[0] for row in result)
        return result if outer else result[0]
    return result if was_tuple else result[0]


def _fresh(tensors, create_graph, need_graph):
    """New tensor objects for ``tensors``, so that the ones ``func`` receives are told apart from
    the same tensors captured by ``func``: a view (still in the caller's graph) under
    ``create_graph`` for one that requires grad, else a detached copy requiring grad when
    ``need_graph``."""
    out = []
    for t in tensors:
        if create_graph and t.requires_grad:
            out.append(t.clone() if getattr(t, "is_sparse", False) else t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(need_graph))
    return tuple(out)


def _released(result, create_graph):
    """``result`` (Tensors in nested tuples) without history unless ``create_graph``."""
    if isinstance(result, Tensor):
        return result if create_graph else result.detach()
    return tuple(_released(r, create_graph) for r in result)


def _check_v(v, like, like_is_tuple, fn):
    if len(v) != len(like):
        if like_is_tuple:
            raise EmberRuntimeError(f"{fn}: v is a tuple of invalid length: should be "
                                    f"{len(like)} but got {len(v)}.")
        raise EmberRuntimeError(f"{fn}: the given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, like)):
        if a.shape != b.shape:
            entry = f"entry {i} in v" if like_is_tuple else "v"
            raise EmberRuntimeError(f"{fn}: {entry} has invalid size: should be {b.size()} but "
                                    f"got {a.size()}.")


def _prepare_v(v, like, like_is_tuple, create_graph, fn, about):
    """``v`` as a tuple checked against ``like``; None only where ``like`` is one element
    (``about`` leads to "a single Tensor": "the user-provided function returns")."""
    if v is None:
        if len(like) != 1 or like[0].numel() != 1:
            raise EmberRuntimeError(f"{fn}: the vector v can only be None if {about} a "
                                    "single Tensor with a single element.")
        return None
    _, v = _tupled(v, "v", fn)
    v = _fresh(v, create_graph, need_graph=False)
    _check_v(v, like, like_is_tuple, fn)
    return v


def _check_requires_grad(tensors, kind, strict, fn):
    """Under ``strict``: every one of ``tensors`` (the function's outputs, or gradients the
    double-backward trick differentiates again) must be connected to the inputs."""
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None:
            raise EmberRuntimeError(f"{fn}: the output of the user-provided function is "
                                    f"independent of input {i}. This is not allowed in strict "
                                    "mode.")
        if t.requires_grad:
            continue
        if kind == "outputs":
            raise EmberRuntimeError(f"{fn}: output {i} of the user-provided function does not "
                                    "require gradients. The outputs must be computed in a "
                                    "differentiable manner from the input when running in "
                                    "strict mode.")
        if kind == "grad_inputs":
            raise EmberRuntimeError(f"{fn}: the gradient with respect to input {i} is "
                                    "independent of the inputs of the user-provided function. "
                                    "This is not allowed in strict mode.")
        if kind == "jacobian":
            raise EmberRuntimeError(f"{fn}: while computing the hessian, found that the "
                                    "jacobian of the user-provided function with respect to "
                                    f"input {i} is independent of the input. This is not "
                                    "allowed in strict mode. You should ensure that your "
                                    "function is twice differentiable and that the jacobian "
                                    "depends on the inputs (this would be violated by a linear "
                                    "function for example).")
        raise EmberRuntimeError(f"{fn}: the hessian of the user-provided function with respect "
                                f"to input {i} is independent of the input. This is not "
                                "allowed in strict mode. You should ensure that your function "
                                "is thrice differentiable and that the hessian depends on the "
                                "inputs.")


def _grads(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """``autograd.grad`` over the outputs that require grad (None ones skipped), None for an
    input nothing reaches; all None without calling the engine when no output requires grad."""
    seeds = (None,) * len(outputs) if grad_outputs is None else grad_outputs
    pairs = [(o, g) for o, g in zip(outputs, seeds) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    outs, gs = zip(*pairs)
    return _grad(outs, inputs, gs, retain_graph=retain_graph, create_graph=create_graph,
                 allow_unused=True)


_INDEPENDENT = {
    "back": "the output of the user-provided function is independent of input {i}. This is "
            "not allowed in strict mode.",
    "back_trick": "the gradient with respect to the input is independent of entry {i} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients. This is not allowed in strict mode.",
    "double_back": "the jacobian of the user-provided function is independent of input {i}. "
                   "This is not allowed in strict mode.",
    "double_back_trick": "the hessian of the user-provided function is independent of entry "
                         "{i} in the grad_jacobian. This is not allowed in strict mode as it "
                         "prevents from using the double backward trick to replace forward "
                         "mode AD.",
}


def _zeros_for_unused(grads, like, strict, create_graph, stage, fn):
    """``grads`` with zeros shaped as ``like[i]`` where nothing flowed (an error under
    ``strict``, as is a result cut off from the inputs under ``strict`` and ``create_graph``)."""
    out = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise EmberRuntimeError(f"{fn}: " + _INDEPENDENT[stage].format(i=i))
            g = _G.zeros_like(like[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if stage.startswith("double") else "jacobian"
            raise EmberRuntimeError(f"{fn}: the {what} of the user-provided function is "
                                    f"independent of input {i}. This is not allowed in strict "
                                    "mode when create_graph=True.")
        out.append(g)
    return tuple(out)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """The vector-Jacobian product ``v^T J`` of ``func`` at ``inputs``.

    Returns ``(func(*inputs), vjp)``, the product shaped as the inputs. ``v`` matches the outputs
    and may be None when ``func`` returns a single one-element Tensor. ``create_graph=True``
    keeps both differentiable; ``strict=True`` raises for an input the outputs do not depend on
    (zeros otherwise).
    """
    with enable_grad():
        inputs_tuple, inputs = _tupled(inputs, "inputs", "vjp")
        inputs = _fresh(inputs, create_graph, need_graph=True)
        outputs_tuple, outputs = _tupled(func(*inputs), _OUTPUTS, "vjp")
        _check_requires_grad(outputs, "outputs", strict, "vjp")
        v = _prepare_v(v, outputs, outputs_tuple, create_graph, "vjp",
                       "the user-provided function returns")
    with set_grad_enabled(create_graph or is_grad_enabled()):
        grads = _grads(outputs, inputs, v, create_graph=create_graph)
        result = _zeros_for_unused(grads, inputs, strict, create_graph, "back", "vjp")
    return (_untupled(_released(outputs, create_graph), outputs_tuple),
            _untupled(_released(result, create_graph), inputs_tuple))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """The Jacobian-vector product ``J v`` of ``func`` at ``inputs``, by the double-backward
    trick (as torch; ember has no forward-mode AD).

    Returns ``(func(*inputs), jvp)``, the product shaped as the outputs. ``v`` matches the inputs
    and may be None for a single one-element input.
    """
    with enable_grad():
        inputs_tuple, inputs = _tupled(inputs, "inputs", "jvp")
        inputs = _fresh(inputs, create_graph, need_graph=True)
        v = _prepare_v(v, inputs, inputs_tuple, create_graph, "jvp",
                       "the input to the user-provided function is")
        outputs_tuple, outputs = _tupled(func(*inputs), _OUTPUTS, "jvp")
        _check_requires_grad(outputs, "outputs", strict, "jvp")
        # the backward is linear in its seed: any finite seed gives the same double backward
        seeds = tuple(_G.zeros_like(o).requires_grad_() for o in outputs)
        grad_inputs = _grads(outputs, inputs, seeds, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict, "jvp")
    with set_grad_enabled(create_graph or is_grad_enabled()):
        grads = _grads(grad_inputs, seeds, v, create_graph=create_graph)
        result = _zeros_for_unused(grads, outputs, strict, create_graph, "back_trick", "jvp")
    return (_untupled(_released(outputs, create_graph), outputs_tuple),
            _untupled(_released(result, create_graph), outputs_tuple))


def _reverse_jacobian(func, inputs, create_graph, strict, vectorize, fn):
    """(whether the outputs were a tuple, the outputs, jac) with ``jac[i][j]`` = d output i /
    d input j, shaped ``output_i.shape + input_j.shape``; ``inputs`` a tuple. Runs under
    enable_grad."""
    inputs = _fresh(inputs, create_graph, need_graph=True)
    outputs_tuple, outputs = _tupled(func(*inputs), _OUTPUTS, fn)
    _check_requires_grad(outputs, "outputs", strict, fn)
    if vectorize and strict:
        raise EmberRuntimeError(f"{fn}: strict=True and vectorize=True are not supported "
                                "together. Please either set strict=False or vectorize=False.")
    jac = []
    for i, out in enumerate(outputs):
        rows = [[] for _ in inputs]
        flat = out.reshape(-1)
        for k in range(out.numel()):
            grads = _grads((flat[k],), inputs, retain_graph=True, create_graph=create_graph)
            for j, (g, inp) in enumerate(zip(grads, inputs)):
                if g is None:
                    if strict:
                        raise EmberRuntimeError(f"{fn}: output {i} of the user-provided "
                                                f"function is independent of input {j}. This "
                                                "is not allowed in strict mode.")
                    g = _G.zeros_like(inp)
                elif strict and create_graph and not g.requires_grad:
                    raise EmberRuntimeError(f"{fn}: the jacobian of the user-provided function "
                                            f"is independent of input {j}. This is not allowed "
                                            "in strict mode when create_graph=True.")
                rows[j].append(g)
        blocks = []
        for row, inp in zip(rows, inputs):
            shape = tuple(out.shape) + tuple(inp.shape)
            # an output without elements has an empty Jacobian (torch's stack of none raises)
            blocks.append(_G.stack(row, 0).view(shape) if row else inp.new_zeros(shape))
        jac.append(tuple(blocks))
    return outputs_tuple, outputs, tuple(jac)


def _jacobian(func, inputs, create_graph, strict, vectorize, strategy, fn):
    """``jacobian``, its errors naming ``fn`` (``hessian`` calls it too)."""
    if strategy not in _STRATEGIES:
        raise EmberValueError(f"{fn}: expected strategy to be either \"forward-mode\" or "
                              f"\"reverse-mode\", got {strategy!r}. Hint: if your function has "
                              "more outputs than inputs, \"forward-mode\" tends to be more "
                              "performant. Otherwise, prefer to use \"reverse-mode\".")
    forward = strategy == "forward-mode"
    if forward:
        if create_graph:
            raise UnsupportedError(f"{fn}: create_graph=True and strategy=\"forward-mode\" are "
                                   "not supported together (as in torch). Please either set "
                                   "create_graph=False or strategy=\"reverse-mode\".")
        if strict:
            raise EmberRuntimeError(f"{fn}: strict=True and strategy=\"forward-mode\" are not "
                                    "supported together (as in torch). Please either set "
                                    "strict=False or strategy=\"reverse-mode\".")
    inputs_tuple, inputs = _tupled(inputs, "inputs", fn)
    if forward and not vectorize:
        raise UnsupportedError(f"{fn}: computing the Jacobian with strategy=\"forward-mode\" "
                               "(or a forward-over-reverse Hessian) is only implemented for "
                               "vectorize=True (as in torch).")
    with enable_grad():
        outputs_tuple, outputs, jac = _reverse_jacobian(func, inputs, create_graph, strict,
                                                        vectorize, fn)
    if forward:   # torch's forward mode gives the outputs' dtype
        jac = tuple(tuple(b if b.dtype == out.dtype else b.to(out.dtype) for b in row)
                    for row, out in zip(jac, outputs))
    return _untupled(_released(jac, create_graph), (outputs_tuple, inputs_tuple))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: a Tensor for one input and one output, a tuple
    when one of them is a tuple, else a tuple of tuples with ``J[i][j]`` of shape
    ``outputs[i].shape + inputs[j].shape``.

    ember has no vmap: ``vectorize=True`` computes the same result one backward per output
    element. ``strategy="forward-mode"`` needs ``vectorize=True`` (as in torch) and is computed in
    reverse mode, with the outputs' dtype (ember has no forward-mode AD).
    """
    return _jacobian(func, inputs, create_graph, strict, vectorize, strategy, "jacobian")


def _scalar_outputs(result, strict, fn):
    """``result`` of the function as a one-tuple, checked to be a single one-element Tensor."""
    outputs_tuple, outputs = _tupled(result, _OUTPUTS, fn)
    _check_requires_grad(outputs, "outputs", strict, fn)
    if outputs_tuple:
        raise EmberRuntimeError(f"{fn}: the function given to {fn} should return a single "
                                "Tensor")
    if outputs[0].numel() != 1:
        raise EmberRuntimeError(f"{fn}: the Tensor returned by the function given to {fn} "
                                "should contain a single element")
    return outputs


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of the scalar function ``func`` at ``inputs`` (the Jacobian of its gradient):
    a Tensor of shape ``input.shape * 2`` for one input, else a tuple of tuples with ``H[i][j]``
    of shape ``inputs[i].shape + inputs[j].shape``. ``vectorize`` and
    ``outer_jacobian_strategy`` are ``jacobian``'s ``vectorize`` and ``strategy`` for the outer
    Jacobian.
    """
    inputs_tuple, inputs = _tupled(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in _STRATEGIES:
        raise EmberValueError("hessian: expected outer_jacobian_strategy to be either "
                              f"\"forward-mode\" or \"reverse-mode\", got "
                              f"{outer_jacobian_strategy!r}.")

    def scalar(*args):
        return _scalar_outputs(func(*args), strict, "hessian")[0].squeeze()

    def gradient(*args):
        jac = _jacobian(scalar, args, True, False, False, "reverse-mode", "hessian")
        _check_requires_grad(jac, "jacobian", strict, "hessian")
        return jac

    result = _jacobian(gradient, inputs, create_graph, strict, vectorize,
                       outer_jacobian_strategy, "hessian")
    return _untupled(result, (inputs_tuple, inputs_tuple))


def _first_derivative(func, inputs, v, create_graph, strict, fn):
    """What ``vhp`` and ``hvp`` start from (under ``enable_grad``): the inputs (fresh, tupled),
    ``v`` checked against them, the scalar output and its gradient kept differentiable."""
    inputs_tuple, inputs = _tupled(inputs, "inputs", fn)
    inputs = _fresh(inputs, create_graph, need_graph=True)
    v = _prepare_v(v, inputs, inputs_tuple, create_graph, fn,
                   "the input to the user-provided function is")
    outputs = _scalar_outputs(func(*inputs), strict, fn)
    jac = _grads(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict, fn)
    return inputs_tuple, inputs, v, outputs, jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """The vector-Hessian product ``v^T H`` of the scalar function ``func`` at ``inputs``.

    Returns ``(func(*inputs), vhp)``, the product shaped as the inputs; ``v`` matches the inputs
    and may be None for a single one-element input.
    """
    with enable_grad():
        inputs_tuple, inputs, v, outputs, jac = _first_derivative(func, inputs, v,
                                                                  create_graph, strict, "vhp")
    with set_grad_enabled(create_graph or is_grad_enabled()):
        grads = _grads(jac, inputs, v, create_graph=create_graph)
        result = _zeros_for_unused(grads, inputs, strict, create_graph, "double_back", "vhp")
    return (_released(outputs, create_graph)[0],
            _untupled(_released(result, create_graph), inputs_tuple))


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """The Hessian-vector product ``H v`` of the scalar function ``func`` at ``inputs``, by the
    double-backward trick (equal to ``vhp`` for a twice continuously differentiable ``func``,
    and slower).

    Returns ``(func(*inputs), hvp)``, the product shaped as the inputs; ``v`` matches the inputs
    and may be None for a single one-element input.
    """
    with enable_grad():
        inputs_tuple, inputs, v, outputs, jac = _first_derivative(func, inputs, v,
                                                                  create_graph, strict, "hvp")
        seeds = tuple(_G.zeros_like(inp).requires_grad_() for inp in inputs)
        double_back = _grads(jac, inputs, seeds, create_graph=True)
        _check_requires_grad(jac, "hessian", strict, "hvp")
    with set_grad_enabled(create_graph or is_grad_enabled()):
        grads = _grads(double_back, seeds, v, create_graph=create_graph)
        result = _zeros_for_unused(grads, inputs, strict, create_graph, "double_back_trick",
                                   "hvp")
    return (_released(outputs, create_graph)[0],
            _untupled(_released(result, create_graph), inputs_tuple))
