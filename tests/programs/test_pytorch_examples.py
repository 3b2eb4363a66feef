"""Programs from the public pytorch/examples repository, run unchanged on ember through the
``torch`` -> ``ember`` import alias (run_program.py); test_pytorch_examples_control.py runs the
same on torch (slow; a file of its own, so that ``--dist loadfile`` gives it another worker).

The programs are not copied into this repository: they are read byte-identical from a
pytorch/examples checkout (or bare git directory) at the commit pinned in
pytorch_examples/SOURCE.md, found at ``$PYTORCH_EXAMPLES`` or pytorch_examples/upstream
(``make pytorch-examples`` clones it there); each file's git blob id is checked against
SOURCE.md. Downloads are replaced by small generated data in the same formats (datagen.py),
and torchvision and requests by the stand-ins in standins/ (requests serves only the generated
files the test maps, so nothing is downloaded). Each program runs in a subprocess in its own
folder under tmp_path, with the small flags it offers, under a hard timeout."""
import json
import math
import os
import re
import subprocess
import sys

import pytest

from tests.programs import datagen, vendored

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "run_program.py")
SOURCE_MD = os.path.join(HERE, "pytorch_examples", "SOURCE.md")
TIMEOUT_S = 240          # a hard stop far above a run's ~5-60 s on a slow, shared machine


COMMIT, BLOBS = vendored.source_commit(SOURCE_MD), vendored.source_blobs(SOURCE_MD)


def _upstream():
    return os.environ.get("PYTORCH_EXAMPLES") or os.path.join(HERE, "pytorch_examples",
                                                              "upstream")


def _read_upstream(path):
    """The bytes of ``path`` at the pinned commit: from a bare git directory or a repository's
    history when there is one, else from the checked-out file."""
    root = _upstream()
    git_dir = root if os.path.isfile(os.path.join(root, "HEAD")) else os.path.join(root, ".git")
    if os.path.isdir(git_dir):
        out = subprocess.run(["git", "--git-dir", git_dir, "show", f"{COMMIT}:{path}"],
                             capture_output=True)
        if out.returncode == 0:
            return out.stdout
    with open(os.path.join(root, path), "rb") as f:
        return f.read()


def _vendor(paths, dest):
    """Copy ``paths`` byte-identical under ``dest``, each checked against its blob id."""
    for path in paths:
        try:
            data = _read_upstream(path)
        except OSError:
            pytest.skip(f"no pytorch/examples checkout at {_upstream()} (make pytorch-examples)")
        assert vendored.blob_id(data) == BLOBS[path], \
            f"{path} differs from pytorch/examples@{COMMIT}"
        target = os.path.join(dest, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)


def run(backend, root, program, args, timeout=TIMEOUT_S, env=None):
    """Run ``root/program`` with ``args`` (and ``env`` added to the environment) from the
    program's folder; its stdout+stderr."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", MPLBACKEND="Agg", **(env or {}))
    if backend == "torch":
        env["OMP_NUM_THREADS"] = "1"     # torch's spinning OpenMP workers crawl on 2 shared cores
    path = os.path.join(root, program)
    proc = subprocess.run([sys.executable, RUNNER, backend, path] + args,
                          cwd=os.path.dirname(path), env=env, capture_output=True, text=True,
                          timeout=timeout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{program} on {backend} exited {proc.returncode}:\n{out[-4000:]}"
    return out


def floats(pattern, text, least=1):
    """The numbers the first group of ``pattern`` matches in ``text``; at least ``least`` of
    them, all finite."""
    values = [float(m) for m in re.findall(pattern, text)]
    assert len(values) >= least and all(map(math.isfinite, values)), (pattern, text[-3000:])
    return values


MNIST_TRAIN_LOG = r"Train Epoch: \d+ .*Loss: ([-\d.naif]+)"
MNIST_TEST_LOG = r"Test set: Average loss: ([-\d.naif]+), Accuracy"


def _regression(backend, root):
    out = run(backend, root, "regression/main.py", [])
    (loss,) = floats(r"Loss: ([-\d.naif]+) after \d+ batches", out)
    assert loss < 1e-3 and "==> Learned function:" in out


def _word_language_model(backend, root):
    datagen.write_corpus(os.path.join(root, "corpus"))
    with open(os.path.join(root, "corpus", "train.txt"), encoding="utf8") as f:
        vocabulary = set(f.read().split()) | {"<eos>"}
    common = ["--data", "../corpus", "--emsize", "16", "--nhid", "16", "--bptt", "10"]
    for model in ("LSTM", "Transformer"):
        lr = ["--lr", "2"] if model == "LSTM" else ["--lr", "0.5"]
        out = run(backend, root, "word_language_model/main.py", common + lr + [
            "--model", model, "--epochs", "1", "--batch_size", "8", "--log-interval", "10",
            "--save", f"{model}.pt"])
        floats(r"\| loss\s+([-\d.naif]+) \| ppl", out, least=2)
        (test_loss,) = floats(r"test loss\s+([-\d.naif]+)", out)
        assert test_loss < math.log(len(vocabulary)), out     # beats a uniform guess
        out = run(backend, root, "word_language_model/generate.py", [
            "--data", "../corpus", "--checkpoint", f"{model}.pt", "--words", "20",
            "--outf", f"{model}.txt", "--log-interval", "10"])
        assert "| Generated 10/20 words" in out
        with open(os.path.join(root, "word_language_model", f"{model}.txt")) as f:
            assert len(f.read().split()) == 20


def _mnist(backend, root):
    datagen.write_mnist(os.path.join(root, "data"), train_size=256, test_size=128)
    out = run(backend, root, "mnist/main.py", [
        "--epochs", "1", "--batch-size", "32", "--test-batch-size", "128", "--log-interval",
        "2", "--save-model"])
    floats(MNIST_TRAIN_LOG, out, least=2)
    floats(MNIST_TEST_LOG, out)
    assert os.path.exists(os.path.join(root, "mnist", "mnist_cnn.pt"))


def _mnist_rnn(backend, root):
    datagen.write_mnist(os.path.join(root, "data"), train_size=256, test_size=128)
    out = run(backend, root, "mnist_rnn/main.py", [
        "--epochs", "1", "--batch-size", "32", "--test-batch-size", "128", "--log-interval",
        "2"])
    floats(MNIST_TRAIN_LOG, out, least=2)
    floats(MNIST_TEST_LOG, out)


def _mnist_forward_forward(backend, root):
    datagen.write_mnist(os.path.join(root, "mnist_forward_forward", "data"), train_size=256,
                        test_size=128)
    out = run(backend, root, "mnist_forward_forward/main.py", [
        "--epochs", "20", "--train_size", "256", "--test_size", "128", "--log-interval", "10"])
    floats(r"Loss:\s+([-\d.naif]+)", out, least=4)
    (train_err,) = floats(r"train error: ([-\d.naif]+)", out)
    (test_err,) = floats(r"test error: ([-\d.naif]+)", out)
    assert 0 <= train_err <= 1 and 0 <= test_err <= 1


def _mnist_hogwild(backend, root):
    datagen.write_mnist(os.path.join(root, "data"), train_size=256, test_size=128)
    out = run(backend, root, "mnist_hogwild/main.py", [
        "--epochs", "1", "--num-processes", "2", "--batch-size", "32", "--test-batch-size",
        "128", "--log-interval", "2"])
    floats(MNIST_TRAIN_LOG, out, least=2)
    floats(MNIST_TEST_LOG, out)


def _vae(backend, root):
    datagen.write_mnist(os.path.join(root, "data"), train_size=256, test_size=128)
    os.makedirs(os.path.join(root, "vae", "results"))
    out = run(backend, root, "vae/main.py", ["--epochs", "1", "--batch-size", "64",
                                             "--log-interval", "2"])
    floats(r"Epoch: \d+ Average loss: ([-\d.naif]+)", out)
    floats(r"Test set loss: ([-\d.naif]+)", out)
    results = os.listdir(os.path.join(root, "vae", "results"))
    assert sorted(results) == ["reconstruction_1.png", "sample_1.png"]


def _dcgan(backend, root):
    out = run(backend, root, "dcgan/main.py", [
        "--dataset", "fake", "--dry-run", "--workers", "0", "--batchSize", "8", "--imageSize",
        "64", "--ngf", "8", "--ndf", "8", "--nz", "16", "--niter", "1", "--outf", "out",
        "--manualSeed", "1"])
    floats(r"Loss_D: ([-\d.naif]+)", out)
    assert {"real_samples.png", "fake_samples_epoch_000.png", "netG_epoch_0.pth",
            "netD_epoch_0.pth"} <= set(os.listdir(os.path.join(root, "dcgan", "out")))


def _super_resolution(backend, root):
    pytest.importorskip("six")                         # data.py imports six.moves.urllib
    base = os.path.join(root, "super_resolution", "dataset", "BSDS300", "images")
    datagen.write_images(os.path.join(base, "train"), 2, 256, seed=0, ext=".jpg")
    datagen.write_images(os.path.join(base, "test"), 1, 256, seed=1, ext=".jpg")
    out = run(backend, root, "super_resolution/main.py", [
        "--upscale_factor", "3", "--batchSize", "2", "--testBatchSize", "2", "--nEpochs", "1",
        "--threads", "0", "--lr", "0.001"])
    floats(r"Loss: ([-\d.naif]+)", out)
    floats(r"Avg. PSNR: ([-\d.naif]+) dB", out)
    datagen.write_images(os.path.join(root, "super_resolution"), 1, 32, seed=2, ext=".jpg")
    run(backend, root, "super_resolution/super_resolve.py", [
        "--input_image", "img000.jpg", "--model", "model_epoch_1.pth", "--output_filename",
        "out.png"])
    assert os.path.exists(os.path.join(root, "super_resolution", "out.png"))


def _gat(backend, root):
    datagen.write_cora(os.path.join(root, "gat", "cora"))
    out = run(backend, root, "gat/main.py", ["--epochs", "2", "--val-every", "1"])
    assert "Dataset already downloaded..." in out
    floats(r"loss_train: ([-\d.naif]+)", out, least=2)
    (acc,) = floats(r"Test set results: loss [-\d.naif]+ accuracy ([-\d.naif]+)", out)
    assert 0 <= acc <= 1


CORA_URL = "https://linqs-data.soe.ucsc.edu/public/lbc/cora.tgz"


def _gcn(backend, root):
    archive = os.path.join(root, "cora.tgz")
    datagen.write_cora_tgz(archive)                   # served by the requests stand-in
    out = run(backend, root, "gcn/main.py", ["--epochs", "10", "--val-every", "5"],
              env={"REQUESTS_STANDIN_FILES": json.dumps({CORA_URL: archive})})
    assert "Downloading dataset..." in out and "Loading dataset..." in out
    assert sorted(os.listdir(os.path.join(root, "gcn", "cora"))) == ["cora.cites",
                                                                     "cora.content"]
    assert len(floats(r"loss_train: ([-\d.naif]+)", out, least=2)) == 2
    (acc,) = floats(r"Test set results: loss [-\d.naif]+ accuracy ([-\d.naif]+)", out)
    assert 0 <= acc <= 1


def _siamese_network(backend, root):
    # every digit class at least twice in each split (the program draws a second image of the
    # class until it differs from the first); the default --lr 1.0, where the sigmoid saturates
    # to exactly 1.0 in float32 within a few steps: binary_cross_entropy's gradient is finite
    # there, as torch's
    datagen.write_mnist(os.path.join(root, "data"), train_size=48, test_size=48)
    out = run(backend, root, "siamese_network/main.py", [
        "--epochs", "1", "--batch-size", "16", "--test-batch-size", "48",
        "--log-interval", "1", "--save-model"])
    assert len(floats(MNIST_TRAIN_LOG, out, least=3)) == 3
    floats(MNIST_TEST_LOG, out)
    assert os.path.exists(os.path.join(root, "siamese_network", "siamese_network.pt"))


def _fast_neural_style(backend, root):
    base = os.path.join(root, "fast_neural_style")
    datagen.write_images(os.path.join(base, "train", "images"), 4, 40, seed=0)
    datagen.write_images(os.path.join(base, "style"), 1, 32, seed=1)
    datagen.write_images(os.path.join(base, "content"), 1, 24, seed=2)
    out = run(backend, root, "fast_neural_style/neural_style/neural_style.py", [
        "train", "--epochs", "1", "--batch-size", "2", "--dataset", "../train",
        "--style-image", "../style/img000.png", "--save-model-dir", "../models",
        "--image-size", "32", "--log-interval", "1"])
    floats(r"\ttotal: ([-\d.naif]+)", out, least=2)
    (model,) = os.listdir(os.path.join(base, "models"))
    assert model.startswith("epoch_1_") and model.endswith(".model")
    run(backend, root, "fast_neural_style/neural_style/neural_style.py", [
        "eval", "--content-image", "../content/img000.png", "--model", f"../models/{model}",
        "--output-image", "../out.png"])
    from PIL import Image
    with Image.open(os.path.join(base, "out.png")) as img:
        assert img.size == (24, 24) and img.mode == "RGB"


def _imagenet(backend, root):
    # ImageNet's layout (train/ and val/, a folder of JPEG images per class), two classes of
    # small generated images; the program crops and resizes them to 224 x 224
    for split, count in (("train", 2), ("val", 1)):
        for k, wnid in enumerate(("n01440764", "n01443537")):
            datagen.write_images(os.path.join(root, "ilsvrc", split, wnid), count, 48,
                                 seed=10 * k + len(split), ext=".JPEG")
    out = run(backend, root, "imagenet/main.py", [
        "../ilsvrc", "-a", "resnet18", "-j", "0", "--epochs", "1", "-b", "2", "-p", "1",
        "--seed", "0"])
    assert "=> creating model 'resnet18'" in out
    assert len(floats(r"Epoch: \[0\]\[\s*\d+/\d+\].*Loss ([-\d.e+naif]+) \(", out,
                      least=2)) == 2
    floats(r"\*\s+Acc@1 ([-\d.naif]+) Acc@5", out)
    assert {"checkpoint.pth.tar", "model_best.pth.tar"} <= set(
        os.listdir(os.path.join(root, "imagenet")))


PROGRAMS = {   # name: (files to vendor, run and check)
    "regression": (["regression/main.py"], _regression),
    "word_language_model": ([f"word_language_model/{f}.py" for f in
                             ("main", "data", "model", "generate")], _word_language_model),
    "mnist": (["mnist/main.py"], _mnist),
    "mnist_rnn": (["mnist_rnn/main.py"], _mnist_rnn),
    "mnist_forward_forward": (["mnist_forward_forward/main.py"], _mnist_forward_forward),
    "mnist_hogwild": (["mnist_hogwild/main.py", "mnist_hogwild/train.py"], _mnist_hogwild),
    "vae": (["vae/main.py"], _vae),
    "dcgan": (["dcgan/main.py"], _dcgan),
    "super_resolution": ([f"super_resolution/{f}.py" for f in
                          ("main", "data", "dataset", "model", "super_resolve")],
                         _super_resolution),
    "gat": (["gat/main.py"], _gat),
    "gcn": (["gcn/main.py"], _gcn),
    "siamese_network": (["siamese_network/main.py"], _siamese_network),
    "fast_neural_style": ([f"fast_neural_style/neural_style/{f}.py" for f in
                           ("neural_style", "vgg", "utils", "transformer_net", "__init__")],
                          _fast_neural_style),
    "imagenet": (["imagenet/main.py"], _imagenet),
}


def run_program(name, backend, tmp_path):
    files, check = PROGRAMS[name]
    _vendor(files, str(tmp_path))
    check(backend, str(tmp_path))


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program(name, tmp_path):
    run_program(name, "ember", tmp_path)


def test_source_table_lists_every_vendored_file():
    used = {f for files, _ in PROGRAMS.values() for f in files}
    assert used <= set(BLOBS), sorted(used - set(BLOBS))
    assert re.fullmatch(r"[0-9a-f]{40}", COMMIT)
