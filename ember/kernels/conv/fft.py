"""Tiled FFT convolution (overlap-save) for stride 1, any kernel size and dilation.

The padded input is cut into T x T tiles (T in 8, 16, 32, 64) overlapping by the effective kernel
size minus one; each tile's rfft2 is multiplied by the conjugate spectrum of the zero-embedded
kernel (cross-correlation), summed over input channels as one complex GEMM per frequency
(batched in one np.matmul), and the valid (T - E + 1)^2 corner of each inverse transform is kept.
Input gradient: the forward pass of the flipped, transposed problem.
"""
import numpy as np
from numpy.lib.stride_tricks import as_strided

from .grad_as_forward import input_grad_via_forward
from .workspace import buffer, zero_border

TILES = (8, 16, 32, 64)


def supports(g, direction):
    return direction in ("forward", "input") and g.stride == (1, 1)


def tile_size(g):
    """FFT tile size with the lowest estimated cost (complex GEMM plus transforms)."""
    eh, ew = g.dilation[0] * (g.R - 1) + 1, g.dilation[1] * (g.S - 1) + 1
    best = None
    for T in TILES:
        oh, ow = T - eh + 1, T - ew + 1
        if oh < 1 or ow < 1:
            continue
        tiles = -(-g.Ho // oh) * -(-g.Wo // ow)
        cost = tiles * (8 * T * (T // 2 + 1) * g.Cg * g.Kg + 2.5 * T * T * np.log2(T) * (g.Cg + g.Kg))
        if best is None or cost < best[0]:
            best = (cost, T)
        if T >= max(g.Hp, g.Wp):
            break
    return best[1]


def forward(x, w, g):
    T = tile_size(g)
    F = T // 2 + 1
    eh, ew = g.dilation[0] * (g.R - 1) + 1, g.dilation[1] * (g.S - 1) + 1
    oh, ow = T - eh + 1, T - ew + 1
    th, tw = -(-g.Ho // oh), -(-g.Wo // ow)
    Hb, Wb = (th - 1) * oh + T, (tw - 1) * ow + T
    pt, pl = g.padding[0], g.padding[2]
    xp = buffer("fft.pad", (g.N, g.C, Hb, Wb), x.dtype)
    zero_border(xp, (pt, Hb - pt - g.H, pl, Wb - pl - g.W))
    xp[:, :, pt:pt + g.H, pl:pl + g.W] = x
    sn, sc, sh, sw = xp.strides
    tiles = as_strided(xp, (g.N, g.C, th, tw, T, T), (sn, sc, oh * sh, ow * sw, sh, sw),
                       writeable=False)
    P = g.N * th * tw
    X = np.fft.rfft2(tiles).transpose(4, 5, 1, 0, 2, 3).reshape(T * F, g.groups, g.Cg, P)
    wk = np.zeros((g.K, g.Cg, T, T), x.dtype)
    wk[:, :, :eh:g.dilation[0], :ew:g.dilation[1]] = w
    Wf = np.conj(np.fft.rfft2(wk)).transpose(2, 3, 0, 1).reshape(T * F, g.groups, g.Kg, g.Cg)
    Yf = np.matmul(Wf, X).reshape(T, F, g.K, g.N, th, tw).transpose(3, 2, 4, 5, 0, 1)
    Y = np.fft.irfft2(Yf, s=(T, T))[..., :oh, :ow]
    Y = Y.transpose(0, 1, 2, 4, 3, 5).reshape(g.N, g.K, th * oh, tw * ow)
    return np.ascontiguousarray(Y[:, :, :g.Ho, :g.Wo], dtype=x.dtype)


input_grad = input_grad_via_forward(forward)
