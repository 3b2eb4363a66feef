"""Andrej Karpathy's nanoGPT, minGPT and makemore, run unchanged on ember through the ``torch``
-> ``ember`` import alias (run_program.py); test_karpathy_programs_control.py runs the same on
torch (slow; a file of its own, so that ``--dist loadfile`` gives it another worker).

The programs are vendored byte-identical under karpathy/<repository>/ (karpathy/SOURCE.md pins
the commits and lists each file's git blob id, which the test checks). Each run copies its
repository into its own folder under tmp_path and runs there in a subprocess, with the small
flags and config overrides the program offers, under a hard timeout; the data the programs
download are replaced by small generated data in the same formats (nanoGPT's train.bin, val.bin
and meta.pkl as data/shakespeare_char/prepare.py writes them; chargpt's input.txt), makemore
reads its own vendored names.txt, and nanoGPT's sample.py imports tiktoken, which the
network-free stand-in in standins/ provides (a character-level dataset never uses it).
Random streams differ between ember and torch (ember's generator is not torch's), so the checks
are about behaviour: the printed losses are finite and go down, evaluations, checkpoints,
samples and logs come out as the programs write them."""
import json
import math
import os
import pickle
import random
import re
import shutil

import numpy as np
import pytest

from tests.programs import vendored
from tests.programs.test_pytorch_examples import run

HERE = os.path.dirname(os.path.abspath(__file__))
KARPATHY = os.path.join(HERE, "karpathy")
SOURCE_MD = os.path.join(KARPATHY, "SOURCE.md")
NUMBER = r"([-\d.naif]+)"


def _source_table():
    """{(repository, path): git blob id} from SOURCE.md."""
    return {(repo, path): blob for repo, path, blob in vendored.source_rows(SOURCE_MD)}


def _copy(repo, tmp_path):
    """A fresh copy of karpathy/<repo> under tmp_path, each file checked against SOURCE.md."""
    table = _source_table()
    dest = os.path.join(str(tmp_path), repo)
    shutil.copytree(os.path.join(KARPATHY, repo), dest,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for (r, path), blob in table.items():
        if r == repo:
            with open(os.path.join(dest, path), "rb") as f:
                assert vendored.blob_id(f.read()) == blob, f"{repo}/{path} differs from SOURCE.md"
    return dest


def play_text(speeches, seed=0):
    """A small play in tiny-shakespeare's layout ("NAME:" then the speech, a blank line
    between speeches), from a few names and words, so that a character model has patterns to
    learn; some speeches open with chargpt's prompt "O God, O God!"."""
    rng = random.Random(seed)
    names = ["ROMEO", "JULIET", "MERCUTIO", "NURSE"]
    words = ("thou art my love and the night is fair but what light through yonder window "
             "breaks").split()
    parts = []
    for _ in range(speeches):
        line = " ".join(rng.choice(words) for _ in range(rng.randint(4, 9))).capitalize()
        cry = "O God, O God! " if rng.random() < 0.2 else ""
        parts.append(f"{rng.choice(names)}:\n{cry}{line}.\n")
    return "\n".join(parts)


def losses_go_down(values, window=5):
    """The mean of the last ``window`` losses is below the mean of the first ``window``."""
    assert len(values) >= 2 * window, values
    first, last = np.mean(values[:window]), np.mean(values[-window:])
    assert last < first, values


# --- nanoGPT ---------------------------------------------------------------------------------

def write_shakespeare_char(folder, text):
    """train.bin, val.bin (uint16 character ids, 90%/10%) and meta.pkl (vocab_size, itos,
    stoi), as nanoGPT's data/shakespeare_char/prepare.py writes them."""
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    n = len(text)
    os.makedirs(folder, exist_ok=True)
    for name, part in (("train", text[:int(n * 0.9)]), ("val", text[int(n * 0.9):])):
        np.array([stoi[c] for c in part], dtype=np.uint16).tofile(os.path.join(folder,
                                                                              name + ".bin"))
    with open(os.path.join(folder, "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": itos, "stoi": stoi}, f)
    return chars


NANOGPT_ITER = r"iter (\d+): loss " + NUMBER + r", time [\d.]+ms, mfu -?[\d.]+%"
NANOGPT_EVAL = r"step (\d+): train loss " + NUMBER + r", val loss " + NUMBER
NANOGPT_SMALL = ["--device=cpu", "--compile=False", "--eval_iters=4", "--eval_interval=10",
                 "--n_layer=2", "--n_head=2", "--n_embd=32", "--block_size=32", "--batch_size=8",
                 "--log_interval=1", "--warmup_iters=5", "--lr_decay_iters=40",
                 "--learning_rate=1e-2"]


def _nanogpt(backend, tmp_path):
    root = _copy("nanoGPT", tmp_path)
    chars = write_shakespeare_char(os.path.join(root, "data", "shakespeare_char"),
                                   play_text(400))
    config = "config/train_shakespeare_char.py"
    out = run(backend, root, "train.py", [config] + NANOGPT_SMALL + ["--max_iters=30"])
    assert f"found vocab_size = {len(chars)} (inside data/shakespeare_char/meta.pkl)" in out
    assert "using fused AdamW: False" in out and "num decayed parameter tensors: 10" in out
    iters = re.findall(NANOGPT_ITER, out)
    assert [int(i) for i, _ in iters] == list(range(31)), out[-3000:]
    losses = [float(v) for _, v in iters]
    assert all(map(math.isfinite, losses))
    losses_go_down(losses)
    evals = [(int(s), float(t), float(v)) for s, t, v in re.findall(NANOGPT_EVAL, out)]
    assert [s for s, _, _ in evals] == [0, 10, 20, 30], out[-3000:]
    assert all(math.isfinite(t) and math.isfinite(v) for _, t, v in evals)
    assert evals[-1][2] < evals[0][2] and evals[-1][1] < evals[0][1], evals
    saved = [int(s) for s in re.findall(r"step (\d+): .*\nsaving checkpoint to "
                                        r"out-shakespeare-char\n", out)]
    assert saved and 0 not in saved, out[-3000:]
    saved_at = saved[-1]    # always_save_checkpoint=False: the last eval that improved val loss
    ckpt = os.path.join(root, "out-shakespeare-char", "ckpt.pt")
    assert os.path.exists(ckpt)

    # resume from the checkpoint (its model_args, optimizer state, iter_num, best_val_loss)
    out = run(backend, root, "train.py", [config] + NANOGPT_SMALL + [
        "--max_iters=40", "--init_from=resume"])
    assert "Resuming training from out-shakespeare-char" in out
    iters = re.findall(NANOGPT_ITER, out)
    assert [int(i) for i, _ in iters] == list(range(saved_at, 41)), out[-3000:]
    resumed = [(int(s), float(t)) for s, t, _ in re.findall(NANOGPT_EVAL, out)]
    assert resumed[0][0] == saved_at and resumed[0][1] < evals[0][1], (resumed, evals)

    # sample from the checkpoint with the dataset's meta.pkl (top-k, temperature, multinomial)
    out = run(backend, root, "sample.py", [
        "--out_dir=out-shakespeare-char", "--device=cpu", "--num_samples=3",
        "--max_new_tokens=40", "--top_k=5", "--seed=7"])
    assert "Loading meta from data/shakespeare_char/meta.pkl..." in out
    text = out.split("Loading meta from data/shakespeare_char/meta.pkl...\n", 1)[1]
    samples = text.split("---------------\n")
    assert samples[-1] == "" and len(samples) == 4, out[-3000:]
    for sample in samples[:-1]:
        assert sample.startswith("\n") and len(sample) == 1 + 40 + 1, repr(sample)
        assert set(sample) <= set(chars), repr(sample)


# --- minGPT ----------------------------------------------------------------------------------

MINGPT_ITER = r"iter_dt [\d.]+ms; iter (\d+): train loss " + NUMBER


def _mingpt_run(backend, root, project, args):
    """projects/<project>/<project>.py from its folder, with the repository on PYTHONPATH (as
    minGPT's setup.py installs the ``mingpt`` package)."""
    return run(backend, root, f"projects/{project}/{project}.py", args,
               env={"PYTHONPATH": os.pathsep.join(
                   [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                             if p])})


def _mingpt_adder(backend, tmp_path):
    root = _copy("minGPT", tmp_path)
    # one-digit sums (100 problems: 80 train, 20 test), the trainer's default 4 data workers
    # over RandomSampler(replacement=True, num_samples=1e10) with pin_memory=True
    out = _mingpt_run(backend, root, "adder", [
        "--data.ndigit=1", "--trainer.max_iters=501", "--trainer.batch_size=16",
        "--trainer.learning_rate=5e-3"])
    assert "command line overwriting config attribute data.ndigit with 1" in out
    iters = re.findall(MINGPT_ITER, out)
    assert [int(i) for i, _ in iters] == list(range(0, 501, 10)), out[-3000:]
    losses = [float(v) for _, v in iters]
    assert all(map(math.isfinite, losses))
    losses_go_down(losses)
    scores = re.findall(r"(train|test) final score: (\d+)/(\d+) = ([\d.]+)% correct", out)
    assert [(s, int(n)) for s, _, n, _ in scores] == [("train", 80), ("test", 20)] * 2, scores
    assert int(scores[2][1]) > int(scores[0][1]), scores     # iteration 500 beats iteration 0
    work = os.path.join(root, "projects", "adder", "out", "adder")
    assert sorted(os.listdir(work)) == ["args.txt", "config.json", "model.pt"]
    with open(os.path.join(work, "config.json")) as f:
        config = json.load(f)
    assert config["trainer"]["max_iters"] == 501 and config["model"]["model_type"] == "gpt-nano"


def _mingpt_chargpt(backend, tmp_path):
    root = _copy("minGPT", tmp_path)
    text = play_text(150)
    with open(os.path.join(root, "projects", "chargpt", "input.txt"), "w") as f:
        f.write(text)
    out = _mingpt_run(backend, root, "chargpt", [
        "--data.block_size=32", "--model.model_type=gpt-nano", "--trainer.max_iters=31",
        "--trainer.batch_size=16", "--trainer.learning_rate=3e-3"])
    assert f"data has {len(text)} characters, {len(set(text))} unique." in out
    iters = re.findall(MINGPT_ITER, out)
    assert [int(i) for i, _ in iters] == [0, 10, 20, 30], out[-3000:]
    losses = [float(v) for _, v in iters]
    assert all(map(math.isfinite, losses)) and losses[-1] < losses[0], losses
    # the sample at iteration 0: the prompt and 500 characters drawn with top_k=10
    completion = re.search(r"iter 0: train loss [\d.]+\n(.*?)\nsaving model\n", out,
                           re.S).group(1)
    assert completion.startswith("O God, O God!") and len(completion) == 13 + 500
    assert set(completion) <= set(text)
    assert os.path.exists(os.path.join(root, "projects", "chargpt", "out", "chargpt",
                                       "model.pt"))


# --- makemore --------------------------------------------------------------------------------

MAKEMORE_STEP = r"step (\d+) \| loss " + NUMBER + r" \| step time [\d.]+ms"
MAKEMORE_EVAL = r"step 500 train loss: " + NUMBER + " test loss: " + NUMBER
MAKEMORE_TYPES = ["transformer", "bigram", "mlp", "rnn", "gru", "bow"]


def _tensorboard_scalars(folder):
    """{tag: [(step, value)]} of the event file the SummaryWriter left in ``folder``, read with
    tensorboard's own reader."""
    accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator")
    acc = accumulator.EventAccumulator(folder)
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]}


def _makemore(backend, tmp_path, model_type):
    root = _copy("makemore", tmp_path)
    size = ["--type", model_type, "--n-layer", "2", "--n-head", "2", "--n-embd", "16",
            "--n-embd2", "16"]
    # the default 4 data workers for one type; in-process loading for the others
    workers = [] if model_type == "bigram" else ["--num-workers", "0"]
    # 501 steps: the evaluation (under inference_mode), the TensorBoard scalars, the
    # checkpoint at step 500 and the samples at step 200 and 400
    out = run(backend, root, "makemore.py", ["-i", "names.txt", "-o", "out", "--max-steps",
                                             "501", "--batch-size", "16", "--learning-rate",
                                             "1e-2"] + size + workers)
    assert "number of examples in the dataset: 32033" in out
    assert "dataset determined that: vocab_size=27, block_size=16" in out
    steps = re.findall(MAKEMORE_STEP, out)
    assert [int(s) for s, _ in steps] == list(range(0, 501, 10)), out[-3000:]
    losses = [float(v) for _, v in steps]
    assert all(map(math.isfinite, losses))
    losses_go_down(losses)
    ((train_loss, test_loss),) = [tuple(map(float, m)) for m in re.findall(MAKEMORE_EVAL, out)]
    assert test_loss < math.log(27) and train_loss < math.log(27)   # beats a uniform guess
    assert out.count(" samples that are new:") == 2
    work = os.path.join(root, "out")
    assert "model.pt" in os.listdir(work)
    assert any(name.startswith("events.out.tfevents.") for name in os.listdir(work))
    scalars = _tensorboard_scalars(work)
    assert scalars["Loss/train"] == [(500, pytest.approx(train_loss))]
    assert scalars["Loss/test"] == [(500, pytest.approx(test_loss))]

    out = run(backend, root, "makemore.py", ["-i", "names.txt", "-o", "out", "--sample-only",
                                             "--top-k", "5", "--num-workers", "0"] + size)
    assert "resuming from existing model in the workdir" in out
    counts = [int(n) for n in re.findall(r"(\d+) samples that are (?:in train|in test|new):",
                                         out)]
    assert len(counts) == 3 and sum(counts) == 50, out[-3000:]


PROGRAMS = {
    "nanogpt": _nanogpt,
    "mingpt_adder": _mingpt_adder,
    "mingpt_chargpt": _mingpt_chargpt,
    **{f"makemore_{t}": (lambda t: lambda backend, tmp: _makemore(backend, tmp, t))(t)
       for t in MAKEMORE_TYPES},
}


def run_program(name, backend, tmp_path):
    PROGRAMS[name](backend, tmp_path)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program(name, tmp_path):
    run_program(name, "ember", tmp_path)


def test_nanogpt_with_its_default_compile_trains_as_eager(tmp_path):
    """nanoGPT's train.py as its defaults run it, ``compile=True`` (``torch.compile(model)``,
    which the alias makes ``ember.compile``): it prints that it compiles, trains, and its
    printed losses are eager's (same seed, same data; 4 decimals as printed)."""
    losses = {}
    for flag in ("True", "False"):
        root = _copy("nanoGPT", tmp_path / flag)
        write_shakespeare_char(os.path.join(root, "data", "shakespeare_char"), play_text(400))
        args = [a if a != "--compile=False" else f"--compile={flag}" for a in NANOGPT_SMALL]
        out = run("ember", root, "train.py", ["config/train_shakespeare_char.py"] + args +
                  ["--max_iters=12"])
        assert ("compiling the model..." in out) == (flag == "True"), out[-3000:]
        losses[flag] = [float(v) for _, v in re.findall(NANOGPT_ITER, out)]
        assert len(losses[flag]) == 13 and all(map(math.isfinite, losses[flag])), out[-3000:]
    np.testing.assert_allclose(losses["True"], losses["False"], rtol=0, atol=2e-4)
    losses_go_down(losses["True"])


def test_vendored_files_are_the_upstream_files():
    """Every vendored file is listed in SOURCE.md with its upstream git blob id, and every
    listed file is there; each repository keeps its LICENSE."""
    repos = sorted(d for d in os.listdir(KARPATHY) if os.path.isdir(os.path.join(KARPATHY, d))
                   and d != "__pycache__")
    assert repos == ["makemore", "minGPT", "nanoGPT"]
    files = {(repo, path): blob for repo in repos
             for path, blob in vendored.file_blobs(os.path.join(KARPATHY, repo)).items()}
    assert files == _source_table()
    assert all((repo, "LICENSE") in files for repo in ("nanoGPT", "minGPT", "makemore"))
    with open(SOURCE_MD, encoding="utf8") as f:
        commits = re.findall(r"\| https://github.com/karpathy/(\w+) \| `([0-9a-f]{40})` \|",
                             f.read())
    assert sorted(r for r, _ in commits) == ["makemore", "minGPT", "nanoGPT"]


def test_play_text_has_chargpts_prompt_and_tiny_shakespeares_layout():
    text = play_text(150)
    assert "O God, O God!" in text and text.startswith(("ROMEO:\n", "JULIET:\n", "MERCUTIO:\n",
                                                         "NURSE:\n"))
    assert text == play_text(150) and len(set(text)) >= 10    # chargpt samples top_k=10


def test_tiktoken_standin_imports_and_refuses_every_encoding(monkeypatch):
    """sample.py's ``import tiktoken`` succeeds against the stand-in; asking it for an
    encoding (which the real package downloads) raises ConnectionError saying why."""
    import sys
    monkeypatch.syspath_prepend(os.path.join(HERE, "standins"))
    monkeypatch.delitem(sys.modules, "tiktoken", raising=False)
    import tiktoken
    try:
        assert tiktoken.__version__ == "0.0-standin"
        with pytest.raises(ConnectionError, match="no network.*'gpt2' BPE ranks"):
            tiktoken.get_encoding("gpt2")
        with pytest.raises(ConnectionError, match="no network"):
            tiktoken.encoding_for_model("gpt-4")
    finally:
        del sys.modules["tiktoken"]
