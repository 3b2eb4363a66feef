"""ndarray-only kernels: no Tensor, autograd or JIT in here."""
