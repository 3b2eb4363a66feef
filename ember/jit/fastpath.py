"""Specialised array-mode code for common inference patterns: a lowering rule (``Rule``) that
``codegen.generate`` asks for each node when a graph is compiled for the kernel-level fast path.
The source it gives is equivalent to the op's kernel for the dtypes recorded in the graph; the
traced callable only takes this path when the inputs have the traced dtypes.

- shape values (``size`` and int arithmetic on them) are plain Python ints: ``x.shape[0]``
- ``linear`` with a constant weight uses a pre-transposed contiguous copy; a following ``relu``
  (the linear's only reader) is applied in place on the fresh result
- ``relu`` of a fresh single-use result (conv2d, linear, matmul, add, ...) runs in place (the
  relu kernel writing into its input)
- same-dtype float ``add``/``sub``/``mul``/``div`` of arrays and Python scalars are NumPy operators

Which op is which Python operator (and under which constants: ``add`` is ``+`` when ``alpha`` is
1) comes from the spec's ``operators:`` entries (``INFIX``/``PREFIX`` in the generated code).
- ``max_pool2d_with_indices`` whose indices nobody reads skips computing them
- ``reshape``/``view`` and basic ``getitem`` (ints, slices) are NumPy methods/indexing

With a memory plan (``ember.jit.passes.memory``), a planned GEMM, ``linear`` or float
arithmetic writes into the memory the plan gives it (``matmul_into``, ``linear_into``,
``binary_into``: an arena buffer, or for arithmetic an argument dying at its node); each falls
back to a new array when that memory is not the result's shape (a program run on other shapes
than it was planned for; ``binary_into`` also when it is read-only).
"""
import numpy as np

from ember.autograd._generated.methods import INFIX, PREFIX
from ember.jit.ir import SymRef, Value
from ember.kernels import linalg
from ember.kernels.elementwise import relu
from ember.kernels.pointwise.engine import _broadcast_shape

__all__ = ["linear_t", "linear_t_relu", "relu_", "max_pool2d_values", "FRESH", "matmul_into",
           "linear_into", "binary_into", "UFUNCS", "Rule"]

# producers whose kernels return a new array (not a view), safe to overwrite in place
FRESH = ("conv2d", "linear", "matmul", "mm", "addmm", "add", "sub", "mul", "div", "bmm",
         "max_pool2d_with_indices")


def linear_t(x, wt, b):
    """``linear(x, w, b)`` with ``wt`` the weight's pre-transposed contiguous copy (K, N): one
    GEMM over the rows of all leading dimensions, as the kernel runs it (NumPy's matmul of a
    stack runs one product per matrix: the word LM's decoder on its (35, 1, 200) states took 35
    matrix-vector products over an 8 MB weight, 4 ms instead of 1.3), the bias accumulated in
    the GEMM where ``linalg.bias_gemm`` takes it."""
    rows = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])
    out = None if b is None else linalg.bias_gemm(rows, wt.T, b)
    if out is None:
        out = linalg.gemm_into(rows, wt) if rows.dtype == wt.dtype else rows @ wt
        if b is not None:
            out += b
    return out if x.ndim == 2 else out.reshape(x.shape[:-1] + wt.shape[1:])


def linear_t_relu(x, wt, b):
    return relu(linear_t(x, wt, b), out=True)


def relu_(a):
    return relu(a, out=True)


def matmul_into(a, b, out):
    """``matmul(a, b)`` of 2-D float arrays of one dtype, written into ``out`` (the kernel's
    BLAS thread mode; a new array when ``out`` is not the result's shape)."""
    from ember.kernels.linalg import gemm_into, matmul
    if a.ndim != 2 or b.ndim != 2 or out.shape != (a.shape[0], b.shape[1]) or \
            a.shape[1] != b.shape[0] or a.dtype != out.dtype or b.dtype != out.dtype or \
            out.strides[1] != out.itemsize:
        return matmul(a, b)
    return gemm_into(a, b, out)


def linear_into(x, w, b, out):
    """``linear(x, w, b)`` on its GEMM path (2-D float operands of one dtype), written into
    ``out``; else the kernel itself."""
    from ember.kernels.linalg import GEMV_MAX_ROWS, gemm_into, linear
    if x.ndim != 2 or w.ndim != 2 or out.shape != (x.shape[0], w.shape[0]) or \
            x.shape[1] != w.shape[1] or x.shape[0] <= GEMV_MAX_ROWS or \
            x.dtype != out.dtype or w.dtype != out.dtype or out.strides[1] != out.itemsize:
        return linear(x, w, b)
    gemm_into(x, w.T, out)
    if b is not None:
        out += b
    return out


# a Python operator of the fast path -> its ufunc
UFUNCS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}


def binary_into(ufunc, a, b, out):
    """``ufunc(a, b)`` (the fast path's NumPy operator) into ``out`` (which may be ``a`` or
    ``b``) when that is the result's shape and writeable, else a new array."""
    if out.shape != _broadcast_shape((np.shape(a), np.shape(b))) or not out.flags.writeable:
        return ufunc(a, b)
    return ufunc(a, b, out=out)


def max_pool2d_values(x, kernel_size, stride, padding, dilation, ceil_mode):
    """max_pool2d_with_indices(...)[0] without computing the indices."""
    from ember.kernels.pool.pool2d import max_pool2d_values as values
    return values(x, kernel_size, stride, padding, dilation, ceil_mode)


def _float(v):
    return isinstance(v, Value) and v.dtype.kind == "f"


def _by_kind(table):
    out = {}
    for sym, (kind, when) in table.items():
        out.setdefault(kind, []).append((sym, when))
    return out


_INFIX, _PREFIX = _by_kind(INFIX), _by_kind(PREFIX)
_INT_INFIX = ("+", "-", "*", "//", "%")
_FLOAT_INFIX = ("+", "-", "*", "/")


def python_operator(node):
    """``node``'s Python operator (``'+'``, ``'//'``, prefix ``'-'``, ...) under its constants,
    or None."""
    table = _PREFIX if len(node.args) == 1 else _INFIX
    for sym, when in table.get(node.kind, ()):
        if all(node.attrs.get(k, v) == v for k, v in when.items()):
            return sym
    return None


def _num(x):
    return not isinstance(x, bool) and isinstance(x, (int, float))


def int_values(graph):
    """ids of the 0-d int64 values that hold shapes: outputs of ``size`` and int arithmetic on
    them (computed as Python ints in array mode)."""
    ints = set()
    for n in graph.nodes:
        if n.kind == "size":
            ints.add(id(n.output))
        elif n.outputs and n.outputs[0].dtype == np.int64 and n.outputs[0].shape == () and \
                python_operator(n) in (("-",) if len(n.args) == 1 else _INT_INFIX) and \
                any(isinstance(a, Value) and id(a) in ints for a in n.args) and \
                all((isinstance(a, Value) and id(a) in ints) or _num(a) for a in n.args):
            ints.add(id(n.output))
    return ints


def _basic_index(idx):
    if isinstance(idx, tuple):
        return all(_basic_index(i) for i in idx)
    if isinstance(idx, slice):
        return all(x is None or isinstance(x, (int, SymRef)) for x in (idx.start, idx.stop,
                                                                       idx.step))
    return (isinstance(idx, int) and not isinstance(idx, bool)) or idx is None or \
        idx is Ellipsis or isinstance(idx, SymRef)


class Rule:
    """The fast path as a lowering rule of ``codegen.generate``: for a node of ``graph``, the
    ``Statement`` of its specialised source, ``SKIP`` for a relu folded into its producer,
    or None (the node calls its kernel). ``ints``: ``int_values(graph)``."""

    def __init__(self, graph, ints):
        self.graph, self.ints = graph, ints
        self.folded = set()    # ids of relu nodes folded into the linear before them

    def __call__(self, node, w):
        from ember.jit.codegen import SKIP, Statement
        if id(node) in self.folded:
            return SKIP
        src = self._source(node, w.ref)
        if src is None:
            return None
        if isinstance(src, tuple):   # defines one value only (the others are never read)
            return Statement(rhs=src[0], defines=[src[1]], unpack=False)
        return Statement(rhs=src)

    def _source(self, node, ref):
        """Source for ``node``'s right-hand side (with the one value it defines, when that is
        not its outputs), or None."""
        graph, ints = self.graph, self.ints
        k, a = node.kind, node.args
        out = node.outputs[0] if node.outputs else None
        if id(out) in ints and k != "size":
            sym = python_operator(node)
            return f"-{ref(a[0])}" if len(a) == 1 else f"({ref(a[0])} {sym} {ref(a[1])})"
        if k == "size":
            return f"{ref(a[0])}.shape[{node.attrs['dim']}]"
        if k in ("reshape", "view"):
            shape = node.attrs['shape' if k == 'reshape' else 'size']
            return f"{ref(a[0])}.reshape({ref(shape)})"
        if k == "getitem" and _basic_index(node.attrs["indices"]):
            return f"{ref(a[0])}[{ref(node.attrs['indices'])}]"
        if len(a) == 2 and out is not None and out.dtype.kind == "f":
            sym = python_operator(node)
            if sym in _FLOAT_INFIX and any(_float(x) for x in a) and \
                    all((_float(x) and x.dtype == out.dtype) or _num(x) for x in a):
                # a 0-d result stays an array: a NumPy float64 scalar is a Python float, which
                # a kernel after it would read as a weak scalar (clamp, pow: a float32 result)
                return f"{'asarray' if out.shape == () else ''}({ref(a[0])} {sym} {ref(a[1])})"
        if k == "linear":
            x, wt, b = (list(a) + [None] * 3)[:3]
            if _float(x) and isinstance(wt, Value) and len(wt.shape) == 2 and \
                    wt.dtype == x.dtype and wt.node is not None and \
                    wt.node.kind == "constant" and \
                    (b is None or (isinstance(b, Value) and b.dtype == x.dtype)):
                relu = _single_relu(graph, out)
                if relu is not None:
                    self.folded.add(id(relu))
                    return f"linear_t_relu({ref(x)}, {ref(wt)}_T, {ref(b)})", relu.output
                return f"linear_t({ref(x)}, {ref(wt)}_T, {ref(b)})"
        if k == "max_pool2d_with_indices" and _float(a[0]) and not node.outputs[1].uses and \
                node.outputs[1] not in graph.outputs:
            consts = ", ".join(ref(node.attrs[c]) for c in ("kernel_size", "stride", "padding",
                                                              "dilation", "ceil_mode"))
            return f"max_pool2d_values({ref(a[0])}, {consts})", out
        if k == "relu" and isinstance(a[0], Value) and a[0].dtype.kind == "f":
            src = a[0]
            if src.node is not None and src.node.kind in FRESH and len(src.uses) == 1 and \
                    src not in graph.outputs and src.node.outputs[0] is src:
                return f"relu_({ref(src)})"
        return None


def _single_relu(graph, v):
    if len(v.uses) != 1 or v in graph.outputs:
        return None
    n = v.uses[0]
    return n if n.kind == "relu" else None
