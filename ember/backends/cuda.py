"""``ember.backends.cuda`` (torch.backends.cuda): ember is not built with CUDA; the flags torch
programs set (``matmul.allow_tf32``, ...) are kept and change nothing."""


class _Matmul:
    allow_tf32 = False
    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True


matmul = _Matmul()


def is_built():
    """False: ember is not built with CUDA."""
    return False
