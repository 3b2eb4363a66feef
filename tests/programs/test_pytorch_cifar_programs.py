"""kuangliu/pytorch-cifar (pytorch_cifar/, vendored byte-identical at the commit pinned in
pytorch_cifar/SOURCE.md, each file's git blob id checked) on ember through the ``torch`` ->
``ember`` import alias (run_program.py):

- main.py, unchanged, trains SimpleDLA on a tiny generated CIFAR-10 (8 training and 4 test
  images in CIFAR-10's python batches, datagen.write_cifar10) in a subprocess; its 200 epochs
  are cut off by the test once epoch 0's training and test progress lines are out. Its
  progress bar asks ``stty size`` for the terminal's width at import, so the program's
  standard input is a pseudo-terminal of 120 columns.
- models/: every model family, as small as its constructor allows, one training-mode forward
  and backward and an eval-mode forward of a 2x3x32x32 batch with torch's weights
  (cifar_models_forward_backward.py, run on torch and on ember in subprocesses). In float64
  ember's outputs, parameter gradients and batch-norm running statistics match torch's to
  1e-9 of their scale. In float32 the outputs and running statistics match within a few times
  torch's own float32 error (each measured against torch's float64 run from the same float32
  weights); parameter gradients only within 5% of the model's largest gradient: in a ReLU
  network with training-mode batch norm over a batch of two, one activation that float32
  rounding puts on the other side of a ReLU's kink moves whole gradient tensors (seen: one
  element of ResNet-bottleneck's layer4 batch-norm output, -5.9e-6 on ember and 1.5e-6 in
  float64, moved a conv weight's gradient by 0.1 of 0.47; torch's own float32 run crosses
  such kinks in SimpleDLA and PNASNet-B)."""
import fcntl
import math
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time

import numpy as np
import pytest

from tests.programs import datagen, vendored
from tests.programs.test_pytorch_examples import RUNNER, run

HERE = os.path.dirname(os.path.abspath(__file__))
VENDORED = os.path.join(HERE, "pytorch_cifar")
SOURCE_MD = os.path.join(VENDORED, "SOURCE.md")
DRIVER = "cifar_models_forward_backward.py"
TIMEOUT_S = 300        # a hard stop far above a run's ~20-60 s on a slow, shared machine


COMMIT, BLOBS = vendored.source_commit(SOURCE_MD), vendored.source_blobs(SOURCE_MD)


def test_vendored_files_are_the_pinned_upstream_files():
    assert vendored.file_blobs(VENDORED) == BLOBS


def _copy(tmp_path):
    root = str(tmp_path / "pytorch-cifar")
    shutil.copytree(VENDORED, root, ignore=shutil.ignore_patterns("__pycache__", "SOURCE.md"))
    return root


def _run_until(argv, cwd, stop, timeout, env=None):
    """Run ``argv`` with a 40x120 pseudo-terminal as standard input, stdout+stderr to a pipe
    (``env`` added to the environment), until ``stop`` occurs in its output (then its process
    group is killed) or it exits; (exit status or None when stopped, output). A hard
    ``timeout``."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout
    try:
        while stop.encode() not in out:
            left = deadline - time.monotonic()
            assert left > 0, f"no {stop!r} within {timeout} s:\n{out.decode()[-3000:]}"
            ready, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    return proc.wait(), out.decode()
                out += chunk
        return None, out.decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()
        os.close(master)


PROGRESS = r"Loss: ([-\d.naif]+) \| Acc: ([\d.]+)% \((\d+)/(\d+)\)"


def main_first_epoch(backend, tmp_path):
    """main.py on ``backend`` until epoch 1 starts; epoch 0's lines checked."""
    root = _copy(tmp_path)
    datagen.write_cifar10(os.path.join(root, "data"), train_size=8, test_size=4)
    env = {"OMP_NUM_THREADS": "1"} if backend == "torch" else {}   # as run() does for torch
    rc, out = _run_until([sys.executable, RUNNER, backend, os.path.join(root, "main.py")],
                         root, "\nEpoch: 1\n", TIMEOUT_S, env)
    assert rc is None, f"main.py exited {rc}:\n{out[-3000:]}"
    assert out.startswith("==> Preparing data..\nFiles already downloaded and verified\n"
                          "Files already downloaded and verified\n==> Building model..\n"
                          "\nEpoch: 0\n"), out[:2000]
    epoch0 = out.split("\nEpoch: 1\n")[0]
    (train, test) = re.findall(PROGRESS, epoch0)     # one batch each: 8 and 4 images
    for (loss, acc, correct, total), n in ((train, 8), (test, 4)):
        assert math.isfinite(float(loss)) and int(total) == n and 0 <= int(correct) <= n
        assert math.isclose(float(acc), 100.0 * int(correct) / n, abs_tol=1e-3)
    assert 1.0 < float(train[0]) < 4.0           # about ln 10 at the start
    assert " 1/1 " in epoch0 and "Step: " in epoch0 and "| Tot: " in epoch0
    # a checkpoint when the test accuracy beats 0
    assert ("Saving.." in epoch0) == (int(test[2]) > 0)
    assert os.path.exists(os.path.join(root, "checkpoint", "ckpt.pth")) == (int(test[2]) > 0)


def test_main_trains_simple_dla_for_an_epoch(tmp_path):
    main_first_epoch("ember", tmp_path)


def test_shufflenet_v1_float_channels_fail_as_on_torch(tmp_path):
    # models/shufflenet.py computes ``mid_planes = out_planes/4`` (a float under Python 3):
    # torch 2.x refuses Conv2d(24, 44.0, ...) with a TypeError, and so does ember
    program = tmp_path / "build_shufflenet.py"
    program.write_text("import sys\n"
                       f"sys.path.insert(0, {VENDORED!r})\n"
                       "from models import ShuffleNetG2\n"
                       "try:\n    ShuffleNetG2()\n"
                       "except TypeError as e:\n    print('TypeError:', e)\n")
    for backend in ("ember", "torch"):
        out = run(backend, str(tmp_path), "build_shufflenet.py", [])
        # torch: "... must be tuple of ints, but found element of type float at pos 0";
        # ember: "empty: size must be a sequence of ints, got (44.0, 24, 1, 1)"
        assert out.startswith("TypeError: ") and ("44.0" in out or "type float" in out), \
            (backend, out)


# every model file's families (shufflenet.py's ShuffleNet cannot be built, above)
MODELS = ["LeNet", "VGG11", "ResNet_basic", "ResNet_bottleneck", "PreActResNet_basic",
          "PreActResNet_bottleneck", "GoogLeNet", "DenseNet", "ResNeXt", "MobileNet",
          "MobileNetV2", "ShuffleNetV2", "SENet_basic", "SENet_preact", "RegNetX_200MF",
          "RegNet_se", "DLA", "SimpleDLA", "DPN", "EfficientNet", "PNASNet_A", "PNASNet_B"]


@pytest.fixture(scope="module")
def model_runs(tmp_path_factory):
    """The folder where the driver wrote torch_, torch64_, ember_ and ember64_<model>.npz."""
    work = str(tmp_path_factory.mktemp("cifar_models"))
    rng = np.random.default_rng(0)
    np.savez(os.path.join(work, "input.npz"),
             x=rng.standard_normal((2, 3, 32, 32)).astype(np.float32),
             g=rng.standard_normal((2, 10)).astype(np.float32))
    for backend, flags in (("torch", []), ("torch", ["--float64"]), ("ember", []),
                           ("ember", ["--float64"])):
        out = run(backend, HERE, DRIVER, [VENDORED, work] + flags + MODELS,
                  timeout=TIMEOUT_S)
        assert out.count(", output (2, 10)") == len(MODELS), out[-3000:]
    return work


def _load(work, tag, name):
    with np.load(os.path.join(work, f"{tag}_{name}.npz"), allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def _scales(ref):
    """Per entry, the scale its error is measured against: the largest parameter gradient of
    the model for gradients, else the entry's own largest value (at least 1e-3)."""
    grads = max(float(np.abs(v).max()) for k, v in ref.items() if k.startswith("grad.")
                and v.size)
    return {k: grads if k.startswith("grad.") else max(float(np.abs(v).max()), 1e-3)
            for k, v in ref.items() if v.size}


@pytest.mark.parametrize("name", MODELS)
def test_model_matches_torch(model_runs, name):
    t32, t64 = _load(model_runs, "torch", name), _load(model_runs, "torch64", name)
    e32, e64 = _load(model_runs, "ember", name), _load(model_runs, "ember64", name)
    assert e32.keys() == t32.keys() == e64.keys() == t64.keys()
    scale = _scales(t64)
    failures = []
    for k, ref in t64.items():
        if ref.dtype.kind != "f":                    # num_batches_tracked
            assert np.array_equal(e32[k], t32[k]) and np.array_equal(e64[k], ref), k
            continue
        if not ref.size:                             # a parameter the loss does not reach
            assert not t32[k].size and not e32[k].size and not e64[k].size, k
            continue
        assert e32[k].shape == ref.shape and e32[k].dtype == np.float32, k
        assert e64[k].dtype == np.float64, k
        err64 = float(np.abs(e64[k] - ref).max()) / scale[k]
        err32 = float(np.abs(e32[k] - ref).max()) / scale[k]
        torch32 = float(np.abs(t32[k] - ref).max()) / scale[k]
        if err64 > 1e-9:
            failures.append(f"{k} float64: {err64:.1e} of {scale[k]:.2e}")
        if k.startswith("grad."):
            if err32 > 0.05:
                failures.append(f"{k} float32: {err32:.1e} of {scale[k]:.2e}")
        elif err32 > max(8 * torch32, 1e-5):
            failures.append(f"{k} float32: {err32:.1e} (torch's own {torch32:.1e}) of "
                            f"{scale[k]:.2e}")
    assert not failures, f"{name}:\n" + "\n".join(failures[:20])
