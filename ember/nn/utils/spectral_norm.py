"""The legacy ``nn.utils.spectral_norm`` / ``remove_spectral_norm`` (parameter ``weight_orig``,
buffers ``weight_u``/``weight_v``; ``weight`` recomputed before every forward by a pre-hook, one
power iteration per training-mode call, v then u as torch's legacy version). New code:
``nn.utils.parametrizations.spectral_norm``."""
from ember.ops import creation
from ember.autograd._generated import functions as G
from ember.autograd.grad_mode import no_grad
from ember.errors import EmberValueError
from ember.nn.utils.parametrize import check_module, legacy_remove, legacy_target
from ember.nn import functional as F

__all__ = ["spectral_norm", "remove_spectral_norm"]


class SpectralNorm:
    """The forward pre-hook that sets ``module.<name>`` to ``<name>_orig / sigma``."""

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise EmberValueError(f"spectral_norm: n_power_iterations must be positive, got "
                                  f"{n_power_iterations}")
        self.name, self.dim, self.eps = name, dim, eps
        self.n_power_iterations = n_power_iterations

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = G.movedim(weight, [self.dim], [0])
        return G.reshape(weight, (weight.shape[0], -1))

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(G.mv(G.t(weight_mat), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(G.mv(weight_mat, v), dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()
        sigma = G.dot(u, G.mv(weight_mat, v))
        return G.div(weight, sigma)

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide ``module.<name>`` by its largest singular value, estimated by power iteration."""
    check_module(module, "spectral_norm")
    weight = legacy_target(module, SpectralNorm, name, "spectral_norm")
    if dim is None:
        from ember.nn.modules.conv import _ConvTransposeNd
        dim = 1 if isinstance(module, _ConvTransposeNd) else 0
    fn = SpectralNorm(name, n_power_iterations, dim, eps)
    with no_grad():
        h, w = fn.reshape_weight_to_matrix(weight).shape
        u = F.normalize(creation.randn(h, dtype=weight.dtype), dim=0, eps=eps)
        v = F.normalize(creation.randn(w, dtype=weight.dtype), dim=0, eps=eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name="weight"):
    """Make ``module.<name>`` a plain parameter again, holding its normalised value."""
    check_module(module, "remove_spectral_norm")

    def compute(hook):
        with no_grad():
            return hook.compute_weight(module, False)
    return legacy_remove(module, SpectralNorm, name, "spectral_norm", compute,
                         parameters=("_orig",), buffers=("_u", "_v"))
