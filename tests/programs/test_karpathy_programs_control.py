"""The control: nanoGPT, minGPT and makemore of test_karpathy_programs.py, with the same data,
flags and checks, on torch (slow-marked); and one run across the two: a checkpoint torch's
nanoGPT wrote, sampled greedily by sample.py on ember and on torch, gives the same text."""
import os

import pytest

from tests.programs.test_karpathy_programs import (NANOGPT_SMALL, PROGRAMS, _copy, play_text,
                                                   run, run_program, write_shakespeare_char)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_on_torch(name, tmp_path):
    pytest.importorskip("torch")
    run_program(name, "torch", tmp_path)


@pytest.mark.slow
def test_nanogpt_sample_of_torchs_checkpoint_is_torchs_text_on_ember(tmp_path):
    """sample.py with top_k=1 (greedy: multinomial over one nonzero probability) reads the
    checkpoint torch's train.py saved (model_args, the state dict) and generates exactly
    torch's characters on ember: the model, top-k masking and sampling agree."""
    pytest.importorskip("torch")
    root = _copy("nanoGPT", tmp_path)
    write_shakespeare_char(os.path.join(root, "data", "shakespeare_char"), play_text(400))
    run("torch", root, "train.py", ["config/train_shakespeare_char.py"] + NANOGPT_SMALL + [
        "--max_iters=20"])
    args = ["--out_dir=out-shakespeare-char", "--device=cpu", "--num_samples=2",
            "--max_new_tokens=60", "--top_k=1"]
    marker = "Loading meta from data/shakespeare_char/meta.pkl...\n"
    texts = [run(backend, root, "sample.py", args).split(marker, 1)[1]
             for backend in ("torch", "ember")]
    assert texts[0].count("---------------\n") == 2
    assert texts[1] == texts[0]


# Run from a folder holding the three repositories' files: every model of the three programs,
# with the weights torch's run drew (saved to init_<name>.npz, the parameters perturbed so that
# the bigram's zero table and the zero biases mean something), trains five AdamW steps with
# clip_grad_norm_ on fixed batches (ignore_index=-1 targets included) and decodes greedily with
# top-k; it prints the losses, gradient norms and tokens.
STEP_FOR_STEP = r'''
import sys

import numpy as np
import torch

sys.path[:0] = ["nanoGPT", "minGPT", "makemore"]
import makemore as M                                   # noqa: E402
from mingpt.model import GPT as MinGPT                 # noqa: E402
from model import GPT as NanoGPT, GPTConfig           # noqa: E402

backend = sys.argv[1]
rng = np.random.default_rng(0)
X = rng.integers(0, 27, size=(8, 16))
Y = rng.integers(-1, 27, size=(8, 16))
cfg = M.ModelConfig(vocab_size=27, block_size=16, n_layer=2, n_head=2, n_embd=16, n_embd2=16)


def mingpt():
    c = MinGPT.get_default_config()
    c.model_type, c.n_layer, c.n_head, c.n_embd = None, 2, 2, 16
    c.vocab_size, c.block_size = 27, 16
    c.embd_pdrop = c.resid_pdrop = c.attn_pdrop = 0.0
    return MinGPT(c)


def nanogpt():
    return NanoGPT(GPTConfig(block_size=16, vocab_size=27, n_layer=2, n_head=2, n_embd=16,
                             dropout=0.0, bias=False))


class Train:
    weight_decay, learning_rate, betas = 0.1, 1e-2, (0.9, 0.95)


MODELS = {"transformer": lambda: M.Transformer(cfg), "bigram": lambda: M.Bigram(cfg),
          "mlp": lambda: M.MLP(cfg), "rnn": lambda: M.RNN(cfg, "rnn"),
          "gru": lambda: M.RNN(cfg, "gru"), "bow": lambda: M.BoW(cfg), "mingpt": mingpt,
          "nanogpt": nanogpt}
for name, make in MODELS.items():
    torch.manual_seed(0)
    model = make()
    path = f"init_{name}.npz"
    if backend == "torch":     # parameters perturbed, buffers (the causal masks) as they are
        params = dict(model.named_parameters())
        np.savez(path, **{k: v.detach().numpy() + (0.1 * rng.standard_normal(v.shape).astype(
            np.float32) if k in params else 0) for k, v in model.state_dict().items()})
    with np.load(path) as init:
        model.load_state_dict({k: torch.from_numpy(init[k]) for k in init.files})
    if name == "mingpt":
        opt = model.configure_optimizers(Train)
    elif name == "nanogpt":
        opt = model.configure_optimizers(0.1, 1e-2, (0.9, 0.99), "cpu")
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01,
                                betas=(0.9, 0.99), eps=1e-8)
    steps = []
    for _ in range(5):
        _, loss = model(torch.from_numpy(X), torch.from_numpy(Y))
        model.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        steps.append(f"{loss.item():.5f}/{norm.item():.4f}")
    model.eval()
    start = torch.zeros(2, 1, dtype=torch.long)
    with torch.inference_mode():
        if name in ("mingpt", "nanogpt"):
            out = model.generate(start, 10, top_k=3, **({"do_sample": False} if name == "mingpt"
                                                        else {"temperature": 1.0}))
        else:
            out = M.generate(model, start, 10, top_k=3, do_sample=False)
    tokens = out[0].tolist() if name != "nanogpt" else []   # nanoGPT's generate samples
    print("STEP", name, " ".join(steps), tokens)
'''


@pytest.mark.slow
def test_models_on_torchs_weights_train_and_decode_as_torch_on_ember(tmp_path):
    """The same weights and batches give torch's losses, gradient norms (5 digits) and greedy
    tokens on ember, for each of makemore's six models, minGPT's and nanoGPT's GPT: the
    programs' numbers differ between the two libraries only through their random streams."""
    pytest.importorskip("torch")
    for repo in ("nanoGPT", "minGPT", "makemore"):
        _copy(repo, tmp_path)
    with open(tmp_path / "step_for_step.py", "w") as f:
        f.write(STEP_FOR_STEP)
    lines = {}
    for backend in ("torch", "ember"):
        out = run(backend, str(tmp_path), "step_for_step.py", [backend])
        lines[backend] = [line for line in out.splitlines() if line.startswith("STEP ")]
    assert len(lines["torch"]) == 8
    assert lines["ember"] == lines["torch"]
