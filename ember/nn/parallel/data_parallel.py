"""``nn.parallel.DataParallel`` on ember's one CPU device, as torch's on a machine without CUDA:
a wrapper whose forward calls the module (``.module``), so state-dict keys gain the
``module.`` prefix torch checkpoints written through DataParallel carry."""
from ember.nn.modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


class DataParallel(Module):
    """Wrap ``module``; ``forward`` runs it on the CPU. As torch without CUDA, ``device_ids``
    and ``output_device`` are accepted and left unused (``device_ids`` becomes [])."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = []
        self.output_device = None
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """Functional DataParallel: ``module(*inputs, **module_kwargs)`` on the CPU."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))
