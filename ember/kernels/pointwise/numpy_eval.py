"""Evaluate a typed pointwise expression with NumPy, one op at a time, into reused buffers.

This is the path for tiny arrays and for machines without Numba. Compared with the compiled
kernels it makes one pass over memory per op instead of one in all, holds an array-sized buffer
per live intermediate and runs on one thread (NumPy's ufuncs do not thread). A plan made with
``twin=True`` evaluates float32 exp / tanh / erf by the compiled helpers' NumPy twins: where
``kernel_exact`` holds, it gives the compiled kernel's bits (``elementwise.kept_pass`` runs it
while the kernel compiles).
"""
import numpy as np

from ember.kernels.runtime.fpstate import quiet as _fp_quiet, restore as _fp_restore

from .ops import opmath
from .promotion import SCALAR

_EXACT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(bool))


def kernel_exact(typing):
    """Whether ``NumpyPlan(typing, twin=True)`` gives the compiled kernel's bits: every value
    float32, float64 or bool, every step ``Op.kernel_exact`` (IEEE arithmetic, selects,
    comparisons; float32 exp / tanh / erf)."""
    if any(dt not in _EXACT_DTYPES for _, dt, _ in typing.inputs):
        return False
    for st in typing.steps:
        if st.result not in _EXACT_DTYPES or any(dt not in _EXACT_DTYPES for dt in st.cast_to) \
                or not st.op.kernel_exact(st.ct, st.params):
            return False
    return True


def _conversions(frm, to):
    """The dtypes a value of ``frm`` is cast through to compute as ``to`` (rounding to ``to``
    first, then widening to its compute type)."""
    steps = []
    if frm != to:
        steps.append(to)
    if opmath(to) != to:
        steps.append(opmath(to))
    return tuple(steps)


class NumpyPlan:
    """A typing compiled into a list of NumPy calls; ``run(inputs, outs)`` evaluates it.
    ``twin``: each op's ``Op.twin`` where it has one (see the module docstring)."""

    def __init__(self, typing, twin=False):
        slots = {}
        dtypes = {}
        for i, (name, dtype, prio) in enumerate(typing.inputs):
            slots[name] = i
            dtypes[name] = None if prio == SCALAR else dtype
        n_inputs = len(typing.inputs)
        last = {}
        for j, step in enumerate(typing.steps):
            for a in step.operands:
                if isinstance(a, str):
                    last[slots.get(a, a)] = j
            slots[step.name] = n_inputs + j
            dtypes[step.name] = step.result
        for name, _ in typing.outputs:
            last[slots[name]] = len(typing.steps)
        self.n_values = n_inputs + len(typing.steps)
        self.steps = []
        for j, step in enumerate(typing.steps):
            operands = []
            for a, dt in zip(step.operands, step.cast_to):
                if a is None:
                    operands.append((None, None, ()))
                elif isinstance(a, str):
                    frm = dtypes[a]
                    conv = (dt,) if frm is None else _conversions(frm, dt)
                    operands.append((slots[a], None, conv))
                else:
                    const = np.asarray(a).astype(dt).astype(opmath(dt))[()]
                    operands.append((None, const, ()))
            frees = tuple(slots[a] for a in set(a for a in step.operands if isinstance(a, str))
                          if last.get(slots[a]) == j and slots[a] >= n_inputs)
            fn = (twin and step.op.twin) or step.op.numpy
            self.steps.append((fn, step.params, tuple(operands), step.result, frees))
        self.outputs = tuple(slots[name] for name, _ in typing.outputs)
        self.n_inputs = n_inputs

    def run(self, inputs, outs, shape):
        """Evaluate on ``inputs`` (arrays or Python scalars) into ``outs`` (arrays of ``shape``).
        Inputs must not share memory with ``outs``."""
        values = list(inputs) + [None] * (self.n_values - self.n_inputs)
        direct = {}
        for slot, out in zip(self.outputs, outs):
            direct.setdefault(slot, out)
        pool = {}
        token = _fp_quiet()
        try:
            for j, (fn, params, operands, result, frees) in enumerate(self.steps):
                args = []
                for slot, const, conv in operands:
                    v = const if slot is None else values[slot]
                    for dt in conv:
                        v = v.astype(dt) if isinstance(v, (np.ndarray, np.generic)) else np.asarray(v).astype(dt)[()]
                    args.append(v)
                slot = self.n_inputs + j
                target = direct.get(slot)
                if target is None or target.dtype != result:
                    free = pool.get(result)
                    target = free.pop() if free else np.empty(shape, result)
                fn(target, params, *args)
                values[slot] = target
                for f in frees:
                    buf = values[f]
                    if all(buf is not o for o in outs):
                        pool.setdefault(buf.dtype, []).append(buf)
        finally:
            _fp_restore(token)
        for slot, out in zip(self.outputs, outs):
            if values[slot] is not out:
                np.copyto(out, values[slot], casting="unsafe")
        return outs
