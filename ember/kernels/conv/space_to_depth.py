"""Stride-2 convolutions rewritten as stride-1 ones by space-to-depth (ResNet's 7x7/2 stem).

The zero-padded input (N, C, Hp, Wp) is split into its four phases (row parity a, column parity
b): ``X[n, 4c + 2a + b, i, j] = xpad[n, c, 2i + a, 2j + b]``, an (N, 4C, Hq, Wq) image; the
weight, zero-padded to even sizes (2R', 2S'), R' = ceil(R / 2), is split the same way into (K,
4C, R', S'). Then ``y[n, k, o, p] = sum w[k, c, r, s] xpad[n, c, 2o + r, 2p + s]`` is the
stride-1, unpadded convolution of X by W': ResNet's stem (3 -> 64, 7x7/2, pad 3, 224x224)
becomes a 4x4 convolution over 12 channels of 115x115, whose taps are 16 (not 49) output-row
strides apart and whose ``direct`` kernels run at stride 1. Hq = Ho + R' - 1 (Wq likewise):
phase pixels beyond the padded image only ever meet the zero taps of the padded weight.

The gradients use the same rewrite: the weight gradient is the stride-1 weight gradient of X,
folded back (the taps of the zero rows dropped); the input gradient is the stride-1 input
gradient by W', scattered back from the phases and cropped to the unpadded input (input pixels
no output reads get zero). The stride-1 problem runs on the selector's choice for its own
geometry (``selector.inner``).
"""
import numpy as np

from .geometry import Geometry


def supports(g, direction):
    """Stride 2 in both axes, dilation 1, groups 1, a kernel larger than 2x2."""
    return (g.stride == (2, 2) and g.dilation == (1, 1) and g.groups == 1
            and (g.R > 2 or g.S > 2))


def inner_geometry(g):
    """The stride-1 geometry of the rewritten problem."""
    R2, S2 = -(-g.R // 2), -(-g.S // 2)
    Hq, Wq = g.Ho + R2 - 1, g.Wo + S2 - 1
    return Geometry(g.N, 4 * g.C, Hq, Wq, g.K, R2, S2, (1, 1), (0, 0, 0, 0), (1, 1), 1, g.Ho,
                    g.Wo)


def _phases(g, g2):
    """For each phase (a, b) that holds input pixels: (a, b, the input's strided slice of its
    pixels, their slice of the phase plane). Input rows y with (y + pad_top) % 2 == a land in
    phase row (y + pad_top) // 2 (columns likewise)."""
    pt, pl = g.padding[0], g.padding[2]
    for a in range(2):
        y0 = (a - pt) % 2
        i0 = (y0 + pt) // 2
        rows = min(-(-(g.H - y0) // 2), g2.H - i0)
        for b in range(2):
            x0 = (b - pl) % 2
            j0 = (x0 + pl) // 2
            cols = min(-(-(g.W - x0) // 2), g2.W - j0)
            if rows > 0 and cols > 0:
                yield (a, b, (slice(y0, y0 + 2 * rows, 2), slice(x0, x0 + 2 * cols, 2)),
                       (slice(i0, i0 + rows), slice(j0, j0 + cols)))


def split_input(x, g, g2):
    """(N, C, H, W) -> the phases of the padded input, (N, 4C, Hq, Wq)."""
    N, C = x.shape[:2]
    X = np.zeros((N, C, 2, 2, g2.H, g2.W), x.dtype)
    for a, b, pixels, plane in _phases(g, g2):
        X[:, :, a, b][(Ellipsis,) + plane] = x[(Ellipsis,) + pixels]
    return X.reshape(N, 4 * C, g2.H, g2.W)


def split_weight(w, g2):
    """(K, C, R, S) -> (K, 4C, R', S'): zero-padded to (2R', 2S'), split by phase."""
    K, C, R, S = w.shape
    wp = np.zeros((K, C, 2 * g2.R, 2 * g2.S), w.dtype)
    wp[:, :, :R, :S] = w
    return np.ascontiguousarray(
        wp.reshape(K, C, g2.R, 2, g2.S, 2).transpose(0, 1, 3, 5, 2, 4)).reshape(
            K, 4 * C, g2.R, g2.S)


def merge_weight(gw2, g, g2):
    """The adjoint of ``split_weight``: (K, 4C, R', S') -> (K, C, R, S)."""
    K, C = g.K, g.C
    full = gw2.reshape(K, C, 2, 2, g2.R, g2.S).transpose(0, 1, 4, 2, 5, 3).reshape(
        K, C, 2 * g2.R, 2 * g2.S)
    return np.ascontiguousarray(full[:, :, :g.R, :g.S])


def merge_input(gx2, g, g2):
    """The adjoint of ``split_input``: the phases' gradient (N, 4C, Hq, Wq) -> (N, C, H, W)."""
    N, C = g.input_shape[:2]
    G = gx2.reshape(N, C, 2, 2, g2.H, g2.W)
    gx = np.zeros(g.input_shape, gx2.dtype)
    for a, b, pixels, plane in _phases(g, g2):
        gx[(Ellipsis,) + pixels] = G[:, :, a, b][(Ellipsis,) + plane]
    return gx


def forward(x, w, g, bias=None, residual=None, relu=False):
    from . import selector
    g2 = inner_geometry(g)
    return selector.inner("forward", g2, split_input(x, g, g2), split_weight(w, g2), bias,
                          residual, relu)


def weight_grad(gy, x, g):
    from . import selector
    g2 = inner_geometry(g)
    return merge_weight(selector.inner("weight", g2, gy, split_input(x, g, g2)), g, g2)


def input_grad(gy, w, g):
    from . import selector
    g2 = inner_geometry(g)
    return merge_input(selector.inner("input", g2, gy, split_weight(w, g2)), g, g2)
