"""Complex tensors: which spec ops take them, and how their gradients are formed.

Real-dtype calls never reach this module: ``dispatch`` consults it only when an op's result is
complex (``check_result``) and, on the autograd path, when an input or output of a linked op is
complex (``link``); the engine runs ``apply`` only for nodes that ``link`` marked.

Gradients follow torch's convention: a tensor's ``.grad`` is dL/d(conj z) for a real loss L (so
``(z.abs() ** 2).sum()`` gives ``2 z``). Each op with complex support has one mode:

- ``HOLOMORPHIC``: its formulas are the real-case ones, ``g * f'(z)``; the gradient is
  ``conj(formula(conj(grad)))`` = ``grad * conj(f'(z))``.
- ``LINEAR``: formulas that are real-linear in ``grad`` with real coefficients (views, indexing,
  sums, concatenation, ...), right for complex values as written.
- ``EXPLICIT``: formulas written for complex inputs (``real``, ``imag``, ``conj``, ``angle``,
  ``view_as_real``, ``complex``, ``polar``, the FFT kernels), or an override in ``OVERRIDES``
  (``abs``, ``to``, ``acosh``) used instead of the real-dtype formula for complex nodes only.

In the first two modes, an input that is real but meets a complex gradient (``x * z`` with ``x``
real) gets the real part, as in torch. An op missing from these tables raises, at forward time,
when it would record a complex node ("autograd of <op> on complex tensors is not supported"); an
op missing from ``FORWARD`` and the gradient tables refuses complex results altogether.
"""
from ember.errors import EmberRuntimeError

HOLOMORPHIC = frozenset("""
    add sub mul div neg pow reciprocal exp exp2 log log2 log10 log1p expm1 sqrt rsqrt sin cos tan
    tanh sigmoid sinh cosh asin acos atan asinh atanh sum mean matmul mm bmm dot outer
    addmm linear einsum cumsum square tanh_backward sigmoid_backward linalg_solve
""".split())
LINEAR = frozenset("""
    view reshape flatten unflatten permute transpose t squeeze unsqueeze expand repeat tile cat
    stack split split_with_sizes chunk unbind narrow flip roll contiguous clone tril triu
    getitem getitem_backward index_select gather scatter scatter_add index_add index_put
    index_copy masked_fill masked_select masked_select_backward masked_scatter where pad
    pad_backward diagonal diagonal_backward diag_embed positive resolve_conj resolve_neg unfold
    unfold_backward copy fill index_fill
""".split())
EXPLICIT = frozenset("""
    conj conj_physical real imag angle view_as_real view_as_complex complex polar
    fft_c2c fft_r2c fft_c2r abs to acosh linalg_eig
""".split())
# ops of the tables above whose result may be real for a complex input (the others give complex
# results for complex inputs, which is how dispatch notices them without looking at the inputs)
REAL_RESULTS = frozenset("""
    abs angle real imag view_as_real fft_c2r to eq ne isnan isinf isfinite isclose
""".split())
# ops that may produce complex results without a gradient (factories, predicates, fills)
FORWARD = HOLOMORPHIC | LINEAR | EXPLICIT | frozenset("""
    zeros ones full empty rand randn eye zeros_like ones_like empty_like full_like isclose
    nonzero count_nonzero all any eq ne isnan isinf isfinite logical_not logical_and logical_or
    logical_xor sgn size silu
""".split())


def check_result(op, out):
    """Refuse a complex result of an op that does not support complex tensors."""
    if op.name not in FORWARD:
        raise EmberRuntimeError(f'"{op.name}" not implemented for complex tensors ({out.dtype}); '
                                "see docs/complex.md for the ops that support them")


def _kind(t):
    d = getattr(t, "_data", None)
    return None if d is None else d.dtype.kind


def link(op, tensors, outs, node):
    """Mark ``node`` for complex handling when an input or output is complex; raises when the
    op's gradient on complex tensors is not supported."""
    kinds = [_kind(t) for t in tensors]
    if "c" not in kinds and not any(o._data.dtype.kind == "c" for o in outs):
        return
    name = op.name
    if name in HOLOMORPHIC:
        mode = "h"
    elif name in LINEAR:
        mode = "l"
    elif name in EXPLICIT:
        mode = "e"
    else:
        raise EmberRuntimeError(f"autograd of {name} on complex tensors is not supported (see "
                                "docs/complex.md)")
    real = tuple(k is not None and k != "c" for k in kinds)
    node._cplx = (mode, real)


def _conj(g):
    from ember.autograd._generated import functions as G
    return g if g is None or g._data.dtype.kind != "c" else G.conj(g)


def apply(node, grads):
    """Run a complex-marked node's backward (see the module docstring)."""
    from ember.autograd._generated import functions as G
    mode, real = node._cplx
    override = OVERRIDES.get(node._op_name) if mode == "e" else None
    if override is not None:
        return override(node, grads)
    if mode == "h":
        grads = [_conj(g) for g in grads]
    results = node.apply(grads)
    if mode == "e":
        return results
    out = []
    for i, r in enumerate(results):
        if r is not None and r._data.dtype.kind == "c":
            if mode == "h":
                r = G.conj(r)
            if i < len(real) and real[i]:
                r = G.real(r)
        out.append(r)
    return tuple(out)


def _abs(node, grads):
    from ember.autograd.formulas import abs_complex_backward
    from ember.autograd.node import unpack
    return (abs_complex_backward(grads[0], unpack(node.self_, node)),)


def _to(node, grads):
    from ember.autograd._generated import functions as G
    g, dt = grads[0], node.self__dtype
    if g._data.dtype.kind == "c" and dt.kind != "c":
        g = G.real(g)  # a real input cast to complex: the real part, as torch
    return (g if g._data.dtype == dt else G.to(g, dt),)


def _acosh(node, grads):
    """``grad * conj(1 / (sqrt(z - 1) sqrt(z + 1)))``: the principal branch's derivative (the
    real-dtype formula's ``rsqrt(z * z - 1)`` is another branch for complex z), as torch."""
    from ember.autograd._generated import functions as G
    from ember.autograd.node import unpack
    z = unpack(node.self_, node)
    d = G.mul(G.rsqrt(G.sub(z, 1)), G.rsqrt(G.add(z, 1)))
    return (G.mul(grads[0], G.conj(d)),)


OVERRIDES = {"abs": _abs, "to": _to, "acosh": _acosh}
