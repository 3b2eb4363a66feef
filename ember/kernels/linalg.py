"""Linear-algebra kernels on NumPy's BLAS."""
import numpy as np

from ember.kernels.dtypes import cpp_name, promote, scalar_name
from ember.kernels.errors import KernelError
from ember.kernels.runtime.threads import FREE, LIMITED, blas_mode

# GEMMs of fewer multiply-adds than SMALL_GEMM_MACS run on one BLAS thread: a second OpenBLAS
# thread gains little on them and, once woken, spins for ~0.1 s after its call, taking the core
# that the next convolution's TBB workers (or another process) need (LeNet's training step, 2
# cores, all BLAS on one thread: 3.62-3.96 ms against 4.10, and 72 ms while another process
# held a core). Up to BLAS_SERIAL_MACS OpenBLAS runs a GEMM on one thread by itself
# (SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD): no thread-count switch there, which costs
# two threadpoolctl calls (LeNet's batch-of-one inference: 130 -> 169 us with the switch)
SMALL_GEMM_MACS = 4e6
BLAS_SERIAL_MACS = 65536 * 4


def _threads_for(macs):
    """The BLAS mode of a GEMM of ``macs`` multiply-adds (see SMALL_GEMM_MACS)."""
    return LIMITED if BLAS_SERIAL_MACS < macs < SMALL_GEMM_MACS else FREE


def _inner_error(a, b):
    if a.ndim == 2 and b.ndim == 2:  # torch's words, which users search for
        return KernelError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]}"
                           f" and {b.shape[0]}x{b.shape[1]}): inner dimensions differ: "
                           f"{tuple(a.shape)} @ {tuple(b.shape)}")
    return KernelError(f"inner dimensions differ: {tuple(a.shape)} @ {tuple(b.shape)}")


def mm_dtype_error(a, b):
    """torch's error for a 2-D product of two dtypes (mm, matmul of matrices): products never
    promote in torch."""
    return KernelError(f"expected m1 and m2 to have the same dtype, but got: "
                       f"{cpp_name(a.dtype)} != {cpp_name(b.dtype)}")


def bmm_dtype_error(a, b):
    """torch's error for a batched product of two dtypes (bmm, batched matmul)."""
    return KernelError(f"expected scalar type {scalar_name(a.dtype)} but found "
                       f"{scalar_name(b.dtype)}")


def dot_dtype_error(a, b):
    """torch's error for a dot product of two dtypes (dot, vdot, 1-D @ 1-D)."""
    return KernelError(f"dot : expected both vectors to have same dtype, but found "
                       f"{scalar_name(a.dtype)} and {scalar_name(b.dtype)}")


def addmv_dtype_error(c, mat, vec):
    """torch's error for a matrix-vector product of two dtypes (mv, addmv, matmul with a 1-D
    right operand); ``c`` is addmv's input (mv's is its result, of the vector's dtype)."""
    return KernelError(f"addmv input tensors must have the same dtype, but got "
                       f"{scalar_name(c.dtype)}, {scalar_name(mat.dtype)}, and "
                       f"{scalar_name(vec.dtype)}")


def _matmul_dtype_error(a, b):
    """The error torch's matmul raises for operands ``a``, ``b`` of two dtypes: the one of the
    product it routes their dimensions to (dot, mv, mm of the folded rows, or bmm)."""
    if a.ndim == 1 and b.ndim == 1:
        return dot_dtype_error(a, b)
    if b.ndim == 1:
        return addmv_dtype_error(b, a, b)
    if b.ndim == 2:
        return mm_dtype_error(a, b)
    return bmm_dtype_error(a, b)


def matmul(a, b):
    """``a @ b`` with torch.matmul's rules for 1-D and batched operands; operands of two dtypes
    raise torch's error (torch's products never promote)."""
    if a.ndim == 0 or b.ndim == 0:
        raise KernelError(f"both arguments to matmul need to be at least 1D, but they are "
                          f"{a.ndim}D and {b.ndim}D")
    if a.dtype != b.dtype:
        raise _matmul_dtype_error(a, b)
    if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
        raise _inner_error(a, b)
    if a.ndim >= 2 and b.ndim == 2:
        # a stack times one matrix is one GEMM over the stacked rows (NumPy's batched matmul
        # runs one small GEMM per matrix of the stack: 4x slower measured)
        rows = a.size // a.shape[-1] if a.shape[-1] else int(np.prod(a.shape[:-1]))
        out = gemm_into(a.reshape(rows, a.shape[-1]), b)
        return out.reshape(a.shape[:-1] + b.shape[1:])
    macs = a.size * b.shape[1] if b.ndim == 2 else None     # (a is a vector here)
    try:
        # never under another thread's one-thread BLAS limit; small 2-d products on one thread
        with blas_mode(FREE if macs is None else _threads_for(macs)):
            if a.ndim > 2:
                return batched(a, b)
            return np.matmul(a, b)
    except ValueError:
        raise KernelError(f"batch dimensions cannot be broadcast: {tuple(a.shape)} @ "
                          f"{tuple(b.shape)}") from None


# A stack of small matrices (each at most BLAS_SERIAL_MACS, which OpenBLAS runs on one thread)
# of STACK_MIN_MACS or more in all splits over the TBB threads (``matmul_numba.gemm_stack``)
STACK = True
STACK_MIN_MACS = 1 << 18
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_cblas = {}     # dtype -> (address, integer type) of NumPy's cblas_?gemm, or False: none
_gemm_signatures = {}   # (matmul_numba kernel, dtype) -> its Numba signature
_ONE_ZERO = {np.dtype(t): np.array([1, 0], t) for t in (np.float32, np.float64)}
_ONE_ONE = {np.dtype(t): np.array([1, 1], t) for t in (np.float32, np.float64)}


def _numpy_cblas(dtype):
    """(address, integer type) of ``cblas_sgemm``/``cblas_dgemm`` of the OpenBLAS NumPy itself
    bundles (``threads.numpy_openblas``; the symbol under OpenBLAS's prefixes and suffixes, as
    threadpoolctl looks its functions up: ``scipy_cblas_sgemm64_``), or None: another BLAS
    (MKL, a system OpenBLAS), or no such symbol."""
    found = _cblas.get(dtype)
    if found is None:
        found = _cblas[dtype] = _find_cblas(dtype) or False
    return found or None


def _find_cblas(dtype):
    import ctypes
    from ember.kernels.runtime import threads
    letter = "s" if dtype == _F32 else "d"
    for lib in threads.numpy_openblas():
        fn, ilp64 = threads.openblas_function(lib, f"cblas_{letter}gemm")
        if fn is not None:
            return ctypes.cast(fn, ctypes.c_void_p).value, np.int64 if ilp64 else np.int32
    return None


def _blas_operand(strides, rows, cols, size):
    """(CBLAS transposition, leading dimension) of a (rows, cols) matrix with byte ``strides``
    as NumPy's matmul passes it to BLAS, or None when BLAS cannot read it in place."""
    sr, sc = strides
    if sc == size and sr >= cols * size and sr % size == 0:
        return _NO_TRANS, sr // size
    if sr == size and sc >= rows * size and sc % size == 0:
        return _TRANS, sc // size
    return None


def batched(a, b):
    """``np.matmul(a, b)``: two stacks of small float matrices of one batch shape that BLAS
    reads in place split over the TBB threads (``_stack``: the same BLAS calls as NumPy's loop,
    the same bits); anything else is NumPy's ``matmul``."""
    out = _stack(a, b)
    return np.matmul(a, b) if out is None else out


def _stack(a, b):
    """The product of two stacks on ``matmul_numba.gemm_stack``, or None where NumPy's loop
    runs instead: not a stack of small float matrices BLAS reads in place, fewer than two
    threads or no TBB layer, NumPy's BLAS not found, the kernel not compiled yet (its compile
    queued)."""
    if not STACK or a.ndim < 3 or a.ndim != b.ndim or a.dtype != b.dtype or \
            not (a.dtype == _F32 or a.dtype == _F64) or a.shape[:-2] != b.shape[:-2]:
        return None
    M, K = a.shape[-2:]
    N = b.shape[-1]
    if b.shape[-2] != K or M < 2 or N < 2 or K < 2 or M * N * K > BLAS_SERIAL_MACS:
        return None
    P = a.size // (M * K)
    if P < 2 or P * M * N * K < STACK_MIN_MACS:
        return None
    size = a.itemsize
    if min(a.strides) < 0 or min(b.strides) < 0 or \
            any(s % size for s in a.strides[:-2] + b.strides[:-2]):
        return None
    opa = _blas_operand(a.strides[-2:], M, K, size)
    opb = _blas_operand(b.strides[-2:], K, N, size)
    if opa is None or opb is None:
        return None
    from ember.kernels.runtime import threads
    # 0: one thread, no TBB layer, Numba running fewer threads (NUMBA_NUM_THREADS=1), or its
    # first import still running on the compile thread (``tbb_parts`` does not wait for it)
    parts = threads.tbb_parts(P, threads.working_threads(), 1)
    found = _numpy_cblas(a.dtype) if parts else None
    if found is None:
        return None
    fn, index = found
    pa, pb = a.ctypes.data, b.ctypes.data
    if pa == pb:
        return None   # one buffer twice: NumPy's loop may take SYRK (other bits)
    strides = np.array(a.shape[:-2] + a.strides[:-2] + b.strides[:-2], np.int64)
    dims = np.array((opa[0], opb[0], M, N, K, opa[1], opb[1]), index)
    c = np.empty(a.shape[:-1] + (N,), a.dtype)
    args = (fn, pa, pb, c.ctypes.data, strides, dims, _ONE_ZERO[a.dtype], parts)
    kernel = _gemm_kernel("gemm_stack", a.dtype, args)
    if kernel is None:
        return None
    kernel(*args)
    return c


def _gemm_kernel(name, dtype, args):
    """``matmul_numba``'s kernel ``name`` when it is compiled for ``args`` (its arguments; the
    signature is kept per dtype: the argument types follow from it), else None (Numba missing,
    or its compile queued in the background)."""
    from ember.kernels.runtime import compiler
    nb = compiler.kernel_module("ember.kernels.matmul_numba")
    if nb is None:
        return None
    kernel = getattr(nb, name)
    sig = _gemm_signatures.get((name, dtype))
    if sig is None:
        sig = _gemm_signatures[(name, dtype)] = compiler.signature(*args)
    return kernel if compiler.ready(kernel, sig) else None


def split_into(a, b, out, by_rows, parts, accumulate=False):
    """``np.matmul(a, b, out=out)`` (``out += a @ b`` where ``accumulate``: BLAS's beta = 1) for
    2-D float operands as ``parts`` blocks of ``out``'s rows (``by_rows``) or columns on the TBB
    threads (``matmul_numba.gemm_split``), each block one single-threaded BLAS call of NumPy's
    ``cblas_?gemm``: True once written, False where the
    caller splits the work itself (another dtype or layout, a block of one row or column, which
    NumPy would run as a matrix-vector product, no TBB layer, NumPy's BLAS not found, the kernel
    not compiled yet: its compile queued). The caller holds BLAS at one thread."""
    if a.ndim != 2 or b.ndim != 2 or out.ndim != 2 or not (a.dtype == b.dtype == out.dtype) \
            or not (a.dtype == _F32 or a.dtype == _F64):
        return False
    M, K = a.shape
    N = b.shape[1]
    if (M if by_rows else N) < 2 * parts or K < 1:
        return False
    size = a.itemsize
    opa = _blas_operand(a.strides, M, K, size)
    opb = _blas_operand(b.strides, K, N, size)
    if opa is None or opb is None or out.strides[1] != size or out.strides[0] < N * size or \
            out.strides[0] % size:
        return False
    from ember.kernels.runtime import threads
    parts = threads.tbb_parts(parts, parts, 1)
    found = _numpy_cblas(a.dtype) if parts else None
    if found is None:
        return False
    fn, index = found
    dims = np.array((opa[0], opb[0], M, N, K, opa[1], opb[1], out.strides[0] // size), index)
    args = (fn, a.ctypes.data, b.ctypes.data, out.ctypes.data, dims,
            (_ONE_ONE if accumulate else _ONE_ZERO)[a.dtype], bool(by_rows), parts)
    kernel = _gemm_kernel("gemm_split", a.dtype, args)
    if kernel is None:
        return False
    kernel(*args)
    return True


# a linear layer of BIAS_GEMM_MIN_MACS multiply-adds or more adds its bias in its GEMM
# (``bias_gemm``); below, the second pass costs less than the call through ctypes (~3 us)
BIAS_GEMM = True
BIAS_GEMM_MIN_MACS = SMALL_GEMM_MACS
_cblas_functions = {}    # dtype -> ctypes function of NumPy's cblas_?gemm, or False: none


def _cblas_function(dtype):
    """NumPy's own ``cblas_sgemm``/``cblas_dgemm`` (``_numpy_cblas``) as a ctypes function
    (which releases the GIL while it runs), or None: another BLAS, or no such symbol."""
    fn = _cblas_functions.get(dtype)
    if fn is None:
        import ctypes
        found = _numpy_cblas(dtype)
        if found is None:
            fn = False
        else:
            address, index = found
            i = ctypes.c_int64 if index is np.int64 else ctypes.c_int32
            f = ctypes.c_float if dtype == _F32 else ctypes.c_double
            p, e = ctypes.c_void_p, ctypes.c_int
            fn = ctypes.CFUNCTYPE(None, e, e, e, i, i, i, f, p, i, p, i, f, p, i)(address)
        _cblas_functions[dtype] = fn
    return fn or None


def bias_gemm(x, w, b):
    """``x @ w.T + b`` for a 2-D ``x`` (M, K), a weight (N, K) and a bias (N,) of one float
    dtype as one BLAS call that accumulates the product into the bias broadcast over the rows
    (beta = 1, as torch's addmm), or None: under BIAS_GEMM_MIN_MACS multiply-adds (or
    BIAS_GEMM off), operands BLAS cannot read in place, NumPy's OpenBLAS not found. Adding the
    bias after the product was a second pass over an output that the GEMM's threads had just
    written, half of it in the other core's cache (2-core Xeon, OpenBLAS's threads: (1024, 128)
    @ (128, 384) 409 -> 376 us, (1024, 128) @ (128, 512) 584 -> 497, (128, 512) @ (512, 512)
    327 -> 279). The sums differ from the product's then the bias's in the last bits where
    BLAS splits the reduction (K of a few hundred and more), as torch's addmm does."""
    M, K = x.shape
    N = w.shape[0]
    if not BIAS_GEMM or M * K * N < BIAS_GEMM_MIN_MACS or not (M and N and K) or \
            b.shape != (N,) or not (b.dtype == x.dtype == w.dtype) or \
            not (x.dtype == _F32 or x.dtype == _F64):
        return None
    size = x.itemsize
    if _blas_operand(x.strides, M, K, size) is None or \
            _blas_operand(w.strides[::-1], K, N, size) is None or _cblas_function(x.dtype) is None:
        return None
    out = np.empty((M, N), x.dtype)
    np.copyto(out, b)
    return gemm_into(x, w.T, out, accumulate=True)


def gemm(a, b):
    """``a @ b`` for 2-D float arrays of one dtype known to fit (autograd's first-order linear
    backward): ``gemm_into`` a new array, BLAS reading C- or F-ordered operands in place (a
    transposed view is a transposed GEMM, no copy); none of ``matmul``'s checks."""
    return gemm_into(a, b)


# GEMMs of SPLIT_GEMM_MIN_MACS multiply-adds or more run as one block of output rows (or
# columns) per thread on Numba's TBB threads, each block one single-threaded call of NumPy's
# OpenBLAS (``split_into``), not on OpenBLAS's own threads. ember's pointwise kernels run on
# TBB's workers, and two pools on the same cores take turns on them: a profile of the GPT
# training step (2-core Xeon) found OpenBLAS's worker preempted ~35 times a step by TBB's
# worker, which spins in sched_yield after its kernels (12 ms of system time a step). One pool
# for both: the 784-512-512-10 MLP step at batch 128 3.28-3.34 -> 3.09-3.12 ms (interleaved
# processes; the GPT step within the noise), though alone the blocks are no faster than
# OpenBLAS's threads. Each block packs op(b) (rows) or op(a) (columns) again, so from
# SPLIT_GEMM_MAX_THREADS threads on (not measured) OpenBLAS keeps its own.
SPLIT_GEMM = True
SPLIT_GEMM_MIN_MACS = 1e6
SPLIT_GEMM_MAX_THREADS = 4


def gemm_into(a, b, out=None, accumulate=False):
    """``a @ b`` for 2-D arrays of one dtype known to fit, written into ``out`` (C-ordered rows;
    a new array when None), or added to it where ``accumulate`` (BLAS's beta = 1, no second
    pass). Float32/float64 products of SPLIT_GEMM_MIN_MACS or more run on the TBB threads
    (``split_into``, see SPLIT_GEMM), the others on one BLAS call under the BLAS mode of their
    size."""
    M, K = a.shape
    N = b.shape[1]
    macs = M * N * K
    if out is None:
        out = np.empty((M, N), np.result_type(a, b))
    if SPLIT_GEMM and macs >= SPLIT_GEMM_MIN_MACS and _split_gemm(a, b, out, accumulate):
        return out
    with blas_mode(_threads_for(macs)):
        if not accumulate:
            np.matmul(a, b, out=out)
        elif not _cblas_into(a, b, out):
            out += np.matmul(a, b)
    return out


def _split_gemm(a, b, out, accumulate):
    """``split_into`` over ember's threads under the LIMITED BLAS mode (OpenBLAS at one
    thread): True once written; False where it does not apply (one thread or more than
    SPLIT_GEMM_MAX_THREADS, other than float32/float64 operands of one dtype, a call nested in
    one that holds BLAS at its own count, or ``split_into``'s refusals)."""
    from ember.kernels.runtime import threads
    n = threads.working_threads()
    if not 2 <= n <= SPLIT_GEMM_MAX_THREADS or not (a.dtype == b.dtype == out.dtype) or \
            not (a.dtype == _F32 or a.dtype == _F64):
        return False
    with blas_mode(LIMITED) as mode:
        return mode == LIMITED and split_into(a, b, out, out.shape[0] >= out.shape[1], n,
                                              accumulate)


def _cblas_into(a, b, out):
    """``out += a @ b`` by one call of NumPy's ``cblas_?gemm`` with beta = 1: True once written,
    False where BLAS cannot read the operands in place (or no such BLAS)."""
    if not (a.dtype == b.dtype == out.dtype) or not (a.dtype == _F32 or a.dtype == _F64):
        return False
    M, K = a.shape
    N = b.shape[1]
    size = a.itemsize
    opa = _blas_operand(a.strides, M, K, size)
    opb = _blas_operand(b.strides, K, N, size)
    fn = _cblas_function(a.dtype) if opa is not None and opb is not None else None
    if fn is None or out.strides[1] != size or out.strides[0] % size:
        return False
    fn(_ROW_MAJOR, opa[0], opb[0], M, N, K, 1.0, a.ctypes.data, opa[1], b.ctypes.data, opb[1],
       1.0, out.ctypes.data, out.strides[0] // size)
    return True


def mm(a, b):
    """The product of matrices ``a``, ``b`` of one dtype (torch.mm)."""
    if a.ndim != 2 or b.ndim != 2:
        raise KernelError(f"expected 2-D tensors, got {a.ndim}-D and {b.ndim}-D")
    if a.dtype != b.dtype:
        raise mm_dtype_error(a, b)
    return matmul(a, b)


def bmm(a, b):
    if a.ndim != 3 or b.ndim != 3:
        raise KernelError(f"expected 3-D tensors, got {a.ndim}-D and {b.ndim}-D")
    if a.dtype != b.dtype:
        raise bmm_dtype_error(a, b)
    if a.shape[0] != b.shape[0]:
        raise KernelError(f"batch sizes differ: {tuple(a.shape)} @ {tuple(b.shape)}")
    return matmul(a, b)


def addmm_dtype_check(c, a, b):
    """torch's checks of addmm's (and addbmm's) dtypes: input against mat2, then mat1 against
    mat2."""
    for x, y, names in ((c, b, "self and mat2"), (a, b, "mat1 and mat2")):
        if x.dtype != y.dtype:
            raise KernelError(f"{names} must have the same dtype, but got "
                              f"{scalar_name(x.dtype)} and {scalar_name(y.dtype)}")


def addmm(c, a, b, beta=1, alpha=1):
    """beta * c + alpha * (a @ b) for ``c``, ``a``, ``b`` of one dtype (torch.addmm)."""
    addmm_dtype_check(c, a, b)
    out = mm(a, b)
    if alpha != 1:
        out *= alpha
    if beta == 0:
        return np.broadcast_to(out, np.broadcast_shapes(out.shape, c.shape)).copy()
    return out + (c if beta == 1 else beta * c)


# a linear layer of at most GEMV_MAX_ROWS input rows and a weight of at least GEMV_MIN_BYTES is
# a matrix-vector product on the TBB threads (``linear_numba``), where BLAS's GEMV streams the
# weight on one core
GEMV = True
GEMV_MAX_ROWS = 2
GEMV_MIN_BYTES = 256 << 10


def gemv_parts(w):
    """Runs of the weight's rows for ``linear_numba.gemv_runs``: two or more when the weight
    (N, K) has GEMV_MIN_BYTES or more and more than one thread may run on Numba's TBB layer;
    else 0 (one thread would only match BLAS)."""
    from ember.kernels.runtime import threads
    if w.nbytes < GEMV_MIN_BYTES:
        return 0
    return threads.tbb_parts(w.shape[0], threads.working_threads(), 1)


_gemv_signatures = {}


def _gemv_linear(x, w, b):
    """x @ w.T + b through ``linear_numba.gemv_runs`` for a few rows x (M, K) and a large weight
    (N, K) of one float dtype; None when BLAS runs instead: not applicable, or the kernel could
    not run on the first call with these shapes (compiling in the background, or Numba
    unavailable). The kernel's sums and BLAS's differ in the last bits: ``compiler.tier`` makes
    the choice (switching to the kernel once it is compiled, except under
    ``use_deterministic_algorithms``)."""
    if not GEMV or x.ndim != 2 or w.ndim != 2 or x.shape[0] > GEMV_MAX_ROWS or \
            w.nbytes < GEMV_MIN_BYTES or x.dtype.kind != "f" or x.dtype != w.dtype or \
            (b is not None and b.dtype != w.dtype) or w.dtype.itemsize < 4:
        return None
    parts = gemv_parts(w)
    if not parts:
        return None
    from ember.kernels.runtime import compiler
    if not compiler.tier(("linear", x.shape, w.shape, w.dtype.str),
                              lambda: _gemv_ready(w.dtype)):
        return None
    nb = compiler.kernel_module("ember.kernels.linear_numba")
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
    b = np.zeros(w.shape[0], w.dtype) if b is None else np.ascontiguousarray(b)
    y = np.empty((x.shape[0], w.shape[0]), w.dtype)
    nb.gemv_runs(w, x, b, y, False, parts)
    return y


def _gemv_ready(dtype):
    """Whether ``linear_numba.gemv_runs`` can run for ``dtype`` now (``compiler.ready``)."""
    from ember.kernels.runtime import compiler
    nb = compiler.kernel_module("ember.kernels.linear_numba")
    if nb is None:
        return False
    sig = _gemv_signatures.get(dtype)
    if sig is None:
        a2, a1 = np.empty((1, 1), dtype), np.empty(1, dtype)
        sig = _gemv_signatures[dtype] = compiler.signature(a2, a2, a1, a2, False, 0)
    return compiler.ready(nb.gemv_runs, sig)


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _float_pair(a, b):
    """Whether arrays ``a`` and ``b`` are float32 or float64 of one dtype."""
    return a.dtype == b.dtype and (a.dtype == _F32 or a.dtype == _F64)


def linear_backward(grad, x, w, needs):
    """First-order gradients of ``linear(x, w, b)`` for (x, w, b), the op spec's
    ``backward_kernel`` (None for an input that needs none, or that this kernel leaves to the
    formulas: a 1-D ``grad``, a 1-D weight, bfloat16/float16/complex or mixed dtypes):
    ``grad @ w``, ``grad^T @ x`` over the flattened leading dimensions (BLAS reads the
    transposed view in place) and ``grad`` summed over all but its last dimension."""
    gx = gw = gb = None
    nd = grad.ndim
    rows = int(np.prod(grad.shape[:-1]))    # (not reshape(-1, n): n may be 0)
    if needs[0] and nd >= 2 and w.ndim == 2 and _float_pair(grad, w):
        if nd == 2:
            gx = gemm(grad, w)
        else:   # stacked rows times one matrix: one GEMM, as the matmul kernel runs it
            gx = gemm(grad.reshape(rows, grad.shape[-1]), w).reshape(grad.shape[:-1] +
                                                                     (w.shape[1],))
    if needs[1] and nd >= 2 and x.ndim == nd and _float_pair(grad, x):
        g, a = (grad, x) if nd == 2 else (grad.reshape(rows, grad.shape[-1]),
                                          x.reshape(rows, x.shape[-1]))
        gw = gemm(g.T, a)
    if len(needs) > 2 and needs[2] and nd > 1 and (grad.dtype == _F32 or grad.dtype == _F64):
        gb = np.add.reduce(grad, axis=tuple(range(nd - 1)))   # the sum kernel's reduction
    return gx, gw, gb


def _linear_shape_error(x, w):
    k = x.shape[-1] if x.ndim else None
    mat2 = f"{w.shape[1]}x{w.shape[0]}" if w.ndim == 2 else f"{w.shape[0]}"
    rows = x.size // k if k else (0 if x.ndim else 1)
    return KernelError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k} and {mat2}): the "
                       f"input's last dimension is {k} but the weight {tuple(w.shape)} expects "
                       f"{w.shape[-1]} features (input shape {tuple(x.shape)})")


def linear(x, w, b=None):
    if w.ndim not in (1, 2):
        raise KernelError(f"weight must be 1-D or 2-D, got shape {tuple(w.shape)}")
    if x.ndim == 0 or x.shape[-1] != w.shape[-1]:
        raise _linear_shape_error(x, w)
    x, w = promote(x, w)
    rows = x.size // x.shape[-1] if x.shape[-1] else int(np.prod(x.shape[:-1]))
    if x.ndim >= 2 and rows <= GEMV_MAX_ROWS and w.nbytes >= GEMV_MIN_BYTES and \
            (b is None or b.ndim == 1):     # (a (T, B, K) input of one token: its rows)
        y = _gemv_linear(x.reshape(rows, x.shape[-1]), w, b)
        if y is not None:
            return y.reshape(x.shape[:-1] + y.shape[-1:])
    macs = rows * w.size
    if b is not None and w.ndim == 2 and macs >= BIAS_GEMM_MIN_MACS:
        out = bias_gemm(x.reshape(rows, x.shape[-1]), w, b)
        if out is not None:
            return out.reshape(x.shape[:-1] + (w.shape[0],))
    if x.ndim >= 2 and w.ndim == 2:
        out = gemm_into(x.reshape(rows, x.shape[-1]), w.T).reshape(x.shape[:-1] + (w.shape[0],))
    else:
        with blas_mode(_threads_for(macs)):
            out = np.matmul(x, w.T)
    if b is not None:
        out += b
    return out


def dot(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise KernelError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.shape[0] != b.shape[0]:
        raise KernelError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
                          f"[{b.shape[0]}] to have the same number of elements")
    if a.dtype != b.dtype:
        raise dot_dtype_error(a, b)
    return np.asarray(np.dot(a, b))


def outer(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise KernelError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    a, b = promote(a, b)
    return np.outer(a, b)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def explicit_einsum(equation, shapes):
    """``equation`` for operands of ``shapes`` in explicit form: ``(subscripts, output)`` with
    spaces removed, each ``...`` replaced by letters (right-aligned across operands, as
    broadcasting aligns them) and the implicit output (``...`` then the letters used once, in
    ASCII order, as torch) written out, so callers need not handle either form."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    subs = lhs.split(",")
    if len(subs) != len(shapes):
        raise KernelError(f"einsum(): '{equation}' names {len(subs)} operands, "
                          f"{len(shapes)} were given")
    bad = set(eq) - set(_LETTERS) - set(",.->")
    if bad:
        raise KernelError(f"einsum(): invalid subscript {sorted(bad)[0]!r} in '{equation}'; "
                          f"subscripts are letters a-z and A-Z")
    unused = [c for c in _LETTERS if c not in eq]
    n_ell = 0
    for s, shape in zip(subs, shapes):
        if "..." in s:
            n_ell = max(n_ell, len(shape) - len(s.replace("...", "")))
    ell = "".join(unused[:n_ell])
    out = []
    for s, shape in zip(subs, shapes):
        if "..." in s:
            k = len(shape) - len(s.replace("...", ""))
            if k < 0:
                raise KernelError(f"einsum(): '{s}' has more subscripts than the operand's "
                                  f"{len(shape)} dimensions")
            s = s.replace("...", ell[n_ell - k:] if k else "")
        if len(s) != len(shape) or "." in s:
            raise KernelError(f"einsum(): the subscripts '{s}' do not match an operand of "
                              f"shape {tuple(shape)} in '{equation}'")
        out.append(s)
    if arrow:
        rhs = rhs.replace("...", ell)
    else:
        joined = "".join(out)
        rhs = ell + "".join(sorted(c for c in set(joined) if joined.count(c) == 1 and
                                   c not in ell))
    return out, rhs


EINSUM_GEMM_MIN_MACS = 1 << 14   # two-operand contractions from which einsum runs as a matmul


def _einsum_as_matmul(a, sa, b, sb, rhs):
    """A two-operand einsum as one (batched) matrix product, as torch's einsum runs it: the
    letters both operands and the output have are the batch, those both have and the output
    lacks the reduction, each operand's own output letters its rows or columns; None where that
    does not apply (a letter repeated or summed within one operand, sizes that broadcast, other
    than float32/float64 operands of one dtype, under EINSUM_GEMM_MIN_MACS). NumPy's ``einsum``
    loops in C without BLAS: a (32, 64, 128) batched product took 2.3 ms, ``matmul`` 0.3."""
    if a.dtype != b.dtype or not (a.dtype == _F32 or a.dtype == _F64) or \
            len(set(sa)) != len(sa) or len(set(sb)) != len(sb) or len(set(rhs)) != len(rhs):
        return None
    size = dict(zip(sa, a.shape))
    for c, n in zip(sb, b.shape):
        if size.setdefault(c, n) != n:
            return None
    batch = [c for c in rhs if c in sa and c in sb]
    rows = [c for c in rhs if c in sa and c not in sb]
    cols = [c for c in rhs if c in sb and c not in sa]
    red = [c for c in sa if c in sb and c not in rhs]
    if len(batch) + len(rows) + len(red) != len(sa) or len(batch) + len(cols) + len(red) != len(sb):
        return None      # a letter only one operand has and the output lacks: summed first
    n = [int(np.prod([size[c] for c in g], dtype=np.int64)) for g in (batch, rows, red, cols)]
    if n[0] * n[1] * n[2] * n[3] < EINSUM_GEMM_MIN_MACS:
        return None
    x = a.transpose([sa.index(c) for c in batch + rows + red]).reshape(n[0], n[1], n[2])
    y = b.transpose([sb.index(c) for c in batch + red + cols]).reshape(n[0], n[2], n[3])
    z = matmul(x, y) if n[0] > 1 else matmul(x[0], y[0])
    got = batch + rows + cols
    z = z.reshape([size[c] for c in got])
    return np.ascontiguousarray(z.transpose([got.index(c) for c in rhs]))


def einsum(operands, equation):
    subs, rhs = explicit_einsum(equation, [o.shape for o in operands])
    eq = ",".join(subs) + "->" + rhs
    if len(operands) == 2:
        out = _einsum_as_matmul(operands[0], subs[0], operands[1], subs[1], rhs)
        if out is not None:
            return out
    try:
        if len(operands) == 1 and operands[0].dtype.kind in "biu" and set(subs[0]) - set(rhs):
            # one operand summed over a label is torch's sum: integers and bools give int64
            return np.asarray(np.einsum(eq, operands[0], dtype=np.int64, casting="unsafe"))
        return np.asarray(np.einsum(eq, *operands, optimize=len(operands) > 2))
    except ValueError as e:
        raise KernelError(f"einsum('{equation}') failed for operand shapes "
                          f"{[tuple(o.shape) for o in operands]}: {e}") from None
