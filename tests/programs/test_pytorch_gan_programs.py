"""eriklindernoren/PyTorch-GAN's MNIST programs (gan, dcgan, wgan, wgan_gp, ...), run unchanged on
ember through the ``torch`` -> ``ember`` import alias (run_program.py);
test_pytorch_gan_programs_control.py runs the same on torch (slow; a file of its own, so that
``--dist loadfile`` gives it another worker).

The programs are vendored byte-identical under pytorch_gan/implementations/<name>/
(pytorch_gan/SOURCE.md pins the commit and lists each file's git blob id, which the test
checks). Each run copies its program's folder to ``<tmp_path>/implementations/<name>`` and
writes a small generated MNIST (datagen.write_mnist) where the programs read it,
``<tmp_path>/data/mnist`` (they open ``../../data/mnist`` with ``download=True``; the
torchvision stand-in never downloads); cogan and pixelda also get MNIST-M's processed files,
written with the backend's own ``save``, so that their mnistm.py finds them and downloads
nothing. Each program runs in a subprocess with one epoch, small batches, a small image size
where the program allows one, ``--n_cpu 0`` and a small ``--sample_interval``, under a hard
timeout. Random streams differ between ember and torch, so the checks are about behaviour: the
printed losses are finite, one line per batch, and save_image wrote the sample grids the
program saves at those intervals. Four programs stop with an error on torch itself (see
SOURCE.md); the test checks that they stop at the same line with the same kind of error."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.programs import datagen, vendored
from tests.programs.test_pytorch_examples import RUNNER, floats, run

HERE = os.path.dirname(os.path.abspath(__file__))
GAN = os.path.join(HERE, "pytorch_gan")
SOURCE_MD = os.path.join(GAN, "SOURCE.md")
TIMEOUT_S = 180          # a hard stop far above a run's ~5-25 s on a slow, shared machine
NUMBER = r"([-\d.naif]+)"
TRAIN_SIZE, BATCH = 48, 16                     # three batches an epoch
BATCHES = TRAIN_SIZE // BATCH


def _source_table():
    """{path: git blob id} from SOURCE.md."""
    return vendored.source_blobs(SOURCE_MD)


def test_vendored_files_match_source_md():
    assert vendored.file_blobs(GAN) == _source_table()


def write_mnistm(processed, save, from_numpy, train_size, test_size=16, seed=0):
    """MNIST-M's processed files as mnistm.py's download() saves them: ``mnist_m_train.pt``
    and ``mnist_m_test.pt``, each ``(uint8 images (N, 28, 28, 3), int64 labels (N,))``, written
    with ``save`` (the backend's torch.save); the images are the generated MNIST digits
    coloured over a random colour background, as MNIST-M blends digits into photographs."""
    with np.load(datagen.DIGITS, allow_pickle=False) as f:
        images, labels = f["images"], f["labels"]
    rng = np.random.default_rng(seed)
    os.makedirs(processed, exist_ok=True)
    start = 0
    for name, n in (("mnist_m_train.pt", train_size), ("mnist_m_test.pt", test_size)):
        digits = np.kron(images[start:start + n] / 16.0, np.ones((3, 3)))
        digits = np.pad(digits, ((0, 0), (2, 2), (2, 2)))[..., None]            # (n, 28, 28, 1)
        background = rng.uniform(0, 255, size=(n, 1, 1, 3)) * rng.uniform(
            0.6, 1.0, size=(n, 28, 28, 1))
        rgb = np.abs(background - 255.0 * digits)
        data = (from_numpy(np.rint(rgb).astype(np.uint8)),
                from_numpy(labels[start:start + n].astype(np.int64)))
        save(data, os.path.join(processed, name))
        start += n


def _backend_save(backend):
    if backend == "ember":
        import ember
        return ember.save, ember.from_numpy
    import torch
    return torch.save, torch.from_numpy


def _prepare(backend, tmp_path, name):
    """The program's folder under ``tmp_path/implementations`` (its files checked against
    SOURCE.md) and the data it reads under ``tmp_path/data``; the program's folder."""
    table = _source_table()
    folder = os.path.join(str(tmp_path), "implementations", name)
    shutil.copytree(os.path.join(GAN, "implementations", name), folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path in os.listdir(folder):
        with open(os.path.join(folder, path), "rb") as f:
            assert vendored.blob_id(f.read()) == table[f"implementations/{name}/{path}"], path
    datagen.write_mnist(os.path.join(str(tmp_path), "data", "mnist"), train_size=TRAIN_SIZE,
                        test_size=16)
    if name in ("cogan", "pixelda"):
        pytest.importorskip("six")          # mnistm.py's download() imports six.moves.urllib
        save, from_numpy = _backend_save(backend)
        write_mnistm(os.path.join(str(tmp_path), "data", "mnistm", "processed"), save,
                     from_numpy, TRAIN_SIZE)
    return folder


def _flags(extra):
    return ["--n_epochs", "1", "--batch_size", str(BATCH), "--n_cpu", "0",
            "--sample_interval", "2"] + extra


def _batch_lines(out, least=BATCHES):
    """The ``[Epoch 0/1] [Batch i/n] [D loss: ...] [G loss: ...]`` lines: at least ``least``,
    each batch index in range, every loss finite."""
    lines = re.findall(r"^\[Epoch 0/1\] \[Batch (\d+)/(\d+)\](.*)$", out, re.M)
    assert len(lines) >= least, out[-3000:]
    for i, n, rest in lines:
        assert int(n) == BATCHES and 0 <= int(i) < BATCHES, (i, n)
        floats(r"loss: " + NUMBER, rest, least=2)
    return lines


# name: (extra flags, the sample grids written, relative to the program's folder)
PROGRAMS = {
    "gan": ([], ["images/0.png", "images/2.png"]),
    "dcgan": (["--img_size", "16"], ["images/0.png", "images/2.png"]),
    "wgan": (["--n_critic", "1"], ["images/0.png", "images/2.png"]),
    # gradient penalty: autograd.grad(create_graph=True), then a double backward
    "wgan_gp": (["--n_critic", "1"], ["images/0.png", "images/2.png"]),
    "wgan_div": (["--n_critic", "1"], ["images/0.png", "images/2.png"]),
    "lsgan": (["--img_size", "16"], ["images/0.png", "images/2.png"]),
    "ebgan": (["--img_size", "16"], ["images/0.png", "images/2.png"]),
    "relativistic_gan": (["--img_size", "16"], ["images/0.png", "images/2.png"]),
    "acgan": (["--img_size", "16"], ["images/0.png", "images/2.png"]),
    "cgan": ([], ["images/0.png", "images/2.png"]),
    "infogan": (["--img_size", "16"], [f"images/{kind}/{n}.png" for kind in (
        "static", "varying_c1", "varying_c2") for n in (0, 2)]),
    "aae": ([], ["images/0.png", "images/2.png"]),
    "sgan": (["--img_size", "16"], ["images/0.png", "images/2.png"]),
    "cogan": (["--img_size", "16"], ["images/0.png", "images/2.png"]),
    # its classifier's InstanceNorm2d needs --img_size 32: at 16 it gets a 1x1 map, which
    # torch refuses (ValueError), and so does ember
    "pixelda": (["--n_residual_blocks", "1"], ["images/0.png", "images/2.png"]),
}

# name: (extra flags, the line of the program that raises, the error's kind); these stop on
# torch too (SOURCE.md says why)
FAILING = {
    "began": (["--img_size", "16"], "M = (d_loss_real + torch.abs(diff)).data[0]",
              r"\w*IndexError: .*invalid index of a 0-dim tensor"),
    "bgan": ([], "for i, (imgs, _) in enumerate(mnist_loader):",
             r"NameError: name 'mnist_loader' is not defined"),
    "dragan": (["--img_size", "16"], "for i, (imgs, _) in enumerate(mnist_loader):",
               r"NameError: name 'mnist_loader' is not defined"),
    "softmax_gan": ([], "g_loss.backward()",
                    r"\w*RuntimeError: one of the variables needed for gradient computation "
                    r"has been modified by an inplace operation"),
}


def run_program(name, backend, tmp_path):
    """Run PROGRAMS[name] on ``backend`` and check what it printed and saved."""
    extra, grids = PROGRAMS[name]
    folder = _prepare(backend, tmp_path, name)
    out = run(backend, os.path.dirname(folder), f"{name}/{name}.py", _flags(extra),
              timeout=TIMEOUT_S)
    _batch_lines(out)
    for grid in grids:
        path = os.path.join(folder, grid)
        assert os.path.getsize(path) > 0, f"{name} wrote no {grid}:\n{out[-2000:]}"
        from PIL import Image
        with Image.open(path) as image:
            assert image.format == "PNG" and min(image.size) > 1
    if name == "pixelda":   # the classifier's accuracies are percentages
        for value in floats(r"acc:\s+" + NUMBER + "%", out, least=BATCHES):
            assert 0 <= value <= 100


def run_failing_program(name, backend, tmp_path):
    """Run FAILING[name] on ``backend``: it exits non-zero, the traceback's last line of the
    program is the expected one and the error is the expected kind."""
    extra, line, error = FAILING[name]
    folder = _prepare(backend, tmp_path, name)
    env = dict(os.environ, PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
    if backend == "torch":
        env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run([sys.executable, RUNNER, backend, f"{name}.py"] + _flags(extra),
                          cwd=folder, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    trace = out[out.rindex("Traceback (most recent call last):"):]
    lines = trace.splitlines()
    program_frames = [lines[k + 1] for k, text in enumerate(lines[:-1])
                      if re.match(r' *File "([^"]+)", line \d+, in ', text)
                      and os.path.basename(re.match(r' *File "([^"]+)"', text).group(1))
                      == f"{name}.py"]
    assert program_frames and program_frames[-1].strip() == line, trace
    assert re.search(r"^(?:[\w.]+\.)?" + error, trace.strip().splitlines()[-1]), trace


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_on_ember(name, tmp_path):
    run_program(name, "ember", tmp_path)


@pytest.mark.parametrize("name", list(FAILING))
def test_program_fails_as_on_torch(name, tmp_path):
    run_failing_program(name, "ember", tmp_path)
