"""Sequence helpers: pad_sequence."""
from ember.autograd import _generated as G


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack variable-length (L_i, *) tensors into (L_max, B, *) (or (B, L_max, *))."""
    L = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        extra = L - s.shape[0]
        pad = [0, 0] * (s.dim() - 1) + ([0, extra] if padding_side == "right" else [extra, 0])
        padded.append(G.pad(s, tuple(pad), "constant", padding_value) if extra else s)
    return G.stack(padded, 0 if batch_first else 1)
