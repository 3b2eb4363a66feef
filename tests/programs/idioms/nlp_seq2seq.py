"""A GRU encoder-decoder with Bahdanau attention, teacher forcing, greedy and beam decoding."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import (pad_sequence, pack_padded_sequence, pad_packed_sequence,
                                pack_sequence, PackedSequence)

rng = np.random.default_rng(11)
PAD, SOS, EOS = 0, 1, 2
pairs = [("the cat sat", "le chat assis"), ("a dog ran fast", "un chien courait vite"),
         ("the dog sat", "le chien assis"), ("a cat ran", "un chat courait"),
         ("the cat ran fast", "le chat courait vite")]


def build_vocab(sentences):
    words = sorted({w for s in sentences for w in s.split()})
    return {w: i + 3 for i, w in enumerate(words)}


src_vocab, tgt_vocab = build_vocab([p[0] for p in pairs]), build_vocab([p[1] for p in pairs])
src_seqs = [torch.tensor([src_vocab[w] for w in s.split()] + [EOS]) for s, _ in pairs]
tgt_seqs = [torch.tensor([SOS] + [tgt_vocab[w] for w in t.split()] + [EOS]) for _, t in pairs]
src = pad_sequence(src_seqs, batch_first=True, padding_value=PAD)
tgt = pad_sequence(tgt_seqs, batch_first=True, padding_value=PAD)
src_lens = torch.tensor([len(s) for s in src_seqs])
E, H = 8, 10


class Encoder(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.emb = nn.Embedding(vocab, E, padding_idx=PAD)
        self.rnn = nn.GRU(E, H, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(2 * H, H)

    def forward(self, x, lens):
        packed = pack_padded_sequence(self.emb(x), lens, batch_first=True, enforce_sorted=False)
        out, h = self.rnn(packed)
        assert isinstance(out, PackedSequence)
        out, out_lens = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
        h = h.view(2, 2, x.size(0), H)[-1]  # (num_layers, directions, B, H): last layer
        h = torch.tanh(self.fc(torch.cat((h[0], h[1]), dim=1)))
        return out, h, out_lens


class BahdanauAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.W = nn.Linear(H, H, bias=False)
        self.U = nn.Linear(2 * H, H)
        self.v = nn.Linear(H, 1, bias=False)

    def forward(self, query, keys, mask):
        scores = self.v(torch.tanh(self.W(query).unsqueeze(1) + self.U(keys))).squeeze(2)
        scores = scores.masked_fill(~mask, float("-inf"))
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights.unsqueeze(1), keys)
        return context, weights


class LuongAttention(nn.Module):
    """The 'general' score: h_t^T W h_s."""
    def __init__(self):
        super().__init__()
        self.W = nn.Linear(2 * H, H, bias=False)

    def forward(self, query, keys, mask):
        scores = torch.bmm(self.W(keys), query.unsqueeze(2)).squeeze(2)
        scores = scores.masked_fill(mask == 0, -1e9)
        weights = torch.softmax(scores, dim=1)
        return torch.einsum("bs,bsh->bh", weights, keys), weights


class Decoder(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.emb = nn.Embedding(vocab, E, padding_idx=PAD)
        self.attn = BahdanauAttention()
        self.rnn = nn.GRU(E + 2 * H, H, batch_first=True)
        self.out = nn.Linear(H + 2 * H + E, vocab)

    def forward(self, tok, hidden, keys, mask):
        emb = self.emb(tok).unsqueeze(1)
        context, w = self.attn(hidden, keys, mask)
        out, h = self.rnn(torch.cat([emb, context], dim=2), hidden.unsqueeze(0))
        logits = self.out(torch.cat([out.squeeze(1), context.squeeze(1), emb.squeeze(1)], 1))
        return F.log_softmax(logits, dim=-1), h.squeeze(0), w


enc, dec = Encoder(len(src_vocab) + 3), Decoder(len(tgt_vocab) + 3)
luong = LuongAttention()
for module in (enc, dec, luong):
    for name, p in module.named_parameters():
        with torch.no_grad():
            p.copy_(torch.from_numpy(rng.standard_normal(p.shape).astype(np.float32) * 0.3))
params = list(enc.parameters()) + list(dec.parameters())
opt = torch.optim.Adam(params, lr=0.05)
crit = nn.NLLLoss(ignore_index=PAD)
tf_flags = rng.random(5) < 0.7


def run_batch(teacher_forcing):
    keys, hidden, _ = enc(src, src_lens)
    mask = torch.arange(src.size(1)).unsqueeze(0) < src_lens.unsqueeze(1)
    tok, loss = tgt[:, 0], 0.0
    for t in range(1, tgt.size(1)):
        logp, hidden, _ = dec(tok, hidden, keys, mask)
        loss = loss + crit(logp, tgt[:, t])
        tok = tgt[:, t] if teacher_forcing else logp.argmax(dim=-1).detach()
    return loss / (tgt.size(1) - 1)


losses = []
for step in range(5):
    opt.zero_grad()
    loss = run_batch(bool(tf_flags[step]))
    loss.backward()
    gn = nn.utils.clip_grad_norm_(params, max_norm=1.0)
    opt.step()
    losses.append(loss.item())
print("losses", " ".join(f"{v:.6f}" for v in losses), f"{float(gn):.6f}")

enc.eval()
dec.eval()
with torch.no_grad():
    keys, hidden, out_lens = enc(src, src_lens)
    mask = torch.arange(src.size(1))[None, :] < src_lens[:, None]
    tok = torch.full((src.size(0),), SOS, dtype=torch.long)
    greedy, attn_sum = [], torch.zeros(src.size(0), src.size(1))
    for _ in range(6):
        logp, hidden, w = dec(tok, hidden, keys, mask)
        tok = logp.argmax(-1)
        greedy.append(tok)
        attn_sum += w
    greedy = torch.stack(greedy, dim=1)
    ctx, lw = luong(hidden, keys, mask)
    packed = pack_sequence([s.float() for s in src_seqs], enforce_sorted=False)
print("greedy", greedy.flatten().tolist(), out_lens.tolist())
print("attn", " ".join(f"{v:.6f}" for v in attn_sum.sum(0).tolist()),
      f"{ctx.abs().sum().item():.6f}", f"{lw.max().item():.6f}")
print("packed", packed.batch_sizes.tolist(), packed.sorted_indices.tolist(),
      packed.unsorted_indices.tolist(), f"{packed.data.sum().item():.1f}")


def beam_search(i, beam=3, max_len=6):
    with torch.no_grad():
        keys, hidden, _ = enc(src[i:i + 1], src_lens[i:i + 1])
        m = (src[i:i + 1] != PAD)
        beams = [([SOS], 0.0, hidden)]
        finished = []
        for _ in range(max_len):
            cands = []
            for seq, score, h in beams:
                logp, h2, _ = dec(torch.tensor([seq[-1]]), h, keys, m)
                top_lp, top_ix = logp[0].topk(beam)
                for lp, ix in zip(top_lp.tolist(), top_ix.tolist()):
                    cands.append((seq + [ix], score + lp, h2))
            cands.sort(key=lambda c: c[1], reverse=True)
            beams = []
            for c in cands[:beam]:
                (finished if c[0][-1] == EOS else beams).append(c)
            if not beams:
                break
        best = max(finished + beams, key=lambda c: c[1] / len(c[0]))
        return best[0], best[1]


results = [beam_search(i) for i in range(2)]
print("beam", [r[0] for r in results], " ".join(f"{r[1]:.6f}" for r in results))


@torch.no_grad()
def batched_beam(num_beams=3, max_len=5, rep_penalty=1.3, top_p=0.9):
    """HF-style batched beam search: beams flattened into the batch, topk over beams x vocab."""
    B, Vt = src.size(0), len(tgt_vocab) + 3
    keys, hidden, _ = enc(src, src_lens)
    keys, hidden = keys.repeat_interleave(num_beams, dim=0), hidden.repeat_interleave(num_beams, 0)
    mask = (src != PAD).unsqueeze(1).expand(-1, num_beams, -1).reshape(B * num_beams, -1)
    seqs = torch.full((B * num_beams, 1), SOS, dtype=torch.long)
    beam_scores = torch.zeros(B, num_beams)
    beam_scores[:, 1:] = -1e9
    beam_scores = beam_scores.view(-1)
    for _ in range(max_len):
        logp, hidden, _ = dec(seqs[:, -1], hidden, keys, mask)
        prev = torch.gather(logp, 1, seqs)
        logp = logp.scatter(1, seqs, torch.where(prev < 0, prev * rep_penalty, prev / rep_penalty))
        sorted_lp, sorted_ix = torch.sort(logp, descending=True)
        remove = torch.cumsum(sorted_lp.exp(), dim=-1) > top_p
        remove[..., 1:] = remove[..., :-1].clone()
        remove[..., 0] = False
        logp = logp.masked_fill(remove.scatter(1, sorted_ix, remove), -1e4)
        scores = (logp + beam_scores[:, None]).view(B, num_beams * Vt)
        top, top_ix = torch.topk(scores, num_beams, dim=1, largest=True, sorted=True)
        beam_idx = torch.div(top_ix, Vt, rounding_mode="floor")
        tokens = top_ix % Vt
        flat = (beam_idx + torch.arange(B).unsqueeze(1) * num_beams).view(-1)
        seqs = torch.cat([seqs.index_select(0, flat), tokens.view(-1, 1)], dim=-1)
        hidden, beam_scores = hidden[flat], top.view(-1)
    return seqs.view(B, num_beams, -1)[:, 0], beam_scores.view(B, num_beams)


bb_seqs, bb_scores = batched_beam()
print("batched_beam", bb_seqs.tolist(), " ".join(f"{v:.5f}" for v in bb_scores[:, 0].tolist()))
