"""Conv1d-3d, ConvTranspose1d-3d (weights, init and repr as torch)."""
import math

from ember.nn import functional as F
from ember.nn import init
from ember.nn.modules.linear import _weight_and_bias
from ember.nn.modules.module import Module
from ember.errors import EmberValueError


def _tuple(v, n):
    if isinstance(v, str):
        return v
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _ConvNd(Module):
    _n = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", device=None, dtype=None,
                 output_padding=0):
        super().__init__()
        n = self._n
        if groups <= 0:
            raise EmberValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise EmberValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise EmberValueError("out_channels must be divisible by groups")
        valid_modes = {"zeros", "reflect", "replicate", "circular"}
        if padding_mode not in valid_modes:
            raise EmberValueError(f"padding_mode must be one of {valid_modes}, but got "
                             f"padding_mode='{padding_mode}'")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise EmberValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in _tuple(stride, n)):
                raise EmberValueError("padding='same' is not supported for strided convolutions")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _tuple(kernel_size, n)
        self.stride = _tuple(stride, n)
        self.padding = _tuple(padding, n)
        self.dilation = _tuple(dilation, n)
        self.transposed = self._transposed
        self.output_padding = _tuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        if isinstance(self.padding, str):
            self._reversed_padding_repeated_twice = [0, 0] * n
            if padding == "same":
                for d, k, i in zip(self.dilation, self.kernel_size, range(n - 1, -1, -1)):
                    total = d * (k - 1)
                    left = total // 2
                    self._reversed_padding_repeated_twice[2 * i] = left
                    self._reversed_padding_repeated_twice[2 * i + 1] = total - left
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(self.padding)
                                                     for _ in range(2)]
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        _weight_and_bias(self, shape, out_channels if bias else None, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)

    def _padded(self, input):
        if self.padding_mode == "zeros":
            return input, self.padding
        mode = self.padding_mode
        return F.pad(input, self._reversed_padding_repeated_twice, mode=mode), 0


class _Conv(_ConvNd):
    """Conv1d-3d: torch's constructor (no ``output_padding``) and the forward through
    ``F.conv{1,2,3}d`` after any non-zero padding mode's pad."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype)

    def forward(self, input):
        x, pad = self._padded(input)
        conv = (F.conv1d, F.conv2d, F.conv3d)[self._n - 1]
        return conv(x, self.weight, self.bias, self.stride, pad, self.dilation, self.groups)


class Conv1d(_Conv):
    """1-d convolution over (N, C, L)."""

    _n = 1


class Conv2d(_Conv):
    """2-d convolution over (N, C, H, W)."""


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise EmberValueError(f'Only "zeros" padding mode is supported for '
                                  f'{type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, output_padding)

    def forward(self, input, output_size=None):
        op = self._output_padding(input, output_size)
        conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self._n - 1]
        return conv(input, self.weight, self.bias, self.stride, self.padding, op, self.groups,
                    self.dilation)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        n = self._n
        output_size = tuple(output_size)[-n:]
        spatial = tuple(input.shape[-n:])
        res = []
        for d in range(n):
            min_size = ((spatial[d] - 1) * self.stride[d] - 2 * self.padding[d] +
                        self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            op = output_size[d] - min_size
            if not 0 <= op < max(self.stride[d], self.dilation[d]):
                raise EmberValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {min_size} (for an input of {spatial})")
            res.append(op)
        return tuple(res)


class ConvTranspose1d(_ConvTransposeNd):
    """1-d transposed convolution over (N, C, L)."""

    _n = 1


class ConvTranspose2d(_ConvTransposeNd):
    """2-d transposed convolution over (N, C, H, W)."""


class Conv3d(_Conv):
    """3-d convolution over (N, C, D, H, W)."""

    _n = 3


class ConvTranspose3d(_ConvTransposeNd):
    """3-d transposed convolution over (N, C, D, H, W)."""

    _n = 3
