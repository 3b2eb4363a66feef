"""Community programs' training steps: Karpathy's nanoGPT, minGPT and makemore, their own model
files and training loops, ember (through ``import torch``) vs PyTorch eager, one library per
process.

Usage: python benchmarks/programs.py [--quick] [--repeats 3] [--only nanogpt,mingpt,makemore]
       python benchmarks/programs.py --worker ember|torch --case nanogpt   (one process's side)

Each case imports the program's vendored, unchanged source (``tests/programs/karpathy/``); ember
runs it with ``import torch`` giving ember (``tests/programs/alias``), as the program tests do.
One step is the program's own training-loop body, with the program's optimizer settings:
  nanogpt   ``model.py``'s GPT at the README's CPU settings for ``train_shakespeare_char``
            (4 layers, 4 heads, width 128, block 64, batch 12, no dropout, no biases,
            vocabulary 65): forward, backward, ``clip_grad_norm_(1.0)``, its
            ``configure_optimizers`` AdamW (lr 1e-3, betas (0.9, 0.99), weight decay 0.1) step,
            ``zero_grad(set_to_none=True)`` (train.py's loop on the CPU: its float16 GradScaler
            is disabled there)
  mingpt    ``mingpt/model.py``'s GPT as ``projects/chargpt`` configures it ('gpt-mini': 6 layers,
            6 heads, width 192, block 128, dropout 0.1, batch 64, vocabulary 65): the Trainer's
            loop body (forward, ``zero_grad(set_to_none=True)``, backward, clip 1.0, AdamW lr
            5e-4 betas (0.9, 0.95) weight decay 0.1 from ``configure_optimizers``)
  makemore  ``makemore.py``'s Transformer at its defaults (4 layers, 4 heads, width 64, batch 32)
            on batches of its own ``names.txt`` dataset (block 16, vocabulary 27, targets padded
            with -1): forward, ``zero_grad(set_to_none=True)``, backward, AdamW (lr 5e-4, betas
            (0.9, 0.99), eps 1e-8, weight decay 0.01) step
Both libraries start from the same weights (``_harness.seeded_array`` per parameter name) and
batches; the first loss (eval mode, no dropout) is compared. Timing as ``_harness.measure``;
nothing is asserted. See benchmarks/run_all.py for the README table (``programs``).
"""
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402

SCRIPT = "programs.py"
CASES = ("nanogpt", "mingpt", "makemore")
QUICK_CASES = ("makemore",)
KARPATHY = os.path.join(H.ROOT, "tests", "programs", "karpathy")
LABELS = {"nanogpt": "nanoGPT `train.py`, shakespeare_char at the README's CPU settings "
                     "(4 layers, width 128, block 64, batch 12)",
          "mingpt": "minGPT `chargpt` ('gpt-mini': 6 layers, width 192, block 128, batch 64, "
                    "dropout 0.1)",
          "makemore": "makemore `--type transformer` defaults (4 layers, width 64, batch 32, "
                      "names.txt)"}


def _torch(lib, *program_dirs):
    """The ``torch`` module a program imports in this process (ember through the alias)."""
    sys.path[:0] = [os.path.join(KARPATHY, d) for d in program_dirs]
    if lib.startswith("ember"):
        sys.path.insert(0, os.path.join(H.ROOT, "tests", "programs", "alias"))
        import torch_alias
        torch_alias.install()
    import torch
    return torch


def _seed(model, torch):
    """The parameters (not the buffers: the causal masks stay) of ``_harness.seeded_array``."""
    state = {k: torch.tensor(H.seeded_array(k, tuple(p.shape))) for k, p in model.named_parameters()}
    model.load_state_dict(state, strict=False)
    return model


def _tokens(torch, vocab, shape, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    return torch.tensor(rng.integers(0, vocab, shape), dtype=torch.long)


def _nanogpt(lib):
    torch = _torch(lib, "nanoGPT")
    from model import GPT, GPTConfig
    block, batch, vocab = 64, 12, 65
    model = GPT(GPTConfig(block_size=block, vocab_size=vocab, n_layer=4, n_head=4, n_embd=128,
                          dropout=0.0, bias=False))
    _seed(model, torch)
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
    x, y = _tokens(torch, vocab, (batch, block), 1), _tokens(torch, vocab, (batch, block), 2)

    def step():
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return torch, model, (x, y), step


def _mingpt(lib):
    torch = _torch(lib, "minGPT")
    from mingpt.model import GPT
    from mingpt.trainer import Trainer
    block, batch, vocab = 128, 64, 65
    config = GPT.get_default_config()
    config.model_type, config.vocab_size, config.block_size = "gpt-mini", vocab, block
    model = GPT(config)
    _seed(model, torch)
    train_config = Trainer.get_default_config()
    train_config.learning_rate = 5e-4
    opt = model.configure_optimizers(train_config)
    x, y = _tokens(torch, vocab, (batch, block), 1), _tokens(torch, vocab, (batch, block), 2)

    def step():
        _, loss = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), train_config.grad_norm_clip)
        opt.step()
    return torch, model, (x, y), step


def _makemore(lib):
    torch = _torch(lib, "makemore")
    import makemore
    with open(os.path.join(KARPATHY, "makemore", "names.txt")) as f:
        words = [w.strip() for w in f.read().splitlines() if w.strip()]
    # create_datasets' preprocessing, without its random train/test split
    train = makemore.CharDataset(words, sorted(set("".join(words))), max(map(len, words)))
    config = makemore.ModelConfig(vocab_size=train.get_vocab_size(),
                                  block_size=train.get_output_length(),
                                  n_layer=4, n_head=4, n_embd=64, n_embd2=64)
    model = makemore.Transformer(config)
    _seed(model, torch)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01, betas=(0.9, 0.99),
                            eps=1e-8)
    pairs = [train[i] for i in range(0, 32 * 97, 97)]          # a batch of 32 names
    x, y = torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])

    def step():
        _, loss = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return torch, model, (x, y), step


BUILD = {"nanogpt": _nanogpt, "mingpt": _mingpt, "makemore": _makemore}


def worker(lib, case, opts):
    out = {"lib": lib, "case": case, "info": H.library_info(lib)}
    torch, model, (x, y), step = BUILD[case](lib)
    model.eval()
    with torch.no_grad():
        out["loss"] = [float(model(x, y)[1])]
    model.train()
    out["train"] = H.measure(step, lib, opts)
    return out


# ----------------------------------------------------------------------------- runner
def collect(opts, machine, log=None, only=None):
    cases = list(only or (QUICK_CASES if opts.quick else CASES))
    opts = copy.copy(opts)
    opts.timeout = max(opts.timeout, 300 if opts.quick else 900)   # minGPT's steps
    cols = {"ember": ("ember", None), "torch": ("torch", None)}
    return H.run_matrix(SCRIPT, cases, cols, opts, log)


def render(res):
    rows = []
    for case, cols in res.items():
        e, t = cols.get("ember", []), cols.get("torch", [])
        em, tm = H.metric(e, "train", "median"), H.metric(t, "train", "median")
        same = H.agree([{"sample": r.get("loss")} for c in cols.values() for r in c])
        rows.append([LABELS[case], H.cell(em), H.cell(tm), H.ratio(em, tm),
                     H.cell(H.metric(e, "train", "first")), H.cell(H.metric(t, "train", "first")),
                     {True: "yes", False: "**no**", None: "-"}[same]])
    return {"programs": H.table(["program, one training step", "ember", "torch", "ratio",
                                 "ember 1st step", "torch 1st step", "same 1st loss"], rows)}


def main():
    H.script_main(__doc__, "programs", worker, collect, render, CASES)


if __name__ == "__main__":
    main()
