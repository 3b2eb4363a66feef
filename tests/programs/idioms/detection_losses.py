"""Detection and segmentation utilities: box IoU/GIoU with broadcasting, anchors via meshgrid,
box encode/decode, a hand-written NMS (argsort + while over boolean masks), IoU matching with
max/argmax, sigmoid focal and smooth-L1 losses, a tiny FPN head trained a few steps, top-k per
image, crops by indexing, a mask BCE over gathered channels, AP from sorted cumsum
precision/recall, a bincount confusion matrix, one_hot and per-class scatter_add_."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(13)
torch.set_default_dtype(torch.float64)
f = lambda t: " ".join(f"{v:.10f}" for v in torch.as_tensor(t).flatten().tolist())
NC, IMG = 3, 32


def box_area(b):
    return (b[:, 2] - b[:, 0]).clamp(min=0) * (b[:, 3] - b[:, 1]).clamp(min=0)


def box_iou(a, b):
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = box_area(a)[:, None] + box_area(b)[None, :] - inter
    return inter / union, union


def generalized_box_iou(a, b):
    iou, union = box_iou(a, b)
    lt = torch.minimum(a[:, None, :2], b[None, :, :2])
    rb = torch.maximum(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh.prod(dim=-1)
    return iou - (area - union) / area


def make_anchors(fh, fw, stride, sizes=(6.0, 12.0), ratios=(0.5, 1.0, 2.0)):
    ys, xs = torch.meshgrid(torch.arange(fh) * stride + stride / 2,
                            torch.arange(fw) * stride + stride / 2, indexing="ij")
    centers = torch.stack([xs, ys], dim=-1).reshape(-1, 1, 2).to(torch.float64)
    r = torch.tensor(ratios)
    s = torch.tensor(sizes)
    ws = (s[:, None] / r.sqrt()[None, :]).flatten()
    hs = (s[:, None] * r.sqrt()[None, :]).flatten()
    half = torch.stack([ws, hs], dim=-1)[None] / 2
    return torch.cat([centers - half, centers + half], dim=-1).reshape(-1, 4)


def encode(gt, anchors, weights=(10.0, 10.0, 5.0, 5.0)):
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    gw, gh = gt[:, 2] - gt[:, 0], gt[:, 3] - gt[:, 1]
    gx, gy = gt[:, 0] + 0.5 * gw, gt[:, 1] + 0.5 * gh
    wx, wy, ww, wh = weights
    return torch.stack([wx * (gx - ax) / aw, wy * (gy - ay) / ah,
                        ww * torch.log(gw / aw), wh * torch.log(gh / ah)], dim=1)


def decode(deltas, anchors, weights=(10.0, 10.0, 5.0, 5.0)):
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    dx, dy, dw, dh = deltas.unbind(-1)
    dw = torch.clamp(dw / weights[2], max=math.log(1000.0 / 16))
    dh = torch.clamp(dh / weights[3], max=math.log(1000.0 / 16))
    cx, cy = dx / weights[0] * aw + ax, dy / weights[1] * ah + ay
    w, h = torch.exp(dw) * aw, torch.exp(dh) * ah
    return torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=-1)


def nms(boxes, scores, thr):
    order = scores.argsort(descending=True)
    keep = []
    while order.numel() > 0:
        i = order[0]
        keep.append(i.item())
        if order.numel() == 1:
            break
        ious, _ = box_iou(boxes[i].unsqueeze(0), boxes[order[1:]])
        mask = ious[0] <= thr
        order = order[1:][mask]
    return torch.tensor(keep, dtype=torch.long)


def sigmoid_focal_loss(logits, targets, alpha=0.25, gamma=2.0, reduction="sum"):
    p = torch.sigmoid(logits)
    ce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce * (1 - p_t) ** gamma
    loss = (alpha * targets + (1 - alpha) * (1 - targets)) * loss
    return loss.sum() if reduction == "sum" else loss.mean()


# ---- geometry ----
def rand_boxes(n):
    xy = rng.uniform(0, IMG - 10, (n, 2))
    wh = rng.uniform(4, 12, (n, 2))
    return torch.from_numpy(np.concatenate([xy, xy + wh], 1))


gt = [rand_boxes(3), rand_boxes(2)]
gt_cls = [torch.tensor([0, 2, 1]), torch.tensor([1, 1])]
anchors = make_anchors(8, 8, 4)
iou, _ = box_iou(anchors, gt[0])
giou = generalized_box_iou(gt[0], gt[1])
rt = decode(encode(gt[0][[0, 1, 2, 0]], anchors[[5, 9, 20, 33]]), anchors[[5, 9, 20, 33]])
print("geometry", anchors.shape[0], f(anchors[[0, 7, 383]]), f(iou.max()), f(giou),
      f((rt - gt[0][[0, 1, 2, 0]]).abs().max() < 1e-9))


# ---- matching ----
def match(anchors, gtb, gtc, hi=0.4, lo=0.3):
    iou, _ = box_iou(anchors, gtb)
    best_iou, best_gt = iou.max(dim=1)
    labels = torch.full((anchors.shape[0],), -1, dtype=torch.long)
    labels[best_iou < lo] = NC  # background
    pos = best_iou >= hi
    labels[pos] = gtc[best_gt[pos]]
    force = iou.argmax(dim=0)  # every gt gets its best anchor
    labels[force] = gtc
    best_gt[force] = torch.arange(gtb.shape[0])
    return labels, best_gt


labs, idxs = zip(*(match(anchors, b, c) for b, c in zip(gt, gt_cls)))
pos_idx = torch.nonzero(labs[0] < NC, as_tuple=True)[0]
print("match", [int((l < NC).sum()) for l in labs], [int((l == -1).sum()) for l in labs],
      pos_idx.tolist(), torch.where(labs[1] == 1)[0].tolist())


# ---- tiny FPN detector ----
class TinyFPN(nn.Module):
    def __init__(self, A=6):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.c3 = nn.Conv2d(16, 16, 3, stride=2, padding=1)
        self.lat2, self.lat3 = nn.Conv2d(16, 8, 1), nn.Conv2d(16, 8, 1)
        self.smooth = nn.Conv2d(8, 8, 3, padding=1)
        self.cls = nn.Conv2d(8, A * NC, 1)
        self.reg = nn.Conv2d(8, A * 4, 1)
        self.mask = nn.Conv2d(8, NC, 1)

    def forward(self, x):
        c2 = F.relu(self.c2(F.relu(self.c1(x))))
        c3 = F.relu(self.c3(c2))
        p3 = self.lat3(c3)
        p2 = self.smooth(self.lat2(c2) + F.interpolate(p3, size=c2.shape[-2:], mode="nearest"))
        n = x.shape[0]
        cls = self.cls(p2).permute(0, 2, 3, 1).reshape(n, -1, NC)
        reg = self.reg(p2).permute(0, 2, 3, 1).reshape(n, -1, 4)
        return cls, reg, self.mask(p2)


net = TinyFPN()
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * 0.08))
opt = torch.optim.SGD(net.parameters(), lr=0.002, momentum=0.9, nesterov=True, weight_decay=1e-4)
images = torch.from_numpy(rng.standard_normal((2, 3, IMG, IMG)))
masks = torch.from_numpy(rng.random((2, NC, 8, 8)) > 0.5).to(torch.float64)
hist = []
for step in range(4):
    cls, reg, mlog = net(images)
    lc = lr = lm = 0.0
    for i in range(2):
        valid = labs[i] >= 0
        tgt = F.one_hot(labs[i][valid], NC + 1)[:, :NC].to(cls.dtype)
        npos = max(1, int((labs[i][valid] < NC).sum()))
        lc = lc + sigmoid_focal_loss(cls[i][valid], tgt) / npos
        pos = labs[i] < NC
        t = encode(gt[i][idxs[i][pos]], anchors[pos])
        lr = lr + F.smooth_l1_loss(reg[i][pos], t, beta=1 / 9, reduction="sum") / npos
        ch = gt_cls[i].view(-1, 1, 1, 1).expand(-1, 1, 8, 8)
        sel = mlog[i].unsqueeze(0).expand(len(gt_cls[i]), -1, -1, -1).gather(1, ch).squeeze(1)
        lm = lm + F.binary_cross_entropy_with_logits(sel, masks[i][gt_cls[i]])
    loss = lc + lr + lm
    opt.zero_grad()
    loss.backward()
    opt.step()
    hist += [loss.item(), lc.item(), lr.item()]
print("train", f(hist))

# ---- post-processing: top-k per image, decode, NMS ----
with torch.no_grad():
    cls, reg, mlog = net(images)
    dets = []
    for i in range(2):
        scores = cls[i].sigmoid().flatten()
        top_s, top_i = scores.topk(20)
        a_idx = torch.div(top_i, NC, rounding_mode="floor")
        c_idx = top_i % NC
        boxes = decode(reg[i][a_idx], anchors[a_idx]).clamp(0, IMG)
        k = nms(boxes + c_idx[:, None] * 100.0, top_s, 0.5)  # class-offset batched NMS
        dets.append((boxes[k], top_s[k], c_idx[k]))
print("nms", [len(d[1]) for d in dets], f(dets[0][1][:4]), dets[0][2][:6].tolist(),
      f(dets[1][0][:2]))

# ---- crops by indexing (ROI-align-free) ----
feat = torch.from_numpy(rng.standard_normal((2, 4, 16, 16)))
crops = []
for bi, b in enumerate(gt):
    for x0, y0, x1, y1 in (b / 2).floor().long().clamp(0, 15).tolist():
        c = feat[bi, :, y0:y1 + 1, x0:x1 + 1]
        crops.append(F.adaptive_max_pool2d(c, 2))
crops = torch.stack(crops)
print("crops", tuple(crops.shape), f(crops.sum()), f(crops.amax(dim=(0, 2, 3))))


# ---- AP from sorted scores ----
def average_precision(scores, is_tp, n_gt):
    order = torch.argsort(scores, descending=True, stable=True)
    tp = is_tp[order].to(torch.float64)
    ctp, cfp = torch.cumsum(tp, 0), torch.cumsum(1 - tp, 0)
    rec = ctp / n_gt
    prec = ctp / (ctp + cfp).clamp(min=1e-12)
    prec = torch.flip(torch.cummax(torch.flip(prec, [0]), 0).values, [0])
    rec = torch.cat([torch.zeros(1), rec])
    return ((rec[1:] - rec[:-1]) * prec).sum(), prec, rec


sc = torch.from_numpy(rng.random(12))
tp = torch.from_numpy(rng.random(12) > 0.4)
ap, prec, rec = average_precision(sc, tp, 9)
recall_pts = torch.linspace(0, 1, 11)
ip = torch.stack([prec[rec[1:] >= r].max() if (rec[1:] >= r).any() else torch.tensor(0.0)
                  for r in recall_pts])
print("ap", f(ap), f(ip.mean()), f(prec[:4]))

# ---- segmentation metrics ----
pred = torch.from_numpy(rng.integers(0, NC, (2, 6, 6)))
target = torch.from_numpy(rng.integers(0, NC, (2, 6, 6)))
target[0, 0, :3] = 255  # ignore index
valid = target != 255
cm = torch.bincount(target[valid] * NC + pred[valid], minlength=NC * NC).reshape(NC, NC)
inter = cm.diag()
iou_c = inter / (cm.sum(0) + cm.sum(1) - inter).clamp(min=1)
onehot = F.one_hot(pred, NC).permute(0, 3, 1, 2).to(torch.float64)
logits = torch.from_numpy(rng.standard_normal((2, NC, 6, 6)))
probs = logits.softmax(1)
t1h = F.one_hot(target.clamp(max=NC - 1), NC).permute(0, 3, 1, 2) * valid.unsqueeze(1)
dice = 1 - (2 * (probs * t1h).sum((0, 2, 3)) + 1) / (probs.sum((0, 2, 3)) + t1h.sum((0, 2, 3)) + 1)
ce = F.cross_entropy(logits, target, ignore_index=255, weight=torch.tensor([1.0, 2.0, 0.5]))
per_cls = torch.zeros(NC).scatter_add_(0, pred.flatten(), probs.amax(1).flatten())
counts = torch.zeros(NC, dtype=torch.long).index_put_((pred.flatten(),), torch.ones(72, dtype=torch.long), accumulate=True)
print("seg", cm.flatten().tolist(), f(iou_c), f(iou_c.nanmean()), f(dice), f(ce))
print("perclass", f(per_cls), counts.tolist(), f(onehot.mean((0, 2, 3))),
      torch.unique(pred, return_counts=True)[1].tolist())

# ---- per-class reductions and small utilities used around detectors ----
cls_of = torch.from_numpy(rng.integers(0, NC, 10))
conf = torch.from_numpy(rng.random(10))
best = torch.zeros(NC).scatter_reduce(0, cls_of, conf, reduce="amax", include_self=False)
mean = torch.zeros(NC).scatter_reduce(0, cls_of, conf, reduce="mean", include_self=False)
pairs = torch.combinations(torch.arange(4), r=2)
pair_iou = box_iou(gt[0][[0, 1, 2, 0]], gt[0][[0, 1, 2, 0]])[0][pairs[:, 0], pairs[:, 1]]
vals, inv, cnt = torch.unique_consecutive(cls_of.sort(stable=True).values, return_inverse=True,
                                          return_counts=True)
pooled, where = F.max_pool2d(feat[:1, :1, :4, :4], 2, return_indices=True)
print("extras", f(best), f(mean), f(pair_iou), vals.tolist(), cnt.tolist(),
      torch.argwhere(giou > 0.0).tolist(), f(torch.kthvalue(conf, 3).values),
      f(torch.histc(conf, bins=4, min=0, max=1)), f(F.max_unpool2d(pooled, where, 2).sum()),
      f(F.interpolate(feat[:1], size=(5, 7), mode="bicubic", align_corners=True).sum()),
      f(F.huber_loss(reg[0][:5], reg[1][:5], delta=0.5)), torch.isin(cls_of, torch.tensor([0, 2])).sum().item())
