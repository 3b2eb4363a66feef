"""Numba kernels of ``thin``: the stride-1 forward pass of layers with few multiply-adds per
output pixel (LeNet's first layer, C=1, K=6, 5x5: 150). Imported lazily, compiled once per dtype
and cached on disk (not when ``EMBER_CPU_ISA`` forces a variant other than Numba's target's, ``direct_numba.CACHE``).

The micro-kernel ``_rows_block`` keeps a strip of V vectors of output positions for up to
``MAX_K`` output channels in vector registers over all taps: per tap V vector loads of the
padded input and one broadcast weight per channel feed KB*V FMAs, so it is bound by the FMA
units, not by loads and stores (the first version added one tap at a time into rows of an
accumulator in memory: two loads and a store per FMA, 0.62 ms against this kernel's ~0.2 ms for
LeNet's first layer on one thread). V and ``MAX_K`` follow the host's registers
(``kernels.runtime.cpu``). Every product is one exact FMA in a fixed tap order, so results do not
depend on the schedule.
"""
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from ember.kernels.conv.direct_numba import (CACHE, I64, REGISTERS, VECTOR_BYTES, _at,
                                             _broadcast, _data, _fma, _loop, _vector,
                                             _vload, _vstore)
from ember.kernels.runtime.nbhelpers import run_bounds

# KB*V accumulators, V input vectors and a broadcast fit the vector registers: 6*4 + 4 + 1 of 32
# with AVX-512, 6*2 + 2 + 1 of 16 otherwise.
V = 4 if REGISTERS >= 32 else 2
MAX_K = 6


def strip(itemsize):
    """Output positions one ``_rows_block`` call computes (V vectors)."""
    return V * VECTOR_BYTES // itemsize


def _emit_rows(builder, fma, vty, size, args, KB):
    accp, abase, astride, xp, xbase, wp, wbase, wrow, op, taps = args
    L = vty.count

    def tap(t, accs):
        o = builder.add(builder.load(_at(builder, op, t)), xbase)
        xs = [_vload(builder, xp, builder.add(o, ir.Constant(I64, v * L)), vty, size)
              for v in range(V)]
        row = builder.add(builder.mul(t, wrow), wbase)
        out = []
        for k in range(KB):
            wk = _broadcast(builder, builder.load(_at(builder, wp, builder.add(
                row, ir.Constant(I64, k)))), vty)
            out += [builder.call(fma, [xs[v], wk, accs[k * V + v]]) for v in range(V)]
        return out
    zero = ir.Constant(vty, [0.0] * L)
    accs = _loop(builder, taps, [zero] * (KB * V), tap)
    for k in range(KB):
        start = builder.add(abase, builder.mul(astride, ir.Constant(I64, k)))
        for v in range(V):
            _vstore(builder, accs[k * V + v], accp, builder.add(start, ir.Constant(I64, v * L)),
                    vty, size)


@intrinsic
def _rows_block(typingctx, acc, abase, astride, x, xbase, w, wbase, wrow, off, taps, KB):
    """acc[abase + k*astride + v*L + l] = sum over t < taps of x[xbase + off[t] + v*L + l] *
    w[t*wrow + wbase + k] for k < KB, v < V, l < L lanes (taps in order, one FMA each). KB is a
    runtime value in 1..MAX_K: a switch over one unrolled kernel per KB."""
    def codegen(context, builder, sig, args):
        vty, size = _vector(context, acc.dtype)
        fma = _fma(builder, vty, size)
        done = builder.append_basic_block("rows.done")
        switch = builder.switch(args[10], done)
        for kb in range(1, MAX_K + 1):
            case = builder.append_basic_block("rows.K%d" % kb)
            switch.add_case(ir.Constant(I64, kb), case)
            builder.position_at_end(case)
            _emit_rows(builder, fma, vty, size, args[:10], kb)
            builder.branch(done)
        builder.position_at_end(done)
        return context.get_dummy_value()
    sig = types.void(acc, types.intp, types.intp, x, types.intp, w, types.intp, types.intp, off,
                     types.intp, types.intp)
    return sig, codegen


@njit(cache=CACHE, nogil=True)
def _rows_into(flat, planes, start, pitch, Wp):
    """Plane c of ``planes`` (C, H, W) into ``flat`` from c*pitch + start, in rows Wp apart (the
    padding around them left as it is)."""
    C, H, W = planes.shape
    for c in range(C):
        for i in range(H):
            dst = flat[c * pitch + start + i * Wp:]
            src = planes[c, i]
            for j in range(W):
                dst[j] = src[j]


@njit(cache=CACHE, nogil=True)
def rows_forward(x, w, b, off, y, pt, pl, Hp, Wp, lo, hi):
    """y[n] (K, Ho, Wo) for images n in [lo, hi) of x (N, C, H, W), stride 1, plus the bias
    b (K,) (added in the crop, after the taps' sum, as a separate add would): w is (taps, K)
    with tap t = (c, r, s) reading the zero-padded image at ``off[t]`` (c*Hp*Wp + r*dh*Wp +
    s*dw). Each image is padded into a flat scratch row (its border zeroed once); output rows
    are computed Wp wide (Wp - Wo junk columns each, dropped by the crop) in strips of
    ``strip`` positions, MAX_K channels at a time."""
    N, C, H, W = x.shape
    taps, K = w.shape
    Ho, Wo = y.shape[2], y.shape[3]
    S = V * VECTOR_BYTES // w.itemsize
    Lp = -(-(Ho * Wp) // S) * S
    plane = Hp * Wp
    xs = np.zeros(max(off.max() + Lp, C * plane), w.dtype)  # every tap run, every image row
    acc = np.empty(K * Lp, w.dtype)
    A, X, Wt, O = _data(acc), _data(xs), _data(w), _data(off)
    for n in range(lo, hi):
        _rows_into(xs, x[n], pt * Wp + pl, Hp * Wp, Wp)
        for k0 in range(0, K, MAX_K):
            kb = min(MAX_K, K - k0)
            for p in range(0, Lp, S):
                _rows_block(A, k0 * Lp + p, Lp, X, p, Wt, k0, K, O, taps, kb)
        for k in range(K):
            out = y[n, k]
            bk = b[k]
            for i in range(Ho):
                row = acc[k * Lp + i * Wp:]
                dst = out[i]
                for j in range(Wo):
                    dst[j] = row[j] + bk


@njit(cache=CACHE, nogil=True, parallel=True)
def rows_forward_parallel(x, w, b, off, y, pt, pl, Hp, Wp, parts):
    """``rows_forward`` over all images in ``parts`` runs of a ``prange`` (Numba's TBB layer)."""
    N = x.shape[0]
    for r in prange(parts):
        lo, hi = run_bounds(N, parts, r)
        if lo < hi:
            rows_forward(x, w, b, off, y, pt, pl, Hp, Wp, lo, hi)


# The weight micro-kernel's block: WK channels x WT taps of vector accumulators plus WK gy and WT
# input vectors fit the registers (4*5 + 4 + 5 of 32; 2*4 + 2 + 4 of 16).
WK, WT = (4, 5) if REGISTERS >= 32 else (2, 4)


def _emit_weight(builder, fma, vty, size, args, KB, TB):
    pp, pbase, tstride, xp, op, t0, gp, gbase, gstride, nvec = args
    L = vty.count
    slots = [builder.add(pbase, builder.add(builder.mul(tstride, ir.Constant(I64, t)),
                                            ir.Constant(I64, k * L)))
             for t in range(TB) for k in range(KB)]
    inits = [_vload(builder, pp, s, vty, size) for s in slots]
    offs = [builder.load(_at(builder, op, builder.add(t0, ir.Constant(I64, t)))) for t in range(TB)]

    def position(q, accs):
        pos = builder.mul(q, ir.Constant(I64, L))
        xs = [_vload(builder, xp, builder.add(o, pos), vty, size) for o in offs]
        gq = builder.add(gbase, pos)
        gs = [_vload(builder, gp, builder.add(builder.mul(gstride, ir.Constant(I64, k)), gq),
                     vty, size) for k in range(KB)]
        return [builder.call(fma, [xs[t], gs[k], accs[t * KB + k]])
                for t in range(TB) for k in range(KB)]
    accs = _loop(builder, nvec, inits, position)
    for s, a in zip(slots, accs):
        _vstore(builder, a, pp, s, vty, size)


@intrinsic
def _weight_block(typingctx, part, pbase, tstride, x, off, t0, TB, g, gbase, gstride, KB, nvec):
    """part[pbase + t*tstride + k*L + l] += sum over q < nvec of x[off[t0 + t] + q*L + l] *
    g[gbase + k*gstride + q*L + l] for t < TB, k < KB, l < L lanes: lane-wise partial sums of
    dW[k, t0 + t], in registers over the whole loop. TB (WT or 1: the last taps of a layer go
    one at a time) and KB (1..WK) are runtime values: a switch over one unrolled kernel per pair
    (fewer pairs, less to compile on a cold cache)."""
    def codegen(context, builder, sig, args):
        vty, size = _vector(context, part.dtype)
        fma = _fma(builder, vty, size)
        TB_, KB_ = args[6], args[10]
        key = builder.add(builder.mul(TB_, ir.Constant(I64, 16)), KB_)
        done = builder.append_basic_block("rowsw.done")
        switch = builder.switch(key, done)
        for tb in sorted({1, WT}):
            for kb in range(1, WK + 1):
                case = builder.append_basic_block("rowsw.T%dK%d" % (tb, kb))
                switch.add_case(ir.Constant(I64, tb * 16 + kb), case)
                builder.position_at_end(case)
                _emit_weight(builder, fma, vty, size, args[:6] + args[7:10] + args[11:], kb, tb)
                builder.branch(done)
        builder.position_at_end(done)
        return context.get_dummy_value()
    sig = types.void(part, types.intp, types.intp, x, off, types.intp, types.intp, g, types.intp,
                     types.intp, types.intp, types.intp)
    return sig, codegen


@njit(cache=CACHE, nogil=True)
def rows_weight(gy, x, off, pt, pl, Hp, Wp, lo, hi):
    """Lane-wise partial sums part (taps, K, L) of the weight gradient over images [lo, hi):
    dW[k, t] = sum over l of part[t, k, l], with tap t reading the padded image at ``off[t]``
    (see ``rows_forward``). Per image x is padded into a flat row and gy laid out Wp wide (its
    junk columns zero), so each (k, t) is one dot product of contiguous runs."""
    N, C, H, W = x.shape
    K, Ho, Wo = gy.shape[1], gy.shape[2], gy.shape[3]
    taps = off.shape[0]
    L = VECTOR_BYTES // x.itemsize
    Lp = -(-(Ho * Wp) // L) * L
    plane = Hp * Wp
    xs = np.zeros(max(off.max() + Lp, C * plane), x.dtype)  # every tap run, every image row
    gs = np.zeros(K * Lp, x.dtype)
    part = np.zeros(taps * K * L, x.dtype)
    P, X, G, O = _data(part), _data(xs), _data(gs), _data(off)
    for n in range(lo, hi):
        _rows_into(xs, x[n], pt * Wp + pl, Hp * Wp, Wp)
        _rows_into(gs, gy[n], 0, Lp, Wp)
        t0 = 0
        while t0 < taps:
            tb = WT if taps - t0 >= WT else 1
            for k0 in range(0, K, WK):
                kb = min(WK, K - k0)
                _weight_block(P, (t0 * K + k0) * L, K * L, X, O, t0, tb, G, k0 * Lp, Lp, kb,
                              Lp // L)
            t0 += tb
    return part.reshape(taps, K, L)


@njit(cache=CACHE, nogil=True, parallel=True)
def rows_weight_parallel(gy, x, off, pt, pl, Hp, Wp, parts):
    """``rows_weight`` over all images in ``parts`` runs of a ``prange``; the runs' partial sums
    are added in run order (the same bits for a given ``parts``)."""
    N = x.shape[0]
    taps, K = off.shape[0], gy.shape[1]
    L = VECTOR_BYTES // x.itemsize
    partial = np.zeros((parts, taps, K, L), x.dtype)
    for r in prange(parts):
        lo, hi = run_bounds(N, parts, r)
        if lo < hi:
            p = rows_weight(gy, x, off, pt, pl, Hp, Wp, lo, hi)
            for t in range(taps):
                for k in range(K):
                    for l in range(L):
                        partial[r, t, k, l] = p[t, k, l]
    total = partial[0].copy()
    for r in range(1, parts):
        total += partial[r]
    return total
