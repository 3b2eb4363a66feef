"""Vision ops that sample a feature map at computed points: RoiAlign, DeformConv (2-d).

Both are ember ops end to end (gathers, products, sums), so gradients reach the feature map,
the weights and the mask (and, through the bilinear weights, DeformConv's offsets)."""
import numpy as np

import ember
from ember.errors import EmberRuntimeError
from ember.onnx.importer._util import ints
from ember.onnx.importer.registry import importer


def _corners_1d(c, size):
    """Bilinear taps along one axis as RoiAlign computes them (coordinates clamped into the
    map; a point beyond [-1, size] contributes nothing): (low, high, w_low, w_high, inside)."""
    inside = (c >= -1.0) & (c <= size)
    c = np.maximum(c, 0.0)
    low = np.floor(c).astype(np.int64)
    edge = low >= size - 1
    low = np.where(edge, size - 1, low)
    high = np.where(edge, size - 1, low + 1)
    c = np.where(edge, low.astype(c.dtype), c)
    frac = c - low
    return low, high, (1.0 - frac) * inside, frac * inside, inside


def _check_roi(a, n):
    if a["mode"] not in ("avg", "max"):
        return ("mode", "must be 'avg' or 'max'")
    if a.get("coordinate_transformation_mode", "half_pixel") not in ("half_pixel",
                                                                     "output_half_pixel"):
        return ("coordinate_transformation_mode", "must be 'half_pixel' or 'output_half_pixel'")
    return None


_ROI = {"mode": "avg", "output_height": 1, "output_width": 1, "sampling_ratio": 0,
        "spatial_scale": 1.0}


@importer("RoiAlign", since=10, check=_check_roi, attrs=_ROI)
def roi_align10(a, x, rois, batch_indices):
    """Opset 10 has no coordinate_transformation_mode: its boxes are output_half_pixel."""
    return roi_align(dict(a, coordinate_transformation_mode="output_half_pixel"), x, rois,
                     batch_indices)


@importer("RoiAlign", since=16, check=_check_roi,
          attrs=dict(_ROI, coordinate_transformation_mode="half_pixel"))
def roi_align(a, x, rois, batch_indices):
    """Each box of ``rois`` (x1, y1, x2, y2, scaled by spatial_scale) cut from image
    ``batch_indices[k]`` into an output_height x output_width grid; each bin averages (or, mode
    'max', takes the largest weighted corner of) a sampling_ratio^2 grid of bilinear samples
    (ceil(bin size) per axis when sampling_ratio is 0)."""
    if x.dim() != 4:
        raise EmberRuntimeError(f"RoiAlign: expects a 4-d input (N, C, H, W), got shape "
                                f"{tuple(x.shape)}")
    boxes = rois.detach().numpy().astype(np.float64).reshape(-1, 4)
    bidx = ints(batch_indices)
    ph, pw = a["output_height"], a["output_width"]
    h, w = x.shape[2], x.shape[3]
    half = a["coordinate_transformation_mode"] == "half_pixel"
    off = 0.5 if half else 0.0
    outs = []
    for k in range(boxes.shape[0]):
        x1, y1, x2, y2 = boxes[k] * a["spatial_scale"] - off
        rh, rw = y2 - y1, x2 - x1
        if not half:
            rh, rw = max(rh, 1.0), max(rw, 1.0)
        bh, bw = rh / ph, rw / pw
        sr = a["sampling_ratio"]
        gh = int(sr) if sr > 0 else int(np.ceil(rh / ph))
        gw = int(sr) if sr > 0 else int(np.ceil(rw / pw))
        count = max(gh * gw, 1)
        ys = y1 + np.arange(ph)[:, None] * bh + (np.arange(gh)[None, :] + 0.5) * bh / gh
        xs = x1 + np.arange(pw)[:, None] * bw + (np.arange(gw)[None, :] + 0.5) * bw / gw
        yl, yh, wyl, wyh, _ = _corners_1d(ys, h)     # (ph, gh)
        xl, xh, wxl, wxh, _ = _corners_1d(xs, w)     # (pw, gw)
        img = x[bidx[k]]                              # (C, H, W)
        if a["mode"] == "avg":
            # separable: Wy (ph, H) and Wx (pw, W) hold the summed taps of each bin
            wy = np.zeros((ph, h))
            wx = np.zeros((pw, w))
            for i in range(ph):
                np.add.at(wy[i], yl[i], wyl[i])
                np.add.at(wy[i], yh[i], wyh[i])
            for j in range(pw):
                np.add.at(wx[j], xl[j], wxl[j])
                np.add.at(wx[j], xh[j], wxh[j])
            wy_t = ember.tensor((wy / count).astype(x.dtype.numpy))
            wx_t = ember.tensor(wx.astype(x.dtype.numpy))
            outs.append(ember.einsum("ph,chw,qw->cpq", wy_t, img, wx_t))
            continue
        # max: the largest of the four weighted corners over every sample of a bin
        flat = img.reshape(img.shape[0], h * w)
        cands = []
        for yy, wyy in ((yl, wyl), (yh, wyh)):
            for xx, wxx in ((xl, wxl), (xh, wxh)):
                pos = yy[:, None, :, None] * w + xx[None, :, None, :]      # (ph, pw, gh, gw)
                wt = wyy[:, None, :, None] * wxx[None, :, None, :]
                v = flat[:, ember.tensor(pos.reshape(-1))].reshape(-1, ph, pw, gh * gw)
                cands.append(v * ember.tensor(wt.reshape(ph, pw, gh * gw)
                                              .astype(x.dtype.numpy)))
        best = cands[0]
        for c in cands[1:]:
            best = ember.maximum(best, c)
        outs.append(best.amax(dim=3))
    if not outs:
        return ember.zeros(0, x.shape[1], ph, pw, dtype=x.dtype)
    return ember.stack(outs, 0)


def _check_deform(a, n):
    if a["kernel_shape"] is not None and len(a["kernel_shape"]) != 2:
        return ("kernel_shape", "DeformConv is supported in 2-d only")
    return None


@importer("DeformConv", since=19, check=_check_deform,
          attrs={"dilations": None, "group": 1, "kernel_shape": None, "offset_group": 1,
                 "pads": None, "strides": None})
def deform_conv(a, x, w, offset, b=None, mask=None):
    """A 2-d convolution whose kernel taps sit at their grid positions plus learned offsets,
    sampled bilinearly (zero outside the map) and scaled by ``mask``."""
    if x.dim() != 4:
        raise EmberRuntimeError(f"DeformConv: supported for 4-d inputs (N, C, H, W), got shape "
                                f"{tuple(x.shape)}")
    n, c, h, wd = x.shape
    oc = w.shape[0]
    kh, kw = a["kernel_shape"] or list(w.shape[2:])
    sh, sw = a["strides"] or [1, 1]
    dh, dw = a["dilations"] or [1, 1]
    pads = a["pads"] or [0, 0, 0, 0]
    g, og = a["group"], a["offset_group"]
    oh, ow = offset.shape[2], offset.shape[3]
    if offset.shape[1] != og * kh * kw * 2 or c % og or c % g or oc % g:
        raise EmberRuntimeError(
            f"DeformConv: offset {tuple(offset.shape)}, input {tuple(x.shape)} and weight "
            f"{tuple(w.shape)} do not fit kernel {kh}x{kw}, group {g}, offset_group {og}")
    off = offset.to(ember.float64).reshape(n, og, kh, kw, 2, oh, ow)
    # tap (ki, kj) of output (i, j) sits at (-pad + stride * i + dilation * ki, ...) + offset
    base_y = dh * np.arange(kh)[:, None, None, None] + \
        (-pads[0] + sh * np.arange(oh))[None, None, :, None]
    base_x = dw * np.arange(kw)[None, :, None, None] + \
        (-pads[1] + sw * np.arange(ow))[None, None, None, :]
    py = off[:, :, :, :, 0] + ember.tensor(base_y.astype(np.float64))   # (n, og, kh, kw, oh, ow)
    px = off[:, :, :, :, 1] + ember.tensor(base_x.astype(np.float64))
    y0 = np.floor(py.detach().numpy()).astype(np.int64)
    x0 = np.floor(px.detach().numpy()).astype(np.int64)
    ly = py - ember.tensor(y0.astype(np.float64))
    lx = px - ember.tensor(x0.astype(np.float64))
    cg = c // og
    xg = x.reshape(n, og, cg, h * wd)
    L = kh * kw * oh * ow
    cols = None
    for yy, wy in ((y0, 1.0 - ly), (y0 + 1, ly)):
        for xx, wx in ((x0, 1.0 - lx), (x0 + 1, lx)):
            ok = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < wd)
            idx = np.where(ok, yy * wd + xx, 0).reshape(n, og, 1, L)
            idx = ember.tensor(np.ascontiguousarray(np.broadcast_to(idx, (n, og, cg, L))))
            v = ember.gather(xg, 3, idx).reshape(n, og, cg, kh, kw, oh, ow)
            wt = (wy * wx * ember.tensor(ok.astype(np.float64))).to(x.dtype)
            term = v * wt.reshape(n, og, 1, kh, kw, oh, ow)
            cols = term if cols is None else cols + term
    if mask is not None:
        cols = cols * mask.reshape(n, og, 1, kh, kw, oh, ow)
    # grouped convolution as a matmul over (input channels of the group x kernel taps)
    cols = cols.reshape(n, g, (c // g) * kh * kw, oh * ow)
    wm = w.reshape(g, oc // g, (c // g) * kh * kw)
    y = ember.matmul(wm, cols).reshape(n, oc, oh, ow)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y
