"""``ember.special``: torch.special's functions (the spec ops under torch's
``special_*`` names, and aliases of the top-level ops), with torch's gradients.

Functions NumPy lacks (erfinv, digamma, i0e, ndtri, zeta, ...) are computed by ``scipy.special``,
imported on their first call (scipy is in ember's ``fast`` extra)."""
from ember.autograd._generated import functions as _G
from ember.errors import public as _public

# torch.special name -> the spec op computing it
_OPS = {
    "erf": "erf", "erfc": "erfc", "erfinv": "erfinv", "erfcx": "special_erfcx",
    "expit": "sigmoid", "logit": "logit", "exp2": "exp2", "expm1": "expm1", "log1p": "log1p",
    "gammaln": "lgamma", "digamma": "digamma", "psi": "digamma", "polygamma": "polygamma",
    "multigammaln": "mvlgamma", "i0": "i0", "i0e": "special_i0e", "i1": "special_i1",
    "i1e": "special_i1e", "ndtr": "special_ndtr", "ndtri": "special_ndtri",
    "log_ndtr": "special_log_ndtr", "entr": "special_entr", "xlogy": "xlogy",
    "xlog1py": "special_xlog1py", "zeta": "special_zeta", "sinc": "sinc", "round": "round",
    "bessel_j0": "special_bessel_j0", "bessel_j1": "special_bessel_j1",
    "logsumexp": "logsumexp", "softmax": "softmax", "log_softmax": "log_softmax",
    "gammainc": "igamma", "gammaincc": "igammac",
}
_OPS.update({n: "special_" + n for n in (
    "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
    "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
    "spherical_bessel_j0", "airy_ai", "chebyshev_polynomial_t", "chebyshev_polynomial_u",
    "chebyshev_polynomial_v", "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p")})

for _name, _op in _OPS.items():
    globals()[_name] = _public(getattr(_G, _op), _name)
del _name, _op

__all__ = sorted(_OPS)
