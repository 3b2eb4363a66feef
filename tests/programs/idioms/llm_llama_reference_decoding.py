"""LLaMA-reference-style inference and LoRA through parametrizations: grouped-query attention
with a preallocated KV cache written by index assignment (repeat_kv and SDPA's enable_gqa),
HF-style extended masks from torch.finfo(dtype).min, the reference generate loop (pad ids,
torch.where on the prompt mask, eos_reached |=, token log-probs from cross_entropy on
(B, V, T) logits, sample_top_p), LoRA as a weight parametrization trained with LoRA+ param
groups and merged by remove_parametrizations, adapter checkpoints through torch.save /
torch.load(weights_only=True), and a bf16 training step."""
import io
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.parametrize as parametrize

rng = np.random.default_rng(23)
VOCAB, DIM, N_HEADS, N_KV, MAX_BATCH, MAX_SEQ = 19, 16, 4, 2, 3, 24
HEAD_DIM = DIM // N_HEADS
PAD, EOS = -1, 2
device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() \
    else torch.float32


def numpy_init_(module, scale=0.25):
    with torch.no_grad():
        for _, p in sorted(module.named_parameters()):
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32))
                    * scale)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim)
            .reshape(bs, slen, n_kv_heads * n_rep, head_dim))


def precompute_cos_sin(head_dim, end, theta=10000.0):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    t = torch.arange(end, dtype=torch.int64).type_as(inv_freq)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq = nn.Linear(DIM, N_HEADS * HEAD_DIM, bias=False)
        self.wk = nn.Linear(DIM, N_KV * HEAD_DIM, bias=False)
        self.wv = nn.Linear(DIM, N_KV * HEAD_DIM, bias=False)
        self.wo = nn.Linear(N_HEADS * HEAD_DIM, DIM, bias=False)
        self.register_buffer("cache_k", torch.zeros(MAX_BATCH, MAX_SEQ, N_KV, HEAD_DIM),
                             persistent=False)
        self.register_buffer("cache_v", torch.zeros(MAX_BATCH, MAX_SEQ, N_KV, HEAD_DIM),
                             persistent=False)

    def forward(self, x, start_pos, cos, sin, mask, use_gqa_kernel=False):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, N_HEADS, HEAD_DIM)
        xk = self.wk(x).view(bsz, seqlen, N_KV, HEAD_DIM)
        xv = self.wv(x).view(bsz, seqlen, N_KV, HEAD_DIM)
        c, s = cos[None, :, None, :], sin[None, :, None, :]
        xq = xq * c + rotate_half(xq) * s
        xk = xk * c + rotate_half(xk) * s
        if self.training:   # the cache is for inference; writing it would chain the steps
            keys, values = xk, xv
        else:
            self.cache_k = self.cache_k.to(xq)
            self.cache_v = self.cache_v.to(xq)
            self.cache_k[:bsz, start_pos: start_pos + seqlen] = xk
            self.cache_v[:bsz, start_pos: start_pos + seqlen] = xv
            keys = self.cache_k[:bsz, : start_pos + seqlen]
            values = self.cache_v[:bsz, : start_pos + seqlen]
        if use_gqa_kernel:
            out = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2),
                                                 values.transpose(1, 2), attn_mask=mask,
                                                 enable_gqa=True)
        else:
            keys = repeat_kv(keys, N_HEADS // N_KV).transpose(1, 2)
            values = repeat_kv(values, N_HEADS // N_KV).transpose(1, 2)
            scores = torch.matmul(xq.transpose(1, 2), keys.transpose(2, 3)) / math.sqrt(HEAD_DIM)
            if mask is not None:
                scores = scores + mask
            scores = F.softmax(scores.float(), dim=-1).type_as(xq)
            out = torch.matmul(scores, values)
        return self.wo(out.transpose(1, 2).contiguous().view(bsz, seqlen, -1))


class FeedForward(nn.Module):
    def __init__(self, hidden=40, multiple_of=8):
        super().__init__()
        hidden = int(2 * hidden / 3)
        hidden = multiple_of * ((hidden + multiple_of - 1) // multiple_of)
        self.w1 = nn.Linear(DIM, hidden, bias=False)
        self.w2 = nn.Linear(hidden, DIM, bias=False)
        self.w3 = nn.Linear(DIM, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = Attention()
        self.feed_forward = FeedForward()
        self.attention_norm = nn.RMSNorm(DIM, eps=1e-5)
        self.ffn_norm = nn.RMSNorm(DIM, eps=1e-5)

    def forward(self, x, start_pos, cos, sin, mask, use_gqa_kernel=False):
        h = x + self.attention(self.attention_norm(x), start_pos, cos, sin, mask, use_gqa_kernel)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, n_layers=2):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(TransformerBlock() for _ in range(n_layers))
        self.norm = nn.RMSNorm(DIM, eps=1e-5)
        self.output = nn.Linear(DIM, VOCAB, bias=False)
        cos, sin = precompute_cos_sin(HEAD_DIM, MAX_SEQ * 2)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, tokens, start_pos=0, use_gqa_kernel=False):
        _bsz, seqlen = tokens.shape
        h = self.tok_embeddings(tokens)
        cos = self.rope_cos[start_pos: start_pos + seqlen]
        sin = self.rope_sin[start_pos: start_pos + seqlen]
        mask = None
        if seqlen > 1:
            mask = torch.full((seqlen, seqlen), float("-inf"), device=tokens.device)
            mask = torch.triu(mask, diagonal=1)
            mask = torch.hstack([torch.zeros((seqlen, start_pos), device=tokens.device),
                                 mask]).type_as(h)
        for layer in self.layers:
            h = layer(h, start_pos, cos, sin, mask, use_gqa_kernel)
        return self.output(self.norm(h)).float()


model = Transformer().to(device=device, dtype=dtype)
numpy_init_(model)
model.eval()

# --- preallocated cache: prefill + one token at a time vs one full pass -------------------------
tokens = torch.from_numpy(rng.integers(3, VOCAB, size=(2, 9))).long()
with torch.inference_mode():
    full = model(tokens, 0)
    pre = model(tokens[:, :5], 0)
    steps = [pre[:, -1]]
    for pos in range(5, 9):
        steps.append(model(tokens[:, pos:pos + 1], pos)[:, -1])
    inc = torch.stack(steps, 1)
    gqa = model(tokens, 0, use_gqa_kernel=True)
sd_keys = list(model.state_dict().keys())
print("prealloc", f"{full.sum().item():.5f}", f"{(inc - full[:, 4:]).abs().max().item() < 1e-5}",
      f"{(gqa - full).abs().max().item() < 1e-5}", len(sd_keys),
      any("cache" in k or "rope" in k for k in sd_keys), len(list(model.buffers())),
      tuple(model.layers[0].attention.cache_k.shape))

# --- HF-style extended attention mask with finfo.min --------------------------------------------
attention_mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
ext = attention_mask[:, None, None, :].to(torch.float32)
ext = (1.0 - ext) * torch.finfo(torch.float32).min
causal = torch.full((5, 5), torch.finfo(torch.float32).min).triu(1)
combined = (ext + causal[None, None]).clamp(min=torch.finfo(torch.float32).min)
q = torch.from_numpy(rng.standard_normal((2, 2, 5, 4)).astype(np.float32))
att = F.scaled_dot_product_attention(q, q, q, attn_mask=combined)
probs = torch.softmax(q @ q.transpose(-1, -2) / 2.0 + combined, dim=-1, dtype=torch.float64)
print("mask", f"{att.sum().item():.5f}", str(probs.dtype).split(".")[-1],
      f"{probs[0, 0, 2].tolist()[:2]}".replace(" ", ""), torch.isfinite(combined).all().item(),
      f"{torch.finfo(torch.bfloat16).min:.4e}", f"{torch.finfo(torch.float16).max:.1f}",
      torch.finfo(torch.float32).eps, torch.iinfo(torch.int32).max)


# --- the reference generate loop ---------------------------------------------------------------
def sample_top_p(probs, p):
    probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)
    probs_sum = torch.cumsum(probs_sort, dim=-1)
    mask = probs_sum - probs_sort > p
    probs_sort[mask] = 0.0
    probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
    next_token = torch.multinomial(probs_sort, num_samples=1)
    next_token = torch.gather(probs_idx, -1, next_token)
    return next_token


@torch.inference_mode()
def generate(prompt_tokens, max_gen_len, temperature=0.6, top_p=1e-4, logprobs=True):
    bsz = len(prompt_tokens)
    min_prompt_len = min(len(t) for t in prompt_tokens)
    max_prompt_len = max(len(t) for t in prompt_tokens)
    total_len = min(MAX_SEQ, max_gen_len + max_prompt_len)
    tokens = torch.full((bsz, total_len), PAD, dtype=torch.long, device=device)
    for k, t in enumerate(prompt_tokens):
        tokens[k, : len(t)] = torch.tensor(t, dtype=torch.long, device=device)
    token_logprobs = torch.zeros_like(tokens, dtype=torch.float)
    prev_pos = 0
    eos_reached = torch.tensor([False] * bsz, device=device)
    stop_flags = eos_reached                 # an alias: |= below must update it in place
    input_text_mask = tokens != PAD
    for cur_pos in range(min_prompt_len, total_len):
        logits = model.forward(tokens[:, prev_pos:cur_pos], prev_pos)
        if temperature > 0:
            probs = torch.softmax(logits[:, -1] / temperature, dim=-1)
            next_token = sample_top_p(probs, top_p)
        else:
            next_token = torch.argmax(logits[:, -1], dim=-1)
        next_token = next_token.reshape(-1)
        next_token = torch.where(input_text_mask[:, cur_pos], tokens[:, cur_pos], next_token)
        tokens[:, cur_pos] = next_token
        if logprobs:
            token_logprobs[:, prev_pos + 1: cur_pos + 1] = -F.cross_entropy(
                input=logits.transpose(1, 2), target=tokens[:, prev_pos + 1: cur_pos + 1],
                reduction="none", ignore_index=PAD)
        eos_reached |= (~input_text_mask[:, cur_pos]) & (next_token == EOS)
        prev_pos = cur_pos
        if all(eos_reached):
            break
    out_tokens, out_logprobs = [], []
    for i, toks in enumerate(tokens.tolist()):
        start = len(prompt_tokens[i])
        toks = toks[start: len(prompt_tokens[i]) + max_gen_len]
        probs = token_logprobs[i][start: len(prompt_tokens[i]) + max_gen_len].tolist()
        if EOS in toks:
            eos_idx = toks.index(EOS)
            toks, probs = toks[:eos_idx], probs[:eos_idx]
        out_tokens.append(toks)
        out_logprobs.append(probs)
    return out_tokens, out_logprobs, stop_flags


torch.manual_seed(0)
with torch.no_grad():
    model.output.weight[EOS] = model.output.weight[7] * 1.5   # EOS wherever 7 would win
gen_tokens, gen_logprobs, reached = generate([[1, 5, 9, 4], [1, 7]], max_gen_len=6)
greedy_tokens, _, _ = generate([[1, 5, 9, 4], [1, 7]], max_gen_len=6, temperature=0)
print("llama_gen", gen_tokens, gen_tokens == greedy_tokens, reached.tolist(),
      " ".join(f"{v:.4f}" for v in gen_logprobs[0] + gen_logprobs[1]))


# --- LoRA as a parametrization, LoRA+ groups, merge by removing it ------------------------------
class LoRAParametrization(nn.Module):
    def __init__(self, features_in, features_out, rank=2, alpha=4):
        super().__init__()
        self.lora_A = nn.Parameter(torch.zeros((rank, features_out)))
        self.lora_B = nn.Parameter(torch.zeros((features_in, rank)))
        nn.init.normal_(self.lora_A, mean=0, std=1)
        self.scale = alpha / rank
        self.enabled = True

    def forward(self, original_weights):
        if self.enabled:
            return original_weights + torch.matmul(self.lora_B, self.lora_A).view(
                original_weights.shape) * self.scale
        return original_weights


def linear_layer_parameterization(layer, rank=2, lora_alpha=4):
    features_in, features_out = layer.weight.shape
    return LoRAParametrization(features_in, features_out, rank=rank, alpha=lora_alpha)


lm = Transformer(n_layers=1)
numpy_init_(lm)
for name, module in lm.named_modules():
    if isinstance(module, nn.Linear) and name.endswith(("wq", "wv")):
        parametrize.register_parametrization(module, "weight",
                                             linear_layer_parameterization(module))
with torch.no_grad():
    for n, p in sorted(lm.named_parameters()):
        if "lora_" in n:
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32)) * 0.2)
for name, param in lm.named_parameters():
    if "lora" not in name:
        param.requires_grad = False
lora_a = [p for n, p in lm.named_parameters() if "lora_A" in n]
lora_b = [p for n, p in lm.named_parameters() if "lora_B" in n]
opt = torch.optim.AdamW([{"params": lora_a, "lr": 5e-3}, {"params": lora_b, "lr": 5e-3 * 16}],
                        weight_decay=0.0)
seqs = torch.from_numpy(rng.integers(3, VOCAB, size=(3, 8))).long()
labels = seqs.clone()
labels[0, :3] = -100
lm.train()
lora_losses = []
for step in range(4):
    logits = lm(seqs, 0)
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = labels[..., 1:].contiguous()
    loss = F.cross_entropy(shift_logits.view(-1, VOCAB), shift_labels.view(-1),
                           ignore_index=-100)
    loss.backward()
    opt.step()
    opt.zero_grad()
    lora_losses.append(loss.item())
lm.eval()
keys = [k for k in lm.state_dict() if "layers.0.attention.wq" in k]
with torch.no_grad():
    adapted = lm(seqs, 0)
    for m in lm.modules():
        if parametrize.is_parametrized(m, "weight"):
            m.parametrizations.weight[0].enabled = False
    disabled = lm(seqs, 0)
    for m in lm.modules():
        if parametrize.is_parametrized(m, "weight"):
            m.parametrizations.weight[0].enabled = True
    with parametrize.cached():
        cached = lm(seqs, 0)
    original = lm.layers[0].attention.wq.parametrizations.weight.original.clone()
    for m in lm.modules():
        if parametrize.is_parametrized(m):
            parametrize.remove_parametrizations(m, "weight", leave_parametrized=True)
    merged = lm(seqs, 0)
print("lora_param", " ".join(f"{v:.5f}" for v in lora_losses), sorted(keys),
      f"{(adapted - disabled).abs().max().item() > 1e-3}", torch.allclose(cached, adapted),
      torch.allclose(merged, adapted, atol=1e-5),
      f"{(lm.layers[0].attention.wq.weight - original).abs().sum().item():.5f}",
      type(lm.layers[0].attention.wq.weight).__name__, parametrize.is_parametrized(lm),
      sum(p.numel() for p in lm.parameters()))

# --- adapter checkpoints through a buffer -------------------------------------------------------
peft = Transformer(n_layers=1)
numpy_init_(peft)
for name, module in peft.named_modules():
    if isinstance(module, nn.Linear) and name.endswith(("wq", "wv")):
        parametrize.register_parametrization(module, "weight",
                                             linear_layer_parameterization(module))
adapter = {k: v for k, v in peft.state_dict().items() if "lora_" in k}
buf = io.BytesIO()
torch.save(adapter, buf)
buf.seek(0)
loaded = torch.load(buf, map_location="cpu", weights_only=True)
target = Transformer(n_layers=1)
for name, module in target.named_modules():
    if isinstance(module, nn.Linear) and name.endswith(("wq", "wv")):
        parametrize.register_parametrization(module, "weight",
                                             linear_layer_parameterization(module))
missing, unexpected = target.load_state_dict(loaded, strict=False)
print("adapter", len(adapter), sorted(loaded)[:2], len(missing), unexpected,
      all("lora_" not in k for k in missing),
      torch.equal(target.layers[0].attention.wv.parametrizations.weight[0].lora_A,
                  peft.layers[0].attention.wv.parametrizations.weight[0].lora_A))

# --- one bf16 training step -----------------------------------------------------------------------
small = Transformer(n_layers=1)
numpy_init_(small)
small = small.to(torch.bfloat16)
small.train()
opt16 = torch.optim.SGD(small.parameters(), lr=0.1)
logits16 = small(seqs, 0)
loss16 = F.cross_entropy(logits16[:, :-1].reshape(-1, VOCAB), seqs[:, 1:].reshape(-1))
loss16.backward()
gnorm = torch.nn.utils.clip_grad_norm_(small.parameters(), 1.0)
opt16.step()
print("bf16_step", str(logits16.dtype).split(".")[-1], str(gnorm.dtype).split(".")[-1],
      str(small.output.weight.grad.dtype).split(".")[-1], f"{abs(loss16.item() - 3.0) < 3.0}",
      str(small.layers[0].attention.cache_k.dtype).split(".")[-1])
