"""Small helpers shared by the symbolic modules."""
import numpy as np

from ember.onnx.context import Dyn, SymbolicError

__all__ = ["out_dtype", "in_dtype", "tensor_or_scalar", "pair", "static", "SymbolicError", "Dyn",
           "onnx_dtype", "promote", "arg_shape", "Rank1"]


def out_dtype(node, i=0):
    return node.outputs[i].dtype


def in_dtype(node, i=0):
    from ember.jit.ir import Value
    a = node.args[i]
    return a.dtype if isinstance(a, Value) else None


def onnx_dtype(dtype):
    from onnx import helper
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def tensor_or_scalar(g, x, dtype):
    """An ONNX name for a tensor arg (cast to ``dtype``) or a Python scalar (a constant)."""
    if isinstance(x, str):
        return g.cast(x, dtype)
    if isinstance(x, Dyn):
        return g.cast(x.name, dtype)
    if x is None:
        return None
    return g.const(np.array(x, dtype=np.dtype(dtype)))


def promote(node):
    """The dtype ember computed in: of the tensor args (scalars follow the tensors)."""
    from ember.jit.ir import Value
    dts = [a.dtype for a in node.args if isinstance(a, Value)]
    if not dts:
        return node.outputs[0].dtype
    return np.result_type(*dts)


def pair(v, n=2, name="argument"):
    if isinstance(v, (list, tuple)):
        v = tuple(static(x, name) for x in v)
        if len(v) == 1:
            return v * n
        return v
    return (static(v, name),) * n


def static(v, what="argument"):
    if isinstance(v, Dyn):
        raise SymbolicError(f"{what} is a traced size; ONNX needs a fixed value here")
    return v


def arg_shape(node, i=0):
    """The shape of IR argument ``i``."""
    return node.args[i].shape


class Rank1:
    """A node whose 0-d tensor arguments are seen as 1-element vectors."""

    class _Arg:
        def __init__(self, a):
            self.shape = tuple(getattr(a, "shape", ())) or (1,)
            self.dtype = getattr(a, "dtype", None)

    def __init__(self, node):
        self.args = [self._Arg(a) for a in node.args]
        self.outputs = [self._Arg(o) for o in node.outputs]
