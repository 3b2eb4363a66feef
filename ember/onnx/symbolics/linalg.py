"""Matrix products: matmul/mm/bmm, addmm (Gemm), linear, dot, outer, einsum; linalg.det (Det)."""

from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import out_dtype


@symbolic("matmul", "mm", "bmm")
def sym_matmul(g, node, a, b):
    return g.op("MatMul", a, b)


@symbolic("addmm")
def sym_addmm(g, node, x, m1, m2, beta=1, alpha=1):
    return g.op("Gemm", m1, m2, x, alpha=float(alpha), beta=float(beta))


@symbolic("linear")
def sym_linear(g, node, x, w, b=None):
    xr = len(node.args[0].shape)
    wr = len(node.args[1].shape)
    if xr == 2 and wr == 2:
        return g.op("Gemm", x, w, b, transB=1)
    y = g.op("MatMul", x, g.op("Transpose", w, perm=[1, 0]) if wr == 2 else w)
    return g.op("Add", y, b) if b is not None else y


@symbolic("dot")
def sym_dot(g, node, a, b):
    return g.op("MatMul", a, b)


@symbolic("outer")
def sym_outer(g, node, a, b):
    return g.op("Mul", g.unsqueeze(a, [1]), g.unsqueeze(b, [0]))


@symbolic("einsum")
def sym_einsum(g, node, operands, equation):
    dt = out_dtype(node)
    return g.op("Einsum", *[g.cast(o, dt) for o in operands], equation=equation.replace(" ", ""))





@symbolic("linalg_det")
def sym_linalg_det(g, node, a):
    """ONNX Det (batched over leading dimensions, as ember.linalg.det)."""
    return g.op("Det", a)
