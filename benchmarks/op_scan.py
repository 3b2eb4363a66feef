"""The single ops users' programs call, forward + backward: ember vs PyTorch eager, each library in
its own process, to find the ops far slower than torch's (not a README table: a scan).

Usage: python benchmarks/op_scan.py [--quick] [--repeats 1] [--only grid_sample,cdist,...]
       python benchmarks/op_scan.py --worker ember|torch --case cdist   (one process's side)

Each case builds its float32 inputs from one seeded NumPy generator (the same values in both
libraries) and times one call of the op and, where it has one, ``backward`` of the sum of its
result (``_harness.measure``). The table lists ember / torch per op, slowest first; nothing is
asserted. Shapes are those of small vision and sequence models: (16, 32, 32, 32) images,
(256, 512) matrices, (16, 64, 128) sequences.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402

SCRIPT = "op_scan.py"


def _inputs(L, np):
    rng = np.random.default_rng(0)

    def t(*s):
        return L.tensor(rng.standard_normal(s).astype(np.float32)).requires_grad_(True)

    def i(hi, *s):
        return L.tensor(rng.integers(0, hi, s))
    return {"x4": t(16, 32, 32, 32), "x3": t(32, 64, 128), "x2": t(256, 512),
            "seq": t(16, 64, 128), "idx": i(512, 256, 64), "tokens": i(1000, 32, 64),
            "grid": L.tensor(rng.uniform(-1, 1, (16, 32, 32, 2)).astype(np.float32))}


def _modules(L, case):
    """The module a case calls, built under a fixed seed (its own parameters in each library)."""
    nn = L.nn
    L.manual_seed(0)
    return {"embedding": lambda: nn.Embedding(1000, 128),
            "lstm": lambda: nn.LSTM(128, 128, batch_first=True),
            "gru": lambda: nn.GRU(128, 128, batch_first=True),
            "transformer_encoder_layer": lambda: nn.TransformerEncoderLayer(
                128, 4, 512, batch_first=True, dropout=0.0),
            "multihead_attention": lambda: nn.MultiheadAttention(128, 4, batch_first=True),
            "batch_norm2d": lambda: nn.BatchNorm2d(32), "group_norm": lambda: nn.GroupNorm(8, 32),
            "instance_norm2d": lambda: nn.InstanceNorm2d(32),
            "conv_transpose2d": lambda: nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1),
            "depthwise_conv2d": lambda: nn.Conv2d(32, 32, 3, padding=1, groups=32),
            }.get(case, lambda: None)()


CASES = {   # name: f(L, F, inputs, module) -> a tensor (its sum is backpropagated) or None
    "interpolate_bilinear": lambda L, F, v, m: F.interpolate(v["x4"], scale_factor=2,
                                                             mode="bilinear", align_corners=False),
    "interpolate_nearest": lambda L, F, v, m: F.interpolate(v["x4"], scale_factor=2),
    "grid_sample": lambda L, F, v, m: F.grid_sample(v["x4"], v["grid"], align_corners=False),
    "unfold": lambda L, F, v, m: F.unfold(v["x4"], 3, padding=1),
    "pad_reflect": lambda L, F, v, m: F.pad(v["x4"], (2, 2, 2, 2), mode="reflect"),
    "pad_replicate": lambda L, F, v, m: F.pad(v["x4"], (2, 2, 2, 2), mode="replicate"),
    "pixel_shuffle": lambda L, F, v, m: F.pixel_shuffle(v["x4"], 2),
    "avg_pool2d": lambda L, F, v, m: F.avg_pool2d(v["x4"], 3, 1, 1),
    "adaptive_avg_pool2d": lambda L, F, v, m: F.adaptive_avg_pool2d(v["x4"], 7),
    "adaptive_max_pool2d": lambda L, F, v, m: F.adaptive_max_pool2d(v["x4"], 7),
    "global_max_pool2d": lambda L, F, v, m: F.adaptive_max_pool2d(v["x4"], 1),
    "batch_norm2d": lambda L, F, v, m: m(v["x4"]),
    "group_norm": lambda L, F, v, m: m(v["x4"]),
    "instance_norm2d": lambda L, F, v, m: m(v["x4"]),
    "conv_transpose2d": lambda L, F, v, m: m(v["x4"]),
    "depthwise_conv2d": lambda L, F, v, m: m(v["x4"]),
    "embedding": lambda L, F, v, m: m(v["tokens"]),
    "lstm": lambda L, F, v, m: m(v["seq"])[0],
    "gru": lambda L, F, v, m: m(v["seq"])[0],
    "transformer_encoder_layer": lambda L, F, v, m: m(v["seq"]),
    "multihead_attention": lambda L, F, v, m: m(v["seq"], v["seq"], v["seq"])[0],
    "gather": lambda L, F, v, m: L.gather(v["x2"], 1, v["idx"]),
    "scatter_add": lambda L, F, v, m: L.zeros(256, 512).scatter_add(1, v["idx"],
                                                                    v["x2"][:, :64]),
    "cumsum": lambda L, F, v, m: L.cumsum(v["x2"], 1),
    "sort": lambda L, F, v, m: L.sort(v["x2"], 1)[0],
    "one_hot": lambda L, F, v, m: F.one_hot(v["tokens"], 1000),
    "softmax": lambda L, F, v, m: F.softmax(v["x3"], -1),
    "log_softmax_dim1": lambda L, F, v, m: F.log_softmax(v["x3"], 1),
    "cross_entropy_label_smoothing": lambda L, F, v, m: F.cross_entropy(
        v["x2"], v["idx"][:, 0], label_smoothing=0.1),
    "binary_cross_entropy_with_logits": lambda L, F, v, m: F.binary_cross_entropy_with_logits(
        v["x2"], (v["x2"] > 0).float()),
    "cdist": lambda L, F, v, m: L.cdist(v["x2"][:64], v["x2"][64:192]),
    "einsum_bmm": lambda L, F, v, m: L.einsum("bij,bjk->bik", v["x3"], v["x3"].transpose(1, 2)),
    "repeat_interleave": lambda L, F, v, m: L.repeat_interleave(v["x3"], 2, dim=1),
    "topk": lambda L, F, v, m: L.topk(v["x2"], 10, 1)[0],
    "norm": lambda L, F, v, m: L.norm(v["x3"], dim=-1),
    "trunc_normal_init": lambda L, F, v, m: L.nn.init.trunc_normal_(L.empty(3072, 768),
                                                                    std=0.02),
}


def worker(lib, case, opts):
    import numpy as np
    L = __import__("ember" if lib == "ember" else "torch")
    v = _inputs(L, np)
    m = _modules(L, case)
    fn = CASES[case]

    def step():
        y = fn(L, L.nn.functional, v, m)
        if y.requires_grad:
            y.sum().backward()
    return {"lib": lib, "case": case, "info": H.library_info(lib), **H.measure(step, lib, opts)}


def collect(opts, machine, log=None, only=None):
    cases = list(only or (("cdist", "pad_reflect") if opts.quick else CASES))
    cols = {"ember": ("ember", None), "torch": ("torch", None)}
    return H.run_matrix(SCRIPT, cases, cols, opts, log)


def render(res):
    rows = []
    for case, cols in res.items():
        e, t = H.metric(cols.get("ember", []), "median"), H.metric(cols.get("torch", []), "median")
        rows.append((e["median"] / t["median"] if e and t else float("inf"), case, e, t))
    rows.sort(key=lambda r: -r[0])
    return {"op_scan": H.table(["op, forward + backward", "ember", "torch", "ratio"],
                               [[f"`{case}`", H.cell(e), H.cell(t), H.ratio(e, t)]
                                for _, case, e, t in rows])}


def main():
    H.script_main(__doc__, "op_scan", worker, collect, render, tuple(CASES))


if __name__ == "__main__":
    main()
