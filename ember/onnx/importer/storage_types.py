"""ONNX element types ember has no dtype for, computed in a wider ember dtype.

``TABLE`` maps each such type to its storage: bfloat16, the float8 / float6 / float4 types ->
float32; uint16, uint32, uint64, the 4- and 2-bit integers -> int64. A value of such a type is
held as the wide tensor holding exactly the values the narrow type can hold, which the importer
keeps true at every point where the graph produces one:

- graph inputs and initializers (NumPy / ``ml_dtypes`` arrays of the declared type) widen
  exactly (``widen``); a uint64 value above 2**63 - 1 is an error naming the input;
- every node output whose ONNX type (declared or from shape inference) is such a type is
  re-narrowed (``narrow``): floats round to the type with ``ml_dtypes`` (as ONNX's reference
  computes a bfloat16 Add: in float32, rounded), integers wrap modulo 2**bits as the declared
  type does (uint32 add / sub / mul / bitwise-not), uint64 results are checked to fit in int64;
- Cast / CastLike / QuantizeLinear to such a type round or saturate as ONNX specifies
  (``cast``); graph outputs convert back to the declared NumPy type (``to_declared``).

Float rounding passes gradients straight through (``x + (round(x) - x).detach()``), so a
bfloat16 model still trains in float32.
"""
from dataclasses import dataclass

import numpy as np

import ember
from ember.errors import EmberRuntimeError, EmberTypeError

__all__ = ["TABLE", "Storage", "simulated", "storable", "widen", "narrow", "to_declared",
           "cast", "ember_dtype_of", "NATIVE"]

NATIVE = {np.dtype(t) for t in ("float16", "float32", "float64", "int8", "int16", "int32",
                                 "int64", "uint8", "bool")}


@dataclass(frozen=True)
class Storage:
    name: str            # ONNX name (BFLOAT16)
    np_dtype: np.dtype   # the declared NumPy / ml_dtypes dtype
    wide: object         # the ember dtype it is computed in
    bits: int = 0        # integer types: width
    signed: bool = False

    @property
    def is_float(self):
        return self.wide.is_floating_point


def _table():
    import onnx
    tp = onnx.TensorProto
    out = {}
    floats = ("BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
              "FLOAT8E8M0", "FLOAT4E2M1", "FLOAT6E2M3", "FLOAT6E3M2")
    ints = {"UINT16": (16, False), "UINT32": (32, False), "UINT64": (64, False),
            "INT4": (4, True), "UINT4": (4, False), "INT2": (2, True), "UINT2": (2, False)}
    for name in floats + tuple(ints):
        code = getattr(tp, name, None)
        if code is None:
            continue
        try:
            npd = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(code))
        except Exception:   # an onnx without ml_dtypes support for it
            continue
        if name not in ints and npd.kind in "iub":   # an onnx that stores it as raw bits
            continue
        if name in ints:
            bits, signed = ints[name]
            out[code] = Storage(name, npd, ember.int64, bits, signed)
        else:
            out[code] = Storage(name, npd, ember.float32)
    return out


TABLE = _table()
_BY_NP = {s.np_dtype: code for code, s in TABLE.items()}


def simulated(elem_type):
    """The ``Storage`` of an ONNX element type ember computes in a wider dtype (else None)."""
    return TABLE.get(elem_type)


def code_of_np(npd):
    """The ONNX element type of a simulated NumPy / ml_dtypes dtype (else None)."""
    return _BY_NP.get(np.dtype(npd)) if npd is not None else None


def np_dtype(elem_type):
    import onnx
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        return None


def storable(elem_type):
    """Whether a tensor of this ONNX element type can be held (natively or simulated)."""
    return elem_type in TABLE or np_dtype(elem_type) in NATIVE


def ember_dtype_of(elem_type):
    """The ember dtype a value of this ONNX element type is held in."""
    s = TABLE.get(elem_type)
    if s is not None:
        return s.wide
    from ember._dtype import from_numpy_dtype
    return from_numpy_dtype(np_dtype(elem_type))


def _wrap(arr, s):
    """Integers modulo 2**bits, into the type's range (two's complement when signed)."""
    if s.bits >= 64:
        return arr
    m = 1 << s.bits
    if s.signed:
        h = m >> 1
        return (arr + h) % m - h
    return arr % m


def _fit_u64(arr, what):
    if arr.size and (arr.min() < 0 if arr.dtype.kind == "i" else arr.max() >= 1 << 63):
        raise EmberRuntimeError(
            f"{what}: uint64 values are computed in int64, and this one holds a value of 2**63 "
            f"or more (or a negative result of unsigned arithmetic); ember cannot hold it")


def widen(arr, elem_type, what):
    """A NumPy array of the declared type (or already widened) as an ember tensor of the
    storage dtype."""
    s = TABLE[elem_type]
    arr = np.asarray(arr)
    if s.name == "UINT64":
        _fit_u64(arr, what)
    if arr.dtype == s.np_dtype or not s.is_float and arr.dtype.kind in "iub":
        if not s.is_float and arr.dtype != s.np_dtype:
            lo, hi = (-(1 << (s.bits - 1)), (1 << (s.bits - 1)) - 1) if s.signed else \
                (0, (1 << s.bits) - 1)
            if arr.size and (arr.min() < lo or arr.max() > hi):
                raise EmberTypeError(f"{what}: expects {s.name} values, got values outside "
                                     f"[{lo}, {hi}] in dtype {arr.dtype}")
        return ember.tensor(arr.astype(s.wide.numpy))
    if arr.dtype.kind == "f":   # a float array for a float type: round to it
        return ember.tensor(arr.astype(s.np_dtype).astype(np.float32))
    raise EmberTypeError(f"{what}: expects dtype {s.name} (held as {s.wide}), got {arr.dtype}")


def narrow(t, elem_type, what):
    """Re-narrow a node's output tensor of a simulated type: round floats, wrap integers."""
    s = TABLE[elem_type]
    if not isinstance(t, ember.Tensor):
        return t
    if s.is_float:
        if t.dtype != ember.float32:
            t = t.to(ember.float32)
        r = ember.tensor(t.detach().numpy().astype(s.np_dtype).astype(np.float32))
        return t + (r - t).detach() if t.requires_grad else r
    if t.dtype != ember.int64:
        t = t.to(ember.int64)
    arr = t.numpy()
    if s.name == "UINT64":
        _fit_u64(arr, what)
        return t
    w = _wrap(arr, s)
    return t if w is arr or np.array_equal(w, arr) else ember.tensor(w)


def to_declared(v, elem_type):
    """A value as NumPy in its declared ONNX type (identity for native types)."""
    if v is None:
        return None
    if isinstance(v, list):
        return [to_declared(e, elem_type) for e in v]
    arr = v.detach().numpy() if isinstance(v, ember.Tensor) else np.asarray(v)
    s = TABLE.get(elem_type)
    return arr if s is None else arr.astype(s.np_dtype)


def cast(x, to, saturate=True, round_mode="up"):
    """ONNX Cast of a (stored) tensor to element type ``to``: float8 targets saturate when
    ``saturate``; FLOAT8E8M0 rounds by ``round_mode``; every other target converts as NumPy /
    ``ml_dtypes`` do (ONNX's reference)."""
    s = TABLE.get(to)
    if s is None:
        return x.to(ember_dtype_of(to))
    arr = x.detach().numpy()
    with np.errstate(invalid="ignore", over="ignore"):   # out of range: as NumPy converts
        y = _cast_np(arr, s, saturate, round_mode)
    out = ember.tensor(y.astype(s.wide.numpy))
    if s.is_float and x.requires_grad and x.dtype.is_floating_point:
        return x.to(ember.float32) + (out - x.to(ember.float32)).detach()
    return out


def _cast_np(arr, s, saturate, round_mode):
    import onnx
    if s.name.startswith("FLOAT8E") and s.name != "FLOAT8E8M0" and saturate:
        y = onnx.numpy_helper.saturate_cast(arr, s.np_dtype)
    elif s.name == "FLOAT8E8M0":
        y = onnx.numpy_helper.to_float8e8m0(arr.astype(np.float32), bool(saturate),
                                            round_mode).astype(s.np_dtype)
    else:
        y = arr.astype(s.np_dtype)
    return y
