"""yunjey/pytorch-tutorial's programs (pytorch_tutorial/, vendored byte-identical at the commit
pinned in pytorch_tutorial/SOURCE.md, each file's git blob id checked) run unchanged on ember
through the ``torch`` -> ``ember`` import alias (run_program.py), each in a subprocess under a
hard timeout, in a copy of the tutorial tree under tmp_path.

The programs download MNIST / CIFAR-10 (``download=True``) into ``tutorials/data`` (their
``root='../../data'``) and fix their hyper-parameters (epochs, batch sizes) in the file: the
torchvision stand-in reads small data sets the test generates there in torchvision's formats
(datagen.py), so the program's own epoch count takes seconds. Where a program prints its loss
only every 100 steps of 100 images (more data than a test can afford), its test accuracy is what
the run prints and checks. language_model's data/train.txt (Penn Treebank) is not in the
mirror: a generated corpus in its format stands in."""
import functools
import math
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.programs import datagen, vendored
from tests.programs.test_pytorch_examples import RUNNER, floats

HERE = os.path.dirname(os.path.abspath(__file__))
VENDORED = os.path.join(HERE, "pytorch_tutorial")
SOURCE_MD = os.path.join(VENDORED, "SOURCE.md")
TIMEOUT_S = 300        # a hard stop far above a run's ~2-60 s on a slow, shared machine
NUMBER = r"([-\d.naif]+)"


COMMIT, BLOBS = vendored.source_commit(SOURCE_MD), vendored.source_blobs(SOURCE_MD)


def test_vendored_files_are_the_pinned_upstream_files():
    assert vendored.file_blobs(VENDORED) == BLOBS


def _tree(tmp_path):
    """A copy of the vendored tutorials under tmp_path (the programs write checkpoints and
    images beside themselves); its data folder, where they look for MNIST and CIFAR-10."""
    shutil.copytree(os.path.join(VENDORED, "tutorials"), tmp_path / "tutorials")
    return str(tmp_path / "tutorials")


def run(backend, root, program, expect_ok=True):
    """Run tutorials/``program`` on ``backend`` from its folder; (exit status, output)."""
    path = os.path.join(root, program)
    env = dict(os.environ, PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
    if backend == "torch":
        env["OMP_NUM_THREADS"] = "1"     # torch's spinning OpenMP workers crawl on 2 shared cores
    proc = subprocess.run([sys.executable, RUNNER, backend, path], cwd=os.path.dirname(path),
                          env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    out = proc.stdout + proc.stderr
    if expect_ok:
        assert proc.returncode == 0, f"{program} on {backend} exited {proc.returncode}:\n" \
                                     f"{out[-4000:]}"
    return proc.returncode, out


def _accuracy(out, pattern):
    (acc,) = floats(pattern + NUMBER + " %", out)
    assert 0 <= acc <= 100
    return acc


def pytorch_basics(backend, tmp_path):
    # Parts 1-4 run; part 4's ``data_iter.next()`` (Python 2's iterator protocol) raises
    # AttributeError on torch 2.x as on ember, so parts 5-7 (a pretrained ResNet-18 download,
    # torch.load of a whole pickled model) never run (pytorch_tutorial/SOURCE.md)
    root = _tree(tmp_path)
    datagen.write_cifar10(os.path.join(root, "data"), train_size=70, test_size=10)
    rc, out = run(backend, root, "01-basics/pytorch_basics/main.py", expect_ok=False)
    assert rc == 1 and out.startswith("tensor(2.)\ntensor(1.)\ntensor(1.)\n"), out[-3000:]
    assert re.search(r"w:  Parameter containing:\ntensor\(\[\[.*\]\], requires_grad=True\)", out,
                     re.S)
    (before,) = floats(r"loss:  " + NUMBER + "\n", out)
    (after,) = floats(r"loss after 1 step optimization:  " + NUMBER, out)
    assert after < before                        # one SGD step on a convex loss, lr 0.01
    assert re.search(r"Size\(\[3, 32, 32\]\)\n\d\n", out)
    assert out.rstrip().endswith(
        "AttributeError: '_SingleProcessDataLoaderIter' object has no attribute 'next'"), \
        out[-2000:]                              # torch 2.13's words
    assert "images, labels = data_iter.next()" in out


def linear_regression(backend, tmp_path):
    pytest.importorskip("matplotlib")            # the program plots its fit
    root = _tree(tmp_path)
    _, out = run(backend, root, "01-basics/linear_regression/main.py")
    losses = floats(r"Epoch \[\d+/60\], Loss: " + NUMBER, out, least=12)
    assert len(losses) == 12 and losses[-1] < losses[0]
    assert os.path.exists(os.path.join(root, "01-basics/linear_regression/model.ckpt"))


MNIST_CLASSIFIERS = {      # folder: what its accuracy line says before the number
    "01-basics/logistic_regression": "Accuracy of the model on the 10000 test images: ",
    "01-basics/feedforward_neural_network": "Accuracy of the network on the 10000 test images: ",
    "02-intermediate/convolutional_neural_network":
        "Test Accuracy of the model on the 10000 test images: ",
    "02-intermediate/recurrent_neural_network":
        "Test Accuracy of the model on the 10000 test images: ",
    "02-intermediate/bidirectional_recurrent_neural_network":
        "Test Accuracy of the model on the 10000 test images: ",
}


def mnist_classifier(program, backend, tmp_path):
    # 200 training images: two batches of 100 an epoch (their loss prints every 100 steps)
    root = _tree(tmp_path)
    datagen.write_mnist(os.path.join(root, "data"), train_size=200, test_size=100)
    _, out = run(backend, root, f"{program}/main.py")
    _accuracy(out, MNIST_CLASSIFIERS[program])
    assert os.path.exists(os.path.join(root, program, "model.ckpt"))


def deep_residual_network(backend, tmp_path):
    # 80 epochs of one batch of 10 CIFAR-10 images (Pad + RandomCrop + flip augmentation),
    # the learning rate divided by 3 every 20 epochs
    root = _tree(tmp_path)
    datagen.write_cifar10(os.path.join(root, "data"), train_size=10, test_size=10)
    _, out = run(backend, root, "02-intermediate/deep_residual_network/main.py")
    assert "Files already downloaded and verified" in out
    _accuracy(out, "Accuracy of the model on the test images: ")
    assert os.path.exists(os.path.join(root, "02-intermediate/deep_residual_network/resnet.ckpt"))


def language_model(backend, tmp_path):
    # a 1024-unit LSTM over a generated corpus of ~1,500 tokens (20 rows of ~75): two steps of
    # 30 an epoch, the first of each printed; then 1,000 words sampled with multinomial
    root = _tree(tmp_path)
    folder = os.path.join(root, "02-intermediate/language_model")
    datagen.write_corpus(os.path.join(folder, "data"), train_lines=200)
    _, out = run(backend, root, "02-intermediate/language_model/main.py")
    pairs = re.findall(r"Epoch \[\d/5\], Step\[0/2\], Loss: " + NUMBER + r", Perplexity:\s*"
                       + NUMBER, out)
    assert len(pairs) == 5, out[-3000:]
    losses = [float(a) for a, _ in pairs]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    for loss, ppl in pairs:
        assert math.isclose(float(ppl), math.exp(float(loss)), rel_tol=2e-3, abs_tol=0.01)
    assert "Sampled [1000/1000] words and save to sample.txt" in out
    with open(os.path.join(folder, "sample.txt")) as f:
        text = f.read()
    assert len(text.split()) + text.count("\n") == 1000      # words, and '\n' for <eos>
    assert os.path.exists(os.path.join(folder, "model.ckpt"))


def generative_adversarial_network(backend, tmp_path):
    # its batches must hold 100 images (images.reshape(batch_size, -1)): 100 images, one step
    # an epoch for its 200 epochs, so its every-200-steps log never prints; each epoch saves
    # a grid of generated images
    root = _tree(tmp_path)
    datagen.write_mnist(os.path.join(root, "data"), train_size=100, test_size=10)
    _, out = run(backend, root, "03-advanced/generative_adversarial_network/main.py")
    folder = os.path.join(root, "03-advanced/generative_adversarial_network")
    samples = set(os.listdir(os.path.join(folder, "samples")))
    assert samples == {"real_images.png"} | {f"fake_images-{e}.png" for e in range(1, 201)}
    from PIL import Image
    with Image.open(os.path.join(folder, "samples", "fake_images-200.png")) as img:
        assert img.size == (2 + 8 * 30, 2 + 13 * 30)     # make_grid: 8 a row of 28 + 2 padding
    assert {"G.ckpt", "D.ckpt"} <= set(os.listdir(folder))


def variational_autoencoder(backend, tmp_path):
    # 1,280 images: ten batches of 128 an epoch, so each of its 15 epochs prints its tenth step
    root = _tree(tmp_path)
    datagen.write_mnist(os.path.join(root, "data"), train_size=1280, test_size=10)
    _, out = run(backend, root, "03-advanced/variational_autoencoder/main.py")
    rows = re.findall(r"Epoch\[\d+/15\], Step \[10/10\], Reconst Loss: " + NUMBER + ", KL Div: "
                      + NUMBER, out)
    assert len(rows) == 15, out[-3000:]
    reconst = [float(r) for r, _ in rows]
    assert all(math.isfinite(float(v)) for row in rows for v in row)
    assert reconst[-1] < 0.9 * reconst[0]
    # the legacy size_average=False warns as torch does, naming reduction='sum'
    assert "please use reduction='sum' instead." in out
    samples = set(os.listdir(os.path.join(root, "03-advanced/variational_autoencoder",
                                          "samples")))
    assert samples == {f"{kind}-{e}.png" for kind in ("sampled", "reconst")
                       for e in range(1, 16)}


PROGRAMS = {     # name: run and check (backend, tmp_path)
    "pytorch_basics": pytorch_basics,
    "linear_regression": linear_regression,
    **{folder.split("/")[1]: functools.partial(mnist_classifier, folder)
       for folder in MNIST_CLASSIFIERS},
    "deep_residual_network": deep_residual_network,
    "language_model": language_model,
    "generative_adversarial_network": generative_adversarial_network,
    "variational_autoencoder": variational_autoencoder,
}
SLOW = {"generative_adversarial_network", "variational_autoencoder"}    # 20-60 s each


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name, tmp_path):
    PROGRAMS[name]("ember", tmp_path)
