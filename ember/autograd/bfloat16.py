"""bfloat16 tensors (``ember.bfloat16``) compute as torch's CPU kernels compute them: an op
reads its bfloat16 inputs as float32 and rounds its floating results back to bfloat16 when
torch's promotion gives bfloat16: every floating input with dimensions was bfloat16 (a
float32/float64 tensor input makes the result that dtype), and, where every bfloat16 input is
0-d, no other floating input is (0-d bfloat16 * 0-d float32 is float32). Ops that only move
values (views, cat, stack, clone, copy_, to, indexing, ...) run on the bfloat16 memory itself,
so views stay views.

The rule is on once ``ember.bfloat16`` has been made (``ember._dtype.BFLOAT16``): programs that
never use bfloat16 pay one list read per op."""
import numpy as np

from ember._dtype import BFLOAT16, to_numpy_dtype

_NDARRAY = np.ndarray
_F32 = np.dtype(np.float32)
# ops (besides the view ops) that move, select or convert values without arithmetic
NATIVE = frozenset((
    "cat", "stack", "hstack", "vstack", "dstack", "column_stack", "clone", "contiguous",
    "copy_", "to", "getitem", "setitem", "index_select", "gather", "take", "take_along_dim",
    "flip", "fliplr", "flipud", "roll", "rot90", "repeat", "tile", "repeat_interleave",
    "narrow_copy", "as_strided_copy", "detach", "masked_select", "index_put", "index_copy",
    "masked_fill", "where", "tril", "triu", "diag", "diag_embed", "pad", "zeros_like",
    "ones_like", "empty_like", "full_like", "split", "chunk", "unbind", "tensor_split",
    "movedim", "swapaxes", "scatter", "select_scatter", "slice_scatter", "diagonal_scatter",
    "as_strided_scatter", "broadcast_to", "expand_as", "fill_", "zero_",
    "nextafter",   # the next bfloat16, not the next float32 rounded back
))

# products whose operands must share one dtype in torch (bfloat16 with float32 raises there):
# their kernels check the dtypes as given, so mixed inputs are not read as float32 first
SAME_DTYPE = frozenset(("matmul", "mm", "bmm", "addmm", "dot"))


def upcast(op, arrays, consts):
    """``(arrays, round_back, consts)``: the inputs with bfloat16 arrays read as float32, and
    whether float32 results go back to bfloat16; ``arrays`` unchanged for native ops. An op
    given another ``dtype=`` (``softmax(x, -1, dtype=torch.float32)``, ``cumsum``, ``sum``)
    keeps its result in that dtype; ``dtype=bfloat16`` computes in float32 and rounds."""
    if op.view or op.name in NATIVE:
        return arrays, False, consts
    if op.name in SAME_DTYPE and len({a.dtype for a in arrays if a.__class__ is _NDARRAY}) > 1:
        return arrays, False, consts   # the kernel raises torch's dtype error, naming bfloat16
    out, seen = _read(arrays, BFLOAT16[0])
    if not seen[0]:
        return arrays, False, consts
    if "dtype" in op.const_names:
        at = op.const_names.index("dtype")
        if consts[at] is not None:
            if to_numpy_dtype(consts[at]) != BFLOAT16[0]:
                return out, False, consts
            consts = tuple(consts[:at]) + (None,) + tuple(consts[at + 1:])
    # torch's result is bfloat16 unless another floating dtype outranks it: one with
    # dimensions, or a 0-d one when every bfloat16 input is 0-d too (bf16 0-d * f32 0-d is f32)
    return out, not (seen[3] or (seen[2] and not seen[1])), consts


def _read(items, bf16, seen=None):
    """``(items with bfloat16 arrays as float32, seen)``, through a ``Tensor[]`` slot's list
    too; ``seen``: [any bfloat16, a bfloat16 with dimensions, another floating array without,
    another floating array with]."""
    seen = [False] * 4 if seen is None else seen
    out = []
    for a in items:
        if a.__class__ is _NDARRAY:
            dt = a.dtype
            if dt == bf16:
                seen[0] = True
                if a.ndim:
                    seen[1] = True
                a = a.astype(_F32)
            elif dt.kind == "f":
                seen[3 if a.ndim else 2] = True
        elif a.__class__ in (list, tuple):
            a, _ = _read(a, bf16, seen)
        out.append(a)
    return out, seen


def round_back(out):
    """A kernel's float32 results rounded to bfloat16 (other results unchanged)."""
    if out.__class__ is _NDARRAY:
        return out.astype(BFLOAT16[0]) if out.dtype == _F32 else out
    if isinstance(out, np.generic):     # a 0-d result as a NumPy scalar
        return np.asarray(out).astype(BFLOAT16[0]) if out.dtype == _F32 else out
    if isinstance(out, (tuple, list)):
        return type(out)(round_back(o) for o in out)
    return out
