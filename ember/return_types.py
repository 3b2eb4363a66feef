"""Named result tuples, as ``torch.return_types``: each unpacks like a tuple and names its fields
(``values, indices = ember.sort(x)``; ``ember.sort(x).values``), and prints as torch's do, one
field per line."""
from collections import namedtuple


def _result(name, fields):
    """A tuple class ``ember.return_types.<name>`` with named ``fields``."""
    def __repr__(self):
        items = ",\n".join(f"{field}={value!r}" for field, value in zip(self._fields, self))
        return f"ember.return_types.{name}(\n{items})"
    return type(name, (namedtuple(name, fields),),
                {"__slots__": (), "__repr__": __repr__, "__module__": __name__})


max = _result("max", ["values", "indices"])
min = _result("min", ["values", "indices"])
sort = _result("sort", ["values", "indices"])
topk = _result("topk", ["values", "indices"])
kthvalue = _result("kthvalue", ["values", "indices"])
median = _result("median", ["values", "indices"])
nanmedian = _result("nanmedian", ["values", "indices"])
mode = _result("mode", ["values", "indices"])
cummax = _result("cummax", ["values", "indices"])
cummin = _result("cummin", ["values", "indices"])
aminmax = _result("aminmax", ["min", "max"])
histogram = _result("histogram", ["hist", "bin_edges"])
histogramdd = _result("histogramdd", ["hist", "bin_edges"])
# linalg
slogdet = _result("slogdet", ["sign", "logabsdet"])
linalg_slogdet = _result("linalg_slogdet", ["sign", "logabsdet"])
qr = _result("qr", ["Q", "R"])
linalg_qr = _result("linalg_qr", ["Q", "R"])
svd = _result("svd", ["U", "S", "V"])
linalg_svd = _result("linalg_svd", ["U", "S", "Vh"])
linalg_eigh = _result("linalg_eigh", ["eigenvalues", "eigenvectors"])
linalg_eig = _result("linalg_eig", ["eigenvalues", "eigenvectors"])
linalg_lstsq = _result("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
linalg_lu_factor = _result("linalg_lu_factor", ["LU", "pivots"])
linalg_lu_factor_ex = _result("linalg_lu_factor_ex", ["LU", "pivots", "info"])
linalg_lu = _result("linalg_lu", ["P", "L", "U"])
lu_unpack = _result("lu_unpack", ["P", "L", "U"])
linalg_inv_ex = _result("linalg_inv_ex", ["inverse", "info"])
linalg_solve_ex = _result("linalg_solve_ex", ["result", "info"])
linalg_cholesky_ex = _result("linalg_cholesky_ex", ["L", "info"])
triangular_solve = _result("triangular_solve", ["solution", "cloned_coefficient"])
geqrf = _result("geqrf", ["a", "tau"])
linalg_ldl_factor = _result("linalg_ldl_factor", ["LD", "pivots"])
linalg_ldl_factor_ex = _result("linalg_ldl_factor_ex", ["LD", "pivots", "info"])
# special functions
frexp = _result("frexp", ["mantissa", "exponent"])
