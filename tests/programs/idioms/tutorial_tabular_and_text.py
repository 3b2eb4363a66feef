"""A beginner's tabular and text notebook: a seed_everything helper (random, NumPy, torch,
cudnn flags, use_deterministic_algorithms), device selection with .to(device, non_blocking=True),
a Dataset over NumPy arrays normalised with torch statistics, random_split with fractions and a
generator, Subset, a WeightedRandomSampler built from bincount class weights, shuffled
DataLoaders with a generator and worker_init_fn, categorical embeddings concatenated with numeric
features in a BatchNorm1d/Dropout MLP, a tqdm loop, accuracy / confusion matrix / macro F1 from
bincount, early stopping saving the best state_dict to a file, ReduceLROnPlateau on the
validation loss, k-fold cross-validation re-initialising with copy.deepcopy and
reset_parameters, printing the model, counting trainable parameters, a forward-hook summary,
bfloat16 autocast inference and a training step, default_collate of NumPy scalars, a full
checkpoint with get_rng_state / set_rng_state and fork_rng, f-strings of 0-d tensors; then a
hand-built vocabulary, a collate_fn with pad_sequence and
lengths, and an LSTM text classifier over packed sequences."""
import copy
import os
import random
import tempfile
from collections import Counter

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset, Subset, WeightedRandomSampler, random_split

try:
    from tqdm.auto import tqdm
except ImportError:
    tqdm = None


def seed_everything(seed=42):
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)


seed_everything(42)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
rng = np.random.default_rng(5)
f = lambda t: " ".join(f"{v:.6g}" for v in torch.as_tensor(t).flatten().tolist())


def init_(m, scale=0.3):
    """Deterministic weights from NumPy, so both frameworks start from the same model."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("bias") and p.dim() == 1 and "bn" in name:
                continue
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32)
                                     * scale))
    return m


print("setup", device.type, torch.are_deterministic_algorithms_enabled(),
      torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
      torch.initial_seed(), torch.cuda.is_available())

# ---- data: two categorical columns and three numeric ones, imbalanced labels ------------------
N = 120
cat_a = rng.integers(0, 5, N)
cat_b = rng.integers(0, 3, N)
num = rng.standard_normal((N, 3)).astype(np.float32) * np.array([1.0, 5.0, 0.2], np.float32) + 3
score = num[:, 0] - 0.2 * num[:, 1] + (cat_a == 2) * 1.5 - (cat_b == 1)
labels = np.digitize(score, np.quantile(score, [0.6, 0.85]))    # 3 classes, 60/25/15 %


class TabularDataset(Dataset):
    def __init__(self, cats, nums, y, mean=None, std=None):
        self.cats = torch.tensor(cats, dtype=torch.long)
        self.nums = torch.tensor(nums, dtype=torch.float32)
        self.mean = self.nums.mean(dim=0) if mean is None else mean
        self.std = self.nums.std(dim=0) if std is None else std
        self.y = torch.tensor(y, dtype=torch.long)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, idx):
        x_num = (self.nums[idx] - self.mean) / (self.std + 1e-8)
        return {"cat": self.cats[idx], "num": x_num, "label": self.y[idx]}


full = TabularDataset(np.stack([cat_a, cat_b], 1), num, labels)
g = torch.Generator().manual_seed(0)
split_train, split_val = random_split(full, [0.75, 0.25], generator=g)
# a NumPy permutation (after np.random.seed) for the split the model trains on: torch's and
# ember's generators draw different streams, so random_split's indices differ between them
perm = np.random.permutation(N)
train_set, val_set = Subset(full, perm[:90].tolist()), Subset(full, perm[90:].tolist())
first_fold = Subset(full, list(range(0, N, 4)))
class_counts = torch.bincount(full.y)
class_weights = 1.0 / class_counts.float()
train_labels = full.y[train_set.indices]
sample_weights = class_weights[train_labels]
sampler = WeightedRandomSampler(sample_weights, num_samples=len(sample_weights),
                                replacement=True, generator=torch.Generator().manual_seed(1))
balanced = DataLoader(train_set, batch_size=16, sampler=sampler)
seen = torch.cat([b["label"] for b in balanced])


def seed_worker(worker_id):
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


shuffled = DataLoader(train_set, batch_size=16, shuffle=True, worker_init_fn=seed_worker,
                      generator=torch.Generator().manual_seed(0), drop_last=False)
order1 = torch.cat([b["label"] for b in shuffled])
print("data", len(split_train), len(split_val), len(first_fold), f(class_counts),
      f(class_weights * 1000), len(sampler), len(seen), len(balanced), len(shuffled),
      sorted(order1.tolist()) == sorted(train_labels.tolist()), first_fold[2]["cat"].tolist(),
      f(full[0]["num"]), isinstance(split_train, Subset),
      len(set(split_train.indices) | set(split_val.indices)) == N, perm[:5].tolist())


class NumpyRows(Dataset):
    """Rows as NumPy scalars and arrays, as a pandas-backed notebook Dataset returns them."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        return {"num": num[i], "cat": cat_a[i], "label": np.int64(labels[i]),
                "weight": np.float32(0.5 * (i + 1)), "flag": bool(i % 2), "id": f"row{i}"}


rows = next(iter(DataLoader(NumpyRows(), batch_size=3)))
print("collate", " ".join(f"{k}:{str(v.dtype).split('.')[-1]}:{list(v.shape)}"
                          if torch.is_tensor(v) else f"{k}:{v}" for k, v in rows.items()),
      f(rows["weight"]), str(torch.tensor([np.float32(0.25), 0.5]).dtype).split(".")[-1],
      str(torch.tensor([np.float32(1.5), np.float32(2.5)]).dtype).split(".")[-1])


# ---- model: embeddings for categoricals + numeric features -------------------------------------
class TabularNet(nn.Module):
    def __init__(self, cardinalities, n_num, hidden=16, n_classes=3, dropout=0.0):
        super().__init__()
        self.embs = nn.ModuleList([nn.Embedding(c, min(50, (c + 1) // 2)) for c in cardinalities])
        emb_dim = sum(e.embedding_dim for e in self.embs)
        # no bias before BatchNorm (its gradient is rounding noise, which Adam would amplify)
        self.mlp = nn.Sequential(
            nn.Linear(emb_dim + n_num, hidden, bias=False), nn.BatchNorm1d(hidden), nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, hidden // 2), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden // 2, n_classes))

    def forward(self, x_cat, x_num):
        x = [e(x_cat[:, i]) for i, e in enumerate(self.embs)]
        x = torch.cat(x + [x_num], dim=1)
        return self.mlp(x)


model = init_(TabularNet([5, 3], 3)).to(device)
n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
total = sum(p.numel() for p in model.parameters())
print("repr", repr(model).replace("\n", "|").replace(" ", "_"))
print("params", n_params, total, len(list(model.named_modules())), len(model.state_dict()),
      [n for n, _ in model.named_buffers()][:4])

summary = []


def summary_hook(module, inputs, output):
    params = sum(p.numel() for p in module.parameters(recurse=False))
    summary.append(f"{module.__class__.__name__}:{list(output.shape)}:{params}")


handles = [m.register_forward_hook(summary_hook) for m in model.modules()
           if len(list(m.children())) == 0]
model.eval()
with torch.no_grad():
    batch0 = next(iter(DataLoader(val_set, batch_size=4)))
    model(batch0["cat"], batch0["num"])
for h in handles:
    h.remove()
print("summary", " ".join(summary), len(model._forward_hooks))


def evaluate(model, loader, criterion):
    model.eval()
    all_preds, all_labels, total_loss = [], [], 0.0
    with torch.no_grad():
        for batch in loader:
            cats = batch["cat"].to(device, non_blocking=True)
            nums = batch["num"].to(device, non_blocking=True)
            y = batch["label"].to(device, non_blocking=True)
            logits = model(cats, nums)
            total_loss += criterion(logits, y).item() * y.size(0)
            all_preds.append(logits.argmax(dim=1).cpu())
            all_labels.append(y.cpu())
    preds, targets = torch.cat(all_preds), torch.cat(all_labels)
    return total_loss / len(loader.dataset), preds, targets


def metrics(preds, targets, n_classes=3):
    acc = (preds == targets).float().mean().item()
    cm = torch.bincount(targets * n_classes + preds, minlength=n_classes ** 2)
    cm = cm.reshape(n_classes, n_classes)
    tp = cm.diag().float()
    precision = tp / cm.sum(dim=0).clamp(min=1)
    recall = tp / cm.sum(dim=1).clamp(min=1)
    f1 = torch.nan_to_num(2 * precision * recall / (precision + recall))
    return acc, cm, f1.mean().item()


criterion = nn.CrossEntropyLoss(weight=class_weights / class_weights.sum())
train_loader = DataLoader(train_set, batch_size=30, shuffle=False)
val_loader = DataLoader(val_set, batch_size=64)
optimizer = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=1e-5)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5,
                                                       patience=2)
tmpdir = tempfile.mkdtemp()
best_path = os.path.join(tmpdir, "best_model.pt")
best_loss, patience, bad_epochs, history = float("inf"), 4, 0, []
for epoch in range(25):
    model.train()
    running = 0.0
    it = tqdm(train_loader, desc=f"Epoch {epoch + 1}", leave=False, disable=True) if tqdm \
        else train_loader
    for batch in it:
        cats, nums = batch["cat"].to(device), batch["num"].to(device)
        y = batch["label"].to(device)
        optimizer.zero_grad()
        loss = criterion(model(cats, nums), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
        optimizer.step()
        running += loss.item() * cats.size(0)
        if tqdm:
            it.set_postfix(loss=f"{loss.item():.4f}")
    train_loss = running / len(train_loader.dataset)
    val_loss, preds, targets = evaluate(model, val_loader, criterion)
    scheduler.step(val_loss)
    history.append((train_loss, val_loss, optimizer.param_groups[0]["lr"]))
    if val_loss < best_loss:
        best_loss, best_epoch, bad_epochs = val_loss, epoch, 0
        torch.save(model.state_dict(), best_path)
    else:
        bad_epochs += 1
        if bad_epochs >= patience:
            break
model.load_state_dict(torch.load(best_path))
val_loss, preds, targets = evaluate(model, val_loader, criterion)
acc, cm, macro_f1 = metrics(preds, targets)
print("train", epoch, best_epoch, f([h[0] for h in history]), f([h[1] for h in history]),
      f([h[2] for h in history]), f(best_loss), f(val_loss))
print("metrics", f(acc), f(cm), f(macro_f1), f(scheduler.get_last_lr()),
      os.path.getsize(best_path) > 0, scheduler.num_bad_epochs, scheduler.best == min(
          h[1] for h in history))

# bf16 autocast inference and one autocast training step, dropout behaviour
with torch.no_grad(), torch.autocast(device_type="cpu", dtype=torch.bfloat16):
    logits_bf16 = model(batch0["cat"], batch0["num"])
amp_model = copy.deepcopy(model).train()
amp_dtypes = []
hook = amp_model.mlp[1].register_forward_hook(
    lambda m, i, o: amp_dtypes.extend(str(t.dtype).split(".")[-1] for t in (i[0], o)))
with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
    amp_logits = amp_model(batch0["cat"], batch0["num"])
    amp_loss = criterion(amp_logits, batch0["label"])
amp_loss.backward()
hook.remove()
amp_dtypes += [str(t.dtype).split(".")[-1] for t in (amp_logits, amp_loss,
                                                     amp_model.mlp[1].weight.grad,
                                                     amp_model.embs[0].weight.grad)]
drop = nn.Dropout(p=0.25)
ones = torch.ones(400)
dropped = drop(ones)
kept = dropped[dropped != 0]
drop.eval()
print("autocast", str(logits_bf16.dtype).split(".")[-1], torch.is_autocast_enabled("cpu"),
      amp_dtypes, f"{amp_loss:.2f}",
      " ".join(f"{v:.1f}" for v in logits_bf16.float().flatten().tolist()),
      torch.allclose(kept, torch.full_like(kept, 1 / 0.75)), 0.1 < (dropped == 0).float().mean()
      < 0.4, torch.equal(drop(ones), ones), logits_bf16.argmax(1).tolist() ==
      model(batch0["cat"], batch0["num"]).argmax(1).tolist())

# ---- a full checkpoint with the RNG state; resuming replays the same random draws -----------
ckpt_path = os.path.join(tmpdir, "checkpoint.pth")
torch.save({"epoch": epoch, "model_state_dict": model.state_dict(),
            "optimizer_state_dict": optimizer.state_dict(),
            "scheduler_state_dict": scheduler.state_dict(), "best_loss": best_loss,
            "rng_state": torch.get_rng_state(), "np_rng_state": np.random.get_state()},
           ckpt_path)
after_save = torch.rand(3)
with torch.random.fork_rng():
    torch.rand(5)                      # draws inside fork_rng leave the stream outside alone
after_fork = torch.rand(2)
resumed = torch.load(ckpt_path, weights_only=False)
torch.set_rng_state(resumed["rng_state"])
np.random.set_state(resumed["np_rng_state"])
replayed = torch.rand(3)
opt_resumed = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=1e-5)
opt_resumed.load_state_dict(resumed["optimizer_state_dict"])
sched_resumed = torch.optim.lr_scheduler.ReduceLROnPlateau(opt_resumed, mode="min")
sched_resumed.load_state_dict(resumed["scheduler_state_dict"])
rng_state = resumed["rng_state"]
print("checkpoint", resumed["epoch"], torch.equal(after_save, replayed),
      torch.equal(torch.rand(2), after_fork), str(rng_state.dtype).split(".")[-1],
      rng_state.dim(), f"{resumed['best_loss']:.4f}", sched_resumed.best == scheduler.best,
      opt_resumed.param_groups[0]["lr"],
      f"val_loss={torch.tensor(val_loss):.3f}|acc={torch.tensor(acc):.1%}",
      f"{torch.tensor(3)}", f"{(preds == targets).sum()}")

# ---- k-fold cross-validation: re-initialise from a deepcopy of the initial model ---------------
initial = init_(TabularNet([5, 3], 3))
k = 3
folds = np.array_split(np.arange(N), k)
fold_scores, fold_f1 = [], []
for fold, val_idx in enumerate(folds):
    train_idx = np.setdiff1d(np.arange(N), val_idx)
    m = copy.deepcopy(initial)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    tl = DataLoader(Subset(full, train_idx.tolist()), batch_size=40)
    vl = DataLoader(Subset(full, val_idx.tolist()), batch_size=40)
    for epoch in range(6):
        m.train()
        for batch in tl:
            opt.zero_grad()
            F.cross_entropy(m(batch["cat"], batch["num"]), batch["label"]).backward()
            opt.step()
        sched.step()
    vloss, p, t = evaluate(m, vl, nn.CrossEntropyLoss())
    fold_scores.append(vloss)
    fold_f1.append(metrics(p, t)[2])
reset = copy.deepcopy(initial)
reset.mlp[1].running_mean.fill_(3.0)
for layer in reset.modules():
    if hasattr(layer, "reset_parameters") and layer is not reset:
        layer.reset_parameters()
same = all(torch.equal(a, b) for a, b in zip(initial.parameters(), reset.parameters()))
print("kfold", f(fold_scores), f(fold_f1), f(np.mean(fold_scores)), f(np.std(fold_scores)),
      same, f(reset.mlp[1].running_mean.sum()), f(reset.mlp[1].weight.sum()),
      int(reset.mlp[1].num_batches_tracked), f(initial.embs[0].weight.sum()))


# ---- text: hand-built vocabulary, pad_sequence collate, packed LSTM ----------------------------
corpus = [("the movie was great and fun", 1), ("terrible plot and bad acting", 0),
          ("i loved the acting", 1), ("bad movie", 0), ("great fun great cast", 1),
          ("the plot was boring and bad", 0), ("fun", 1), ("boring boring terrible", 0)]
counter = Counter(tok for text, _ in corpus for tok in text.split())
specials = ["<pad>", "<unk>"]
itos = specials + [w for w, c in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
                   if c >= 1]
stoi = {w: i for i, w in enumerate(itos)}
PAD, UNK = stoi["<pad>"], stoi["<unk>"]


def encode(text):
    return [stoi.get(tok, UNK) for tok in text.lower().split()]


class TextDataset(Dataset):
    def __init__(self, pairs):
        self.pairs = pairs

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        text, label = self.pairs[i]
        return torch.tensor(encode(text), dtype=torch.long), label


def collate_batch(batch):
    seqs, ys = zip(*batch)
    lengths = torch.tensor([len(s) for s in seqs])
    padded = pad_sequence(seqs, batch_first=True, padding_value=PAD)
    return padded, lengths, torch.tensor(ys, dtype=torch.float32)


class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size, emb=6, hidden=5):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb, padding_idx=PAD)
        self.lstm = nn.LSTM(emb, hidden, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, 1)

    def forward(self, x, lengths):
        e = self.embedding(x)
        packed = pack_padded_sequence(e, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        h = torch.cat([h[-2], h[-1]], dim=1)
        return self.fc(h).squeeze(1)


text_loader = DataLoader(TextDataset(corpus), batch_size=4, collate_fn=collate_batch)
xb, lb, yb = next(iter(text_loader))
net = init_(LSTMClassifier(len(itos)))
with torch.no_grad():
    net.embedding.weight[PAD].zero_()
opt = torch.optim.AdamW(net.parameters(), lr=0.05)
text_losses = []
for epoch in range(8):
    net.train()
    total = 0.0
    for x, lengths, y in text_loader:
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(net(x, lengths), y)
        loss.backward()
        opt.step()
        total += loss.item()
    text_losses.append(total / len(text_loader))
net.eval()
with torch.no_grad():
    probs = torch.sigmoid(net(*collate_batch([TextDataset([("great fun", 1)])[0],
                                               TextDataset([("unseen bad words", 0)])[0]])[:2]))
print("text", len(itos), itos[:6], xb.shape[0], xb.shape[1], lb.tolist(), xb[3].tolist(),
      encode("great unknownword"), f(text_losses), f(probs), (probs > 0.5).long().tolist(),
      f(net.embedding.weight[PAD].abs().sum()))
