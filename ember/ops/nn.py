"""Neural-network ops declared ``composite`` in ember/ops/spec/nn.yaml (normalisations, pixel
shuffle, upsampling, grid sampling, cosine similarity): written in other spec ops, so their
gradients, tracing and export come from those ops (as torch's CompositeImplicitAutograd ops
do); and torch's ``dropout``, ``grid_sampler_2d/3d`` and the ``softmax`` methods."""
import builtins

from ember.autograd._generated import functions as G
from ember.errors import EmberRuntimeError, EmberValueError
from ember.errors import public as _public
from ember.ops.pointwise import _opmath
from ember.random import resolve

def _static_sizes(t, dims, op, why):
    """``t``'s sizes ``dims`` as plain ints for a constant ``op`` computes from them in Python
    (``why``): an active tracer guards them, so the trace warns when called with other sizes
    there (see ember.jit.guards)."""
    from ember.autograd.state import STATE
    tracer = STATE.tracer
    if tracer is not None and hasattr(tracer, "shape_read"):
        tracer.shape_read(t, dims, op, why)
    return tuple(t._data.shape[d] for d in dims)


def _broadcast_shape(a, b):
    """NumPy's broadcast of shapes ``a`` and ``b`` (SymInts stay traced)."""
    import numpy as np
    np.broadcast_shapes(tuple(int.__int__(s) for s in a), tuple(int.__int__(s) for s in b))
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    return tuple(x if y == 1 else y for x, y in zip(a, b))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    shape = _broadcast_shape(tuple(x1.shape), tuple(x2.shape))  # traced sizes
    x1, x2 = G.expand(x1, shape), G.expand(x2, shape)
    # torch's order: each input divided by its norm first, then the sum of products (the
    # product of the norms, or the dot product, overflows float16 where this does not)
    n1 = G.clamp(G.norm(x1, 2, (dim,), True), eps, None)
    n2 = G.clamp(G.norm(x2, 2, (dim,), True), eps, None)
    return G.sum(G.mul(G.div(x1, n1), G.div(x2, n2)), (dim,), False)


# ---------------------------------------------------------------- nn layers
import numpy as np  # noqa: E402


def _nn_const(arr):
    from ember.autograd.formulas import _const
    return _const(arr)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """torch.nn.functional.batch_norm: normalise with batch statistics (training) or the running
    ones; in training the running statistics are updated in place (outside autograd)."""
    out, mean, var = G.native_batch_norm(input, weight, bias, running_mean, running_var,
                                         training, momentum, eps)
    _update_running(input, running_mean, running_var, training, momentum, mean, var)
    return out


def native_batch_norm_outputs(input, weight, bias, running_mean, running_var, training,
                              momentum, eps):
    """torch.native_batch_norm: (output, save_mean, save_invstd), the running statistics
    updated in place in training; in evaluation the saved statistics are empty, as torch."""
    out, mean, var = G.native_batch_norm(input, weight, bias, running_mean, running_var,
                                         training, momentum, eps)
    _update_running(input, running_mean, running_var, training, momentum, mean, var)
    if not training:
        empty = G.zeros((0,), input._data.dtype)
        return out, empty, G.clone(empty)
    return out, mean, G.rsqrt(G.add(var, eps))


def _update_running(input, running_mean, running_var, training, momentum, mean, var):
    from ember.autograd.grad_mode import no_grad
    if training and running_mean is not None and running_var is not None:
        n = input.numel() // input.shape[1]  # traced: the correction follows the batch size
        with no_grad():
            m = momentum
            G.copy_(running_mean, G.add(G.mul(running_mean, 1.0 - m),
                                        G.mul(G.to(mean, running_mean._data.dtype, False), m)))
            unbiased = G.div(G.mul(G.to(var, running_var._data.dtype, False), n),
                             max(n - 1, 1))
            G.copy_(running_var, G.add(G.mul(running_var, 1.0 - m), G.mul(unbiased, m)))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.group_norm (float16/bfloat16 computed in float32 and rounded once,
    as torch's kernel)."""
    (x32, w32, b32), low = _opmath(input, weight, bias)
    if low is not None:
        return G.to(group_norm(x32, num_groups, w32, b32, eps), low)
    input, weight, bias = x32, w32, b32   # a float16 input with float32 parameters: float32
    shape = tuple(input.shape)  # traced sizes (instance_norm passes a traced num_groups)
    if len(shape) < 2 or shape[1] % num_groups:
        raise RuntimeError(f"group_norm: expected an input (N, C, ...) with C divisible by "
                           f"num_groups={num_groups}, got shape {list(shape)}")
    # traced batch size; an empty batch cannot infer the -1 (torch gives an empty result)
    rest = -1 if input._data.size else int(np.prod(shape[1:], dtype=np.int64)) // num_groups
    x = G.reshape(input, (input.shape[0], num_groups, rest))
    # each group's values a row of layer_norm (its one-pass kernels, forward and backward)
    y = G.reshape(G.layer_norm(x, (x.shape[2],), None, None, eps), tuple(input.shape))
    pshape = (1, shape[1]) + (1,) * (len(shape) - 2)
    if weight is not None:
        y = G.mul(y, G.reshape(weight, pshape))
    if bias is not None:
        y = G.add(y, G.reshape(bias, pshape))
    return y


def pixel_shuffle(input, upscale_factor):
    r = upscale_factor
    *lead, c, h, w = input.shape  # traced, so a trace follows the input's shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible "
                           f"by the square of upscale_factor, but input.size(-3)={c} is not "
                           f"divisible by {r * r}")
    n = len(lead)
    x = G.reshape(input, tuple(lead) + (c // (r * r), r, r, h, w))
    x = G.permute(x, tuple(range(n)) + tuple(n + i for i in (0, 3, 1, 4, 2)))
    return G.reshape(x, tuple(lead) + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    r = downscale_factor
    *lead, c, h, w = input.shape  # traced, so a trace follows the input's shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by "
                           f"downscale_factor={r}, got {h}x{w}")
    n = len(lead)
    x = G.reshape(input, tuple(lead) + (c, h // r, r, w // r, r))
    x = G.permute(x, tuple(range(n)) + tuple(n + i for i in (0, 2, 4, 1, 3)))
    return G.reshape(x, tuple(lead) + (c * r * r, h // r, w // r))


def _nearest_index(size_in, size_out):
    scale = np.float32(size_in / size_out)
    src = np.floor(np.arange(size_out, dtype=np.float32) * scale).astype(np.int64)
    return np.minimum(src, size_in - 1)


def _static_out(output_size, op):
    """The output size as plain ints (sizes computed from a traced shape are guarded)."""
    from ember.autograd.state import STATE
    tracer = STATE.tracer
    out = []
    for s in output_size:
        if hasattr(s, "expr") and hasattr(tracer, "shape_guard"):
            tracer.shape_guard("value", s, None, int.__int__(s), f"{op}: output size")
        out.append(int.__int__(s))
    return out


def upsample_nearest2d(input, output_size):
    # index arrays built in NumPy from the sizes: a trace holds them for these sizes only
    ih, iw = _static_sizes(input, (-2, -1), "upsample_nearest2d", "index arrays")
    oh, ow = _static_out(output_size, "upsample_nearest2d")
    rows = _nearest_index(ih, oh)
    cols = _nearest_index(iw, ow)
    return G.getitem(input, (Ellipsis, rows[:, None], cols[None, :]))


def _linear_taps(size_in, size_out, align_corners, dtype):
    dst = np.arange(size_out, dtype=np.float64)
    if align_corners:
        src = dst * ((size_in - 1) / (size_out - 1)) if size_out > 1 else dst * 0.0
    else:
        src = np.maximum((dst + 0.5) * (size_in / size_out) - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), size_in - 1)
    i1 = np.minimum(i0 + 1, size_in - 1)
    lam = (src - i0).astype(dtype)
    return i0, i1, lam


def upsample_bilinear2d(input, output_size, align_corners=False):
    # index arrays and weights built in NumPy: a trace holds them for these sizes only
    ih, iw = _static_sizes(input, (-2, -1), "upsample_bilinear2d", "index arrays")
    oh, ow = _static_out(output_size, "upsample_bilinear2d")
    dt = input._data.dtype
    r0, r1, lr = _linear_taps(ih, oh, align_corners, dt)
    c0, c1, lc = _linear_taps(iw, ow, align_corners, dt)
    lr = _nn_const(lr[:, None])
    lc = _nn_const(lc)
    top = G.getitem(input, (Ellipsis, r0, slice(None)))
    bot = G.getitem(input, (Ellipsis, r1, slice(None)))
    x = G.add(top, G.mul(G.sub(bot, top), lr))
    left = G.getitem(x, (Ellipsis, c0))
    right = G.getitem(x, (Ellipsis, c1))
    return G.add(left, G.mul(G.sub(right, left), lc))


def dropout(input, p=0.5, training=True, inplace=False, generator=None):
    """Zero elements with probability ``p`` and scale the rest by 1/(1-p) when training."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    out = G.native_dropout(input, p, True, resolve(generator))[0]
    if inplace:
        return input.copy_(out)
    return out


def _softmax_method(self, dim, dtype=None):
    return G.softmax(self, dim, dtype)


def _log_softmax_method(self, dim, dtype=None):
    return G.log_softmax(self, dim, dtype)


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


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """(output, mean, rstd) of layer normalisation over the last len(normalized_shape) dims."""
    k = len(normalized_shape)
    shape = tuple(input._data.shape)
    if k == 0 or shape[len(shape) - k:] != tuple(normalized_shape):
        raise EmberRuntimeError(f"native_layer_norm: normalized_shape {list(normalized_shape)} "
                                f"does not match the trailing dims of input shape {shape}")
    dims = tuple(range(len(shape) - k, len(shape)))
    mean = G.mean(input, dims, True)
    rstd = G.rsqrt(G.add(G.var(input, dims, correction=0, keepdim=True), eps))
    saved = mean.detach(), rstd.detach()  # torch's mean and rstd are not differentiable
    out = G.mul(G.sub(input, mean), rstd)
    if weight is not None:
        out = G.mul(out, weight)
    if bias is not None:
        out = G.add(out, bias)
    return (out,) + saved


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """(output, mean, rstd) of group normalisation; mean and rstd have shape (N, group)."""
    if C % group:
        raise EmberRuntimeError(f"native_group_norm: C={C} is not divisible by group={group}")
    if input._data.size != N * C * HxW:
        raise EmberRuntimeError(f"native_group_norm: input of shape {tuple(input._data.shape)} "
                                f"does not hold N*C*HxW = {N}*{C}*{HxW} values")
    x = G.reshape(input, (N, group, (C // group) * HxW))
    mean = G.mean(x, (2,), True)
    rstd = G.rsqrt(G.add(G.var(x, (2,), correction=0, keepdim=True), eps))
    saved = G.reshape(mean, (N, group)), G.reshape(rstd, (N, group))
    bshape = (1, C) + (1,) * (input._data.ndim - 2)
    w = None if weight is None else G.reshape(weight, bshape)
    b = None if bias is None else G.reshape(bias, bshape)
    out = G.reshape(G.mul(G.sub(x, mean), rstd), tuple(input._data.shape))
    if w is not None:
        out = G.mul(out, w)
    if b is not None:
        out = G.add(out, b)
    return (out,) + saved


def _unnormalize(c, size, align_corners):
    # [-1, 1] -> pixel coordinates, as torch's grid_sampler_unnormalize
    if align_corners:
        return G.mul(G.add(c, 1.0), (size - 1) / 2.0)
    return G.div(G.sub(G.mul(G.add(c, 1.0), float(size)), 1.0), 2.0)


def _reflect(c, twice_low, twice_high):
    if twice_low == twice_high:
        return G.mul(c, 0.0)
    lo = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    c = G.abs(G.sub(c, lo))
    extra = G.fmod(c, span)
    flips = G.floor(G.div(c, span))
    even = G.eq(G.fmod(flips, 2.0), 0.0)
    return G.where(even, G.add(extra, lo), G.sub(span + lo, extra))


def _pad_coord(c, size, padding_mode, align_corners):
    # torch's compute_coordinates: border clips, reflection reflects then clips
    if padding_mode == "border":
        return G.clamp(c, 0.0, float(size - 1))
    if padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        return G.clamp(c, 0.0, float(size - 1))
    return c


def _tap(i, size):
    """(int64 index, float and bool validity masks) of integer-valued coordinate tensor i;
    an index outside the input (or NaN) is 0 with mask 0."""
    ok = G.logical_and(G.ge(i, 0.0), G.le(i, float(size - 1)))  # False for NaN
    idx = G.to(G.where(ok, i, 0.0), np.int64)
    return idx, G.to(ok, i._data.dtype), ok


def _cubic_coeffs(t):
    a = -0.75
    def c1(x):
        return G.add(G.mul(G.mul(G.sub(G.mul(x, a + 2), a + 3), x), x), 1.0)

    def c2(x):
        return G.sub(G.mul(G.add(G.mul(G.sub(G.mul(x, a), 5 * a), x), 8 * a), x), 4 * a)
    one_minus = G.sub(1.0, t)
    return [c2(G.add(t, 1.0)), c1(t), c1(one_minus), c2(G.add(one_minus, 1.0))]


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """torch.grid_sampler: sample input (N, C, *S) (2 or 3 spatial dims) at grid (N, *O, nd)."""
    nd = input.dim() - 2
    sizes = _static_sizes(input, tuple(range(2, 2 + nd)), "grid_sampler", "the tap arithmetic")
    n, c = input.shape[0], input.shape[1]
    out_sp = tuple(grid.shape[1:-1])
    q = int(np.prod(out_sp)) if out_sp else 1
    flat = G.reshape(input, (n, c, -1))
    # per spatial dim (D, H, W order): the grid coordinate is grid[..., nd - 1 - d]
    coords = [_unnormalize(G.select(grid, -1, nd - 1 - d), sizes[d], align_corners)
              for d in range(nd)]
    strides = [int(np.prod(sizes[d + 1:])) for d in range(nd)]
    if interpolation_mode == "bicubic":
        taps_per_dim = []
        for d in range(nd):
            i0 = G.floor(coords[d])
            coeffs = _cubic_coeffs(G.sub(coords[d], i0))
            taps = []
            for k in range(4):
                i = _pad_coord(G.add(i0, float(k - 1)), sizes[d], padding_mode, align_corners)
                i = G.trunc(i)
                idx, valid, _ = _tap(i, sizes[d])
                taps.append((idx, G.mul(coeffs[k], valid)))
            taps_per_dim.append(taps)
    else:
        coords = [_pad_coord(x, sizes[d], padding_mode, align_corners)
                  for d, x in enumerate(coords)]
        taps_per_dim = []
        for d in range(nd):
            if interpolation_mode == "nearest":
                r = G.round(coords[d])
                idx, _, ok = _tap(r, sizes[d])
                # weight 1 inside, 0 outside, connected to the grid (gradient 0, as torch's)
                taps_per_dim.append([(idx, G.where(ok, G.add(G.mul(r, 0.0), 1.0), 0.0))])
                continue
            i0 = G.floor(coords[d])
            w1 = G.sub(coords[d], i0)
            w0 = G.sub(1.0, w1)
            (a, va, _), (b, vb, _) = _tap(i0, sizes[d]), _tap(G.add(i0, 1.0), sizes[d])
            taps_per_dim.append([(a, G.mul(w0, va)), (b, G.mul(w1, vb))])
    out = None
    for combo in np.ndindex(*[len(t) for t in taps_per_dim]):
        idx = w = None
        for d, k in enumerate(combo):
            i, wd = taps_per_dim[d][k]
            part = G.mul(i, strides[d]) if strides[d] != 1 else i
            idx = part if idx is None else G.add(idx, part)
            w = wd if w is None else G.mul(w, wd)
        idx = G.expand(G.reshape(idx, (n, 1, q)), (n, c, q))
        term = G.mul(G.gather(flat, 2, idx), G.reshape(w, (n, 1, q)))
        out = term if out is None else G.add(out, term)
    return G.reshape(out, (n, c) + out_sp)


def affine_grid_generator(theta, size, align_corners):
    """torch.affine_grid_generator: the (N, *S, nd) sampling grid of affine matrices theta
    (N, nd, nd + 1) for an output of ``size`` (N, C, *S)."""
    spatial = [int(s) for s in size[2:]]
    nd = len(spatial)
    dt = theta._data.dtype

    def lin(s):
        if s <= 1:
            return np.zeros(s, dt)
        v = np.linspace(-1.0, 1.0, s)
        return (v if align_corners else v * (s - 1) / s).astype(dt)
    axes = [lin(s) for s in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # D, H, W order
    base = np.stack([mesh[nd - 1 - k] for k in range(nd)] + [np.ones(spatial, dt)], -1)
    from ember.tensor import Tensor
    b = Tensor._make(np.ascontiguousarray(base.reshape(1, -1, nd + 1)))
    out = G.matmul(b, G.transpose(theta, 1, 2))
    return G.reshape(out, (int(size[0]),) + tuple(spatial) + (nd,))


# these raise ember's errors naming them (ember.errors.public)
for _n in ("cosine_similarity", "batch_norm", "native_batch_norm_outputs", "group_norm",
           "pixel_shuffle", "pixel_unshuffle", "upsample_nearest2d",
           "upsample_bilinear2d", "dropout", "grid_sampler", "affine_grid_generator"):
    globals()[_n] = _public(globals()[_n])
del _n


# RNN cells (torch.lstm_cell, ...): the one home of the cells' math; nn.RNNCell, nn.LSTMCell
# and nn.GRUCell call these
def _bias_sum(b_ih, b_hh):
    if b_ih is None:
        return b_hh
    return b_ih if b_hh is None else G.add(b_ih, b_hh)


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch.lstm_cell: (h', c') of one LSTM step; ``hx`` is the pair (h, c)."""
    if len(hx) != 2:
        raise EmberRuntimeError(f"lstm_cell: expected hx to hold two tensors (h, c), got "
                                f"{len(hx)}")
    h, c, _ = G.lstm_step(G.linear(input, w_ih, _bias_sum(b_ih, b_hh)), hx[0], hx[1], w_hh)
    return h, c


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch.gru_cell: h' of one GRU step."""
    return G.gru_step(G.linear(input, w_ih, b_ih), hx, w_hh, b_hh)[0]


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch.rnn_tanh_cell: tanh(input w_ih^T + b_ih + hx w_hh^T + b_hh)."""
    return G.tanh(G.add(G.linear(input, w_ih, b_ih), G.linear(hx, w_hh, b_hh)))


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """torch.rnn_relu_cell: relu(input w_ih^T + b_ih + hx w_hh^T + b_hh)."""
    return G.relu(G.add(G.linear(input, w_ih, b_ih), G.linear(hx, w_hh, b_hh)))


# torch.<name> of these is the spec op's function itself (same signature as torch's)
SPEC_TOPLEVEL = ("grid_sampler", "affine_grid_generator", "native_dropout", "pixel_shuffle",
                 "pixel_unshuffle", "split_with_sizes")
