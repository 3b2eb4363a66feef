"""Front ends of the sorting, selection and scan ops: torch's signatures and named
results (``ember.return_types``) over the spec ops, which return plain tuples; and ``msort``."""
from ember import return_types as R
from ember.autograd._generated import functions as G
from ember.errors import EmberTypeError, UnsupportedError
from ember.errors import public as _public


def _no_out(op, out):
    if out is not None:
        raise UnsupportedError(f"{op}: out= is not supported; use the returned tensors")


def sort(input, dim=-1, descending=False, *, stable=False, out=None):
    """Sorted values along ``dim`` and their indices; ties keep their order (always stable)."""
    _no_out("sort", out)
    return R.sort(*G.sort(input, dim, descending, stable=bool(stable)))


def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):
    """The ``k`` largest (``largest=False``: smallest) values along ``dim`` and their indices."""
    _no_out("topk", out)
    return R.topk(*G.topk(input, k, dim, largest, sorted))


def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    """The ``k``-th smallest value along ``dim`` and its index."""
    _no_out("kthvalue", out)
    return R.kthvalue(*G.kthvalue(input, k, dim, keepdim))


def median(input, dim=None, keepdim=False, *, out=None):
    """``median(x)``: the lower median of all elements (NaN if any is NaN); ``median(x, dim)``:
    (values, indices) along ``dim``."""
    _no_out("median", out)
    if dim is None:
        return G.median_all(input)
    return R.median(*G.median_dim(input, dim, keepdim))


def nanmedian(input, dim=None, keepdim=False, *, out=None):
    """``median`` ignoring NaNs (NaN only where every element is NaN)."""
    _no_out("nanmedian", out)
    if dim is None:
        return G.nanmedian_all(input)
    return R.nanmedian(*G.nanmedian_dim(input, dim, keepdim))


def mode(input, dim=-1, keepdim=False, *, out=None):
    """The most frequent value along ``dim`` (the smallest of equally frequent ones) and the
    index of its last occurrence."""
    _no_out("mode", out)
    return R.mode(*G.mode(input, dim, keepdim))


def cummax(input, dim, *, out=None):
    """Running maximum along ``dim`` and the index where each was reached."""
    _no_out("cummax", out)
    return R.cummax(*G.cummax(input, dim))


def cummin(input, dim, *, out=None):
    """Running minimum along ``dim`` and the index where each was reached."""
    _no_out("cummin", out)
    return R.cummin(*G.cummin(input, dim))


def _correction(op, dim, unbiased, correction):
    if isinstance(dim, bool) and unbiased is None:
        unbiased, dim = dim, None
    if correction is not None and unbiased is not None:
        raise EmberTypeError(f"{op}: cannot specify both unbiased and correction")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, correction


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """(variance, mean) over ``dim``; ``unbiased`` (legacy) or ``correction`` (default 1)."""
    _no_out("var_mean", out)
    dim, correction = _correction("var_mean", dim, unbiased, correction)
    return G.var_mean(input, dim, correction=correction, keepdim=keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """(standard deviation, mean) over ``dim``; ``unbiased`` or ``correction`` (default 1)."""
    _no_out("std_mean", out)
    dim, correction = _correction("std_mean", dim, unbiased, correction)
    return G.std_mean(input, dim, correction=correction, keepdim=keepdim)


def aminmax(input, *, dim=None, keepdim=False, out=None):
    """(min, max) over ``dim`` (all elements when None) as ``return_types.aminmax``."""
    _no_out("aminmax", out)
    return R.aminmax(*G.aminmax(input, dim=dim, keepdim=keepdim))


def _pick(out, return_inverse, return_counts):
    if not return_inverse and not return_counts:
        return out[0]
    return (out[0],) + ((out[1],) if return_inverse else ()) + ((out[2],) if return_counts else ())


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The sorted unique elements (``dim``: unique slices along ``dim``); with
    ``return_inverse`` / ``return_counts`` also each element's position in them and their
    counts, as a tuple."""
    return _pick(G.unique(input, sorted, return_inverse, return_counts, dim), return_inverse,
                 return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapse runs of equal consecutive elements (slices along ``dim``); ``return_inverse`` /
    ``return_counts`` as in ``unique``."""
    return _pick(G.unique_consecutive(input, return_inverse, return_counts, dim),
                 return_inverse, return_counts)


def msort(input):
    return G.sort(input, 0)[0]


# these raise ember's errors naming them (ember.errors.public)
for _n in ("sort", "topk", "kthvalue", "median", "nanmedian", "mode", "cummax", "cummin",
           "var_mean", "std_mean", "aminmax", "unique", "unique_consecutive"):
    globals()[_n] = _public(globals()[_n])
del _n
