"""The PyTorch example programs in examples/ run with a small configuration on ember and,
unchanged, on torch (EXAMPLE_BACKEND=torch picks the import): each test parses what the
program prints and checks that it learned (loss down, accuracy or reward up)."""
import math
import os
import re
import runpy
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples")
# the torch runs show the program is unchanged; they are slow-marked to keep the default run short
BACKENDS = ["ember", pytest.param("torch", marks=pytest.mark.slow)]
pytestmark = pytest.mark.filterwarnings(  # torch's advice on its own fast paths
    "ignore:enable_nested_tensor is True:UserWarning",
    "ignore:dropout option adds dropout after all but last:UserWarning")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """torch on one thread while an example runs (its spinning OpenMP workers crawl on a
    small, shared machine); restored afterwards."""
    try:
        import torch
    except ImportError:
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _load(script, backend, monkeypatch, tmp_path):
    """The example's module namespace, imported with the backend chosen by the environment
    variable, run from an empty working folder."""
    if backend == "torch":
        pytest.importorskip("torch")
    monkeypatch.setenv("EXAMPLE_BACKEND", backend)
    monkeypatch.syspath_prepend(EXAMPLES)
    monkeypatch.chdir(tmp_path)
    ns = runpy.run_path(os.path.join(EXAMPLES, script), run_name="example")
    assert ns["torch"].__name__ == backend
    return ns


def _floats(pattern, text):
    return [float(m) if not isinstance(m, tuple) else tuple(map(float, m))
            for m in re.findall(pattern, text)]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["ember", "torch"])
def test_mnist_adadelta_steplr(backend, monkeypatch, tmp_path, capsys):
    ns = _load("mnist.py", backend, monkeypatch, tmp_path)
    ns["main"](["--epochs", "2", "--train-size", "128", "--test-size", "64", "--batch-size",
                "32", "--test-batch-size", "64", "--log-interval", "2"])
    out = capsys.readouterr().out
    tests = _floats(r"Test set: Average loss: ([\d.]+), Accuracy: (\d+)/(\d+)", out)
    assert len(tests) == 2, out
    (loss1, _, _), (loss2, correct, total) = tests
    assert loss2 < loss1 and correct / total > 0.4, out
    assert len(_floats(r"Train Epoch: \d+ .*Loss: ([\d.]+)", out)) == 4


def _unigram_entropy(path):
    words = []
    with open(path, encoding="utf8") as f:
        for line in f:
            words += line.split() + ["<eos>"]
    p = np.array(list(Counter(words).values()), dtype=np.float64) / len(words)
    return float(-(p * np.log(p)).sum())


WLM = {"Transformer": ["--lr", "5", "--nlayers", "2"], "LSTM": ["--lr", "10", "--nlayers", "1"],
       "GRU": ["--lr", "20", "--nlayers", "1"], "RNN_TANH": ["--lr", "5", "--nlayers", "1"]}


@pytest.mark.parametrize("model,backend", [
    ("Transformer", "ember"), ("LSTM", "ember"), ("GRU", "ember"), ("RNN_TANH", "ember"),
    pytest.param("Transformer", "torch", marks=pytest.mark.slow),
    pytest.param("LSTM", "torch", marks=pytest.mark.slow)])
def test_word_language_model(model, backend, monkeypatch, tmp_path, capsys):
    """Every --model choice trains past the unigram baseline (a model that ignores context)
    within two short epochs; the best checkpoint is saved and reloaded for the test loss."""
    ns = _load("word_language_model.py", backend, monkeypatch, tmp_path)
    ns["main"](["--data", str(tmp_path / "data"), "--model", model, "--emsize", "32",
                "--nhid", "32", "--epochs", "2", "--bptt", "16", "--batch_size", "16",
                "--log-interval", "10", "--max-batches", "40", "--save",
                str(tmp_path / "model.pt")] + WLM[model])
    out = capsys.readouterr().out
    train = _floats(r"\| loss\s+([\d.]+) \| ppl", out)
    valid = _floats(r"valid loss\s+([\d.]+)", out)
    (test,) = _floats(r"test loss\s+([\d.]+)", out)
    assert len(train) == 6 and len(valid) == 2, out
    baseline = _unigram_entropy(tmp_path / "data" / "train.txt")
    assert test < baseline - 0.5 and min(valid) < baseline - 0.5, (baseline, out)
    assert abs(test - min(valid)) < 0.1 and (tmp_path / "model.pt").exists()


def test_word_language_model_rejects_an_unknown_model(monkeypatch, tmp_path):
    ns = _load("word_language_model.py", "ember", monkeypatch, tmp_path)
    with pytest.raises(ValueError, match="invalid option for `--model`"):
        ns["main"](["--data", str(tmp_path / "data"), "--model", "CNN", "--emsize", "8",
                    "--nhid", "8"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_vae(backend, monkeypatch, tmp_path, capsys):
    ns = _load("vae.py", backend, monkeypatch, tmp_path)
    ns["main"](["--epochs", "3", "--train-size", "256", "--test-size", "64", "--batch-size",
                "64", "--results", str(tmp_path / "results")])
    out = capsys.readouterr().out
    train = _floats(r"====> Epoch: \d+ Average loss: ([\d.]+)", out)
    test = _floats(r"====> Test set loss: ([\d.]+)", out)
    assert len(train) == len(test) == 3, out
    assert train[2] < train[0] and test[2] < test[1] < test[0], out
    with open(tmp_path / "results" / "sample_3.pgm", "rb") as f:
        assert f.read(12) == b"P5 224 224 2"  # 64 samples, 8 per row, 28x28 each


def _dcgan_lines(out):
    return _floats(r"Loss_D: ([\d.]+) Loss_G: ([\d.]+) D\(x\): ([\d.]+) "
                   r"D\(G\(z\)\): ([\d.]+) / ([\d.]+)", out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dcgan(backend, monkeypatch, tmp_path, capsys):
    """The discriminator learns to tell the blobs from the generator's output; checkpoints
    are written each epoch and training resumes from them (--netG / --netD)."""
    ns = _load("dcgan.py", backend, monkeypatch, tmp_path)
    args = ["--imageSize", "16", "--numImages", "256", "--batchSize", "32", "--nz", "16",
            "--ngf", "16", "--ndf", "16", "--outf", str(tmp_path), "--manualSeed", "1"]
    ns["main"](args + ["--niter", "2"])
    lines = _dcgan_lines(capsys.readouterr().out)
    assert len(lines) == 16
    assert all(math.isfinite(v) for line in lines for v in line)
    first, last = lines[0], lines[-1]
    assert last[0] < first[0] and last[2] > last[3] + 0.1 and last[2] > first[2]
    ns["main"](args + ["--niter", "1", "--dry-run", "--netG", str(tmp_path / "netG_epoch_1.pth"),
                       "--netD", str(tmp_path / "netD_epoch_1.pth")])
    (resumed,) = _dcgan_lines(capsys.readouterr().out)
    assert resumed[2] > resumed[3]  # the loaded discriminator still separates them
    assert np.load(tmp_path / "fake_samples_epoch_000.npy").shape == (32, 3, 16, 16)


def test_dcgan_64_is_pytorchs_network_on_both_backends(monkeypatch, tmp_path):
    """--imageSize 64 builds PyTorch's DCGAN layer for layer: the same state_dict keys and
    shapes on ember and on torch."""
    shapes = {}
    for backend in ("ember", "torch"):
        ns = _load("dcgan.py", backend, monkeypatch, tmp_path)
        g, d = ns["Generator"](1, 100, 64, 3), ns["Discriminator"](1, 64, 3)
        shapes[backend] = [{k: tuple(v.shape) for k, v in m.state_dict().items()}
                           for m in (g, d)]
    assert shapes["ember"] == shapes["torch"]
    gen, disc = shapes["ember"]
    assert gen["main.0.weight"] == (100, 512, 4, 4) and gen["main.12.weight"] == (64, 3, 4, 4)
    assert disc["main.11.weight"] == (1, 512, 4, 4) and len(gen) == 5 + 4 * 5


MODELS = [("dcgan.py", "Generator", (1, 100, 64, 3)), ("dcgan.py", "Discriminator", (1, 64, 3)),
          ("word_language_model.py", "TransformerModel", (50, 16, 2, 32, 2, 0.2)),
          ("word_language_model.py", "RNNModel", ("LSTM", 50, 16, 16, 2, 0.2, False)),
          ("word_language_model.py", "RNNModel", ("RNN_RELU", 50, 16, 16, 1, 0.2, True)),
          ("mnist.py", "Net", ()), ("vae.py", "VAE", ()), ("reinforce.py", "Policy", ()),
          ("actor_critic.py", "Policy", ())]


@pytest.mark.parametrize("script,cls,args", MODELS,
                         ids=[f"{s}:{c}:{i}" for i, (s, c, _) in enumerate(MODELS)])
def test_models_print_and_lay_out_as_on_torch(script, cls, args, monkeypatch, tmp_path):
    """Each example's model, built by the same code on both backends: print(model) and the
    state_dict (keys, shapes, dtypes) are torch's."""
    seen = {}
    for backend in ("ember", "torch"):
        ns = _load(script, backend, monkeypatch, tmp_path)
        m = ns[cls](*args)
        seen[backend] = (repr(m), [(k, tuple(v.shape), str(v.dtype).split(".")[-1])
                                   for k, v in m.state_dict().items()])
    assert seen["ember"][0] == seen["torch"][0]
    assert seen["ember"][1] == seen["torch"][1]
    if args and args[-1] is True:  # --tied: one Parameter, two state_dict entries, as torch
        m = ns[cls](*args)
        assert m.decoder.weight is m.encoder.weight
        assert len(list(m.parameters())) == len(seen["ember"][1]) - 1


def _rewards(out):
    return _floats(r"Episode \d+\tLast reward: ([\d.]+)\tAverage reward: ([\d.]+)", out)


@pytest.mark.parametrize("script", ["reinforce.py", "actor_critic.py"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_policy_gradient_on_cartpole(script, backend, monkeypatch, tmp_path, capsys):
    """The running reward after 30 episodes beats a random policy's (about 22 steps); on
    torch (its own random streams) the same program runs and reports."""
    ns = _load(script, backend, monkeypatch, tmp_path)
    ns["main"](["--episodes", "30"])
    rewards = _rewards(capsys.readouterr().out)
    assert len(rewards) == 3 and all(r >= 8 for r, _ in rewards)
    if backend == "ember":
        assert rewards[-1][1] > 25 and rewards[-1][1] > rewards[0][1]


def test_cartpole_environment():
    from importlib.util import module_from_spec, spec_from_file_location
    spec = spec_from_file_location("cartpole", os.path.join(EXAMPLES, "cartpole.py"))
    mod = module_from_spec(spec)
    spec.loader.exec_module(mod)
    env = mod.CartPoleEnv()
    s0, _ = env.reset(seed=3)
    assert s0.shape == (4,) and s0.dtype == np.float32 and np.all(np.abs(s0) <= 0.05)
    assert np.array_equal(env.reset(seed=3)[0], s0)
    steps = 0
    while True:  # always pushing right: the pole falls left within a few dozen steps
        s, r, terminated, truncated, _ = env.step(1)
        steps += 1
        if terminated or truncated:
            break
    assert terminated and 5 < steps < 100 and r == 1.0
    with pytest.raises(ValueError, match="action must be 0 or 1"):
        env.step(2)


def test_example_runs_as_a_script():
    """The command line entry (``if __name__ == '__main__'``), in a fresh interpreter."""
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "reinforce.py"), "--episodes",
                        "2", "--log-interval", "1"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "EXAMPLE_BACKEND": "ember"})
    assert r.returncode == 0, r.stderr
    assert len(_rewards(r.stdout)) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_dataloader_with_two_persistent_workers(backend, monkeypatch, tmp_path, capsys):
    ns = _load("dataloader_workers.py", backend, monkeypatch, tmp_path)
    ns["main"](["--epochs", "2", "--train-size", "256", "--batch-size", "32"])
    out = capsys.readouterr().out
    epochs = re.findall(r"Epoch \d+: loss ([\d.]+), train accuracy (\d+)/(\d+), "
                        r"loaded by \[(\d+), (\d+)\] \(main process (\d+)\)", out)
    assert len(epochs) == 2, out
    (l1, *_, a1, b1, main1), (l2, *_, a2, b2, main2) = epochs
    assert float(l2) < float(l1), out
    assert (a1, b1) == (a2, b2) and len({a1, b1, main1}) == 3, out   # persistent, 2 processes
