"""The public ``ember`` namespace and Tensor's methods, built once at import (``build``): the one
place a function enters ``ember`` or a method enters ``Tensor``.

Sources, in the order they are installed (a later one replaces an earlier one of the same name):
the entry points of the op families (``ember.ops.<family>``), the generated spec ops
(``ember.autograd._generated``: functions, ``TENSOR_METHODS``, operators), torch's aliases, and
``out=`` (``ember.autograd.out``). Then every hand-written public function and method is wrapped
by ``ember.errors.public``, so that what it raises is an ember error naming it; a spec op's
generated entry is not (dispatch names its errors)."""
from ember import _dtype
from ember.autograd._generated import functions as G
from ember.autograd._generated import methods as _methods
from ember.autograd import out as _out
from ember.autograd import grad_mode
from ember.autograd.dispatch import named_by_dispatch
from ember.errors import EmberTypeError, needs_public, public
from ember.ops import (creation, indexing, linalg, nn, pointwise, reduction, shape, sorting,
                       spectral, tensor_types)

# ember.<name>: the hand-written entry points of each family
FUNCTIONS = {
    creation: ("arange", "as_tensor", "bernoulli", "empty", "empty_like", "eye", "from_dlpack",
               "from_numpy", "full", "full_like", "linspace", "multinomial", "normal", "ones",
               "poisson", "binomial",
               "ones_like", "rand", "rand_like", "randint", "randn", "randn_like", "randperm",
               "tensor", "zeros", "zeros_like", "logspace", "empty_strided", "empty_permuted",
               "scalar_tensor", "randint_like", "zero_", "asarray", "frombuffer"),
    pointwise: ("clip", "allclose", "equal", "frexp"),
    reduction: ("max", "min", "norm", "std", "var", "histogram", "histogramdd", "gradient"),
    tensor_types: ("is_complex", "is_floating_point", "is_tensor", "numel", "can_cast",
                   "promote_types", "result_type"),
    shape: ("broadcast_shapes", "clone", "resize_as_", "concat", "concatenate", "swapaxes",
            "swapdims",
            "row_stack", "adjoint", "select_copy", "slice_copy", "split_copy", "detach_copy",
            "view_as_real_copy", "view_as_complex_copy"),
    indexing: ("index_put", "nonzero", "tril_indices", "triu_indices", "unravel_index", "where"),
    nn: ("dropout", "grid_sampler_2d", "grid_sampler_3d", "cosine_similarity", "lstm_cell",
         "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"),
    sorting: ("aminmax", "cummax", "cummin", "kthvalue", "median", "mode", "nanmedian", "sort",
              "std_mean", "topk", "unique", "unique_consecutive", "var_mean"),
    spectral: ("bartlett_window", "blackman_window", "hamming_window", "hann_window", "istft",
               "kaiser_window", "stft"),
    linalg: ("svd_lowrank", "pca_lowrank", "vander", "chain_matmul", "frobenius_norm",
             "nuclear_norm", "ger", "einsum"),
    grad_mode: ("is_anomaly_enabled", "is_anomaly_check_nan_enabled", "set_anomaly_enabled"),
}
# ember.<name> of a function with another name (its errors name <name>)
RENAMED = {"native_batch_norm": nn.native_batch_norm_outputs,
           **{n: shape.atleast(n) for n in ("atleast_1d", "atleast_2d", "atleast_3d")},
           **{n: linalg._removed(n) for n in linalg._REMOVED}, "range": creation._range}
# ember.<name> loaded on first use from ember.nn.toplevel (ember.__getattr__): torch's top-level
# forms of nn functions and losses (torch.conv2d, torch.batch_norm, torch.kl_div, ...), which
# call ember.nn.functional (above ops, so not imported by import ember)
NN_TOPLEVEL = (
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm",
    "embedding", "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices",
    "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "channel_shuffle",
    "native_channel_shuffle", "pairwise_distance", "pdist", "prelu", "rrelu", "rrelu_", "celu",
    "celu_", "selu_", "threshold", "threshold_", "bilinear", "dropout_",
    "alpha_dropout", "alpha_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_",
    "feature_dropout", "feature_dropout_", "kl_div", "binary_cross_entropy_with_logits",
    "ctc_loss", "margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss",
    "triplet_margin_loss", "poisson_nll_loss", "conv_tbc")
# ember.<name> that is the spec op's generated function (its signature is torch's top-level one)
SPEC_FUNCTIONS = nn.SPEC_TOPLEVEL
# ember.<name> that is another ember function (torch's other names)
TOPLEVEL_ALIASES = {"unsafe_split_with_sizes": "split_with_sizes",
                    "orgqr": "linalg_householder_product"}
# ember.<name>(input, ...) that is input.<name>(...): torch's top-level in-place variants and
# tensor queries, each the Tensor method of the same name
METHOD_FUNCTIONS = (
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_",
    "arctan_", "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_",
    "clamp_max_", "clamp_min_", "clip_", "conj_physical_", "cos_", "cosh_", "deg2rad_", "erf_",
    "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "gcd_", "i0_",
    "index_put_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_",
    "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_", "relu_", "round_", "rsqrt_",
    "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_",
    "xlogy_", "detach", "detach_", "is_conj", "is_neg", "is_nonzero", "is_same_size",
    "is_signed", "is_distributed", "get_device")

# Tensor.<name>: methods that are not one spec op's generated method
METHODS = {
    "to": tensor_types._to, "float": tensor_types._cast(_dtype.float32),
    "double": tensor_types._cast(_dtype.float64), "half": tensor_types._cast(_dtype.float16),
    "long": tensor_types._cast(_dtype.int64), "int": tensor_types._cast(_dtype.int32),
    "short": tensor_types._cast(_dtype.int16), "bool": tensor_types._cast(_dtype.bool_),
    "byte": tensor_types._cast(_dtype.uint8), "char": tensor_types._cast(_dtype.int8),
    "bfloat16": tensor_types._bfloat16, "cfloat": tensor_types._cast(_dtype.complex64),
    "cdouble": tensor_types._cast(_dtype.complex128), "is_conj": tensor_types._is_conj,
    "type": tensor_types._type, "type_as": tensor_types._type_as, "cpu": tensor_types._cpu,
    "cuda": tensor_types._cuda, "get_device": tensor_types._get_device, "to_sparse": tensor_types._to_sparse,
    "zero_": creation._zero_, "fill_": creation._fill_, "uniform_": creation._uniform_,
    "normal_": creation._normal_, "bernoulli_": creation._bernoulli_,
    "new_zeros": creation._new("zeros"), "new_ones": creation._new("ones"),
    "new_empty": creation._new("empty"), "new_full": creation._new_full,
    "new_tensor": creation._new_tensor,
    "max": reduction._max_method, "min": reduction._min_method, "norm": reduction.norm,
    "var": reduction.var, "std": reduction.std, "clip": pointwise.clip, "clip_": G.clamp_,
    "softmax": nn._softmax_method, "log_softmax": nn._log_softmax_method, "copy_": G.copy_,
    "allclose": pointwise._allclose, "equal": pointwise._equal, "split": G.split,
    "index_put_": indexing._index_put_, "index_put": indexing.index_put,
    "masked_fill": G.masked_fill, "relu": G.relu, "relu_": G.relu_, "nonzero": indexing.nonzero,
    "absolute": G.abs, "arctan2": G.atan2, "greater": G.gt, "less": G.lt, "eq": G.eq,
    "multiply": G.mul, "divide": G.div, "subtract": G.sub, "view": shape._view,
    "multinomial": creation._multinomial_method, "polygamma": pointwise._polygamma_method,
    "__rdiv__": pointwise._rdiv, "clamp_min_": pointwise._clamp_min_,
    "clamp_max_": pointwise._clamp_max_, "floor_divide_": pointwise._ifloordiv,
    "__rfloordiv__": pointwise._rfloordiv, "__ifloordiv__": pointwise._ifloordiv,
    "__rmod__": pointwise._rmod, "__imod__": pointwise._imod, "put_": indexing._put_,
    "storage_offset": shape.storage_offset, "adjoint": shape.adjoint,
    "swapaxes": shape.swapaxes, "swapdims": shape.swapdims, "clone": shape.clone,
    "contiguous": shape._contiguous, "new": creation._new_legacy, "random_": creation._random_,
    "fill_diagonal_": indexing._fill_diagonal_, "ger": linalg.ger, "narrow_copy": G.narrow_copy,
    "dim_order": shape._dim_order, "apply_": shape._apply_, "map_": shape._map_,
    "flip": shape._flip_method, "tile": shape._tile_method, "where": indexing._where_method,
}
# raise only ember's errors already (they need no ember.errors.public wrapper; hot)
NOT_WRAPPED = {"view"}
PROPERTIES = {"T": shape._T, "mT": shape._mT, "mH": shape._mH, "H": shape._H,
              "nbytes": shape._nbytes, "itemsize": shape._itemsize}

# torch's other names of spec ops (torch.arcsin is torch.asin): function, method and in-place
# method, each where not defined already
ALIASES = {
    "absolute": "abs", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin", "arcsinh": "asinh",
    "arctan": "atan", "arctan2": "atan2", "arctanh": "atanh", "divide": "div", "multiply": "mul",
    "negative": "neg", "subtract": "sub", "greater": "gt", "greater_equal": "ge", "less": "lt",
    "less_equal": "le", "not_equal": "ne",
}
# x.<name>_(...) for ops whose spec declares no in-place variant (the result written into x)
INPLACE_COMPOSITES = ("square", "fix", "sgn", "true_divide", "float_power", "ldexp", "mvlgamma",
                      "polygamma", "addcmul", "addcdiv", "addmm", "cumsum", "cumprod", "tril",
                      "triu", "renorm", "index_reduce")
# methods of the sorting family's entry points (named results)
SORTING_METHODS = ("sort", "topk", "kthvalue", "median", "nanmedian", "mode", "cummax",
                   "cummin", "aminmax", "unique", "unique_consecutive")
# methods written after the families' tables, wrapped as they are installed
LATE_METHODS = {
    "cauchy_": creation._fill("cauchy_", ("median", 0.0), ("sigma", 1.0)),
    "exponential_": creation._fill("exponential_", ("lambd", 1.0)),
    "geometric_": creation._fill("geometric_", ("p", None)),
    "log_normal_": creation._fill("log_normal_", ("mean", 1.0), ("std", 2.0)),
    "new_empty_strided": creation._new_empty_strided, "resize_": shape._resize_,
    "resize_as_": shape._resize_as_, "squeeze_": shape.squeeze_, "unsqueeze_": shape.unsqueeze_,
    "t_": shape.t_, "transpose_": shape.transpose_, "swapaxes_": shape.swapaxes_,
    "swapdims_": shape.swapdims_, "as_strided_": shape.as_strided_,
}
# spec ops whose ember.<name> is the family's entry point, not the generated function
ENTRY_POINTS_OVER_SPEC_OPS = ("var", "std", "norm", "nonzero", "index_put", "where", "clone",
                              "einsum")


def _install_aliases(namespace, tensor_cls):
    for alias, target in ALIASES.items():
        if alias not in namespace:
            namespace[alias] = public(getattr(G, target), alias)
        if not hasattr(tensor_cls, alias) and hasattr(tensor_cls, target):
            setattr(tensor_cls, alias, getattr(tensor_cls, target))
        if not hasattr(tensor_cls, alias + "_") and hasattr(tensor_cls, target + "_"):
            setattr(tensor_cls, alias + "_", getattr(tensor_cls, target + "_"))
    for name in INPLACE_COMPOSITES:
        if not hasattr(tensor_cls, name + "_"):
            fn = (lambda self, n: G.polygamma(n, self)) if name == "polygamma" else getattr(G, name)
            setattr(tensor_cls, name + "_", pointwise._inplace(name, fn))


def _method_function(name, tensor_cls):
    """``ember.<name>(input, *args, **kwargs)``: ``input.<name>(*args, **kwargs)``."""
    def fn(input, *args, **kwargs):
        if not isinstance(input, tensor_cls):
            raise EmberTypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                                 f"{type(input).__name__}")
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``input.{name}(...)`` (torch.{name})."
    return fn


def _wrap_public(namespace, tensor_cls):
    """Wrap every hand-written public function and Tensor method (``ember.errors.public``)."""
    for name, fn in list(namespace.items()):
        if name[0] != "_" and needs_public(fn) and not named_by_dispatch(name, fn):
            namespace[name] = public(fn)
    for name, fn in list(vars(tensor_cls).items()):
        if (name[0] != "_" or name[:2] == "__" == name[-2:]) and needs_public(fn) \
                and fn.__module__ != tensor_cls.__module__ and not named_by_dispatch(name, fn) \
                and name not in NOT_WRAPPED:
            setattr(tensor_cls, name, public(fn, name))


def build(namespace, tensor_cls):
    """Put ember's public functions into ``namespace`` (``ember``'s globals) and Tensor's methods,
    properties and operators on ``tensor_cls``; then wrap the hand-written ones (and whatever
    ``namespace`` already holds) by ``ember.errors.public``."""
    namespace.update(tensor_types.LEGACY)   # FloatTensor, LongTensor, ... (torch legacy types)
    for family, names in FUNCTIONS.items():
        namespace.update({name: getattr(family, name) for name in names})
    namespace.update({name: public(fn, name) for name, fn in RENAMED.items()})
    namespace.update({name: _method_function(name, tensor_cls) for name in METHOD_FUNCTIONS})
    for name, fn in _methods.TENSOR_METHODS.items():
        setattr(tensor_cls, name, fn)
    for name, fn in METHODS.items():
        setattr(tensor_cls, name, fn)
    for name, fn in PROPERTIES.items():
        setattr(tensor_cls, name, property(fn))
    tensor_cls.stft, tensor_cls.istft = spectral.stft, spectral.istft
    _install_aliases(namespace, tensor_cls)
    tensor_cls.frexp = pointwise.frexp
    tensor_cls.__invert__ = pointwise.invert
    for name in SORTING_METHODS:
        setattr(tensor_cls, name, getattr(sorting, name))
    for name, fn in linalg.TOPLEVEL.items():   # torch.slogdet, torch.qr, torch.svd, ...
        namespace[name] = fn
        if name != "lu_unpack":   # torch has no Tensor.lu_unpack
            setattr(tensor_cls, name, fn)
    for name in ("addmv", "addr", "baddbmm", "addbmm"):
        setattr(tensor_cls, name + "_", linalg._inplace(name))
    for name, fn in LATE_METHODS.items():
        setattr(tensor_cls, name, public(fn, name))
    tensor_cls.real = property(G.real, pointwise._set_part(G.real), doc=(
        "The real part (a view; the tensor itself for real dtypes), as torch's ``Tensor.real``; "
        "assigning to it writes into the tensor."))
    tensor_cls.imag = property(G.imag, pointwise._set_part(G.imag), doc=(
        "The imaginary part of a complex tensor (a view), as torch's ``Tensor.imag``; assigning "
        "to it writes into the tensor. Raises for real dtypes."))
    if "histogram" not in dir(tensor_cls):
        tensor_cls.histogram = public(reduction.histogram)
    for name in G.EMBER_FUNCTIONS:
        if name not in ENTRY_POINTS_OVER_SPEC_OPS:
            namespace[name] = getattr(G, name)
    for name in SPEC_FUNCTIONS:
        namespace[name] = getattr(G, name)
    for name, target in TOPLEVEL_ALIASES.items():
        namespace[name] = public(getattr(G, target), name)
    _out.install(namespace)   # out= (torch's semantics)
    _wrap_public(namespace, tensor_cls)
