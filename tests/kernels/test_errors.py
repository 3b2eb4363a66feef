"""KernelError: a ValueError (so callers catching argument errors catch it) that kernels raise
for bad arguments, and that keeps its message."""
import numpy as np
import pytest

from ember.kernels.errors import KernelError


def test_kernel_error_is_a_value_error_with_its_message():
    assert issubclass(KernelError, ValueError)
    with pytest.raises(ValueError, match="bad shape"):
        raise KernelError("bad shape")


def test_kernels_raise_it_for_bad_arguments():
    from ember.kernels import complex as K
    with pytest.raises(KernelError, match="non-complex dtypes"):
        K.imag(np.zeros(2))
