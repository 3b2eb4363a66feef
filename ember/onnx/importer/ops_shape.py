"""Shape and indexing ONNX ops: Reshape, Flatten, Transpose, Concat, Squeeze/Unsqueeze, Gather,
Shape, Constant(OfShape), Expand, Slice, Pad, Split, Tile, Range, TopK, Einsum, ..."""
import numpy as np

import ember
import ember.nn.functional as F
from ember.errors import EmberRuntimeError
from ember.onnx.importer._util import alloc_shape, const, ints, norm_axis, scalar
from ember.onnx.importer.registry import importer


@importer("Reshape", since=5, attrs={"allowzero": 0})
def reshape(a, x, shape):
    s = ints(shape)
    if not a["allowzero"]:
        s = [x.shape[i] if v == 0 else v for i, v in enumerate(s)]
    return x.reshape(*s) if s else x.reshape(())


@importer("Flatten", since=1, attrs={"axis": 1})
def flatten(a, x):
    ax = a["axis"] + x.dim() if a["axis"] < 0 else a["axis"]
    lead = int(np.prod(x.shape[:ax], dtype=np.int64))
    return x.reshape(lead, -1) if x.numel() else x.reshape(lead, int(np.prod(x.shape[ax:])))


@importer("Transpose", since=1, attrs={"perm": None})
def transpose(a, x):
    perm = a["perm"] if a["perm"] is not None else list(range(x.dim()))[::-1]
    return x.permute(*perm) if perm else x


@importer("Concat", since=4, attrs={"axis": 0})
def concat(a, *xs):
    return ember.cat([x for x in xs if x is not None], dim=a["axis"])


def _squeeze(x, axes):
    if axes is None:
        return ember.squeeze(x) if x.dim() else x
    axes = sorted((norm_axis(ax, x.dim()) for ax in axes), reverse=True)
    for ax in axes:
        x = x.squeeze(ax)
    return x


def _unsqueeze(x, axes):
    r = x.dim() + len(axes)
    for ax in sorted(norm_axis(ax, r) for ax in axes):
        x = x.unsqueeze(ax)
    return x


@importer("Squeeze", since=13)
def squeeze13(a, x, axes=None):
    return _squeeze(x, ints(axes))


@importer("Squeeze", since=1, attrs={"axes": None})
def squeeze1(a, x):
    return _squeeze(x, a["axes"])


@importer("Unsqueeze", since=13)
def unsqueeze13(a, x, axes):
    return _unsqueeze(x, ints(axes))


@importer("Unsqueeze", since=1, attrs={"axes": []})
def unsqueeze1(a, x):
    return _unsqueeze(x, a["axes"])


def _fix_index(idx, n):
    idx = idx.to(ember.int64)
    return ember.where(idx < 0, idx + n, idx)


@importer("Gather", since=1, attrs={"axis": 0})
def gather(a, x, idx):
    ax = norm_axis(a["axis"], x.dim())
    idx = _fix_index(idx, x.shape[ax])
    flat = ember.index_select(x, ax, idx.reshape(-1))
    shape = list(x.shape[:ax]) + list(idx.shape) + list(x.shape[ax + 1:])
    return flat.reshape(*shape) if shape else flat.reshape(())


@importer("GatherElements", since=11, attrs={"axis": 0})
def gather_elements(a, x, idx):
    ax = norm_axis(a["axis"], x.dim())
    return ember.gather(x, ax, _fix_index(idx, x.shape[ax]))


@importer("GatherND", since=11, attrs={"batch_dims": 0})
def gather_nd(a, x, idx):
    b = a["batch_dims"]
    idx = idx.to(ember.int64)
    k = idx.shape[-1]
    bshape = list(x.shape[:b])
    nb = int(np.prod(bshape, dtype=np.int64))
    xs = x.reshape(nb, *x.shape[b:])
    ids = idx.reshape(nb, -1, k)
    dims = list(x.shape[b:b + k])
    ids = ember.where(ids < 0, ids + ember.tensor(dims, dtype=ember.int64), ids)
    strides = np.cumprod([1] + dims[::-1])[:-1][::-1].copy()
    lin = (ids * ember.tensor(strides.astype(np.int64))).sum(-1)        # (nb, m)
    flat = xs.reshape(nb, int(np.prod(dims, dtype=np.int64)), *x.shape[b + k:])
    boff = (ember.arange(nb) * flat.shape[1]).reshape(nb, 1)
    out = flat.reshape(-1, *x.shape[b + k:])[(lin + boff).reshape(-1)]
    return out.reshape(*(bshape + list(idx.shape[b:-1]) + list(x.shape[b + k:])))


@importer("Shape", since=15, attrs={"start": 0, "end": None})
def shape15(a, x):
    s = list(x.shape)
    end = a["end"] if a["end"] is not None else len(s)
    return ember.tensor(np.array(s[a["start"]:end] if s else [], dtype=np.int64))


@importer("Shape", since=1)
def shape1(a, x):
    return ember.tensor(np.array(list(x.shape), dtype=np.int64))


@importer("Size", since=1)
def size(a, x):
    return ember.tensor(np.array(x.numel(), dtype=np.int64))


def _check_constant(a, n):
    given = [k for k, v in a.items() if v is not None and not k.startswith("_")]
    if len(given) != 1:
        return (given[0] if given else "value", "exactly one value attribute must be set")
    return None


@importer("Constant", since=1, check=_check_constant,
          attrs={"value": None, "value_float": None, "value_floats": None, "value_int": None,
                 "value_ints": None})
def constant(a, *unused):
    cache = a.get("_tensor")
    if cache is None:
        if a["value"] is not None:
            arr = np.asarray(a["value"])
        elif a["value_float"] is not None:
            arr = np.array(a["value_float"], dtype=np.float32)
        elif a["value_floats"] is not None:
            arr = np.array(a["value_floats"], dtype=np.float32)
        elif a["value_int"] is not None:
            arr = np.array(a["value_int"], dtype=np.int64)
        else:
            arr = np.array(a["value_ints"], dtype=np.int64)
        cache = const(arr)
        a["_tensor"] = cache
    return cache


@importer("ConstantOfShape", since=9, attrs={"value": None})
def constant_of_shape(a, shape):
    v = np.zeros(1, np.float32) if a["value"] is None else np.asarray(a["value"]).reshape(-1)
    if v.size != 1:
        raise EmberRuntimeError(f"attribute 'value' must hold one element, it "
                                f"holds {v.size}")
    return const(np.full(alloc_shape(ints(shape), v.dtype, "output"), v[0],
                         dtype=v.dtype))


@importer("Expand", since=8)
def expand(a, x, shape):
    s = ember.broadcast_shapes(tuple(x.shape), tuple(ints(shape)))
    return x.expand(*s) if s else x


@importer("Slice", since=10)
def slice10(a, x, starts, ends, axes=None, steps=None):
    return _slice(x, ints(starts), ints(ends), ints(axes), ints(steps))


@importer("Slice", since=1, attrs={"starts": [], "ends": [], "axes": None})
def slice1(a, x):
    return _slice(x, a["starts"], a["ends"], a["axes"], None)


def _slice(x, starts, ends, axes, steps):
    r = x.dim()
    axes = list(range(len(starts))) if axes is None else [norm_axis(v, r) for v in axes]
    steps = [1] * len(starts) if steps is None else steps
    idx = [slice(None)] * r
    flips = []
    for ax, s, e, st in zip(axes, starts, ends, steps):
        n = x.shape[ax]
        if st == 0:
            raise EmberRuntimeError("Slice: a step of 0")
        if st > 0:
            s = max(0, min(n, s + n if s < 0 else s))
            e = max(0, min(n, e + n if e < 0 else e))
            idx[ax] = slice(s, max(s, e), st)
        else:
            s = max(-1, min(n - 1, s + n if s < 0 else s))
            e = max(-1, min(n - 1, e + n if e < 0 else e))
            if e >= s:
                idx[ax] = slice(0, 0)
                continue
            # element indices s, s+st, ... > e; take them reversed then flip
            cnt = (s - e + (-st) - 1) // (-st)
            last = s + st * (cnt - 1)
            idx[ax] = slice(last, s + 1, -st)
            flips.append(ax)
    y = x[tuple(idx)]
    if flips:
        y = ember.flip(y, flips)
    return y


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate",
              "wrap": "circular"}


def _check_pad(a, n):
    return None if a["mode"] in _PAD_MODES else ("mode", f"= '{a['mode']}' is not supported")


def _pad(x, pads, mode, value, axes=None):
    r = x.dim()
    axes = list(range(r)) if axes is None else [norm_axis(v, r) for v in axes]
    k = len(axes)
    before, after = pads[:k], pads[k:]
    full_b, full_a = [0] * r, [0] * r
    for ax, b, e in zip(axes, before, after):
        full_b[ax], full_a[ax] = b, e
    if mode == "constant":
        # F.pad order: last dim first (negative pads crop)
        p = []
        for d in reversed(range(r)):
            p += [full_b[d], full_a[d]]
        return F.pad(x, p, mode="constant", value=value)
    # reflect/replicate/circular pad only trailing spatial dims in torch: move padded dims last
    dims = [d for d in range(r) if full_b[d] or full_a[d]]
    if not dims:
        return x
    rest = [d for d in range(r) if d not in dims]
    y = x.permute(*(rest + dims))
    lead = y.shape[:len(rest)]
    y = y.reshape(1, -1, *y.shape[len(rest):]) if len(rest) != 1 else y.unsqueeze(0)
    p = []
    for d in reversed(dims):
        p += [full_b[d], full_a[d]]
    y = F.pad(y, p, mode=_PAD_MODES[mode])
    y = y.reshape(*lead, *y.shape[2:])
    inv = np.argsort(rest + dims).tolist()
    return y.permute(*inv)


@importer("Pad", since=11, attrs={"mode": "constant"}, check=_check_pad)
def pad11(a, x, pads, value=None, axes=None):
    v = 0 if value is None else scalar(value)
    return _pad(x, ints(pads), a["mode"], v, ints(axes))


@importer("Pad", since=2, attrs={"mode": "constant", "pads": [], "value": 0.0}, check=_check_pad)
def pad2(a, x):
    return _pad(x, a["pads"], a["mode"], a["value"])


def _split(x, axis, sizes, num):
    ax = norm_axis(axis, x.dim())
    n = x.shape[ax]
    if sizes is None:
        per = -(-n // num)
        sizes = [min(per, n - i * per) for i in range(num)]
    outs, start = [], 0
    for s in sizes:
        outs.append(ember.narrow(x, ax, start, s))
        start += s
    return tuple(outs)


@importer("Split", since=18, attrs={"axis": 0, "num_outputs": None}, max_outputs=1 << 30)
def split18(a, x, split=None):
    return _split(x, a["axis"], ints(split), a["num_outputs"] or a["_n"])


@importer("Split", since=13, attrs={"axis": 0}, max_outputs=1 << 30)
def split13(a, x, split=None):
    return _split(x, a["axis"], ints(split), a["_n"])


@importer("Split", since=2, attrs={"axis": 0, "split": None}, max_outputs=1 << 30)
def split2(a, x):
    return _split(x, a["axis"], a["split"], a["_n"])


@importer("Tile", since=6)
def tile(a, x, repeats):
    return x.repeat(*ints(repeats)) if x.dim() else x


@importer("Range", since=11)
def range_(a, start, limit, delta):
    s, l, d = scalar(start), scalar(limit), scalar(delta)
    if d == 0:
        raise EmberRuntimeError(f"delta must be nonzero (start {s}, limit {l}, delta 0)")
    if isinstance(s, int) and isinstance(l, int) and isinstance(d, int):
        n = max(-((s - l) // d), 0)   # exact ceil((l - s) / d) for int64 values
    else:
        count = np.ceil((l - s) / d)
        if not np.isfinite(count):
            raise EmberRuntimeError(f"start {s}, limit {l}, delta {d} give no finite "
                                    f"number of elements")
        n = max(int(count), 0)
    alloc_shape((n,), start.dtype.numpy, f"output (start {s}, limit {l}, delta {d})")
    return const((s + np.arange(n) * d).astype(start.dtype.numpy))


@importer("TopK", since=11, attrs={"axis": -1, "largest": 1, "sorted": 1}, max_outputs=2)
def topk(a, x, k):
    v, i = ember.topk(x, int(scalar(k)), dim=a["axis"], largest=bool(a["largest"]), sorted=True)
    return v, i


@importer("Einsum", since=12, attrs={"equation": ""})
def einsum(a, *xs):
    return ember.einsum(a["equation"].replace(" ", ""), *xs)


@importer("Trilu", since=14, attrs={"upper": 1})
def trilu(a, x, k=None):
    kk = 0 if k is None else int(scalar(k))
    return ember.triu(x, kk) if a["upper"] else ember.tril(x, kk)


def _scan(a, x, axis, scan, exclude):
    """CumSum/CumProd: ``scan(y, ax)`` in ``x``'s dtype along ``axis``, run from the end
    under ``reverse`` (flipped around it) and made ``exclusive`` by ``exclude(c, y, ax)``."""
    ax = norm_axis(int(scalar(axis)), x.dim())
    y = ember.flip(x, [ax]) if a["reverse"] else x
    c = scan(y, ax).to(x.dtype)
    if a["exclusive"]:
        c = exclude(c, y, ax)
    return ember.flip(c, [ax]) if a["reverse"] else c


@importer("CumSum", since=11, attrs={"exclusive": 0, "reverse": 0})
def cumsum(a, x, axis):
    return _scan(a, x, axis, ember.cumsum, lambda c, y, ax: c - y)


@importer("OneHot", since=11, attrs={"axis": -1})
def one_hot(a, idx, depth, values):
    d = int(scalar(depth))
    idx = idx.to(ember.int64)
    idx = ember.where(idx < 0, idx + d, idx)
    oh = ember.eq(idx.unsqueeze(-1), ember.arange(d))
    out = ember.where(oh, values[1], values[0])
    ax = a["axis"]
    if ax < 0:
        ax += out.dim()
    return ember.movedim(out, -1, ax)


@importer("NonZero", since=9)
def nonzero(a, x):
    return ember.nonzero(x.reshape(1) if x.dim() == 0 else x).t().contiguous()


@importer("DepthToSpace", since=13, attrs={"blocksize": 1, "mode": "DCR"},
          check=lambda a, n: None if a["mode"] in ("DCR", "CRD") else
          ("mode", "must be DCR or CRD"))
def depth_to_space(a, x):
    b, (n, c, h, w) = a["blocksize"], x.shape
    if a["mode"] == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (b * b), h * b, w * b)


@importer("SpaceToDepth", since=13, attrs={"blocksize": 1})
def space_to_depth(a, x):
    b, (n, c, h, w) = a["blocksize"], x.shape
    y = x.reshape(n, c, h // b, b, w // b, b)
    y = y.permute(0, 3, 5, 1, 2, 4) if a.get("mode", "DCR") == "DCR" else \
        y.permute(0, 1, 3, 5, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


importer("SpaceToDepth", since=28, attrs={"blocksize": 1, "mode": "DCR"},
         check=lambda a, n: None if a["mode"] in ("DCR", "CRD") else
         ("mode", "must be DCR or CRD"))(space_to_depth)


_SCATTER_RED = {"none": None, "add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _check_scatter(a, n):
    r = a.get("reduction", "none")
    return None if r in _SCATTER_RED else ("reduction", f"= '{r}' is not supported")


def _scatter_elements(x, idx, upd, axis, reduction):
    ax = norm_axis(axis, x.dim())
    idx = _fix_index(idx, x.shape[ax])
    if reduction == "none":
        return ember.scatter(x, ax, idx, upd)
    return ember.scatter_reduce(x, ax, idx, upd, _SCATTER_RED[reduction], include_self=True)


@importer("ScatterElements", since=11, attrs={"axis": 0, "reduction": "none"},
          check=_check_scatter)
def scatter_elements(a, x, idx, upd):
    return _scatter_elements(x, idx, upd, a["axis"], a["reduction"])


@importer("Scatter", since=9, attrs={"axis": 0})
def scatter9(a, x, idx, upd):
    return _scatter_elements(x, idx, upd, a["axis"], "none")


@importer("ScatterND", since=11, attrs={"reduction": "none"}, check=_check_scatter)
def scatter_nd(a, x, idx, upd):
    idx = idx.to(ember.int64)
    k = idx.shape[-1]
    dims = list(x.shape[:k])
    rest = list(x.shape[k:])
    ids = idx.reshape(-1, k)
    ids = ember.where(ids < 0, ids + ember.tensor(dims, dtype=ember.int64), ids)
    strides = np.cumprod([1] + dims[::-1])[:-1][::-1].copy()
    lin = (ids * ember.tensor(strides.astype(np.int64))).sum(-1)
    flat = x.reshape(int(np.prod(dims, dtype=np.int64)), *rest)
    u = upd.reshape(-1, *rest)
    r = a["reduction"]
    if r == "none":
        out = ember.index_copy(flat, 0, lin, u)
    elif r == "add":
        out = ember.index_add(flat, 0, lin, u)
    else:
        out = ember.index_reduce(flat, 0, lin, u, {"mul": "prod", "max": "amax",
                                                   "min": "amin"}[r], include_self=True)
    return out.reshape(*x.shape)


def _shift_in_one(c, y, ax):
    """``c`` moved one step along ``ax``, a one entering first (an exclusive product)."""
    one = ember.ones_like(ember.narrow(c, ax, 0, 1))
    return ember.cat([one, ember.narrow(c, ax, 0, c.shape[ax] - 1)], ax)


@importer("CumProd", since=26, attrs={"exclusive": 0, "reverse": 0})
def cumprod(a, x, axis):
    return _scan(a, x, axis, ember.cumprod, _shift_in_one)


@importer("Compress", since=11, attrs={"axis": None})
def compress(a, x, cond):
    keep = ember.nonzero(cond.to(ember.bool).reshape(-1)).reshape(-1)
    if a["axis"] is None:
        x, ax = x.reshape(-1), 0
    else:
        ax = norm_axis(a["axis"], x.dim())
    keep = keep[keep < x.shape[ax]]
    return ember.index_select(x, ax, keep)


@importer("ReverseSequence", since=10, attrs={"batch_axis": 1, "time_axis": 0})
def reverse_sequence(a, x, lens):
    b_ax, t_ax = a["batch_axis"], a["time_axis"]
    T, B = x.shape[t_ax], x.shape[b_ax]
    ln = ints(lens)
    idx = np.tile(np.arange(T)[:, None], (1, B))          # [T, B]
    for j, n in enumerate(ln):
        idx[:n, j] = np.arange(n)[::-1]
    shape = [1] * x.dim()
    shape[t_ax], shape[b_ax] = T, B
    full = np.broadcast_to(idx.reshape(shape) if t_ax < b_ax else idx.T.reshape(shape),
                           x.shape)
    return ember.gather(x, t_ax, ember.tensor(np.ascontiguousarray(full)))


@importer("CenterCropPad", since=18, attrs={"axes": None})
def center_crop_pad(a, x, shape):
    target = ints(shape)
    axes = list(range(x.dim())) if a["axes"] is None else \
        [norm_axis(v, x.dim()) for v in a["axes"]]
    for ax, n_out in zip(axes, target):
        n = x.shape[ax]
        if n > n_out:
            x = ember.narrow(x, ax, (n - n_out) // 2, n_out)
        elif n < n_out:
            lo = (n_out - n) // 2
            pads = [(0, 0)] * x.dim()
            pads[ax] = (lo, n_out - n - lo)
            flat = []
            for b, e in reversed(pads):
                flat += [b, e]
            x = F.pad(x, flat, mode="constant", value=0)
    return x


@importer("EyeLike", since=9, attrs={"dtype": None, "k": 0})
def eye_like(a, x):
    from ember.onnx.importer._util import onnx_np_dtype
    dt = x.dtype.numpy if a["dtype"] is None else onnx_np_dtype(a["dtype"])
    return const(np.eye(x.shape[0], x.shape[1], a["k"], dtype=dt))


@importer("Unique", since=11, attrs={"axis": None, "sorted": 1}, max_outputs=4)
def unique(a, x):
    arr = x.detach().numpy()
    ax = a["axis"]
    if ax is None:
        flat, axis = x.reshape(-1), 0
        arr = arr.reshape(-1)
    else:
        axis = norm_axis(ax, x.dim())
        flat = x
    _, first, inverse, counts = np.unique(arr, axis=axis, return_index=True,
                                          return_inverse=True, return_counts=True)
    inverse = np.asarray(inverse).reshape(-1)
    if not a["sorted"]:
        order = np.argsort(first, kind="stable")          # by first occurrence
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        first, counts, inverse = first[order], counts[order], rank[inverse]
    idx = ember.tensor(first.astype(np.int64))
    return (ember.index_select(flat, axis, idx), idx,
            ember.tensor(inverse.astype(np.int64)), ember.tensor(counts.astype(np.int64)))


@importer("TensorScatter", since=24, attrs={"mode": "linear", "axis": -2},
          check=lambda a, n: None if a["mode"] in ("linear", "circular") else
          ("mode", f"= '{a['mode']}' is not linear or circular"))
def tensor_scatter(a, cache, upd, write_idx=None):
    ax = norm_axis(a["axis"], cache.dim())
    w = np.zeros(cache.shape[0], np.int64) if write_idx is None else np.array(ints(write_idx))
    pos = np.arange(upd.shape[ax]).reshape([1] * ax + [-1] + [1] * (upd.dim() - ax - 1))
    start = w.reshape([-1] + [1] * (upd.dim() - 1)) if ax else np.zeros(1, np.int64)
    idx = start + pos
    if a["mode"] == "circular":
        idx = idx % cache.shape[ax]
    idx = np.ascontiguousarray(np.broadcast_to(idx, tuple(upd.shape)))
    return ember.scatter(cache, ax, ember.tensor(idx.astype(np.int64)), upd)
