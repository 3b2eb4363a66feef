"""torch's entry points of the op_db breadth work that take torch-style arguments:
factories (``logspace``, ``empty_strided``, ``empty_permuted``, ``scalar_tensor``,
``randint_like``), ``histogram`` with its named result, and the in-place random fills
(``Tensor.cauchy_``, ``exponential_``, ``geometric_``, ``log_normal_``). Each dispatches spec ops."""
import builtins
from collections import namedtuple

import numpy as np

from ember import _dtype
from ember.autograd import _generated as G
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError, public
from ember.random import resolve
from ember.tensor import Tensor

histogram_result = namedtuple("histogram", ["hist", "bin_edges"])


def _np(dtype, default=None):
    if dtype is None:
        return (default or _dtype.get_default_dtype()).numpy
    return _dtype.to_numpy_dtype(dtype)


def _finish(t, requires_grad):
    return t.requires_grad_(True) if requires_grad else t


def _ints(seq, what, op):
    if isinstance(seq, (int, np.integer)):
        seq = (seq,)
    if not isinstance(seq, (tuple, list)) or not builtins.all(
            isinstance(s, (int, np.integer)) for s in seq):
        raise EmberTypeError(f"{op}: {what} must be a sequence of ints, got {seq!r}")
    return tuple(builtins.int(s) for s in seq)


def _scalar(v):
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise EmberRuntimeError(f"logspace: expected a 0-d tensor bound, got shape "
                                    f"{tuple(v.shape)}")
        return v.item()
    return v


def logspace(start, end, steps, base=10.0, *, dtype=None, layout=None, device=None,
             requires_grad=False, out=None):
    """``steps`` values ``base ** x`` for ``x`` evenly spaced from ``start`` to ``end``."""
    return _finish(G.logspace(_scalar(start), _scalar(end), steps, float(base), _np(dtype)),
                   requires_grad)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """An uninitialised tensor of ``size`` (ember's arrays keep their own strides)."""
    size = _ints(size, "size", "empty_strided")
    stride = _ints(stride, "stride", "empty_strided")
    if len(size) != len(stride):
        raise EmberRuntimeError(f"empty_strided: mismatch in length of strides and shape: "
                                f"{len(stride)} strides for shape {size}")
    return _finish(G.empty(size, _np(dtype)), requires_grad)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """An uninitialised tensor of ``size``; ``physical_layout`` must permute its dims."""
    size = _ints(size, "size", "empty_permuted")
    perm = _ints(physical_layout, "physical_layout", "empty_permuted")
    if sorted(perm) != list(range(len(size))):
        raise EmberRuntimeError(f"empty_permuted: physical_layout {list(perm)} is not a "
                                f"permutation of the {len(size)} dims of size {size}")
    return _finish(G.empty(size, _np(dtype)), requires_grad)


def scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """A 0-d tensor holding ``s`` (default dtype unless given)."""
    if isinstance(s, Tensor):
        s = s.item()
    return _finish(G.full((), s, _np(dtype)), requires_grad)


def randint_like(input, low=0, high=None, *, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None, generator=None):
    """Integers uniform in [low, high) with ``input``'s shape (and dtype unless given)."""
    from ember.creation import _check_random_bounds, _int_arg
    if high is None:
        low, high = 0, low
    low, high = _int_arg("randint_like", "low", low, 2), _int_arg("randint_like", "high", high, 3)
    ref = input if dtype is None else G.to(input, _dtype.to_numpy_dtype(dtype))
    _check_random_bounds("randint_like", low, high, ref._data.dtype)
    return _finish(G.randint_like(ref, low, high, resolve(generator)), requires_grad)


def histogram(input, bins, *, range=None, weight=None, density=False, out=None):
    """(hist, bin_edges): ``bins`` equal bins over ``range`` (default the input's min and max)
    or the bins between the given 1-d tensor of edges; ``weight`` and ``density`` as numpy."""
    if isinstance(bins, Tensor):
        hist, edges = G.histogram_kernel(input, bins, weight, 0, None, density)
    else:
        if not isinstance(bins, (int, np.integer)):
            raise EmberTypeError(f"histogram: bins must be an int or a 1-d tensor, got "
                                 f"{type(bins).__name__}")
        rng = None if range is None else [float(range[0]), float(range[1])]
        hist, edges = G.histogram_kernel(input, None, weight, builtins.int(bins), rng, density)
    return histogram_result(hist, edges)


_INTERP = ("bilinear", "nearest", "bicubic")
_PAD = ("zeros", "border", "reflection")


def _grid_sampler(name, ndim):
    def fn(input, grid, interpolation_mode, padding_mode, align_corners):
        if input.dim() != ndim:
            raise EmberRuntimeError(f"{name}: expected a {ndim}-d input, got shape "
                                    f"{tuple(input.shape)}")
        if interpolation_mode not in builtins.range(len(_INTERP)) or \
                padding_mode not in builtins.range(len(_PAD)):
            raise EmberValueError(f"{name}: interpolation_mode must be 0 (bilinear), 1 (nearest) "
                                  f"or 2 (bicubic) and padding_mode 0 (zeros), 1 (border) or 2 "
                                  f"(reflection), got {interpolation_mode} and {padding_mode}")
        return G.grid_sampler(input, grid, _INTERP[interpolation_mode], _PAD[padding_mode],
                              builtins.bool(align_corners))
    fn.__name__ = name
    fn.__doc__ = (f"ATen's ``{name}``: ``grid_sample`` with integer interpolation mode (0 "
                  f"bilinear, 1 nearest, 2 bicubic) and padding mode (0 zeros, 1 border, 2 "
                  f"reflection).")
    return fn


grid_sampler_2d = _grid_sampler("grid_sampler_2d", 4)
grid_sampler_3d = _grid_sampler("grid_sampler_3d", 5)


def _fill(kernel, *params):
    def method(self, *args, generator=None, **kwargs):
        values = list(params)
        names = [p[0] for p in params]
        if len(args) > len(values):
            raise EmberTypeError(f"{kernel}: takes at most {len(values)} arguments, got "
                                 f"{len(args)}")
        for i, a in enumerate(args):
            values[i] = (names[i], a)
        for k, v in kwargs.items():
            if k not in names:
                raise EmberTypeError(f"{kernel}: got an unexpected keyword argument {k!r}")
            values[names.index(k)] = (k, v)
        if self._data.dtype.kind != "f" and kernel != "geometric_":
            raise EmberRuntimeError(f"{kernel}: expects a floating point tensor, got "
                                    f"{self._data.dtype}")
        draw = getattr(G, kernel[:-1] + "_like")
        return G.copy_(self, draw(self, *(float(v) for _, v in values), resolve(generator)))
    method.__name__ = kernel
    method.__doc__ = (f"Fill in place with samples (torch's ``Tensor.{kernel}``; parameters "
                      f"{', '.join(f'{n}={d}' for n, d in params)}).")
    return method


_NO_DEFAULT = None
METHODS = {
    "cauchy_": _fill("cauchy_", ("median", 0.0), ("sigma", 1.0)),
    "exponential_": _fill("exponential_", ("lambd", 1.0)),
    "geometric_": _fill("geometric_", ("p", _NO_DEFAULT)),
    "log_normal_": _fill("log_normal_", ("mean", 1.0), ("std", 2.0)),
}


def _new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False,
                       layout=None, pin_memory=False):
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype,
                         requires_grad=requires_grad)


METHODS["new_empty_strided"] = _new_empty_strided
FUNCTIONS = ("logspace", "empty_strided", "empty_permuted", "scalar_tensor", "randint_like",
             "histogram", "grid_sampler_2d", "grid_sampler_3d")


def _set_part(part):
    def setter(self, value):
        view = part(self)
        G.copy_(view, value if hasattr(value, "_data") else G.fill(view, value))
    return setter


def install(namespace, tensor_cls):
    """Add the functions to ``ember``'s namespace and the methods to Tensor."""
    for name in FUNCTIONS:
        namespace[name] = public(globals()[name])
    for name, fn in METHODS.items():
        setattr(tensor_cls, name, public(fn, name))
    tensor_cls.real = property(G.real, _set_part(G.real), doc=(
        "The real part (a view; the tensor itself for real dtypes), as torch's ``Tensor.real``; "
        "assigning to it writes into the tensor."))
    tensor_cls.imag = property(G.imag, _set_part(G.imag), doc=(
        "The imaginary part of a complex tensor (a view), as torch's ``Tensor.imag``; assigning "
        "to it writes into the tensor. Raises for real dtypes."))
    if "histogram" not in dir(tensor_cls):
        setattr(tensor_cls, "histogram", public(histogram))


def _basis(A, q, niter, M):
    """An orthonormal (..., m, q) basis approximating A's range (Halko et al., algorithm 4.4)."""
    import ember.linalg as LA
    n = A.shape[-1]
    R = G.randn(tuple(A.shape[:-2]) + (n, q), resolve(None), A._data.dtype)
    X = G.matmul(A, R)
    if M is not None:
        X = G.sub(X, G.matmul(M, R))
    Q = LA.qr(X).Q
    At = G.transpose(A, -2, -1)
    Mt = None if M is None else G.transpose(M, -2, -1)
    for _ in builtins.range(niter):
        X = G.matmul(At, Q)
        if Mt is not None:
            X = G.sub(X, G.matmul(Mt, Q))
        Q = LA.qr(X).Q
        X = G.matmul(A, Q)
        if M is not None:
            X = G.sub(X, G.matmul(M, Q))
        Q = LA.qr(X).Q
    return Q


def _check_count(op, name, v):
    """``v`` is a non-negative int within int64 (a loop count or a rank)."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise EmberTypeError(f"{op}: {name} must be an int, got {type(v).__name__} {v!r}")
    if not 0 <= v < 2 ** 63:
        raise EmberValueError(f"{op}: {name} must be a non-negative int64, got {v}")


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) of a rank-``q`` approximate SVD of ``A`` (or ``A - M``) by randomized subspace
    iteration (torch.svd_lowrank; ember's default generator draws the test matrix)."""
    q = 6 if q is None else q
    _check_count("svd_lowrank", "q", q)
    _check_count("svd_lowrank", "niter", niter)
    m, n = A.shape[-2], A.shape[-1]
    if not 0 <= q <= builtins.min(m, n):
        raise EmberValueError(f"svd_lowrank: q={q} must be in [0, min(m, n) = {builtins.min(m, n)}]"
                              f" for A of shape {tuple(A.shape)}")
    import ember.linalg as LA
    if M is not None:
        M = G.broadcast_to(M, tuple(A.shape))
    if m < n:  # work on the transpose, whose range is the smaller space
        A, M = G.transpose(A, -2, -1), None if M is None else G.transpose(M, -2, -1)
    Q = _basis(A, q, niter, M)
    B = G.matmul(G.transpose(Q, -2, -1), A)
    if M is not None:
        B = G.sub(B, G.matmul(G.transpose(Q, -2, -1), M))
    U, S, Vh = LA.svd(B, full_matrices=False)
    U, V = G.matmul(Q, U), G.transpose(Vh, -2, -1)
    return (V, S, U) if m < n else (U, S, V)


def pca_lowrank(A, q=None, center=True, niter=2):
    """(U, S, V) of a principal component analysis of ``A``'s rows (torch.pca_lowrank): the
    low-rank SVD of ``A`` less its column means when ``center``."""
    m, n = A.shape[-2], A.shape[-1]
    q = builtins.min(6, m, n) if q is None else q
    _check_count("pca_lowrank", "q", q)
    _check_count("pca_lowrank", "niter", niter)
    if not 0 <= q <= builtins.min(m, n):
        raise EmberValueError(f"pca_lowrank: q={q} must be in [0, min(m, n) = {builtins.min(m, n)}]"
                              f" for A of shape {tuple(A.shape)}")
    if not center:
        return svd_lowrank(A, q, niter)
    C = G.mean(A, (-2,), True)
    return svd_lowrank(G.sub(A, C), q, niter)


FUNCTIONS = FUNCTIONS + ("svd_lowrank", "pca_lowrank")


def _part(f, d, start, stop):
    n = f.shape[d]
    start, stop = start % n if start < 0 else start, stop % n if stop <= 0 else stop
    return G.narrow(f, d, start, stop - start)


def _along(t, d, ndim):
    return G.reshape(t, (-1,) + (1,) * (ndim - 1 - d))


def _gradient_dim(f, d, h, edge_order):
    n, nd = f.shape[d], f.dim()
    if n < edge_order + 1:
        raise EmberRuntimeError(f"gradient: each dimension must have at least edge_order + 1 = "
                                f"{edge_order + 1} elements, got {n} along dim {d}")
    p = lambda a, b: _part(f, d, a, b)  # noqa: E731
    if not isinstance(h, Tensor):
        h = builtins.float(h)
        mid = G.sub(p(2, n), p(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first, last = G.sub(p(1, 2), p(0, 1)) / h, G.sub(p(n - 1, n), p(n - 2, n - 1)) / h
        else:
            first = (p(0, 1) * -1.5 + p(1, 2) * 2.0 - p(2, 3) * 0.5) / h
            last = (p(n - 3, n - 2) * 0.5 - p(n - 2, n - 1) * 2.0 + p(n - 1, n) * 1.5) / h
        return G.cat([first, mid, last], d)
    if h.dim() != 1 or h.shape[0] != n:
        raise EmberRuntimeError(f"gradient: the coordinates along dim {d} must be a 1-d tensor "
                                f"of {n} values, got shape {tuple(h.shape)}")
    dx = G.diff(h)
    h1, h2 = _along(G.narrow(dx, 0, 0, n - 2), d, nd), _along(G.narrow(dx, 0, 1, n - 2), d, nd)
    mid = (p(0, n - 2) * (-h2 / (h1 * (h1 + h2))) + p(1, n - 1) * ((h2 - h1) / (h1 * h2))
           + p(2, n) * (h1 / (h2 * (h1 + h2))))
    e = [_along(G.narrow(dx, 0, i, 1), d, nd) for i in (0, 1, n - 3, n - 2)] if n > 2 else \
        [_along(dx, d, nd)] * 4
    if edge_order == 1:
        first = G.sub(p(1, 2), p(0, 1)) / e[0]
        last = G.sub(p(n - 1, n), p(n - 2, n - 1)) / e[3]
    else:
        a1, a2 = e[0], e[1]
        first = (p(0, 1) * (-(2 * a1 + a2) / (a1 * (a1 + a2))) + p(1, 2) * ((a1 + a2) / (a1 * a2))
                 + p(2, 3) * (-a1 / (a2 * (a1 + a2))))
        b1, b2 = e[2], e[3]
        last = (p(n - 3, n - 2) * (b2 / (b1 * (b1 + b2))) + p(n - 2, n - 1) * (-(b2 + b1) / (b1 * b2))
                + p(n - 1, n) * ((2 * b2 + b1) / (b2 * (b1 + b2))))
    return G.cat([first, mid, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """Central-difference estimates of the derivative of ``input`` along each of ``dim`` (all
    dims by default): one tensor per dim, as torch.gradient. ``spacing`` is one step for every
    dim, a step per dim, or a 1-d tensor of coordinates per dim; ``edge_order`` 1 or 2 sets the
    accuracy of the one-sided differences at the ends."""
    if edge_order not in (1, 2):
        raise EmberRuntimeError(f"gradient: edge_order must be 1 or 2, got {edge_order}")
    nd = input.dim()
    dims = list(builtins.range(nd)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    dims = [d % nd if -nd <= d < nd else None for d in dims]
    if None in dims or len(set(dims)) != len(dims):
        raise EmberRuntimeError(f"gradient: dims {dim} are out of range or repeated for a "
                                f"{nd}-d input")
    if spacing is None:
        spacing = 1
    steps = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(steps) != len(dims):
        raise EmberRuntimeError(f"gradient: expected spacing to be a scalar or to have one "
                                f"entry per dimension ({len(dims)}), got {len(steps)}")
    f = input if input._data.dtype.kind == "f" else G.to(input, _dtype.get_default_dtype().numpy)
    steps = [s.item() if isinstance(s, Tensor) and s.dim() == 0 else s for s in steps]
    return tuple(_gradient_dim(f, d, h, edge_order) for d, h in zip(dims, steps))


FUNCTIONS = FUNCTIONS + ("gradient",)


histogramdd_result = namedtuple("histogramdd", ["hist", "bin_edges"])


def histogramdd(input, bins, *, range=None, weight=None, density=False, out=None):
    """(hist, bin_edges) of the points in the rows of ``input`` (..., D): ``bins`` a count for
    every dim, a count per dim, or a 1-d tensor of edges per dim; ``range`` a flat
    [min0, max0, min1, max1, ...] for counted bins (default each dim's min and max)."""
    d = input.shape[-1] if input.dim() else 0
    if isinstance(bins, (int, np.integer)):
        bins = [builtins.int(bins)] * d
    bins = list(bins)
    if len(bins) != d:
        raise EmberRuntimeError(f"histogramdd: expected {d} bin counts or edge tensors for an "
                                f"input whose last dim is {d}, got {len(bins)}")
    if range is not None and len(range) != 2 * d:
        raise EmberRuntimeError(f"histogramdd: range must hold 2 * {d} values, got {len(range)}")
    pts = G.reshape(input, (-1, d))
    edges = []
    for i, b in enumerate(bins):
        if isinstance(b, Tensor):
            if b.dtype != input.dtype:
                raise EmberRuntimeError(f"histogramdd: input and bins must have the same dtype, "
                                        f"got input {input.dtype} and bins[{i}] {b.dtype}")
            edges.append(b)
            continue
        col = G.select(pts, 1, i)
        rng = None if range is None else [builtins.float(range[2 * i]),
                                          builtins.float(range[2 * i + 1])]
        edges.append(G.histogram_kernel(col, None, None, builtins.int(b), rng, False)[1])
    tensors = [input] + edges + ([] if weight is None else [weight])
    hist = G.histogramdd_kernel(tensors, weight is not None, density)
    return histogramdd_result(hist, edges)


FUNCTIONS = FUNCTIONS + ("histogramdd",)


def _resize_(self, *size, memory_format=None):
    """Resize in place to ``size``, keeping the first elements in row-major order (new
    elements, when it grows, are uninitialised), as torch's ``Tensor.resize_``."""
    from ember.autograd.state import STATE
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = _ints(size, "size", "resize_")
    if builtins.any(s < 0 for s in size):
        raise EmberRuntimeError(f"resize_: sizes must be non-negative, got {list(size)}")
    if self.requires_grad:
        raise EmberRuntimeError("resize_: cannot resize a tensor that requires grad")
    if STATE.tracer is not None:
        raise EmberRuntimeError("resize_: a tensor cannot change its shape in place inside a "
                                "trace")
    n = builtins.int(np.prod(size, dtype=np.int64))
    flat = self._data.reshape(-1) if self._data.flags.c_contiguous else \
        np.ascontiguousarray(self._data).reshape(-1)
    if n <= flat.size:
        new = flat[:n].reshape(size)
    else:
        new = np.empty(n, self._data.dtype)
        new[:flat.size] = flat
        new = new.reshape(size)
    self._data = new
    self._bump()
    return self


def _resize_as_(self, the_template, *, memory_format=None):
    """Resize in place to the shape of ``the_template`` (see ``resize_``)."""
    return _resize_(self, tuple(the_template.shape))


METHODS["resize_"] = _resize_
METHODS["resize_as_"] = _resize_as_
resize_as_ = _resize_as_
FUNCTIONS = FUNCTIONS + ("resize_as_",)
