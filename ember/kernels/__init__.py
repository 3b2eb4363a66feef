"""ndarray-only kernels: no Tensor, autograd or JIT in here. Engines (``conv/``, ``pointwise/``)
and family modules over one shared runtime (``runtime/``: Numba and compilation, threads, CPU
features, memory; docs/architecture.md)."""
