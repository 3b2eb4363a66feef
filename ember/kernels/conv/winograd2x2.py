"""Winograd F(2x2, 3x3) for 3x3, stride-1, dilation-1 convolution (any padding and groups).

Each 2x2 output tile is A^T [(G g G^T) * (B^T d B)] A over a 4x4 input tile d (tiles at stride 2):
16 multiplications per 4 outputs instead of 36, against F(4x4)'s 36 per 16, but twice the tiles
along each axis and transforms made of additions only (so they are NumPy slice arithmetic here, no
compiled kernel). The 16 transform components become 16 GEMMs in one batched ``np.matmul``. The
input gradient is the forward pass of the flipped, transposed problem; the weight gradient is the
exact adjoint, G^T [sum over tiles (A gy A^T) * (B^T d B)] G. Selected only by the autotuner or
when forced: benchmarks/conv.py shows where it stands against F(4x4) and im2col.
"""
import numpy as np

from . import parallel
from .grad_as_forward import input_grad_via_forward
from .workspace import buffer, owned, zero_border

G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64)
GG = np.kron(G, G)


def supports(g, direction):
    return g.R == 3 and g.S == 3 and g.stride == (1, 1) and g.dilation == (1, 1)


def _tiles(g):
    return -(-g.Ho // 2), -(-g.Wo // 2)


def _bt(d0, d1, d2, d3, out):
    """B^T along one axis: (d0 - d2, d1 + d2, d2 - d1, d1 - d3) into out[0..3]."""
    np.subtract(d0, d2, out=out[0])
    np.add(d1, d2, out=out[1])
    np.subtract(d2, d1, out=out[2])
    np.subtract(d1, d3, out=out[3])


def transformed_input(x, g, th, tw):
    """V (16, C, N*th*tw) = B^T d B of every 4x4 input tile."""
    Hb, Wb = 2 * th + 2, 2 * tw + 2
    pt, pl = g.padding[0], g.padding[2]
    xp = buffer("winograd2.pad", (g.N, g.C, Hb, Wb), x.dtype)
    zero_border(xp, (pt, Hb - pt - g.H, pl, Wb - pl - g.W))
    xp[:, :, pt:pt + g.H, pl:pl + g.W] = x
    rows = buffer("winograd2.rows", (4, g.N, g.C, th, Wb), x.dtype)
    _bt(*(xp[:, :, i:i + 2 * th:2] for i in range(4)), rows)
    V = buffer("winograd2.V", (4, 4, g.C, g.N, th, tw), x.dtype)
    for a in range(4):
        _bt(*(rows[a][..., j:j + 2 * tw:2] for j in range(4)),
            [V[a, b].transpose(1, 0, 2, 3) for b in range(4)])
    return V.reshape(16, g.C, g.N * th * tw)


def weight_transform(w, g):
    """U (16, groups, K/groups, C/groups) = G w G^T per (k, c)."""
    U = buffer("winograd2.U", (16, g.K * g.Cg), w.dtype)
    parallel.matmul(GG.astype(w.dtype), w.reshape(g.K * g.Cg, 9).T, U)
    return U.reshape(16, g.groups, g.Kg, g.Cg)


def forward(x, w, g):
    th, tw = _tiles(g)
    T = g.N * th * tw
    U = weight_transform(w, g)
    V = transformed_input(x, g, th, tw)
    M = buffer("winograd2.M", (16, g.K, T), x.dtype)
    parallel.matmul(U, V.reshape(16, g.groups, g.Cg, T), M.reshape(16, g.groups, g.Kg, T))
    m = M.reshape(4, 4, g.K, g.N, th, tw)
    # A^T = [[1, 1, 1, 0], [0, 1, -1, -1]] along the first axis, then along the second
    p = buffer("winograd2.P", (2, 4, g.K, g.N, th, tw), x.dtype)
    np.add(m[0], m[1], out=p[0])
    p[0] += m[2]
    np.subtract(m[1], m[2], out=p[1])
    p[1] -= m[3]
    full = buffer("winograd2.Y", (g.N, g.K, 2 * th, 2 * tw), x.dtype)
    for i in range(2):
        out0 = full[:, :, i::2, 0::2].transpose(1, 0, 2, 3)
        out1 = full[:, :, i::2, 1::2].transpose(1, 0, 2, 3)
        np.add(p[i, 0], p[i, 1], out=out0)
        out0 += p[i, 2]
        np.subtract(p[i, 1], p[i, 2], out=out1)
        out1 -= p[i, 3]
    return owned(full[:, :, :g.Ho, :g.Wo])


def _a(g0, g1, out):
    """A = [[1, 0], [1, 1], [1, -1], [0, -1]] along one axis into out[0..3]."""
    np.copyto(out[0], g0)
    np.add(g0, g1, out=out[1])
    np.subtract(g0, g1, out=out[2])
    np.negative(g1, out=out[3])


def weight_grad(gy, x, g):
    """The adjoint of ``forward`` in w: gw = G^T [sum over tiles (A gy A^T) * (B^T d B)] G."""
    th, tw = _tiles(g)
    T = g.N * th * tw
    V = transformed_input(x, g, th, tw)
    gyp = buffer("winograd2.gypad", (g.N, g.K, 2 * th, 2 * tw), gy.dtype)
    zero_border(gyp, (0, 2 * th - g.Ho, 0, 2 * tw - g.Wo))
    gyp[:, :, :g.Ho, :g.Wo] = gy
    e = buffer("winograd2.E", (4, g.N, g.K, th, 2 * tw), gy.dtype)
    _a(gyp[:, :, 0::2], gyp[:, :, 1::2], e)
    GY = buffer("winograd2.GY", (4, 4, g.K, g.N, th, tw), gy.dtype)
    for a in range(4):
        _a(e[a][..., 0::2], e[a][..., 1::2], [GY[a, b].transpose(1, 0, 2, 3) for b in range(4)])
    M = parallel.matmul(GY.reshape(16, g.groups, g.Kg, T),
                        V.reshape(16, g.groups, g.Cg, T).transpose(0, 1, 3, 2),
                        buffer("winograd2.gwM", (16, g.groups, g.Kg, g.Cg), gy.dtype))
    gwt = parallel.matmul(np.ascontiguousarray(GG.T, dtype=gy.dtype), M.reshape(16, g.K * g.Cg),
                          buffer("winograd2.gwT", (9, g.K * g.Cg), gy.dtype))
    return owned(gwt.T).reshape(g.weight_shape)


input_grad = input_grad_via_forward(forward)
