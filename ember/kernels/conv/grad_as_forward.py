"""Rewrite one convolution direction as another, so fast forward algorithms serve the gradients.

For stride 1 the input gradient is a forward convolution of gy with the spatially flipped,
per-group transposed weight and padding dilation*(R-1) - padding (negative padding = a crop of gy).
"""
import numpy as np

from .geometry import Geometry


def flipped_transposed(w, groups):
    """Weight (K, C/g, R, S) -> (C, K/g, R, S), flipped in R and S and transposed per group: a
    blocked Numba copy (``im2col_numba.flip_transpose``) when it can run now, else NumPy's."""
    K, Cg, R, S = w.shape
    from .im2col import _numba_kernel
    kernel = _numba_kernel("flip_transpose", w.dtype) if w.flags.c_contiguous else None
    if kernel is not None:
        out = np.empty((groups * Cg, K // groups, R, S), w.dtype)
        kernel(w.reshape(groups, K // groups, Cg, R * S),
               out.reshape(groups, Cg, K // groups, R * S))
        return out
    wg = w.reshape(groups, K // groups, Cg, R, S)[:, :, :, ::-1, ::-1].transpose(0, 2, 1, 3, 4)
    return np.ascontiguousarray(wg).reshape(groups * Cg, K // groups, R, S)


def input_grad_input(gy, g):
    """(gy', g'): the input and the geometry of the forward convolution that, with the weight
    ``flipped_transposed(w)``, equals the stride-1 input gradient of ``g``."""
    g2 = transposed_geometry(g)
    ct = max(0, g.padding[0] - g.dilation[0] * (g.R - 1))
    cl = max(0, g.padding[2] - g.dilation[1] * (g.S - 1))
    return gy[:, :, ct:ct + g2.H, cl:cl + g2.W], g2


def input_grad_problem(gy, w, g):
    """Return (gy', w', g') whose forward convolution equals the stride-1 input gradient of ``g``."""
    gy, g2 = input_grad_input(gy, g)
    return gy, flipped_transposed(w, g.groups), g2


def input_grad_via_forward(forward):
    """Build an input-gradient function for stride 1 from a forward function ``forward(x, w, g)``."""
    def input_grad(gy, w, g):
        return forward(*input_grad_problem(gy, w, g))
    return input_grad


def transposed_geometry(g):
    """Geometry of the stride-1 input gradient as a forward convolution (no arrays needed)."""
    eh, ew = g.dilation[0] * (g.R - 1), g.dilation[1] * (g.S - 1)
    pads = (eh - g.padding[0], eh - g.padding[1], ew - g.padding[2], ew - g.padding[3])
    ct, cb, cl, cr = (max(0, -p) for p in pads)
    return Geometry(g.N, g.K, g.Ho - ct - cb, g.Wo - cl - cr, g.C, g.R, g.S, (1, 1),
                    tuple(max(0, p) for p in pads), g.dilation, g.groups, g.H, g.W)
