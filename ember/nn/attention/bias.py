"""``torch.nn.attention.bias``: causal masks ``scaled_dot_product_attention`` takes as
``attn_mask`` without materialising them (``causal_upper_left``, ``causal_lower_right``).

torch's ``CausalBias`` is a Tensor subclass that reroutes ``scaled_dot_product_attention``
through ``__torch_function__``; ember's is a plain object that ember's
``scaled_dot_product_attention`` recognises and hands to ``CausalBias._dispatch``. Upper-left
(and square) biases run as ``is_causal=True``; a non-square lower-right one runs with its
materialised mask, as torch's CPU path does (a query row that sees no key gives zeros)."""
import enum
import warnings

import numpy as np

from ember.errors import EmberValueError
from ember.ops import creation

__all__ = ["causal_upper_left", "causal_lower_right", "CausalVariant", "CausalBias"]


class CausalVariant(enum.IntEnum):
    """``UPPER_LEFT``: ``tril(ones(L, S))``; ``LOWER_RIGHT``: the triangle aligned to the lower
    right corner, ``tril(ones(L, S), S - L)``. The same when L == S."""
    UPPER_LEFT = 1
    LOWER_RIGHT = 2


class CausalBias:
    """A causal bias of ``variant`` for ``seq_len_q`` queries and ``seq_len_kv`` keys."""

    def __init__(self, variant, seq_len_q, seq_len_kv):
        if not isinstance(variant, CausalVariant):
            raise EmberValueError(f"CausalBias: variant must be a CausalVariant, got "
                                  f"{type(variant).__name__}")
        self.variant = variant
        self.seq_len_q = seq_len_q
        self.seq_len_kv = seq_len_kv
        if seq_len_q > seq_len_kv and variant == CausalVariant.LOWER_RIGHT:
            warnings.warn("Lower right causal bias will produce NaNs in the output when "
                          "seq_len_q > seq_len_kv!", stacklevel=2)

    def _upper_left(self, device=None):
        """(seq_len_q, seq_len_kv) bool mask, True where attended."""
        return creation.tensor(np.tril(np.ones((self.seq_len_q, self.seq_len_kv), bool)))

    def _lower_right(self, device=None):
        return creation.tensor(np.tril(np.ones((self.seq_len_q, self.seq_len_kv), bool),
                                       self.seq_len_kv - self.seq_len_q))

    def _materialize(self, device=None):
        """The bias as a bool tensor (True = attend)."""
        if self.variant == CausalVariant.UPPER_LEFT:
            return self._upper_left(device)
        return self._lower_right(device)

    @staticmethod
    def _dispatch(query, key, value, attn_mask, dropout_p=0.0, is_causal=False, scale=None,
                  enable_gqa=False):
        """``scaled_dot_product_attention`` with ``attn_mask`` a CausalBias."""
        from ember.nn import functional as F
        if is_causal:
            raise EmberValueError("scaled_dot_product_attention: CausalBias should not be used "
                                  "with causal=True")
        if attn_mask.seq_len_q == attn_mask.seq_len_kv or \
                attn_mask.variant == CausalVariant.UPPER_LEFT:
            return F.scaled_dot_product_attention(query, key, value, None, dropout_p, True,
                                                  scale, enable_gqa)
        return F.scaled_dot_product_attention(query, key, value, attn_mask._materialize(),
                                              dropout_p, False, scale, enable_gqa)

    def __repr__(self):
        return repr(self._materialize())


def causal_upper_left(*size):
    """The upper-left causal bias of ``size`` (seq_len_q, seq_len_kv): ``is_causal=True``."""
    if len(size) != 2:
        raise EmberValueError("causal_upper_left only supports 2D tensors")
    return CausalBias(CausalVariant.UPPER_LEFT, *size)


def causal_lower_right(*size):
    """The lower-right causal bias of ``size`` (seq_len_q, seq_len_kv)."""
    if len(size) != 2:
        raise EmberValueError("causal_lower_right only supports 2D tensors")
    return CausalBias(CausalVariant.LOWER_RIGHT, *size)
