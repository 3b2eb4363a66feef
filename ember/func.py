"""``torch.func`` for ember: ``functional_call``, ``stack_module_state``, and the function
transforms ``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``linearize``, ``jacrev``,
``jacfwd``, ``hessian`` and ``vmap``, built on ember's autograd.

The transforms compose (``grad(grad(f))``, ``jacrev(grad(f))``): an argument that already
requires grad (an outer transform's input) is differentiated in place with ``create_graph``,
so the result stays differentiable for the outer one; at the outermost level the results are
detached, as torch's are. ``vmap`` maps by a loop over the batch dimension (calling the
function once per slice and stacking the results): the same values as torch's vectorised map,
at a Python call per slice (docs/unsupported.md).
"""
import contextlib

from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError
from ember.tensor import Tensor

__all__ = ["functional_call", "stack_module_state", "grad", "grad_and_value", "vjp", "jvp",
           "linearize", "jacrev", "jacfwd", "hessian", "vmap"]


# ------------------------------------------------------------------------- functional_call
def _owner(module, name):
    """(submodule, attribute) of the dotted ``name`` under ``module``."""
    *path, attr = name.split(".")
    for p in path:
        module = getattr(module, p)
    return module, attr


@contextlib.contextmanager
def _swapped(module, values):
    """``module`` with the tensors of ``values`` (dotted name -> tensor) in place of its
    parameters and buffers of those names (plain attributes for other names), restored
    after."""
    saved = []
    try:
        for name, value in values.items():
            owner, attr = _owner(module, name)
            for store in ("_parameters", "_buffers"):
                d = owner.__dict__.get(store)
                if d is not None and attr in d:
                    saved.append((d, attr, d[attr]))
                    d[attr] = value
                    break
            else:
                had = attr in owner.__dict__
                saved.append((owner, attr, owner.__dict__[attr] if had else _ABSENT))
                object.__setattr__(owner, attr, value)
        yield
    finally:
        for where, attr, old in reversed(saved):
            if isinstance(where, dict):
                where[attr] = old
            elif old is _ABSENT:
                object.__delattr__(where, attr)
            else:
                object.__setattr__(where, attr, old)


_ABSENT = object()


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """Call ``module`` with its parameters and buffers replaced by the tensors of
    ``parameter_and_buffer_dicts`` (one dict of dotted names, or a tuple of dicts that share
    no key) for this call only; ``args`` (one value or a tuple) and ``kwargs`` go to its
    forward. ``tie_weights``: a tensor given for one of several names of one tied parameter is
    used for all of them. ``strict``: every parameter and buffer must be given, and no other
    name. Raises EmberValueError / EmberRuntimeError as torch's for ambiguous or missing
    keys."""
    if isinstance(parameter_and_buffer_dicts, dict):
        values = dict(parameter_and_buffer_dicts)
    else:
        values = {}
        seen = set()
        for d in parameter_and_buffer_dicts:
            clash = sorted(seen & set(d))
            if clash:
                raise EmberValueError(f"{clash} appeared in multiple dictionaries; behavior of "
                                      f"functional call is ambiguous")
            seen |= set(d)
            values.update(d)
    own = list(module.named_parameters(remove_duplicate=False)) + \
        list(module.named_buffers(remove_duplicate=False))
    if strict:
        names = {n for n, _ in own}
        missing, unexpected = sorted(names - set(values)), sorted(set(values) - names)
        if missing or unexpected:
            parts = ([f"Missing key(s): {', '.join(repr(k) for k in missing)}."] if missing
                     else []) + ([f"Unexpected key(s): {', '.join(repr(k) for k in unexpected)}."]
                                 if unexpected else [])
            raise EmberRuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:"
                                    "\n\t" + "\n\t".join(parts))
    if tie_weights:
        by_tensor = {}
        for n, t in own:
            by_tensor.setdefault(id(t), []).append(n)
        for names in by_tensor.values():
            given = [n for n in names if n in values]
            if len(names) < 2 or not given:
                continue
            if any(values[n] is not values[given[0]] for n in given[1:]):
                raise EmberValueError(f"functional_call got multiple values for keys {given}, "
                                      f"which are tied. Consider using tie_weights=False")
            for n in names:
                values[n] = values[given[0]]
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _swapped(module, values):
        return module(*args, **(kwargs or {}))


def stack_module_state(models):
    """(params, buffers): for modules of one architecture, each parameter and buffer name ->
    the stacked tensor of theirs along a new leading dimension (parameters detached and made
    leaves requiring grad, as torch's), for ``vmap`` over ``functional_call``."""
    import ember
    models = list(models)
    if not models:
        raise EmberRuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) > 1:
        raise EmberRuntimeError("stack_module_state: Expected all models to have the same "
                                "training/eval mode.")
    if len({type(m) for m in models}) > 1:
        raise EmberRuntimeError("stack_module_state: Expected all models to be of the same "
                                "class.")
    params = {n: ember.stack([dict(m.named_parameters())[n] for m in models]).detach()
              .requires_grad_(p.requires_grad) for n, p in models[0].named_parameters()}
    buffers = {n: ember.stack([dict(m.named_buffers())[n] for m in models])
               for n, _ in models[0].named_buffers()}
    return params, buffers


# ------------------------------------------------------------------------------ transforms
def _argnums(argnums, n, what):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums or not all(isinstance(i, int) for i in nums):
        raise EmberTypeError(f"{what}: argnums must be an int or a non-empty tuple of ints, got "
                             f"{argnums!r}")
    norm = tuple(i + n if i < 0 else i for i in nums)
    if any(i < 0 or i >= n for i in norm):
        raise EmberRuntimeError(f"{what}: Got argnums={argnums} but only {n} positional "
                                f"inputs")
    return norm


def _leaves(x):
    """The tensors of a (nested) tuple / list / dict, in order."""
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for y in x for t in _leaves(y)]
    if isinstance(x, dict):
        return [t for y in x.values() for t in _leaves(y)]
    return []


def _rebuild(x, it):
    if isinstance(x, Tensor):
        return next(it)
    if isinstance(x, (tuple, list)):
        return type(x)(_rebuild(y, it) for y in x)
    if isinstance(x, dict):
        return {k: _rebuild(v, it) for k, v in x.items()}
    return x


def _prepared(x):
    """``x``'s tensors made differentiable: one that requires grad already (an outer
    transform's) as a view, others detached leaves; and whether an outer level exists."""
    outer = False
    out = []
    for t in _leaves(x):
        if t.requires_grad:
            outer = True
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(True))
    return _rebuild(x, iter(out)), out, outer


def _finish(x, outer):
    if outer:
        return x
    return _rebuild(x, iter([t.detach() for t in _leaves(x)]))


def grad_and_value(func, argnums=0, has_aux=False):
    """A function returning ``(gradient, value)`` of ``func``'s scalar output with respect to
    its positional argument(s) ``argnums`` (``((gradient, (value, aux)))`` with ``has_aux``);
    the gradient has the argument's structure (a tuple for several ``argnums``)."""
    from ember.autograd import grad as autograd_grad
    from ember.autograd.grad_mode import enable_grad

    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), "grad_and_value")
        args = list(args)
        diff = []
        outer = False
        for i in nums:
            args[i], leaves, o = _prepared(args[i])
            diff.append((args[i], leaves))
            outer = outer or o
        with enable_grad():
            out = func(*args, **kwargs)
            aux = None
            if has_aux:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise EmberRuntimeError("grad_and_value(f)(*args): output of function f "
                                            "should be a tuple: (output, aux) if has_aux is True")
                out, aux = out
            if not isinstance(out, Tensor) or out.numel() != 1:
                raise EmberRuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return "
                                        f"a scalar Tensor, got "
                                        f"{tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__}")
            leaves = [t for _, ls in diff for t in ls]
            gs = autograd_grad(out, leaves, create_graph=outer, allow_unused=True,
                               materialize_grads=True) if out.requires_grad else \
                [t.detach() * 0 for t in leaves]
        it = iter(gs)
        grads = tuple(_rebuild(a, it) for a, _ in diff)
        grads = _finish(grads[0] if isinstance(argnums, int) else grads, outer)
        value = _finish(out, outer)
        return (grads, (value, _finish(aux, outer))) if has_aux else (grads, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """A function returning the gradient of ``func``'s scalar output with respect to its
    positional argument(s) ``argnums`` (``(gradient, aux)`` with ``has_aux``)."""
    gv = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def _outputs(out, what):
    leaves = _leaves(out)
    if not leaves or (not isinstance(out, Tensor) and len(leaves) != len(_flat_items(out))):
        raise EmberRuntimeError(f"{what}: Expected f(*primals) to return only tensors, got "
                                f"{type(out).__name__}")
    return leaves


def _flat_items(x):
    if isinstance(x, (tuple, list)):
        return [y for v in x for y in _flat_items(v)]
    if isinstance(x, dict):
        return [y for v in x.values() for y in _flat_items(v)]
    return [x]


def vjp(func, *primals, has_aux=False):
    """``(output, vjp_fn)`` (``(output, vjp_fn, aux)`` with ``has_aux``): ``vjp_fn(cotangents)``
    (of the output's structure) returns the tuple of vector-Jacobian products, one per primal,
    each of its primal's structure. ``vjp_fn`` may be called several times."""
    from ember.autograd import grad as autograd_grad
    from ember.autograd.grad_mode import enable_grad
    prepared = [_prepared(p) for p in primals]
    outer = any(o for _, _, o in prepared)
    args = [a for a, _, _ in prepared]
    with enable_grad():
        out = func(*args)
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise EmberRuntimeError("vjp(f, *primals): output of function f should be a tuple: "
                                    "(output, aux) if has_aux is True")
        out, aux = out
    outs = _outputs(out, "vjp(f, *primals)")
    leaves = [t for _, ls, _ in prepared for t in ls]

    def vjp_fn(cotangents):
        cots = _leaves(cotangents)
        if len(cots) != len(outs):
            raise EmberRuntimeError(f"vjp_fn: Expected {len(outs)} cotangents (the output's "
                                    f"structure), got {len(cots)}")
        for o, c in zip(outs, cots):
            if tuple(o.shape) != tuple(c.shape):
                raise EmberRuntimeError(f"vjp_fn: Mismatch in shape: output has shape "
                                        f"{tuple(o.shape)} but the cotangent has shape "
                                        f"{tuple(c.shape)}")
        live = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
        with enable_grad():
            gs = autograd_grad([o for o, _ in live], leaves, [c for _, c in live],
                               retain_graph=True, create_graph=outer or any(
                                   c.requires_grad for c in cots),
                               allow_unused=True, materialize_grads=True) if live else \
                [t.detach() * 0 for t in leaves]
        it = iter(gs)
        res = tuple(_rebuild(a, it) for a in args)
        return _finish(res, outer or any(c.requires_grad for c in cots))
    result = (_finish(out, outer), vjp_fn)
    return result + (_finish(aux, outer),) if has_aux else result


def _of_leaves(func, args, nums, kwargs, has_aux, what, box):
    """``func`` as a function of the tensors of its arguments ``nums`` (the others fixed),
    returning the tuple of its output tensors; the output itself and the aux go to ``box``."""
    def call(*leaves):
        it = iter(leaves)
        full = list(args)
        for i in nums:
            full[i] = _rebuild(args[i], it)
        out = func(*full, **kwargs)
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise EmberRuntimeError(f"{what}: output of function f should be a tuple: "
                                        "(output, aux) if has_aux is True")
            out, box["aux"] = out
        box["out"] = out
        return tuple(_outputs(out, what))
    return call


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(output, jvp_out)``: the Jacobian-vector product of ``func`` at ``primals`` (a tuple)
    with ``tangents`` (a tuple of the same structure), ``ember.autograd.functional.jvp``'s
    double backward. ``(output, jvp_out, aux)`` with ``has_aux``."""
    from ember.autograd import functional
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise EmberTypeError("jvp(f, primals, tangents): Expected primals and tangents to be "
                             "tuples")
    if len(primals) != len(tangents):
        raise EmberRuntimeError("jvp(f, primals, tangents): Expected primals and tangents to "
                                "have the same python structure")
    leaves, tans = _leaves(primals), _leaves(tangents)
    for p, t in zip(leaves, tans):
        if tuple(p.shape) != tuple(t.shape):
            raise EmberRuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents "
                                    f"to have the same shape, got {tuple(p.shape)} and "
                                    f"{tuple(t.shape)}")
    outer = any(t.requires_grad for t in leaves + tans)
    box = {}
    call = _of_leaves(func, primals, range(len(primals)), {}, has_aux,
                      "jvp(f, primals, tangents)", box)
    _, products = functional.jvp(call, tuple(leaves), tuple(tans), create_graph=outer,
                                 strict=strict)
    out = box["out"]
    result = (_finish(out, outer), _finish(_rebuild(out, iter(products)), outer))
    return result + (_finish(box.get("aux"), outer),) if has_aux else result


def linearize(func, *primals):
    """``(output, jvp_fn)``: ``func``'s output at ``primals`` and a function of tangents (of
    the primals' structure, shapes and dtypes) returning the Jacobian-vector product there, as
    torch.func.linearize. ember has no graph capture: each ``jvp_fn`` call runs ``jvp`` (the
    same values, ``func`` evaluated again). ``jvp_fn`` raises RuntimeError for tangents of
    another structure, shape or dtype."""
    output = func(*primals)
    flat_primals = _leaves(primals)

    def jvp_fn(*tangents):
        flat = _leaves(tangents)
        if len(tangents) != len(primals) or len(flat) != len(flat_primals):
            raise EmberRuntimeError(f"Expected the tangents to have the same argspec as the "
                                    f"primals ({len(primals)} arguments, {len(flat_primals)} "
                                    f"tensors), got {len(tangents)} arguments, {len(flat)} "
                                    "tensors")
        for idx, (t, p) in enumerate(zip(flat, flat_primals)):
            for what, a, b in (("shape", tuple(t.shape), tuple(p.shape)),
                               ("dtype", t.dtype, p.dtype)):
                if a != b:
                    raise EmberRuntimeError(f"tangent:{idx} with {what} {a} in flattened pytree "
                                            f"doesn't match the {what} {b} of the "
                                            "corresponding primal.")
        return jvp(func, tuple(primals), tuple(tangents))[1]

    return _finish(output, any(t.requires_grad for t in flat_primals)), jvp_fn


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """A function returning the Jacobian of ``func`` with respect to its argument(s)
    ``argnums``: for each output tensor, a tensor of shape ``output.shape + input.shape``
    (nested as the outputs, then as ``argnums`` when it is a tuple), by
    ``ember.autograd.functional.jacobian`` (a reverse pass per output element).
    ``chunk_size`` is accepted (the rows are computed one at a time)."""
    from ember.autograd import functional

    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), "jacrev")
        leaves = [t for i in nums for t in _leaves(args[i])]
        outer = any(t.requires_grad for t in leaves)
        box = {}
        call = _of_leaves(func, args, nums, kwargs, has_aux, "jacrev(f)(*args)", box)
        rows = functional.jacobian(call, tuple(leaves), create_graph=outer)
        per_output = []
        for row in rows:     # one per output tensor: a tuple over the input tensors
            it = iter(row)
            per_arg = tuple(_rebuild(args[i], it) for i in nums)
            per_output.append(per_arg[0] if isinstance(argnums, int) else per_arg)
        out = box["out"]
        jac = _finish(_rebuild_outputs(out, iter(per_output)), outer)
        return (jac, _finish(box.get("aux"), outer)) if has_aux else jac
    return wrapper


def _rebuild_outputs(x, it):
    if isinstance(x, Tensor):
        return next(it)
    if isinstance(x, (tuple, list)):
        return type(x)(_rebuild_outputs(y, it) for y in x)
    return {k: _rebuild_outputs(v, it) for k, v in x.items()}


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian as ``jacrev`` computes it (ember differentiates in reverse mode; the values
    are forward mode's up to rounding). ``randomness`` is accepted."""
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func, argnums=0):
    """A function returning the Hessian of ``func``'s output with respect to ``argnums``: the
    Jacobian of the Jacobian (shape ``output.shape + input.shape + input.shape``)."""
    return jacrev(jacrev(func, argnums), argnums)


# ----------------------------------------------------------------------------------- vmap
def _mapped(arg, dim, where):
    """[(tensor, dim)] of ``arg`` under its in_dim ``dim`` (an int, None, or a structure
    matching the argument's)."""
    if dim is None:
        return []
    if isinstance(dim, int):
        out = []
        for t in _leaves(arg):
            if not -t.dim() <= dim < max(t.dim(), 1):
                raise EmberValueError(f"vmap: {where}: Got in_dim={dim} for an input but the "
                                      f"input is of dimension {t.dim()}")
            out.append((t, dim % t.dim()))
        return out
    if isinstance(arg, (tuple, list)) and isinstance(dim, (tuple, list)) and len(arg) == len(dim):
        return [m for a, d in zip(arg, dim) for m in _mapped(a, d, where)]
    if isinstance(arg, dict) and isinstance(dim, dict) and set(arg) == set(dim):
        return [m for k in arg for m in _mapped(arg[k], dim[k], where)]
    raise EmberValueError(f"vmap: {where}: in_dim {dim!r} does not match the input's structure")


def _slice(arg, dim, i):
    if dim is None:
        return arg
    if isinstance(dim, int):
        return _rebuild(arg, iter([t.select(dim % t.dim(), i) for t in _leaves(arg)]))
    if isinstance(arg, (tuple, list)):
        return type(arg)(_slice(a, d, i) for a, d in zip(arg, dim))
    return {k: _slice(arg[k], dim[k], i) for k in arg}


def _stack_results(results, out_dims, what):
    import ember
    first = results[0]
    if isinstance(first, Tensor):
        if not isinstance(out_dims, int):
            raise EmberValueError(f"{what}: out_dims {out_dims!r} does not match the output")
        return ember.stack(results, dim=out_dims)
    if isinstance(first, (tuple, list)):
        dims = out_dims if isinstance(out_dims, (tuple, list)) else (out_dims,) * len(first)
        if len(dims) != len(first):
            raise EmberValueError(f"{what}: out_dims has {len(dims)} entries for "
                                  f"{len(first)} outputs")
        return type(first)(_stack_results([r[j] for r in results], d, what)
                           for j, d in enumerate(dims))
    if isinstance(first, dict):
        return {k: _stack_results([r[k] for r in results],
                                  out_dims[k] if isinstance(out_dims, dict) else out_dims, what)
                for k in first}
    raise EmberValueError(f"{what}: `{what.split('(')[0]}` must only return Tensors, got type "
                          f"{type(first).__name__}")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``func`` mapped over a dimension of its inputs: ``in_dims`` (one for all, or one per
    positional argument, None for an unmapped one, or a structure matching a nested argument)
    names each input's mapped dimension, ``out_dims`` where the results stack. ember calls
    ``func`` once per index and stacks (docs/unsupported.md: not vectorised). ``randomness``:
    "error" (a random draw inside ``func`` is an error), "different" (each call draws its own)
    or "same" (every call draws the same numbers). ``chunk_size`` is accepted."""
    if not isinstance(randomness, str) or randomness not in ("error", "different", "same"):
        raise EmberRuntimeError(f"vmap: Only allowed 'error', 'different', or 'same' for "
                                f"randomness, got {randomness!r}")

    def wrapped(*args, **kwargs):
        from ember.random import default_generator
        what = "vmap(f)(*args)"
        dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise EmberValueError(f"{what}: in_dims is not compatible with the structure of "
                                  f"`inputs`: in_dims has {len(dims)} elements, but inputs has "
                                  f"{len(args)} elements")
        mapped = [m for k, (a, d) in enumerate(zip(args, dims))
                  for m in _mapped(a, d, f"argument {k}")]
        if not mapped:
            raise EmberValueError(f"{what}: at least one of the inputs must be a Tensor with an "
                                  f"in_dim other than None")
        sizes = {t.shape[d] for t, d in mapped}
        if len(sizes) != 1:
            raise EmberValueError(f"{what}: Expected all tensors to have the same size in the "
                                  f"mapped dimension, got sizes {sorted(sizes)}")
        n = sizes.pop()
        start = default_generator.get_state()
        results = []
        for i in range(n):
            if randomness == "same":
                default_generator.set_state(start)
            before = default_generator.get_state() if randomness == "error" else None
            results.append(func(*[_slice(a, d, i) for a, d in zip(args, dims)], **kwargs))
            if before is not None and not _same_state(before, default_generator.get_state()):
                raise EmberRuntimeError("vmap: called random operation while in randomness "
                                        "error mode. Please either use the 'same' or "
                                        "'different' randomness flags on vmap or perform the "
                                        "randomness operation out of vmap")
        if not n:
            raise EmberValueError(f"{what}: the mapped dimension has size 0")
        return _stack_results(results, out_dims, what)
    return wrapped


def _same_state(a, b):
    import numpy as np
    a, b = (x.numpy() if isinstance(x, Tensor) else np.asarray(x) for x in (a, b))
    return a.shape == b.shape and bool((a == b).all())
