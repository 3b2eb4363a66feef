"""bfloat16 tensors (``ember.bfloat16``) compute as torch's CPU kernels compute them: an op
reads its bfloat16 inputs as float32 and rounds its floating results back to bfloat16 when
every floating input with dimensions was bfloat16 (a float32/float64 tensor input makes the
result that dtype, torch's promotion). Ops that only move values (views, cat, stack, clone,
copy_, to, indexing, ...) run on the bfloat16 memory itself, so views stay views.

The rule is on once ``ember.bfloat16`` has been made (``ember._dtype.BFLOAT16``): programs that
never use bfloat16 pay one list read per op."""
import numpy as np

from ember._dtype import BFLOAT16

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
))


def upcast(op, arrays):
    """``(arrays, round_back)``: the inputs with bfloat16 arrays read as float32, and whether
    float32 results go back to bfloat16; ``arrays`` unchanged for native ops."""
    if op.view or op.name in NATIVE:
        return arrays, False
    out, seen, other = _read(arrays, BFLOAT16[0])
    if not seen:
        return arrays, False
    return out, not other


def _read(items, bf16):
    """``(items with bfloat16 arrays as float32, any bfloat16 seen, any other floating array
    with dimensions seen)``, through a ``Tensor[]`` slot's list too."""
    seen = other = False
    out = []
    for a in items:
        if a.__class__ is _NDARRAY:
            dt = a.dtype
            if dt == bf16:
                a, seen = a.astype(_F32), True
            elif dt.kind == "f" and a.ndim:
                other = True
        elif a.__class__ in (list, tuple):
            a, s, o = _read(a, bf16)
            seen, other = seen or s, other or o
        out.append(a)
    return out, seen, other


def round_back(out):
    """A kernel's float32 results rounded to bfloat16 (other results unchanged)."""
    if out.__class__ is _NDARRAY:
        return out.astype(BFLOAT16[0]) if out.dtype == _F32 else out
    if isinstance(out, np.generic):     # a 0-d result as a NumPy scalar
        return np.asarray(out).astype(BFLOAT16[0]) if out.dtype == _F32 else out
    if isinstance(out, (tuple, list)):
        return type(out)(round_back(o) for o in out)
    return out
