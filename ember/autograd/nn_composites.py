"""nn ops written in other spec ops (declared ``composite`` in derivatives.yaml):
grid sampling and affine grids. Gradients (wrt input and grid, any order), tracing and export come
from the ops they are written in."""
import numpy as np

import ember.autograd._generated as G
from ember.autograd.composites import _static_sizes
from ember.errors import public as _public


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


for _n, _f in list(globals().items()):
    if not _n.startswith("_") and callable(_f) and getattr(_f, "__module__", None) == __name__:
        globals()[_n] = _public(_f)
del _n, _f
