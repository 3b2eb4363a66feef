"""Numba kernels of the register-blocked direct convolution (see ``direct``).

Imported lazily by ``direct`` (never by ``import ember``); compiled once per dtype and cached on
disk (cache=True). The inner loops are two LLVM-level micro-kernels (``numba.extending.intrinsic``)
that keep a block of accumulators in vector registers (512-bit vectors: LLVM splits them on
machines without AVX-512) and issue one ``llvm.fma`` per vector: Numba's own loops over small
accumulator arrays were either spilled to memory or scalarised by LLVM (19-24 ms against 1.4 ms
for the first layer's forward on one thread). No fastmath: every product is one exact FMA and the
summation order is fixed, so results do not depend on the schedule. The drivers take a range
[lo, hi) of images and release the GIL (nogil) so ``parallel.run`` splits the batch over ember's
own threads.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

VECTOR_BYTES = 64
I64 = ir.IntType(64)


def lanes(itemsize):
    """Elements per vector register for an element size in bytes."""
    return VECTOR_BYTES // itemsize


def _literal(t):
    return t.literal_value if isinstance(t, types.IntegerLiteral) else None


def _vector(context, dtype):
    fty = context.get_value_type(dtype)
    size = context.get_abi_sizeof(fty)
    return ir.VectorType(fty, VECTOR_BYTES // size), size


def _fma(builder, vty, size):
    name = "llvm.fma.v%d%s" % (vty.count, "f32" if size == 4 else "f64")
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(vty, [vty] * 3), name)


def _at(builder, ptr, index):
    return builder.gep(ptr, [index if isinstance(index, ir.Value) else ir.Constant(I64, index)])


def _vload(builder, ptr, index, vty, size):
    return builder.load(builder.bitcast(_at(builder, ptr, index), vty.as_pointer()), align=size)


def _vstore(builder, value, ptr, index, vty, size):
    builder.store(value, builder.bitcast(_at(builder, ptr, index), vty.as_pointer()), align=size)


def _broadcast(builder, scalar, vty):
    i32 = ir.IntType(32)
    v = builder.insert_element(ir.Constant(vty, ir.Undefined), scalar, ir.Constant(i32, 0))
    return builder.shuffle_vector(v, ir.Constant(vty, ir.Undefined),
                                  ir.Constant(ir.VectorType(i32, vty.count), [0] * vty.count))


def _loop(builder, count, inits, body):
    """Emit ``for i in range(count): values = body(i, values)`` with ``values`` in registers
    (phi nodes); return the final values (``inits`` when count <= 0)."""
    pre = builder.block
    loop = builder.append_basic_block("direct.loop")
    after = builder.append_basic_block("direct.after")
    builder.cbranch(builder.icmp_signed(">", count, ir.Constant(I64, 0)), loop, after)
    builder.position_at_end(loop)
    i = builder.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), pre)
    phis = []
    for v in inits:
        ph = builder.phi(v.type)
        ph.add_incoming(v, pre)
        phis.append(ph)
    new = body(i, phis)
    inext = builder.add(i, ir.Constant(I64, 1))
    end = builder.block
    i.add_incoming(inext, end)
    for ph, v in zip(phis, new):
        ph.add_incoming(v, end)
    builder.cbranch(builder.icmp_signed("<", inext, count), loop, after)
    builder.position_at_end(after)
    out = []
    for init, v in zip(inits, new):
        ph = builder.phi(v.type)
        ph.add_incoming(init, pre)
        ph.add_incoming(v, end)
        out.append(ph)
    return out


@intrinsic
def _data(typingctx, arr):
    """Pointer to an array's first element."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, sig, args):
        return context.make_array(sig.args[0])(context, builder, args[0]).data
    return types.CPointer(arr.dtype)(arr), codegen


@intrinsic
def _forward_block(typingctx, acc, x, w, off, taps, base, sw, wcol, wrow, P, V):
    """acc[p*V*L + v*L + l] = sum over t < taps of x[off[t] + base + p*sw] * w[t*wrow + wcol +
    v*L + l] for p < P, v < V, l < L lanes: P*V vector accumulators in registers. ``sw`` may be
    a literal (constant addressing) or a runtime stride."""
    P_, V_, SW = _literal(P), _literal(V), _literal(sw)
    if P_ is None or V_ is None:
        return None

    def codegen(context, builder, sig, args):
        accp, xp, wp, op, n, base, sw_, wcol, wrow = args[:9]
        if SW is not None:
            sw_ = ir.Constant(I64, SW)
        vty, size = _vector(context, acc.dtype)
        fma = _fma(builder, vty, size)
        L = vty.count

        def body(t, accs):
            o = builder.add(builder.load(_at(builder, op, t)), base)
            row = builder.add(builder.mul(t, wrow), wcol)
            ws = [_vload(builder, wp, builder.add(row, ir.Constant(I64, v * L)), vty, size)
                  for v in range(V_)]
            out = []
            for p in range(P_):
                xi = builder.add(o, builder.mul(sw_, ir.Constant(I64, p)))
                xb = _broadcast(builder, builder.load(_at(builder, xp, xi)), vty)
                out += [builder.call(fma, [xb, ws[v], accs[p * V_ + v]]) for v in range(V_)]
            return out
        zero = ir.Constant(vty, [0.0] * L)
        accs = _loop(builder, n, [zero] * (P_ * V_), body)
        for k, a in enumerate(accs):
            _vstore(builder, a, accp, k * L, vty, size)
        return context.get_dummy_value()
    sig = types.void(acc, x, w, off, types.intp, types.intp,
                     sw if SW is not None else types.intp, types.intp, types.intp, P, V)
    return sig, codegen


@intrinsic
def _weight_row(typingctx, acc, abase, arow, x, gy, off, obase, count, xbase, sw, gbase, gstride,
                T, V):
    """acc[abase + t*arow + v*L + l] += sum over j < count of x[off[obase + t] + xbase + j*sw] *
    gy[gbase + j*gstride + v*L + l] for t < T, v < V: T*V vector accumulators in registers,
    loaded before and stored after the loop."""
    T_, V_, SW = _literal(T), _literal(V), _literal(sw)
    if T_ is None or V_ is None:
        return None

    def codegen(context, builder, sig, args):
        accp, abase, arow_, xp, gp, op, obase, n, xbase, sw_, gbase, gstride = args[:12]
        if SW is not None:
            sw_ = ir.Constant(I64, SW)
        vty, size = _vector(context, acc.dtype)
        fma = _fma(builder, vty, size)
        L = vty.count
        offs = [builder.add(builder.load(_at(builder, op, builder.add(obase, ir.Constant(I64, t)))),
                            xbase) for t in range(T_)]
        slots = [builder.add(abase, builder.add(builder.mul(arow_, ir.Constant(I64, t)),
                                                ir.Constant(I64, v * L)))
                 for t in range(T_) for v in range(V_)]
        inits = [_vload(builder, accp, s, vty, size) for s in slots]

        def body(j, accs):
            g = builder.add(gbase, builder.mul(j, gstride))
            gs = [_vload(builder, gp, builder.add(g, ir.Constant(I64, v * L)), vty, size)
                  for v in range(V_)]
            xj = builder.mul(j, sw_)
            out = []
            for t in range(T_):
                xb = _broadcast(builder, builder.load(_at(builder, xp, builder.add(offs[t], xj))),
                                vty)
                out += [builder.call(fma, [xb, gs[v], accs[t * V_ + v]]) for v in range(V_)]
            return out
        accs = _loop(builder, n, inits, body)
        for s, a in zip(slots, accs):
            _vstore(builder, a, accp, s, vty, size)
        return context.get_dummy_value()
    sig = types.void(acc, types.intp, types.intp, x, gy, off, types.intp, types.intp, types.intp,
                     sw if SW is not None else types.intp, types.intp, types.intp, T, V)
    return sig, codegen


@njit(cache=True, nogil=True)
def _forward_span(acc, X, W, O, taps, base, sw, kb, Kp, P, V):
    # one literal (P, V, stride-1) instantiation per branch
    if V == 2:
        if sw == 1:
            if P == 8:
                _forward_block(acc, X, W, O, taps, base, 1, kb, Kp, 8, 2)
            elif P == 7:
                _forward_block(acc, X, W, O, taps, base, 1, kb, Kp, 7, 2)
            elif P == 6:
                _forward_block(acc, X, W, O, taps, base, 1, kb, Kp, 6, 2)
            elif P == 5:
                _forward_block(acc, X, W, O, taps, base, 1, kb, Kp, 5, 2)
            else:
                _forward_block(acc, X, W, O, taps, base, 1, kb, Kp, 1, 2)
        else:
            if P == 8:
                _forward_block(acc, X, W, O, taps, base, sw, kb, Kp, 8, 2)
            elif P == 7:
                _forward_block(acc, X, W, O, taps, base, sw, kb, Kp, 7, 2)
            elif P == 6:
                _forward_block(acc, X, W, O, taps, base, sw, kb, Kp, 6, 2)
            elif P == 5:
                _forward_block(acc, X, W, O, taps, base, sw, kb, Kp, 5, 2)
            else:
                _forward_block(acc, X, W, O, taps, base, sw, kb, Kp, 1, 2)
    else:
        if sw == 1:
            if P == 8:
                _forward_block(acc, X, W, O, taps, base, 1, kb, Kp, 8, 1)
            elif P == 7:
                _forward_block(acc, X, W, O, taps, base, 1, kb, Kp, 7, 1)
            elif P == 6:
                _forward_block(acc, X, W, O, taps, base, 1, kb, Kp, 6, 1)
            elif P == 5:
                _forward_block(acc, X, W, O, taps, base, 1, kb, Kp, 5, 1)
            else:
                _forward_block(acc, X, W, O, taps, base, 1, kb, Kp, 1, 1)
        else:
            if P == 8:
                _forward_block(acc, X, W, O, taps, base, sw, kb, Kp, 8, 1)
            elif P == 7:
                _forward_block(acc, X, W, O, taps, base, sw, kb, Kp, 7, 1)
            elif P == 6:
                _forward_block(acc, X, W, O, taps, base, sw, kb, Kp, 6, 1)
            elif P == 5:
                _forward_block(acc, X, W, O, taps, base, sw, kb, Kp, 5, 1)
            else:
                _forward_block(acc, X, W, O, taps, base, sw, kb, Kp, 1, 1)


@njit(cache=True, nogil=True)
def forward(xp, wp, off, y, Wp, sh, sw, P, V, lo, hi):
    """y[n, k, i, j] = sum_t xp[n - lo, off[t] + i*sh*Wp + j*sw] * wp[t, k] for images n in
    [lo, hi): ``xp`` holds those images padded and flattened (n, C*Hp*Wp), ``wp`` the weight
    repacked as (C*R*S, Kp) with Kp a multiple of V vectors (zero columns beyond K), ``off`` the
    offset of each tap (c, r, s) in a flattened padded image. Output pixels are done P at a time
    (the last block of a row shifted left to end at the row's end); P is 8, 7, 6, 5 or 1.
    ``y`` must be C-contiguous."""
    N, K, Ho, Wo = y.shape
    taps, Kp = wp.shape
    plane = xp.shape[1]
    L = 64 // wp.itemsize
    KB = V * L
    accbuf = np.empty(8 * KB, wp.dtype)
    acc, X, W, O, Y = _data(accbuf), _data(xp), _data(wp), _data(off), _data(y)
    HW = Ho * Wo
    for n in range(lo, hi):
        xb = (n - lo) * plane
        for i in range(Ho):
            for j0 in range(0, Wo, P):
                j0 = min(j0, Wo - P)
                base = xb + i * sh * Wp + j0 * sw
                for kb in range(0, Kp, KB):
                    _forward_span(acc, X, W, O, taps, base, sw, kb, Kp, P, V)
                    out = (n * K + kb) * HW + i * Wo + j0
                    for k in range(min(KB, K - kb)):
                        for p in range(P):
                            Y[out + k * HW + p] = acc[p * KB + k]


@njit(cache=True, nogil=True)
def _weight_span(acc, abase, X, G, O, obase, count, xbase, sw, gbase, Kp, V):
    if V == 2:
        if sw == 1:
            _weight_row(acc, abase, Kp, X, G, O, obase, count, xbase, 1, gbase, Kp, 12, 2)
        else:
            _weight_row(acc, abase, Kp, X, G, O, obase, count, xbase, sw, gbase, Kp, 12, 2)
    else:
        if sw == 1:
            _weight_row(acc, abase, Kp, X, G, O, obase, count, xbase, 1, gbase, Kp, 24, 1)
        else:
            _weight_row(acc, abase, Kp, X, G, O, obase, count, xbase, sw, gbase, Kp, 24, 1)


@njit(cache=True, nogil=True)
def weight(gy, xp, off, Wp, sh, sw, Kp, V, lo, hi):
    """Return gw (taps, Kp) with gw[t, k] = sum over images n in [lo, hi) and output pixels (i, j)
    of xp[n - lo, off[t] + i*sh*Wp + j*sw] * gy[n, k, i, j]; ``off`` is padded to a multiple of the
    tap block (12 for V == 2, else 24) by repeating its last entry (those rows are junk). ``gy``
    must be C-contiguous."""
    N, K, Ho, Wo = gy.shape
    taps = off.shape[0]
    plane = xp.shape[1]
    T = 12 if V == 2 else 24
    L = 64 // xp.itemsize
    gw = np.zeros((taps, Kp), xp.dtype)
    gt = np.zeros((Ho * Wo, Kp), xp.dtype)
    A, X, G, O, GY = _data(gw), _data(xp), _data(gt), _data(off), _data(gy)
    HW = Ho * Wo
    for n in range(lo, hi):
        for k in range(K):
            src = (n * K + k) * HW
            for q in range(HW):
                G[q * Kp + k] = GY[src + q]
        xb = (n - lo) * plane
        for t0 in range(0, taps, T):
            for kb in range(0, Kp, V * L):
                for i in range(Ho):
                    _weight_span(A, t0 * Kp + kb, X, G, O, t0, Wo, xb + i * sh * Wp, sw,
                                 i * Wo * Kp + kb, Kp, V)
    return gw
