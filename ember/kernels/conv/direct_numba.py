"""Numba kernels of the register-blocked direct convolution (see ``direct``).

Imported lazily by ``direct`` (never by ``import ember``); compiled once per dtype and cached on
disk (cache=True). The inner loops are LLVM-level micro-kernels (``numba.extending.intrinsic``)
that keep a block of accumulators in vector registers and issue one ``llvm.fma`` per vector (the
vector width and tap blocks follow the host's ISA, ``kernels.runtime.cpu``: 512-bit vectors and 32
registers with AVX-512, 256-bit and 16 with AVX2, 128-bit otherwise; a variant forced narrower
with ``EMBER_CPU_ISA`` is compiled without the disk cache, whose key is Numba's target CPU only,
unless ``NUMBA_CPU_FEATURES`` names that variant's target: ``cpu.target_isa()``): Numba's own loops over small
accumulator arrays were either spilled to memory or scalarised by LLVM (19-24 ms against 1.4 ms
for the first layer's forward on one thread). Two more intrinsics transpose L x L register
tiles: gy into (pixels, K) for the weight gradient (a scalar loop took 0.53 of 1.95 ms there)
and each output row from (pixels, K) into NCHW for the forward (a scalar loop took about 0.4 of
1.46 ms). No fastmath: every product is one exact FMA and the summation order is fixed, so
results do not depend on the schedule. The drivers take a range [lo, hi) of images and release
the GIL (nogil) so ``parallel.run`` splits the batch over ember's own threads.
"""
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from ember.kernels.conv.fused_numba import _max4
from ember.kernels.runtime import cpu
from ember.kernels.runtime.nbhelpers import run_bounds

ISA = cpu.isa()
VECTOR_BYTES = cpu.VECTOR_BYTES[ISA]
REGISTERS = cpu.REGISTERS[ISA]
CACHE = ISA == cpu.target_isa()
I64 = ir.IntType(64)
# Largest tap block of the weight kernel at V = 1, 2 vectors: T*V accumulators, V gy vectors and a
# broadcast within the vector registers (24, 12 with 32 registers; 12, 6 with 16). Per executed
# tap, T = 4 to 13 ran at the same rate on the first layer (Zen 4), so smaller blocks for the
# remainder cost nothing.
MAX_TAPS = (24, 12) if REGISTERS >= 32 else (12, 6)


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


def forward_pixels(V):
    """Pixel blocks the forward micro-kernel is compiled for at V vectors: those of
    (14, 10, 8, 7, 6, 5) whose P*V accumulators, V weight vectors and a broadcast fit the
    vector registers, and 1 (rows shorter than 5)."""
    return [p for p in (14, 10, 8, 7, 6, 5) if p * V + V + 1 <= REGISTERS] + [1]


# Kernel widths of the sliding forward variant (stride 1, dilation 1 along rows): the S taps
# (c, r, 0..S-1) of a block read the P + S - 1 inputs x[o + q] (q < P + S - 1), each broadcast
# once for its S uses, instead of one broadcast per FMA (LeNet conv2 at AVX-512, V = 1: 11 loads
# per 10 FMAs; one thread 235 -> 208 us; (16,3,64,64)->16 3x3 pad 1 0.98 -> 0.74 ms).
SLIDE_WIDTHS = (3, 5)


def slide_pixels(V, S):
    """Pixel blocks of ``forward_pixels(V)`` the sliding variant of width S is compiled for:
    P*V accumulators, P + S - 1 broadcasts and V weight vectors fit the registers and give at
    least 8 accumulators (two FMA units of 4-cycle latency). V = 1 only: at V = 2 (two weight
    vectors per broadcast already) the smaller blocks it needs lost, one thread, ms plain /
    sliding: (32,3,32,32)->32 5x5 0.82 / 0.85, (4,3,17,19)->40 5x5 pad 2 0.113 / 0.122."""
    if V != 1:
        return []
    return [p for p in forward_pixels(V) if p * V + p + S - 1 + V <= REGISTERS and p * V >= 8]


def _emit_forward(builder, fma, vty, size, args, P, V, sw_, S=0):
    """The forward micro-kernel for literal P, V (see ``_forward_block``) with stride ``sw_``
    (an ``ir.Constant`` 1 or the runtime value); S > 0: the sliding variant (unit stride, ``n``
    counts groups of S taps (c, r, 0..S-1), whose first offset is ``off[g*S]``)."""
    accp, abase, xp, wp, op, n, base, _, wcol, wrow = args
    L = vty.count

    def body(t, accs):
        o = builder.add(builder.load(_at(builder, op, t)), base)
        row = builder.add(builder.mul(t, wrow), wcol)
        ws = [_vload(builder, wp, builder.add(row, ir.Constant(I64, v * L)), vty, size)
              for v in range(V)]
        out = []
        for p in range(P):
            xi = builder.add(o, builder.mul(sw_, ir.Constant(I64, p)))
            xb = _broadcast(builder, builder.load(_at(builder, xp, xi)), vty)
            out += [builder.call(fma, [xb, ws[v], accs[p * V + v]]) for v in range(V)]
        return out

    def group(g, accs):
        t = builder.mul(g, ir.Constant(I64, S))
        o = builder.add(builder.load(_at(builder, op, t)), base)
        xs = [_broadcast(builder, builder.load(_at(builder, xp, builder.add(
            o, ir.Constant(I64, q)))), vty) for q in range(P + S - 1)]
        accs = list(accs)
        for s_ in range(S):
            row = builder.add(builder.mul(builder.add(t, ir.Constant(I64, s_)), wrow), wcol)
            ws = [_vload(builder, wp, builder.add(row, ir.Constant(I64, v * L)), vty, size)
                  for v in range(V)]
            for p in range(P):
                for v in range(V):
                    accs[p * V + v] = builder.call(fma, [xs[p + s_], ws[v], accs[p * V + v]])
        return accs
    zero = ir.Constant(vty, [0.0] * L)
    accs = _loop(builder, n, [zero] * (P * V), group if S else body)
    start = builder.add(abase, wcol)
    for p in range(P):
        row = builder.add(start, builder.mul(wrow, ir.Constant(I64, p)))
        for v in range(V):
            _vstore(builder, accs[p * V + v], accp,
                    builder.add(row, ir.Constant(I64, v * L)), vty, size)


@intrinsic
def _forward_block(typingctx, acc, abase, x, w, off, taps, base, sw, wcol, wrow, P, V, S):
    """acc[abase + p*wrow + wcol + v*L + l] = sum over t < taps of x[off[t] + base + p*sw] *
    w[t*wrow + wcol + v*L + l] for p < P, v < V, l < L lanes: P*V vector accumulators in
    registers, stored once (``acc`` is laid out like rows of ``w``). P (one of
    ``forward_pixels(V)``) and V (1 or 2) are runtime values: a switch over one unrolled kernel
    per (P, V, stride == 1); the stride-1 variants use constant addressing (with a runtime
    stride LLVM steps one x pointer per pixel and spills them). S > 0 (one of SLIDE_WIDTHS, P
    one of ``slide_pixels(V, S)``; stride 1 and taps in runs of S unit steps, off[t + s] ==
    off[t] + s for t a multiple of S): the sliding variant, same products in the same order."""
    def codegen(context, builder, sig, args):
        vty, size = _vector(context, acc.dtype)
        fma = _fma(builder, vty, size)
        P_, V_, sw_, S_ = args[10], args[11], args[7], args[12]
        unit = builder.zext(builder.icmp_signed("==", sw_, ir.Constant(I64, 1)), I64)
        # mode: 0 runtime stride, 1 unit stride, S: sliding of width S
        mode = builder.select(builder.icmp_signed(">", S_, ir.Constant(I64, 0)), S_, unit)
        key = builder.add(builder.mul(builder.add(builder.mul(V_, ir.Constant(I64, 64)), P_),
                                      ir.Constant(I64, 16)), mode)
        ntaps = builder.select(builder.icmp_signed(">", S_, ir.Constant(I64, 0)),
                               builder.sdiv(args[5], builder.select(
                                   builder.icmp_signed(">", S_, ir.Constant(I64, 0)), S_,
                                   ir.Constant(I64, 1))), args[5])
        body_args = list(args[:10])
        body_args[5] = ntaps
        done = builder.append_basic_block("forward.done")
        switch = builder.switch(key, done)
        for v in (1, 2):
            for p in forward_pixels(v):
                for u in (0, 1):
                    case = builder.append_basic_block("forward.P%dV%d%s" % (p, v, "s1" * u))
                    switch.add_case(ir.Constant(I64, (v * 64 + p) * 16 + u), case)
                    builder.position_at_end(case)
                    _emit_forward(builder, fma, vty, size, body_args, p, v,
                                  ir.Constant(I64, 1) if u else sw_)
                    builder.branch(done)
            for w_ in SLIDE_WIDTHS:
                for p in slide_pixels(v, w_):
                    case = builder.append_basic_block("forward.P%dV%dS%d" % (p, v, w_))
                    switch.add_case(ir.Constant(I64, (v * 64 + p) * 16 + w_), case)
                    builder.position_at_end(case)
                    _emit_forward(builder, fma, vty, size, body_args, p, v, ir.Constant(I64, 1),
                                  w_)
                    builder.branch(done)
        builder.position_at_end(done)
        return context.get_dummy_value()
    sig = types.void(acc, types.intp, x, w, off, types.intp, types.intp, types.intp, types.intp,
                     types.intp, types.intp, types.intp, types.intp)
    return sig, codegen


def _tap_blocks(V):
    """Tap-block sizes the weight micro-kernel is compiled for at V vectors: MAX_TAPS[V - 1] and
    the powers of two below it (so any tap count splits exactly, see ``_tap_block``)."""
    top = MAX_TAPS[V - 1]
    return [top] + [1 << b for b in range(top.bit_length()) if 1 << b < top]


def _emit_weight(builder, fma, vty, size, args, T, V, sw):
    """The weight micro-kernel for literal T, V (see ``_weight_block``) with stride ``sw`` (an
    ``ir.Constant`` 1 or the runtime value)."""
    accp, abase, xp, gp, op, obase, xbase, rows, xrow, cols, _, gbase, kp = args
    L = vty.count
    offs = [builder.add(builder.load(_at(builder, op, builder.add(obase, ir.Constant(I64, t)))),
                        xbase) for t in range(T)]
    slots = [builder.add(abase, builder.add(builder.mul(kp, ir.Constant(I64, t)),
                                            ir.Constant(I64, v * L)))
             for t in range(T) for v in range(V)]
    inits = [_vload(builder, accp, s, vty, size) for s in slots]
    gpix = builder.mul(cols, kp)

    def row(i, accs):
        xi = builder.mul(i, xrow)
        gi = builder.add(gbase, builder.mul(i, gpix))
        xrs = [builder.add(o, xi) for o in offs]

        def pixel(j, accs):
            g = builder.add(gi, builder.mul(j, kp))
            gs = [_vload(builder, gp, builder.add(g, ir.Constant(I64, v * L)), vty, size)
                  for v in range(V)]
            xj = builder.mul(j, sw)
            out = []
            for t in range(T):
                xb = _broadcast(builder, builder.load(_at(builder, xp, builder.add(xrs[t], xj))),
                                vty)
                out += [builder.call(fma, [xb, gs[v], accs[t * V + v]]) for v in range(V)]
            return out
        return _loop(builder, cols, accs, pixel)
    accs = _loop(builder, rows, inits, row)
    for s, a in zip(slots, accs):
        _vstore(builder, a, accp, s, vty, size)


@intrinsic
def _weight_block(typingctx, acc, abase, x, g, off, obase, xbase, rows, xrow, cols, sw, gbase, Kp,
                  T, V):
    """acc[abase + t*Kp + v*L + l] += sum over i < rows, j < cols of x[off[obase + t] + xbase +
    i*xrow + j*sw] * g[gbase + (i*cols + j)*Kp + v*L + l] for t < T, v < V, l < L lanes.

    T*V vector accumulators are loaded once, kept in registers over the whole (rows x cols) loop
    nest (one output image) and stored once. T, V and sw are runtime values: the code is a switch
    over one unrolled kernel per V in (1, 2), T in ``_tap_blocks(V)`` and sw == 1 or not (a
    constant stride lets LLVM address every tap as pointer + one shared index; a runtime stride
    makes it step one pointer per tap, which spills them at V == 1). Other (T, V) do nothing."""
    def codegen(context, builder, sig, args):
        vty, size = _vector(context, acc.dtype)
        fma = _fma(builder, vty, size)
        T_, V_, sw_ = args[13], args[14], args[10]
        unit = builder.zext(builder.icmp_signed("==", sw_, ir.Constant(I64, 1)), I64)
        key = builder.add(builder.mul(builder.add(builder.mul(V_, ir.Constant(I64, 64)), T_),
                                      ir.Constant(I64, 2)), unit)
        done = builder.append_basic_block("weight.done")
        switch = builder.switch(key, done)
        for v in (1, 2):
            for t in _tap_blocks(v):
                for u in (0, 1):
                    case = builder.append_basic_block("weight.T%dV%d%s" % (t, v, "s1" * u))
                    switch.add_case(ir.Constant(I64, (v * 64 + t) * 2 + u), case)
                    builder.position_at_end(case)
                    _emit_weight(builder, fma, vty, size, args[:13], t, v,
                                 ir.Constant(I64, 1) if u else sw_)
                    builder.branch(done)
        builder.position_at_end(done)
        return context.get_dummy_value()
    sig = types.void(acc, types.intp, x, g, off, *[types.intp] * 10)
    return sig, codegen


def slide_groups(S):
    """Largest group count G of the sliding weight kernel at width S (V = 1): G*S accumulators,
    G windows of S broadcasts and one gy vector fit the registers."""
    return (REGISTERS - 1) // (2 * S)


def _emit_weight_slide(builder, fma, vty, size, args, G, S):
    """The sliding weight micro-kernel for literal G groups of S taps (see ``_weight_slide``)."""
    accp, abase, xp, gp, op, obase, xbase, rows, xrow, cols, gbase, kp = args
    L = vty.count
    T = G * S
    offs = [builder.add(builder.load(_at(builder, op, builder.add(
        obase, ir.Constant(I64, g * S)))), xbase) for g in range(G)]
    slots = [builder.add(abase, builder.mul(kp, ir.Constant(I64, t))) for t in range(T)]
    inits = [_vload(builder, accp, s_, vty, size) for s_ in slots]
    gpix = builder.mul(cols, kp)

    def bcast(index):
        return _broadcast(builder, builder.load(_at(builder, xp, index)), vty)

    def row(i, accs):
        xi = builder.mul(i, xrow)
        gi = builder.add(gbase, builder.mul(i, gpix))
        xrs = [builder.add(o, xi) for o in offs]
        # window of each group: x[xr + j + s] for s < S - 1, carried from pixel to pixel
        wins = [bcast(builder.add(xr, ir.Constant(I64, s_))) for xr in xrs for s_ in range(S - 1)]

        def pixel(j, state):
            accs, wins = list(state[:T]), state[T:]
            gv = _vload(builder, gp, builder.add(gi, builder.mul(j, kp)), vty, size)
            new_wins = []
            for g in range(G):
                w = list(wins[g * (S - 1):(g + 1) * (S - 1)])
                w.append(bcast(builder.add(builder.add(xrs[g], j), ir.Constant(I64, S - 1))))
                for s_ in range(S):
                    accs[g * S + s_] = builder.call(fma, [w[s_], gv, accs[g * S + s_]])
                new_wins += w[1:]
            return accs + new_wins
        return _loop(builder, cols, list(accs) + wins, pixel)[:T]
    accs = _loop(builder, rows, inits, row)
    for s_, a in zip(slots, accs):
        _vstore(builder, a, accp, s_, vty, size)


@intrinsic
def _weight_slide(typingctx, acc, abase, x, g, off, obase, xbase, rows, xrow, cols, gbase, Kp,
                  G, S):
    """``_weight_block`` at V = 1 and unit stride for T = G*S taps in G runs of S unit steps
    (off[obase + g*S + s] == off[obase + g*S] + s): per pixel each group broadcasts one new
    input and reuses S - 1 from the pixel before (a window carried in registers), instead of one
    broadcast per FMA; same products in the same order. G in 1..``slide_groups(S)``, S one of
    SLIDE_WIDTHS (runtime values: a switch over the unrolled kernels)."""
    def codegen(context, builder, sig, args):
        vty, size = _vector(context, acc.dtype)
        fma = _fma(builder, vty, size)
        key = builder.add(builder.mul(args[12], ir.Constant(I64, 16)), args[13])
        done = builder.append_basic_block("wslide.done")
        switch = builder.switch(key, done)
        for w_ in SLIDE_WIDTHS:
            for g in range(1, slide_groups(w_) + 1):
                case = builder.append_basic_block("wslide.G%dS%d" % (g, w_))
                switch.add_case(ir.Constant(I64, g * 16 + w_), case)
                builder.position_at_end(case)
                _emit_weight_slide(builder, fma, vty, size, args[:12], g, w_)
                builder.branch(done)
        builder.position_at_end(done)
        return context.get_dummy_value()
    sig = types.void(acc, types.intp, x, g, off, *[types.intp] * 9)
    return sig, codegen


def _transpose_registers(builder, vs):
    """Transpose the L x L tile held in the L vectors ``vs`` (row r in vs[r]): log2(L) rounds of
    L two-vector shuffles, round b swapping the off-diagonal b x b blocks of every 2b x 2b
    block. Returns the L columns."""
    L = len(vs)
    i32 = ir.IntType(32)
    vs = list(vs)
    b = L // 2
    while b:
        lo_mask = ir.Constant(ir.VectorType(i32, L),
                              [c if c & b == 0 else L + c - b for c in range(L)])
        hi_mask = ir.Constant(ir.VectorType(i32, L),
                              [c + b if c & b == 0 else L + c for c in range(L)])
        for r in range(L):
            if r & b == 0:
                a, c = vs[r], vs[r + b]
                vs[r] = builder.shuffle_vector(a, c, lo_mask)
                vs[r + b] = builder.shuffle_vector(a, c, hi_mask)
        b //= 2
    return vs


@intrinsic
def _transpose_tile(typingctx, dst, dbase, drow, src, sbase, srow, rows):
    """dst[dbase + p*drow + r] = src[sbase + r*srow + p] for p, r < L (one L x L tile), reading
    zeros for rows r >= ``rows``: L vector loads, ``_transpose_registers``, L vector stores."""
    def codegen(context, builder, sig, args):
        dp, dbase, drow, sp, sbase, srow, rows = args
        vty, size = _vector(context, dst.dtype)
        L = vty.count
        zero = ir.Constant(vty, [0.0] * L)
        last = builder.sub(rows, ir.Constant(I64, 1))
        vs = []
        for r in range(L):
            rc = ir.Constant(I64, r)
            rr = builder.select(builder.icmp_signed("<", rc, rows), rc, last)
            v = _vload(builder, sp, builder.add(sbase, builder.mul(rr, srow)), vty, size)
            vs.append(builder.select(builder.icmp_signed("<", rc, rows), v, zero))
        for p, v in enumerate(_transpose_registers(builder, vs)):
            _vstore(builder, v, dp, builder.add(dbase, builder.mul(ir.Constant(I64, p), drow)),
                    vty, size)
        return context.get_dummy_value()
    sig = types.void(dst, types.intp, types.intp, src, types.intp, types.intp, types.intp)
    return sig, codegen


def _masked_store(builder, value, ptr, index, bits, vty, size):
    """Store the lanes of ``value`` selected by the L-bit integer ``bits`` (bit l: lane l) at
    ptr[index:] with ``llvm.masked.store`` (one k-masked vector store with AVX-512). The name is
    the typed-pointer mangling, which LLVM with opaque pointers remangles."""
    L = vty.count
    mty = ir.VectorType(ir.IntType(1), L)
    name = "llvm.masked.store.v{0}{1}.p0v{0}{1}".format(L, "f32" if size == 4 else "f64")
    fnty = ir.FunctionType(ir.VoidType(), [vty, vty.as_pointer(), ir.IntType(32), mty])
    fn = cgutils.get_or_insert_function(builder.module, fnty, name)
    mask = builder.bitcast(builder.trunc(bits, ir.IntType(L)), mty)
    builder.call(fn, [value, builder.bitcast(_at(builder, ptr, index), vty.as_pointer()),
                      ir.Constant(ir.IntType(32), size), mask])


@intrinsic
def _transpose_tile_masked(typingctx, dst, dbase, drow, src, sbase, srow, cols, count):
    """dst[dbase + p*drow + r] = src[sbase + r*srow + p] for p < ``count``, r < ``cols`` (both
    at most L): L vector loads (all L rows of src must be readable), ``_transpose_registers``,
    ``count`` masked stores of ``cols`` lanes."""
    def codegen(context, builder, sig, args):
        dp, dbase, drow, sp, sbase, srow, cols, count = args
        vty, size = _vector(context, dst.dtype)
        L = vty.count
        vs = [_vload(builder, sp, builder.add(sbase, builder.mul(ir.Constant(I64, r), srow)),
                     vty, size) for r in range(L)]
        one = ir.Constant(I64, 1)
        bits = builder.sub(builder.shl(one, cols), one)
        zero = ir.Constant(I64, 0)
        for p, v in enumerate(_transpose_registers(builder, vs)):
            pc = ir.Constant(I64, p)
            m = builder.select(builder.icmp_signed("<", pc, count), bits, zero)
            _masked_store(builder, v, dp, builder.add(dbase, builder.mul(pc, drow)), m, vty, size)
        return context.get_dummy_value()
    sig = types.void(dst, types.intp, types.intp, src, types.intp, types.intp, types.intp,
                     types.intp)
    return sig, codegen


@njit(cache=CACHE, nogil=True)
def _pad_image(dst, x, n, pt, pl, Hp, Wp):
    """The interior of ``dst`` (C*Hp*Wp, its border already zero) <- image ``n`` of ``x``."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    for c in range(C):
        for i in range(H):
            row = dst[(c * Hp + pt + i) * Wp + pl:]
            for j in range(W):
                row[j] = x[n, c, i, j]


@njit(cache=CACHE, nogil=True)
def forward(x, pt, pb, pl, pr, wp, bp, rs, off, y, sh, sw, P, V, S, relu, lo, hi):
    """y[n, k, i, j] = sum_t xp[n, off[t] + i*sh*Wp + j*sw] * wp[t, k] for images n in [lo, hi),
    xp[n] image n of ``x`` (N, C, H, W; C-contiguous) zero-padded by (pt, pb, pl, pr) and
    flattened: each image is padded into a scratch plane as it is reached (it stays in cache for
    its taps; a padding copy of the whole batch before the call was serial, 0.59 of a 1.7 ms
    (64,16,32,32) 3x3 layer on two threads), the image itself when there is no padding. ``wp``
    is the weight repacked as (C*R*S, Kp) with Kp a multiple of V vectors (zero columns beyond
    K), ``off`` the offset of each tap (c, r, s) in a flattened padded image. Output pixels are done P at a time
    (the last block of a row shifted left to end at the row's end); P is one of
    ``forward_pixels(V)``; S > 0 runs the sliding variant of width S (see ``_forward_block``).
    Each
    block's accumulators go to a row buffer (pixels, Kp) as whole vectors, and the finished row
    is transposed into y in L x L register tiles (masked stores at the row's end and beyond K),
    after adding the bias ``bp`` (Kp,) to its sums when bp is not empty (as a separate add of
    the bias would). Then, per image while it is in cache, the residual ``rs`` (N, K*Ho*Wo; when
    not empty) is added and ReLU applied when ``relu`` (NaN propagates), in eager's order.
    ``y`` must be C-contiguous."""
    N, K, Ho, Wo = y.shape
    bias = bp.shape[0] > 0
    taps, Ks = wp.shape
    Hp, Wp = x.shape[2] + pt + pb, x.shape[3] + pl + pr
    plane = x.shape[1] * Hp * Wp
    pad = pt > 0 or pb > 0 or pl > 0 or pr > 0
    scratch = np.zeros(plane if pad else 0, wp.dtype)
    L = VECTOR_BYTES // wp.itemsize
    KB = V * L
    Kp = -(-K // KB) * KB
    HW = Ho * Wo
    # one output row as (pixels, Kp), padded to whole L x L tiles; rows shorter than L: the
    # whole image, transposed in tiles of L consecutive pixels of the plane (LeNet conv2: 7
    # full tiles instead of 10 of 10 pixels)
    short = Wo < L
    rowbuf = np.empty((-(-(HW if short else Wo) // L) * L) * Ks, wp.dtype)
    R, W, O, Y = _data(rowbuf), _data(wp), _data(off), _data(y)
    X = _data(scratch) if pad else _data(x)
    for n in range(lo, hi):
        xb = 0
        if pad:
            _pad_image(scratch, x, n, pt, pl, Hp, Wp)
        else:
            xb = n * plane
        for i in range(Ho):
            rb = i * Wo if short else 0
            for j0 in range(0, Wo, P):
                j0 = min(j0, Wo - P)
                base = xb + i * sh * Wp + j0 * sw
                for kb in range(0, Kp, KB):
                    _forward_block(R, (rb + j0) * Ks, X, W, O, taps, base, sw, kb, Ks, P, V, S)
            if bias and not short:
                _add_bias(rowbuf, bp, 0, Wo, Ks)
            if not short:
                for kb in range(0, K, L):
                    for q0 in range(0, Wo, L):
                        _transpose_tile_masked(Y, (n * K + kb) * HW + i * Wo + q0, HW,
                                               R, q0 * Ks + kb, Ks, min(L, Wo - q0), K - kb)
        if short:
            if bias:
                _add_bias(rowbuf, bp, 0, HW, Ks)
            for kb in range(0, K, L):
                for q0 in range(0, HW, L):
                    _transpose_tile_masked(Y, (n * K + kb) * HW + q0, HW, R, q0 * Ks + kb, Ks,
                                           min(L, HW - q0), K - kb)
        if rs.shape[0] > 0 or relu:
            _residual_relu(y[n].reshape(K * HW), rs, n, relu)


@njit(cache=CACHE, nogil=True)
def _residual_relu(out, rs, n, relu):
    """out += rs[n] (when rs is not empty), then ReLU (``v < 0`` -> 0: NaN stays) if ``relu``."""
    zero = out.dtype.type(0)
    if rs.shape[0] > 0:
        r = rs[n]
        for p in range(out.shape[0]):
            v = out[p] + r[p]
            out[p] = zero if (relu and v < zero) else v
    else:
        for p in range(out.shape[0]):
            v = out[p]
            out[p] = zero if v < zero else v


@njit(cache=CACHE, nogil=True)
def _add_bias(buf, bp, p0, p1, Ks):
    """buf[p*Ks + k] += bp[k] for pixels p in [p0, p1) of a row buffer of row stride Ks."""
    for p in range(p0, p1):
        row = buf[p * Ks:]
        for k in range(bp.shape[0]):
            row[k] += bp[k]


@njit(cache=CACHE, nogil=True)
def _tap_block(left, V):
    """Taps in the next block when ``left`` remain: MAX_TAPS[V - 1], else the largest power of two
    <= left (no block is padded with junk taps)."""
    top = MAX_TAPS[V - 1]
    if left >= top:
        return top
    T = 1
    while 2 * T <= left:
        T *= 2
    return T


@njit(cache=CACHE, nogil=True)
def _transpose(G, Kp, GY, src, K, HW, L):
    """G[q*Kp + k] = GY[src + k*HW + q] for k < K, q < HW, and 0 for K <= k < K rounded up to L:
    L x L tiles, the last tile of each row block shifted left to end at HW (rewriting a few
    entries with the same values); scalar when HW < L."""
    if HW < L:
        for k in range(K):
            for q in range(HW):
                G[q * Kp + k] = GY[src + k * HW + q]
        return
    for kb in range(0, K, L):
        for q0 in range(0, HW, L):
            q0 = min(q0, HW - L)
            _transpose_tile(G, q0 * Kp + kb, Kp, GY, src + kb * HW + q0, HW, K - kb)


@njit(cache=CACHE, nogil=True)
def weight(gy, x, pt, pb, pl, pr, off, sh, sw, Kp, V, S, lo, hi):
    """Return gw (taps, Kp) with gw[t, k] = sum over images n in [lo, hi) and output pixels (i, j)
    of xp[n, off[t] + i*sh*Wp + j*sw] * gy[n, k, i, j] (columns k >= K are zero), xp[n] image n
    of ``x`` padded and flattened as in ``forward`` (in a scratch plane, image by image). Per image,
    gy is transposed to gt (Ho*Wo, Kp); then per tap block (``_tap_block``) and K block of V
    vectors one ``_weight_block`` call runs over the whole image; S > 0 (V = 1, stride 1, taps
    in runs of S unit steps): ``_weight_slide`` blocks of ``slide_groups(S)`` runs instead.
    ``gy`` must be C-contiguous."""
    N, K, Ho, Wo = gy.shape
    taps = off.shape[0]
    Hp, Wp = x.shape[2] + pt + pb, x.shape[3] + pl + pr
    plane = x.shape[1] * Hp * Wp
    pad = pt > 0 or pb > 0 or pl > 0 or pr > 0
    scratch = np.zeros(plane if pad else 0, x.dtype)
    L = VECTOR_BYTES // x.itemsize
    gw = np.zeros((taps, Kp), x.dtype)
    gt = np.zeros((Ho * Wo, Kp), x.dtype)
    A, G, O, GY = _data(gw), _data(gt), _data(off), _data(gy)
    X = _data(scratch) if pad else _data(x)
    HW = Ho * Wo
    for n in range(lo, hi):
        _transpose(G, Kp, GY, n * K * HW, K, HW, L)
        xb = 0
        if pad:
            _pad_image(scratch, x, n, pt, pl, Hp, Wp)
        else:
            xb = n * plane
        t0 = 0
        if S > 0:
            GS = (REGISTERS - 1) // (2 * S) * S   # slide_groups(S) runs
            while t0 < taps:
                T = min(GS, taps - t0)
                for kb in range(0, Kp, L):
                    _weight_slide(A, t0 * Kp + kb, X, G, O, t0, xb, Ho, sh * Wp, Wo, kb, Kp,
                                  T // S, S)
                t0 += T
        while t0 < taps:
            T = _tap_block(taps - t0, V)
            for kb in range(0, Kp, V * L):
                _weight_block(A, t0 * Kp + kb, X, G, O, t0, xb, Ho, sh * Wp, Wo, sw, kb, Kp, T, V)
            t0 += T
    return gw


@njit(cache=CACHE, nogil=True, parallel=True)
def forward_parallel(x, pt, pb, pl, pr, wp, bp, rs, off, y, sh, sw, P, V, S, relu, parts):
    """``forward`` over all images, ``parts`` runs of images in a ``prange`` on Numba's threading
    layer (used when it is TBB, see ``ember.kernels.runtime.threads``)."""
    N = y.shape[0]
    for r in prange(parts):
        lo, hi = run_bounds(N, parts, r)
        if lo < hi:
            forward(x, pt, pb, pl, pr, wp, bp, rs, off, y, sh, sw, P, V, S, relu, lo, hi)


@njit(cache=CACHE, nogil=True)
def forward_rows(xp, wp, bp, rs, off, y, sh, sw, P, V, S, relu, rowbuf, i0, i1):
    """Output rows [i0, i1) of every image of ``forward`` on an input ``xp`` that is already
    zero-padded (no scratch plane), with a caller's ``rowbuf`` (at least Wo rounded up to L
    pixels times Kp): the inference plan's convolutions of a batch of one (``ember.jit.plan``,
    mode "direct"). Rows at least L pixels long only (no whole-image transpose); bias, residual
    and ReLU as in ``forward``, in the same order (the same bits), the residual and ReLU per
    channel over the rows just written."""
    N, K, Ho, Wo = y.shape
    bias = bp.shape[0] > 0
    taps, Ks = wp.shape
    Hp, Wp = xp.shape[2], xp.shape[3]
    plane = xp.shape[1] * Hp * Wp
    L = VECTOR_BYTES // wp.itemsize
    KB = V * L
    Kp = -(-K // KB) * KB
    HW = Ho * Wo
    res = rs.shape[0] > 0
    yf = y.reshape(N * K * HW)
    R, W, O, Y, X = _data(rowbuf), _data(wp), _data(off), _data(y), _data(xp)
    for n in range(N):
        xb = n * plane
        for i in range(i0, i1):
            for j0 in range(0, Wo, P):
                j0 = min(j0, Wo - P)
                base = xb + i * sh * Wp + j0 * sw
                for kb in range(0, Kp, KB):
                    _forward_block(R, j0 * Ks, X, W, O, taps, base, sw, kb, Ks, P, V, S)
            if bias:
                _add_bias(rowbuf, bp, 0, Wo, Ks)
            for kb in range(0, K, L):
                for q0 in range(0, Wo, L):
                    _transpose_tile_masked(Y, (n * K + kb) * HW + i * Wo + q0, HW,
                                           R, q0 * Ks + kb, Ks, min(L, Wo - q0), K - kb)
        if res or relu:     # per channel, its rows [i0, i1): one contiguous run
            for k in range(K):
                o = (n * K + k) * HW + i0 * Wo
                m = (i1 - i0) * Wo
                if res:
                    q = k * HW + i0 * Wo
                    _add_relu_run(yf[o:o + m], rs[n, q:q + m], relu)
                else:
                    _relu_run(yf[o:o + m])


@njit(cache=CACHE, nogil=True, parallel=True)
def forward_rows_split(xp, wp, bp, rs, off, y, sh, sw, P, V, S, relu, rowbufs, parts):
    """``forward_rows`` of a batch of one over ``parts`` runs of output rows in a ``prange``,
    part r with the row buffer ``rowbufs[r]``: the inference plan's mode "direct_split"
    (``ember.jit.plan``). The same products in the same order as one call: the same bits."""
    Ho = y.shape[2]
    for r in prange(parts):
        lo, hi = run_bounds(Ho, parts, r)
        if lo < hi:
            forward_rows(xp, wp, bp, rs, off, y, sh, sw, P, V, S, relu, rowbufs[r], lo, hi)


@njit(cache=CACHE, nogil=True)
def _add_relu_run(out, r, relu):
    """out += r, then ReLU (``v < 0`` -> 0: NaN stays) if ``relu``."""
    zero = out.dtype.type(0)
    if relu:
        for p in range(out.shape[0]):
            v = out[p] + r[p]
            out[p] = zero if v < zero else v
    else:
        for p in range(out.shape[0]):
            out[p] += r[p]


@njit(cache=CACHE, nogil=True)
def _relu_run(out):
    zero = out.dtype.type(0)
    for p in range(out.shape[0]):
        v = out[p]
        out[p] = zero if v < zero else v


@njit(cache=CACHE, nogil=True)
def pad_rows(x, ph, pw, xp):
    """x (N, C, H, W) into the interior of xp (N, C, H + 2ph, W + 2pw; its border stays zero)
    row by row with vector copies (``_copy_run``): 2.3 us for (1, 16, 32, 32), where an
    element loop took 6. Both C-contiguous."""
    N, C, H, W = x.shape
    Hp, Wp = xp.shape[2], xp.shape[3]
    X, XP = _data(x), _data(xp)
    for n in range(N):
        for c in range(C):
            for i in range(H):
                _copy_run(XP, ((n * C + c) * Hp + i + ph) * Wp + pw, X,
                          ((n * C + c) * H + i) * W, W)


@njit(cache=CACHE, nogil=True)
def forward_image(x, xp, ph, pw, wp, bp, rs, off, acc, z, y, sh, sw, P, V, S, relu, kh, kw, qh,
                  qw):
    """``forward`` of one image x (1, C, H, W) padded by ``pad_rows`` into the interior of the
    zero-bordered ``xp`` (1, C, H + 2ph, W + 2pw; ph = pw = 0: xp is x), for rows of any
    length and an optional max pool after it: the inference plan's convolutions of a batch of
    one (``ember.jit.plan``, mode "direct") that ``forward_rows`` does not take. Every output
    pixel's sums go into ``acc`` ((Ho*Wo rounded up to L) * Kp, pixel-major), which is
    transposed in L x L register tiles into NCHW order: without a pool
    (kh = kw = qh = qw = 1) into y (1, K, Ho, Wo), bias added before the transpose, then the
    residual ``rs`` (1, K*Ho*Wo, or empty) and ReLU, as ``forward`` (``z`` unused); with one,
    into the plane buffer ``z`` (K, Ho, Wo), then y (1, K, Hy, Wy) is the max pool (kh, kw,
    stride qh, qw, no padding) of act(z + bias): the window's first maximum wins, NaN
    propagating, and bias and ReLU follow the maximum (both monotone), as
    ``fused_numba.conv_pool_epilogue``. The sums are ``forward``'s (the same products in the
    same order)."""
    if ph > 0 or pw > 0:
        pad_rows(x, ph, pw, xp)
    Ho = z.shape[1] if not (kh == 1 and kw == 1 and qh == 1 and qw == 1) else y.shape[2]
    _image_sums(xp, wp, off, acc, z, y, sh, sw, P, V, S, kh, kw, qh, qw, 0, Ho, 0,
                -(-y.shape[1] // (V * (VECTOR_BYTES // wp.itemsize))))
    _image_epilogue(bp, rs, acc, z, y, wp.shape[1], relu, kh, kw, qh, qw)


@njit(cache=CACHE, nogil=True, parallel=True)
def forward_image_split(x, xp, ph, pw, wp, bp, rs, off, acc, z, y, sh, sw, P, V, S, relu, kh, kw,
                        qh, qw, parts):
    """``forward_image`` with the sums in ``parts`` runs in a ``prange`` (the padding and the
    epilogue on the calling thread): runs of the weight's column panels over all rows when
    there are at least ``parts`` panels (each panel is read from memory once: a deep layer's
    weight does not fit in cache, and runs of rows each streamed all of it), else runs of
    rows. The inference plan's mode "direct_split" (``ember.jit.plan``). Each pixel's sums are
    the same products in the same order: the same bits. Needs a pixel block P at most Wo (no
    block shifted into the row before)."""
    if ph > 0 or pw > 0:
        pad_rows(x, ph, pw, xp)
    Ho = z.shape[1] if not (kh == 1 and kw == 1 and qh == 1 and qw == 1) else y.shape[2]
    KB = V * (VECTOR_BYTES // wp.itemsize)
    panels = -(-y.shape[1] // KB)
    by_panels = panels >= parts
    for r in prange(parts):
        if by_panels:
            k0, k1 = run_bounds(panels, parts, r)
            _image_sums(xp, wp, off, acc, z, y, sh, sw, P, V, S, kh, kw, qh, qw, 0, Ho, k0, k1)
        else:
            lo, hi = run_bounds(Ho, parts, r)
            if lo < hi:
                _image_sums(xp, wp, off, acc, z, y, sh, sw, P, V, S, kh, kw, qh, qw, lo, hi, 0,
                            panels)
    _image_epilogue(bp, rs, acc, z, y, wp.shape[1], relu, kh, kw, qh, qw)


@njit(cache=CACHE, nogil=True)
def _image_sums(xp, wp, off, acc, z, y, sh, sw, P, V, S, kh, kw, qh, qw, i0, i1, k0, k1):
    """The sums of ``forward_image``'s output rows [i0, i1) and column panels [k0, k1) (of V
    vectors) into ``acc`` (pixel-major)."""
    pool = not (kh == 1 and kw == 1 and qh == 1 and qw == 1)
    Wo = z.shape[2] if pool else y.shape[3]
    taps, Ks = wp.shape
    Wp = xp.shape[3]
    KB = V * (VECTOR_BYTES // wp.itemsize)
    A, W, O, X = _data(acc), _data(wp), _data(off), _data(xp)
    for kb in range(k0 * KB, k1 * KB, KB):   # a column panel stays in cache over the rows
        for i in range(i0, i1):
            for j0 in range(0, Wo, P):
                j0 = min(j0, Wo - P)
                base = i * sh * Wp + j0 * sw
                _forward_block(A, (i * Wo + j0) * Ks, X, W, O, taps, base, sw, kb, Ks, P, V, S)


@njit(cache=CACHE, nogil=True)
def _image_epilogue(bp, rs, acc, z, y, Ks, relu, kh, kw, qh, qw):
    """``forward_image``'s sums in ``acc`` to its output: bias, transpose into NCHW, residual and
    ReLU, or the max pool."""
    pool = not (kh == 1 and kw == 1 and qh == 1 and qw == 1)
    K = y.shape[1]
    Ho, Wo = (z.shape[1], z.shape[2]) if pool else (y.shape[2], y.shape[3])
    L = VECTOR_BYTES // acc.itemsize
    HW = Ho * Wo
    A = _data(acc)
    bias = bp.shape[0] > 0
    if bias and not pool:
        _add_bias(acc, bp, 0, HW, Ks)
    D = _data(z) if pool else _data(y)
    for kb in range(0, K, L):
        for q0 in range(0, HW, L):
            _transpose_tile_masked(D, kb * HW + q0, HW, A, q0 * Ks + kb, Ks, min(L, HW - q0),
                                   K - kb)
    if not pool:
        if rs.shape[0] > 0 or relu:
            _residual_relu(y[0].reshape(K * HW), rs, 0, relu)
        return
    Hy, Wy = y.shape[2], y.shape[3]
    zero = z.dtype.type(0)
    if kh == 2 and kw == 2 and qh == 2 and qw == 2:
        for k in range(K):
            bk = bp[k] if bias else zero
            for i in range(Hy):
                for j in range(Wy):
                    m = _max4(z[k, 2 * i, 2 * j], z[k, 2 * i, 2 * j + 1], z[k, 2 * i + 1, 2 * j],
                              z[k, 2 * i + 1, 2 * j + 1])
                    if bias:
                        m = m + bk
                    y[0, k, i, j] = zero if (relu and m < zero) else m
        return
    for k in range(K):
        bk = bp[k] if bias else zero
        for i in range(Hy):
            for j in range(Wy):
                m = z[k, i * qh, j * qw]
                for a in range(kh):
                    for c in range(kw):
                        v = z[k, i * qh + a, j * qw + c]
                        m = v if (v > m or v != v) and m == m else m
                if bias:
                    m = m + bk
                y[0, k, i, j] = zero if (relu and m < zero) else m


@njit(cache=CACHE, nogil=True)
def linear_rows(x, xt, wp, off, y, P, V, b0, b1, transpose):
    """y[n, k] = sum over c of x[n, c] * wp[c, k] (a linear layer's product x @ w.T, as a 1x1
    convolution whose pixels are the rows n of x) for the blocks of V*L columns k in
    [b0*V*L, b1*V*L): per column block and block of P rows, the forward micro-kernel's P*V
    vector accumulators in registers over every c, stored once into y (N, Kp) (Kp = wp's
    columns, a multiple of V*L). It reads x transposed, xt (Cin, Np) (Np = N rounded up to L,
    ``off[c]`` = c*Np), which ``transpose`` first writes in L x L register tiles (NumPy's
    transposed copy of a (64, 512) float32 x took 27 us, four times the product with 10
    columns). The column block's weight panel stays in cache over the rows. The inference
    plan's linear steps of several rows (mode "direct", ``ember.jit.plan``); rows P at a time,
    the last block shifted back to end at N (N >= P)."""
    N, Cin = x.shape
    Kp = wp.shape[1]
    Np = xt.shape[1]
    L = VECTOR_BYTES // wp.itemsize
    KB = V * L
    Y, X, W, O = _data(y), _data(xt), _data(wp), _data(off)
    if transpose:
        _transpose(X, Np, _data(x), 0, N, Cin, L)
    for kb in range(b0 * KB, b1 * KB, KB):
        for n0 in range(0, N, P):
            n0 = min(n0, N - P)
            _forward_block(Y, n0 * Kp, X, W, O, Cin, n0, 1, kb, Kp, P, V, 0)


@njit(cache=CACHE, nogil=True, parallel=True)
def weight_parallel(gy, x, pt, pb, pl, pr, off, sh, sw, Kp, V, S, parts):
    """``weight`` over all images, ``parts`` runs of images in a ``prange``; the runs' partial
    sums are added in run order (the same bits for a given ``parts``)."""
    N = gy.shape[0]
    taps = off.shape[0]
    partial = np.zeros((parts, taps, Kp), x.dtype)
    for r in prange(parts):
        lo, hi = run_bounds(N, parts, r)
        if lo < hi:
            g = weight(gy, x, pt, pb, pl, pr, off, sh, sw, Kp, V, S, lo, hi)
            # element loop: ``partial[r] = g`` compiles Numba's shape-mismatch message code
            # (string formatting, several seconds of a cold first call)
            for t in range(taps):
                for k in range(Kp):
                    partial[r, t, k] = g[t, k]
    gw = partial[0].copy()
    for r in range(1, parts):
        gw += partial[r]
    return gw


# ------------------------------------------------------------------------------ input gradient
# Stride-1 input gradient along rows of gx: a block of P gx rows x VX vectors of columns x CB
# channels of vector accumulators; per tap (r, k, s) P*VX vector loads of the zero-padded gy and
# one broadcast weight per channel feed P*VX*CB FMAs (the layout of ``thin``'s forward, here
# without a full zero-padded problem: only the taps whose gy rows exist are run).
INPUT_ROWS = (1, 2)
INPUT_VECTORS = (1, 2)
INPUT_MAX_CHANNELS = 8


def input_channels(P, VX):
    """Largest channel block of the input-gradient micro-kernel at P rows x VX vectors: P*VX*CB
    accumulators, P*VX gy vectors and a broadcast within the vector registers (at most
    INPUT_MAX_CHANNELS)."""
    return min(INPUT_MAX_CHANNELS, (REGISTERS - 1 - P * VX) // (P * VX))


def _emit_input(builder, fma, vty, size, args, P, VX, CB):
    gxp, gxbase, gxrow, gxplane, gqp, base, gqrow, wtp, wbase, wrow, op, t0, nt, cols = args
    L = vty.count

    def tap(t, accs):
        ti = builder.add(t0, t)
        o = builder.add(builder.load(_at(builder, op, ti)), base)
        gs = [_vload(builder, gqp, builder.add(o, builder.add(
            builder.mul(gqrow, ir.Constant(I64, p)), ir.Constant(I64, v * L))), vty, size)
            for p in range(P) for v in range(VX)]
        row = builder.add(builder.mul(ti, wrow), wbase)
        out = []
        for c in range(CB):
            wc = _broadcast(builder, builder.load(_at(builder, wtp, builder.add(
                row, ir.Constant(I64, c)))), vty)
            out += [builder.call(fma, [gs[q], wc, accs[c * P * VX + q]]) for q in range(P * VX)]
        return out
    zero = ir.Constant(vty, [0.0] * L)
    accs = _loop(builder, nt, [zero] * (CB * P * VX), tap)
    one = ir.Constant(I64, 1)
    izero = ir.Constant(I64, 0)
    bits = []
    for v in range(VX):
        n = builder.sub(cols, ir.Constant(I64, v * L))
        n = builder.select(builder.icmp_signed("<", n, izero), izero, n)
        full = ir.Constant(I64, L)
        n = builder.select(builder.icmp_signed(">", n, full), full, n)
        bits.append(builder.sub(builder.shl(one, n), one))
    for c in range(CB):
        cbase = builder.add(gxbase, builder.mul(gxplane, ir.Constant(I64, c)))
        for p in range(P):
            rbase = builder.add(cbase, builder.mul(gxrow, ir.Constant(I64, p)))
            for v in range(VX):
                _masked_store(builder, accs[c * P * VX + p * VX + v], gxp,
                              builder.add(rbase, ir.Constant(I64, v * L)), bits[v], vty, size)


@intrinsic
def _input_block(typingctx, gx, gxbase, gxrow, gxplane, gq, base, gqrow, wt, wbase, wrow, off,
                 t0, nt, cols, P, VX, CB):
    """gx[gxbase + c*gxplane + p*gxrow + q] = sum over taps t in [t0, t0 + nt) of
    gq[base + off[t] + p*gqrow + q] * wt[t*wrow + wbase + c] for c < CB, p < P and the first
    ``cols`` of q < VX*L columns (masked stores): CB*P*VX vector accumulators in registers. P, VX
    and CB are runtime values: a switch over one unrolled kernel per (P, VX, CB)."""
    def codegen(context, builder, sig, args):
        vty, size = _vector(context, gx.dtype)
        fma = _fma(builder, vty, size)
        P_, VX_, CB_ = args[14], args[15], args[16]
        key = builder.add(builder.mul(builder.add(builder.mul(P_, ir.Constant(I64, 4)), VX_),
                                      ir.Constant(I64, 64)), CB_)
        done = builder.append_basic_block("input.done")
        switch = builder.switch(key, done)
        for p in INPUT_ROWS:
            for v in INPUT_VECTORS:
                for cb in range(1, input_channels(p, v) + 1):
                    case = builder.append_basic_block("input.P%dV%dC%d" % (p, v, cb))
                    switch.add_case(ir.Constant(I64, (p * 4 + v) * 64 + cb), case)
                    builder.position_at_end(case)
                    _emit_input(builder, fma, vty, size, args[:14], p, v, cb)
                    builder.branch(done)
        builder.position_at_end(done)
        return context.get_dummy_value()
    sig = types.void(gx, *[types.intp] * 3, gq, types.intp, types.intp, wt, types.intp,
                     types.intp, off, *[types.intp] * 6)
    return sig, codegen


def _masked_load(builder, ptr, index, bits, vty, size):
    """Load the lanes of ptr[index:] selected by the L-bit integer ``bits`` (others zero) with
    ``llvm.masked.load`` (lanes outside the mask are not read)."""
    L = vty.count
    mty = ir.VectorType(ir.IntType(1), L)
    name = "llvm.masked.load.v{0}{1}.p0v{0}{1}".format(L, "f32" if size == 4 else "f64")
    fnty = ir.FunctionType(vty, [vty.as_pointer(), ir.IntType(32), mty, vty])
    fn = cgutils.get_or_insert_function(builder.module, fnty, name)
    mask = builder.bitcast(builder.trunc(bits, ir.IntType(L)), mty)
    return builder.call(fn, [builder.bitcast(_at(builder, ptr, index), vty.as_pointer()),
                             ir.Constant(ir.IntType(32), size), mask,
                             ir.Constant(vty, [0.0] * L)])


@intrinsic
def _copy_run(typingctx, dst, dbase, src, sbase, n):
    """dst[dbase + i] = src[sbase + i] for i < n: whole vectors, then one masked load and store
    (a scalar loop copying LeNet conv2's gy rows of 10 into the input gradient's scratch took
    ~30 of its ~340 us)."""
    def codegen(context, builder, sig, args):
        dp, db, sp, sb, n_ = args
        vty, size = _vector(context, dst.dtype)
        L = ir.Constant(I64, vty.count)

        def body(i, _):
            o = builder.mul(i, L)
            _vstore(builder, _vload(builder, sp, builder.add(sb, o), vty, size), dp,
                    builder.add(db, o), vty, size)
            return []
        full = builder.sdiv(n_, L)
        _loop(builder, full, [], body)
        tail = builder.sub(n_, builder.mul(full, L))
        one = ir.Constant(I64, 1)
        bits = builder.sub(builder.shl(one, tail), one)
        o = builder.mul(full, L)
        v = _masked_load(builder, sp, builder.add(sb, o), bits, vty, size)
        _masked_store(builder, v, dp, builder.add(db, o), bits, vty, size)
        return context.get_dummy_value()
    return types.void(dst, types.intp, src, types.intp, types.intp), codegen


@njit(cache=CACHE, nogil=True)
def input_grad(gy, wt, off, gx, pt, pl, dh, R, PT, QL, Hq, Wq, P, VX, CB, lo, hi):
    """gx[n, c, y, x] = sum over (r, k, s) of wt[(r*K + k)*S + s, c] * gy[n, k, y + pt - r*dh,
    x + pl - s*dw] (zero outside gy) for images n in [lo, hi), stride 1. ``off[t]`` is tap t's
    offset in the padded gy image (k*Hq*Wq - r*dh*Wq - s*dw); each image of gy is copied into a
    zeroed (K, Hq, Wq) scratch with PT rows above and QL columns left of it (``gy`` must be
    C-contiguous). gx rows are done P
    at a time (the last block shifted up to end at H), each running only the taps r whose gy row
    exists for one of its rows; columns in segments of VX vectors (the last shifted left), and
    channels CB at a time (the remainder as a smaller block). ``gx`` must be C-contiguous."""
    N, K, Ho, Wo = gy.shape
    C, H, W = gx.shape[1], gx.shape[2], gx.shape[3]
    taps = off.shape[0]
    KS = taps // R
    L = VECTOR_BYTES // wt.itemsize
    XV = VX * L
    plane = Hq * Wq
    gq = np.zeros(K * plane, wt.dtype)
    GX, GQ, WT, O, GY = _data(gx), _data(gq), _data(wt), _data(off), _data(gy)
    HW = H * W
    for n in range(lo, hi):
        for k in range(K):
            for i in range(Ho):
                _copy_run(GQ, k * plane + (PT + i) * Wq + QL, GY, ((n * K + k) * Ho + i) * Wo,
                          Wo)
        for y0 in range(0, H, P):
            y0 = min(y0, H - P)
            # taps r whose gy row y + pt - r*dh lies in [0, Ho) for a row y of the block
            r_lo = max(0, -((Ho - 1 - y0 - pt) // dh))
            r_hi = min(R - 1, (y0 + P - 1 + pt) // dh)
            t0 = r_lo * KS
            nt = (r_hi - r_lo + 1) * KS
            if nt < 0:
                nt = 0
            for x0 in range(0, W, XV):
                if W >= XV:
                    x0 = min(x0, W - XV)
                cols = min(XV, W - x0)
                base = (PT + y0 + pt) * Wq + x0 + pl + QL
                for c0 in range(0, C, CB):
                    cb = min(CB, C - c0)
                    _input_block(GX, (n * C + c0) * HW + y0 * W + x0, W, HW, GQ, base, Wq, WT,
                                 c0, C, O, t0, nt, cols, P, VX, cb)


@njit(cache=CACHE, nogil=True, parallel=True)
def input_grad_parallel(gy, wt, off, gx, pt, pl, dh, R, PT, QL, Hq, Wq, P, VX, CB, parts):
    """``input_grad`` over all images, ``parts`` runs of images in a ``prange``."""
    N = gy.shape[0]
    for r in prange(parts):
        lo, hi = run_bounds(N, parts, r)
        if lo < hi:
            input_grad(gy, wt, off, gx, pt, pl, dh, R, PT, QL, Hq, Wq, P, VX, CB, lo, hi)
