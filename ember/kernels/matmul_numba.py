"""Numba kernels of matrix products split over Numba's TBB threads, each part one call of
NumPy's own OpenBLAS (``cblas_?gemm``, the call NumPy's ``matmul`` makes for a matrix):
``gemm_stack`` takes the matrices of a stack (the same bits as NumPy's loop), ``gemm_split``
one product's output rows or columns.

NumPy's ``matmul`` of stacked small matrices (attention's q k^T and p v: (16, 4, 64, 32) @
(16, 4, 32, 64), 131k multiply-adds each) runs them one after the other on one core, as OpenBLAS
runs a product that small on one thread; here the two cores each take part of the stack. The
BLAS function's address is an argument (``call_gemm`` calls it through a pointer of the C
signature its argument types make), so the kernel caches on disk like every other and a call
costs what an array argument does (a first-class function argument cost ~35 us of typing each
call).

``gemm_split`` serves the convolution engine's chunked GEMMs (``conv.parallel.matmul``: BLAS
held at one thread): one part per thread, claimed by TBB's workers within microseconds, where
ember's Python pool woke its worker in ~50-100 us and ran four narrower parts per thread.

Imported lazily (never by ``import ember``) by ``ember.kernels.linalg``.
"""
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

__all__ = ["call_gemm", "gemm_split", "gemm_stack"]

_ROW_MAJOR = 101
_NO_TRANS = 111


@intrinsic
def call_gemm(typingctx, address, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """Call the C function at ``address`` (int64) as ``void f(order, ta, tb, m, n, k, alpha, a,
    lda, b, ldb, beta, c, ldc)`` with the arguments' own C types (int32 codes, the library's
    integer width for sizes, the dtype's float for alpha and beta, int64 addresses: x86-64 and
    AArch64 pass those as pointers)."""
    sig = types.void(address, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.VoidType(),
                               [context.get_value_type(t) for t in signature.args[1:]])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        builder.call(fn, args[1:])
        return context.get_dummy_value()
    return sig, codegen


@njit(parallel=True, nogil=True, cache=True)
def gemm_stack(fn, pa, pb, pc, strides, dims, ab, parts):
    """c[p] = op(a[p]) @ op(b[p]) for the matrices of a stack by the ``cblas_?gemm`` at address
    ``fn``, ``parts`` runs of consecutive matrices on the TBB threads. ``pa``/``pb``/``pc`` are
    the addresses of matrix 0 of a, b and c (c C-contiguous); ``strides`` = (batch shape,
    a's batch strides, b's, in bytes), so matrix p of a starts ``sum(i_d * sa[d])`` bytes after
    matrix 0 for its batch index (i_d); ``dims`` = (op(a), op(b) as CBLAS codes, M, N, K, lda,
    ldb) in the library's integer width; ``ab`` = (1, 0) in c's dtype (alpha and beta).
    Addresses, not arrays: one compiled variant per dtype, whatever the operands' layouts."""
    nd = strides.shape[0] // 3
    P = 1
    for d in range(nd):
        P *= strides[d]
    ta, tb = np.int32(dims[0]), np.int32(dims[1])
    M, N, K, lda, ldb = dims[2], dims[3], dims[4], dims[5], dims[6]
    one, zero = ab[0], ab[1]
    step = np.int64(M) * np.int64(N) * ab.itemsize
    per = (P + parts - 1) // parts
    for w in prange(parts):
        for p in range(w * per, min(P, (w + 1) * per)):
            oa = np.int64(0)
            ob = np.int64(0)
            r = p
            for d in range(nd - 1, -1, -1):
                i = r % strides[d]
                r //= strides[d]
                oa += i * strides[nd + d]
                ob += i * strides[2 * nd + d]
            call_gemm(fn, np.int32(_ROW_MAJOR), ta, tb, M, N, K, one, pa + oa, lda, pb + ob,
                      ldb, zero, pc + p * step, N)


@njit(parallel=True, nogil=True, cache=True)
def gemm_split(fn, pa, pb, pc, dims, ab, by_rows, parts):
    """c = op(a) @ op(b) by the ``cblas_?gemm`` at address ``fn``, its output rows
    (``by_rows``) or columns cut into ``parts`` blocks on the TBB threads, each block one call
    over the whole reduction. ``pa``/``pb``/``pc`` are the operands' addresses; ``dims`` = (op(a),
    op(b) as CBLAS codes, M, N, K, lda, ldb, ldc) in the library's integer width; ``ab`` = (alpha,
    beta) in c's dtype: (1, 0) writes the product, (1, 1) adds it to c."""
    ta, tb = np.int32(dims[0]), np.int32(dims[1])
    M, N, K, lda, ldb, ldc = dims[2], dims[3], dims[4], dims[5], dims[6], dims[7]
    alpha, beta = ab[0], ab[1]
    size = np.int64(ab.itemsize)
    total = np.int64(M if by_rows else N)
    count = np.empty(parts, dims.dtype)   # each block's size, in the library's integer width
    for w in prange(parts):
        lo = total * w // parts
        hi = total * (w + 1) // parts
        if lo >= hi:
            continue
        count[w] = hi - lo
        if by_rows:     # rows lo:hi of op(a), of c
            oa = lo * (np.int64(lda) if ta == _NO_TRANS else 1) * size
            call_gemm(fn, np.int32(_ROW_MAJOR), ta, tb, count[w], N, K, alpha, pa + oa, lda,
                      pb, ldb, beta, pc + lo * np.int64(ldc) * size, ldc)
        else:           # columns lo:hi of op(b), of c
            ob = lo * (1 if tb == _NO_TRANS else np.int64(ldb)) * size
            call_gemm(fn, np.int32(_ROW_MAJOR), ta, tb, M, count[w], K, alpha, pa, lda,
                      pb + ob, ldb, beta, pc + lo * size, ldc)
