"""Summary protos of scalars, histograms, images, text, hyperparameters and traced graphs, as
``torch.utils.tensorboard.summary`` builds them."""
import io

import numpy as np

from ember._optional import require
from ember.errors import EmberTypeError, EmberValueError
from ember.tensor import Tensor

_FEATURE = "ember.utils.tensorboard"


def _protos(module):
    return require(f"tensorboard.compat.proto.{module}", feature=_FEATURE, extra="tensorboard")


def make_np(x, who="tensorboard"):
    """A NumPy array of a tensor (detached; bfloat16 read as float32), an ndarray or a Python
    number (as a 1-element array, as torch)."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, Tensor):
        arr = x.detach()._data
        return arr.astype(np.float32) if arr.dtype.name == "bfloat16" else arr
    if np.isscalar(x):
        return np.array([x])
    raise EmberTypeError(f"{who}: got {type(x).__name__}, but a NumPy array, an ember tensor or "
                         "a number is expected")


def scalar(name, value, new_style=False, double_precision=False):
    """A Summary holding one scalar (``simple_value``, or a tensor with ``new_style``)."""
    s = _protos("summary_pb2")
    arr = make_np(value, "add_scalar").squeeze()
    if arr.ndim != 0:
        raise EmberValueError(f"add_scalar: the value should contain one element, got "
                              f"{arr.size} elements in {arr.ndim} dimensions")
    v = float(arr)
    if not new_style:
        return s.Summary(value=[s.Summary.Value(tag=name, simple_value=v)])
    t = _protos("tensor_pb2")
    proto = t.TensorProto(double_val=[v], dtype="DT_DOUBLE") if double_precision else \
        t.TensorProto(float_val=[v], dtype="DT_FLOAT")
    meta = s.SummaryMetadata(plugin_data=s.SummaryMetadata.PluginData(plugin_name="scalars"))
    return s.Summary(value=[s.Summary.Value(tag=name, tensor=proto, metadata=meta)])


def default_bins():
    """TensorBoard's default exponential bucket edges (1e-12 .. 1e20 by factors of 1.1, both
    signs, and 0)."""
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return [-b for b in reversed(pos)] + [0] + pos


def make_histogram(values, bins, max_bins=None):
    """A HistogramProto of ``values`` (NumPy's histogram with ``bins``), trimmed to the
    non-empty buckets, at most ``max_bins`` of them."""
    s = _protos("summary_pb2")
    if values.size == 0:
        raise EmberValueError("add_histogram: the input has no element")
    values = values.reshape(-1)
    counts, limits = np.histogram(values, bins=bins)
    n = len(counts)
    if max_bins is not None and n > max_bins:
        step = n // max_bins
        if n % step:
            counts = np.pad(counts, [[0, step - n % step]])
        counts = counts.reshape(-1, step).sum(axis=-1)
        merged = np.empty(counts.size + 1, limits.dtype)
        merged[:-1], merged[-1] = limits[:-1:step], limits[-1]
        limits = merged
    cum = np.cumsum(np.greater(counts, 0))
    start, end = np.searchsorted(cum, [0, cum[-1] - 1], side="right")
    start, end = int(start), int(end) + 1
    counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start:end + 1]
    return s.HistogramProto(min=values.min(), max=values.max(), num=len(values),
                            sum=values.sum(), sum_squares=values.dot(values),
                            bucket_limit=limits.tolist(), bucket=counts.tolist())


def histogram(name, values, bins, max_bins=None):
    s = _protos("summary_pb2")
    hist = make_histogram(make_np(values, "add_histogram").astype(float), bins, max_bins)
    return s.Summary(value=[s.Summary.Value(tag=name, histo=hist)])


def _as_list(a):
    return a.reshape(-1).tolist()


def _half_bits(a):
    """torch's ``half_val`` encoding: each value's float32 bit pattern as an int32."""
    return _as_list(a.astype(np.float32).view(np.int32))


def _complex_parts(a):
    return _as_list(np.stack([a.real, a.imag], -1))


# dtype name -> (TensorProto dtype, value field, conversion), as torch's _TENSOR_TYPE_MAP
_TENSOR_TYPES = {
    "float16": ("DT_HALF", "half_val", _half_bits),
    "bfloat16": ("DT_BFLOAT16", "half_val", _half_bits),
    "float32": ("DT_FLOAT", "float_val", _as_list),
    "float64": ("DT_DOUBLE", "double_val", _as_list),
    "int8": ("DT_INT8", "int_val", _as_list),
    "uint8": ("DT_UINT8", "uint32_val", _as_list),
    "int16": ("DT_INT16", "int_val", _as_list),
    "int32": ("DT_INT32", "int_val", _as_list),
    "int64": ("DT_INT64", "int64_val", _as_list),
    "complex64": ("DT_COMPLEX64", "scomplex_val", _complex_parts),
    "complex128": ("DT_COMPLEX128", "dcomplex_val", _complex_parts),
    "bool": ("DT_BOOL", "bool_val", _as_list),
}


def tensor_proto(tag, tensor):
    """A Summary holding the whole tensor (TensorBoard's ``tensor`` plugin). Raises
    EmberValueError over protobuf's 2 GB limit or for a dtype TensorProto lacks."""
    s, t = _protos("summary_pb2"), _protos("tensor_pb2")
    shape = _protos("tensor_shape_pb2")
    arr = tensor.detach()._data if isinstance(tensor, Tensor) else np.asarray(tensor)
    if arr.size * arr.itemsize >= 1 << 31:
        raise EmberValueError("add_tensor: tensor is bigger than protocol buffer's hard limit "
                              "of 2GB in size")
    if arr.dtype.name not in _TENSOR_TYPES:
        raise EmberValueError(f"add_tensor: {tag} has unsupported tensor dtype {arr.dtype}")
    kind, field, convert = _TENSOR_TYPES[arr.dtype.name]
    proto = t.TensorProto(dtype=kind, tensor_shape=shape.TensorShapeProto(
        dim=[shape.TensorShapeProto.Dim(size=int(d)) for d in arr.shape]),
        **{field: convert(arr)})
    meta = s.SummaryMetadata(plugin_data=s.SummaryMetadata.PluginData(plugin_name="tensor"))
    return s.Summary(value=[s.Summary.Value(tag=tag, metadata=meta, tensor=proto)])


def histogram_raw(name, min, max, num, sum, sum_squares, bucket_limits, bucket_counts):
    """A Summary of a histogram given by its statistics and buckets."""
    s = _protos("summary_pb2")
    hist = s.HistogramProto(min=min, max=max, num=num, sum=sum, sum_squares=sum_squares,
                            bucket_limit=bucket_limits, bucket=bucket_counts)
    return s.Summary(value=[s.Summary.Value(tag=name, histo=hist)])


def compute_curve(labels, predictions, num_thresholds, weights=None):
    """The 6 x num_thresholds (tp, fp, tn, fn, precision, recall) of binary ``labels`` and
    ``predictions`` in [0, 1], as TensorBoard's pr_curves plugin computes them."""
    weights = 1.0 if weights is None else weights
    buckets = np.int32(np.floor(predictions * (num_thresholds - 1)))
    lab = labels.astype(np.float64)
    span = (0, num_thresholds - 1)
    tp_b, _ = np.histogram(buckets, bins=num_thresholds, range=span, weights=lab * weights)
    fp_b, _ = np.histogram(buckets, bins=num_thresholds, range=span,
                           weights=(1.0 - lab) * weights)
    tp, fp = np.cumsum(tp_b[::-1])[::-1], np.cumsum(fp_b[::-1])[::-1]
    tn, fn = fp[0] - fp, tp[0] - tp
    precision = tp / np.maximum(1e-07, tp + fp)
    recall = tp / np.maximum(1e-07, tp + fn)
    return np.stack((tp, fp, tn, fn, precision, recall))


def _pr_summary(tag, data, num_thresholds):
    s, t = _protos("summary_pb2"), _protos("tensor_pb2")
    shape = _protos("tensor_shape_pb2")
    plugin = require("tensorboard.plugins.pr_curve.plugin_data_pb2", feature=_FEATURE,
                     extra="tensorboard")
    content = plugin.PrCurvePluginData(version=0, num_thresholds=num_thresholds)
    meta = s.SummaryMetadata(plugin_data=s.SummaryMetadata.PluginData(
        plugin_name="pr_curves", content=content.SerializeToString()))
    proto = t.TensorProto(dtype="DT_FLOAT", float_val=data.reshape(-1).tolist(),
                          tensor_shape=shape.TensorShapeProto(dim=[
                              shape.TensorShapeProto.Dim(size=d) for d in data.shape]))
    return s.Summary(value=[s.Summary.Value(tag=tag, metadata=meta, tensor=proto)])


def pr_curve(tag, labels, predictions, num_thresholds=127, weights=None):
    """A precision-recall curve Summary (at most 127 thresholds, as torch)."""
    num_thresholds = min(num_thresholds, 127)
    return _pr_summary(tag, compute_curve(labels, predictions, num_thresholds, weights),
                       num_thresholds)


def pr_curve_raw(tag, tp, fp, tn, fn, precision, recall, num_thresholds=127):
    """A precision-recall curve Summary from precomputed counts."""
    data = np.stack([make_np(a) if isinstance(a, Tensor) else np.asarray(a) for a in
                     (tp, fp, tn, fn, precision, recall)])
    return _pr_summary(tag, data, min(num_thresholds, 127))


def custom_scalars(layout):
    """The layout Summary of TensorBoard's custom_scalars plugin: ``{category: {title:
    ["Multiline", tags] or ["Margin", [value, lower, upper]]}}``."""
    s, t = _protos("summary_pb2"), _protos("tensor_pb2")
    shape = _protos("tensor_shape_pb2")
    lp = require("tensorboard.plugins.custom_scalar.layout_pb2", feature=_FEATURE,
                 extra="tensorboard")
    categories = []
    for cat, charts in layout.items():
        out = []
        for title, (kind, tags) in charts.items():
            if kind == "Margin":
                if len(tags) != 3:
                    raise EmberValueError(f"add_custom_scalars: a Margin chart takes 3 tags "
                                          f"(value, lower, upper), got {len(tags)}")
                out.append(lp.Chart(title=title, margin=lp.MarginChartContent(series=[
                    lp.MarginChartContent.Series(value=tags[0], lower=tags[1],
                                                 upper=tags[2])])))
            else:
                out.append(lp.Chart(title=title, multiline=lp.MultilineChartContent(tag=tags)))
        categories.append(lp.Category(title=cat, chart=out))
    meta = s.SummaryMetadata(plugin_data=s.SummaryMetadata.PluginData(
        plugin_name="custom_scalars"))
    proto = t.TensorProto(dtype="DT_STRING", tensor_shape=shape.TensorShapeProto(),
                          string_val=[lp.Layout(category=categories).SerializeToString()])
    return s.Summary(value=[s.Summary.Value(tag="custom_scalars__config__", tensor=proto,
                                            metadata=meta)])


def _grid(images, ncols=8):
    """N x C x H x W images (C 1 or 3) tiled into one 3 x H' x W' canvas, ``ncols`` wide."""
    if images.shape[1] == 1:
        images = np.concatenate([images] * 3, 1)
    if images.shape[1] != 3:
        raise EmberValueError(f"add_images: expected 1 or 3 channels, got shape "
                              f"{list(images.shape)}")
    n, _, h, w = images.shape
    ncols = min(n, ncols)
    nrows = -(-n // ncols)
    canvas = np.zeros((3, h * nrows, w * ncols), dtype=images.dtype)
    for i in range(n):
        y, x = divmod(i, ncols)
        canvas[:, y * h:(y + 1) * h, x * w:(x + 1) * w] = images[i]
    return canvas


def to_hwc(arr, dataformats):
    """``arr`` laid out as ``dataformats`` (NCHW, NHWC, CHW, HWC, HW, ...) as an H x W x 3
    image (a batch is tiled into a grid, one channel repeated to three)."""
    fmt = dataformats.upper()
    if len(set(fmt)) != len(fmt) or set(fmt) - set("NCHW"):
        raise EmberValueError(f"add_image: invalid dataformats {dataformats!r} (letters of "
                              "NCHW, each at most once)")
    if arr.ndim != len(fmt):
        raise EmberValueError(f"add_image: the image has shape {list(arr.shape)} but "
                              f"dataformats {dataformats!r} has {len(fmt)} dimensions")
    if len(fmt) == 4:
        return _grid(arr.transpose([fmt.find(c) for c in "NCHW"])).transpose(1, 2, 0)
    if len(fmt) == 3:
        hwc = arr.transpose([fmt.find(c) for c in "HWC"])
        return np.concatenate([hwc] * 3, 2) if hwc.shape[2] == 1 else hwc
    if len(fmt) == 2:
        hw = arr.transpose([fmt.find(c) for c in "HW"])
        return np.stack([hw] * 3, 2)
    raise EmberValueError(f"add_image: dataformats {dataformats!r} must have 2 to 4 letters")


def image(tag, img, rescale=1, dataformats="NCHW"):
    """A Summary holding ``img`` as a PNG: floats are read in [0, 1] (scaled by 255), uint8 in
    [0, 255], as torch."""
    s = _protos("summary_pb2")
    arr = to_hwc(make_np(img, "add_image"), dataformats)
    scale = 1 if arr.dtype == np.uint8 else 255
    arr = (arr.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)
    pil = require("PIL.Image", feature=_FEATURE, extra="tensorboard")
    h, w, c = arr.shape
    picture = pil.fromarray(arr)
    if rescale != 1:
        picture = picture.resize((int(w * rescale), int(h * rescale)), pil.Resampling.LANCZOS)
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return s.Summary(value=[s.Summary.Value(tag=tag, image=s.Summary.Image(
        height=h, width=w, colorspace=c, encoded_image_string=out.getvalue()))])


def audio(tag, sound, sample_rate=44100):
    """A Summary holding a mono sound (values in [-1, 1], clipped beyond) as 16-bit WAV."""
    import wave
    s = _protos("summary_pb2")
    arr = make_np(sound, "add_audio").squeeze()
    if arr.ndim != 1:
        raise EmberValueError(f"add_audio: the sound should be 1-dimensional, got shape "
                              f"{list(arr.shape)}")
    if np.abs(arr).max() > 1:
        print("warning: audio amplitude out of range, auto clipped.")
        arr = arr.clip(-1, 1)
    pcm = (arr * np.iinfo(np.int16).max).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.data)
    clip = s.Summary.Audio(sample_rate=sample_rate, num_channels=1,
                           length_frames=pcm.shape[-1], encoded_audio_string=out.getvalue(),
                           content_type="audio/wav")
    return s.Summary(value=[s.Summary.Value(tag=tag, audio=clip)])


def text(tag, text_string):
    """A Summary for TensorBoard's text plugin, under ``<tag>/text_summary`` as torch."""
    s, t = _protos("summary_pb2"), _protos("tensor_pb2")
    shape = _protos("tensor_shape_pb2")
    plugin = require("tensorboard.plugins.text.plugin_data_pb2", feature=_FEATURE,
                     extra="tensorboard")
    meta = s.SummaryMetadata(plugin_data=s.SummaryMetadata.PluginData(
        plugin_name="text", content=plugin.TextPluginData(version=0).SerializeToString()))
    proto = t.TensorProto(dtype="DT_STRING", string_val=[text_string.encode("utf_8")],
                          tensor_shape=shape.TensorShapeProto(
                              dim=[shape.TensorShapeProto.Dim(size=1)]))
    return s.Summary(value=[s.Summary.Value(tag=tag + "/text_summary", metadata=meta,
                                            tensor=proto)])


def hparams(hparam_dict, metric_dict, hparam_domain_discrete=None):
    """The (experiment, session start, session end) Summaries of TensorBoard's hparams
    plugin. Raises EmberTypeError for non-dict arguments or a discrete domain whose values
    are not of the hyperparameter's type, EmberValueError for a value of another type."""
    s = _protos("summary_pb2")
    struct = _protos("struct_pb2")
    api = require("tensorboard.plugins.hparams.api_pb2", feature=_FEATURE, extra="tensorboard")
    meta = require("tensorboard.plugins.hparams.metadata", feature=_FEATURE,
                   extra="tensorboard")
    data = require("tensorboard.plugins.hparams.plugin_data_pb2", feature=_FEATURE,
                   extra="tensorboard")
    if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
        raise EmberTypeError("add_hparams: hparam_dict and metric_dict should be dictionary.")
    domains = hparam_domain_discrete or {}
    if not isinstance(domains, dict):
        raise EmberTypeError("add_hparams: hparam_domain_discrete should be a dictionary")
    for k, v in domains.items():
        if k not in hparam_dict or not isinstance(v, list) or \
                not all(isinstance(d, type(hparam_dict[k])) for d in v):
            raise EmberTypeError(f"add_hparams: hparam_domain_discrete[{k}] should be a list "
                                 f"of same type as hparam_dict[{k}].")
    infos, start = [], data.SessionStartInfo()
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if isinstance(v, Tensor):
            v = float(make_np(v).reshape(-1)[0])
        if isinstance(v, bool):
            field, kind = "bool_value", "DATA_TYPE_BOOL"
        elif isinstance(v, (int, float)):
            field, kind = "number_value", "DATA_TYPE_FLOAT64"
        elif isinstance(v, str):
            field, kind = "string_value", "DATA_TYPE_STRING"
        else:
            raise EmberValueError(f"add_hparams: the value of {k!r} should be one of int, "
                                  f"float, str, bool, or a tensor, got {type(v).__name__}")
        setattr(start.hparams[k], field, v)
        domain = struct.ListValue(values=[struct.Value(**{field: d}) for d in domains[k]]) \
            if k in domains else None
        infos.append(api.HParamInfo(name=k, type=api.DataType.Value(kind),
                                    domain_discrete=domain))

    def wrap(tag, **content):
        blob = data.HParamsPluginData(version=meta.PLUGIN_DATA_VERSION, **content)
        smd = s.SummaryMetadata(plugin_data=s.SummaryMetadata.PluginData(
            plugin_name=meta.PLUGIN_NAME, content=blob.SerializeToString()))
        return s.Summary(value=[s.Summary.Value(tag=tag, metadata=smd)])
    experiment = api.Experiment(hparam_infos=infos, metric_infos=[
        api.MetricInfo(name=api.MetricName(tag=k)) for k in metric_dict])
    end = data.SessionEndInfo(status=api.Status.Value("STATUS_SUCCESS"))
    return (wrap(meta.EXPERIMENT_TAG, experiment=experiment),
            wrap(meta.SESSION_START_INFO_TAG, session_start_info=start),
            wrap(meta.SESSION_END_INFO_TAG, session_end_info=end))


def graph(model, example_inputs):
    """(GraphDef, RunMetadata) of ``model`` traced by ``ember.jit.trace`` on
    ``example_inputs``: one node per input, parameter and IR node (op ``ember::<kind>``),
    named by module path so TensorBoard groups them, with output shapes and dtypes."""
    from ember import jit
    g = _protos("graph_pb2")
    nd, av = _protos("node_def_pb2"), _protos("attr_value_pb2")
    shape_pb, ver = _protos("tensor_shape_pb2"), _protos("versions_pb2")
    step = _protos("step_stats_pb2")
    config = _protos("config_pb2")
    if isinstance(example_inputs, list):
        example_inputs = tuple(example_inputs)
    ir = jit.trace(model, example_inputs, check_trace=False).graph

    def name(v):
        return v.name.replace(".", "/")

    def attrs(v, extra=None):
        shp = shape_pb.TensorShapeProto(dim=[shape_pb.TensorShapeProto.Dim(size=int(d))
                                             for d in (v.shape or ())])
        out = {"_output_shapes": av.AttrValue(list=av.AttrValue.ListValue(shape=[shp])),
               "dtype": av.AttrValue(s=str(v.dtype).encode())}
        if extra:
            out["attr"] = av.AttrValue(s=extra.encode())
        return out
    nodes = []
    for v in ir.inputs:
        kind = "prim::Parameter" if v.role == "param" else "IO Node"
        label = name(v) if v.role == "param" else f"input/{name(v)}"
        nodes.append(nd.NodeDef(name=label, op=kind, attr=attrs(v)))
    labels = {id(v): (name(v) if v.role == "param" else f"input/{name(v)}") for v in ir.inputs}
    for n in ir.nodes:
        ins = [labels[id(x)] for x in n.inputs if id(x) in labels]
        text_attrs = ", ".join(f"{k}={a!r}" for k, a in (n.attrs or {}).items())
        for i, out in enumerate(n.outputs):
            label = f"{n.kind}_{name(out)}"
            labels[id(out)] = label
            nodes.append(nd.NodeDef(name=label, op=f"ember::{n.kind}", input=ins,
                                    attr=attrs(out, text_attrs)))
    for i, out in enumerate(ir.outputs):
        if id(out) in labels:
            nodes.append(nd.NodeDef(name=f"output/output.{i + 1}", op="IO Node",
                                    input=[labels[id(out)]], attr=attrs(out)))
    graph_def = g.GraphDef(node=nodes, versions=ver.VersionDef(producer=22))
    stats = config.RunMetadata(step_stats=step.StepStats(dev_stats=[
        step.DeviceStepStats(device="/device:CPU:0")]))
    return graph_def, stats
