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
# linalg
slogdet = namedtuple("slogdet", ["sign", "logabsdet"])
linalg_slogdet = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
qr = namedtuple("qr", ["Q", "R"])
linalg_qr = namedtuple("linalg_qr", ["Q", "R"])
svd = namedtuple("svd", ["U", "S", "V"])
linalg_svd = namedtuple("linalg_svd", ["U", "S", "Vh"])
linalg_eigh = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
linalg_eig = namedtuple("linalg_eig", ["eigenvalues", "eigenvectors"])
linalg_lstsq = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
linalg_lu_factor = namedtuple("linalg_lu_factor", ["LU", "pivots"])
linalg_lu_factor_ex = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
linalg_lu = namedtuple("linalg_lu", ["P", "L", "U"])
lu_unpack = namedtuple("lu_unpack", ["P", "L", "U"])
linalg_inv_ex = namedtuple("linalg_inv_ex", ["inverse", "info"])
linalg_solve_ex = namedtuple("linalg_solve_ex", ["result", "info"])
linalg_cholesky_ex = namedtuple("linalg_cholesky_ex", ["L", "info"])
triangular_solve = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
geqrf = namedtuple("geqrf", ["a", "tau"])
linalg_ldl_factor = namedtuple("linalg_ldl_factor", ["LD", "pivots"])
linalg_ldl_factor_ex = namedtuple("linalg_ldl_factor_ex", ["LD", "pivots", "info"])
_LINALG = (linalg_eig, linalg_ldl_factor, linalg_ldl_factor_ex, geqrf, triangular_solve, linalg_inv_ex, linalg_solve_ex, linalg_cholesky_ex, slogdet, linalg_slogdet, qr, linalg_qr, svd, linalg_svd, linalg_eigh, linalg_lstsq,
           linalg_lu_factor, linalg_lu_factor_ex, linalg_lu, lu_unpack)

for _t in (sort, topk, kthvalue, median, nanmedian, mode, cummax, cummin, aminmax) + _LINALG:
    _t.__module__ = "ember.return_types"
del _t
# special functions
frexp = namedtuple("frexp", ["mantissa", "exponent"])
frexp.__module__ = "ember.return_types"
