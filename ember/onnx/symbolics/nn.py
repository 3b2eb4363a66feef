"""Layers: convolution, pooling, normalisation, dropout, pixel shuffle, upsampling."""
import numpy as np

from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import SymbolicError, out_dtype, pair, static


def _pads(padding):
    """ember's padding (int, (ph, pw) or (top, bottom, left, right)) -> ONNX pads."""
    if isinstance(padding, str):
        raise SymbolicError(f"padding={padding!r} should have been resolved by the layer")
    p = pair(padding, 2, "padding")
    if len(p) == 2:
        return [p[0], p[1], p[0], p[1]]
    if len(p) == 4:
        return [p[0], p[2], p[1], p[3]]
    raise SymbolicError(f"padding {padding!r} is not 1, 2 or 4 numbers")


@symbolic("conv2d")
def sym_conv2d(g, node, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    k = node.args[1].shape[2:]
    return g.op("Conv", x, w, b, kernel_shape=list(k), strides=list(pair(stride)),
                pads=_pads(padding), dilations=list(pair(dilation)), group=int(groups))


@symbolic("conv_transpose2d")
def sym_conv_transpose2d(g, node, x, w, b=None, stride=1, padding=0, output_padding=0, groups=1,
                         dilation=1):
    k = node.args[1].shape[2:]
    return g.op("ConvTranspose", x, w, b, kernel_shape=list(k), strides=list(pair(stride)),
                pads=_pads(padding), dilations=list(pair(dilation)), group=int(groups),
                output_padding=list(pair(output_padding)))


def _pool_out(n, k, s, p0, p1, d, ceil):
    eff = d * (k - 1) + 1
    if ceil:
        o = -(-(n + p0 + p1 - eff) // s) + 1
        if (o - 1) * s >= n + p0:
            o -= 1
    else:
        o = (n + p0 + p1 - eff) // s + 1
    return o


def _ceil_pads(shape, k, s, pads, d, ceil):
    """torch's ceil_mode windows as explicit extra end padding with ceil_mode off (so every
    runtime agrees on the output size, including torch's rule that the last window starts
    inside the input or the left padding)."""
    if not ceil:
        return pads, 0
    pads = list(pads)
    for i in range(2):
        n = shape[2 + i]
        o = _pool_out(n, k[i], s[i], pads[i], pads[i + 2], d[i], True)
        need = (o - 1) * s[i] + d[i] * (k[i] - 1) + 1 - (n + pads[i] + pads[i + 2])
        if need > 0:
            pads[i + 2] += need
    return pads, 1


@symbolic("max_pool2d_with_indices")
def sym_max_pool2d(g, node, x, kernel_size, stride=None, padding=0, dilation=1,
                   ceil_mode=False):
    k = pair(kernel_size)
    s = pair(stride) if stride not in (None, (), []) else k
    d = pair(dilation)
    shape = node.args[0].shape
    pads, _ = _ceil_pads(shape, k, s, _pads(padding), d, ceil_mode)
    want_idx = bool(node.outputs[1].uses) or node.outputs[1] in (node.graph.outputs
                                                                if node.graph else [])
    kw = dict(kernel_shape=list(k), strides=list(s), pads=pads, dilations=list(d))
    if not want_idx:
        return g.op("MaxPool", x, **kw), None
    y, idx = g.op("MaxPool", x, outputs=2, **kw)
    # ONNX indices count over (N, C, H, W); torch's within each (H, W) plane
    hw = shape[2] * shape[3]
    plane = g.op("Mul", g.op("Div", idx, g.const(np.array(hw, np.int64))),
                 g.const(np.array(hw, np.int64)))
    return y, g.op("Sub", idx, plane)


@symbolic("avg_pool2d")
def sym_avg_pool2d(g, node, x, kernel_size, stride=None, padding=0, ceil_mode=False,
                   count_include_pad=True, divisor_override=None):
    k = pair(kernel_size)
    s = pair(stride) if stride not in (None, (), []) else k
    pads = _pads(padding)
    if ceil_mode:
        # the extra (ceil) cells never count, the explicit padding does when asked: pad
        # explicitly with zeros and divide by a constant count map
        return _avg_pool_explicit(g, node, x, k, s, pads, count_include_pad, divisor_override)
    if divisor_override is not None:
        y = g.op("AveragePool", x, kernel_shape=list(k), strides=list(s), pads=pads,
                 count_include_pad=1)
        return g.op("Mul", y, g.const(np.array(k[0] * k[1] / divisor_override,
                                                out_dtype(node))))
    return g.op("AveragePool", x, kernel_shape=list(k), strides=list(s), pads=pads,
                count_include_pad=1 if count_include_pad else 0)


def _avg_pool_explicit(g, node, x, k, s, pads, count_include_pad, divisor_override):
    shape = node.args[0].shape
    H, W = shape[2], shape[3]
    oh, ow = node.outputs[0].shape[2], node.outputs[0].shape[3]
    eh = max(0, (oh - 1) * s[0] + k[0] - (H + pads[0] + pads[2]))
    ew = max(0, (ow - 1) * s[1] + k[1] - (W + pads[1] + pads[3]))
    full = [pads[0], pads[1], pads[2] + eh, pads[3] + ew]
    y = g.op("AveragePool", x, kernel_shape=list(k), strides=list(s), pads=full,
             count_include_pad=1)
    # count map: cells inside input (+ explicit padding if count_include_pad)
    cnt = np.zeros((oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s[0] - pads[0], j * s[1] - pads[1]
            h1, w1 = min(h0 + k[0], H + pads[2]), min(w0 + k[1], W + pads[3])
            if count_include_pad:
                cnt[i, j] = (h1 - h0) * (w1 - w0)
            else:
                cnt[i, j] = (min(h1, H) - max(h0, 0)) * (min(w1, W) - max(w0, 0))
    if divisor_override is not None:
        cnt[:] = divisor_override
    scale = (k[0] * k[1]) / cnt
    return g.op("Mul", y, g.const(scale.astype(out_dtype(node))))


def _adaptive(g, node, x, output_size, global_op, pool_op):
    shape = node.args[0].shape
    out = [shape[2 + i] if o is None else int(static(o, "output_size"))
           for i, o in enumerate(pair(output_size))]
    if out == [1, 1]:
        return g.op(global_op, x)
    if any(shape[2 + i] % out[i] for i in range(2)):
        return _adaptive_cells(g, x, shape, out, "ReduceMean" if pool_op == "AveragePool"
                               else "ReduceMax")
    k = [shape[2 + i] // out[i] for i in range(2)]
    kw = {"count_include_pad": 0} if pool_op == "AveragePool" else {}
    return g.op(pool_op, x, kernel_shape=k, strides=k, **kw)


def _adaptive_cells(g, x, shape, out, reduce_op):
    """Adaptive pooling to a size that does not divide the input: one Slice + Reduce per output
    cell (torch's windows: [floor(i*n/o), ceil((i+1)*n/o)))."""
    def bounds(n, o):
        return [((i * n) // o, -(-((i + 1) * n) // o)) for i in range(o)]
    rows = []
    for h0, h1 in bounds(shape[2], out[0]):
        cells = []
        for w0, w1 in bounds(shape[3], out[1]):
            win = g.op("Slice", x, g.const(np.array([h0, w0], np.int64)),
                       g.const(np.array([h1, w1], np.int64)), g.const(np.array([2, 3], np.int64)))
            cells.append(g.reduce(reduce_op, win, [2, 3], True))
        rows.append(cells[0] if len(cells) == 1 else g.op("Concat", *cells, axis=3))
    return rows[0] if len(rows) == 1 else g.op("Concat", *rows, axis=2)


@symbolic("adaptive_avg_pool2d")
def sym_adaptive_avg_pool2d(g, node, x, output_size):
    return _adaptive(g, node, x, output_size, "GlobalAveragePool", "AveragePool")


@symbolic("adaptive_max_pool2d")
def sym_adaptive_max_pool2d(g, node, x, output_size):
    if node.outputs[1].uses:
        raise SymbolicError("the indices of adaptive_max_pool2d are not exportable")
    return _adaptive(g, node, x, output_size, "GlobalMaxPool", "MaxPool"), None


def _ones(g, c, dt):
    return g.const(np.ones(c, dt))


def _zeros(g, c, dt):
    return g.const(np.zeros(c, dt))


def _batch_stats(g, node, x):
    rank = len(node.args[0].shape)
    axes = [0] + list(range(2, rank))
    mean = g.reduce("ReduceMean", x, axes, True)
    d = g.op("Sub", x, mean)
    var = g.reduce("ReduceMean", g.op("Mul", d, d), axes, True)
    return mean, var, d


def _bn(g, node, x, weight, bias, rm, rv, training, eps):
    dt = out_dtype(node)
    c = node.args[0].shape[1]
    w = weight if weight is not None else _ones(g, c, dt)
    b = bias if bias is not None else _zeros(g, c, dt)
    rank = len(node.args[0].shape)
    if training or rm is None or rv is None:
        mean, var, d = _batch_stats(g, node, x)
        shp = g.const(np.array([1, c] + [1] * (rank - 2), np.int64))
        inv = g.op("Reciprocal", g.op("Sqrt", g.op("Add", var, g.const(np.array(eps, dt)))))
        y = g.op("Add", g.op("Mul", g.op("Mul", d, inv), g.op("Reshape", w, shp)),
                 g.op("Reshape", b, shp))
        sq = list(range(rank))
        sq.remove(1)
        return y, g.squeeze(mean, sq), g.squeeze(var, sq)
    y = g.op("BatchNormalization", x, w, b, g.cast(rm, dt), g.cast(rv, dt), epsilon=float(eps))
    return y, rm, rv


@symbolic("native_batch_norm")
def sym_native_batch_norm(g, node, x, weight, bias, running_mean, running_var, training,
                          momentum, eps):
    return _bn(g, node, x, weight, bias, running_mean, running_var, training, eps)


@symbolic("batch_norm")
def sym_batch_norm(g, node, x, running_mean, running_var, weight=None, bias=None,
                   training=False, momentum=0.1, eps=1e-5):
    return _bn(g, node, x, weight, bias, running_mean, running_var, training, eps)[0]


def _layer_norm_decomposed(g, node, x, weight, bias, normalized_shape, eps):
    dt = out_dtype(node)
    rank = len(node.args[0].shape)
    axes = list(range(rank - len(normalized_shape), rank))
    mean = g.reduce("ReduceMean", x, axes, True)
    d = g.op("Sub", x, mean)
    var = g.reduce("ReduceMean", g.op("Mul", d, d), axes, True)
    y = g.op("Div", d, g.op("Sqrt", g.op("Add", var, g.const(np.array(eps, dt)))))
    if weight is not None:
        y = g.op("Mul", y, weight)
    if bias is not None:
        y = g.op("Add", y, bias)
    return y


@symbolic("layer_norm")
def sym_layer_norm(g, node, x, weight=None, bias=None, normalized_shape=(), eps=1e-5):
    return _layer_norm_decomposed(g, node, x, weight, bias, normalized_shape, eps)


@symbolic("layer_norm", since=17)
def sym_layer_norm17(g, node, x, weight=None, bias=None, normalized_shape=(), eps=1e-5):
    k = len(normalized_shape)
    ns = list(node.args[0].shape[len(node.args[0].shape) - k:])
    dt = out_dtype(node)
    w = weight if weight is not None else g.const(np.ones(ns, dt))
    return g.op("LayerNormalization", x, w, bias, axis=-len(ns), epsilon=float(eps))


@symbolic("group_norm")
def sym_group_norm(g, node, x, weight=None, bias=None, num_groups=1, eps=1e-5):
    dt = out_dtype(node)
    shape = node.args[0].shape
    c, rank = shape[1], len(shape)
    grouped = g.op("Reshape", x, g.const(np.array([0, int(num_groups), -1], np.int64)))
    mean = g.reduce("ReduceMean", grouped, [2], True)
    d = g.op("Sub", grouped, mean)
    var = g.reduce("ReduceMean", g.op("Mul", d, d), [2], True)
    y = g.op("Div", d, g.op("Sqrt", g.op("Add", var, g.const(np.array(eps, dt)))))
    y = g.op("Reshape", y, g.op("Shape", x))
    pshape = g.const(np.array([c] + [1] * (rank - 2), np.int64))
    if weight is not None:
        y = g.op("Mul", y, g.op("Reshape", weight, pshape))
    if bias is not None:
        y = g.op("Add", y, g.op("Reshape", bias, pshape))
    return y


@symbolic("scaled_dot_product_attention_fused")
def sym_sdpa_fused(g, node, q, k, v, attn_mask=None, dropout_mask=None, is_causal=False,
                   scale=1.0):
    """softmax(q k^T * scale + mask) (* dropout multiplier) v, decomposed; a row masked
    everywhere (Softmax's NaN there) gives zeros, as ember's kernel. The second output is the
    rows' log-sum-exp (+inf for such a row)."""
    dt = out_dtype(node)
    rank = len(node.args[0].shape)
    L, S = node.args[0].shape[-2], node.args[1].shape[-2]
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    s = g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=perm)),
             g.const(np.array(scale, dt)))
    ninf = g.const(np.array(-np.inf, dt))
    if is_causal:
        s = g.op("Where", g.const(np.tri(L, S, 0, bool)), s, ninf)
    if attn_mask is not None:
        if node.args[3].dtype == np.bool_:
            s = g.op("Where", attn_mask, s, ninf)
        else:
            s = g.op("Add", s, attn_mask)
    p = g.op("Softmax", s, axis=-1)
    lse = g.op("Squeeze", g.reduce("ReduceLogSumExp", s, [rank - 1], True),
               g.const(np.array([-1], np.int64)))
    if is_causal or attn_mask is not None:
        p = g.op("Where", g.op("IsNaN", p), g.const(np.array(0, dt)), p)
        lse = g.op("Where", g.op("IsInf", lse, detect_positive=0),
                   g.const(np.array(np.inf, dt)), lse)
    if dropout_mask is not None:
        p = g.op("Mul", p, dropout_mask)
    return g.op("MatMul", p, v), lse


@symbolic("native_dropout")
def sym_native_dropout(g, node, x, p, train, generator=None):
    if not train or p == 0:
        mdt = node.outputs[1].dtype
        mask = g.op("ConstantOfShape", g.op("Shape", x), value=_tensor1(1, mdt))
        return g.op("Identity", x), mask
    y, mask = g.op("Dropout", x, g.const(np.array(p, out_dtype(node))),
                   g.const(np.array(True)), outputs=2)
    return y, g.cast(mask, node.outputs[1].dtype)


def _tensor1(v, dt):
    from onnx import numpy_helper
    return numpy_helper.from_array(np.array([v], dt))


@symbolic("pixel_shuffle")
def sym_pixel_shuffle(g, node, x, upscale_factor):
    if len(node.args[0].shape) != 4:
        raise SymbolicError("pixel_shuffle is exported for 4-d inputs only")
    return g.op("DepthToSpace", x, blocksize=int(upscale_factor), mode="CRD")


@symbolic("pixel_unshuffle")
def sym_pixel_unshuffle(g, node, x, downscale_factor):
    shape = node.args[0].shape
    if len(shape) != 4:
        raise SymbolicError("pixel_unshuffle is exported for 4-d inputs only")
    r = int(downscale_factor)
    _, c, h, w = shape
    y = g.op("Reshape", x, g.const(np.array([0, c, h // r, r, w // r, r], np.int64)))
    y = g.op("Transpose", y, perm=[0, 1, 3, 5, 2, 4])
    return g.op("Reshape", y, g.const(np.array([0, c * r * r, h // r, w // r], np.int64)))


def _resize(g, node, x, output_size, mode, ctm, **kw):
    shape = node.args[0].shape
    out = [int(static(o, "output_size")) for o in pair(output_size)]
    scales = np.array([1.0, 1.0] + [out[i] / shape[2 + i] for i in range(2)], np.float32)
    if all(float(np.float32(out[i] / shape[2 + i])) * shape[2 + i] == out[i] for i in range(2)):
        return g.op("Resize", x, "", g.const(scales), mode=mode,
                    coordinate_transformation_mode=ctm, **kw)
    sizes = g.op("Concat", g.shape_of(x, 0, 2), g.const(np.array(out, np.int64)), axis=0)
    return g.op("Resize", x, "", "", sizes, mode=mode, coordinate_transformation_mode=ctm, **kw)


@symbolic("upsample_nearest2d")
def sym_upsample_nearest2d(g, node, x, output_size):
    return _resize(g, node, x, output_size, "nearest", "asymmetric", nearest_mode="floor")


@symbolic("upsample_bilinear2d")
def sym_upsample_bilinear2d(g, node, x, output_size, align_corners=False):
    return _resize(g, node, x, output_size, "linear",
                   "align_corners" if align_corners else "pytorch_half_pixel")


@symbolic("interpolate_nd")
def sym_interpolate_nd(g, node, x, output_size, mode, align_corners=False, scales=None):
    """Resize (nearest / nearest-exact / linear / cubic with A=-0.75); 'area' as AveragePool
    when every input size is a multiple of its output size, else as per-axis MatMuls."""
    shape = node.args[0].shape
    nd = len(shape) - 2
    out = [int(static(o, "output_size")) for o in output_size]
    if mode == "area":
        if not any(shape[2 + i] % out[i] for i in range(nd)):
            k = [shape[2 + i] // out[i] for i in range(nd)]
            return g.op("AveragePool", x, kernel_shape=k, strides=k)
        y = x  # separable: one constant averaging matrix per axis
        for i in range(nd):
            n, o = shape[2 + i], out[i]
            st = (np.arange(o) * n) // o
            en = -((-(np.arange(o) + 1) * n) // o)
            pos = np.arange(n)
            m = ((pos >= st[:, None]) & (pos < en[:, None])) / (en - st)[:, None]
            y = _axis_matmul(g, y, nd + 2, 2 + i, m.astype(out_dtype(node)))
        return y
    if mode in ("linear", "cubic") and align_corners:
        ctm = "align_corners"
    elif mode == "nearest":
        ctm = "asymmetric"
    elif mode == "nearest-exact":
        ctm = "half_pixel"
    else:
        ctm = "pytorch_half_pixel"
    kw = {"mode": {"nearest-exact": "nearest"}.get(mode, mode),
          "coordinate_transformation_mode": ctm}
    if mode.startswith("nearest"):
        kw["nearest_mode"] = "floor" if mode == "nearest" else "round_prefer_ceil"
    if mode == "cubic":
        kw["cubic_coeff_a"] = -0.75
    if scales is not None and not align_corners:
        # torch maps coordinates with the given scales: so does Resize given scales
        sc = np.array([1.0, 1.0] + [float(s) for s in scales], np.float32)
        if all(int(np.floor(float(sc[2 + i]) * shape[2 + i])) == out[i] for i in range(nd)) \
                and not any(out[i] == shape[2 + i] and sc[2 + i] != 1 for i in range(nd)):
            return g.op("Resize", x, "", g.const(sc), **kw)
    sizes = g.op("Concat", g.shape_of(x, 0, 2), g.const(np.array(out, np.int64)), axis=0)
    return g.op("Resize", x, "", "", sizes, **kw)


# ---------------------------------------------------------------------------- 3-d
def _pads3(padding):
    p = pair(padding, 3, "padding")
    if len(p) == 3:
        return [p[0], p[1], p[2], p[0], p[1], p[2]]
    if len(p) == 6:
        return [p[0], p[2], p[4], p[1], p[3], p[5]]
    raise SymbolicError(f"padding {padding!r} is not 1, 3 or 6 numbers")


@symbolic("conv3d")
def sym_conv3d(g, node, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    k = node.args[1].shape[2:]
    return g.op("Conv", x, w, b, kernel_shape=list(k), strides=list(pair(stride, 3)),
                pads=_pads3(padding), dilations=list(pair(dilation, 3)), group=int(groups))


@symbolic("conv_transpose3d")
def sym_conv_transpose3d(g, node, x, w, b=None, stride=1, padding=0, output_padding=0,
                         groups=1, dilation=1):
    k = node.args[1].shape[2:]
    return g.op("ConvTranspose", x, w, b, kernel_shape=list(k), strides=list(pair(stride, 3)),
                pads=_pads3(padding), dilations=list(pair(dilation, 3)), group=int(groups),
                output_padding=list(pair(output_padding, 3)))


def _ceil_end_pads(shape, out, k, s, pads, d):
    """End pads that hold every one of torch's ``out`` windows (ceil_mode as explicit padding)."""
    nd = len(out)
    pads = list(pads)
    for i in range(nd):
        need = (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 - (shape[2 + i] + pads[i]
                                                              + pads[i + nd])
        if need > 0:
            pads[i + nd] += need
    return pads


@symbolic("max_pool3d_with_indices")
def sym_max_pool3d(g, node, x, kernel_size, stride=None, padding=0, dilation=1,
                   ceil_mode=False):
    k = pair(kernel_size, 3)
    s = pair(stride, 3) if stride not in (None, (), []) else k
    d = pair(dilation, 3)
    shape = node.args[0].shape
    pads = _ceil_end_pads(shape, node.outputs[0].shape[2:], k, s, _pads3(padding), d)
    want_idx = bool(node.outputs[1].uses) or node.outputs[1] in (node.graph.outputs
                                                                if node.graph else [])
    kw = dict(kernel_shape=list(k), strides=list(s), pads=pads, dilations=list(d))
    if not want_idx:
        return g.op("MaxPool", x, **kw), None
    y, idx = g.op("MaxPool", x, outputs=2, **kw)
    vol = int(np.prod(shape[2:]))  # ONNX counts over (N, C, D, H, W); torch per volume
    plane = g.op("Mul", g.op("Div", idx, g.const(np.array(vol, np.int64))),
                 g.const(np.array(vol, np.int64)))
    return y, g.op("Sub", idx, plane)


@symbolic("avg_pool3d")
def sym_avg_pool3d(g, node, x, kernel_size, stride=None, padding=0, ceil_mode=False,
                   count_include_pad=True, divisor_override=None):
    """AveragePool over explicitly zero-padded windows (count 1 everywhere), then torch's
    divisor per output cell as a constant map (a product of per-axis window lengths)."""
    k = pair(kernel_size, 3)
    s = pair(stride, 3) if stride not in (None, (), []) else k
    p = pair(padding, 3)
    shape, out = node.args[0].shape, node.outputs[0].shape[2:]
    pads = _ceil_end_pads(shape, out, k, s, _pads3(padding), (1, 1, 1))
    y = g.op("AveragePool", x, kernel_shape=list(k), strides=list(s), pads=pads,
             count_include_pad=1)
    scale = np.ones(out)
    for i in range(3):
        start = np.arange(out[i]) * s[i] - p[i]
        end = np.minimum(start + k[i], shape[2 + i] + p[i])
        div = end - start if count_include_pad else \
            np.minimum(end, shape[2 + i]) - np.maximum(start, 0)
        if divisor_override is None:
            scale = scale * (k[i] / div).reshape([-1 if j == i else 1 for j in range(3)])
    if divisor_override is not None:
        scale = scale * (k[0] * k[1] * k[2] / divisor_override)
    return g.op("Mul", y, g.const(scale.astype(out_dtype(node))))


def _axis_matmul(g, x, rank, axis, m):
    """x with ``axis`` contracted against constant (out, in) matrix m."""
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    t = g.op("Transpose", x, perm=perm) if axis != rank - 1 else x
    t = g.op("MatMul", t, g.const(np.ascontiguousarray(m.T)))
    return g.op("Transpose", t, perm=perm) if axis != rank - 1 else t


@symbolic("adaptive_avg_pool3d")
def sym_adaptive_avg_pool3d(g, node, x, output_size):
    shape = node.args[0].shape
    out = node.outputs[0].shape[2:]
    if list(out) == [1, 1, 1]:
        return g.op("GlobalAveragePool", x)
    if not any(shape[2 + i] % out[i] for i in range(3)):
        k = [shape[2 + i] // out[i] for i in range(3)]
        return g.op("AveragePool", x, kernel_shape=k, strides=k)
    dt = out_dtype(node)
    y = x
    for i in range(3):  # separable: one constant averaging matrix per axis
        n, o = shape[2 + i], out[i]
        st = (np.arange(o) * n) // o
        en = -((-(np.arange(o) + 1) * n) // o)
        pos = np.arange(n)
        m = ((pos >= st[:, None]) & (pos < en[:, None])) / (en - st)[:, None]
        y = _axis_matmul(g, y, 5, 2 + i, m.astype(dt))
    return y


@symbolic("adaptive_max_pool3d")
def sym_adaptive_max_pool3d(g, node, x, output_size):
    if node.outputs[1].uses:
        raise SymbolicError("adaptive_max_pool3d is exported without its indices")
    shape = node.args[0].shape
    out = node.outputs[0].shape[2:]
    if list(out) == [1, 1, 1]:
        return g.op("GlobalMaxPool", x), None

    def bounds(n, o):
        return [((i * n) // o, -(-((i + 1) * n) // o)) for i in range(o)]

    def build(axis, lo, hi):
        if axis == 5:
            win = g.op("Slice", x, g.const(np.array(lo, np.int64)),
                       g.const(np.array(hi, np.int64)), g.const(np.array([2, 3, 4], np.int64)))
            return g.reduce("ReduceMax", win, [2, 3, 4], True)
        cells = [build(axis + 1, lo + [a], hi + [b])
                 for a, b in bounds(shape[axis], out[axis - 2])]
        return cells[0] if len(cells) == 1 else g.op("Concat", *cells, axis=axis)
    return build(2, [], []), None
