"""``GraphContext``: what a symbolic function builds ONNX nodes with (``g.op``, constants,
int-list inputs that may hold traced sizes, opset-aware Squeeze/Unsqueeze/Reduce helpers)."""
import numpy as np

from ember.onnx.errors import OnnxExportError

__all__ = ["GraphContext", "Dyn", "SymbolicError"]

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


class SymbolicError(OnnxExportError):
    """A symbolic function cannot express this particular call (its arguments) in ONNX."""


class Dyn:
    """A traced size (a 0-d int64 ONNX value) used where an op takes an int."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Dyn({self.name})"

    def __index__(self):
        raise SymbolicError("a traced (dynamic) size is used where ONNX needs a fixed int "
                            "attribute")

    __int__ = __index__


class GraphContext:
    """Accumulates ONNX nodes and initializers for one graph. ``opset``: the target opset."""

    def __init__(self, opset, onnx_helper):
        self.opset = opset
        self.helper = onnx_helper
        self.nodes = []
        self.initializers = {}   # name -> ndarray
        self.types = {}          # name -> (np.dtype, shape or None)
        self.used = set()
        self.node = None         # the IR node being converted
        self._counter = 0
        self._consts = {}        # cache key -> name
        self.value_name = None   # IR Value -> ONNX name (set by the exporter)

    # ---- names ------------------------------------------------------------------------------
    def reserve(self, name):
        self.used.add(name)
        return name

    def fresh(self, hint="t"):
        while True:
            self._counter += 1
            name = f"{hint}_{self._counter}"
            if name not in self.used:
                self.used.add(name)
                return name

    # ---- nodes ------------------------------------------------------------------------------
    def op(self, op_type, *inputs, outputs=1, domain="", out_names=None, **attrs):
        """Add an ONNX node; returns its output name (or a list when ``outputs`` > 1).
        ``None`` inputs become empty (absent optional) inputs; ``None`` attrs are dropped."""
        ins = []
        for x in inputs:
            if x is None:
                ins.append("")
            elif isinstance(x, str):
                ins.append(x)
            else:
                raise SymbolicError(f"{op_type}: input {x!r} is not an ONNX value name")
        while ins and ins[-1] == "":
            ins.pop()
        hint = op_type if self.node is None else f"{self.node.kind}.{op_type}"
        outs = list(out_names) if out_names else [self.fresh(hint) for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        name = self.fresh(f"n.{op_type}")
        node = self.helper.make_node(op_type, ins, outs, name=name, domain=domain or None, **attrs)
        if self.node is not None and getattr(self.node, "source", None):
            node.doc_string = str(self.node.source)
        self.nodes.append(node)
        return outs[0] if outputs == 1 and not out_names else outs

    def set_type(self, name, dtype, shape=None):
        self.types[name] = (np.dtype(dtype), None if shape is None else tuple(shape))

    def dtype(self, name, default=None):
        """The numpy dtype of an ONNX value this context knows, else ``default``."""
        t = self.types.get(name)
        return t[0] if t is not None else default

    def shape(self, name):
        t = self.types.get(name)
        return t[1] if t is not None else None

    # ---- constants --------------------------------------------------------------------------
    def const(self, value, dtype=None):
        """A Constant node holding ``value`` (cached by value); returns its name."""
        arr = np.asarray(value, dtype=dtype)
        if arr.dtype == np.float64 and dtype is None and not isinstance(value, np.ndarray):
            arr = arr.astype(np.float32)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        hit = self._consts.get(key)
        if hit is not None:
            return hit
        from onnx import numpy_helper
        out = self.fresh("const")
        saved, self.node = self.node, None
        try:
            self.op("Constant", out_names=[out], value=numpy_helper.from_array(arr, out))
        finally:
            self.node = saved
        self.set_type(out, arr.dtype, arr.shape)
        self._consts[key] = out
        return out

    def initializer(self, array, name=None):
        arr = np.ascontiguousarray(array)
        name = self.reserve(name) if name is not None else self.fresh("init")
        self.initializers[name] = arr
        self.set_type(name, arr.dtype, arr.shape)
        return name

    def scalar(self, value, dtype):
        """A 0-d constant of ``dtype`` (a Dyn becomes its value cast to ``dtype``)."""
        if isinstance(value, Dyn):
            return self.cast(value.name, dtype)
        if isinstance(value, str):
            return self.cast(value, dtype)
        return self.const(np.array(value, dtype=np.dtype(dtype)))

    def ints(self, seq):
        """A 1-d int64 ONNX value from a list of ints and ``Dyn`` sizes (Concat when dynamic)."""
        seq = list(seq)
        if all(not isinstance(s, Dyn) for s in seq):
            return self.const(np.array([int(s) for s in seq], np.int64))
        parts, run = [], []
        for s in seq:
            if isinstance(s, Dyn):
                if run:
                    parts.append(self.const(np.array(run, np.int64)))
                    run = []
                parts.append(self.unsqueeze(s.name, [0]))
            else:
                run.append(int(s))
        if run:
            parts.append(self.const(np.array(run, np.int64)))
        return parts[0] if len(parts) == 1 else self.op("Concat", *parts, axis=0)

    # ---- common ops -------------------------------------------------------------------------
    def cast(self, x, dtype):
        from onnx import helper
        dtype = np.dtype(dtype)
        if self.dtype(x) == dtype:
            return x
        out = self.op("Cast", x, to=helper.np_dtype_to_tensor_dtype(dtype))
        self.set_type(out, dtype, self.shape(x))
        return out

    def unsqueeze(self, x, axes):
        return self.op("Unsqueeze", x, self.const(np.array(list(axes), np.int64)))

    def squeeze(self, x, axes=None):
        if axes is None:
            return self.op("Squeeze", x)
        return self.op("Squeeze", x, self.const(np.array(list(axes), np.int64)))

    def reduce(self, op_type, x, axes=None, keepdims=False):
        """ReduceX over ``axes`` (None: all): axes as an input for ReduceSum from opset 13 and
        for the other reductions from opset 18, as an attribute before."""
        kd = 1 if keepdims else 0
        if axes is not None:
            axes = [int(a) for a in axes]
        as_input = op_type == "ReduceSum" or self.opset >= 18
        if axes is None:
            return self.op(op_type, x, keepdims=kd)
        if as_input:
            return self.op(op_type, x, self.const(np.array(axes, np.int64)), keepdims=kd)
        return self.op(op_type, x, axes=axes, keepdims=kd)

    def shape_of(self, x, start=None, end=None):
        """Shape(x)[start:end] as a 1-d int64 value."""
        s = self.op("Shape", x)
        if start is None and end is None:
            return s
        return self.op("Slice", s, self.const(np.array([start or 0], np.int64)),
                       self.const(np.array([INT64_MAX if end is None else end], np.int64)),
                       self.const(np.array([0], np.int64)))

    def dim(self, x, d):
        """x.shape[d] as a 0-d int64 value."""
        return self.op("Gather", self.op("Shape", x), self.const(np.array(d, np.int64)), axis=0)
