"""``ember.backends.mha`` (torch.backends.mha): whether ``nn.MultiheadAttention``,
``nn.TransformerEncoderLayer`` and ``nn.TransformerEncoder`` take torch's inference fast path
(eval, no grad, ...: their values where a row attends nothing, and the encoder's zero rows at
padded positions; docs/nn.md)."""
_is_fastpath_enabled = True


def get_fastpath_enabled():
    """Whether the fast path may be taken (it still needs every condition on the inputs)."""
    return _is_fastpath_enabled


def set_fastpath_enabled(value):
    """Allow (True) or forbid (False) the fast path, process-wide."""
    global _is_fastpath_enabled
    _is_fastpath_enabled = value
