"""Random ops: RandomUniform(Like), RandomNormal(Like), Bernoulli.

Samples come from ember's generator (``ember.manual_seed``); a node's ``seed`` attribute
instead seeds a NumPy generator of its own, so such a node draws the same values on every run.
Neither reproduces another runtime's stream (ONNX's reference draws from NumPy's legacy
global generator), so only the distribution can be compared."""
import numpy as np

import ember
from ember.onnx.importer import storage_types as st
from ember.onnx.importer._util import alloc_shape
from ember.onnx.importer.registry import importer


def _dtype(a, like=None):
    if a.get("dtype"):
        return st.ember_dtype_of(a["dtype"])
    return like.dtype if like is not None else ember.float32


def _check_dtype(a, n):
    d = a.get("dtype")
    if d and (not st.storable(d) or not st.ember_dtype_of(d).is_floating_point and
              n.op_type != "Bernoulli"):
        from ember.onnx.importer.load import dtype_name
        return ("dtype", f"= {dtype_name(d)} is not a floating-point type ember has")
    return None


def _uniform(a, shape):
    shape = alloc_shape(shape, np.float64, "output")
    if a.get("seed") is not None:
        return ember.tensor(np.random.default_rng(int(a["seed"])).random(shape))
    return ember.rand(*shape, dtype=ember.float64)


def _normal(a, shape):
    shape = alloc_shape(shape, np.float64, "output")
    if a.get("seed") is not None:
        return ember.tensor(np.random.default_rng(int(a["seed"])).standard_normal(shape))
    return ember.randn(*shape, dtype=ember.float64)


_U = {"dtype": 0, "high": 1.0, "low": 0.0, "seed": None}
_N = {"dtype": 0, "mean": 0.0, "scale": 1.0, "seed": None}


@importer("RandomUniformLike", since=1, attrs=_U, check=_check_dtype)
def random_uniform_like(a, x):
    u = _uniform(a, tuple(x.shape))
    return (u * (a["high"] - a["low"]) + a["low"]).to(_dtype(a, x))


@importer("RandomUniform", since=1, attrs=dict(_U, dtype=1, shape=None), check=_check_dtype)
def random_uniform(a):
    u = _uniform(a, tuple(a["shape"] or ()))
    return (u * (a["high"] - a["low"]) + a["low"]).to(_dtype(a))


@importer("RandomNormalLike", since=1, attrs=_N, check=_check_dtype)
def random_normal_like(a, x):
    return (_normal(a, tuple(x.shape)) * a["scale"] + a["mean"]).to(_dtype(a, x))


@importer("RandomNormal", since=1, attrs=dict(_N, dtype=1, shape=None), check=_check_dtype)
def random_normal(a):
    return (_normal(a, tuple(a["shape"] or ())) * a["scale"] + a["mean"]).to(_dtype(a))


@importer("Bernoulli", since=15, attrs={"dtype": 0, "seed": None}, check=_check_dtype)
def bernoulli(a, p):
    """1 with probability ``p`` (elementwise), else 0, in ``dtype`` (default p's)."""
    u = _uniform(a, tuple(p.shape))
    return (u < p.to(ember.float64)).to(_dtype(a, p))
