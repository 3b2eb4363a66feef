"""Dimension collapsing and reordering for strided elementwise loops.

Strides here are in any unit (bytes or elements) as long as every operand uses the same unit for
all of its dimensions.
"""
from typing import NamedTuple


class Collapsed(NamedTuple):
    """Result of ``collapse_dims``: the new shape, one stride tuple per operand, and the new index of
    the excluded dimension (None when none was asked for)."""

    shape: tuple
    strides: tuple
    excluded: object


def collapse_dims(shape, *strides, exclude=None):
    """Merge adjacent dimensions that are contiguous with each other for every operand.

    Dimensions of size 1 are dropped; dimensions ``i`` and ``i + 1`` merge when, for every operand,
    ``stride[i] == stride[i + 1] * shape[i + 1]`` (which covers broadcast stride-0 pairs and negative
    strides). The C-order walk over the result visits the same offsets in the same order as the walk
    over the input. ``exclude`` names one dimension (negative allowed) that is kept as it is, even of
    size 1, and never merged with its neighbours. A shape holding a 0 collapses to ``(0,)``; a shape
    of only 1s (or ``()``) collapses to ``()``.

    Raises ValueError when a stride tuple's length differs from the shape's, or ``exclude`` is out
    of range.
    """
    shape = tuple(int(n) for n in shape)
    ndim = len(shape)
    strides = tuple(tuple(int(s) for s in st) for st in strides)
    for st in strides:
        if len(st) != ndim:
            raise ValueError(f"collapse_dims: shape {shape} has {ndim} dims but strides {st} has {len(st)}")
    if exclude is not None:
        if not -ndim <= exclude < ndim:
            raise ValueError(f"collapse_dims: exclude={exclude} out of range for {ndim} dims")
        exclude %= ndim
    if 0 in shape:
        if exclude is not None:
            return Collapsed((0,) if shape[exclude] == 0 else (0, shape[exclude]),
                             tuple(((0,) if shape[exclude] == 0 else (0, st[exclude])) for st in strides),
                             0 if shape[exclude] == 0 else 1)
        return Collapsed((0,), tuple((0,) for _ in strides), None)
    kept = [d for d in range(ndim) if shape[d] != 1 or d == exclude]
    new_shape = []
    new_strides = [[] for _ in strides]
    excluded = None
    prev_fixed = False
    for d in kept:
        fixed = d == exclude
        can_merge = (new_shape and not fixed and not prev_fixed
                     and all(ns[-1] == st[d] * shape[d] for ns, st in zip(new_strides, strides)))
        if can_merge:
            new_shape[-1] *= shape[d]
            for ns, st in zip(new_strides, strides):
                ns[-1] = st[d]
        else:
            new_shape.append(shape[d])
            for ns, st in zip(new_strides, strides):
                ns.append(st[d])
        if fixed:
            excluded = len(new_shape) - 1
        prev_fixed = fixed
    return Collapsed(tuple(new_shape), tuple(tuple(ns) for ns in new_strides), excluded)


def iteration_order(shape, *strides):
    """Return a permutation of the dimensions, outermost first, that walks memory forward.

    Dimensions are ordered like NumPy's ``order='K'`` (torch's TensorIterator does the same): by
    decreasing absolute stride of the first operand that tells two dimensions apart, operands with a
    zero stride in either being skipped; dimensions no operand tells apart keep their order.
    Transposing every operand by the result lets ``collapse_dims`` merge the dimensions of
    transposed or channels-last operands.
    """
    def compare(d0, d1):
        for st in strides:
            a, b = abs(st[d0]), abs(st[d1])
            if a and b and a != b:
                return 1 if a > b else -1
        return 0

    perm = list(reversed(range(len(shape))))  # innermost first
    for i in range(1, len(perm)):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = compare(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return tuple(reversed(perm))
