"""Autocast's cast rule (torch's CPU autocast, ``ember.amp``): while a region is active,
``STATE.autocast`` holds its lower-precision NumPy dtype (bfloat16 or float16), and an op of
torch's CPU lists gets its floating inputs cast before it runs, by a recorded ``to`` (so
gradients reach float32 parameters in float32):

* ``LOWER``: float32 inputs go to the region's dtype (matmul, linear, convolutions, ...);
* ``FP32``: lower-precision inputs go to float32 (losses, linear algebra, FFT, ...).

float64 inputs are never cast, as torch. Dispatch reads ``STATE.autocast`` once per op
(None when off), and ``autocast_entry`` applies the same rule to a public composite function
(one whose body dispatches several ops) and runs its body with autocast off, as torch runs an
autocast op with autocast excluded. The backward engine turns autocast off while it runs."""
import functools
import threading

import numpy as np

from ember._dtype import BFLOAT16
from ember.autograd.state import STATE

# torch 2.13's CPU lists (aten/src/ATen/autocast_mode.cpp), by ember's op and function names
LOWER = frozenset((
    "conv1d", "conv2d", "conv3d", "bmm", "mm", "linalg_vecdot", "vecdot", "baddbmm", "addmm",
    "addbmm", "linear", "_convolution", "convolution", "matmul", "conv_tbc", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "prelu", "scaled_dot_product_attention",
    "_native_multi_head_attention",
    "einsum",   # (torch's einsum of two or more operands runs bmm: see cast_inputs)
    "lstm_layer",   # torch's nn.LSTM layer on the CPU: mkldnn_rnn_layer
))
FP32 = frozenset((
    "avg_pool3d", "binary_cross_entropy", "grid_sampler", "grid_sample", "polar", "prod",
    "quantile", "nanquantile", "stft", "cdist", "trace", "view_as_complex", "cholesky",
    "cholesky_inverse", "cholesky_solve", "inverse", "lu_solve", "orgqr", "ormqr", "pinverse",
    "max_pool3d", "max_unpool2d", "max_unpool3d", "adaptive_avg_pool3d", "reflection_pad1d",
    "reflection_pad2d", "replication_pad1d", "replication_pad2d", "replication_pad3d",
    "mse_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss",
    "poisson_nll_loss", "smooth_l1_loss", "cross_entropy_loss", "cross_entropy", "l1_loss",
    "huber_loss", "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "ctc_loss", "kl_div", "multilabel_margin_loss",
    "binary_cross_entropy_with_logits", "fft_fft", "fft_ifft", "fft_fft2", "fft_ifft2",
    "fft_fftn", "fft_ifftn", "fft_rfft", "fft_irfft", "fft_rfft2", "fft_irfft2", "fft_rfftn",
    "fft_irfftn", "fft_hfft", "fft_ihfft", "fft_c2c", "fft_c2r", "fft_r2c", "linalg_cond",
    "linalg_matrix_rank", "linalg_solve", "linalg_cholesky", "linalg_svdvals",
    "linalg_eigvals", "linalg_eigvalsh", "linalg_inv", "linalg_householder_product",
    "linalg_tensorinv", "linalg_tensorsolve", "fake_quantize_per_tensor_affine", "geqrf",
    "_lu_with_info", "qr", "svd", "triangular_solve", "fractional_max_pool2d",
    "fractional_max_pool3d", "adaptive_max_pool3d", "multilabel_margin_loss_forward",
    "linalg_qr", "linalg_cholesky_ex", "linalg_svd", "linalg_eig", "linalg_eigh",
    "linalg_lstsq", "linalg_inv_ex",
))
_F32 = np.dtype(np.float32)
# per-thread cast cache of the active region: id(leaf) -> (leaf, target dtype, cast)
_TL = threading.local()


def _cache():
    c = getattr(_TL, "cache", None)
    if c is None:
        c = _TL.cache = {}
    return c


def _eligible(a, bf16):
    dt = a.dtype
    return (dt.kind == "f" and dt.itemsize < 8) or (bf16 is not None and dt == bf16)


def _cast(t, target, cache_on):
    from ember.autograd._generated import functions as G
    cls = getattr(t, "__class__", None)
    if cls in (list, tuple):
        return cls(_cast(x, target, cache_on) for x in t)
    data = getattr(t, "_data", None)
    if data is None or not isinstance(data, np.ndarray) or data.dtype == target or \
            not _eligible(data, BFLOAT16[0]):
        return t
    leaf = cache_on and t._requires_grad and t._grad_fn is None
    if leaf:
        hit = _cache().get(id(t))
        if hit is not None and hit[0] is t and hit[1] == target:
            return hit[2]
    out = G.to(t, target, False)
    if leaf:
        _cache()[id(t)] = (t, target, out)
    return out


def _target(name, lower):
    if name in LOWER:
        return lower
    if name in FP32:
        return _F32
    return None


def cast_inputs(op, tensors):
    """``tensors`` of ``op`` cast by the active region's rule (dispatch calls this only while
    ``STATE.autocast`` is set)."""
    lower = STATE.autocast
    target = _target(op.name, lower)
    if target is None or (op.name == "einsum" and len(tensors) < 2):
        return tensors
    STATE.autocast = None      # the casts themselves run without autocast
    try:
        return [_cast(t, target, STATE.autocast_cache) for t in tensors]
    finally:
        STATE.autocast = lower


def autocast_entry(fn, name=None):
    """``fn`` (a public composite function named ``name`` in torch's lists) with autocast's
    cast of its arguments and its body run with autocast off; one attribute read when off."""
    name = name or fn.__name__

    @functools.wraps(fn)
    def entry(*args, **kwargs):
        lower = STATE.autocast
        if lower is None:
            return fn(*args, **kwargs)
        target = _target(name, lower)
        STATE.autocast = None
        try:
            if target is not None:
                cache_on = STATE.autocast_cache
                args = [_cast(a, target, cache_on) for a in args]
                kwargs = {k: _cast(v, target, cache_on) for k, v in kwargs.items()}
            return fn(*args, **kwargs)
        finally:
            STATE.autocast = lower
    entry.__wrapped_autocast__ = fn
    return entry


def clear_cache():
    """Drop the cached casts of leaf tensors (done when the outermost region exits)."""
    _cache().clear()


_INSTALLED = [False]


def install():
    """Give the spec ops of the lists that are composites (their generated entry calls a Python
    function in an ``ember.autograd.*_composites`` module, not one dispatch: ``baddbmm``,
    ``addbmm``, ``linalg_vecdot``, ...) the public-entry rule of ``autocast_entry``. Run once,
    when the first autocast region is entered."""
    if _INSTALLED[0]:
        return
    from ember.autograd._generated import functions as G
    for mod in {v for k, v in vars(G).items() if k.startswith("_c_")}:
        for name in LOWER | FP32:
            fn = getattr(mod, name, None)
            if callable(fn) and not hasattr(fn, "__wrapped_autocast__"):
                setattr(mod, name, autocast_entry(fn, name))
    _INSTALLED[0] = True
