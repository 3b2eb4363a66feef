"""ONNX export of complex values: ONNX operators take no complex element type, so a
complex IR value is exported as a real tensor with a trailing dimension of 2 (real, imaginary),
the layout of ONNX's ``DFT``. An IR node that reads or writes a complex value is exported by the
symbolic registered here for its op (``COMPLEX``), never by its real-dtype one; a complex graph
input or output, or an op without an entry, is an export error naming the op (docs/complex.md).
The FFT ops need opset 17 (``DFT``); from opset 20 DFT takes its axis as an input."""
import numpy as np

from ember.onnx.context import SymbolicError

COMPLEX = {}
MIN_OPSET = 17


def complex_symbolic(*names):
    """Register the function as the complex-layout symbolic of the ops ``names``."""
    def deco(fn):
        for n in names:
            COMPLEX[n] = fn
        return fn
    return deco


def is_complex_node(node):
    """Whether an IR node reads or writes a complex value."""
    from ember.jit.ir import Value

    def cx(a):
        if isinstance(a, Value):
            return a.dtype is not None and np.dtype(a.dtype).kind == "c"
        if isinstance(a, (list, tuple)):
            return any(cx(x) for x in a)
        return False
    return any(cx(a) for a in node.args) or any(cx(o) for o in node.outputs)


def layout_type(dtype, shape):
    """The (dtype, shape) of a complex value's ONNX tensor: real parts, trailing 2."""
    part = np.dtype(np.float64 if np.dtype(dtype) == np.complex128 else np.float32)
    return part, (None if shape is None else tuple(shape) + (2,))


def _vals(node):
    from ember.jit.ir import Value
    return [a for a in node.args if isinstance(a, Value)]


def _part_dtype(node):
    for v in list(node.outputs) + _vals(node):
        if np.dtype(v.dtype).kind == "c":
            return layout_type(v.dtype, None)[0]
    return np.dtype(np.float32)


def _is_cx(node, i):
    from ember.jit.ir import Value
    a = node.args[i]
    return isinstance(a, Value) and np.dtype(a.dtype).kind == "c"


def _dft(g, x, axis, inverse, onesided):
    if g.opset >= 20:
        return g.op("DFT", x, None, g.const(np.array(axis, np.int64)), inverse=int(inverse),
                    onesided=int(onesided))
    return g.op("DFT", x, axis=int(axis), inverse=int(inverse), onesided=int(onesided))


def _scale(g, x, factor, dt):
    if factor == 1:
        return x
    return g.op("Mul", x, g.const(np.array(factor, dt)))


def _norm_factor(normalization, n):
    return (1.0, 1.0 / np.sqrt(n), 1.0 / n)[normalization]


def _dims(node, dim):
    nd = len(node.args[0].shape)
    return [d % nd for d in dim]


def _check_opset(g, what):
    if g.opset < MIN_OPSET:
        raise SymbolicError(f"{what} needs ONNX's DFT (opset {MIN_OPSET} or later), got opset "
                            f"{g.opset}")


@complex_symbolic("fft_r2c")
def sym_fft_r2c(g, node, x, dim, normalization, onesided):
    """Unsqueeze to (..., 1), one DFT per dim (one-sided on the last), then the scale."""
    _check_opset(g, "fft_r2c")
    dims = _dims(node, dim)
    dt = _part_dtype(node)
    y = g.unsqueeze(x, [len(node.args[0].shape)])
    order = dims[::-1]
    for k, d in enumerate(order):
        y = _dft(g, y, d, False, onesided and k == 0)
    n = int(np.prod([node.args[0].shape[d] for d in dims]))
    return _scale(g, y, _norm_factor(normalization, n), dt)


@complex_symbolic("fft_c2c")
def sym_fft_c2c(g, node, x, dim, normalization, forward):
    """One DFT per dim; ONNX's inverse DFT divides by n, undone in the final scale."""
    _check_opset(g, "fft_c2c")
    dims = _dims(node, dim)
    dt = _part_dtype(node)
    y = x
    for d in dims:
        y = _dft(g, y, d, not forward, False)
    n = int(np.prod([node.args[0].shape[d] for d in dims]))
    factor = _norm_factor(normalization, n) * (1 if forward else n)
    return _scale(g, y, factor, dt)


@complex_symbolic("fft_c2r")
def sym_fft_c2r(g, node, x, dim, normalization, last_dim_size):
    """Inverse DFTs over the other dims, the full spectrum of the last one rebuilt from its
    Hermitian symmetry (bins L-k = conj(bins k)), an inverse DFT, and the real part."""
    _check_opset(g, "fft_c2r")
    dims = _dims(node, dim)
    dt = _part_dtype(node)
    shape = node.args[0].shape
    last, L = dims[-1], int(last_dim_size)
    m = shape[last]
    if m != L // 2 + 1:
        raise SymbolicError(f"fft_c2r: the last transformed dim has {m} bins; export needs "
                            f"last_dim_size // 2 + 1 = {L // 2 + 1} (ember.fft trims to that)")
    y = x
    for d in dims[:-1]:
        y = _dft(g, y, d, True, False)
    if L - m > 0:
        mirror = g.op("Slice", y, g.const(np.array([L - m], np.int64)),
                      g.const(np.array([0], np.int64)), g.const(np.array([last], np.int64)),
                      g.const(np.array([-1], np.int64)))
        mirror = g.op("Mul", mirror, g.const(np.array([1, -1], dt)))
        y = g.op("Concat", y, mirror, axis=last)
    y = _dft(g, y, last, True, False)
    real = g.op("Gather", y, g.const(np.array(0, np.int64)), axis=len(shape))
    n = int(np.prod([shape[d] for d in dims[:-1]])) * L
    return _scale(g, real, _norm_factor(normalization, n) * n, dt)


@complex_symbolic("real")
def sym_real(g, node, x):
    return g.op("Gather", x, g.const(np.array(0, np.int64)), axis=len(node.args[0].shape))


@complex_symbolic("imag")
def sym_imag(g, node, x):
    return g.op("Gather", x, g.const(np.array(1, np.int64)), axis=len(node.args[0].shape))


@complex_symbolic("view_as_real", "view_as_complex", "resolve_conj", "resolve_neg")
def sym_same_layout(g, node, x):
    return g.op("Identity", x)


@complex_symbolic("conj", "conj_physical")
def sym_conj(g, node, x):
    return g.op("Mul", x, g.const(np.array([1, -1], _part_dtype(node))))


@complex_symbolic("abs")
def sym_abs(g, node, x):
    return g.reduce("ReduceL2", x, [len(node.args[0].shape)], keepdims=False)


@complex_symbolic("complex")
def sym_complex(g, node, re, im):
    nd = len(node.outputs[0].shape)
    parts = []
    for i, p in enumerate((re, im)):
        shape = node.args[i].shape
        if tuple(shape) != tuple(node.outputs[0].shape):
            p = g.op("Expand", p, g.const(np.array(node.outputs[0].shape, np.int64)))
        parts.append(g.unsqueeze(p, [nd]))
    return g.op("Concat", *parts, axis=nd)


def _as_complex(g, node, i, value, dt):
    """Operand ``i`` in the complex layout: a complex value as it is, a real one with a zero
    imaginary part, a Python number as a (2,) constant."""
    from ember.jit.ir import Value
    a = node.args[i]
    if isinstance(a, Value):
        if np.dtype(a.dtype).kind == "c":
            return value
        nd = len(a.shape)
        re = g.unsqueeze(g.cast(value, dt), [nd])
        return g.op("Concat", re, g.op("Mul", re, g.const(np.zeros((), dt))), axis=nd)
    c = complex(a)
    return g.const(np.array([c.real, c.imag], dt))


def _parts(g, z, nd):
    return (g.op("Gather", z, g.const(np.array(0, np.int64)), axis=nd),
            g.op("Gather", z, g.const(np.array(1, np.int64)), axis=nd))


@complex_symbolic("add", "sub")
def sym_add(g, node, a, b, alpha=1):
    dt = _part_dtype(node)
    za, zb = _as_complex(g, node, 0, a, dt), _as_complex(g, node, 1, b, dt)
    if alpha != 1:
        if isinstance(alpha, complex):
            raise SymbolicError("a complex alpha is not exported")
        zb = g.op("Mul", zb, g.const(np.array(alpha, dt)))
    return g.op("Add" if node.kind == "add" else "Sub", za, zb)


def _cx_operand(node, i):
    from ember.jit.ir import Value
    a = node.args[i]
    return np.dtype(a.dtype).kind == "c" if isinstance(a, Value) else isinstance(a, complex)


@complex_symbolic("mul")
def sym_mul(g, node, a, b):
    from ember.jit.ir import Value
    dt = _part_dtype(node)
    nd = len(node.outputs[0].shape)
    cx = [_cx_operand(node, 0), _cx_operand(node, 1)]
    if not (cx[0] and cx[1]):  # complex times real: both parts scaled
        zi, ri = (0, 1) if cx[0] else (1, 0)
        z, r = (a, b)[zi], (a, b)[ri]
        if isinstance(node.args[ri], Value):
            r = g.unsqueeze(g.cast(r, dt), [len(node.args[ri].shape)])
        else:
            r = g.const(np.array(float(node.args[ri]), dt))
        return g.op("Mul", z, r)
    za, zb = _as_complex(g, node, 0, a, dt), _as_complex(g, node, 1, b, dt)
    ar, ai = _parts(g, za, len(node.args[0].shape) if isinstance(node.args[0], Value) else 0)
    br, bi = _parts(g, zb, len(node.args[1].shape) if isinstance(node.args[1], Value) else 0)
    re = g.op("Sub", g.op("Mul", ar, br), g.op("Mul", ai, bi))
    im = g.op("Add", g.op("Mul", ar, bi), g.op("Mul", ai, br))
    return g.op("Concat", g.unsqueeze(re, [nd]), g.unsqueeze(im, [nd]), axis=nd)


@complex_symbolic("sum")
def sym_sum(g, node, x, dim=None, keepdim=False, dtype=None):
    nd = len(node.args[0].shape)
    axes = list(range(nd)) if dim is None or len(dim) == 0 else [d % nd for d in dim]
    return g.reduce("ReduceSum", x, axes, keepdims=keepdim)


@complex_symbolic("narrow")
def sym_narrow(g, node, x, dim, start, length):
    nd = len(node.args[0].shape)
    d = dim % nd
    s = start % node.args[0].shape[d] if start < 0 else start
    return g.op("Slice", x, g.const(np.array([s], np.int64)),
                g.const(np.array([s + length], np.int64)), g.const(np.array([d], np.int64)))


@complex_symbolic("pad")
def sym_pad(g, node, x, pad, mode="constant", value=None):
    """Zero padding (torch's ``F.pad`` pairs from the last dim) in the complex layout."""
    if mode != "constant" or value not in (None, 0, 0.0):
        raise SymbolicError(f"pad of a complex tensor is exported for mode='constant' with zeros "
                            f"only, got mode={mode!r}, value={value!r}")
    nd = len(node.args[0].shape)
    begins, ends = [0] * (nd + 1), [0] * (nd + 1)
    for k in range(len(pad) // 2):
        d = nd - 1 - k
        begins[d], ends[d] = int(pad[2 * k]), int(pad[2 * k + 1])
    if min(begins + ends) < 0:
        raise SymbolicError("negative padding of a complex tensor is not exported")
    return g.op("Pad", x, g.const(np.array(begins + ends, np.int64)))
