"""An nn.Transformer translation toy (masks, Noam schedule, label smoothing, greedy decoding)
and a nanoGPT-style character model (SDPA, weight tying, AdamW groups, estimate_loss)."""
import inspect
import math
from contextlib import nullcontext

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(5)
PAD, BOS, EOS = 0, 1, 2
pairs = [("i like green tea", "ich mag gruenen tee"), ("you like tea", "du magst tee"),
         ("i drink water", "ich trinke wasser"), ("we like water", "wir moegen wasser")]


def vocab(sentences):
    return {w: i + 3 for i, w in enumerate(sorted({w for s in sentences for w in s.split()}))}


sv, tv = vocab([a for a, _ in pairs]), vocab([b for _, b in pairs])
src = nn.utils.rnn.pad_sequence([torch.tensor([sv[w] for w in a.split()] + [EOS]) for a, _ in pairs],
                                batch_first=True, padding_value=PAD)
tgt = nn.utils.rnn.pad_sequence([torch.tensor([BOS] + [tv[w] for w in b.split()] + [EOS])
                                 for _, b in pairs], batch_first=True, padding_value=PAD)
D = 16


def fill_(module, scale=0.2):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.from_numpy(rng.standard_normal(p.shape).astype(np.float32) * scale))


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=32, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.transpose(0, 1))

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.size(1)])


class Seq2SeqTransformer(nn.Module):
    def __init__(self, ns, nt):
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(ns, D), nn.Embedding(nt, D)
        self.pos = PositionalEncoding(D, dropout=0.0)
        self.transformer = nn.Transformer(d_model=D, nhead=4, num_encoder_layers=2,
                                          num_decoder_layers=2, dim_feedforward=32,
                                          dropout=0.0, batch_first=True)
        self.generator = nn.Linear(D, nt)

    def encode(self, s, s_pad):
        return self.transformer.encoder(self.pos(self.src_emb(s) * math.sqrt(D)),
                                        src_key_padding_mask=s_pad)

    def decode(self, t, memory, m_pad):
        mask = nn.Transformer.generate_square_subsequent_mask(t.size(1))
        return self.transformer.decoder(self.pos(self.tgt_emb(t) * math.sqrt(D)), memory,
                                        tgt_mask=mask, memory_key_padding_mask=m_pad)

    def forward(self, s, t):
        s_pad, t_pad = s == PAD, t == PAD
        mask = self.transformer.generate_square_subsequent_mask(t.size(1))
        out = self.transformer(self.pos(self.src_emb(s) * math.sqrt(D)),
                               self.pos(self.tgt_emb(t) * math.sqrt(D)), tgt_mask=mask,
                               src_key_padding_mask=s_pad, tgt_key_padding_mask=t_pad,
                               memory_key_padding_mask=s_pad, tgt_is_causal=True)
        return self.generator(out)


model = Seq2SeqTransformer(len(sv) + 3, len(tv) + 3)
fill_(model)
opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
warmup = 3
noam = lambda step: 0.2 * D ** -0.5 * min((step + 1) ** -0.5, (step + 1) * warmup ** -1.5)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda=noam)
crit = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
losses, lrs = [], []
model.train()
for step in range(5):
    logits = model(src, tgt[:, :-1])
    loss = crit(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
    losses.append(loss.item())
    lrs.append(sched.get_last_lr()[0])
print("tf_losses", " ".join(f"{v:.6f}" for v in losses))
print("tf_lrs", " ".join(f"{v:.8f}" for v in lrs))

model.eval()
with torch.no_grad():
    s_pad = src == PAD
    memory = model.encode(src, s_pad)
    ys = torch.full((src.size(0), 1), BOS, dtype=torch.long)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(6):
        out = model.decode(ys, memory, s_pad)
        prob = model.generator(out[:, -1])
        if ys.size(1) < 4:  # a minimum length: no EOS (nor PAD/BOS) yet
            prob[:, :3] = float("-inf")
        next_word = torch.max(prob, dim=1).indices
        next_word = torch.where(done, torch.full_like(next_word, PAD), next_word)
        ys = torch.cat([ys, next_word.unsqueeze(1)], dim=1)
        done |= next_word == EOS
        if done.all():
            break
print("tf_decode", ys.tolist(), f"{memory[~s_pad].abs().mean().item():.6f}",
      f"{memory.abs().mean().item():.6f}")

# ---- nanoGPT-style character model ----
torch.manual_seed(1337)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("high")
device = "cuda" if torch.cuda.is_available() else "cpu"
device_type = "cuda" if "cuda" in device else "cpu"
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type,
                                                                    dtype=torch.bfloat16)
text = "hello world. the quick brown fox jumps over the lazy dog. hello fox."
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
n = int(0.8 * len(data))
train_data, val_data = data[:n], data[n:]
block, V, C = 8, len(chars), 16


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.n_head = 2

    def forward(self, x):
        B, T, _ = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C, bias=False)
        self.attn = CausalSelfAttention()
        self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * C, C), nn.Dropout(0.0))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(V, C), wpe=nn.Embedding(block, C),
                                              h=nn.ModuleList([Block() for _ in range(2)]),
                                              ln_f=nn.LayerNorm(C)))
        self.lm_head = nn.Linear(C, V, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for blk in self.transformer.h:
            x = blk(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None if targets is None else F.cross_entropy(
            logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


gpt = GPT()
n_params = sum(p.numel() for p in gpt.parameters())
fill_(gpt, 0.1)
param_dict = {pn: p for pn, p in gpt.named_parameters() if p.requires_grad}
decay = [p for p in param_dict.values() if p.dim() >= 2]
nodecay = [p for p in param_dict.values() if p.dim() < 2]
optim = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                           {"params": nodecay, "weight_decay": 0.0}], lr=3e-3, betas=(0.9, 0.95),
                          **({"fused": True} if "fused" in inspect.signature(torch.optim.AdamW).parameters
                             and device_type == "cuda" else {}))
scaler = torch.amp.GradScaler(device_type, enabled=False)


def get_lr(it, warmup_iters=2, lr_decay_iters=5, max_lr=3e-3, min_lr=3e-4):
    if it < warmup_iters:
        return max_lr * (it + 1) / (warmup_iters + 1)
    ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)
starts = rng.integers(0, len(train_data) - block - 1, size=(5, 4))


def get_batch(split, ix):
    d = train_data if split == "train" else val_data
    ix = torch.as_tensor(ix) % (len(d) - block - 1)
    x = torch.stack([d[i:i + block] for i in ix])
    y = torch.stack([d[i + 1:i + 1 + block] for i in ix])
    return x, y


@torch.no_grad()
def estimate_loss():
    out = {}
    gpt.eval()
    for split in ["train", "val"]:
        losses = torch.zeros(2)
        for k in range(2):
            _, loss = gpt(*get_batch(split, starts[k]))
            losses[k] = loss.item()
        out[split] = losses.mean()
    gpt.train()
    return out


gpt_losses = []
for it in range(5):
    for param_group in optim.param_groups:
        param_group["lr"] = get_lr(it)
    xb, yb = get_batch("train", starts[it])
    with ctx:
        _, loss = gpt(xb, yb)
    scaler.scale(loss).backward()
    scaler.unscale_(optim)
    torch.nn.utils.clip_grad_norm_(gpt.parameters(), 1.0)
    scaler.step(optim)
    scaler.update()
    optim.zero_grad(set_to_none=True)
    gpt_losses.append(loss.item())
est = estimate_loss()
print("gpt", n_params, len(decay), len(nodecay), " ".join(f"{v:.6f}" for v in gpt_losses),
      f"{est['train']:.6f}", f"{est['val'].item():.6f}",
      gpt.lm_head.weight is gpt.transformer.wte.weight, len(gpt.state_dict()),
      f"{optim.state[decay[0]]['exp_avg_sq'].sum().item() * 1e3:.6f}")
with torch.no_grad():
    idx = data[:3].unsqueeze(0)
    for _ in range(6):
        idx_cond = idx if idx.size(1) <= block else idx[:, -block:]
        logits, _ = gpt(idx_cond)
        logits = logits[:, -1, :] / 0.8
        v, _ = torch.topk(logits, min(5, logits.size(-1)))
        logits[logits < v[:, [-1]]] = -float("Inf")
        probs = F.softmax(logits, dim=-1)
        idx = torch.cat((idx, probs.argmax(dim=-1, keepdim=True)), dim=1)
print("gpt_gen", "".join(chars[i] for i in idx[0].tolist()).replace(" ", "_"),
      f"{probs.max().item():.6f}")

# ---- nn.MultiheadAttention used directly: kdim/vdim, per-head weights, bias_kv, zero_attn ----
fastpath = torch.backends.mha.get_fastpath_enabled()
torch.backends.mha.set_fastpath_enabled(False)
torch.backends.mha.set_fastpath_enabled(fastpath)
mha = nn.MultiheadAttention(8, 2, batch_first=True, kdim=6, vdim=5)
mha2 = nn.MultiheadAttention(8, 2, bias=False, add_bias_kv=True, add_zero_attn=True)
fill_(mha, 0.3)
fill_(mha2, 0.3)
q = torch.from_numpy(rng.standard_normal((2, 3, 8)).astype(np.float32))
k = torch.from_numpy(rng.standard_normal((2, 4, 6)).astype(np.float32))
v = torch.from_numpy(rng.standard_normal((2, 4, 5)).astype(np.float32))
kpm = torch.tensor([[False, False, True, True], [False, False, False, False]])
am = torch.zeros(3, 4).masked_fill(torch.triu(torch.ones(3, 4, dtype=torch.bool), 2), -1e4)
out, w = mha(q, k, v, key_padding_mask=kpm, attn_mask=am, average_attn_weights=False)
out2, w2 = mha2(q.transpose(0, 1), q.transpose(0, 1), q.transpose(0, 1))
(out.sum() + out2.pow(2).sum()).backward()
print("mha", tuple(w.shape), tuple(w2.shape), f"{out.sum().item():.6f}", f"{out2.sum().item():.6f}",
      f"{w[0, :, :, 2:].abs().sum().item():.6f}", f"{w2[:, :, -1].sum().item():.6f}",
      " ".join(f"{p.grad.abs().sum().item():.5f}" for p in list(mha.parameters()) + list(mha2.parameters())),
      sorted(n for n, _ in mha.named_parameters()) == sorted(["q_proj_weight", "k_proj_weight",
      "v_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]))

# ---- a LLaMA-style block: RMSNorm, rotary embeddings via torch.polar, GQA, SwiGLU, KV cache ----
def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)
    return torch.polar(torch.ones(end, dim // 2), torch.outer(t, freqs))


def apply_rotary_emb(x, freqs_cis):
    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    fc = freqs_cis.view(1, x_.size(1), 1, x_.size(-1))
    return torch.view_as_real(x_ * fc).flatten(3).type_as(x)


class LlamaBlock(nn.Module):
    def __init__(self, dim=16, n_heads=4, n_kv=2):
        super().__init__()
        self.nh, self.nkv, self.hd = n_heads, n_kv, dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.hd, bias=False)
        self.wkv = nn.Linear(dim, 2 * n_kv * self.hd, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.w1, self.w3 = nn.Linear(dim, 32, bias=False), nn.Linear(dim, 32, bias=False)
        self.w2 = nn.Linear(32, dim, bias=False)
        self.attention_norm, self.ffn_norm = nn.RMSNorm(dim, eps=1e-6), nn.RMSNorm(dim, eps=1e-6)

    def forward(self, x, freqs_cis, cache=None):
        B, T, _ = x.shape
        h = self.attention_norm(x)
        q = self.wq(h).view(B, T, self.nh, self.hd)
        k, v = self.wkv(h).view(B, T, 2, self.nkv, self.hd).unbind(2)
        q, k = apply_rotary_emb(q, freqs_cis), apply_rotary_emb(k, freqs_cis)
        if cache is not None:
            k, v = torch.cat([cache[0], k], 1), torch.cat([cache[1], v], 1)
        q, kk, vv = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        kk = kk.repeat_interleave(self.nh // self.nkv, dim=1)
        vv = vv.repeat_interleave(self.nh // self.nkv, dim=1)
        y = F.scaled_dot_product_attention(q, kk, vv, is_causal=cache is None)
        x = x + self.wo(y.transpose(1, 2).reshape(B, T, -1))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h)), (k, v)


# ember: `from torch.nn.attention.flex_attention import flex_attention, create_block_mask` and
# `from torch.nn.attention.bias import causal_lower_right` -> ModuleNotFoundError ('torch.nn.attention'
# is not a package); the KV-cache step below uses is_causal=False with a one-token query instead.
blk = LlamaBlock()
fill_(blk, 0.3)
freqs_cis = precompute_freqs_cis(4, 8)
xs = torch.from_numpy(rng.standard_normal((2, 6, 16)).astype(np.float32)).requires_grad_()
full, _ = blk(xs, freqs_cis[:6])
full.pow(2).mean().backward()
with torch.no_grad():
    first, cache = blk(xs[:, :5], freqs_cis[:5])
    step, _ = blk(xs[:, 5:], freqs_cis[5:6], cache)
    gqa = F.scaled_dot_product_attention(*(torch.from_numpy(rng.standard_normal(s).astype(np.float32))
                                           for s in [(2, 4, 3, 4), (2, 2, 3, 4), (2, 2, 3, 4)]),
                                         is_causal=True, enable_gqa=True, scale=0.3)
print("llama", f"{full.sum().item():.6f}", f"{xs.grad.abs().sum().item():.6f}",
      f"{(step[:, 0] - full[:, 5]).abs().max().item() < 1e-4}", f"{first.sum().item():.6f}",
      f"{gqa.sum().item():.6f}", freqs_cis.dtype == torch.complex64,
      f"{blk.attention_norm.weight.grad.abs().sum().item():.6f}")
