"""torch.nn.utils.parametrizations: ``weight_norm`` and ``spectral_norm`` registered through
``parametrize`` (state_dict keys ``parametrizations.weight.original0/1`` and
``parametrizations.weight.original`` + ``...0._u/_v``, as torch)."""
from ember.ops import creation
from ember.autograd._generated import functions as G
from ember.autograd.grad_mode import no_grad
from ember.errors import EmberValueError
from ember.nn import functional as F
from ember.nn.modules.module import Module
from ember.nn.utils import parametrize
from ember.nn.utils.parametrize import check_module

__all__ = ["weight_norm", "spectral_norm"]


def norm_except_dim(v, pow=2, dim=0):
    """The ``pow``-norm of ``v`` over every dimension but ``dim`` (kept, the others size 1);
    over all of ``v`` when ``dim`` is -1 (torch.norm_except_dim)."""
    if dim == -1:
        return G.norm(v, pow, None, False)
    d = dim % v.dim()
    return G.norm(v, pow, tuple(i for i in range(v.dim()) if i != d), True)


def _weight_norm(v, g, dim=0):
    """``v * (g / ||v||)`` with the norm taken over every dimension but ``dim``."""
    return G.mul(v, G.div(g, norm_except_dim(v, 2, dim)))


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def _weight_norm_compat_hook(state_dict, prefix, local_metadata, strict, missing_keys,
                             unexpected_keys, error_msgs):
    """Load checkpoints of the legacy ``nn.utils.weight_norm`` (``weight_g``/``weight_v``)."""
    g_key, v_key = f"{prefix}weight_g", f"{prefix}weight_v"
    if g_key in state_dict and v_key in state_dict:
        state_dict[f"{prefix}parametrizations.weight.original0"] = state_dict.pop(g_key)
        state_dict[f"{prefix}parametrizations.weight.original1"] = state_dict.pop(v_key)


def weight_norm(module, name="weight", dim=0):
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (magnitude ``original0``, direction
    ``original1``), the norm over every dimension but ``dim`` (all of them when None)."""
    check_module(module, "weight_norm")
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    if name == "weight":
        module._register_load_state_dict_pre_hook(_weight_norm_compat_hook)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise EmberValueError(f"spectral_norm: dim must be in [-{ndim}, {ndim - 1}], got "
                                  f"{dim}")
        if n_power_iterations <= 0:
            raise EmberValueError(f"spectral_norm: n_power_iterations must be positive, got "
                                  f"{n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            w = self._reshape_weight_to_matrix(weight)
            h, wd = w.shape
            u = F.normalize(creation.randn(h, dtype=weight.dtype), dim=0, eps=self.eps)
            v = F.normalize(creation.randn(wd, dtype=weight.dtype), dim=0, eps=self.eps)
            self.register_buffer("_u", u)
            self.register_buffer("_v", v)
            self._power_method(w, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = G.movedim(weight, [self.dim], [0])
        return G.reshape(weight, (weight.shape[0], -1))

    def _power_method(self, weight_mat, n_power_iterations):
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(G.mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(G.mv(G.t(weight_mat), self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.dim() == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = G.dot(u, G.mv(weight_mat, v))
        return G.div(weight, sigma)

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide ``module.<name>`` by its largest singular value, estimated by power iteration
    (``n_power_iterations`` per training-mode access; ``dim`` 1 for transposed convolutions,
    else 0)."""
    check_module(module, "spectral_norm")
    weight = getattr(module, name, None)
    if weight is None or not hasattr(weight, "dim"):
        raise EmberValueError(f"spectral_norm: module {type(module).__name__} has no parameter "
                              f"or buffer named '{name}'")
    if dim is None:
        from ember.nn.modules.conv import _ConvTransposeNd
        dim = 1 if isinstance(module, _ConvTransposeNd) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
