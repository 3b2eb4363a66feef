"""Fused optimizer updates (Adam, SGD with momentum) on the pointwise engine (``ember.kernels.pointwise``).

One compiled pass over parameter, gradient and state, in place and on all threads, instead of
NumPy's ~10 passes with temporaries. Used from ``MIN_SIZE`` elements when Numba is importable;
smaller tensors keep the NumPy path (the kernel call overhead would dominate). Measured on a
2-core machine (benchmarks/pointwise.py): Adam on 1e6 float32 elements 2.4 ms -> 0.54 ms, on 1e7
90 ms -> 12 ms; on 1e4 NumPy is faster (0.03 vs 0.08 ms), hence the threshold. (Single eager
ops use the engine only where it splits them over threads: ``elementwise._threaded``.)
"""
import numpy as np

from ember.optim._updates import adam_update, sgd_momentum_update

MIN_SIZE = 1 << 16

# the compiled passes' inputs: the update functions' arguments (their math: ember.optim._updates)
_ADAM_INPUTS = ("x", "g", "m", "v", "one_m_b1", "b2", "one_m_b2", "bc2_sqrt", "eps", "step_size")
_SGD_INPUTS = ("x", "g", "buf", "momentum", "one_m_dampening", "lr")


def usable(*arrays):
    """True when the fused update applies: large float arrays of one dtype, Numba installed
    (not imported here: see ``adam_``)."""
    from ember.kernels.runtime import compiler
    x = arrays[0]
    return (x.size >= MIN_SIZE and x.dtype.kind == "f" and x.dtype != np.float16
            and all(a.dtype == x.dtype and a.shape == x.shape for a in arrays)
            and compiler.available())


def adam_(x, g, m, v, b1, b2, bc2_sqrt, eps, step_size):
    """In place: m, v and x updated as ember's Adam step (no amsgrad). Tiered like every
    pointwise kernel (``EMBER_JIT_COMPILE``): until the kernel is built (or Numba imported) on
    the compile thread, the same expression runs on NumPy."""
    from ember.kernels.pointwise import compile_form
    k = compile_form(adam_update, _ADAM_INPUTS, (x, x, x, x) + (float,) * 6)
    k(x, g, m, v, 1.0 - b1, b2, 1.0 - b2, bc2_sqrt, eps, step_size, out=(x, m, v))


def sgd_momentum_(x, g, buf, momentum, dampening, lr):
    """In place: buf and x updated as ember's SGD step with momentum (not Nesterov), in one
    pass; tiered as ``adam_``."""
    from ember.kernels.pointwise import compile_form
    k = compile_form(sgd_momentum_update, _SGD_INPUTS, (x, x, x) + (float,) * 3)
    k(x, g, buf, momentum, 1.0 - dampening, lr, out=(x, buf))


class FlatState:
    """One optimizer group's state buffers of one dtype as flat arrays (``buffers``: name ->
    1-d array), each parameter's state Tensor a view of its span, so a multi-tensor step reads
    and writes them without a gather. ``current`` tells whether the state arrays are still these
    views (``load_state_dict`` or a captured step may have replaced them)."""

    def __init__(self, params, states, names, dtype):
        # a complex parameter's state (complex, as torch keeps it) spans its real view's size
        sizes = [st[names[0]]._data.size * (2 if st[names[0]]._data.dtype.kind == "c" else 1)
                 for st in states]
        self.offsets = np.concatenate(([0], np.cumsum(sizes))).tolist()
        total = self.offsets[-1]
        self.buffers = {k: np.empty(total, dtype) for k in names}
        self.params = list(params)
        self.views = []
        for p, st, lo, hi in zip(params, states, self.offsets, self.offsets[1:]):
            row = {}
            for k, buf in self.buffers.items():   # the same Tensors, their arrays now views
                old = st[k]._data
                span = buf[lo:hi].view(old.dtype) if old.dtype.kind == "c" else buf[lo:hi]
                view = row[k] = span.reshape(old.shape)
                view[...] = old
                st[k]._data = view
            self.views.append(row)

    def current(self, params, states):
        """True when ``params`` are this state's parameters, in order, and their state arrays
        are still its views."""
        if len(params) != len(self.params):
            return False
        for p, q, st, row in zip(params, self.params, states, self.views):
            if p is not q:
                return False
            for k, a in row.items():
                if st[k]._data is not a:
                    return False
        return True


# A multi-tensor step updates a parameter of this many elements alone, in its own memory
# (``runs``): gathering and scattering it cost more than a kernel call of its own. The MLP
# 784-512-512-10's Adam step (two such weights) 3.80 -> 3.40 ms; AdamW over the GPT
# benchmark's parameters (none this large; at MIN_SIZE its eight 65536-element weights alone:
# 1.36 -> 1.51 ms) unchanged.
ALONE_MIN_SIZE = 1 << 18


def runs(params, grads):
    """Spans (j0, j1) of the parameter list a multi-tensor step updates one at a time: a
    parameter of ALONE_MIN_SIZE elements or more, C-contiguous with its gradient, alone (read
    and written in its own memory), and each run of the others between them together
    (gathered: one pass instead of a kernel call each)."""
    out, start = [], 0
    for j, (x, g) in enumerate(zip(params, grads)):
        if x.size >= ALONE_MIN_SIZE and x.flags.c_contiguous and g.flags.c_contiguous:
            if start < j:
                out.append((start, j))
            out.append((j, j + 1))
            start = j + 1
    if start < len(params):
        out.append((start, len(params)))
    return out


def gather(arrays, total, dtype, copy=True):
    """The arrays' elements, flattened and concatenated, in a new ``dtype`` array of ``total``;
    with ``copy=False``, one C-contiguous array of ``dtype`` is returned as a flat view instead
    (a one-parameter step reads and writes it in place: no 2 x n-element copy)."""
    if not copy and len(arrays) == 1 and arrays[0].dtype == dtype and arrays[0].flags.c_contiguous:
        return arrays[0].reshape(-1)
    out = np.empty(total, dtype)
    lo = 0
    for a in arrays:
        hi = lo + a.size
        out[lo:hi].reshape(a.shape)[...] = a
        lo = hi
    return out


def scatter(flat, arrays, offsets):
    """Write the spans of ``flat`` back into ``arrays`` (in place; an array that ``flat`` is a
    view of, from ``gather(copy=False)``, is already written)."""
    for a, lo, hi in zip(arrays, offsets, offsets[1:]):
        if not np.may_share_memory(a, flat):
            a[...] = flat[lo:hi].reshape(a.shape)
