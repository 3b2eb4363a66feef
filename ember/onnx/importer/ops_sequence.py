"""Sequence and optional values: a sequence is a Python list of tensors, an empty optional is
None. SequenceConstruct/Empty/Insert/At/Erase/Length, SplitToSequence, ConcatFromSequence,
SequenceMap (runs its body per element), Optional, OptionalHasElement, OptionalGetElement."""
import numpy as np

import ember
from ember.errors import EmberIndexError, EmberRuntimeError
from ember.onnx.importer._util import ints, norm_axis, scalar
from ember.onnx.importer.registry import importer


def _pos(seq, p, insert=False):
    n = len(seq)
    i = int(scalar(p))
    j = i + n if i < 0 else i
    if not 0 <= j <= (n if insert else n - 1):
        raise EmberIndexError(f"position {i} is out of range for a sequence of {n}")
    return j


@importer("SequenceConstruct", since=11)
def sequence_construct(a, *xs):
    return list(xs)


@importer("SequenceEmpty", since=11, attrs={"dtype": None})
def sequence_empty(a):
    return []


@importer("SequenceInsert", since=11)
def sequence_insert(a, seq, x, pos=None):
    out = list(seq)
    out.insert(len(out) if pos is None else _pos(seq, pos, insert=True), x)
    return out


@importer("SequenceAt", since=11)
def sequence_at(a, seq, pos):
    return seq[_pos(seq, pos)]


@importer("SequenceErase", since=11)
def sequence_erase(a, seq, pos=None):
    out = list(seq)
    del out[len(out) - 1 if pos is None else _pos(seq, pos)]
    return out


@importer("SequenceLength", since=11)
def sequence_length(a, seq):
    return ember.tensor(np.array(len(seq), np.int64))


@importer("SplitToSequence", since=11, attrs={"axis": 0, "keepdims": 1})
def split_to_sequence(a, x, split=None):
    ax = norm_axis(a["axis"], x.dim())
    n = x.shape[ax]
    if split is None:
        parts = [ember.narrow(x, ax, i, 1) for i in range(n)]
        return parts if a["keepdims"] else [p.squeeze(ax) for p in parts]
    sizes = ints(split)
    if split.dim() == 0:
        sizes = [sizes[0]] * (n // sizes[0]) + ([n % sizes[0]] if n % sizes[0] else [])
    out, start = [], 0
    for s in sizes:
        out.append(ember.narrow(x, ax, start, s))
        start += s
    return out


@importer("ConcatFromSequence", since=11, attrs={"axis": None, "new_axis": 0})
def concat_from_sequence(a, seq):
    if not seq:
        raise EmberRuntimeError("ConcatFromSequence of an empty sequence")
    if a["new_axis"]:
        return ember.stack(list(seq), norm_axis(a["axis"], seq[0].dim() + 1))
    return ember.cat(list(seq), norm_axis(a["axis"], seq[0].dim()))


@importer("SequenceMap", since=17, attrs={"body": None}, max_outputs=1 << 30)
def sequence_map(a, seq, *extra):
    body = a["body"]
    outs = [[] for _ in body.outputs]
    for i in range(len(seq)):
        args = [e[i] if isinstance(e, list) else e for e in extra]
        for lst, v in zip(outs, body(a["_env"], seq[i], *args)):
            lst.append(v)
    return tuple(outs)


@importer("Optional", since=15, attrs={"type": None})
def optional(a, x=None):
    return x


@importer("OptionalHasElement", since=15)
def optional_has_element(a, x=None):
    return ember.tensor(np.array(x is not None))


@importer("OptionalGetElement", since=15)
def optional_get_element(a, x):
    if x is None:
        raise EmberRuntimeError("OptionalGetElement of an empty optional")
    return x
