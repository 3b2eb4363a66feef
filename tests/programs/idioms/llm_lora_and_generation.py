"""LLM fine-tuning and generation without transformers: LoRA adapters injected by walking
named_modules, frozen base weights, merge / unmerge under no_grad, LoRA-only state dicts and
key surgery (strict=False reports, assign=True), weight tying, a KV-cache decoder checked
against the full forward, SDPA with is_causal and explicit masks, temperature / top-k / top-p
/ repetition-penalty sampling, beam search over flattened beams, left-padded batched
generation with cumsum position ids, non-reentrant checkpointing, bf16 and autocast."""
import math
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

rng = np.random.default_rng(11)
VOCAB, DIM, HEADS, LAYERS, MAXLEN = 23, 16, 2, 2, 32
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2


def init_from_numpy_(model, scale=0.3):
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32))
                    * scale)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(DIM, DIM, bias=False)
        self.k_proj = nn.Linear(DIM, DIM, bias=False)
        self.v_proj = nn.Linear(DIM, DIM, bias=False)
        self.o_proj = nn.Linear(DIM, DIM, bias=False)

    def forward(self, x, past_kv=None, attn_mask=None, use_cache=False):
        B, T, _ = x.shape
        hd = DIM // HEADS
        q = self.q_proj(x).view(B, T, HEADS, hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, HEADS, hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, HEADS, hd).transpose(1, 2)
        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=2)
            v = torch.cat([past_kv[1], v], dim=2)
        present = (k, v) if use_cache else None
        if attn_mask is None and past_kv is None:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        out = out.transpose(1, 2).reshape(B, T, DIM)
        return self.o_proj(out), present


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(DIM, 2 * DIM, bias=False)
        self.up_proj = nn.Linear(DIM, 2 * DIM, bias=False)
        self.down_proj = nn.Linear(2 * DIM, DIM, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm(DIM)
        self.self_attn = Attention()
        self.post_attention_layernorm = RMSNorm(DIM)
        self.mlp = MLP()

    def forward(self, x, past_kv=None, attn_mask=None, use_cache=False):
        h, present = self.self_attn(self.input_layernorm(x), past_kv, attn_mask, use_cache)
        x = x + h
        return x + self.mlp(self.post_attention_layernorm(x)), present


class TinyLM(nn.Module):
    def __init__(self, tie=True):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, DIM, padding_idx=PAD_ID)
        self.embed_positions = nn.Embedding(MAXLEN, DIM)
        self.layers = nn.ModuleList([DecoderLayer() for _ in range(LAYERS)])
        self.norm = RMSNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        if tie:
            self.lm_head.weight = self.embed_tokens.weight
        self.gradient_checkpointing = False

    def forward(self, input_ids, position_ids=None, past_key_values=None, attn_mask=None,
                use_cache=False):
        B, T = input_ids.shape
        past_len = 0 if past_key_values is None else past_key_values[0][0].size(2)
        if position_ids is None:
            position_ids = torch.arange(past_len, past_len + T).unsqueeze(0).expand(B, -1)
        x = self.embed_tokens(input_ids) + self.embed_positions(position_ids)
        presents = [] if use_cache else None
        for i, layer in enumerate(self.layers):
            past = None if past_key_values is None else past_key_values[i]
            if self.gradient_checkpointing and self.training:
                x, present = checkpoint(layer, x, past, attn_mask, use_cache,
                                        use_reentrant=False)
            else:
                x, present = layer(x, past, attn_mask, use_cache)
            if use_cache:
                presents.append(present)
        return self.lm_head(self.norm(x)), presents


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, r=4, alpha=8, dropout=0.0):
        super().__init__()
        self.base_layer = base
        self.r, self.scaling = r, alpha / r
        self.lora_A = nn.Parameter(torch.zeros(r, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B)
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.merged = False

    def forward(self, x):
        out = self.base_layer(x)
        if self.merged:
            return out
        return out + (self.lora_dropout(x) @ self.lora_A.T @ self.lora_B.T) * self.scaling

    @torch.no_grad()
    def merge(self):
        if not self.merged:
            self.base_layer.weight.data += (self.lora_B @ self.lora_A) * self.scaling
            self.merged = True

    @torch.no_grad()
    def unmerge(self):
        if self.merged:
            self.base_layer.weight.sub_((self.lora_B @ self.lora_A) * self.scaling)
            self.merged = False

    def extra_repr(self):
        return f"r={self.r}, scaling={self.scaling}"


def inject_lora(model, targets=("q_proj", "v_proj"), r=4, alpha=8):
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.Linear) and name.split(".")[-1] in targets:
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, LoRALinear(module, r=r, alpha=alpha))
    for n, p in model.named_parameters():
        p.requires_grad_("lora_" in n)
    return model


def count_parameters(model):
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return trainable, total, f"{100 * trainable / total:.4f}"


# --- LoRA fine-tuning: cosine warm-up LambdaLR, accumulation, clipping, checkpointing ---------
model = TinyLM()
init_from_numpy_(model)
tied_before = model.lm_head.weight is model.embed_tokens.weight
inject_lora(model)
with torch.no_grad():
    for n, p in sorted(model.named_parameters()):
        if "lora_" in n:
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32)) * 0.1)
trainable, total, pct = count_parameters(model)
lora_names = [n for n, p in model.named_parameters() if p.requires_grad]
model.gradient_checkpointing = True

data = torch.from_numpy(rng.integers(3, VOCAB, size=(8, 10)))
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2,
                              weight_decay=0.01)
warmup, total_steps, accum = 2, 6, 2


def lr_lambda(step):
    if step < warmup:
        return float(step + 1) / float(max(1, warmup))
    progress = float(step - warmup) / float(max(1, total_steps - warmup))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
model.train()
losses, lrs, norms = [], [], []
for step in range(total_steps):
    for micro in range(accum):
        batch = data[(step * accum + micro) % 4 * 2:(step * accum + micro) % 4 * 2 + 2]
        logits, _ = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        (loss / accum).backward()
        losses.append(loss.item())
    norm = torch.nn.utils.clip_grad_norm_(
        [p for p in model.parameters() if p.requires_grad], max_norm=1.0)
    norms.append(norm.item())
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    lrs.append(scheduler.get_last_lr()[0])
frozen_grads = sum(p.grad is not None for p in model.parameters() if not p.requires_grad)
print("lora", trainable, total, pct, len(lora_names), tied_before, frozen_grads,
      " ".join(f"{v:.5f}" for v in losses[::3]), " ".join(f"{v:.6f}" for v in lrs),
      " ".join(f"{v:.5f}" for v in norms))

# --- merge / unmerge in place ----------------------------------------------------------------
model.eval()
probe = data[:2, :6]
with torch.no_grad():
    before = model(probe)[0]
    w0 = model.layers[0].self_attn.q_proj.base_layer.weight.clone()
    for m in model.modules():
        if isinstance(m, LoRALinear):
            m.merge()
    merged = model(probe)[0]
    delta = (model.layers[0].self_attn.q_proj.base_layer.weight - w0).abs().sum()
    for m in model.modules():
        if isinstance(m, LoRALinear):
            m.unmerge()
    restored = (model.layers[0].self_attn.q_proj.base_layer.weight - w0).abs().max()
print("merge", f"{before.sum().item():.5f}", torch.allclose(before, merged, atol=1e-5),
      f"{delta.item():.5f}", restored.item() < 1e-6,
      repr(model.layers[0].self_attn.q_proj).splitlines()[0])

# --- state-dict surgery ------------------------------------------------------------------------
full_sd = model.state_dict()
lora_sd = {k: v for k, v in full_sd.items() if "lora_" in k}
renamed = OrderedDict((k.replace("base_model.", "").replace(".base_layer", ""), v)
                      for k, v in full_sd.items() if "lora_" not in k)
plain = TinyLM()
result = plain.load_state_dict(renamed, strict=False)
merged_sd = OrderedDict()
for k, v in full_sd.items():
    if "lora_" in k:
        continue
    key = k.replace(".base_layer", "")
    if key.endswith(("q_proj.weight", "v_proj.weight")):
        prefix = k[:-len("base_layer.weight")]
        v = v + full_sd[prefix + "lora_B"] @ full_sd[prefix + "lora_A"] * 2.0
    merged_sd[key] = v
plain2 = TinyLM()
res2 = plain2.load_state_dict(merged_sd, strict=True)
with torch.no_grad():
    same = torch.allclose(plain2(probe)[0], before, atol=1e-5)
fresh = inject_lora(TinyLM())
res3 = fresh.load_state_dict(lora_sd, strict=False)
sub = model.layers[1].self_attn.state_dict()
sub_keys = sorted(sub.keys())
meta = TinyLM()
layer_sd = {k: v.clone() for k, v in plain2.layers[0].state_dict().items()}
meta.layers[0].load_state_dict(layer_sd, assign=True)
assigned = (meta.layers[0].mlp.up_proj.weight.data_ptr() == layer_sd["mlp.up_proj.weight"].data_ptr(),
            type(meta.layers[0].mlp.up_proj.weight).__name__,
            meta.layers[0].mlp.up_proj.weight.requires_grad)
try:
    TinyLM().load_state_dict({"bogus.weight": torch.zeros(2)})
    err = "none"
except RuntimeError as e:
    err = str(e).splitlines()[0].replace(" ", "_")
print("state", len(full_sd), len(lora_sd), len(result.missing_keys),
      len(result.unexpected_keys), sorted(result.unexpected_keys)[:1], list(res2), same,
      len(res3.missing_keys), res3.unexpected_keys, sub_keys[:3], assigned,
      plain2.lm_head.weight is plain2.embed_tokens.weight,
      plain2.lm_head.weight.data_ptr() == plain2.embed_tokens.weight.data_ptr(), err)

# --- KV cache vs full forward, explicit masks ---------------------------------------------------
base = plain2.eval()
seq = data[2:4, :7]
with torch.no_grad():
    full_logits, _ = base(seq)
    logits, past = base(seq[:, :4], use_cache=True)
    steps = [logits[:, -1]]
    for t in range(4, 7):
        logits, past = base(seq[:, t:t + 1], past_key_values=past, use_cache=True)
        steps.append(logits[:, -1])
    cached = torch.stack(steps, dim=1)
    T = seq.size(1)
    float_mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
    masked = base(seq, attn_mask=float_mask)[0]
    bool_mask = torch.ones(T, T, dtype=torch.bool).tril()
    masked_b = base(seq, attn_mask=bool_mask)[0]
    scores = torch.zeros(T, T).masked_fill(torch.triu(torch.ones(T, T), 1).bool(), float("-inf"))
print("kvcache", f"{full_logits.sum().item():.5f}",
      torch.allclose(cached, full_logits[:, 3:], atol=1e-5),
      torch.allclose(masked, full_logits, atol=1e-5), torch.allclose(masked_b, full_logits, atol=1e-5),
      len(past), tuple(past[0][0].shape), torch.isinf(scores).sum().item(),
      f"{scores.softmax(-1)[2].tolist()}".replace(" ", ""))


# --- sampling utilities ------------------------------------------------------------------------
def top_k_top_p_filtering(logits, top_k=0, top_p=1.0, filter_value=-float("Inf"),
                          min_tokens_to_keep=1):
    if top_k > 0:
        top_k = min(max(top_k, min_tokens_to_keep), logits.size(-1))
        indices_to_remove = logits < torch.topk(logits, top_k)[0][..., -1, None]
        logits = logits.masked_fill(indices_to_remove, filter_value)
    if top_p < 1.0:
        sorted_logits, sorted_indices = torch.sort(logits, descending=True)
        cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
        sorted_indices_to_remove = cumulative_probs > top_p
        if min_tokens_to_keep > 1:
            sorted_indices_to_remove[..., :min_tokens_to_keep] = 0
        sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()
        sorted_indices_to_remove[..., 0] = 0
        indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices,
                                                             sorted_indices_to_remove)
        logits = logits.masked_fill(indices_to_remove, filter_value)
    return logits


def apply_repetition_penalty(logits, input_ids, penalty=1.3):
    score = torch.gather(logits, 1, input_ids)
    score = torch.where(score < 0, score * penalty, score / penalty)
    return logits.scatter_(1, input_ids, score)


def top_k_scatter(logits, k):
    vals, idx = torch.topk(logits, k, dim=-1)
    return torch.full_like(logits, float("-inf")).scatter(-1, idx, vals)


with torch.no_grad():
    last = full_logits[:, -1, :].clone()
    penalized = apply_repetition_penalty(last.clone(), seq)
    tk = top_k_top_p_filtering(penalized / 0.7, top_k=5)
    tp = top_k_top_p_filtering(penalized / 0.7, top_p=0.8)
    both = top_k_top_p_filtering(penalized, top_k=6, top_p=0.9, min_tokens_to_keep=2)
    sc = top_k_scatter(penalized, 3)
    probs = F.softmax(tp, dim=-1)
    g1 = torch.Generator().manual_seed(1234)
    draw1 = torch.multinomial(probs, num_samples=4, replacement=True, generator=g1)
    g2 = torch.Generator().manual_seed(1234)
    draw2 = torch.multinomial(probs, num_samples=4, replacement=True, generator=g2)
    allowed = torch.isfinite(tp).gather(1, draw1).all().item()
    one_hot = F.softmax(top_k_scatter(penalized, 1), dim=-1)
    greedy = torch.multinomial(one_hot, 1, generator=g1).squeeze(-1)
    no_repl = torch.multinomial(F.softmax(tk, -1), 5, replacement=False, generator=g2)
print("sampling", f"{penalized.sum().item():.5f}", torch.isfinite(tk).sum(-1).tolist(),
      torch.isfinite(tp).sum(-1).tolist(), torch.isfinite(both).sum(-1).tolist(),
      torch.isfinite(sc).sum().item(), f"{probs.max().item():.5f}", torch.equal(draw1, draw2),
      allowed, torch.equal(greedy, penalized.argmax(-1)),
      sorted(no_repl[0].tolist()) == sorted(torch.topk(tk[0], 5).indices.tolist()),
      str(draw1.dtype).split(".")[-1])


# --- beam search over flattened beams, caches reordered with index_select ----------------------
@torch.inference_mode()
def beam_search(model, prompt, num_beams=3, max_new_tokens=5, length_penalty=1.0):
    input_ids = prompt.repeat(num_beams, 1)
    beam_scores = torch.zeros(num_beams)
    beam_scores[1:] = -1e9
    logits, past = model(input_ids, use_cache=True)
    finished = []
    for _ in range(max_new_tokens):
        log_probs = F.log_softmax(logits[:, -1, :], dim=-1)
        next_scores = log_probs + beam_scores[:, None]
        top_scores, top_idx = torch.topk(next_scores.view(-1), 2 * num_beams)
        beam_idx = top_idx // VOCAB
        token_idx = top_idx % VOCAB
        keep_b, keep_t, keep_s = [], [], []
        for b, t, s in zip(beam_idx.tolist(), token_idx.tolist(), top_scores.tolist()):
            if t == EOS_ID:
                finished.append((s / (input_ids.size(1) + 1) ** length_penalty,
                                 input_ids[b].tolist() + [t]))
            else:
                keep_b.append(b), keep_t.append(t), keep_s.append(s)
            if len(keep_b) == num_beams:
                break
        sel = torch.tensor(keep_b)
        input_ids = torch.cat([input_ids.index_select(0, sel),
                               torch.tensor(keep_t).unsqueeze(-1)], dim=-1)
        beam_scores = torch.tensor(keep_s)
        past = [(k.index_select(0, sel), v.index_select(0, sel)) for k, v in past]
        logits, past = model(input_ids[:, -1:], past_key_values=past, use_cache=True)
    for b in range(num_beams):
        finished.append((beam_scores[b].item() / input_ids.size(1) ** length_penalty,
                         input_ids[b].tolist()))
    finished.sort(key=lambda x: x[0], reverse=True)
    return finished[0], beam_idx.dtype, torch.is_inference_mode_enabled()


best, idx_dtype, inside = beam_search(base, torch.tensor([[BOS_ID, 5, 9]]))
print("beam", "".join(f"{t}," for t in best[1]), f"{best[0]:.5f}", str(idx_dtype)[-5:], inside,
      torch.is_inference_mode_enabled())


# --- left-padded batched greedy generation with stopping criteria --------------------------------
@torch.inference_mode()
def generate(model, prompts, max_new_tokens=6, eos_token_id=EOS_ID):
    width = max(len(p) for p in prompts)
    input_ids = torch.full((len(prompts), width), PAD_ID, dtype=torch.long)
    attention_mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for i, p in enumerate(prompts):
        input_ids[i, width - len(p):] = torch.tensor(p)
        attention_mask[i, width - len(p):] = 1
    unfinished = torch.ones(len(prompts), dtype=torch.long)
    past = None
    cur = input_ids
    for _ in range(max_new_tokens):
        position_ids = attention_mask.long().cumsum(-1) - 1
        position_ids.masked_fill_(attention_mask == 0, 1)
        L = attention_mask.size(1)
        q_len = cur.size(1)
        causal = torch.ones(L, L, dtype=torch.bool).tril()[-q_len:]
        mask = causal[None, None] & attention_mask[:, None, None, :].bool()
        bias = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
        bias = torch.where(mask.any(-1, keepdim=True), bias, torch.zeros_like(bias))
        logits, past = model(cur, position_ids=position_ids[:, -q_len:], past_key_values=past,
                             attn_mask=bias, use_cache=True)
        next_tokens = torch.argmax(logits[:, -1, :], dim=-1)
        next_tokens = next_tokens * unfinished + PAD_ID * (1 - unfinished)
        input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones((len(prompts), 1))],
                                   dim=-1)
        unfinished = unfinished & (next_tokens != eos_token_id).long()
        cur = next_tokens[:, None]
        if unfinished.max() == 0 or torch.all(unfinished == 0):
            break
    return input_ids, attention_mask, torch.any(input_ids == eos_token_id, dim=-1)


out_ids, out_mask, hit_eos = generate(base, [[BOS_ID, 7, 4, 11], [BOS_ID, 5]])
with torch.inference_mode():
    solo, _, _ = generate(base, [[BOS_ID, 5]])
print("generate", out_ids.tolist(), out_mask.sum(-1).tolist(), hit_eos.tolist(),
      torch.equal(solo[0, :], out_ids[1, 2:2 + solo.size(1)]),
      out_ids.requires_grad)  # ember: no Tensor.is_inference() (docs/unsupported.md)

# --- mixed precision: bf16 copy and CPU autocast ----------------------------------------------
half = TinyLM()
half.load_state_dict(plain2.state_dict())
half = half.to(torch.bfloat16)
with torch.no_grad():
    hl = half(probe)[0]
with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
    al, _ = plain2(probe)
    al_loss = F.cross_entropy(al.reshape(-1, VOCAB), data[:2, 1:7].reshape(-1))
scores = F.softmax(hl, dim=-1, dtype=torch.float32)      # HF-style attention in bf16 models
top_p_mass = torch.sort(hl, descending=True).values.softmax(-1).cumsum(-1, dtype=torch.float32)
print("bf16", *(str(t.dtype).split(".")[-1] for t in (hl, half.lm_head.weight, al, al_loss,
                                                      scores, top_p_mass)),
      half.lm_head.weight is half.embed_tokens.weight,
      f"{(hl.float() - before).abs().max().item() < 0.5}",
      f"{(al.float() - before).abs().max().item() < 0.5}",
      hl.argmax(-1).eq(before.argmax(-1)).float().mean().item() > 0.6)
