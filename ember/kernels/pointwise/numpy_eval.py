"""Evaluate a typed pointwise expression with NumPy, one op at a time, into reused buffers.

This is the path for tiny arrays and for machines without Numba. Compared with the compiled
kernels it makes one pass over memory per op instead of one in all, holds an array-sized buffer
per live intermediate, runs on one thread (NumPy's ufuncs do not thread), and evaluates ``erf``
(and exact GELU) element by element through ``math.erf``, which is about 50 times slower.
"""
import numpy as np

from .ops import opmath


def _as_compute(value, dtype):
    """``value`` (array, NumPy scalar or Python scalar) converted to ``dtype`` then to its compute
    type, the way the compiled kernels convert operands."""
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.dtype != dtype:
        arr = arr.astype(dtype)
    comp = opmath(dtype)
    if arr.dtype != comp:
        arr = arr.astype(comp)
    return arr if arr.ndim else arr[()]


def _last_uses(typing):
    last = {}
    for i, step in enumerate(typing.steps):
        for a in step.operands:
            if isinstance(a, str):
                last[a] = i
    for name, _ in typing.outputs:
        last[name] = len(typing.steps)
    return last


def evaluate(typing, inputs, outs):
    """Run ``typing`` on ``inputs`` (arrays or Python scalars, in input order) writing into ``outs``
    (arrays of the broadcast shape, one per output). Inputs must not share memory with ``outs``."""
    values = dict(zip((name for name, _, _ in typing.inputs), inputs))
    out_of = {}
    for (name, dtype), out in zip(typing.outputs, outs):
        if name not in out_of and out.dtype == dtype:
            out_of[name] = out
    last = _last_uses(typing)
    pool = {}
    owned = set()
    for i, step in enumerate(typing.steps):
        operands = [_as_compute(values[a] if isinstance(a, str) else a, dt)
                    for a, dt in zip(step.operands, step.cast_to)]
        target = out_of.get(step.name)
        if target is None:
            shape = np.broadcast_shapes(*(np.shape(o) for o in operands if o is not None))
            free = pool.get((step.result, shape))
            target = free.pop() if free else np.empty(shape, step.result)
            owned.add(step.name)
        step.op.numpy(target, step.params, *operands)
        values[step.name] = target
        for a in set(a for a in step.operands if isinstance(a, str)):
            if last.get(a) == i and a in owned:
                buf = values[a]
                pool.setdefault((buf.dtype, buf.shape), []).append(buf)
    for (name, _), out in zip(typing.outputs, outs):
        if values[name] is not out:
            np.copyto(out, values[name], casting="unsafe")
    return outs
