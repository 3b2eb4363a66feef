"""Activation modules (ReLU, GELU, Softmax, ...)."""
import inspect

from ember.ops import creation
from ember.nn import functional as F
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.errors import EmberTypeError


def _simple(name, fn, doc, inplace=False, params=(), extra_repr=None):
    """A module class calling ``fn(input, *params)`` with torch's constructor arguments; the
    defaults are ``fn``'s (for spec ops, the spec's). ``extra_repr`` replaces the default
    ``name=value, ..., inplace=True`` where torch's differs."""
    signature = inspect.signature(fn).parameters
    fn_defaults = {n: signature[n].default for n in params}
    _extra_repr = extra_repr

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        names = list(params) + (["inplace"] if inplace else [])
        defaults = dict(fn_defaults)
        if inplace:
            defaults.setdefault("inplace", False)
        if len(args) > len(names):
            raise EmberTypeError(f"{name}() takes at most {len(names)} arguments")
        for n, v in zip(names, args):
            defaults[n] = v
        for n, v in kwargs.items():
            if n not in names:
                raise EmberTypeError(f"{name}() got an unexpected keyword argument '{n}'")
            defaults[n] = v
        for n in names:
            setattr(self, n, defaults[n])

    def forward(self, input):
        kw = {n: getattr(self, n) for n in params}
        if inplace:
            kw["inplace"] = self.inplace
        return fn(input, **kw)

    def extra_repr(self):
        parts = [f"{n}={getattr(self, n)!r}" for n in params]
        if inplace and self.inplace:
            parts.append("inplace=True")
        return ", ".join(parts)

    return type(name, (Module,), {"__init__": __init__, "forward": forward,
                                  "extra_repr": _extra_repr or extra_repr, "__doc__": doc,
                                  "__module__": __name__})


ReLU = _simple("ReLU", F.relu, "max(x, 0)", inplace=True)
ReLU6 = _simple("ReLU6", F.relu6, "min(max(x, 0), 6)", inplace=True)
SELU = _simple("SELU", F.selu, "scaled ELU", inplace=True)
SiLU = _simple("SiLU", F.silu, "x * sigmoid(x)", inplace=True)
Mish = _simple("Mish", F.mish, "x * tanh(softplus(x))", inplace=True)
# torch's Hardsigmoid / Hardswish print no arguments, its shrinks the bare lambd
Hardsigmoid = _simple("Hardsigmoid", F.hardsigmoid, "piecewise-linear sigmoid", inplace=True,
                      extra_repr=lambda self: "")
Hardswish = _simple("Hardswish", F.hardswish, "x * hardsigmoid(x)", inplace=True,
                    extra_repr=lambda self: "")
LeakyReLU = _simple("LeakyReLU", F.leaky_relu, "x or negative_slope * x", inplace=True,
                    params=("negative_slope",))
ELU = _simple("ELU", F.elu, "x or alpha * (exp(x) - 1)", inplace=True, params=("alpha",))
CELU = _simple("CELU", F.celu, "continuously differentiable ELU", inplace=True,
               params=("alpha",))
Hardtanh = _simple("Hardtanh", F.hardtanh, "clamp(x, min_val, max_val)", inplace=True,
                   params=("min_val", "max_val"))
GELU = _simple("GELU", F.gelu, "x * Phi(x)", params=("approximate",))
Sigmoid = _simple("Sigmoid", F.sigmoid, "1 / (1 + exp(-x))")
Tanh = _simple("Tanh", F.tanh, "tanh(x)")
LogSigmoid = _simple("LogSigmoid", F.logsigmoid, "log(sigmoid(x))")
Softsign = _simple("Softsign", F.softsign, "x / (1 + |x|)")
Tanhshrink = _simple("Tanhshrink", F.tanhshrink, "x - tanh(x)")
Softplus = _simple("Softplus", F.softplus, "log(1 + exp(beta x)) / beta",
                   params=("beta", "threshold"))
Hardshrink = _simple("Hardshrink", F.hardshrink, "x where |x| > lambd else 0", params=("lambd",),
                     extra_repr=lambda self: str(self.lambd))
Softshrink = _simple("Softshrink", F.softshrink, "soft thresholding", params=("lambd",),
                     extra_repr=lambda self: str(self.lambd))
GLU = _simple("GLU", F.glu, "gated linear unit", params=("dim",))


def _rrelu_eval(input, lower, upper, inplace=False):
    return F.rrelu(input, lower, upper, False, inplace)


_rrelu_eval.__signature__ = inspect.signature(F.rrelu)  # F.rrelu's defaults
RReLU = _simple("RReLU", _rrelu_eval, "randomized leaky ReLU (eval behaviour)", inplace=True,
                params=("lower", "upper"))


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        inplace = ", inplace=True" if self.inplace else ""
        return f"threshold={self.threshold}, value={self.value}{inplace}"


class PReLU(Module):
    """max(0, x) + a * min(0, x) with a learnable ``a`` (init 0.25)."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(creation.full((num_parameters,), init, dtype=dtype))

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class _SoftmaxBase(Module):
    _fn = None

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return type(self)._fn(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(_SoftmaxBase):
    _fn = staticmethod(F.softmax)


class LogSoftmax(_SoftmaxBase):
    _fn = staticmethod(F.log_softmax)


class Softmin(_SoftmaxBase):
    _fn = staticmethod(F.softmin)


class Softmax2d(Module):
    def forward(self, input):
        return F.softmax(input, -3)


def __getattr__(name):
    """``MultiheadAttention`` lives in torch.nn.modules.activation; ember defines it in
    transformer (imported on first use here)."""
    if name == "MultiheadAttention":
        from ember.nn.modules.transformer import MultiheadAttention
        return MultiheadAttention
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
