"""Variable-length sequences, as torch.nn.utils.rnn: padding (pad_sequence, unpad_sequence) and
packing (PackedSequence, pack_padded_sequence, pad_packed_sequence, pack_sequence,
unpack_sequence). The recurrent modules accept a PackedSequence and run each sequence for its own
length."""
from collections import namedtuple

import numpy as np

from ember.ops import creation
from ember.autograd._generated import functions as G
from ember.errors import EmberRuntimeError, EmberValueError
from ember.tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence",
           "pad_sequence", "unpad_sequence", "pack_sequence", "unpack_sequence"]


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices",
                                                   "unsorted_indices"])):
    """Sequences of decreasing length laid out time step by time step: ``data`` (sum of
    ``batch_sizes``, *) holds step t of the ``batch_sizes[t]`` sequences still running;
    ``sorted_indices`` maps the packed order to the caller's batch order (None when the batch
    was already sorted)."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data):
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs):
        """The same sequences with ``data.to(*args, **kwargs)``."""
        return self._with_data(self.data.to(*args, **kwargs))

    def float(self):
        return self._with_data(self.data.float())

    def double(self):
        return self._with_data(self.data.double())

    def cpu(self):
        return self

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def invert_permutation(permutation):
    """The inverse of a permutation tensor (None stays None)."""
    if permutation is None:
        return None
    inv = np.empty(len(permutation), dtype=np.int64)
    inv[np.asarray(permutation.numpy(), dtype=np.int64)] = np.arange(len(permutation))
    return creation.tensor(inv)


def _lengths(lengths, op):
    arr = np.asarray(lengths.numpy() if isinstance(lengths, Tensor) else lengths)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise EmberValueError(f"{op}: lengths must be a 1-D sequence of integers, got "
                              f"{arr.dtype} of shape {arr.shape}")
    return arr.astype(np.int64)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch (T, B, *) (or (B, T, *)) whose sequence b has ``lengths[b]`` steps.
    With ``enforce_sorted=True`` the lengths must be decreasing; otherwise the batch is sorted
    and the order kept in ``sorted_indices``. Differentiable in ``input``."""
    op = "pack_padded_sequence"
    n = _lengths(lengths, op)
    if batch_first:
        input = G.transpose(input, 0, 1)
    T, B = input.shape[0], input.shape[1]
    if len(n) != B:
        raise EmberValueError(f"{op}: {len(n)} lengths for a batch of {B}")
    if B == 0:
        raise EmberValueError(f"{op}: the batch is empty")
    if n.min() <= 0 or n.max() > T:
        raise EmberRuntimeError(f"{op}: every length must be in 1..{T} (the padded length), got "
                                f"{n.tolist()}")
    if enforce_sorted:
        if np.any(np.diff(n) > 0):
            raise EmberRuntimeError(f"{op}: `lengths` array must be sorted in decreasing order "
                                    f"when `enforce_sorted` is True, got {n.tolist()}; pass "
                                    f"enforce_sorted=False to sort inside")
        sorted_indices = None
    else:
        order = np.argsort(-n, kind="stable")
        n = n[order]
        sorted_indices = creation.tensor(order.astype(np.int64))
        input = G.index_select(input, 1, sorted_indices)
    batch_sizes = np.array([(n > t).sum() for t in range(int(n.max()))], np.int64)
    data = G.cat([G.narrow(input[t], 0, 0, int(b)) for t, b in enumerate(batch_sizes)], 0)
    return PackedSequence(data, creation.tensor(batch_sizes), sorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Undo pack_padded_sequence: ``(padded (T, B, *) or (B, T, *), lengths)`` in the caller's
    batch order, padded with ``padding_value`` up to ``total_length`` if given."""
    data, sizes = sequence.data, [int(b) for b in sequence.batch_sizes.numpy()]
    B, T = (sizes[0] if sizes else 0), len(sizes)
    if total_length is not None:
        if total_length < T:
            raise EmberValueError(f"pad_packed_sequence: total_length={total_length} is below "
                                  f"the longest sequence's {T} steps")
        T_out = total_length
    else:
        T_out = T
    steps, start = [], 0
    for b in sizes:
        step = G.narrow(data, 0, start, b)
        if b < B:
            step = G.pad(step, (0, 0) * (data.dim() - 1) + (0, B - b), "constant", padding_value)
        steps.append(step)
        start += b
    padded = G.stack(steps, 0)
    if T_out > T:
        padded = G.pad(padded, (0, 0) * (data.dim()) + (0, T_out - T), "constant", padding_value)
    lengths = np.array([sum(1 for b in sizes if b > i) for i in range(B)], np.int64)
    if sequence.unsorted_indices is not None:
        padded = G.index_select(padded, 1, sequence.unsorted_indices)
        lengths = lengths[np.asarray(sequence.unsorted_indices.numpy())]
    if batch_first:
        padded = G.transpose(padded, 0, 1)
    return padded, creation.tensor(lengths)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack variable-length (L_i, *) tensors into (L_max, B, *) (or (B, L_max, *))."""
    if padding_side not in ("right", "left"):
        raise EmberValueError(f"pad_sequence: padding_side must be 'left' or 'right', got "
                              f"{padding_side!r}")
    L = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        extra = L - s.shape[0]
        pad = [0, 0] * (s.dim() - 1) + ([0, extra] if padding_side == "right" else [extra, 0])
        padded.append(G.pad(s, tuple(pad), "constant", padding_value) if extra else s)
    return G.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """Split a padded batch back into its ``lengths[b]``-step sequences."""
    n = _lengths(lengths, "unpad_sequence")
    if not batch_first:
        padded_sequences = G.transpose(padded_sequences, 0, 1)
    return [G.narrow(padded_sequences[b], 0, 0, int(k)) for b, k in enumerate(n)]


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of (L_i, *) tensors (decreasing lengths unless ``enforce_sorted=False``)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of (L_i, *) tensors a PackedSequence holds, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
