"""The networks users bring: a GPT training step and torchvision's ResNet-18 / ResNet-50 at
224x224, ember vs PyTorch eager, each library in its own process.

Usage: python benchmarks/networks.py [--quick] [--repeats 3]
                                     [--only gpt_manual,gpt_sdpa,resnet18,resnet50]
       python benchmarks/networks.py --worker ember|torch --case resnet18   (one process's side)

Cases:
  gpt_manual  the nanoGPT-shaped training step of benchmarks/gpt_step.py (4 layers, width 128,
              4 heads, block 64, batch 16, exact GELU, AdamW, ``clip_grad_norm_``), attention as
              masked softmax
  gpt_sdpa    the same with ``F.scaled_dot_product_attention(is_causal=True)``
              (gpt_manual also runs ``ember_compiled`` and ``torch_compiled``: the whole step
              through ``ember.compile`` / ``torch.compile``, their first three calls reported)
  resnet18    torchvision's ResNet-18 (the torchvision stand-in of tests/programs/standins, whose
  resnet50    module names and definitions are torchvision's; ember runs the very same file with
              ``import torch`` giving ember, as the pytorch/examples programs do), with its
              generated ``weights="DEFAULT"``: inference at batch 1 (eval; ember ``no_grad``,
              torch ``inference_mode``) and a training step at batch 8 (train mode,
              cross-entropy, SGD momentum), 3x224x224 inputs
Both libraries start from the same weights (GPT: ``_harness.seeded_array`` per parameter name);
the first loss and the inference outputs are compared. Timing as ``_harness.measure``; nothing is
asserted. See benchmarks/run_all.py for the README tables (``gpt``, ``resnet``).
"""
import copy
import inspect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402

SCRIPT = "networks.py"
CASES = ("gpt_manual", "gpt_sdpa", "resnet18", "resnet50")
QUICK_CASES = ("gpt_manual", "resnet18")
PROGRAMS = os.path.join(H.ROOT, "tests", "programs")
GPT_LABELS = {"gpt_manual": "manual attention (masked softmax)",
              "gpt_sdpa": "`F.scaled_dot_product_attention(is_causal=True)`"}
COMPILED_CASES = ("gpt_manual",)   # with ember.compile and torch.compile columns
RESNET_LABELS = {"resnet18": "ResNet-18", "resnet50": "ResNet-50"}
TRAIN_BATCH = 8


def torchvision_models(lib):
    """The torchvision stand-in's ``models`` module, on ``lib`` (for ember through the
    ``import torch`` alias the pytorch/examples programs run under)."""
    sys.path.insert(0, os.path.join(PROGRAMS, "standins"))
    if lib.startswith("ember"):
        sys.path.insert(0, os.path.join(PROGRAMS, "alias"))
        import torch_alias
        torch_alias.install()
    import torchvision.models
    return torchvision.models


def _library(lib):
    if lib.startswith("ember"):
        import ember
        return ember, ember.tensor, ember.no_grad
    import torch
    return torch, torch.from_numpy, torch.inference_mode


def gpt_worker(lib, case, opts):
    """The training step of gpt_step.py, its parameters set to the seeded values (the same in
    both libraries: gpt_step seeds each library's own generator)."""
    from gpt_step import build
    L, to_tensor, _ = _library(lib)
    step = build("ember" if lib.startswith("ember") else "torch", case.split("_", 1)[1])
    model = inspect.getclosurevars(step).nonlocals.get("model")
    if model is not None:
        with L.no_grad():
            for name, p in model.named_parameters():
                p.copy_(to_tensor(H.seeded_array(name, tuple(p.shape))))
    losses = []
    out = {}
    if lib.endswith("_compiled"):
        step = H.compiled(lib, step)
        out["first_calls"], loss = H.first_calls(step)
        losses.append(float(loss.item()))

    def timed():
        loss = step()
        if not losses:
            losses.append(float(loss.item()))
    out["train"] = H.measure(timed, lib, opts)
    out["loss"] = losses if model is not None else None
    return out


def resnet_worker(lib, case, opts):
    """Inference at batch 1, then training steps at batch 8, on the same model."""
    import numpy as np
    L, to_tensor, inference = _library(lib)
    model = getattr(torchvision_models(lib), case)(weights="DEFAULT")
    rng = np.random.default_rng(0)
    x1 = to_tensor(rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
    x8 = to_tensor(rng.standard_normal((TRAIN_BATCH, 3, 224, 224)).astype(np.float32))
    y8 = to_tensor(rng.integers(0, 1000, TRAIN_BATCH))
    out = {}
    model.eval()
    with inference():
        out["infer_1"] = H.measure(lambda: model(x1), lib, opts)
        out["sample"] = H.sample(model(x1).numpy())
    model.train()
    opt = L.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    losses = []

    def step():
        opt.zero_grad()
        loss = L.nn.functional.cross_entropy(model(x8), y8)
        loss.backward()
        opt.step()
        if not losses:
            losses.append(float(loss.item()))
    out["train_8"] = H.measure(step, lib, opts)
    out["loss"] = losses
    return out


def worker(lib, case, opts):
    out = {"lib": lib, "case": case, "info": H.library_info(lib)}
    out.update((gpt_worker if case.startswith("gpt") else resnet_worker)(lib, case, opts))
    return out


# ----------------------------------------------------------------------------- runner
def collect(opts, machine, log=None, only=None):
    cases = list(only or (QUICK_CASES if opts.quick else CASES))
    opts = copy.copy(opts)
    opts.timeout = max(opts.timeout, 300 if opts.quick else 900)   # ResNet-50 training steps
    cols = {"ember": ("ember", None), "torch": ("torch", None),
            "ember_compiled": ("ember_compiled", None), "torch_compiled": ("torch_compiled", None)}
    plan = {c: cases for c in ("ember", "torch")}
    plan.update({c: [k for k in cases if k in COMPILED_CASES]
                 for c in ("ember_compiled", "torch_compiled")})
    return H.run_matrix(SCRIPT, plan, cols, opts, log)


def _same(cols, key):
    return {True: "yes", False: "**no**", None: "-"}[
        H.agree([{"sample": r.get(key)} for c in cols.values() for r in c])]


def render(res):
    out = {}
    rows = []
    for case, cols in res.items():
        if not case.startswith("gpt"):
            continue
        e, t = cols.get("ember", []), cols.get("torch", [])
        em, tm = H.metric(e, "train", "median"), H.metric(t, "train", "median")
        ec = H.metric(cols.get("ember_compiled", []), "train", "median")
        tc = H.metric(cols.get("torch_compiled", []), "train", "median")
        rows.append([GPT_LABELS[case], H.cell(em), H.cell(tm), H.ratio(em, tm),
                     H.cell(H.metric(e, "train", "first")), H.cell(H.metric(t, "train", "first")),
                     H.cell(ec), H.ratio(ec, tm) if ec else "", H.cell(tc),
                     H.ratio(ec, tc) if ec and tc else "",
                     H.first_calls_cell(cols.get("ember_compiled", [])),
                     H.first_calls_cell(cols.get("torch_compiled", [])), _same(cols, "loss")])
    if rows:
        out["gpt"] = H.table(["attention", "ember", "torch", "ratio", "ember 1st step",
                              "torch 1st step", "ember.compile", "ratio to torch",
                              "torch.compile", "ember.compile / torch.compile",
                              "ember.compile 1st / 2nd call", "torch.compile 1st / 2nd call",
                              "same 1st loss"], rows)
    rows = []
    for case, cols in res.items():
        if case.startswith("gpt"):
            continue
        e, t = cols.get("ember", []), cols.get("torch", [])
        ei, ti = H.metric(e, "infer_1", "median"), H.metric(t, "infer_1", "median")
        et, tt = H.metric(e, "train_8", "median"), H.metric(t, "train_8", "median")
        rows.append([RESNET_LABELS[case], H.cell(ei), H.cell(ti), H.ratio(ei, ti), H.cell(et),
                     H.cell(tt), H.ratio(et, tt), _same(cols, "sample"), _same(cols, "loss")])
    if rows:
        out["resnet"] = H.table(["model (224x224)", "inference batch 1: ember", "torch", "ratio",
                                 f"training step batch {TRAIN_BATCH}: ember", "torch", "ratio",
                                 "same outputs", "same 1st loss"], rows)
    return out


def main():
    H.script_main(__doc__, "networks", worker, collect, render, CASES)


if __name__ == "__main__":
    main()
