"""Named result tuples, as ``torch.return_types``: each unpacks like a tuple and names its fields
(``values, indices = ember.sort(x)``; ``ember.sort(x).values``)."""
from collections import namedtuple

sort = namedtuple("sort", ["values", "indices"])
topk = namedtuple("topk", ["values", "indices"])
kthvalue = namedtuple("kthvalue", ["values", "indices"])
median = namedtuple("median", ["values", "indices"])
nanmedian = namedtuple("nanmedian", ["values", "indices"])
mode = namedtuple("mode", ["values", "indices"])
cummax = namedtuple("cummax", ["values", "indices"])
cummin = namedtuple("cummin", ["values", "indices"])
aminmax = namedtuple("aminmax", ["min", "max"])

for _t in (sort, topk, kthvalue, median, nanmedian, mode, cummax, cummin, aminmax):
    _t.__module__ = "ember.return_types"
del _t
