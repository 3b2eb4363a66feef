"""Numba kernels of a linear layer: for a few input rows (a batch of one or two), y = act(x @ w.T
+ b) as matrix-vector products over the weight's rows (N, K), bias and ReLU in the same pass
(``gemv_rows``, ``gemv_runs``); for more rows, ``bias_act``, the bias and ReLU after BLAS's GEMM
(the inference plan's linear steps).

Imported lazily (never by ``import ember``), compiled once per dtype and cached on disk; used by
eager ``linear`` (``ember.kernels.linalg``) and the inference plan's linear steps. Such a layer is
bound by reading the weight: BLAS's GEMV streams it on one core, while ``gemv_runs`` cuts the
weight's rows into runs of a ``prange`` (Numba's TBB layer), one contiguous block per thread
(MLP 784-512-512-10 at batch 1, two cores: 79 -> 42 us for the three layers). The inference
plan runs consecutive such layers as one call: ``gemv_chain`` on one thread, ``gemv_chain_runs``
with the large layers split as ``gemv_runs`` splits them.
"""
from numba import njit, prange


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def gemv_rows(w, x, b, y, relu, lo, hi):
    """y[m, j] = act(sum_k x[m, k] * w[j, k] + b[j]) for the weight's rows j in [lo, hi) and
    every row m of x: four weight rows at a time share the loads of x; each sum in vector lanes
    (reassociated: the order differs from BLAS's in the last bits), then the bias, then ReLU
    (``v < 0`` -> 0, NaN kept) when ``relu``."""
    M, K = x.shape
    zero = y.dtype.type(0)
    for m in range(M):
        j = lo
        while j + 4 <= hi:
            s0 = zero
            s1 = zero
            s2 = zero
            s3 = zero
            for k in range(K):
                xk = x[m, k]
                s0 += w[j, k] * xk
                s1 += w[j + 1, k] * xk
                s2 += w[j + 2, k] * xk
                s3 += w[j + 3, k] * xk
            v0, v1, v2, v3 = s0 + b[j], s1 + b[j + 1], s2 + b[j + 2], s3 + b[j + 3]
            y[m, j] = zero if (relu and v0 < zero) else v0
            y[m, j + 1] = zero if (relu and v1 < zero) else v1
            y[m, j + 2] = zero if (relu and v2 < zero) else v2
            y[m, j + 3] = zero if (relu and v3 < zero) else v3
            j += 4
        while j < hi:
            s0 = zero
            for k in range(K):
                s0 += w[j, k] * x[m, k]
            v0 = s0 + b[j]
            y[m, j] = zero if (relu and v0 < zero) else v0
            j += 1


@njit(cache=True, nogil=True, parallel=True)
def gemv_runs(w, x, b, y, relu, parts):
    """``gemv_rows`` over all of the weight's rows in ``parts`` runs of a ``prange`` (runs of a
    multiple of four rows)."""
    N = w.shape[0]
    per = -(-(-(-N // parts)) // 4) * 4
    for r in prange(parts):
        lo = r * per
        hi = min(N, lo + per)
        if lo < hi:
            gemv_rows(w, x, b, y, relu, lo, hi)


@njit(cache=True, nogil=True)
def bias_act(y, b, relu):
    """y += b, then ReLU (when ``relu``), in place on a (M, K) GEMM result."""
    M, K = y.shape
    zero = y.dtype.type(0)
    for m in range(M):
        if relu:
            for k in range(K):
                v = y[m, k] + b[k]
                y[m, k] = zero if v < zero else v
        else:
            for k in range(K):
                y[m, k] = y[m, k] + b[k]


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def gemv_chain(w, b, dims, relu, x, buf, y):
    """Consecutive linear layers in one call (the inference plan's chain of small batch-of-one
    layers: one dispatch instead of one per layer). Layer ``l`` maps ``dims[l]`` features to
    ``dims[l + 1]``: its weight (dims[l + 1], dims[l]) row-major in the flat ``w`` after the
    layers before it, its bias in the flat ``b``, then ReLU when ``relu[l]`` (as ``gemv_rows``).
    ``x`` (M, dims[0]) is the input, ``buf`` (2, M * the widest inner layer) the scratch the
    inner layers write in turn, ``y`` (M, dims[-1]) the output."""
    src = x
    wo = bo = 0
    for layer in range(dims.shape[0] - 1):
        wl, bl, dst = _layer(w, b, dims, buf, y, layer, wo, bo)
        gemv_rows(wl, src, bl, dst, relu[layer], 0, wl.shape[0])
        src = dst
        wo += wl.size
        bo += bl.size


@njit(cache=True, nogil=True)
def _layer(w, b, dims, buf, y, layer, wo, bo):
    """Layer ``layer`` of a chain: its weight (N, K) at offset ``wo`` of the flat ``w``, its bias
    at ``bo`` of ``b``, and its output: ``y`` for the last layer, else its half of ``buf``."""
    K, N = dims[layer], dims[layer + 1]
    M = y.shape[0]
    dst = y if layer == dims.shape[0] - 2 else buf[layer % 2, :M * N].reshape((M, N))
    return w[wo:wo + N * K].reshape((N, K)), b[bo:bo + N], dst


@njit(cache=True, nogil=True)
def gemv_chain_runs(w, b, dims, relu, split, parts, x, buf, y):
    """``gemv_chain`` with each layer marked in ``split`` run by ``gemv_runs`` in ``parts`` runs
    (``parts`` < 2: every layer on this thread): the chain's layers in one call, each split
    layer a parallel region that ends before the next layer reads its output (MLP 784-512-512-10 at batch 1 on a 2-core Zen 4: its three layers 27 -> 22 us)."""
    src = x
    wo = bo = 0
    for layer in range(dims.shape[0] - 1):
        wl, bl, dst = _layer(w, b, dims, buf, y, layer, wo, bo)
        if split[layer] and parts > 1:
            gemv_runs(wl, src, bl, dst, relu[layer], parts)
        else:
            gemv_rows(wl, src, bl, dst, relu[layer], 0, wl.shape[0])
        src = dst
        wo += wl.size
        bo += bl.size
