"""Reductions: ReduceMean/Sum/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, ArgMax/ArgMin."""
import numpy as np

import ember
from ember.onnx.importer._util import ints, norm_axis
from ember.onnx.importer.registry import importer


def _amax(x, dims, keep):
    if x.dtype == ember.bool:
        return ember.amax(x.to(ember.uint8), dims, keep).to(ember.bool)
    return ember.amax(x, dims, keep)


def _amin(x, dims, keep):
    if x.dtype == ember.bool:
        return ember.amin(x.to(ember.uint8), dims, keep).to(ember.bool)
    return ember.amin(x, dims, keep)


def _prod(x, dims, keep):
    for d in sorted(dims, reverse=True):
        x = ember.prod(x, d, keepdim=keep)
    return x


_KINDS = {
    "ReduceSum": lambda x, d, k: ember.sum(x, d, k),
    "ReduceMean": lambda x, d, k: ember.mean(x, d, k),
    "ReduceMax": _amax,
    "ReduceMin": _amin,
    "ReduceProd": _prod,
    "ReduceL1": lambda x, d, k: ember.sum(ember.abs(x), d, k),
    "ReduceL2": lambda x, d, k: ember.sqrt(ember.sum(x * x, d, k)),
    "ReduceSumSquare": lambda x, d, k: ember.sum(x * x, d, k),
    "ReduceLogSum": lambda x, d, k: ember.log(ember.sum(x, d, k)),
    "ReduceLogSumExp": lambda x, d, k: ember.logsumexp(x, d, k),
}


def _reduce(fn, x, axes, keepdims, noop):
    if not axes:
        if noop:
            return x
        axes = list(range(x.dim()))
    dims = tuple(sorted({norm_axis(a, x.dim()) for a in axes}))
    if x.dim() == 0:
        return x
    if any(x.shape[d] == 0 for d in dims) and fn in (_amax, _amin):
        # ONNX: the max of an empty set is the dtype's lowest value (-inf), the min its highest
        big = fn is _amin
        if x.dtype == ember.bool:
            v = big
        elif x.dtype.is_floating_point:
            v = float("inf") if big else float("-inf")
        else:
            info = np.iinfo(x.dtype.numpy)
            v = int(info.max if big else info.min)
        shape = [1 if i in dims else n for i, n in enumerate(x.shape)] if keepdims else \
            [n for i, n in enumerate(x.shape) if i not in dims]
        return ember.full(shape, v, dtype=x.dtype)
    return fn(x, dims, bool(keepdims))


def _attr_version(fn):
    return lambda a, x: _reduce(fn, x, a["axes"], a["keepdims"], 0)


def _input_version(fn):
    return lambda a, x, axes=None: _reduce(fn, x, ints(axes), a["keepdims"],
                                           a["noop_with_empty_axes"])


for _op, _fn in _KINDS.items():
    importer(_op, since=1, attrs={"axes": None, "keepdims": 1})(_attr_version(_fn))
    importer(_op, since=13 if _op == "ReduceSum" else 18,
             attrs={"keepdims": 1, "noop_with_empty_axes": 0})(_input_version(_fn))


def _arg(fn):
    def run(a, x):
        ax = norm_axis(a["axis"], x.dim())
        if a["select_last_index"]:
            xf = ember.flip(x, [ax])
            i = fn(xf, dim=ax, keepdim=bool(a["keepdims"]))
            return (x.shape[ax] - 1) - i
        return fn(x, dim=ax, keepdim=bool(a["keepdims"]))
    return run


importer("ArgMax", since=1, attrs={"axis": 0, "keepdims": 1, "select_last_index": 0})(
    _arg(ember.argmax))
importer("ArgMin", since=1, attrs={"axis": 0, "keepdims": 1, "select_last_index": 0})(
    _arg(ember.argmin))
