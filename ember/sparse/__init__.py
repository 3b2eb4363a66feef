"""Sparse COO tensors (``torch.sparse``): ``ember.sparse_coo_tensor``, ``Tensor.to_sparse``,
and the sparse ops ``mm``, ``sum``, ``softmax``, ``log_softmax`` (docs/sparse.md).

Loads on first use (``import ember`` does not import it); loading registers the sparse
handlers of the spec ops (``sparse @ dense``, ``sparse * dense``, ...) with dispatch."""
from ember.autograd.dispatch import SPARSE_OPS as _SPARSE_OPS
from ember.errors import UnsupportedError
from ember.sparse.coo import (SparseTensor, check_sparse_tensor_invariants, sparse_coo,
                              sparse_coo_tensor, to_sparse)
from ember.sparse.ops import HANDLERS as _HANDLERS
from ember.sparse.ops import addmm, log_softmax, mm, softmax, sum  # noqa: A004

__all__ = ["SparseTensor", "check_sparse_tensor_invariants", "addmm", "log_softmax", "mm",
           "softmax", "sparse_coo", "sparse_coo_tensor", "sum", "to_sparse", "sparse_csr_tensor"]

_SPARSE_OPS.update(_HANDLERS)


def sparse_csr_tensor(*args, **kwargs):
    """UnsupportedError: ember's sparse layout is COO only (``ember.sparse_coo_tensor``)."""
    raise UnsupportedError("sparse_csr_tensor: the sparse CSR layout is not supported; ember has "
                           "sparse COO tensors only (ember.sparse_coo_tensor, Tensor.to_sparse())")
