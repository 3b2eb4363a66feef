"""MultiheadAttention, the Transformer and its encoder and decoder stacks and layers (torch's
parameter names, so state-dict keys match, initialisation and post-/pre-norm layouts)."""
import copy
import warnings

import numpy as np

from ember.backends import mha
from ember.ops import creation
from ember.autograd._generated import functions as G
from ember.autograd.grad_mode import is_grad_enabled
from ember.nn import functional as F
from ember.nn import init
from ember.nn.modules.activation import GELU, ReLU
from ember.nn.modules.container import ModuleList
from ember.nn.modules.dropout import Dropout
from ember.nn.modules.linear import Linear, NonDynamicallyQuantizableLinear
from ember.nn.modules.module import Module
from ember.nn.modules.normalization import LayerNorm
from ember.nn.parameter import Parameter
from ember.errors import EmberRuntimeError, EmberValueError


def _grad_free(tensors):
    """torch's fast-path condition on autograd: grad disabled, or no tensor requires it."""
    return not is_grad_enabled() or not any(t is not None and t.requires_grad for t in tensors)


class MultiheadAttention(Module):
    """Multi-head attention with a packed (3E, E) input projection when kdim == vdim == E."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise EmberValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise EmberValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible "
                                  f"by num_heads ({num_heads})")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(creation.empty(embed_dim, embed_dim, dtype=dtype))
            self.k_proj_weight = Parameter(creation.empty(embed_dim, self.kdim, dtype=dtype))
            self.v_proj_weight = Parameter(creation.empty(embed_dim, self.vdim, dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(creation.empty(3 * embed_dim, embed_dim, dtype=dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(creation.empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(creation.empty(1, 1, embed_dim, dtype=dtype))
            self.bias_v = Parameter(creation.empty(1, 1, embed_dim, dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def _fast_path(self, query, key, value, attn_mask, key_padding_mask):
        """Whether torch's forward takes its fast path (``_native_multi_head_attention``):
        batched self-attention (``query is key is value``) with bool masks, in eval mode,
        batch_first, packed biased projections, an even number of heads, no bias_k/bias_v or
        zero attention, and no gradient to record."""
        if any(m is not None and m.is_floating_point() for m in (attn_mask, key_padding_mask)):
            return False
        w, b = self.in_proj_weight, self.in_proj_bias
        return bool(mha.get_fastpath_enabled() and query.dim() == 3 and query is key
                    and key is value and w is not None and b is not None
                    and query.dtype == w.dtype == b.dtype and not self.training
                    and self.num_heads % 2 == 0 and self.batch_first and self.bias_k is None
                    and self.bias_v is None and not self.add_zero_attn
                    and self._qkv_same_embed_dim
                    and _grad_free((query, w, b, self.out_proj.weight, self.out_proj.bias)))

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        """-> (output like query, averaged attention weights or None). On torch's fast path
        (``_fast_path``) a query row that attends no key is NaN, as with ``need_weights``
        (elsewhere, without weights, it is 0), and ``is_causal`` is ignored, as in torch."""
        if self._fast_path(query, key, value, attn_mask, key_padding_mask):
            return self._attend(query, key, value, key_padding_mask, need_weights, attn_mask,
                                average_attn_weights, False, fast=True)
        return self._attend(query, key, value, key_padding_mask, need_weights, attn_mask,
                            average_attn_weights, is_causal)

    def _attend(self, query, key, value, key_padding_mask, need_weights, attn_mask,
                average_attn_weights, is_causal, fast=False):
        """The attention; ``fast``: computed with the weights (a row attending nothing is
        NaN, as torch's fast path gives), which are returned only if ``need_weights``."""
        batched = query.dim() == 3
        if self.batch_first and batched:
            query, key, value = (G.transpose(t, 0, 1) for t in (query, key, value))
        out, w = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights or fast,
            attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights,
            is_causal=is_causal)
        if self.batch_first and batched:
            out = G.transpose(out, 0, 1)
        return out, (w if need_weights else None)


def _activation(act):
    if callable(act):
        return act
    if act == "relu":
        return F.relu
    if act == "gelu":
        return F.gelu
    raise EmberRuntimeError(f"activation should be relu/gelu, not {act}")


class _TransformerLayer(Module):
    """What the encoder and decoder layers share: their submodules, registered in torch's
    order (``self_attn``, the decoder's ``multihead_attn``, ``linear1``, ``dropout``,
    ``linear2``, ``norm1``.., ``dropout1``..), and the self-attention block."""

    def _build(self, blocks, d_model, nhead, dim_feedforward, dropout, activation,
               layer_norm_eps, batch_first, norm_first, bias, dtype):
        """``blocks`` residual blocks (2: encoder, 3: decoder), each with a norm and a
        dropout."""
        def attention():
            return MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                      batch_first=batch_first, dtype=dtype)
        self.self_attn = attention()
        if blocks == 3:
            self.multihead_attn = attention()
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        for i in range(1, blocks + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                                dtype=dtype))
        for i in range(1, blocks + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False, fast=False):
        """``fast``: the encoder layer's fast path (no hooks there), whose attention gives NaN
        for a query row that attends no key and ignores ``is_causal``."""
        if fast:
            x = self.self_attn._attend(x, x, x, key_padding_mask, False, attn_mask, True, False,
                                       fast=True)[0]
        else:
            x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                               need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention then a feed-forward block, each with residual, dropout and LayerNorm."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self._build(2, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                    batch_first, norm_first, bias, dtype)
        act = self.activation
        # torch's flag for its fused kernel: 1 relu, 2 gelu, 0 anything else
        self.activation_relu_or_gelu = 1 if act is F.relu or isinstance(act, ReLU) else \
            2 if act is F.gelu or isinstance(act, GELU) else 0

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def _fast_path(self, src):
        """Whether torch's forward takes its fast path (``_transformer_encoder_layer_fwd``):
        batched input in eval mode, batch_first packed biased attention with an even number of
        heads, relu or gelu, equal norm eps, no hooks on any submodule, no gradient to
        record."""
        a = self.self_attn
        return bool(mha.get_fastpath_enabled() and src.dim() == 3 and not self.training
                    and a.batch_first and a.in_proj_bias is not None and a._qkv_same_embed_dim
                    and self.activation_relu_or_gelu and self.norm1.eps == self.norm2.eps
                    and a.num_heads % 2 == 0
                    and not any(len(getattr(m, "_forward_hooks", {}))
                                + len(getattr(m, "_forward_pre_hooks", {}))
                                for m in self.modules())
                    and _grad_free((src, a.in_proj_weight, a.in_proj_bias, a.out_proj.weight,
                                    a.out_proj.bias, self.norm1.weight, self.norm1.bias,
                                    self.norm2.weight, self.norm2.bias, self.linear1.weight,
                                    self.linear1.bias, self.linear2.weight,
                                    self.linear2.bias)))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """On torch's fast path (``_fast_path``) a row that attends no key is NaN and
        ``is_causal`` is ignored (the masks are used), as in torch."""
        fast = self._fast_path(src)
        if fast:
            is_causal = False
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal,
                                   fast)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal,
                                              fast))
            x = self.norm2(x + self._ff_block(x))
        return x


def _why_not_nested(layer):
    """Why torch's TransformerEncoder cannot use nested tensors with ``layer`` ("" if it can)."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    if layer.norm_first:
        return f"{name}.norm_first was True"
    if not layer.self_attn.batch_first:
        return (f"{name}.self_attn.batch_first was not True(use batch_first for better "
                f"inference performance)")
    if not layer.self_attn._qkv_same_embed_dim:
        return f"{name}.self_attn._qkv_same_embed_dim was not True"
    if layer.self_attn.in_proj_bias is None:
        return f"{name}.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return f"{name}.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return f"{name}.norm1.eps was not equal to {name}.norm2.eps"
    if layer.self_attn.num_heads % 2 == 1:
        return f"{name}.self_attn.num_heads is odd"
    return ""


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer``, then an optional norm.

    ``use_nested_tensor`` (``enable_nested_tensor`` and a layer torch's nested path takes, set
    here with torch's warning otherwise): then in eval mode without gradient, a batched input
    with a ``src_key_padding_mask`` and no ``mask`` runs as torch's nested tensors do, each
    sequence on its unpadded tokens, and the output rows at padded positions are 0 (before
    ``norm``)."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why}", stacklevel=2)
            self.use_nested_tensor = False

    def _nested_valid(self, src, mask, src_key_padding_mask):
        """The (batch, seq) bool array of the tokens torch's nested path keeps, or None when
        torch does not take it: the first ``n`` tokens of each sequence, ``n`` its count of
        unpadded tokens (a float mask pads where nonzero); with ``mask_check``, only for a
        left-aligned mask (padding only at the end of each sequence)."""
        first = self.layers[0] if len(self.layers) else None
        if not (mha.get_fastpath_enabled() and getattr(self, "use_nested_tensor", False)
                and first is not None and not first.training and src.dim() == 3
                and src_key_padding_mask is not None and mask is None):
            return None
        a = first.self_attn
        if not _grad_free((src, a.in_proj_weight, a.in_proj_bias, a.out_proj.weight,
                           a.out_proj.bias, first.norm1.weight, first.norm1.bias,
                           first.norm2.weight, first.norm2.bias, first.linear1.weight,
                           first.linear1.bias, first.linear2.weight, first.linear2.bias)):
            return None
        m = F._read(src_key_padding_mask, "TransformerEncoder", "the nested-tensor path")
        keep = ~m if m.dtype == np.bool_ else m == 0
        keep = np.broadcast_to(keep, tuple(src.shape[:2]))
        valid = np.arange(keep.shape[1]) < keep.sum(1, keepdims=True)
        if getattr(self, "mask_check", True) and not np.array_equal(keep, valid):
            return None
        return valid

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        valid = self._nested_valid(src, mask, src_key_padding_mask)
        out = src
        if valid is None:
            for mod in self.layers:
                out = mod(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                          is_causal=bool(is_causal))
        else:
            # torch's nested path: the layers see each sequence's kept tokens only
            keep = creation.tensor(valid)
            for mod in self.layers:
                out = mod(out, src_key_padding_mask=G.logical_not(keep))
            out = G.where(G.unsqueeze(keep, -1), out, creation.zeros((), dtype=out.dtype))
        if self.norm is not None:
            out = self.norm(out)
        return out


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention, attention over the memory, then a feed-forward block, each with
    residual, dropout and LayerNorm (post- or pre-norm), as torch."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self._build(3, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                    batch_first, norm_first, bias, dtype)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                    memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x


def _is_causal_mask(mask, is_causal, size):
    """torch's _detect_is_causal_mask: ``is_causal`` if given, else whether ``mask`` equals the
    square subsequent mask (a data read: a trace keeps the answer it saw)."""
    if is_causal is not None or mask is None:
        return bool(is_causal)
    import numpy as np
    m = F._read(mask, "TransformerDecoder", "the causal-mask check")
    if m.shape != (size, size):
        return False
    want = np.triu(np.ones((size, size), bool), 1)
    return bool(np.array_equal(m, want) if m.dtype == np.bool_ else
                np.array_equal(np.isneginf(m), want) and not np.any(m[~want]))


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer``, then an optional norm."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        first = self.layers[0] if len(self.layers) else None
        batch_first = bool(first is not None and first.self_attn.batch_first)
        seq = tgt.shape[1 if batch_first and tgt.dim() == 3 else 0]
        causal = _is_causal_mask(tgt_mask, tgt_is_causal, seq)
        out = tgt
        for mod in self.layers:
            out = mod(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=causal,
                      memory_is_causal=memory_is_causal)
        if self.norm is not None:
            out = self.norm(out)
        return out


class Transformer(Module):
    """Encoder-decoder transformer (Vaswani et al., 2017) with torch's parameters, state_dict
    keys and xavier-uniform initialisation of every matrix."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()

        def stack(custom, layer_cls, stack_cls, num_layers):
            """``custom`` when given, else ``num_layers`` copies of one layer and a final norm."""
            if custom is not None:
                return custom
            layer = layer_cls(d_model, nhead, dim_feedforward, dropout, activation,
                              layer_norm_eps, batch_first, norm_first, bias, dtype=dtype)
            return stack_cls(layer, num_layers, LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                                          dtype=dtype))
        self.encoder = stack(custom_encoder, TransformerEncoderLayer, TransformerEncoder,
                             num_encoder_layers)
        self.decoder = stack(custom_decoder, TransformerDecoderLayer, TransformerDecoder,
                             num_decoder_layers)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batched = src.dim() == 3
        if not self.batch_first and src.shape[1] != tgt.shape[1] and batched:
            raise EmberRuntimeError("the batch number of src and tgt must be equal")
        if self.batch_first and src.shape[0] != tgt.shape[0] and batched:
            raise EmberRuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise EmberRuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """(sz, sz) float mask: -inf above the diagonal, 0 elsewhere, in ``dtype`` (the
        default dtype when None; bfloat16 included)."""
        return G.triu(creation.full((sz, sz), float("-inf"), dtype=dtype, device=device), 1)
