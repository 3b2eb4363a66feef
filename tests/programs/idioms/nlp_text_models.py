"""Assorted NLP idioms: EmbeddingBag and CNN text classifiers, an LSTM-CRF tagger, CTC, weighted
and soft-target cross entropy, masked pooling, one_hot, unique/bucketize/searchsorted, gradient
accumulation."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

rng = np.random.default_rng(7)
corpus = ["good movie great acting", "bad plot awful acting", "great fun", "awful boring movie",
          "good fun great plot", "boring bad"]
labels = torch.tensor([1, 0, 1, 0, 1, 0])
PAD, UNK = 0, 1
words = sorted({w for s in corpus for w in s.split()})
vocab = {w: i + 2 for i, w in enumerate(words)}
V = len(vocab) + 2
tokens = [torch.tensor([vocab.get(w, UNK) for w in s.split()], dtype=torch.long) for s in corpus]


def fill_(module, scale=0.3):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.from_numpy(rng.standard_normal(p.shape).astype(np.float32) * scale))


# ---- EmbeddingBag classifier with offsets (torchtext tutorial style) ----
def collate_batch(batch):
    label_list, text_list, offsets = [], [], [0]
    for label, text in batch:
        label_list.append(label)
        text_list.append(text)
        offsets.append(text.size(0))
    offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
    return torch.tensor(label_list, dtype=torch.int64), torch.cat(text_list), offsets


class TextClassificationModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.EmbeddingBag(V, 8, mode="mean")
        self.fc = nn.Linear(8, 2)

    def forward(self, text, offsets):
        return self.fc(self.embedding(text, offsets))


bag = TextClassificationModel()
fill_(bag)
opt = torch.optim.SGD(bag.parameters(), lr=0.5)
sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
y, text, offsets = collate_batch(list(zip(labels.tolist(), tokens)))
bag_losses = []
for _ in range(4):
    opt.zero_grad()
    loss = F.cross_entropy(bag(text, offsets), y)
    loss.backward()
    nn.utils.clip_grad_norm_(bag.parameters(), 0.1)
    opt.step()
    sched.step()
    bag_losses.append(loss.item())
acc = (bag(text, offsets).argmax(1) == y).sum().item() / y.size(0)
esum = nn.EmbeddingBag.from_pretrained(bag.embedding.weight.detach().clone(), mode="sum")
per_sample_w = torch.from_numpy(rng.random(text.shape[0]).astype(np.float32))
print("bag", " ".join(f"{v:.6f}" for v in bag_losses), f"{acc:.4f}", offsets.tolist(),
      f"{esum(text, offsets, per_sample_weights=per_sample_w).sum().item():.6f}",
      f"{F.embedding_bag(text[:18].view(3, 6), bag.embedding.weight, mode='max').sum().item():.6f}")

# ---- CNN text classifier over a padded batch ----
padded = pad_sequence(tokens, batch_first=True, padding_value=PAD)
lengths = torch.tensor([len(t) for t in tokens])


class TextCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 6, padding_idx=PAD)
        self.convs = nn.ModuleList([nn.Conv1d(6, 4, k, padding=k // 2) for k in (2, 3)])
        self.drop = nn.Dropout(0.0)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        e = self.emb(x).permute(0, 2, 1)
        pooled = [F.relu(c(e)).max(dim=2)[0] for c in self.convs]
        return self.fc(self.drop(torch.cat(pooled, dim=1)))


cnn = TextCNN()
fill_(cnn)
copt = torch.optim.Adam(cnn.parameters(), lr=0.01, weight_decay=1e-4)
class_w = torch.tensor([0.3, 0.7])
accum_steps, cnn_losses = 2, []
for step in range(4):
    for micro in range(accum_steps):
        sl = slice(micro * 3, micro * 3 + 3)
        loss = F.cross_entropy(cnn(padded[sl]), labels[sl], weight=class_w) / accum_steps
        loss.backward()
        cnn_losses.append(loss.item())
    copt.step()
    copt.zero_grad()
soft = F.softmax(torch.from_numpy(rng.standard_normal((6, 2)).astype(np.float32)), dim=1)
with torch.no_grad():
    logits = cnn(padded)
print("cnn", " ".join(f"{v:.6f}" for v in cnn_losses),
      f"{F.cross_entropy(logits, soft).item():.6f}",
      f"{F.cross_entropy(logits, soft, label_smoothing=0.2).item():.6f}",
      f"{nn.CrossEntropyLoss(weight=class_w, reduction='sum')(logits, labels).item():.6f}",
      f"{F.cross_entropy(logits, labels, weight=class_w, label_smoothing=0.1).item():.6f}")

# ---- masked mean pooling, masked_fill(-inf), gather, one_hot, position ids ----
mask = padded != PAD
emb = cnn.emb(padded)
mean_pooled = (emb * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
scores = emb.sum(-1).masked_fill(~mask, float("-inf"))
attn = torch.softmax(scores, dim=-1)
last = emb.gather(1, (lengths - 1).view(-1, 1, 1).expand(-1, 1, emb.size(-1))).squeeze(1)
pos_ids = torch.cumsum(mask.long(), dim=1) * mask.long() + PAD
oh = F.one_hot(padded, num_classes=V)
maxed = torch.where(mask.unsqueeze(-1), emb, torch.tensor(float("-inf"))).amax(dim=1)
print("pool", f"{mean_pooled.sum().item():.6f}", f"{attn.sum().item():.6f}",
      f"{attn[:, -1].sum().item():.6f}", f"{last.sum().item():.6f}", pos_ids.tolist()[5],
      tuple(oh.shape), oh.dtype == torch.int64, oh.sum(dim=(0, 1))[:4].tolist(),
      f"{maxed.sum().item():.6f}")

# ---- BiLSTM-CRF tagger: forward algorithm with logsumexp, gold path score, Viterbi ----
tag_seqs = [[1, 2, 0, 0], [2, 2, 1, 0], [1, 0], [0, 1, 2, 2], [1, 2, 1, 0], [2, 0]]
tags = pad_sequence([torch.tensor(t) for t in tag_seqs], batch_first=True, padding_value=-100)
T = 3


class BiLSTM_CRF(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 6, padding_idx=PAD)
        self.lstm = nn.LSTM(6, 5, batch_first=True, bidirectional=True, num_layers=1)
        self.hidden2tag = nn.Linear(10, T)
        self.transitions = nn.Parameter(torch.zeros(T, T))
        self.start = nn.Parameter(torch.zeros(T))

    def emissions(self, x, lens):
        packed = nn.utils.rnn.pack_padded_sequence(self.emb(x), lens, batch_first=True,
                                                   enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
        return self.hidden2tag(out)

    def nll(self, x, lens, y):
        em = self.emissions(x, lens)
        m = (y != -100)
        y0 = y.clamp(min=0)
        alpha = self.start + em[:, 0]
        gold = self.start[y0[:, 0]] + em[:, 0].gather(1, y0[:, :1]).squeeze(1)
        for t in range(1, x.size(1)):
            nxt = torch.logsumexp(alpha.unsqueeze(2) + self.transitions + em[:, t].unsqueeze(1), 1)
            alpha = torch.where(m[:, t:t + 1], nxt, alpha)
            step = self.transitions[y0[:, t - 1], y0[:, t]] + em[:, t, :].gather(
                1, y0[:, t].unsqueeze(1)).squeeze(1)
            gold = gold + step * m[:, t]
        return (torch.logsumexp(alpha, dim=1) - gold).mean()

    @torch.no_grad()
    def viterbi(self, x, lens):
        em = self.emissions(x, lens)
        score, back = self.start + em[:, 0], []
        for t in range(1, x.size(1)):
            best, idx = (score.unsqueeze(2) + self.transitions).max(dim=1)
            live = (t < lens).unsqueeze(1)
            back.append(torch.where(live, idx, torch.arange(T).expand_as(idx)))
            score = torch.where(live, best + em[:, t], score)
        path = [score.argmax(-1)]
        for bp in reversed(back):
            path.append(bp.gather(1, path[-1].unsqueeze(1)).squeeze(1))
        return torch.stack(path[::-1], dim=1), score.max(-1).values


crf = BiLSTM_CRF()
fill_(crf)
ropt = torch.optim.RMSprop(crf.parameters(), lr=0.01, momentum=0.9)
crf_losses = []
for _ in range(4):
    ropt.zero_grad()
    loss = crf.nll(padded, lengths, tags)
    loss.backward()
    ropt.step()
    crf_losses.append(loss.item())
path, best = crf.viterbi(padded, lengths)
tok_logits = crf.emissions(padded, lengths)
tok_ce = F.cross_entropy(tok_logits.transpose(1, 2), tags, ignore_index=-100)
print("crf", " ".join(f"{v:.6f}" for v in crf_losses), path.masked_fill(tags == -100, -1).tolist(),
      " ".join(f"{v:.5f}" for v in best.tolist()), f"{tok_ce.item():.6f}")

# ---- CTC loss on a tiny example ----
Tn, N, C = 6, 2, 4
ctc_logits = torch.from_numpy(rng.standard_normal((Tn, N, C)).astype(np.float32)).requires_grad_()
log_probs = ctc_logits.log_softmax(2)
targets = torch.tensor([[1, 2, 2], [3, 1, 0]])
input_lengths = torch.tensor([6, 5])
target_lengths = torch.tensor([3, 2])
ctc = nn.CTCLoss(blank=0, zero_infinity=True)
ctc_loss = ctc(log_probs, targets, input_lengths, target_lengths)
ctc_loss.backward()
flat = F.ctc_loss(log_probs, torch.tensor([1, 2, 2, 3, 1]), input_lengths, target_lengths,
                  reduction="sum")
decoded = torch.unique_consecutive(log_probs[:, 0].argmax(-1))
print("ctc", f"{ctc_loss.item():.6f}", f"{flat.item():.6f}",
      f"{ctc_logits.grad.abs().sum().item():.6f}", decoded[decoded != 0].tolist())

# ---- tokenisation helpers with tensors: unique, bucketize, searchsorted, vocab lookups ----
ids = torch.cat(tokens)
uniq, inverse, counts = torch.unique(ids, sorted=True, return_inverse=True, return_counts=True)
freq_order = torch.argsort(counts, descending=True, stable=True)
boundaries = torch.tensor([2, 4, 8])
len_bucket = torch.bucketize(lengths, boundaries)
len_bucket_r = torch.bucketize(lengths, boundaries, right=True)
cum = torch.tensor([0, 4, 8, 10, 13, 17, 19])
sent_of_tok = torch.searchsorted(cum, torch.arange(19), right=True) - 1
lookup = torch.full((V + 5,), UNK, dtype=torch.long)
lookup[uniq] = torch.arange(uniq.numel())
remapped = lookup[ids]
is_special = torch.isin(ids, torch.tensor([vocab["good"], vocab["bad"]]))
bow = torch.zeros(len(tokens), V).index_add_(0, sent_of_tok, F.one_hot(ids, V).float())
bincount = torch.bincount(ids, minlength=V)
print("tok", uniq.tolist(), inverse[:6].tolist(), counts.tolist(), freq_order[:4].tolist(),
      len_bucket.tolist(), len_bucket_r.tolist(), sent_of_tok.tolist(), remapped[:5].tolist(),
      int(is_special.sum()), bow.sum(1).tolist(), torch.equal(bow.sum(0).long(), bincount),
      torch.searchsorted(cum, torch.tensor([[3, 10], [0, 19]]), side="left").tolist())

# ---- DataLoader with a length-bucketing batch sampler and a dict collate; an LM head with
# AdaptiveLogSoftmaxWithLoss over an LSTM with proj_size; HF-style shifted labels ----
class SentDS(torch.utils.data.Dataset):
    def __len__(self):
        return len(tokens)

    def __getitem__(self, i):
        return {"input_ids": tokens[i], "label": int(labels[i])}


class BucketSampler(torch.utils.data.Sampler):
    def __init__(self, lens, bs):
        self.lens, self.bs = lens, bs

    def __iter__(self):
        order = sorted(range(len(self.lens)), key=lambda i: (self.lens[i], i))
        return iter([order[i:i + self.bs] for i in range(0, len(order), self.bs)])

    def __len__(self):
        return (len(self.lens) + self.bs - 1) // self.bs


def lm_collate(batch):
    ids = pad_sequence([b["input_ids"] for b in batch], batch_first=True, padding_value=PAD)
    return {"input_ids": ids, "attention_mask": ids.ne(PAD).long(),
            "labels": torch.tensor([b["label"] for b in batch])}


loader = torch.utils.data.DataLoader(SentDS(), batch_sampler=BucketSampler(lengths.tolist(), 2),
                                     collate_fn=lm_collate)
lstm = nn.LSTM(6, 8, proj_size=4, batch_first=True)
emb_lm = nn.Embedding(V, 6, padding_idx=PAD)
asm = nn.AdaptiveLogSoftmaxWithLoss(4, V, cutoffs=[4, 8], div_value=2.0)
lm_params = nn.ModuleList([lstm, emb_lm, asm])
fill_(lm_params)
for p in lstm.parameters():
    p.register_hook(lambda g: g.clamp(-0.5, 0.5))
lm_opt = torch.optim.Adagrad(lm_params.parameters(), lr=0.1)
lm_losses, shapes = [], []
for batch in loader:
    ids, am = batch["input_ids"], batch["attention_mask"]
    pos = am.cumsum(-1) - 1
    pos = pos.masked_fill(am == 0, 1)
    out, (h, c) = lstm(emb_lm(ids))
    hid, tgt = out[:, :-1].reshape(-1, 4), ids[:, 1:].reshape(-1)
    keep = tgt != PAD
    res = asm(hid[keep], tgt[keep])
    lm_opt.zero_grad()
    res.loss.backward()
    lm_opt.step()
    lm_losses.append(res.loss.item())
    shapes.append((tuple(ids.shape), tuple(h.shape), tuple(c.shape), pos[0].tolist()))
with torch.no_grad():
    out, _ = lstm(emb_lm(padded))
    lp = asm.log_prob(out.reshape(-1, 4))
print("lm", " ".join(f"{v:.6f}" for v in lm_losses), shapes[0], len(loader),
      f"{lp.exp().sum(1).mean().item():.6f}", asm.predict(out[:, -1]).tolist(),
      f"{lstm.weight_hr_l0.abs().sum().item():.6f}")

# ---- skip-gram with negative sampling (fixed negatives) and FGM adversarial training ----
ctr, ctx_w = torch.tensor([[2, 3], [4, 5], [6, 7]]).unbind(1)
negs = torch.tensor([[8, 9], [10, 2], [3, 4]])
ein, eout = nn.Embedding(V, 5), nn.Embedding(V, 5)
fill_(ein)
fill_(eout)
v = ein(ctr)
sg_loss = -(F.logsigmoid((v * eout(ctx_w)).sum(1))
            + F.logsigmoid(-torch.bmm(eout(negs), v.unsqueeze(2)).squeeze(2)).sum(1)).mean()
sg_loss.backward()
sims = F.cosine_similarity(ein.weight[2:3], ein.weight, dim=1)
fgm_opt = torch.optim.SGD(bag.parameters(), lr=0.1)
fgm_opt.zero_grad()
F.cross_entropy(bag(text, offsets), y).backward()
w = bag.embedding.weight
backup = w.data.clone()
norm = torch.norm(w.grad)
if norm != 0 and not torch.isnan(norm):
    w.data.add_(0.5 * w.grad / norm)
adv_loss = F.cross_entropy(bag(text, offsets), y)
adv_loss.backward()
w.data = backup
fgm_opt.step()
print("sgns", f"{sg_loss.item():.6f}", sims.topk(3).indices.tolist(),
      f"{ein.weight.grad.abs().sum().item():.6f}", f"{adv_loss.item():.6f}",
      f"{bag.embedding.weight.sum().item():.6f}",
      f"{F.normalize(ein.weight, dim=-1).pow(2).sum().item():.4f}")
