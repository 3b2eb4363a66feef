"""Neural-network ONNX ops: Conv, ConvTranspose, Gemm, MatMul, pooling, normalization, Softmax,
Resize."""
import numpy as np

import ember
import ember.nn.functional as F
from ember.errors import EmberRuntimeError
from ember.onnx.importer._util import ints, norm_axis
from ember.onnx.importer.registry import importer

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONVT = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_MAXP = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVGP = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}
_AUTO = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _check_auto(a, n):
    if a.get("auto_pad", "NOTSET") not in _AUTO:
        return ("auto_pad", f"= '{a['auto_pad']}' is not one of {_AUTO}")
    return None


def _pads(a, x, k, s, d):
    """Per-dim (begin, end) pads, resolving auto_pad against the input size."""
    nd = len(k)
    mode = a.get("auto_pad", "NOTSET")
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        res = []
        for i in range(nd):
            n = x.shape[2 + i]
            out = -(-n // s[i])
            tot = max(0, (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - n)
            lo = tot // 2 if mode == "SAME_UPPER" else tot - tot // 2
            res.append((lo, tot - lo))
        return res
    if mode == "VALID" or not a.get("pads"):
        return [(0, 0)] * nd
    p = a["pads"]
    return [(p[i], p[i + nd]) for i in range(nd)]


def _explicit_pad(x, pads, value):
    flat = []
    for b, e in reversed(pads):
        flat += [b, e]
    return F.pad(x, flat, mode="constant", value=value)


def _geom(a, x, w_shape=None):
    nd = x.dim() - 2
    k = a.get("kernel_shape") or (list(w_shape[2:]) if w_shape is not None else None)
    s = a.get("strides") or [1] * nd
    d = a.get("dilations") or [1] * nd
    return nd, list(k), list(s), list(d)


@importer("Conv", since=1, check=_check_auto,
          attrs={"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
                 "pads": None, "strides": None})
def conv(a, x, w, b=None):
    nd, k, s, d = _geom(a, x, w.shape)
    if nd not in _CONV:
        raise EmberRuntimeError(f"Conv of {nd}-d inputs is not supported (1-d to 3-d)")
    pads = _pads(a, x, k, s, d)
    if all(p0 == p1 for p0, p1 in pads):
        padding = [p0 for p0, _ in pads]
    else:
        x, padding = _explicit_pad(x, pads, 0.0), [0] * nd
    if x.dtype == ember.float16:   # ember's conv kernels run float32/float64
        b = None if b is None else b.to(ember.float32)
        return _CONV[nd](x.to(ember.float32), w.to(ember.float32), b, stride=s,
                         padding=padding, dilation=d, groups=a["group"]).to(ember.float16)
    return _CONV[nd](x, w, b, stride=s, padding=padding, dilation=d, groups=a["group"])


def _check_convt(a, n):
    r = _check_auto(a, n)
    if r:
        return r
    if a["auto_pad"] in ("SAME_UPPER", "SAME_LOWER") and a["output_shape"] is None:
        return None
    return None


@importer("ConvTranspose", since=1, check=_check_convt,
          attrs={"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
                 "output_padding": None, "output_shape": None, "pads": None, "strides": None})
def conv_transpose(a, x, w, b=None):
    nd, k, s, d = _geom(a, x, w.shape)
    op = a["output_padding"] or [0] * nd
    full = [s[i] * (x.shape[2 + i] - 1) + op[i] + (k[i] - 1) * d[i] + 1 for i in range(nd)]
    if a["output_shape"] is not None or a["auto_pad"] in ("SAME_UPPER", "SAME_LOWER"):
        target = (list(a["output_shape"])[-nd:] if a["output_shape"] is not None
                  else [x.shape[2 + i] * s[i] for i in range(nd)])
        pads = []
        for i in range(nd):
            tot = full[i] - target[i]
            if a["auto_pad"] == "SAME_UPPER":
                pads.append((tot // 2, tot - tot // 2))
            else:
                pads.append((tot - tot // 2, tot // 2))
    elif a["auto_pad"] == "VALID" or not a["pads"]:
        pads = [(0, 0)] * nd
    else:
        pads = [(a["pads"][i], a["pads"][i + nd]) for i in range(nd)]
    y = _CONVT[nd](x, w, None, stride=s, padding=0, output_padding=op, groups=a["group"],
                   dilation=d)
    # crop the pads (a negative pad, from an output_shape above the full size, adds zeros)
    idx = (slice(None), slice(None)) + tuple(slice(max(p0, 0), y.shape[2 + i] - max(p1, 0))
                                             for i, (p0, p1) in enumerate(pads))
    y = y[idx]
    if any(p0 < 0 or p1 < 0 for p0, p1 in pads):
        y = _explicit_pad(y, [(max(-p0, 0), max(-p1, 0)) for p0, p1 in pads], 0.0)
    if b is not None:
        y = y + b.reshape(1, -1, *([1] * nd))
    return y


@importer("MatMul", since=1)
def matmul(a, x, y):
    return ember.matmul(x, y)


@importer("Gemm", since=7, attrs={"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0})
def gemm(a, x, w, c=None):
    """``alpha * op(x) @ op(w) + beta * c``. The form exporters write for ``nn.Linear``
    (transB=1, alpha and beta 1, no C or a C of one value per column) is ``F.linear``, so eager
    runs it as one GEMM with its bias and an inference plan takes it as a linear step (LeNet-5
    exported and imported, traced + optimised, batch 1: 42 -> 23 us on an AMD EPYC Zen 4, as the
    model traced by ember)."""
    if a["transB"] and not a["transA"] and a["alpha"] == 1.0 and a["beta"] == 1.0 and \
            x.dim() == 2 and w.dim() == 2 and (c is None or tuple(c.shape) == (w.shape[0],)):
        return F.linear(x, w, c)
    x = x.t() if a["transA"] else x
    w = w.t() if a["transB"] else w
    y = ember.matmul(x, w)
    if a["alpha"] != 1.0:
        y = y * a["alpha"]
    if c is not None:
        y = y + (c * a["beta"] if a["beta"] != 1.0 else c)
    return y


def _check_pool(a, n):
    r = _check_auto(a, n)
    if r:
        return r
    if a.get("storage_order", 0) not in (0, 1):
        return ("storage_order", "must be 0 (row-major) or 1 (column-major)")
    return None


@importer("MaxPool", since=8, check=_check_pool, max_outputs=2,
          attrs={"auto_pad": "NOTSET", "ceil_mode": 0, "dilations": None, "kernel_shape": None,
                 "pads": None, "storage_order": 0, "strides": None})
def max_pool(a, x):
    """Output 1 (Indices) flattens over the whole input (N, C and spatial dims, row-major; the
    spatial dims column-major with ``storage_order=1``), as ONNX defines it."""
    nd, k, s, d = _geom(a, x)
    pads = _pads(a, x, k, s, d)
    shape = x.shape
    ok = all(p0 == p1 and p0 <= k[i] // 2 for i, (p0, p1) in enumerate(pads))
    if ok:
        padding = [p0 for p0, _ in pads]
    else:
        fill = float("-inf") if x.dtype.is_floating_point else int(np.iinfo(x.dtype.numpy).min)
        x, padding = _explicit_pad(x, pads, fill), [0] * nd
    kw = dict(stride=s, padding=padding, dilation=d, ceil_mode=bool(a["ceil_mode"]))
    if a["_n"] < 2:
        return _MAXP[nd](x, k, **kw)
    y, idx = _MAXP[nd](x, k, return_indices=True, **kw)
    spatial = list(shape[2:])
    if not ok:   # indices of the padded plane -> the input's
        coords, rest = [], idx
        for dim, n in reversed(list(enumerate(x.shape[2:]))):
            coords.insert(0, rest % n - pads[dim][0])
            rest = rest // n
        idx = coords[0]
        for dim in range(1, nd):
            idx = idx * spatial[dim] + coords[dim]
    if a["storage_order"] == 1:   # the plane index column-major: the first dim varies fastest
        coords, rest = [], idx
        for n in reversed(spatial):
            coords.insert(0, rest % n)
            rest = rest // n
        idx = coords[-1]
        for dim in range(nd - 2, -1, -1):
            idx = idx * spatial[dim] + coords[dim]
    plane = int(np.prod(spatial))
    nc = ember.arange(shape[0] * shape[1]).reshape(shape[0], shape[1], *([1] * nd))
    return y, idx + nc * plane


def _check_avg(a, n):
    return _check_auto(a, n)


def _avg_pool_dilated(x, k, s, d, pads, ceil, include_pad, sums=False):
    """Average pooling with dilation: window sums and window counts as depthwise convolutions
    with a ones kernel (padding and the ceil-mode overhang excluded from the count as ONNX
    says). ``sums``: the window sums alone."""
    nd = len(k)
    c = x.shape[1]
    ext, sizes = [], []
    for i in range(nd):
        n = x.shape[2 + i]
        length = n + pads[i][0] + pads[i][1]
        eff = (k[i] - 1) * d[i] + 1
        q = (length - eff) / s[i]
        out = (int(np.ceil(q)) if ceil else int(np.floor(q))) + 1
        if ceil and (out - 1) * s[i] >= n + pads[i][0]:
            out -= 1
        ext.append(max(0, (out - 1) * s[i] + eff - length))
        sizes.append(n)
    full = [(p0, p1 + e) for (p0, p1), e in zip(pads, ext)]
    xp = _explicit_pad(x, full, 0.0)
    w = ember.ones(c, 1, *k, dtype=x.dtype)
    total = _CONV[nd](xp, w, None, stride=s, dilation=d, groups=c)
    if sums:
        return total
    ones = ember.ones(1, 1, *sizes, dtype=x.dtype)
    if include_pad:
        mask = _explicit_pad(_explicit_pad(ones, pads, 1.0), [(0, e) for e in ext], 0.0)
    else:
        mask = _explicit_pad(ones, full, 0.0)
    count = _CONV[nd](mask, ember.ones(1, 1, *k, dtype=x.dtype), None, stride=s, dilation=d)
    return total / count


@importer("AveragePool", since=7, check=_check_avg,
          attrs={"auto_pad": "NOTSET", "ceil_mode": 0, "count_include_pad": 0,
                 "dilations": None, "kernel_shape": None, "pads": None, "strides": None})
def avg_pool(a, x):
    nd, k, s, d = _geom(a, x)
    pads = _pads(a, x, k, s, d)
    ceil = bool(a["ceil_mode"])
    if any(v != 1 for v in d):
        return _avg_pool_dilated(x, k, s, d, pads, ceil, bool(a["count_include_pad"]))
    if all(p0 == p1 and p0 <= k[i] // 2 for i, (p0, p1) in enumerate(pads)) and \
            a.get("auto_pad", "NOTSET") == "NOTSET":
        return _AVGP[nd](x, k, stride=s, padding=[p0 for p0, _ in pads], ceil_mode=ceil,
                         count_include_pad=bool(a["count_include_pad"]))
    xp = _explicit_pad(x, pads, 0.0)
    y = _AVGP[nd](xp, k, stride=s, padding=0, ceil_mode=ceil)
    if a["count_include_pad"]:
        return y
    ones = ember.ones(1, 1, *x.shape[2:], dtype=x.dtype)
    m = _AVGP[nd](_explicit_pad(ones, pads, 0.0), k, stride=s, padding=0, ceil_mode=ceil)
    return y / m


@importer("GlobalAveragePool", since=1)
def global_avg_pool(a, x):
    return x.mean(dim=tuple(range(2, x.dim())), keepdim=True)


@importer("GlobalMaxPool", since=1)
def global_max_pool(a, x):
    return ember.amax(x, dim=tuple(range(2, x.dim())), keepdim=True)


_FOLDS_BN = ("Conv", "Gemm", "MatMul")   # producers ember.jit's batch-norm folding takes


def _check_bn(a, n):
    if a.get("spatial", 1) != 1:
        return ("spatial", "= 0 is not supported")
    return None


@importer("BatchNormalization", since=7, check=_check_bn, max_outputs=3,
          attrs={"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0, "spatial": 1})
def batch_norm(a, x, scale, b, mean, var):
    """Inference: running statistics. ``training_mode=1``: batch statistics, and the updated
    running mean/var (biased variance, ONNX's momentum convention) as outputs 1 and 2."""
    if not a["training_mode"]:
        if a.get("_src") in _FOLDS_BN or x.dim() < 2 or x.dtype == ember.float16:
            return F.batch_norm(x, mean, var, scale, b, training=False, eps=a["epsilon"])
        # not after a layer ember.jit folds it into: one multiply-add per element, which a
        # trace fuses with what follows (ReLU) into one pointwise kernel. The running
        # statistics get no gradient, as in F.batch_norm
        s = scale * ember.rsqrt(var.detach() + a["epsilon"])
        shape = (1, -1) + (1,) * (x.dim() - 2)
        return ember.addcmul((b - mean.detach() * s).reshape(*shape), x, s.reshape(*shape))
    dims = (0,) + tuple(range(2, x.dim()))
    mu = x.mean(dim=dims)
    v = ((x - mu.reshape(1, -1, *([1] * (x.dim() - 2)))) ** 2).mean(dim=dims)
    y = F.batch_norm(x, mu, v, scale, b, training=False, eps=a["epsilon"])
    m = a["momentum"]
    return y, mean * m + mu * (1 - m), var * m + v * (1 - m)


@importer("InstanceNormalization", since=6, attrs={"epsilon": 1e-5})
def instance_norm(a, x, scale, b):
    dims = tuple(range(2, x.dim()))
    mu = x.mean(dim=dims, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=dims, keepdim=True)
    shape = (1, -1) + (1,) * len(dims)
    return (x - mu) / ember.sqrt(var + a["epsilon"]) * scale.reshape(*shape) + b.reshape(*shape)


@importer("LayerNormalization", since=17, attrs={"axis": -1, "epsilon": 1e-5, "stash_type": 1},
          max_outputs=3)
def layer_norm(a, x, scale, b=None):
    ax = norm_axis(a["axis"], x.dim())
    dims = tuple(range(ax, x.dim()))
    xc = x.to(ember.float32) if x.dtype == ember.float16 else x
    mu = xc.mean(dim=dims, keepdim=True)
    var = ((xc - mu) ** 2).mean(dim=dims, keepdim=True)
    inv = 1.0 / ember.sqrt(var + a["epsilon"])
    y = ((xc - mu) * inv).to(x.dtype) * scale
    if b is not None:
        y = y + b
    return y, mu, inv


def _softmax_family(fn, coerce):
    def run(a, x):
        if x.dim() == 0:
            return fn(x.reshape(1), 0).reshape(())
        ax = norm_axis(a["axis"], x.dim())
        if not coerce:
            return fn(x, ax)
        shape = x.shape
        y = fn(x.reshape(int(np.prod(shape[:ax], dtype=np.int64)), -1), 1)
        return y.reshape(*shape)
    return run


def _hardmax(x, ax):
    idx = ember.argmax(x, dim=ax, keepdim=True)
    return ember.zeros_like(x).scatter(ax, idx, ember.ones_like(idx).to(x.dtype))


for _op, _fn in (("Softmax", lambda x, d: ember.softmax(x, d)),
                 ("LogSoftmax", lambda x, d: ember.log_softmax(x, d)),
                 ("Hardmax", _hardmax)):
    importer(_op, since=13, attrs={"axis": -1})(_softmax_family(_fn, False))
    importer(_op, since=1, attrs={"axis": 1})(_softmax_family(_fn, True))


@importer("LpNormalization", since=1, attrs={"axis": -1, "p": 2},
          check=lambda a, n: None if a["p"] in (1, 2) else ("p", "must be 1 or 2"))
def lp_normalization(a, x):
    n = ember.abs(x).sum(a["axis"], keepdim=True) if a["p"] == 1 else \
        ember.sqrt((x * x).sum(a["axis"], keepdim=True))
    return ember.where(n == 0, ember.zeros_like(x), x / ember.where(n == 0, ember.ones_like(n), n))


@importer("LRN", since=1, attrs={"alpha": 1e-4, "beta": 0.75, "bias": 1.0, "size": 1})
def lrn(a, x):
    """ONNX's window: channels ``c - (size-1)//2`` to ``c + size//2`` (torch's puts the longer
    half before ``c`` for an even size). The window sums are ``size`` shifted slices of the
    channel-padded squares, all pointwise (one fused kernel when traced); ``beta`` = 0.75 as
    ``t ** 0.75 = sqrt(t) * sqrt(sqrt(t))`` (a vector sqrt, where a float ``pow`` is a scalar
    libm call)."""
    if x.dim() < 2:
        raise EmberRuntimeError(f"LRN: input of shape {tuple(x.shape)} has no channel axis "
                                f"(rank 2 or more: N, C, ...)")
    half = x.dtype == ember.float16
    xc = x.to(ember.float32) if half else x
    size, c = a["size"], x.shape[1]
    lo = (size - 1) // 2
    sq = F.pad(xc * xc, [0, 0] * (x.dim() - 2) + [lo, size - 1 - lo])
    s = sq[:, 0:c]
    for j in range(1, size):
        s = s + sq[:, j:j + c]
    t = s * (a["alpha"] / size) + a["bias"]
    if a["beta"] == 0.75:
        r = ember.sqrt(t)
        y = xc / (r * ember.sqrt(r))
    else:
        y = xc / t ** a["beta"]
    return y.to(ember.float16) if half else y


_CTM_ALL = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
            "asymmetric", "tf_crop_and_resize")


def _check_resize(a, n):
    if a["mode"] not in ("nearest", "linear", "cubic"):
        return ("mode", f"= '{a['mode']}' is not nearest, linear or cubic")
    if a["coordinate_transformation_mode"] not in _CTM_ALL:
        return ("coordinate_transformation_mode",
                f"= '{a['coordinate_transformation_mode']}' is not supported")
    if a["mode"] == "nearest":
        if a["nearest_mode"] not in ("floor", "ceil", "round_prefer_floor", "round_prefer_ceil"):
            return ("nearest_mode", f"= '{a['nearest_mode']}' is not supported")
        if a["antialias"]:
            return ("antialias", "= 1 is not defined for mode 'nearest'")
    if a["keep_aspect_ratio_policy"] not in ("stretch", "not_larger", "not_smaller"):
        return ("keep_aspect_ratio_policy", f"= '{a['keep_aspect_ratio_policy']}' is not "
                                            f"supported")
    return None


def _coeffs_fn(a):
    mode, A = a["mode"], a["cubic_coeff_a"]
    if mode == "nearest":
        nm = a["nearest_mode"]

        def near(r, scale):
            if float(r).is_integer():
                return np.array([0.0, 1.0])
            return np.array({"round_prefer_floor": [r <= 0.5, r > 0.5],
                             "round_prefer_ceil": [r < 0.5, r >= 0.5],
                             "floor": [1, 0], "ceil": [0, 1]}[nm], dtype=np.float64)
        return near
    if mode == "linear":
        if not a["antialias"]:
            return lambda r, scale: np.array([1 - r, r])

        def lin_aa(r, scale):
            scale = min(scale, 1.0)
            start = int(np.floor(-1 / scale) + 1)
            args = (np.arange(start, start + 2 - 2 * start) - r) * scale
            c = np.clip(1 - np.abs(args), 0, 1)
            return c / c.sum()
        return lin_aa
    if not a["antialias"]:
        def cubic(r, scale):
            return np.array([((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
                             ((A + 2) * r - (A + 3)) * r * r + 1,
                             ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1,
                             ((A * (2 - r) - 5 * A) * (2 - r) + 8 * A) * (2 - r) - 4 * A])
        return cubic

    def cubic_aa(r, scale):
        scale = min(scale, 1.0)
        i0 = int(np.floor(-2 / scale) + 1)
        xs = np.abs(scale * (np.arange(i0, 2 - i0) - r))
        c = np.where(xs <= 1, (A + 2) * xs ** 3 - (A + 3) * xs ** 2 + 1,
                     np.where(xs < 2, A * xs ** 3 - 5 * A * xs ** 2 + 8 * A * xs - 4 * A, 0.0))
        return c / c.sum()
    return cubic_aa


def _resize_matrix(n_in, n_out, scale, ctm, coeffs_fn, roi, exclude_outside):
    """The [n_out, n_in] interpolation matrix of one axis (ONNX's Resize rules) and the mask of
    extrapolated rows (tf_crop_and_resize)."""
    width = scale * n_in
    y = np.arange(n_out, dtype=np.float64)
    extra = None
    if ctm == "align_corners":
        x = np.zeros(n_out) if width == 1 else y * (n_in - 1) / (width - 1)
    elif ctm == "asymmetric":
        x = y / scale
    elif ctm == "tf_crop_and_resize":
        x = (np.full(n_out, (roi[1] - roi[0]) * (n_in - 1) / 2) if width == 1 else
             y * (roi[1] - roi[0]) * (n_in - 1) / (width - 1)) + roi[0] * (n_in - 1)
        extra = (x < 0) | (x > n_in - 1)
    elif ctm == "pytorch_half_pixel":
        x = np.full(n_out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    else:
        x = n_in / 2 * (1 - n_out / width) + (y + 0.5) / scale - 0.5
    xi = np.floor(x)
    ratios = np.where(x == xi, 1.0, x - xi)
    c = np.stack([np.asarray(coeffs_fn(float(r), scale), np.float64) for r in ratios]) \
        if n_out else np.zeros((0, 2))
    n = c.shape[1]
    pad = int(np.ceil(n / 2))
    xp = x + pad
    p = np.floor(xp).astype(np.int64)
    frac = xp - p
    if n % 2 == 0:
        off = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        off = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    idx = (p + off)[:, None] + np.arange(n)[None, :] - pad
    if exclude_outside:
        c = np.where((idx < 0) | (idx >= n_in), 0.0, c)
        s = c.sum(-1, keepdims=True)
        c = c / np.where(s == 0, 1.0, s)
    m = np.zeros((n_out, n_in))
    np.add.at(m, (np.repeat(np.arange(n_out), n), np.clip(idx, 0, n_in - 1).reshape(-1)),
              c.reshape(-1))
    if extra is not None:
        m[extra] = 0.0
    return m, extra


@importer("Resize", since=11, check=_check_resize,
          attrs={"mode": "nearest", "coordinate_transformation_mode": "half_pixel",
                 "nearest_mode": "round_prefer_floor", "cubic_coeff_a": -0.75, "antialias": 0,
                 "exclude_outside": 0, "extrapolation_value": 0.0, "axes": None,
                 "keep_aspect_ratio_policy": "stretch"})
def resize(a, x, roi=None, scales=None, sizes=None):
    """Separable: one interpolation matrix per resized axis, applied with matmul (so the
    result is differentiable in ``x``)."""
    r = x.dim()
    axes = list(range(r)) if a["axes"] is None else [norm_axis(v, r) for v in a["axes"]]
    if sizes is not None and not sizes.numel():
        sizes = None
    roi_v = None if roi is None or not roi.numel() else \
        [float(v) for v in roi.detach().numpy().reshape(-1)]
    full_roi = [0.0] * r + [1.0] * r
    if roi_v is not None:
        for i, d in enumerate(axes):
            full_roi[d], full_roi[r + d] = roi_v[i], roi_v[len(axes) + i]
    shape = list(x.shape)
    if sizes is not None:
        out = list(shape)
        for i, d in enumerate(axes):
            out[d] = ints(sizes)[i]
        sc = [out[i] / shape[i] if shape[i] else 1.0 for i in range(r)]
        pol = a["keep_aspect_ratio_policy"]
        if pol != "stretch":
            s = (min if pol == "not_larger" else max)(sc[d] for d in axes)
            sc = [s if i in axes else 1.0 for i in range(r)]
            out = [int(s * shape[i] + 0.5) if i in axes else shape[i] for i in range(r)]
    else:
        given = [float(v) for v in scales.detach().numpy().reshape(-1)]
        sc = [1.0] * r
        for i, d in enumerate(axes):
            sc[d] = given[i]
        out = [int(sc[i] * shape[i]) for i in range(r)]
    ctm = a["coordinate_transformation_mode"]
    fn = _coeffs_fn(a)
    dt = x.dtype
    y = x if dt.is_floating_point else x.to(ember.float64)
    for d in axes:
        untouched = (np.isclose(sc[d], 1.0) and out[d] == shape[d] and
                     np.isclose(full_roi[d], 0.0) and np.isclose(full_roi[d + r], 1.0))
        if untouched:
            continue
        m, extra = _resize_matrix(shape[d], out[d], sc[d], ctm, fn,
                                  (full_roi[d], full_roi[d + r]), a["exclude_outside"])
        yt = ember.movedim(y, d, -1)
        yt = ember.matmul(yt, ember.tensor(m.T.astype(y.dtype.numpy)))
        if extra is not None and extra.any():
            yt = yt + ember.tensor((extra * a["extrapolation_value"]).astype(y.dtype.numpy))
        y = ember.movedim(yt, -1, d)
    if not dt.is_floating_point:
        info = np.iinfo(dt.numpy)
        y = ember.clamp(ember.round(y), float(info.min), float(info.max)).to(dt)
    return y

@importer("RMSNormalization", since=23, attrs={"axis": -1, "epsilon": 1e-5, "stash_type": 1})
def rms_norm(a, x, scale):
    ax = norm_axis(a["axis"], x.dim())
    xc = x.to(ember.float32) if x.dtype == ember.float16 else x
    ms = (xc * xc).mean(dim=tuple(range(ax, x.dim())), keepdim=True)
    return (xc / ember.sqrt(ms + a["epsilon"])).to(x.dtype) * scale


def _group_norm(a, x, scale, b, per_channel):
    n, c, g = x.shape[0], x.shape[1], a["num_groups"]
    xg = x.reshape(n, g, -1)
    mu = xg.mean(-1, keepdim=True)
    var = ((xg - mu) ** 2).mean(-1, keepdim=True)
    y = ((xg - mu) / ember.sqrt(var + a["epsilon"])).reshape(*x.shape)
    shape = (1, c) + (1,) * (x.dim() - 2)
    if not per_channel:   # opset 18: one scale and bias per group
        scale = scale.repeat_interleave(c // g)
        b = b.repeat_interleave(c // g)
    return y * scale.reshape(*shape) + b.reshape(*shape)


@importer("GroupNormalization", since=21, attrs={"epsilon": 1e-5, "num_groups": 1,
                                                "stash_type": 1})
def group_norm21(a, x, scale, b):
    return _group_norm(a, x, scale, b, True)


@importer("GroupNormalization", since=18, attrs={"epsilon": 1e-5, "num_groups": 1})
def group_norm18(a, x, scale, b):
    return _group_norm(a, x, scale, b, False)


@importer("MeanVarianceNormalization", since=13, attrs={"axes": [0, 2, 3]})
def mvn(a, x):
    dims = tuple(norm_axis(v, x.dim()) for v in a["axes"])
    mu = x.mean(dim=dims, keepdim=True)
    var = (x * x).mean(dim=dims, keepdim=True) - mu * mu
    return (x - mu) / (ember.sqrt(var) + 1e-9)


def _check_lp(a, n):
    return _check_auto(a, n)


@importer("LpPool", since=11, check=_check_lp,
          attrs={"auto_pad": "NOTSET", "ceil_mode": 0, "dilations": None, "kernel_shape": None,
                 "p": 2, "pads": None, "strides": None})
def lp_pool(a, x):
    nd, k, s, d = _geom(a, x)
    if any(v != 1 for v in d):   # window sums of |x|**p as a dilated depthwise convolution
        y = _avg_pool_dilated(ember.abs(x) ** a["p"], k, s, d, _pads(a, x, k, s, d),
                              bool(a["ceil_mode"]), True, sums=True)
        return y ** (1.0 / a["p"])
    xp = _explicit_pad(ember.abs(x) ** a["p"], _pads(a, x, k, s, d), 0.0)
    y = _AVGP[nd](xp, k, stride=s, padding=0, ceil_mode=bool(a["ceil_mode"]))
    return (y * float(np.prod(k))) ** (1.0 / a["p"])


@importer("Upsample", since=9, attrs={"mode": "nearest"},
          check=lambda a, n: None if a["mode"] in ("nearest", "linear") else
          ("mode", "must be 'nearest' or 'linear'"))
def upsample(a, x, scales):
    """Resize with asymmetric coordinates (nearest rounds down)."""
    ra = {"mode": a["mode"], "coordinate_transformation_mode": "asymmetric",
          "nearest_mode": "floor", "cubic_coeff_a": -0.75, "antialias": 0, "exclude_outside": 0,
          "extrapolation_value": 0.0, "axes": None, "keep_aspect_ratio_policy": "stretch"}
    return resize(ra, x, None, scales)


_GS_MODES = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest",
             "bicubic": "bicubic", "cubic": "bicubic"}


def _check_grid(a, n):
    if a["mode"] not in _GS_MODES:
        return ("mode", f"= '{a['mode']}' is not supported")
    if a["padding_mode"] not in ("zeros", "border", "reflection"):
        return ("padding_mode", f"= '{a['padding_mode']}' is not supported")
    return None


@importer("GridSample", since=16, check=_check_grid,
          attrs={"align_corners": 0, "mode": "bilinear", "padding_mode": "zeros"})
def grid_sample(a, x, grid):
    return F.grid_sample(x, grid, mode=_GS_MODES[a["mode"]], padding_mode=a["padding_mode"],
                         align_corners=bool(a["align_corners"]))


@importer("AffineGrid", since=20, attrs={"align_corners": 0})
def affine_grid(a, theta, size):
    return F.affine_grid(theta, ints(size), align_corners=bool(a["align_corners"]))


@importer("RotaryEmbedding", since=23,
          attrs={"interleaved": 0, "num_heads": 0, "rotary_embedding_dim": 0})
def rotary_embedding(a, x, cos, sin, pos=None):
    shape = x.shape
    if x.dim() == 4:
        x = x.permute(0, 2, 1, 3)                           # [B, S, H, D]
    else:
        x = x.reshape(shape[0], shape[1], a["num_heads"], -1)
    d = x.shape[-1]
    rd = a["rotary_embedding_dim"] or d
    xr, xp = x[..., :rd], x[..., rd:]
    if pos is not None:
        p = pos.to(ember.int64)
        cos = ember.index_select(cos, 0, p.reshape(-1)).reshape(*p.shape, -1)
        sin = ember.index_select(sin, 0, p.reshape(-1)).reshape(*p.shape, -1)
    cos, sin = cos[..., :rd // 2].unsqueeze(2), sin[..., :rd // 2].unsqueeze(2)
    if a["interleaved"]:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
    else:
        x1, x2 = xr[..., :rd // 2], xr[..., rd // 2:]
    re, im = cos * x1 - sin * x2, sin * x1 + cos * x2
    if a["interleaved"]:
        rot = ember.stack([re, im], -1).reshape(*re.shape[:-1], rd)
    else:
        rot = ember.cat([re, im], -1)
    y = ember.cat([rot, xp], -1)
    if len(shape) == 4:
        return y.permute(0, 2, 1, 3)
    return y.reshape(*shape)


@importer("CausalConvWithState", since=27, attrs={"activation": "none"}, max_outputs=2,
          check=lambda a, n: None if a["activation"] in ("none", "silu", "swish") else
          ("activation", f"= '{a['activation']}' is not one of none, silu, swish"))
def causal_conv_with_state(a, x, w, b=None, past=None):
    n, c, _ = x.shape
    k = w.shape[2]
    pad = ember.zeros(n, c, k - 1, dtype=x.dtype) if past is None else past
    xp = ember.cat([pad, x], 2)
    conv_a = {"auto_pad": "NOTSET", "dilations": None, "group": c, "kernel_shape": [k],
              "pads": None, "strides": None}
    y = conv(conv_a, xp, w, b)
    if a["activation"] in ("silu", "swish"):
        yf = y.to(ember.float32)
        y = (yf * ember.sigmoid(yf)).to(x.dtype)
    return y, xp[:, :, xp.shape[2] - (k - 1):]


@importer("NonMaxSuppression", since=10, attrs={"center_point_box": 0})
def non_max_suppression(a, boxes, scores, max_out=None, iou_thr=None, score_thr=None):
    """Greedy per batch and class, by descending score; returns [batch, class, box] rows."""
    bx = boxes.detach().numpy().astype(np.float64)
    sc = scores.detach().numpy().astype(np.float64)
    k = 0 if max_out is None else int(np.asarray(max_out.numpy()).reshape(-1)[0])
    thr = 0.0 if iou_thr is None else float(iou_thr.numpy().reshape(-1)[0])
    sthr = None if score_thr is None else float(score_thr.numpy().reshape(-1)[0])
    if a["center_point_box"]:
        xc, yc, w, h = bx[..., 0], bx[..., 1], bx[..., 2], bx[..., 3]
        y1, x1, y2, x2 = yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
    else:
        y1 = np.minimum(bx[..., 0], bx[..., 2])
        y2 = np.maximum(bx[..., 0], bx[..., 2])
        x1 = np.minimum(bx[..., 1], bx[..., 3])
        x2 = np.maximum(bx[..., 1], bx[..., 3])
    area = (y2 - y1) * (x2 - x1)
    rows = []
    for b in range(sc.shape[0]):
        for c in range(sc.shape[1]):
            order = np.argsort(-sc[b, c], kind="stable")
            if sthr is not None:
                order = order[sc[b, c, order] > sthr]
            keep = []
            for i in order:
                if len(keep) >= k:
                    break
                ok = True
                for j in keep:
                    ih = max(0.0, min(y2[b, i], y2[b, j]) - max(y1[b, i], y1[b, j]))
                    iw = max(0.0, min(x2[b, i], x2[b, j]) - max(x1[b, i], x1[b, j]))
                    inter = ih * iw
                    union = area[b, i] + area[b, j] - inter
                    if union > 0 and inter / union > thr:
                        ok = False
                        break
                if ok:
                    keep.append(i)
            rows += [(b, c, int(i)) for i in keep]
    return ember.tensor(np.array(rows, np.int64).reshape(-1, 3))


@importer("MaxUnpool", since=9, attrs={"kernel_shape": None, "pads": None, "strides": None})
def max_unpool(a, x, idx, output_shape=None):
    """Scatter the values to their (whole-tensor flattened) indices in a zero tensor of the
    inferred unpooled shape; a larger ``output_shape`` pads it with zeros at the end."""
    nd = x.dim() - 2
    k = a["kernel_shape"]
    s = a["strides"] or [1] * nd
    p = a["pads"] or [0] * (2 * nd)
    shape = list(x.shape[:2]) + [(x.shape[2 + i] - 1) * s[i] - (p[i] + p[i + nd]) + k[i]
                                 for i in range(nd)]
    flat = ember.zeros(int(np.prod(shape)), dtype=x.dtype)
    out = ember.index_copy(flat, 0, idx.reshape(-1).to(ember.int64), x.reshape(-1))
    out = out.reshape(*shape)
    if output_shape is not None:
        target = ints(output_shape)
        out = _explicit_pad(out, [(0, target[2 + i] - shape[2 + i]) for i in range(nd)], 0.0)
    return out


@importer("Col2Im", since=18, attrs={"dilations": None, "pads": None, "strides": None})
def col2im(a, x, image_shape, block_shape):
    """Sum the columns back into the image: index_add of every (block offset, position) pair
    to its pixel, then crop the pads."""
    img, blk = ints(image_shape), ints(block_shape)
    nd = len(img)
    d = a["dilations"] or [1] * nd
    s = a["strides"] or [1] * nd
    p = a["pads"] or [0] * (2 * nd)
    padded = [img[i] + p[i] + p[i + nd] for i in range(nd)]
    outs = [(padded[i] - ((blk[i] - 1) * d[i] + 1)) // s[i] + 1 for i in range(nd)]
    kb = np.stack(np.meshgrid(*[np.arange(b) for b in blk], indexing="ij"), -1).reshape(-1, nd)
    lo = np.stack(np.meshgrid(*[np.arange(o) for o in outs], indexing="ij"), -1).reshape(-1, nd)
    pos = kb[:, None, :] * np.array(d) + lo[None, :, :] * np.array(s)   # [K, L, nd]
    lin = np.ravel_multi_index(tuple(pos[..., i] for i in range(nd)), padded).reshape(-1)
    n, ck, L = x.shape
    c = ck // int(np.prod(blk))
    cols = x.reshape(n, c, -1)                                          # [N, C, K*L]
    acc = ember.zeros(n, c, int(np.prod(padded)), dtype=x.dtype)
    acc = ember.index_add(acc, 2, ember.tensor(lin.astype(np.int64)), cols)
    y = acc.reshape(n, c, *padded)
    idx = (slice(None), slice(None)) + tuple(slice(p[i], p[i] + img[i]) for i in range(nd))
    return y[idx]
