"""Factories: zeros/ones/full/empty (ConstantOfShape with traced sizes), *_like, arange,
linspace, eye, and the random ones (RandomNormal/Uniform; not comparable run to run)."""
import numpy as np

from ember.onnx.context import Dyn
from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import onnx_dtype, out_dtype, static


def _value(v, dt):
    from onnx import numpy_helper
    return numpy_helper.from_array(np.array([v], dt))


def _size(size):
    if isinstance(size, (int, Dyn)):
        return [size]
    return list(size)


def _fill(g, node, shape_name, v):
    dt = out_dtype(node)
    return g.op("ConstantOfShape", shape_name, value=_value(v, dt))


@symbolic("zeros", "empty")
def sym_zeros(g, node, size, dtype=None):
    return _fill(g, node, g.ints(_size(size)), 0)


@symbolic("ones")
def sym_ones(g, node, size, dtype=None):
    return _fill(g, node, g.ints(_size(size)), 1)


@symbolic("full")
def sym_full(g, node, size, fill_value, dtype=None):
    return _fill(g, node, g.ints(_size(size)), static(fill_value, "fill_value"))


@symbolic("zeros_like", "empty_like")
def sym_zeros_like(g, node, x, dtype=None):
    return _fill(g, node, g.op("Shape", x), 0)


@symbolic("ones_like")
def sym_ones_like(g, node, x, dtype=None):
    return _fill(g, node, g.op("Shape", x), 1)


@symbolic("full_like")
def sym_full_like(g, node, x, fill_value, dtype=None):
    return _fill(g, node, g.op("Shape", x), static(fill_value, "fill_value"))


@symbolic("arange")
def sym_arange(g, node, start, end, step, dtype=None):
    dt = out_dtype(node)
    if dt.kind == "f" and not any(isinstance(v, Dyn) for v in (start, end, step)):
        n = node.outputs[0].shape[0]
        idx = g.op("Range", g.const(np.array(0, np.int64)), g.const(np.array(n, np.int64)),
                   g.const(np.array(1, np.int64)))
        return g.op("Add", g.op("Mul", g.cast(idx, dt), g.const(np.array(step, dt))),
                    g.const(np.array(start, dt)))
    return g.op("Range", g.scalar(start, dt), g.scalar(end, dt), g.scalar(step, dt))


@symbolic("linspace")
def sym_linspace(g, node, start, end, steps, dtype=None):
    dt = out_dtype(node)
    steps = int(static(steps, "steps"))
    if steps == 1:
        return g.const(np.array([start], dt))
    vals = np.linspace(start, end, steps).astype(dt)
    return g.op("Identity", g.const(vals))


@symbolic("eye")
def sym_eye(g, node, n, m=None, dtype=None):
    dt = out_dtype(node)
    shape = g.ints([n, n if m is None else m])
    z = g.op("ConstantOfShape", shape, value=_value(0, dt))
    return g.op("EyeLike", z, dtype=onnx_dtype(dt))


@symbolic("rand", "randn")
def sym_rand(g, node, size, generator=None, dtype=None):
    op = "RandomUniform" if node.kind == "rand" else "RandomNormal"
    shape = node.outputs[0].shape
    if any(isinstance(s, Dyn) for s in _size(size)):
        z = g.op("ConstantOfShape", g.ints(_size(size)), value=_value(0, out_dtype(node)))
        return g.op(op + "Like", z, dtype=onnx_dtype(out_dtype(node)))
    return g.op(op, shape=list(shape), dtype=onnx_dtype(out_dtype(node)))


@symbolic("normal")
def sym_normal(g, node, mean, std, size, generator=None, dtype=None):
    return g.op("RandomNormal", shape=list(node.outputs[0].shape), mean=float(mean),
                scale=float(std), dtype=onnx_dtype(out_dtype(node)))


@symbolic("uniform_like")
def sym_uniform_like(g, node, x, low, high, generator=None):
    return g.op("RandomUniformLike", x, low=float(low), high=float(high))


@symbolic("normal_like")
def sym_normal_like(g, node, x, mean, std, generator=None):
    return g.op("RandomNormalLike", x, mean=float(mean), scale=float(std))


@symbolic("bernoulli", since=15)
def sym_bernoulli(g, node, x, generator=None):
    return g.op("Bernoulli", x)


