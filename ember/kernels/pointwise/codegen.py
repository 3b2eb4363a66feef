"""Generate the Numba source of a pointwise kernel for one typing and inner-stride layout.

The serial kernel runs tasks ``task_lo <= t < task_hi``; task ``t`` covers row ``t // nchunks`` of
the collapsed outer dimensions and chunk ``t % nchunks`` of the innermost one; the engine splits the
tasks over ember's own threads (``kernels.runtime.threadpool``). The parallel kernel (when Numba runs
on its TBB threading layer, see ``runtime.threads``) takes all ``ntasks`` tasks and a run count and
executes the runs in a ``prange``, each run a call of the same loop body (``tasks``). Each array
operand is a flat
1-d buffer with an element offset and element strides; its innermost stride is specialised at
generation time: 'c' (1), 'b' (0) or 's' (any).
"""
import math

import numpy as np

from .ops import opmath
from .promotion import SCALAR

VERSION = "6"
BOOL = np.dtype(bool)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
_BOOL_KINDS = ("compare", "predicate", "logical")


def storage_type(dtype):
    """The Numba type name an array of ``dtype`` is passed as (float16 travels as uint16)."""
    return "boolean" if dtype == BOOL else ("uint16" if dtype == F16 else dtype.name)


def scalar_register(dtype):
    """The dtype a Python scalar input of promotion dtype ``dtype`` is passed as."""
    return {"b": BOOL, "i": np.dtype(np.int64), "u": np.dtype(np.int64), "f": np.dtype(np.float64)}[dtype.kind]


def convert(src, frm, to):
    """Source converting a value of dtype ``frm`` (float16 held in float32) to dtype ``to``."""
    if frm == to or (frm == F16 and to == F32):
        return src
    if to == BOOL:
        return f"({src} != 0)"
    if to == F16:
        return f"rf16({src})" if frm == F32 else f"rf16(np.float32({src}))"
    return f"np.{to.name}({src})"


class Literal:
    """Renders Python constants as source in the compute register of ``dtype``."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.is_float = dtype.kind == "f"
        self.is_bool = dtype == BOOL

    def fn(self, name):
        """The Numba function computing ``name`` (exp, tanh, erf, log1p) in this register type:
        float32 gets the vectorisable helpers, others NumPy's scalar functions (``math.erf``:
        NumPy has no erf)."""
        if opmath(self.dtype) == F32:
            return f"{name}_f32"
        return "math.erf" if name == "erf" else f"np.{name}"

    def __call__(self, value):
        if self.is_bool:
            return "True" if value else "False"
        val = np.asarray(value).astype(self.dtype)[()]
        reg = opmath(self.dtype)
        if self.is_float:
            f = float(val)
            text = "np.nan" if math.isnan(f) else ("np.inf" if f == math.inf else
                                                  ("-np.inf" if f == -math.inf else repr(f)))
            return f"np.{reg.name}({text})"
        return f"np.{reg.name}({int(val)})"


def _body(typing, out_dtypes, classes, regs, n_in_arrays, aliases):
    n_arrays = len(classes)
    lines = [
        "wide_vectors()",
        "rank = shape.shape[0]",
        "inner = shape[rank - 1]",
        "for t in range(task_lo, task_hi):",
        "    row = t // nchunks",
        "    lo = (t - row * nchunks) * chunk",
        "    hi = min(lo + chunk, inner)",
    ]
    lines += [f"    p{k} = offs[{k}]" for k in range(n_arrays)]
    lines += [
        "    r = row",
        "    for d in range(rank - 2, -1, -1):",
        "        q = r % shape[d]",
        "        r = r // shape[d]",
    ]
    lines += [f"        p{k} += q * strides[{k}, d]" for k in range(n_arrays)]
    lines += [f"    z{k} = strides[{k}, rank - 1]" for k in range(n_arrays) if classes[k] == "s"]
    lines.append("    for i in range(lo, hi):")

    def element(k):
        index = {"c": f"np.uint64(p{k} + i)", "b": f"np.uint64(p{k})",
                 "s": f"np.uint64(p{k} + i * z{k})"}[classes[k]]
        return f"b{k}[{index}]"
    inner = _element(typing, out_dtypes, regs, n_in_arrays, aliases, element)
    return "\n".join("    " + line for line in lines + ["        " + x for x in inner])


def _element(typing, out_dtypes, regs, n_in_arrays, aliases, element):
    """The statements computing one element of every output: the input arrays' loads (input
    ``k`` read through output ``aliases[k]`` when it is one), the typed steps, the stores;
    ``element(k)`` is the source of array operand ``k``'s element (inputs, then outputs)."""
    inner = []
    k = 0
    for name, dtype, prio in typing.inputs:
        if prio != SCALAR:
            load = element(k if aliases[k] < 0 else n_in_arrays + aliases[k])
            inner.append(f"{regs[name]} = {'h2f(' + load + ')' if dtype == F16 else load}")
            k += 1
    dtypes = {name: (scalar_register(dtype) if prio == SCALAR else dtype)
              for name, dtype, prio in typing.inputs}
    for j, step in enumerate(typing.steps):
        srcs = []
        for a, dt in zip(step.operands, step.cast_to):
            if a is None:
                srcs.append(None)
            elif isinstance(a, str):
                srcs.append(convert(regs[a], dtypes[a], dt))
            else:
                srcs.append(Literal(dt)(a))
        src = step.op.numba(Literal(step.ct), step.params, *srcs)
        frm = BOOL if step.op.kind in _BOOL_KINDS else opmath(step.ct)
        if frm != BOOL:
            src = f"np.{frm.name}({src})"
        regs[step.name] = f"t{j}"
        dtypes[step.name] = step.result
        inner.append(f"t{j} = {convert(src, frm, step.result)}")
    for m, ((name, dtype), out_dtype) in enumerate(zip(typing.outputs, out_dtypes)):
        if out_dtype == F16:
            value = f"f2h({convert(regs[name], dtypes[name], F32)})"
        else:
            value = convert(regs[name], dtypes[name], out_dtype)
        inner.append(f"{element(n_in_arrays + m)} = {value}")
    return inner


def _header():
    """The first lines of a generated kernel module: its mark and imports."""
    return [
        f"# generated by ember.kernels.pointwise.codegen v{VERSION}; do not edit",
        "import math",
        "import numpy as np",
        "from numba import njit, prange, types as nt",
        "from ember.kernels.runtime.nbhelpers import erf_f32, exp_f32, f2h, floordiv_float, h2f, "
        "log1p_f32, rf16, sel, tanh_f32, wide_vectors",
        "",
    ]


def kernel_source(typing, out_dtypes, classes, aliases, parallel=False):
    """Python source of a module defining ``kernel`` (njit, nogil, cache=True) for ``typing``
    with outputs stored as ``out_dtypes`` and inner-stride ``classes`` (inputs' arrays in order,
    then outputs). ``aliases[k]`` is the output that input array ``k`` is (same memory, same
    layout, same dtype), or -1: such an input is read through the output's buffer, so that LLVM
    sees one pointer and still vectorises the in-place loop. The serial kernel takes
    ``(task_lo, task_hi, shape, offs, strides, chunk, nchunks, *buffers, *scalars)``: the task
    range, the collapsed shape, each operand's element offset and strides (one row per operand),
    the task split, then one flat buffer per array operand and the scalar inputs. With
    ``parallel`` the kernel takes ``(shape, offs, strides, chunk, nchunks, ntasks, runs, ...)``
    instead and runs the tasks in ``runs`` equal runs of a ``prange``."""
    regs = {}
    common = ["shape", "offs", "strides", "chunk", "nchunks"]
    index_array = "nt.Array(nt.int64, {}, 'C', readonly=True)"
    common_sig = [index_array.format(1), index_array.format(1), index_array.format(2), "nt.int64", "nt.int64"]
    operands, operand_sig = [], []
    k = 0
    scalars = []
    for i, (name, dtype, prio) in enumerate(typing.inputs):
        if prio == SCALAR:
            regs[name] = f"c{i}"
            scalars.append((f"c{i}", scalar_register(dtype)))
        else:
            regs[name] = f"v{i}"
            operands.append(f"b{k}")
            operand_sig.append(f"nt.Array(nt.{storage_type(dtype)}, 1, 'C', readonly=True)")
            k += 1
    n_in_arrays = k
    for dtype in out_dtypes:
        operands.append(f"b{k}")
        operand_sig.append(f"nt.Array(nt.{storage_type(dtype)}, 1, 'C')")
        k += 1
    for name, reg in scalars:
        operands.append(name)
        operand_sig.append(f"nt.{storage_type(reg)}")
    body = _body(typing, out_dtypes, classes, regs, n_in_arrays, aliases)
    header = _header()
    task_params = ", ".join(["task_lo", "task_hi"] + common + operands)
    if not parallel:
        sig = ["nt.int64", "nt.int64"] + common_sig + operand_sig
        return "\n".join(header + [
            f"SIGNATURE = nt.void({', '.join(sig)})",
            "",
            "",
            "@njit(SIGNATURE, nogil=True, cache=True, error_model='numpy', boundscheck=False)",
            f"def kernel({task_params}):",
            body,
            "",
        ])
    sig = common_sig + ["nt.int64", "nt.int64"] + operand_sig
    rest = ", ".join(common + operands)
    return "\n".join(header + [
        f"SIGNATURE = nt.void({', '.join(sig)})",
        "",
        "",
        "@njit(error_model='numpy', boundscheck=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)",
        f"def tasks({task_params}):",
        body,
        "",
        "",
        "@njit(SIGNATURE, parallel=True, nogil=True, cache=True, error_model='numpy', boundscheck=False)",
        f"def kernel({', '.join(common + ['ntasks', 'runs'] + operands)}):",
        "    per = (ntasks + runs - 1) // runs",
        "    for w in prange(runs):",
        f"        tasks(w * per, min(ntasks, (w + 1) * per), {rest})",
        "",
    ])


def many_kernel_source(typing, out_dtypes, aliases, members):
    """Python source of a module defining ``kernel`` (njit, nogil, cache=True): ``typing`` over
    ``members`` operand sets of C-contiguous arrays at once (an optimizer's update of every
    parameter in one call). It takes one tuple per operand -- each array input, each output
    (``out_dtypes``), each scalar input -- holding that operand of every set, the arrays as flat
    1-d buffers; set ``m`` is computed element by element as ``kernel_source``'s loop computes
    one array, with input ``k`` read through output ``aliases[k]`` where it is one. It returns
    False, writing nothing, when a set's arrays differ in length, else True."""
    regs, params, sig, scalars = {}, [], [], []
    k = 0
    for i, (name, dtype, prio) in enumerate(typing.inputs):
        if prio == SCALAR:
            regs[name] = f"s{i}"
            scalars.append((f"c{i}", f"s{i}", scalar_register(dtype)))
        else:
            regs[name] = f"v{i}"
            params.append(f"b{k}")
            sig.append(f"nt.UniTuple(nt.Array(nt.{storage_type(dtype)}, 1, 'C'), {members})")
            k += 1
    n_in_arrays = k
    for dtype in out_dtypes:
        params.append(f"b{k}")
        sig.append(f"nt.UniTuple(nt.Array(nt.{storage_type(dtype)}, 1, 'C'), {members})")
        k += 1
    for tup, _, reg in scalars:
        params.append(tup)
        sig.append(f"nt.UniTuple(nt.{storage_type(reg)}, {members})")
    inner = _element(typing, out_dtypes, regs, n_in_arrays, aliases,
                     lambda j: f"x{j}[np.uint64(i)]")
    body = ["    wide_vectors()", f"    for m in range({members}):",
            f"        n = b{n_in_arrays}[m].shape[0]"]
    body += [f"        if b{j}[m].shape[0] != n:\n            return False" for j in range(k)]
    body += [f"    for m in range({members}):"]
    body += [f"        x{j} = b{j}[m]" for j in range(k)]
    body += [f"        {reg} = {tup}[m]" for tup, reg, _ in scalars]
    body.append(f"        for i in range(x{n_in_arrays}.shape[0]):")
    body += ["            " + x for x in inner]
    body.append("    return True")
    header = _header()
    return "\n".join(header + [
        f"SIGNATURE = nt.boolean({', '.join(sig)})",
        "",
        "",
        "@njit(SIGNATURE, nogil=True, cache=True, error_model='numpy', boundscheck=False)",
        f"def kernel({', '.join(params)}):",
        *body,
        "",
    ])
