"""The data of an ONNX model's tensors, read safely.

``read_external_data(model, base_dir, where)`` reads every tensor stored in an external file
(initializers, sparse initializers, tensors in node attributes, in every subgraph and function)
from ``base_dir``, the model's own folder, and nowhere else: a location that is absolute, has a
``..`` component, resolves (through symbolic links) outside the folder or is not a regular file
is refused, as is any external tensor when the folder is unknown (a model given as bytes, a
nameless file object or a ModelProto without ``base_dir``; as ``onnx.load_model`` reads external
data only for a model it reads from a path). ``tensor_array(t, what)`` is a tensor's value as a
NumPy array once its dims and data are checked to agree. Both raise ``OnnxImportError`` naming
the tensor and where it sits in the model."""
import math
import os
import stat

import numpy as np

from ember.onnx.importer._util import check_alloc
from ember.onnx.importer.errors import OnnxImportError

__all__ = ["read_external_data", "tensor_array", "raw_nbytes", "model_dir"]

_EXTERNAL = 1   # onnx.TensorProto.EXTERNAL
_STRING = 8     # onnx.TensorProto.STRING
_BITS = {"INT4": 4, "UINT4": 4, "FLOAT4E2M1": 4, "INT2": 2, "UINT2": 2}


def model_dir(src):
    """The folder external data of a model read from ``src`` lives in: a path's folder, or the
    folder of a file object's ``name`` when that is a path (as ``onnx.load_model``); None for
    bytes, nameless file objects and ModelProtos."""
    if isinstance(src, (str, os.PathLike)):
        return os.path.dirname(os.path.abspath(os.fspath(src)))
    name = getattr(src, "name", None) if hasattr(src, "read") else None
    if isinstance(name, (str, os.PathLike)) and os.path.isfile(name):
        return os.path.dirname(os.path.abspath(os.fspath(name)))
    return None


def _sub_byte_bits(data_type):
    import onnx
    for name, bits in _BITS.items():
        if getattr(onnx.TensorProto, name, None) == data_type:
            return bits
    return None


def raw_nbytes(data_type, n):
    """Bytes ``n`` elements of ONNX type ``data_type`` take in ``raw_data`` (sub-byte types
    packed), or None where the type has no raw form (STRING, unknown types)."""
    from ember.onnx.importer.load import np_dtype_of
    if data_type == _STRING:
        return None
    bits = _sub_byte_bits(data_type)
    if bits is not None:
        return (n * bits + 7) // 8
    npd = np_dtype_of(data_type)
    return None if npd is None else n * npd.itemsize


def _elements(t, what):
    dims = [int(d) for d in t.dims]
    if any(d < 0 for d in dims):
        raise OnnxImportError(f"onnx.load_model: {what} has negative dims {dims}")
    return math.prod(dims), dims


def tensor_array(t, what):
    """The value of TensorProto ``t`` (``onnx.numpy_helper.to_array``) after checking that its
    data is in the model (never read from an unresolved external reference, so never from the
    working directory), its dims are >= 0 and fit in memory (``check_alloc``) and its data holds
    exactly the elements its dims say. Raises OnnxImportError naming ``what``."""
    from onnx import numpy_helper
    from ember.onnx.importer.load import dtype_name
    if t.data_location == _EXTERNAL:
        raise OnnxImportError(f"onnx.load_model: {what} is stored in external data that was not "
                              f"read (load the model from its path, or pass base_dir)")
    n, dims = _elements(t, what)
    if t.HasField("raw_data"):
        want = raw_nbytes(t.data_type, n)
        if want is None:
            raise OnnxImportError(f"onnx.load_model: {what} of type "
                                  f"{dtype_name(t.data_type)} cannot hold raw_data")
        if len(t.raw_data) != want:
            raise OnnxImportError(f"onnx.load_model: {what}: dims {dims} ({n} elements of "
                                  f"{dtype_name(t.data_type)}) need {want} bytes of raw_data, "
                                  f"it holds {len(t.raw_data)}")
    else:
        want = raw_nbytes(t.data_type, n)
        if want is not None:
            check_alloc(want, f"onnx.load_model: {what}", OnnxImportError)
    try:
        return numpy_helper.to_array(t)
    except Exception as e:   # noqa: BLE001 - onnx/NumPy's ValueError, TypeError, ...
        raise OnnxImportError(f"onnx.load_model: {what}: dims {dims} ({n} elements of "
                              f"{dtype_name(t.data_type)}) do not match its data ({e})") from None


# ------------------------------------------------------------------ every tensor of a model
def _node_tensors(node, i, where):
    name = node.name or f"{node.op_type}_{i}"
    at = f"node '{name}' ({node.op_type}){where}"
    for a in node.attribute:
        here = f"attribute '{a.name}' of {at}"
        for t in ([a.t] if a.HasField("t") else []) + list(a.tensors):
            yield t, f"tensor '{t.name}' in {here}"
        sparse = ([a.sparse_tensor] if a.HasField("sparse_tensor") else []) + list(a.sparse_tensors)
        for s in sparse:
            yield s.values, f"sparse tensor '{s.values.name}' (values) in {here}"
            yield s.indices, f"sparse tensor '{s.values.name}' (indices) in {here}"
        graphs = ([a.g] if a.HasField("g") else []) + list(a.graphs)
        for g in graphs:
            yield from _graph_tensors(g, f" in subgraph '{g.name}' ({here})")


def _graph_tensors(g, where):
    for t in g.initializer:
        yield t, f"initializer '{t.name}'{where}"
    for s in g.sparse_initializer:
        yield s.values, f"sparse initializer '{s.values.name}' (values){where}"
        yield s.indices, f"sparse initializer '{s.values.name}' (indices){where}"
    for i, n in enumerate(g.node):
        yield from _node_tensors(n, i, where)


def model_tensors(model):
    """``(TensorProto, description)`` for every tensor of ``model``: initializers, sparse
    initializers, node attributes, in the main graph, every subgraph, function and training
    graph."""
    yield from _graph_tensors(model.graph, "")
    for f in model.functions:
        for i, n in enumerate(f.node):
            yield from _node_tensors(n, i, f" in function '{f.name}'")
    for k, info in enumerate(model.training_info):
        for part in ("initialization", "algorithm"):
            if info.HasField(part):
                yield from _graph_tensors(getattr(info, part), f" in training_info[{k}].{part}")


def _uses_external(model):
    return any(t.data_location == _EXTERNAL for t, _ in model_tensors(model))


def read_external_data(model, base_dir, where):
    """``model`` with every external tensor's data read from ``base_dir`` (a copy when any is
    external; ``model`` itself is not changed). Raises OnnxImportError naming the tensor for a
    location outside ``base_dir``, a missing or short file, or when ``base_dir`` is None."""
    import onnx
    if not _uses_external(model):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    root = None if base_dir is None else os.path.realpath(os.fspath(base_dir))
    for t, what in model_tensors(out):
        if t.data_location != _EXTERNAL:
            continue
        if root is None:
            raise OnnxImportError(
                f"onnx.load_model: {what} is stored in an external file, and the model was given "
                f"as {where}, so its folder is unknown: load it from its path, or pass "
                f"base_dir=<the model's folder>")
        t.raw_data = _read(t, root, what)
        t.data_location = onnx.TensorProto.DEFAULT
        del t.external_data[:]
    return out


def _info(t, what):
    info = {e.key: e.value for e in t.external_data}
    out = {}
    for key in ("offset", "length"):
        if key in info:
            try:
                out[key] = int(info[key])
            except ValueError:
                out[key] = -1
            if out[key] < 0:
                raise OnnxImportError(f"onnx.load_model: {what}: external data {key} "
                                      f"{info[key]!r} is not an integer >= 0")
    out["location"] = info.get("location", "")
    return out


def _resolve(location, root, what):
    """The real path of ``location`` under ``root``, refusing one that leaves it."""
    if not location:
        raise OnnxImportError(f"onnx.load_model: {what} is external but names no location")
    leaves = f"onnx.load_model: {what}: external data location {location!r}"
    if "\0" in location:
        raise OnnxImportError(f"{leaves} holds a NUL character")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or \
            os.path.splitdrive(location)[0]:
        raise OnnxImportError(f"{leaves} is an absolute path; external data is read only "
                              f"inside the model's folder '{root}'")
    if ".." in location.replace("\\", "/").split("/"):
        raise OnnxImportError(f"{leaves} leaves the model's folder '{root}' ('..')")
    real = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([real, root]) != root:
        raise OnnxImportError(f"{leaves} resolves to '{real}', outside the model's folder "
                              f"'{root}' (a symbolic link)")
    return real


def _read(t, root, what):
    from ember.onnx.importer.load import dtype_name
    info = _info(t, what)
    path = _resolve(info["location"], root, what)
    n, dims = _elements(t, what)
    want = raw_nbytes(t.data_type, n)
    if want is None:
        raise OnnxImportError(f"onnx.load_model: {what}: a {dtype_name(t.data_type)} tensor "
                              f"cannot be stored as external data")
    check_alloc(want, f"onnx.load_model: {what}", OnnxImportError)
    if info.get("length", want) != want:
        raise OnnxImportError(f"onnx.load_model: {what}: external data length {info['length']} "
                              f"does not match dims {dims} ({want} bytes of "
                              f"{dtype_name(t.data_type)})")
    offset = info.get("offset", 0)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    except OSError as e:
        raise OnnxImportError(f"onnx.load_model: {what}: cannot read external data "
                              f"'{info['location']}' in '{root}': {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OnnxImportError(f"onnx.load_model: {what}: external data "
                                  f"'{info['location']}' is not a regular file")
        if offset + want > st.st_size:
            raise OnnxImportError(f"onnx.load_model: {what}: external data '{info['location']}' "
                                  f"holds {st.st_size} bytes, the tensor needs {want} from offset "
                                  f"{offset}")
        os.lseek(fd, offset, os.SEEK_SET)
        chunks, left = [], want
        while left:
            b = os.read(fd, min(left, 1 << 30))
            if not b:
                raise OnnxImportError(f"onnx.load_model: {what}: external data "
                                      f"'{info['location']}' ended early")
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)
