"""Argument normalisation and shape checks for 2-d convolution, done before any work.

A ``Geometry`` describes one convolution problem: input (N, C, H, W), weight (K, C/groups, R, S),
stride, padding (top, bottom, left, right; never negative once built), dilation, groups and the
output size (Ho, Wo). Every algorithm receives one and every direction is expressed with one.
"""
from dataclasses import dataclass

import numpy as np

from ember.kernels.lru import remembered

DTYPES = (np.float32, np.float64)


@dataclass(frozen=True)
class Geometry:
    N: int
    C: int
    H: int
    W: int
    K: int
    R: int
    S: int
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int
    Ho: int
    Wo: int

    @property
    def Cg(self):
        return self.C // self.groups

    @property
    def Kg(self):
        return self.K // self.groups

    @property
    def Hp(self):
        return self.H + self.padding[0] + self.padding[1]

    @property
    def Wp(self):
        return self.W + self.padding[2] + self.padding[3]

    @property
    def input_shape(self):
        return (self.N, self.C, self.H, self.W)

    @property
    def weight_shape(self):
        return (self.K, self.Cg, self.R, self.S)

    @property
    def output_shape(self):
        return (self.N, self.K, self.Ho, self.Wo)

    @property
    def is_depthwise(self):
        return self.groups == self.C and self.groups > 1 and self.Cg == 1

    def flops(self):
        """Multiply-adds times two of the direct algorithm."""
        return 2 * self.N * self.K * self.Cg * self.R * self.S * self.Ho * self.Wo

    def key(self):
        return (self.input_shape, self.weight_shape, self.stride, self.padding, self.dilation,
                self.groups)


def pair(value, name, op, length=2):
    """Return ``value`` as a tuple of ``length`` ints (an int is repeated)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * length
    try:
        out = tuple(int(v) for v in value)
    except TypeError:
        raise ValueError(f"{op}: {name} must be an int or a tuple of {length} ints, got {value!r}")
    if len(out) != length:
        raise ValueError(f"{op}: {name} must have {length} values, got {value!r}")
    return out


def padding4(padding, op):
    """Normalise padding to (top, bottom, left, right): an int, a 2-tuple (symmetric) or a 4-tuple."""
    if isinstance(padding, (int, np.integer)) and not isinstance(padding, bool):
        p = (int(padding),) * 4
    else:
        p = tuple(int(v) for v in padding)
        if len(p) == 2:
            p = (p[0], p[0], p[1], p[1])
        elif len(p) != 4:
            raise ValueError(f"{op}: padding must be an int, 2 or 4 ints, got {padding!r}")
    if min(p) < 0:
        raise ValueError(f"{op}: padding must be non-negative, got {padding!r}")
    return p


def out_size(size, pad_total, kernel, stride, dilation):
    """Output length of a convolution along one axis (may be <= 0 for invalid problems)."""
    return (size + pad_total - dilation * (kernel - 1) - 1) // stride + 1


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def check_dtype(op, *arrays):
    """Raise RuntimeError unless every array is float32 or float64 and all share one dtype."""
    if len(arrays) == 2:   # every caller's case, without building a set
        a, b = arrays[0].dtype, arrays[1].dtype
        if a == b and (a == _F32 or a == _F64):
            return
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) != 1 or next(iter(dtypes)).type not in DTYPES:
        names = ", ".join(str(a.dtype) for a in arrays)
        raise RuntimeError(f"{op}: expected float32 or float64 arrays of one dtype, got {names}")


_geometries = {}
_GEOMETRIES_MAX = 512


def geometry(op, input_shape, weight_shape, stride, padding, dilation, groups):
    """Validate a 2-d convolution and return its ``Geometry``.

    Raises ValueError naming ``op``, the input and weight shapes and what does not fit: ranks,
    channels versus groups, non-positive stride/dilation, kernel larger than the padded input or a
    non-positive output size.

    Valid problems are remembered (a batch-of-one layer spends longer validating than its kernel
    runs): the key holds each argument with its class, so ``stride=True`` or ``1.0``, which the
    checks refuse, never meets the entry of ``1``; unhashable arguments (lists) are not kept.
    """
    key = (input_shape, weight_shape, stride.__class__, stride, padding.__class__, padding,
           dilation.__class__, dilation, groups.__class__, groups)
    return remembered(_geometries, _GEOMETRIES_MAX, key, _geometry, op, input_shape,
                      weight_shape, stride, padding, dilation, groups)


def _geometry(op, input_shape, weight_shape, stride, padding, dilation, groups):
    input_shape, weight_shape = tuple(input_shape), tuple(weight_shape)
    where = f"{op}: input {input_shape}, weight {weight_shape}"
    if len(input_shape) != 4 or len(weight_shape) != 4:
        raise ValueError(f"{where}: expected 4-d input (N, C, H, W) and weight (K, C/groups, R, S)")
    stride, dilation = pair(stride, "stride", op), pair(dilation, "dilation", op)
    pad = padding4(padding, op)
    groups = int(groups)
    if min(stride) < 1 or min(dilation) < 1:
        raise ValueError(f"{where}: stride {stride} and dilation {dilation} must be positive")
    N, C, H, W = input_shape
    K, Cg, R, S = weight_shape
    if groups < 1:
        raise ValueError(f"{where}: groups must be positive, got {groups}")
    if min(R, S, K, Cg) < 1:
        raise ValueError(f"{where}: weight dimensions must be positive")
    if C != Cg * groups:  # torch's words
        raise ValueError(f"{op}: Given groups={groups}, weight of size {list(weight_shape)}, "
                         f"expected input{list(input_shape)} to have {Cg * groups} channels, but "
                         f"got {C} channels instead")
    if K % groups:
        raise ValueError(f"{where}: {K} output channels are not divisible by groups={groups}")
    Hp, Wp = H + pad[0] + pad[1], W + pad[2] + pad[3]
    eh, ew = dilation[0] * (R - 1) + 1, dilation[1] * (S - 1) + 1
    if eh > Hp or ew > Wp:
        raise ValueError(f"{where}: kernel size {eh}x{ew} (after dilation {dilation}) is larger "
                         f"than the padded input {Hp}x{Wp} (padding {pad})")
    Ho, Wo = out_size(H, pad[0] + pad[1], R, stride[0], dilation[0]), \
        out_size(W, pad[2] + pad[3], S, stride[1], dilation[1])
    if Ho < 1 or Wo < 1:
        raise ValueError(f"{where}: output size {Ho}x{Wo} is not positive")
    return Geometry(N, C, H, W, K, R, S, stride, pad, dilation, groups, Ho, Wo)


def check_shape(op, name, actual, expected, g):
    """Raise ValueError when ``actual`` differs from ``expected`` for geometry ``g``."""
    if tuple(actual) != tuple(expected):
        raise ValueError(f"{op}: input {g.input_shape}, weight {g.weight_shape}: {name} has shape "
                         f"{tuple(actual)}, expected {tuple(expected)}")


_tap_offsets = {}


def tap_offsets(g):
    """Offset of each tap (c, r, s) in one flattened zero-padded image, c*Hp*Wp + r*dh*Wp +
    s*dw, as int64 (kept per geometry: it costs ~5 us, a few percent of a LeNet-sized call).
    The direct and thin kernels read their taps at these offsets."""
    key = (g.C, g.Hp, g.Wp, g.R, g.S, g.dilation)
    off = _tap_offsets.get(key)
    if off is None:
        dh, dw = g.dilation
        c = np.arange(g.C)[:, None, None] * (g.Hp * g.Wp)
        r = np.arange(g.R)[None, :, None] * (dh * g.Wp)
        s = np.arange(g.S)[None, None, :] * dw
        off = (c + r + s).reshape(-1).astype(np.int64)
        if len(_tap_offsets) > 256:
            _tap_offsets.clear()
        _tap_offsets[key] = off
    return off
