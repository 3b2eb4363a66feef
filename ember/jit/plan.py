"""Inference plans: a frozen traced graph compiled for one set of input shapes.

A plan is built on the first call of a frozen trace (``ember.jit.optimize``, or a loaded file
without live parameters) with input shapes it has not seen, when no gradient is needed and
Numba is available. Building it runs the graph once with the reference interpreter (array mode)
to learn every value's shape and every traced size, then has ``codegen`` write one Python
function: the graph's array-mode code, with the plan's lowering rule (``InferencePlan._rule``)
writing the nodes it takes as steps with everything static bound in advance, and every traced
size a constant:

- ``conv2d`` (groups 1, float) with its epilogue -- the bias, a residual ``add`` whose other
  operand already exists, a ``relu``, a max pool without padding whose indices nobody reads --
  is one step: ``im2col`` into a column buffer shared by every convolution of the plan, one BLAS
  GEMM into a shared (K, N*Ho*Wo) buffer (``conv.parallel.matmul``: under the plan's thread
  policy one image's GEMM splits its rows over the TBB threads), and one fused epilogue
  kernel writing the NCHW result (``ember.kernels.conv.fused_numba``), over blocks of images
  whose columns stay in cache. Once its kernels are ready, each such step is timed against the
  transposed GEMM orientation and against ember's convolution engine (its own algorithm
  choice), each followed by the same epilogue, and, for a batch of one, against the direct
  kernel on operands packed at build time (mode "direct", and with two or more threads its
  output rows split over Numba's TBB threads, "direct_split"); the fastest is kept
  (``InferencePlan.autotune``);
- ``linear`` (2-d input) with a bias ``add`` and a ``relu`` after it is a GEMM into a
  preallocated buffer followed by one in-place bias + ReLU kernel, or, timed against it by
  ``autotune``, the direct convolution's register-blocked micro-kernel over the rows
  (``direct_numba.linear_rows``: OpenBLAS runs its AVX2 kernels on AMD Zen 5); at a batch
  of one or two, a matrix-vector product in Numba, and consecutive such layers, each the next
  one's only input, one step calling one kernel (``linear_numba.gemv_chain``, or
  ``gemv_chain_runs`` with the layers large enough to split over threads split);
- sizes (``size`` nodes and the int arithmetic on them) are constants of the plan (literals
  where an op reads them);
- a fusion group none of whose nodes a pattern above takes runs as its one fused kernel from
  ``fused.MIN_FUSED_SIZE`` elements, op by op below, as the generated array-mode code runs it;
- a ``cat`` of a batch of one is a view of a buffer its operands' convolution steps write into
  (``ember.jit.plan_concat``): no copy;
- every other node is written as the traced function's array-mode code writes it
  (``fastpath.Rule``, else its kernel).

Step outputs live in buffers allocated once per plan and reused by every call; an output of the
graph (or a view of a buffer that is returned) is copied, so a caller never sees a result change
under it. Once its choices are final (steady: after the ``RETUNE_AFTER``-th run) each
convolution step keeps only its own mode's copy of the weight. A plan is not re-entrant: a call
that finds the plan busy (another thread) takes the ordinary path. Plans are cached per input
shapes (``MAX_PLANS``, least recently used evicted).
While the plan's own kernels are still compiling in the background (``EMBER_JIT_COMPILE=background``)
the call takes the ordinary path and the plan is built on a later call. The kernels only the
other convolution modes need (transposed im2col, the engine's epilogues, the direct kernel) do
not hold it back: until they are ready every convolution step runs "kxp", and the first call
that finds them ready times the modes (``InferencePlan.ready``). The first call that finds
the plan's kernels ready also times the plan under its thread setting against BLAS's own threads and
keeps the faster (``InferencePlan.tune_threads``). The ``RETUNE_AFTER``-th run times the
convolution modes once more (and the thread settings, when BLAS's threads won) and keeps, for
each, the best time of the two moments (``InferencePlan.retune``). After each timing of the
modes, each step's modes close to its best are timed again inside whole runs of the plan, where
the other steps have evicted its weight from the caches, and the fastest there is kept
(``InferencePlan.tune_in_situ``).
"""
import operator
import threading
from collections import OrderedDict, namedtuple

import numpy as np

from ember.jit.ir import SPECIAL_KINDS, ArrayRef, GenRef, SymRef, Value
from ember.jit.plan_concat import ConcatBuffers
from ember.kernels.runtime.memory import frozen_copy
from ember.kernels.runtime.threads import LIMITED, blas_mode

__all__ = ["Planner", "InferencePlan", "MAX_PLANS", "MAX_COL_BYTES", "supported"]

MAX_PLANS = 8
MAX_COL_BYTES = 64 << 20   # larger column buffers: the convolution op's own kernel instead
# a plan whose largest GEMM has this many flops runs on ember's threads (BLAS at one thread, the
# batch and the GEMM's columns split into chunks); a smaller one whose GEMMs add up to
# parallel.MIN_FLOPS holds BLAS at one thread (OpenBLAS's lock-step threads stall on a shared
# machine); the smallest leave BLAS alone (no thread-count switch per call)
PARALLEL_MIN_FLOPS = 2e7
ONE_BLAS_THREAD = True   # the middle tier above (False: such plans leave BLAS alone too)
# ``tune_threads`` leaves a plan to BLAS's own threads when they run it in less than this share
# of the time of the setting above
BLAS_THREADS_MARGIN = 0.85
# the plan's run at which its choices are timed a second time (``InferencePlan.retune``)
RETUNE_AFTER = 100
# after each ``autotune`` (the first, and at the ``RETUNE_AFTER``-th run) each tuned step's
# modes within IN_SITU_CLOSE of its best ``autotune`` time are timed again inside whole runs of
# the plan, IN_SITU_ROUNDS runs per mode, and each step's fastest there is kept when the whole
# plan with those choices beats the isolated ones over IN_SITU_CHECKS interleaved runs of each
# (``InferencePlan.tune_in_situ``). ``autotune`` times a step right after its own warm-up, its
# weight and workspaces in cache; in the plan the step runs after the others evicted them, and
# its modes rank otherwise (imported ONNX models at batch 1, 2-core Xeon, medians of 30 calls
# in two processes each: ResNet-50 54.4 / 55.3 -> 49.6 / 50.3 ms, about half its steps changing
# mode; Inception v1 24.6 / 23.9 -> 22.9 / 21.3 ms). False: the isolated times decide.
IN_SITU = True
IN_SITU_CLOSE = 2.0
IN_SITU_ROUNDS = 3
IN_SITU_CHECKS = 4
# ``autotune`` times again, interleaved, every mode within this factor of the best first time: on
# a busy host one timing runs 2-3x slow (SqueezeNet's 1x1 (1,16,55,55) -> 64 kept "direct" at
# 895 us over "kxp" at 282 when only modes within 1.5x were timed again)
TUNE_CLOSE = 3.0
# a linear step of at most ``linalg.GEMV_MAX_ROWS`` input rows is a matrix-vector product in
# Numba (bias and ReLU in the same pass; split over the TBB threads as ``linalg.gemv_parts``
# says); GEMV = False: BLAS's GEMM and a bias kernel
GEMV = True
# consecutive linear steps of a batch of one or two (each the next one's only input) run as one
# step calling one kernel (``linear_numba.gemv_chain``: LeNet-5's three layers, one dispatch
# instead of three; ``gemv_chain_runs`` where a layer splits over threads: MLP
# 784-512-512-10 37 -> 34 us on a 2-core Zen 4); False: a step per layer
GEMV_CHAIN = True
# a convolution step of a batch of one may run the direct kernel on operands packed at build
# time (mode "direct", timed by ``autotune`` with the others); False: never
DIRECT = True
# a batch-of-one convolution step in mode "direct" may also split its output rows over Numba's
# TBB threads (mode "direct_split", where ``direct.row_parts`` splits them), timed by
# ``autotune`` with the others; False: never
DIRECT_SPLIT = True
# ... from this many flops: lower than eager's ``direct.SPLIT_MIN_FLOPS``, which no timing
# checks, as the tuner keeps the split only where it wins on the host. AMD EPYC (Zen 4), two
# threads, the ResNet-style block net at batch 1 (its 2.4-4.7 MFLOP layers), us per call,
# median / min of 3 s: 319-330 / 315-325 (5e6: no layer split) -> 272-292 / 243-250 (1e6: six
# of eight layers keep "direct_split", 25-38 against 30-56 us "direct")
DIRECT_SPLIT_MIN_FLOPS = 1e6
# once a plan's choices are final (``Planner`` marks it steady), its function is generated again
# with the steps whose mode is fixed calling their kernels directly (``InferencePlan.specialise``);
# False: every step through its Python object
SPECIALISE = True
# once a plan is steady its convolution steps drop the weight copies of the modes they do not
# run (``_ConvStep.release_other_modes``; the imported ResNet-50's plan holds 272 -> 93 MiB of
# them, freed for the process's later arrays; glibc keeps the pages, so RSS stays); False: they
# keep them (a test that switches modes after that)
RELEASE_OTHER_MODES = True
# a ``cat`` of a batch of one is a view of a buffer its operands' convolution steps write into
# (``plan_concat``); False: its kernel copies the operands every call
CONCAT_BUFFERS = True
# a convolution's batch runs im2col -> GEMM -> epilogue in blocks of images whose column buffer
# is at most this size (it stays in L2 between im2col and the GEMM)
BLOCK_BYTES = 512 << 10
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_shape = operator.attrgetter("shape")
# what the plan writes for a node (``InferencePlan._rule``): ``kind`` "step" (``what`` a step
# reading ``reads``, defining ``defines``), "group" (a fused group's kernel), "cat" (``what``
# the plan's ConcatBuffers), "reshape" (``what`` the static shape) or "global_mean"
_Lowered = namedtuple("_Lowered", "kind what reads defines")
_EXCLUDED = ("copy_", "python_function")


def _like(shape, dtype):
    """A 1-element array of ``shape``'s rank: what a kernel's Numba signature needs to know."""
    return np.empty((1,) * len(shape), dtype)


def _parallel():
    from ember.kernels.conv import parallel
    return parallel


def _linalg():
    from ember.kernels import linalg
    return linalg


_Kernels = namedtuple("_Kernels", "conv linear")


def _kernels():
    """The plan's Numba kernel modules (``conv``: its convolution steps', ``linear``: its linear
    steps'), or None when Numba is missing, off or unusable."""
    from ember.kernels.runtime import compiler
    if not compiler.available() or compiler.compile_mode() == "off":
        return None
    try:
        from ember.kernels import linear_numba
        from ember.kernels.conv import fused_numba
    except Exception:  # noqa: BLE001 - Numba present but unusable: the ordinary path
        return None
    return _Kernels(fused_numba, linear_numba)


def supported(graph):
    """Whether a plan can run ``graph``: no in-place writes, custom Functions or random ops."""
    from ember.autograd._generated.records import OPS
    for n in _inlined(graph).nodes:
        if n.kind in _EXCLUDED:
            return False
        op = OPS.get(n.kind)
        if n.kind != "constant" and (op is None or getattr(op, "random", False)):
            return False
        if any(isinstance(a, GenRef) for a in list(n.args) + list(n.attrs.values())):
            return False
    return True


def _inlined(graph, groups=None):
    """A copy of ``graph`` with every ``fusion_group`` replaced by its member nodes (the plan's
    patterns see bias adds and ReLUs). ``groups`` (a list) receives, per group, ``(subgraph,
    args, members, outputs)`` in the copy's terms: members the plan's patterns do not take
    run as the group's one fused kernel again."""
    if not any(n.kind == "fusion_group" for n in graph.nodes):
        return graph
    g = graph.copy()
    for node in list(g.nodes):
        if node.kind != "fusion_group":
            continue
        sub = node.attrs["graph"]
        env = {id(f): a for f, a in zip(sub.inputs, node.args)}

        def m(x):
            if isinstance(x, Value):
                return env[id(x)]
            if isinstance(x, SymRef):
                return SymRef(env[id(x.value)])
            if isinstance(x, (list, tuple)):
                return type(x)(m(y) for y in x)
            return x
        prev = node
        members = []
        for sn in sub.nodes:
            if sn.kind == "constant" and sn.attrs["name"] not in g.constants:
                g.constants[sn.attrs["name"]] = sub.constants[sn.attrs["name"]]
            nn = g.create_node(sn.kind, [m(a) for a in sn.args],
                               {k: m(v) for k, v in sn.attrs.items()},
                               [(o.dtype, o.shape) for o in sn.outputs])
            g.insert(nn, after=prev)
            prev = nn
            members.append(nn)
            for so, no in zip(sn.outputs, nn.outputs):
                env[id(so)] = no
        if groups is not None:
            groups.append((sub, list(node.args), members, [env[id(so)] for so in sub.outputs]))
        for o, so in zip(node.outputs, sub.outputs):
            o.replace_all_uses_with(env[id(so)])
        g.remove(node)
    return g


def _fresh(v):
    """Whether value ``v`` is the result of an op that allocates it (not a formal, a constant, a
    view or another in-place write), so that no other value shares its memory."""
    n = v.node
    if n is None or n.kind in SPECIAL_KINDS:
        return False
    op = n.op
    return op is not None and not op.view


def _without_local_writes(graph):
    """``graph``, or a copy of it without the in-place writes that only replace a local value:
    ``copy_(dst, src)`` where ``dst`` and ``src`` are fresh results (``_fresh``) of the same
    dtype and shape, nothing reads ``dst`` after the write and nothing before it took a view of
    it. Later readers of the write read ``src`` instead, as eager's values are the same. These
    are the writes of ``nn.ReLU(inplace=True)`` and ``out += identity`` (torchvision's ResNets:
    65 writes in ResNet-50, each of which kept the whole graph off the plan). Writes into
    formals, parameters, buffers or views stay, and such a graph takes the ordinary path."""
    def removable(g, node):
        dst, src = node.args
        if not (isinstance(dst, Value) and isinstance(src, Value) and _fresh(dst)
                and _fresh(src) and dst.dtype == src.dtype and dst.shape == src.shape
                and dst not in g.outputs):
            return False
        at = g.index(node)
        for v in (dst, src):
            for u in v.users:
                if u is node:
                    continue
                op = u.op
                if u.kind in SPECIAL_KINDS or op is None or op.view:
                    return False   # a view (or a write) of it: it may be read after the write
                if v is dst and g.index(u) > at:
                    return False
        return True

    if not any(n.kind == "copy_" for n in graph.nodes):
        return graph
    g = graph.copy()
    for node in list(g.nodes):
        if node.kind == "copy_" and removable(g, node):
            node.output.replace_all_uses_with(node.args[1])
            g.remove(node)
    return g


def _pair(v):
    if isinstance(v, (tuple, list)):
        if len(v) == 2 and all(isinstance(x, int) for x in v):
            return int(v[0]), int(v[1])
        if len(v) == 1 and isinstance(v[0], int):
            return int(v[0]), int(v[0])
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        return int(v), int(v)
    return None


# ------------------------------------------------------------------------------------ steps
class _Buffers:
    """The plan's shared scratch (column and GEMM buffers, grown to the largest user)."""

    def __init__(self):
        self.sizes = {}
        self.arrays = {}

    def need(self, key, dtype, n):
        k = (key, np.dtype(dtype).str)
        self.sizes[k] = max(self.sizes.get(k, 0), int(n))
        return k

    def get(self, k, shape):
        a = self.arrays.get(k)
        if a is None:
            a = self.arrays[k] = np.empty(self.sizes[k], np.dtype(k[1]))
        return a[:int(np.prod(shape))].reshape(shape)


class _ConvStep:
    def __init__(self, kn, shared, x_shape, dtype, w, b, stride, padding, dilation, res, relu,
                 pool, out_shape, fresh):
        N, C, H, W = x_shape
        K, _, R, S = w.shape
        (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
        Ho = (H + 2 * ph - dh * (R - 1) - 1) // sh + 1
        Wo = (W + 2 * pw - dw * (S - 1) - 1) // sw + 1
        self.kn, self.shared = kn, shared
        self.args = (R, S, sh, sw, dh, dw)
        self.unit = sh == sw == dh == dw == 1   # im2col_s1
        self.pad = (ph, pw)
        self.xp = np.zeros((N, C, H + 2 * ph, W + 2 * pw), dtype) if ph or pw else None
        self.b = np.array(b, order="C") if b is not None else np.zeros(K, dtype)
        self.has_b = b is not None
        self._fused = None   # see ``_fused_geometry``
        self.res, self.relu, self.pool = res, relu, pool
        self.conv_args = (stride, padding, dilation, 1)
        # an owned copy (see docs/jit.md), immutable: the Winograd engine keeps its transform
        # (an imported ResNet-50's plan spent 1.1 ms a call transforming weights without)
        self.w = frozen_copy(w)
        self.w2 = self.w.reshape(K, -1)   # its (K, C*R*S) view
        # how the sum is computed (``autotune``): "kxp" (W @ col, K rows), "pxk" (col.T @ W.T,
        # one row per output pixel) or "engine" (ember's convolution engine)
        self.mode = "kxp"
        self.mode_times = {}   # mode -> best time seen by ``autotune``
        self.situ_times = {}   # mode -> best time inside whole runs (``tune_in_situ``)
        self.direct_cols = (R == S == 1 and sh == sw == 1 and ph == pw == 0 and N == 1)
        self.col_key = shared.need("col", dtype, C * R * S * N * Ho * Wo)
        self.z_key = shared.need("z", dtype, K * N * Ho * Wo)
        self.col_shape, self.z_shape = (C * R * S, N, Ho, Wo), (K, N, Ho, Wo)
        self.out_shape, self.dtype, self.fresh = tuple(out_shape), dtype, fresh
        self.y = None if fresh else np.empty(out_shape, dtype)
        self.placed = False   # y is a slice of a concatenation's buffer (``plan_concat``)
        self.dummy = np.zeros((1, 1, 1), dtype)
        per_image = C * R * S * Ho * Wo * np.dtype(dtype).itemsize
        self.block = max(1, BLOCK_BYTES // max(1, per_image))
        self.direct = _direct_setup(x_shape, w, b, stride, padding, dilation, pool, dtype) \
            if DIRECT else None

    def bind(self):
        """Take this step's views of the plan's shared buffers (once, after every step has
        said what it needs)."""
        K, N, Ho, Wo = self.z_shape
        self.col = self.shared.get(self.col_key, self.col_shape)
        self.col2 = self.col.reshape(self.col_shape[0], N * Ho * Wo)
        self.z2 = self.shared.get(self.z_key, (K, N * Ho * Wo))
        self.z3 = self.z2.reshape(K, N, Ho * Wo)
        self.z4 = self.z2.reshape(K, N, Ho, Wo)
        CRS, P = self.col_shape[0], Ho * Wo
        self.colt = self.col.reshape(-1)[:N * P * CRS].reshape(N * P, CRS)
        self.zt2 = self.z2.reshape(-1).reshape(N * P, K)
        self.zt4 = self.zt2.reshape(N, Ho, Wo, K)
        self.wt = np.ascontiguousarray(self.w2.T)

    def signatures(self, x):
        from ember.kernels.runtime import compiler as rt
        kn = self.kn
        col = _like(self.col_shape, self.dtype)
        z = _like(self.z_shape, self.dtype)
        y = _like(self.out_shape, self.dtype)
        xp = self.xp if self.xp is not None else x
        out = [(kn.im2col_s1, rt.signature(xp, 1, 1, col, 0, 1)) if self.unit else
               (kn.im2col, rt.signature(xp, *self.args, col, 0, 1))]
        if self.xp is not None:
            out.append((kn.pad_into, rt.signature(x, 0, 0, self.xp, 0, 1)))
        if self.pool == (2, 2, 2, 2):
            out.append((kn.conv_pool2_epilogue, rt.signature(z, self.b, y, True, 0, 1)))
        elif self.pool is not None:
            out.append((kn.conv_pool_epilogue, rt.signature(z, self.b, y, True, *self.pool,
                                                            0, 1)))
        else:
            out.append((kn.conv_epilogue, rt.signature(self.dummy, self.b,
                                                        self.dummy, self.dummy, True,
                                                        True, 0, 1)))
        return out

    def flops(self):
        K, N, Ho, Wo = self.z_shape
        return 2.0 * K * self.col_shape[0] * N * Ho * Wo

    def release_other_modes(self):
        """Drop the weight copies of the modes this step will not run (its mode is final: the
        plan is steady): the engine's, the transposed GEMM operand, the direct kernel's packed
        weight (ResNet-50's plan: three copies of every convolution weight, ~100 MB each)."""
        direct = self.mode in ("direct", "direct_split")
        if direct:
            self.w2 = self.wt = self.w = None
            return
        self.direct = None
        if self.mode != "engine":
            self.w = None
        if self.mode != "pxk":
            self.wt = None
        if self.mode != "kxp":
            self.w2 = None

    def can_use_engine(self):
        return self.pool is None or self.pool == (2, 2, 2, 2)

    @property
    def engine(self):
        return self.mode == "engine"

    @engine.setter
    def engine(self, on):
        self.mode = "engine" if on else "kxp"

    def modes(self):
        """The ways this step can compute its sum (``autotune`` times them)."""
        modes = ("kxp", "pxk", "engine") if self.can_use_engine() else ("kxp",)
        if self.direct is None:
            return modes
        return modes + (("direct", "direct_split") if self.direct.parts else ("direct",))

    def mode_signatures(self, x):
        """Kernels (dispatcher, signature) the modes other than "kxp" need."""
        from ember.kernels.runtime import compiler as rt
        kn = self.kn
        out = []
        if self.direct is not None:
            d = self.direct
            xp = self.xp if self.xp is not None else x
            y = _like(self.out_shape, self.dtype)
            if self.xp is not None:
                out.append((d.k.pad_rows, rt.signature(x, 0, 0, self.xp)))
            if d.acc is not None:
                out.append((d.k.forward_image, rt.signature(
                    x, xp, 0, 0, d.wp, d.bp, d.rs, d.off, d.acc, d.z, y, *d.args, True,
                    *d.pool)))
                if d.parts:
                    out.append((d.k.forward_image_split, rt.signature(
                        x, xp, 0, 0, d.wp, d.bp, d.rs, d.off, d.acc, d.z, y, *d.args, True,
                        *d.pool, 2)))
            else:
                out.append((d.k.forward_rows, rt.signature(
                    xp, d.wp, d.bp, d.rs, d.off, y, *d.args, True, d.rowbuf, 0, 1)))
                if d.parts:
                    out.append((d.k.forward_rows_split, rt.signature(
                        xp, d.wp, d.bp, d.rs, d.off, y, *d.args, True, d.rowbufs, 2)))
        if not self.can_use_engine():
            return out
        K, N, Ho, Wo = self.z_shape
        P = Ho * Wo
        xp = self.xp if self.xp is not None else x
        colt = _like((N * P, self.col_shape[0]), self.dtype)
        y = _like(self.out_shape, self.dtype)
        out.append((kn.im2col_t, rt.signature(xp, *self.args, Ho, Wo, colt, 0, 1)))
        if self.pool is not None:
            zt = _like((N, Ho, Wo, K), self.dtype)
            out.append((kn.t_pool2_epilogue, rt.signature(zt, self.b, y, True, 0, 1)))
        else:
            zt = _like((N * P, K), self.dtype)
            out.append((kn.t_epilogue, rt.signature(zt, self.b, self.dummy,
                                                     self.dummy, True, True, 0, 1)))
        return out + self.engine_signatures(x)

    def engine_signatures(self, x):
        from ember.kernels.runtime import compiler as rt
        from ember.kernels.runtime.threads import parallel_layer
        kn = self.kn
        z = _like((self.z_shape[1], self.z_shape[0]) + self.z_shape[2:], self.dtype)
        y = _like(self.out_shape, self.dtype)
        if self.pool is not None:
            out = [(kn.nchw_pool2_epilogue, rt.signature(z, self.b, y, True, 0, 1))]
            if parallel_layer() == "tbb":
                out.append((kn.nchw_pool2_epilogue_runs, rt.signature(z, self.b, y, True, 2)))
            return out
        out = [(kn.nchw_epilogue, rt.signature(self.dummy, self.b, self.dummy, self.dummy,
                                               True, True, 0, 1))]
        if parallel_layer() == "tbb":
            out.append((kn.nchw_epilogue_runs, rt.signature(self.dummy, self.b, self.dummy,
                                                            self.dummy, True, True, 2)))
        return out

    def _fused_geometry(self, x):
        """The convolution's geometry when the engine would run it with an algorithm that adds
        the bias, the residual and ReLU in its own kernel (``selector.FUSED_EPILOGUE``), else
        None (decided on the first engine call)."""
        if self._fused is None:
            from ember.kernels.conv import selector
            from ember.kernels.conv.geometry import geometry
            g = geometry("conv2d", x.shape, self.w.shape, *self.conv_args)
            # (a forced algorithm or the autotuner may still pick another one: ``selector.run``
            # then adds the bias, residual and ReLU after it, in the same order)
            fused = (self.pool is None
                     and selector.heuristic("forward", g) in selector.FUSED_EPILOGUE)
            self._fused = g if fused else False
        return self._fused or None

    def _engine_call(self, x, res):
        from ember.kernels.conv import conv2d_forward
        from ember.kernels.runtime.threads import tbb_parts
        g = self._fused_geometry(x)
        if g is not None:   # one pass: bias, residual and ReLU inside the kernel
            from ember.kernels.conv import selector
            y = selector.run("conv2d", "forward", g, x, self.w,
                             self.b if self.has_b else None, res, self.relu)
            if self.placed:
                np.copyto(self.y, y)
                return self.y
            return y
        z = conv2d_forward(x, self.w, None, *self.conv_args)
        N = x.shape[0]
        y = np.empty(self.out_shape, self.dtype) if self.fresh else self.y
        split = N > 1 and _parallel().parallel_possible()
        # the epilogue's images on TBB's workers (a prange) rather than ember's pool: LeNet's
        # first conv + bias + ReLU + pool epilogue at batch 64, serial 112 us, pool 137 us
        parts = tbb_parts(N, _parallel().threads()) if split else 0
        kn = self.kn
        if self.pool is not None:
            if parts:
                kn.nchw_pool2_epilogue_runs(z, self.b, y, self.relu, parts)
                return y

            def epi(lo, hi):
                kn.nchw_pool2_epilogue(z, self.b, y, self.relu, lo, hi)
        else:
            K = y.shape[1]
            z3, y3 = z.reshape(N, K, -1), y.reshape(N, K, -1)
            r = res.reshape(N, K, -1) if res is not None else self.dummy
            if parts:
                kn.nchw_epilogue_runs(z3, self.b, r, y3, res is not None, self.relu, parts)
                return y

            def epi(lo, hi):
                kn.nchw_epilogue(z3, self.b, r, y3, res is not None, self.relu, lo, hi)
        if split:
            _parallel().run(epi, N)
        else:
            epi(0, N)
        return y

    def _prologue(self, x, lo, hi):
        kn, xp = self.kn, self.xp
        if xp is not None:
            kn.pad_into(x, self.pad[0], self.pad[1], xp, lo, hi)
        else:
            xp = x
        if self.unit:
            kn.im2col_s1(xp, self.args[0], self.args[1], self.col, lo, hi)
        else:
            kn.im2col(xp, *self.args, self.col, lo, hi)

    def _epilogue(self, y, res, lo, hi):
        kn = self.kn
        if self.pool == (2, 2, 2, 2):
            kn.conv_pool2_epilogue(self.z4, self.b, y, self.relu, lo, hi)
        elif self.pool is not None:
            kn.conv_pool_epilogue(self.z4, self.b, y, self.relu, *self.pool, lo, hi)
        else:
            N, K = y.shape[:2]
            r = res.reshape(N, K, -1) if res is not None else self.dummy
            kn.conv_epilogue(self.z3, self.b, r, y.reshape(N, K, -1), res is not None,
                             self.relu, lo, hi)

    def _block(self, x, res, y, lo, hi):
        """Images [lo, hi): im2col, GEMM and epilogue, in blocks whose column buffer stays in
        cache (``BLOCK_BYTES``)."""
        K, N, Ho, Wo = self.z_shape
        P = Ho * Wo
        step = self.block
        if self.mode == "pxk":
            kn = self.kn
            for a in range(lo, hi, step):
                b = min(hi, a + step)
                xp = self.xp
                if xp is not None:
                    kn.pad_into(x, self.pad[0], self.pad[1], xp, a, b)
                else:
                    xp = x
                kn.im2col_t(xp, *self.args, Ho, Wo, self.colt, a, b)
                _parallel().matmul(self.colt[a * P:b * P], self.wt, self.zt2[a * P:b * P])
                if self.pool is not None:
                    kn.t_pool2_epilogue(self.zt4, self.b, y, self.relu, a, b)
                else:
                    r = res.reshape(N, K, P) if res is not None else self.dummy
                    kn.t_epilogue(self.zt2, self.b, r, y.reshape(N, K, P), res is not None,
                                  self.relu, a, b)
            return
        for a in range(lo, hi, step):
            b = min(hi, a + step)
            self._prologue(x, a, b)
            _parallel().matmul(self.w2, self.col2[:, a * P:b * P], self.z2[:, a * P:b * P])
            self._epilogue(y, res, a, b)

    def _direct_call(self, x, res):
        """The direct kernel (``direct_numba.forward_rows``) on the padded input with the
        weight, bias and row buffer packed at build time: no per-call repacking or dispatch
        through the convolution selector (~15 us of Python per call at batch 1). Mode
        "direct_split": its output rows in ``d.parts`` runs over Numba's threads."""
        d = self.direct
        y = np.empty(self.out_shape, self.dtype) if self.fresh else self.y
        rs = d.rs if res is None else np.ascontiguousarray(res).reshape(y.shape[0], -1)
        xp = self.xp
        split = self.mode == "direct_split"
        if d.acc is not None:   # (pads x into xp itself)
            args = (x, x if xp is None else xp, *self.pad, d.wp, d.bp, rs, d.off, d.acc, d.z,
                    y, *d.args, self.relu, *d.pool)
            if split:
                d.k.forward_image_split(*args, d.parts)
            else:
                d.k.forward_image(*args)
            return y
        if xp is not None:
            d.k.pad_rows(x, self.pad[0], self.pad[1], xp)
        else:
            xp = x
        if split:
            d.k.forward_rows_split(xp, d.wp, d.bp, rs, d.off, y, *d.args, self.relu, d.rowbufs,
                                   d.parts)
        else:
            d.k.forward_rows(xp, d.wp, d.bp, rs, d.off, y, *d.args, self.relu, d.rowbuf, 0,
                             y.shape[2])
        return y

    def _out(self, bind):
        """Source of this step's output array: its buffer, or a new array when it is an output
        of the graph."""
        if self.fresh:
            return f"{bind(np.empty)}({bind(self.out_shape)}, {bind(self.dtype)})"
        return bind(self.y)

    def inline(self, out, args, bind, temp):
        """Source lines running this step in mode "direct" or "direct_split" on the value
        ``args[0]`` into ``out`` (as ``_direct_call``), or None (another mode, or a
        residual)."""
        if self.mode not in ("direct", "direct_split") or self.res is not None or \
                len(args) != 1:
            return None
        d, x = self.direct, args[0]
        split = self.mode == "direct_split"

        def ints(vals):
            return ", ".join(bind(int(v)) for v in vals)
        ops = f"{bind(d.wp)}, {bind(d.bp)}, {bind(d.rs)}, {bind(d.off)}"
        lines = [f"{out} = {self._out(bind)}"]
        if d.acc is not None:
            xp = x if self.xp is None else bind(self.xp)
            fn, parts = (d.k.forward_image_split, f", {ints((d.parts,))}") if split else \
                (d.k.forward_image, "")
            lines.append(f"{bind(fn)}({x}, {xp}, {ints(self.pad)}, {ops}, "
                         f"{bind(d.acc)}, {bind(d.z)}, {out}, {ints(d.args)}, "
                         f"{bind(bool(self.relu))}, {ints(d.pool)}{parts})")
            return lines
        xp = x
        if self.xp is not None:
            xp = bind(self.xp)
            lines.append(f"{bind(d.k.pad_rows)}({x}, {ints(self.pad)}, {xp})")
        if split:
            lines.append(f"{bind(d.k.forward_rows_split)}({xp}, {ops}, {out}, {ints(d.args)}, "
                         f"{bind(bool(self.relu))}, {bind(d.rowbufs)}, {ints((d.parts,))})")
        else:
            lines.append(f"{bind(d.k.forward_rows)}({xp}, {ops}, {out}, {ints(d.args)}, "
                         f"{bind(bool(self.relu))}, {bind(d.rowbuf)}, "
                         f"{ints((0, self.out_shape[2]))})")
        return lines

    def __call__(self, x, res=None):
        if self.mode in ("direct", "direct_split"):
            return self._direct_call(x, res)
        if self.engine:
            return self._engine_call(x, res)
        N = x.shape[0]
        y = np.empty(self.out_shape, self.dtype) if self.fresh else self.y
        if self.direct_cols and self.mode == "kxp":   # 1x1, one image: x is its column matrix
            _parallel().matmul(self.w2, x.reshape(self.col2.shape), self.z2)
            self._epilogue(y, res, 0, N)
        elif N > 1 and _parallel().parallel_possible():
            _parallel().run(lambda lo, hi: self._block(x, res, y, lo, hi), N)
        else:
            self._block(x, res, y, 0, N)
        return y


class _Direct:
    """A convolution step's packed operands for ``direct_numba.forward_rows`` (rows of at
    least one vector, no pool: ``acc`` None) or ``direct_numba.forward_image`` (shorter rows
    or a max pool (kh, kw, sh, sw) after it: ``acc``, the image's sums, pixel-major, and ``z``,
    their (K, Ho, Wo) plane before the pool). ``parts``: the runs of output rows of mode
    "direct_split" (0: no such mode), each with its row of ``rowbufs``."""

    def __init__(self, k, wp, bp, rs, off, args, rowbuf, acc=None, z=None, pool=None,
                 parts=0):
        self.k, self.wp, self.bp, self.rs, self.off, self.args = k, wp, bp, rs, off, args
        self.rowbuf, self.acc, self.z, self.pool = rowbuf, acc, z, pool
        self.parts = parts
        self.rowbufs = np.empty((parts, rowbuf.size), rowbuf.dtype) if parts and \
            rowbuf is not None else np.empty((0, 0), wp.dtype)


def _direct_setup(x_shape, w, b, stride, padding, dilation, pool, dtype):
    """The direct mode of a convolution step (a batch of one, the direct kernels available),
    else None."""
    from ember.kernels.conv import direct
    from ember.kernels.conv.geometry import geometry
    if x_shape[0] != 1:
        return None
    g = geometry("conv2d", x_shape, w.shape, stride, padding, dilation, 1)
    if not direct.supports(g, "forward"):
        return None
    k = direct.kernels()
    if k is None:
        return None
    L = k.lanes(np.dtype(dtype).itemsize)
    Ho, Wo = g.output_shape[2:]
    wp, bp, (V, Kp, off, S, P) = direct.pack(w, b, g, dtype)
    args = (g.stride[0], g.stride[1], P, V, S)
    rs = np.empty((0, 0), dtype)
    parts = _split_parts(g, P)
    if Wo < L or pool is not None:
        acc = np.empty(direct.sums_size(Ho * Wo, wp), dtype)
        z = np.empty((g.K, Ho, Wo) if pool is not None else (0, 0, 0), dtype)
        return _Direct(k, wp, bp, rs, off.copy(), args, None, acc, z, pool or (1, 1, 1, 1),
                       parts)
    rowbuf = np.empty(direct.sums_size(Wo, wp), dtype)
    return _Direct(k, wp, bp, rs, off.copy(), args, rowbuf, parts=parts)


def _split_parts(g, P):
    """Runs of output rows for mode "direct_split" (``direct.row_parts`` at ember's thread
    setting), or 0 when the mode does not apply (also with ``DIRECT_SPLIT`` off)."""
    if not DIRECT_SPLIT:
        return 0
    from ember.kernels.conv import direct
    return direct.row_parts(g, P, _parallel().threads(), DIRECT_SPLIT_MIN_FLOPS)


class _LinearStep:
    def __init__(self, kn, w, b, relu, out_shape, dtype, fresh):
        self.kn = kn
        self.gemv = GEMV and out_shape[0] <= _linalg().GEMV_MAX_ROWS
        # the GEMV reads the weight's rows (N, K); the GEMM its transpose (K, N)
        self.wt = np.array(w if self.gemv else w.T, order="C")
        self.b = np.array(b, order="C") if b is not None else np.zeros(w.shape[0], dtype)
        self.has_b, self.relu = b is not None, relu
        self.out_shape, self.dtype, self.fresh = tuple(out_shape), dtype, fresh
        self.y = None if fresh else np.empty(out_shape, dtype)
        # a weight too small to split (``linalg.gemv_parts`` is 0 whatever the threads)
        self.one_run = self.wt.nbytes < _linalg().GEMV_MIN_BYTES
        # "gemm": BLAS's GEMM and a bias kernel; "direct": the direct convolution's
        # micro-kernel (``direct_numba.linear_rows``), timed against it by ``autotune``
        self.mode = "gemm"
        self.mode_times = {}
        self.situ_times = {}
        self.direct = None if self.gemv or not DIRECT else \
            _linear_direct_setup(self.wt, self.out_shape, dtype)

    def modes(self):
        return ("gemm", "direct") if self.direct is not None else ("gemm",)

    @property
    def chainable(self):
        """Whether this step may join a ``_LinearChain``: a matrix-vector product."""
        return GEMV_CHAIN and self.gemv

    def mode_signatures(self, x):
        from ember.kernels.runtime import compiler as rt
        d = self.direct
        if d is None:
            return []
        x = _like(x.shape, self.dtype)
        return [(d.k.linear_rows, rt.signature(x, d.xt, d.wp, d.off, x, 0, 0, 0, 0, True))]

    def signatures(self, x):
        from ember.kernels.runtime import compiler as rt
        y = _like(self.out_shape, self.dtype)
        if self.gemv:
            x = np.ascontiguousarray(x)
            return [(self.kn.gemv_runs, rt.signature(self.wt, x, self.b, y, True, 0)),
                    (self.kn.gemv_rows, rt.signature(self.wt, x, self.b, y, True, 0, 0))]
        return [(self.kn.bias_act, rt.signature(y, self.b, True))]

    def bind(self):
        pass

    def flops(self):
        return 2.0 * self.wt.size * self.out_shape[0]

    def inline(self, out, args, bind, temp):
        """Source lines running this step's GEMV into ``out`` (as ``__call__``: split over
        threads when ``linalg.gemv_parts`` says so at the call), or None (a GEMM)."""
        if not (self.gemv and self.mode == "gemm"):
            return None
        y = bind(np.empty) + f"({bind(self.out_shape)}, {bind(self.dtype)})" if self.fresh \
            else bind(self.y)
        w, b, relu = bind(self.wt), bind(self.b), bind(bool(self.relu))
        x, parts = temp(f"{out}_x"), temp(f"{out}_p")
        rows = f"{bind(self.kn.gemv_rows)}({w}, {x}, {b}, {out}, {relu}, {bind(0)}, " \
            f"{bind(int(self.wt.shape[0]))})"
        lines = [f"{out} = {y}", f"{x} = {bind(np.ascontiguousarray)}({args[0]})"]
        if self.one_run:
            return lines + [rows]
        return lines + [f"{parts} = {bind(_linalg().gemv_parts)}({w})",
                        f"if {parts}: {bind(self.kn.gemv_runs)}({w}, {x}, {b}, {out}, "
                        f"{relu}, {parts})",
                        f"else: {rows}"]

    def __call__(self, x, res=None):
        y = np.empty(self.out_shape, self.dtype) if self.fresh else self.y
        if self.mode == "direct":
            d = self.direct
            if not x.flags.c_contiguous:
                x = np.ascontiguousarray(x)
            z = y if d.ybuf is None else d.ybuf
            if d.blocks > 1 and _parallel().parallel_possible():
                d.k.linear_rows(x, d.xt, d.wp, d.off, z, d.P, d.V, 0, 0, True)
                _parallel().run(lambda lo, hi: d.k.linear_rows(x, d.xt, d.wp, d.off, z, d.P,
                                                               d.V, lo, hi, False), d.blocks)
            else:
                d.k.linear_rows(x, d.xt, d.wp, d.off, z, d.P, d.V, 0, d.blocks, True)
            if d.ybuf is not None:
                np.copyto(y, d.ybuf[:, :y.shape[1]])
            if self.has_b or self.relu:
                self.kn.bias_act(y, self.b, self.relu)
            return y
        if self.gemv:
            if not x.flags.c_contiguous:
                x = np.ascontiguousarray(x)
            parts = 0 if self.one_run else _linalg().gemv_parts(self.wt)
            if parts:
                self.kn.gemv_runs(self.wt, x, self.b, y, self.relu, parts)
            else:
                self.kn.gemv_rows(self.wt, x, self.b, y, self.relu, 0, self.wt.shape[0])
            return y
        if _parallel().parallel_possible():
            _parallel().matmul(x, self.wt, y)
        else:
            np.matmul(x, self.wt, out=y)
        if self.has_b or self.relu:
            self.kn.bias_act(y, self.b, self.relu)
        return y


class _LinearChain:
    """Consecutive chainable linear steps (``_LinearStep.chainable``), each feeding the next, as
    one call of ``linear_numba.gemv_chain`` (every layer on one thread) or, when a layer's
    weight is large enough to split (not ``one_run``), of ``gemv_chain_runs`` with the runs
    ``linalg.gemv_parts`` gives at the call: the weights and biases packed flat at ``bind``,
    the inner layers' outputs in a scratch buffer of the step, the last one in the last
    layer's output buffer."""

    mode = "chain"
    gemv = True
    direct = None

    def __init__(self, kn, steps):
        self.kn = kn
        self.links = list(steps)

    def append(self, step):
        self.links.append(step)

    @property
    def y(self):
        return self.links[-1].y

    def modes(self):
        return ("chain",)

    def _operands(self, rows):
        first, dtype = self.links[0], self.links[0].dtype
        dims = np.array([first.wt.shape[1]] + [st.wt.shape[0] for st in self.links], np.int64)
        w = np.concatenate([st.wt.ravel() for st in self.links])
        b = np.concatenate([st.b for st in self.links]).astype(dtype, copy=False)
        relu = np.array([st.relu for st in self.links], np.bool_)
        inner = max([int(d) for d in dims[1:-1]] + [1])
        return w, b, dims, relu, np.empty((2, rows * inner), dtype)

    @property
    def split(self):
        """Which layers split over threads (None: none does, the chain runs on one thread)."""
        split = np.array([not st.one_run for st in self.links], np.bool_)
        return split if split.any() else None

    def signatures(self, x):
        from ember.kernels.runtime import compiler as rt
        dtype = self.links[-1].dtype
        flat, m = _like((1,), dtype), _like((1, 1), dtype)   # w and b; x, buf and y
        dims, relu = np.zeros(1, np.int64), np.zeros(1, np.bool_)
        split = self.split
        if split is None:
            return [(self.kn.gemv_chain, rt.signature(flat, flat, dims, relu, m, m, m))]
        return [(self.kn.gemv_chain_runs,
                 rt.signature(flat, flat, dims, relu, split, 0, m, m, m))]

    def bind(self):
        last = self.links[-1]
        self.w, self.b, self.dims, self.relu, self.buf = self._operands(last.out_shape[0])
        self.out_shape, self.dtype, self.fresh = last.out_shape, last.dtype, last.fresh
        split = self.split
        self.split_at = split
        # the weight whose size and rows decide the runs (``linalg.gemv_parts``)
        self.w_split = None if split is None else self.links[int(np.argmax(split))].wt

    def flops(self):
        return sum(st.flops() for st in self.links)

    def inline(self, out, args, bind, temp):
        """Source lines running the chain as its one kernel call into ``out``."""
        y = bind(np.empty) + f"({bind(self.out_shape)}, {bind(self.dtype)})" if self.fresh \
            else bind(self.links[-1].y)
        x = f"{bind(np.ascontiguousarray)}({args[0]})"
        if self.split_at is None:
            return [f"{out} = {y}",
                    f"{bind(self.kn.gemv_chain)}({bind(self.w)}, {bind(self.b)}, "
                    f"{bind(self.dims)}, {bind(self.relu)}, {x}, {bind(self.buf)}, {out})"]
        return [f"{out} = {y}",
                f"{bind(self.kn.gemv_chain_runs)}({bind(self.w)}, {bind(self.b)}, "
                f"{bind(self.dims)}, {bind(self.relu)}, {bind(self.split_at)}, "
                f"{bind(_linalg().gemv_parts)}({bind(self.w_split)}), {x}, {bind(self.buf)}, "
                f"{out})"]

    def __call__(self, x, res=None):
        y = np.empty(self.out_shape, self.dtype) if self.fresh else self.links[-1].y
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        if self.split_at is None:
            self.kn.gemv_chain(self.w, self.b, self.dims, self.relu, x, self.buf, y)
        else:
            self.kn.gemv_chain_runs(self.w, self.b, self.dims, self.relu, self.split_at,
                                    _linalg().gemv_parts(self.w_split), x, self.buf, y)
        return y


class _LinearDirect:
    """A linear step's operands for ``direct_numba.linear_rows``: the weight ``wp`` (Cin, Kp),
    its columns zero-padded to whole vectors, the transposed input's buffer ``xt`` (Cin, N
    rounded up to a vector), the offsets of its rows, the row block P, the vectors per column
    block V, the number of column blocks, and the (N, Kp) product's buffer when Kp > Kout
    (else None: the product is the output)."""

    def __init__(self, k, wp, xt, off, P, V, blocks, ybuf):
        self.k, self.wp, self.xt, self.off, self.P, self.V = k, wp, xt, off, P, V
        self.blocks, self.ybuf = blocks, ybuf


def _linear_direct_setup(wt, out_shape, dtype):
    """The direct mode of a linear step with weight ``wt`` (Cin, Kout) (several rows, the
    direct kernels available), else None."""
    from ember.kernels.conv import direct
    from ember.kernels.runtime import compiler
    k = direct.kernels()
    if k is None or not compiler.available():
        return None
    N, K = out_shape
    L = k.lanes(np.dtype(dtype).itemsize)
    V = 2 if K % (2 * L) == 0 else 1
    fits = [p for p in k.forward_pixels(V) if 1 < p <= N]
    if not fits:
        return None
    Cin = wt.shape[0]
    Kp = -(-K // (V * L)) * V * L
    wp, ybuf = wt, None
    if Kp != K:
        wp = np.zeros((Cin, Kp), dtype)
        wp[:, :K] = wt
        ybuf = np.empty((N, Kp), dtype)
    Np = -(-N // L) * L
    return _LinearDirect(k, wp, np.empty((Cin, Np), dtype), np.arange(Cin, dtype=np.int64) * Np,
                         max(fits), V, Kp // (V * L), ybuf)


def _generic(fn, args, consts_after, multi, values_at):
    """A step calling ``fn`` with ``args`` (Values at ``values_at`` filled in per call)."""
    template = list(args) + list(consts_after)
    slots = tuple(values_at)

    if not slots:
        def call():
            return fn(*template)
        return call
    if len(slots) == 1:
        i0 = slots[0]

        def call1(a):
            t = template[:]
            t[i0] = a
            return fn(*t)
        return call1

    def calln(*vals):
        t = template[:]
        for i, v in zip(slots, vals):
            t[i] = v
        return fn(*t)
    return calln


# ------------------------------------------------------------------------------------ plan
class InferencePlan:
    """One compiled function for ``graph`` at the recorded input shapes (see the module)."""

    def __init__(self, graph, formals, kn):
        from ember.jit.fastpath import int_values
        from ember.jit.interpreter import Interpreter
        groups = []
        g = _inlined(graph, groups)
        self.graph = g
        group_of = {id(gr[2][0]): gr for gr in groups if gr[2]}   # first member -> group
        self.in_shapes = tuple(a.shape for a in formals)
        env = _record(Interpreter(g, "array"), formals)
        ints = int_values(g)
        # a traced size is a constant of this plan
        self._sizes = {i: int(env[i]) for i in ints}
        outs = {id(o) for o in g.outputs}
        index = {id(n): i for i, n in enumerate(g.nodes)}
        consumed = set()     # ids of nodes folded into an earlier step
        cats = ConcatBuffers(g if CONCAT_BUFFERS else None, env, outs)
        self._cats = cats
        self._cat_arrays = cats.arrays()
        self.shared = _Buffers()
        self._steps = []
        self._lock = threading.Lock()

        def const_of(v):
            return v.node is not None and v.node.kind == "constant"

        def single_use(v, kind=None):
            if len(v.uses) != 1 or id(v) in outs:
                return None
            n = v.uses[0]
            return n if kind is None or n.kind in kind else None

        # id(node) -> what the plan writes for it (``_rule``); nodes not in it, and not folded
        # into a step (``consumed``), are written as the graph's array-mode code writes them
        self._lowered = {}
        self._consumed = consumed
        self._generic_calls = 0   # nodes run by their kernels (which may call BLAS)
        self.blas_free = False    # see ``_check_blas_free``
        self._sigs = []
        chain_tail = None   # the last linear step: (step or chain, its output, its first node)
        tune = []
        for node in g.nodes:
            if node.kind == "constant" or id(node) in consumed:
                continue
            o0 = node.outputs[0] if node.outputs else None
            if o0 is not None and id(o0) in ints and len(node.outputs) == 1:
                continue
            step = None
            if node.kind == "conv2d":
                step, reads, last = self._conv(node, env, kn, const_of, single_use, index,
                                               consumed, outs)
                if step is not None and not step.fresh:
                    view = cats.place(last, step.out_shape, step.dtype)
                    if view is not None:   # its output is a concatenation's slice
                        step.y, step.placed = view, True
            elif node.kind == "linear":
                step, reads, last = self._linear(node, env, kn, const_of, single_use, consumed,
                                                 outs)
            if step is not None and isinstance(step, _LinearStep) and step.chainable and \
                    chain_tail is not None and chain_tail[1] is node.args[0] and \
                    len(node.args[0].uses) == 1 and id(node.args[0]) not in outs:
                prev, _, first = chain_tail
                if isinstance(prev, _LinearStep):   # the second link: the chain replaces it
                    chain = _LinearChain(kn.linear, [prev])
                    self._steps[self._steps.index(prev)] = chain
                    prev = chain
                else:   # its kernel may change with the new link
                    self._sigs = [s for s in self._sigs if s not in prev.signatures(None)]
                prev.append(step)
                self._sigs += prev.signatures(None)
                consumed.add(id(node))
                self._lowered[id(first)] = self._lowered[id(first)]._replace(what=prev,
                                                                             defines=last)
                chain_tail = (prev, last, first)
                continue
            if step is not None:
                self._steps.append(step)
                self._sigs += step.signatures(env[id(node.args[0])])
                tune.append((step, node.args[0], getattr(step, "res", None)))
                self._lowered[id(node)] = _Lowered("step", step, reads, last)
                chain_tail = (step, last, node) \
                    if isinstance(step, _LinearStep) and step.chainable else None
                continue
            if node.kind == "cat" and cats.covers(node):
                self._lowered[id(node)] = _Lowered("cat", cats, None, None)
                continue
            grp = group_of.get(id(node))
            if grp is not None and self._fused_group(grp, env, consumed):
                from ember.jit.fused import fused_group
                sub, gargs, members, gouts = grp
                consumed.update(id(n) for n in members[1:])
                self._lowered[id(node)] = _Lowered("group", fused_group(sub).run_arrays,
                                                   gargs, gouts)
                continue
            if node.kind in ("flatten", "reshape", "view") and isinstance(node.args[0], Value) \
                    and not const_of(node.args[0]):
                # a static shape: NumPy's reshape (a view of a contiguous input, as the kernel)
                self._lowered[id(node)] = _Lowered("reshape", tuple(env[id(o0)].shape),
                                                   None, None)
                continue
            if node.kind == "adaptive_avg_pool2d" and env[id(o0)].shape[2:] == (1, 1) and \
                    o0.dtype.kind == "f" and not const_of(node.args[0]):
                # a global average pool: one mean over the plane (the kernel builds averaging
                # matrices and runs two batched GEMMs)
                self._lowered[id(node)] = _Lowered("global_mean", None, None, None)
                continue
            self._generic_calls += 1   # any other node: its kernel
        for step in self._steps:
            step.bind()
        # ember's own threads (BLAS at one thread, batches and GEMM columns split into chunks)
        # once a GEMM is large enough to split; small plans leave BLAS's thread count alone
        flops = [st.flops() for st in self._steps] or [0.0]
        self.parallel = max(flops) >= PARALLEL_MIN_FLOPS
        self.one_blas_thread = ONE_BLAS_THREAD and not self.parallel and \
            sum(flops) >= _parallel().MIN_FLOPS
        self._tune = [(st, env[id(x)], env[id(r)] if r is not None else None)
                      for st, x, r in tune if len(st.modes()) > 1]
        self.specialised = 0   # steps ``specialise`` made direct kernel calls
        self._generate(inline=False)
        self._copy = None   # per output: whether it may alias a reused buffer (first run)
        self.thread_timings = None   # the whole plan's best time per thread setting (tune_threads)
        self.situ_timings = None   # the whole plan's best time, isolated / in-situ choices
        self._thread_settings = None
        self._tuned = []
        self.calls = 0   # runs since the plan was first tuned (``RETUNE_AFTER``)

    def _generate(self, inline):
        """The plan's function: the graph's array-mode code (``codegen.generate`` with the fast
        path's rule) with the plan's statements (``_rule``) in place of the nodes it lowered
        and its sizes as constants. ``inline``: steps whose choices are final call their
        kernels directly. Returns how many steps were inlined."""
        from ember.jit.codegen import compile_graph
        inlined = []

        def rule(node, w):
            st = self._rule(node, w, inline)
            if inline and st is not None and st.lines and \
                    self._lowered.get(id(node), _Lowered(None, 0, 0, 0)).kind == "step":
                inlined.append(node)
            return st
        self._fn, self.source = compile_graph(self.graph, "array", "plan", rules=(rule,),
                                              consts=self._sizes)
        return len(inlined)

    def _rule(self, node, w, inline):
        """The ``Statement`` the plan writes for ``node`` (a lowering rule of
        ``codegen.generate``), ``SKIP`` for a node folded into an earlier one, or None."""
        from ember.jit.codegen import SKIP, Statement
        low = self._lowered.get(id(node))
        if low is None:
            return SKIP if id(node) in self._consumed else None
        if low.kind == "cat":
            return Statement(lines=low.what.lines(node, w.ref, w.bind))
        if low.kind == "reshape":
            return Statement(rhs=f"{w.ref(node.args[0])}.reshape({low.what!r})")
        if low.kind == "global_mean":
            return Statement(rhs=f"{w.ref(node.args[0])}.mean(axis=(2, 3), keepdims=True)")
        if low.kind == "group":
            args = ", ".join(map(w.ref, low.reads))
            return Statement(rhs=f"{w.bind(low.what, 'fusion_group')}({args})",
                             defines=low.defines, unpack=True)
        step, srcs = low.what, [w.ref(v) for v in low.reads]
        if inline:
            body = step.inline(w.ref(low.defines), srcs, w.bind, w.temp)
            if body is not None:
                return Statement(lines=body, defines=[low.defines])
        return Statement(rhs=f"{w.bind(step, 'step')}({', '.join(srcs)})",
                         defines=[low.defines], unpack=False)

    # ---- patterns -------------------------------------------------------------------------
    @staticmethod
    def _fused_group(grp, env, consumed):
        """Whether a fusion group none of whose members a pattern took runs as its fused kernel:
        from ``fused.MIN_FUSED_SIZE`` elements, as the graph's own code runs it (a GELU over
        1e6 elements: one pass instead of nine kernels)."""
        from ember.jit.fused import use_kernel
        sub, gargs, members, gouts = grp
        if any(id(n) in consumed for n in members):
            return False
        arrays = [env[id(a)] for a in gargs if isinstance(a, Value)]
        return use_kernel(arrays) and \
            all(isinstance(env.get(id(o)), np.ndarray) for o in gouts)

    def _conv(self, node, env, kn, const_of, single_use, index, consumed, outs):
        x, w, b = (list(node.args) + [None] * 3)[:3]
        xa = env[id(x)] if isinstance(x, Value) else None
        if xa is None or xa.dtype not in _FLOATS or xa.ndim != 4 or not const_of(w) or \
                (b is not None and not (isinstance(b, Value) and const_of(b))):
            return None, None, None
        wa = env[id(w)]
        ba = env[id(b)] if b is not None else None
        if wa.dtype != xa.dtype or wa.ndim != 4 or (ba is not None and ba.dtype != xa.dtype):
            return None, None, None
        a = node.attrs
        stride, padding = _pair(a.get("stride")), _pair(a.get("padding"))
        dilation = _pair(a.get("dilation"))
        if None in (stride, padding, dilation) or a.get("groups", 1) != 1 or \
                wa.shape[1] != xa.shape[1] or not xa.flags.c_contiguous:
            return None, None, None
        y = node.outputs[0]
        ya = env[id(y)]
        N, C, H, W = xa.shape
        K, _, R, S = wa.shape
        if ya.size == 0 or C * R * S * ya.size // K * xa.itemsize > MAX_COL_BYTES:
            return None, None, None
        last, reads, res, relu, pool = y, [x], None, False, None
        nxt = single_use(last, ("add",))
        if nxt is not None and nxt.attrs.get("alpha", 1) == 1 and len(nxt.args) == 2:
            other = nxt.args[1] if nxt.args[0] is last else nxt.args[0]
            if isinstance(other, Value) and other is not last and \
                    (other.node is None or index[id(other.node)] < index[id(node)]) and \
                    other.dtype == ya.dtype and env[id(other)].shape == ya.shape and \
                    nxt.outputs[0].dtype == ya.dtype:
                res = other
                consumed.add(id(nxt))
                last = nxt.outputs[0]
                reads.append(other)
        nxt = single_use(last, ("relu",))
        if nxt is not None:
            relu = True
            consumed.add(id(nxt))
            last = nxt.output
        nxt = single_use(last, ("max_pool2d_with_indices",))
        if nxt is not None and res is None and not nxt.outputs[1].uses and \
                nxt.outputs[1] not in self.graph.outputs:
            k = _pair(nxt.attrs.get("kernel_size"))
            s = nxt.attrs.get("stride")
            s = k if s in (None, (), []) else _pair(s)
            if k is not None and s is not None and \
                    _pair(nxt.attrs.get("padding", 0)) == (0, 0) and \
                    _pair(nxt.attrs.get("dilation", 1)) == (1, 1) and \
                    not nxt.attrs.get("ceil_mode", False):
                pool = (k[0], k[1], s[0], s[1])
                consumed.add(id(nxt))
                last = nxt.outputs[0]
        out_shape = env[id(last)].shape
        step = _ConvStep(kn.conv, self.shared, xa.shape, xa.dtype, wa, ba, stride, padding, dilation,
                         res, relu, pool, out_shape, id(last) in outs)
        return step, reads, last

    def _linear(self, node, env, kn, const_of, single_use, consumed, outs):
        x, w, b = (list(node.args) + [None] * 3)[:3]
        xa = env[id(x)] if isinstance(x, Value) else None
        if xa is None or xa.dtype not in _FLOATS or xa.ndim != 2 or not const_of(w) or \
                (b is not None and not (isinstance(b, Value) and const_of(b))):
            return None, None, None
        wa = env[id(w)]
        ba = env[id(b)] if b is not None else None
        if wa.dtype != xa.dtype or wa.ndim != 2 or (ba is not None and ba.dtype != xa.dtype):
            return None, None, None
        last, relu = node.outputs[0], False
        if ba is None:
            nxt = single_use(last, ("add",))
            if nxt is not None and nxt.attrs.get("alpha", 1) == 1 and len(nxt.args) == 2:
                other = nxt.args[1] if nxt.args[0] is last else nxt.args[0]
                if isinstance(other, Value) and const_of(other) and \
                        env[id(other)].shape == (wa.shape[0],) and other.dtype == xa.dtype:
                    ba = env[id(other)]
                    consumed.add(id(nxt))
                    last = nxt.outputs[0]
        nxt = single_use(last, ("relu",))
        if nxt is not None:
            relu = True
            consumed.add(id(nxt))
            last = nxt.output
        step = _LinearStep(kn.linear, wa, ba, relu, env[id(last)].shape, xa.dtype, id(last) in outs)
        return step, [x], last

    def specialise(self):
        """Generate the plan's function again with each step whose choices are final -- a
        convolution in mode "direct" without a residual, a chain of GEMVs, a GEMV too small to
        split -- calling its kernels directly on its operands (bound as globals), instead of
        through the step's Python object (LeNet-5 at batch 1: its three steps' argument
        unpacking and mode checks, ~7k instructions of a call). Called by ``Planner.run`` once
        the plan is steady (its modes are not timed again); other steps keep their call."""
        if SPECIALISE:
            self.specialised = self._generate(inline=True)

    # ---- running ----------------------------------------------------------------------------
    def ready(self, arrays=None):
        """Whether the plan's own kernels are compiled, so that it can run with every
        convolution step in mode "kxp" (queues the missing ones, and those of the other modes,
        in the background). The first call that finds the other modes' kernels ready too
        times each step's modes (``autotune``), then inside whole runs on ``arrays``
        (``tune_in_situ``); ``Planner.run`` asks again on each call until then. (The plan
        waited for all of them: on a kernel cache warmed by eager runs only, ResNet-50's plan
        waited ~28 s of compiles, 20 of them for the other modes' kernels, while its calls took
        the ordinary path.)"""
        from ember.kernels.runtime import compiler as rt
        ok = True
        for disp, sig in self._sigs:
            if not rt.ready(disp, sig):
                ok = False
        modes_ok = True
        for st, x, _ in self._tune:
            for disp, sig in st.mode_signatures(x):
                if not rt.ready(disp, sig):
                    modes_ok = False
        if ok and modes_ok and self._tune:
            self.autotune()
            if IN_SITU and arrays is not None:
                self.tune_in_situ(arrays)
        return ok

    @property
    def tuning_pending(self):
        """Whether the convolution steps still wait for their first ``autotune``."""
        return bool(self._tune) and not self._tuned

    def autotune(self):
        """For each convolution step, time its modes on the recorded input under the plan's
        thread setting -- im2col + ``W @ col`` ("kxp"), transposed im2col + ``col.T @ W.T``
        ("pxk": one GEMM row per output pixel, which BLAS splits better when K is small) and
        ember's convolution engine ("engine": direct, Winograd, ... as its selector picks for
        the shape) -- each with its fused epilogue, and for each linear step of several rows
        BLAS's GEMM ("gemm") against the direct micro-kernel ("direct", see ``_LinearStep``),
        and keep the fastest: one warm-up and one timed run of each, then two interleaved
        rounds of timed runs of those within ``TUNE_CLOSE`` of the best (the minimum counts).
        Called again by ``retune``: the times of both moments count (each mode's minimum over
        them)."""
        import time
        tune, self._tune = self._tune, []
        self._tuned = tune

        def timed(st, x, r):
            t0 = time.perf_counter()
            st(x, r)
            return time.perf_counter() - t0
        for st, x, r in tune:
            best = st.mode_times
            with self._threads():
                for mode in st.modes():
                    st.mode = mode
                    st(x, r)        # warm: workspaces, the engine's selector, BLAS
                    best[mode] = min(best.get(mode, float("inf")), timed(st, x, r))
                low = min(best.values())
                close = [m for m, t in best.items() if t <= TUNE_CLOSE * low]
                for _ in range(2):      # interleaved: a busy moment does not decide alone
                    for mode in close:
                        st.mode = mode
                        best[mode] = min(best[mode], timed(st, x, r))
            st.mode = min(best, key=best.get)
        self._check_blas_free()

    def _check_blas_free(self):
        """Whether no step of the plan calls BLAS (every convolution in mode "direct", every
        linear a GEMV, no node run by its own kernel): such a plan runs without switching BLAS's
        thread count (~3 us per call). (A linear step in mode "direct" calls no BLAS either,
        but splits its columns over ember's threads only under the plan's thread policy.)"""
        self.blas_free = self._generic_calls == 0 and all(
            (isinstance(st, _ConvStep) and st.mode in ("direct", "direct_split"))
            or (isinstance(st, (_LinearStep, _LinearChain)) and st.gemv) for st in self._steps)

    def tune_threads(self, arrays):
        """Time the whole plan on ``arrays`` under its thread setting and with BLAS left to its
        own threads (no chunks on ember's pool), interleaved, and keep BLAS's threads when they
        take under ``BLAS_THREADS_MARGIN`` of the time: which wins
        depends on the host and on the plan (on the 2-core VM, MLP 784-512-512-10 at batch 64
        ran 843 us on ember's chunks against 451 us on OpenBLAS's threads; LeNet at batch 64,
        dominated by convolutions, 1.20 against 1.40 ms). Plans that leave BLAS alone already
        have nothing to choose."""
        import time
        if not (self.parallel or self.one_blas_thread) or self.blas_free:
            return
        settings = self._thread_settings
        if settings is None:
            settings = self._thread_settings = [(self.parallel, self.one_blas_thread),
                                                (False, False)]
        best = list(self.thread_timings.values()) if self.thread_timings else \
            [float("inf")] * len(settings)
        for _ in range(3):
            for i, (par, one) in enumerate(settings):
                self.parallel, self.one_blas_thread = par, one
                self.run(arrays)        # warm: the setting's BLAS threads
                t0 = time.perf_counter()
                self.run(arrays)
                best[i] = min(best[i], time.perf_counter() - t0)
        # BLAS's threads only when clearly faster: a threaded GEMM stalls whenever another
        # process holds a core (lock-step hand-offs), the plan's own setting does not
        free = best[1] < BLAS_THREADS_MARGIN * best[0]
        self.parallel, self.one_blas_thread = settings[1 if free else 0]
        self.thread_timings = dict(zip(("ember's chunks", "BLAS threads"), best))

    def retune(self, arrays):
        """Time the convolution steps' modes once more (at the ``RETUNE_AFTER``-th run), and the
        thread settings when the first tuning left the plan to BLAS's threads: the choices rest
        on the best times of two moments, so a busy moment during the first tuning (another
        process on a core) does not fix a slow plan for the process's life. A plan on ember's
        chunks does not time BLAS's threads again: OpenBLAS's woken threads spin for ~0.1 s
        after their last call and took the core from the next ~200 runs of LeNet at batch 64
        (0.8 instead of 0.53 ms)."""
        if self._tuned:   # else the first tuning still waits for its kernels (``ready``)
            self._tune = self._tuned
            self.autotune()
        if self._thread_settings is not None and \
                (self.parallel, self.one_blas_thread) == self._thread_settings[1]:
            self.parallel, self.one_blas_thread = self._thread_settings[0]
            self.tune_threads(arrays)
        if IN_SITU:
            self.tune_in_situ(arrays)

    def tune_in_situ(self, arrays):
        """Time each tuned step's modes within IN_SITU_CLOSE of its best ``autotune`` time
        inside whole runs of the plan on ``arrays`` -- each step's call timed where the plan
        makes it, IN_SITU_ROUNDS runs per mode, the steps' modes rotated so that each run mixes
        them -- and keep each step's fastest there (its minimum, in ``situ_times``). Steps the
        plan's function does not call through their object keep their mode."""
        import time
        tuned = {}
        for st, _, _ in self._tuned:
            if st.mode_times:
                low = min(st.mode_times.values())
                modes = [m for m, t in st.mode_times.items() if t <= IN_SITU_CLOSE * low]
                if len(modes) > 1:
                    tuned[id(st)] = (st, modes)
        ns = self._fn.__globals__
        names = {k: tuned[id(v)] for k, v in ns.items() if id(v) in tuned}
        if not names:
            return
        times = {id(st): {} for st, _ in names.values()}

        def timer(st, best):
            def call(*args):
                t0 = time.perf_counter()
                out = st(*args)
                t = time.perf_counter() - t0
                if t < best.get(st.mode, float("inf")):
                    best[st.mode] = t
                return out
            return call
        try:
            for k, (st, _) in names.items():
                ns[k] = timer(st, times[id(st)])
            width = max(len(m) for _, m in names.values())
            for r in range(IN_SITU_ROUNDS):
                for i in range(width):
                    for j, (st, modes) in enumerate(names.values()):
                        st.mode = modes[(i + j + r) % len(modes)]
                    self.run(arrays)
        finally:
            for k, (st, _) in names.items():
                ns[k] = st
                st.situ_times = times[id(st)]
        # the steps' choices together against the isolated ones, as whole runs: a step's
        # time in the plan also depends on its neighbours' modes (whose threads are awake,
        # whose output is in which cache), so the new choices are kept only when the plan as
        # a whole runs faster with them
        steps = [st for st, _ in names.values()]
        before = [min(st.mode_times, key=st.mode_times.get) for st in steps]
        after = [min(st.situ_times, key=st.situ_times.get) if st.situ_times else b
                 for st, b in zip(steps, before)]
        best = [float("inf"), float("inf")]
        for _ in range(IN_SITU_CHECKS):
            for i, modes in enumerate((before, after)):
                for st, m in zip(steps, modes):
                    st.mode = m
                t0 = time.perf_counter()
                if self.run(arrays) is not None:    # (None: another thread held the plan)
                    best[i] = min(best[i], time.perf_counter() - t0)
        self.situ_timings = dict(zip(("isolated", "in situ"), best))
        for st, m in zip(steps, after if best[1] < best[0] else before):
            st.mode = m

    def _threads(self):
        import contextlib
        if self.parallel:
            return _parallel().policy(True)
        if self.one_blas_thread:
            return blas_mode(LIMITED)
        return contextlib.nullcontext()

    def run(self, arrays):
        """The graph's outputs for ``arrays`` (a tuple), or None when the plan is busy."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            for a in arrays:
                if not a.flags.c_contiguous:
                    arrays = [np.ascontiguousarray(a) for a in arrays]
                    break
            if (self.parallel or self.one_blas_thread) and not self.blas_free:
                with self._threads():
                    res = self._fn(*arrays)
            else:
                res = self._fn(*arrays)
            copy = self._copy
            if copy is None:
                bufs = [s.y for s in self._steps if s.y is not None] + \
                    list(self.shared.arrays.values()) + self._cat_arrays
                copy = [isinstance(r, np.ndarray) and any(np.shares_memory(r, b) for b in bufs)
                        for r in res]
                self._copy = copy if any(copy) else False
            if copy:
                res = tuple(np.array(r) if c else r for r, c in zip(res, copy))
            return res
        finally:
            self._lock.release()


def _record(interp, formals):
    """Every value's array for one run of the interpreter (array mode, nothing freed)."""
    from ember.autograd._generated.records import OPS
    g = interp.graph
    env = {id(v): x for v, x in zip(g.inputs, formals)}
    for n in g.nodes:
        if n.kind == "constant":
            env[id(n.output)] = g.constants[n.attrs["name"]]
            continue
        args = [interp._resolve(a, env) for a in n.args]
        op = OPS.get(n.kind)
        if op is not None:
            args += [interp._resolve(n.attrs[k], env) for k in op.const_names if k in n.attrs]
        out = interp._fn(n)(*args)
        res = tuple(out) if op is not None and op.multi else (out,)
        for o, r in zip(n.outputs, res):
            env[id(o)] = r if isinstance(r, np.ndarray) else np.asarray(r)
    return env


class Planner:
    """The plans of one traced callable, by input shapes (built on demand, LRU-cached)."""

    def __init__(self, graph):
        self.graph = _without_local_writes(graph)
        self.enabled = supported(self.graph)
        self._plans = OrderedDict()
        self._recent = None   # the plan run last (the LRU order's last entry)
        self._failed = set()
        self.errors = []   # why a plan could not be built (those shapes take the ordinary path)

    def run(self, arrays):
        """The outputs through the plan for these shapes, or None (ordinary path this call)."""
        if not self.enabled:
            return None
        key = tuple(map(_shape, arrays))
        plan = self._plans.get(key)
        if plan is None:
            if key in self._failed:
                return None
            kn = _kernels()
            if kn is None:
                self.enabled = False
                return None
            try:
                plan = InferencePlan(self.graph, arrays, kn)
            except Exception as e:  # noqa: BLE001 - a graph the plan cannot run: ordinary path
                self._failed.add(key)
                self.errors.append(f"{type(e).__name__}: {e}")
                return None
            plan.ready_now = plan.steady = False
            self._plans[key] = self._recent = plan
            while len(self._plans) > MAX_PLANS:
                self._plans.popitem(last=False)
        else:
            if plan is not self._recent:   # (the most recent plan is already the last one)
                self._plans.move_to_end(key)
                self._recent = plan
            if plan.steady:
                return plan.run(arrays)
        if not plan.ready_now:
            if not plan.ready(arrays):
                return None
            plan.ready_now = True
            plan.tune_threads(arrays)
        elif plan.tuning_pending:
            plan.ready(arrays)   # times the convolution modes once their kernels are ready
        plan.calls += 1
        if plan.calls == RETUNE_AFTER:
            plan.retune(arrays)
        # nothing left to tune: later calls go straight to the plan
        plan.steady = plan.calls >= RETUNE_AFTER and not plan.tuning_pending
        if plan.steady:
            plan.specialise()
            if RELEASE_OTHER_MODES:
                for st in plan._steps:
                    if isinstance(st, _ConvStep):
                        st.release_other_modes()
        return plan.run(arrays)

    def plans(self):
        """{input shapes: InferencePlan} built so far."""
        return dict(self._plans)
