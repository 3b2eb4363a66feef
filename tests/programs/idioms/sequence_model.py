"""A sequence-model script in current torch idioms (run unchanged on torch and on ember)."""
import io
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

rng = np.random.default_rng(1)


def init_(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.1, dtype=p.dtype))


class LM(nn.Module):
    def __init__(self, vocab=20, d=16, heads=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.pos = nn.Parameter(torch.zeros(1, 12, d))
        layer = nn.TransformerEncoderLayer(d, heads, 32, dropout=0.0, batch_first=True,
                                           norm_first=True, activation="gelu")
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.rnn = nn.LSTM(d, d, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * d, vocab)

    def forward(self, tokens, lengths):
        T = tokens.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
        h = self.enc(self.emb(tokens) + self.pos[:, :T], mask=mask, is_causal=True,
                     src_key_padding_mask=tokens == 0)
        packed = pack_padded_sequence(h, lengths, batch_first=True, enforce_sorted=False)
        o, _ = self.rnn(packed)
        o, _ = pad_packed_sequence(o, batch_first=True, total_length=T)
        return self.out(o)


model = LM().double()
init_(model)
seqs = [torch.tensor(rng.integers(1, 20, n)) for n in (12, 7, 9, 4, 11, 6)]
lengths = torch.tensor([len(s) for s in seqs])
tokens = pad_sequence(seqs, batch_first=True, padding_value=0)
opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9, amsgrad=True)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 4) / math.sqrt(
    max(s, 1)))
losses = []
for step in range(6):
    opt.zero_grad()
    for half in (slice(0, 3), slice(3, 6)):          # gradient accumulation over two halves
        logits = model(tokens[half], lengths[half])
        target = tokens[half].roll(-1, dims=1)
        loss = F.cross_entropy(logits.reshape(-1, 20), target.reshape(-1), ignore_index=0)
        (loss / 2).backward()
        losses.append(loss.item())
    torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
    opt.step()
    sched.step()

buf = io.BytesIO()
torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": 6}, buf)
buf.seek(0)
state = torch.load(buf, weights_only=True)
twin = LM().double()
twin.load_state_dict(state["model"])
twin.eval()
with torch.inference_mode():
    probs = F.softmax(twin(tokens, lengths), dim=-1)
    top = probs.topk(3, dim=-1)
with torch.autocast("cpu", dtype=torch.bfloat16):
    low = model.out(torch.ones(2, 32, dtype=torch.float32).double().float().to(torch.float64)
                    .float().double())
print("losses", " ".join(f"{v:.10f}" for v in losses[::3]))
print("lr", f"{sched.get_last_lr()[0]:.10f}", state["step"], len(state["opt"]["state"]))
print("probs", f"{probs.sum().item():.8f}", f"{top.values[:, :, 0].mean().item():.10f}")
print("top", int(top.indices.sum()))
print("autocast", str(low.dtype).split(".")[-1])
