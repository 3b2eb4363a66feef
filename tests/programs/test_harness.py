"""The harness that runs other people's PyTorch programs on ember (no upstream files needed):
the torch -> ember import alias, in this process and in spawned children, the data generators
and the torchvision and requests stand-ins, checked against torch."""
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.programs import datagen
from tests.programs.test_pytorch_examples import RUNNER

PROGRAM = '''
import multiprocessing as mp
import sys
import torch, torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR
import ember, ember.nn.functional

def child(q):
    import torch
    q.put(torch.__name__)

if __name__ == "__main__":
    assert torch is ember and F is ember.nn.functional, (torch, F)
    assert StepLR is ember.optim.lr_scheduler.StepLR
    assert sys.argv[1:] == ["--flag", "1"], sys.argv
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start()
    print("child:", q.get(timeout=60))
    p.join()
    try:
        import torch.no_such_module
    except ModuleNotFoundError as e:
        print("missing:", e.name)
'''


def test_alias_gives_ember_here_and_in_spawned_children(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    out = subprocess.run([sys.executable, RUNNER, "ember", str(program), "--flag", "1"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "child: ember" in out.stdout and "missing: torch.no_such_module" in out.stdout


def test_runner_rejects_an_unknown_backend(tmp_path):
    (tmp_path / "p.py").write_text("")
    out = subprocess.run([sys.executable, RUNNER, "jax", str(tmp_path / "p.py")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "backend must be 'ember' or 'torch'" in out.stderr


def test_mnist_idx_files_round_trip(tmp_path):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "standins"))
    try:
        from torchvision.datasets import read_idx
    finally:
        sys.path.pop(0)
    datagen.write_mnist(str(tmp_path), train_size=20, test_size=10)
    raw = tmp_path / "MNIST" / "raw"
    images = read_idx(str(raw / "train-images-idx3-ubyte"))
    labels = read_idx(str(raw / "t10k-labels-idx1-ubyte"))
    assert images.shape == (20, 28, 28) and images.dtype == np.uint8 and labels.shape == (10,)
    assert images.max() == 255 and images[:, :2].max() == 0      # the digits, padded by 2
    header = (raw / "train-labels-idx1-ubyte").read_bytes()[:8]
    assert header == bytes([0, 0, 8, 1, 0, 0, 0, 20])              # MNIST's own header


@pytest.mark.parametrize("backend", ["ember", "torch"])
def test_torchvision_standin_matches_torchvision_semantics(backend, tmp_path, monkeypatch):
    """ToTensor + Normalize on an MNIST image, and save_image, on each framework."""
    torch = pytest.importorskip(backend)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.syspath_prepend(os.path.join(os.path.dirname(__file__), "standins"))
    _forget_torchvision()
    try:
        _check_standin(torch, tmp_path)
    finally:
        _forget_torchvision()                      # it was imported against this framework


def _forget_torchvision():
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]


def _check_standin(torch, tmp_path):
    from torchvision import datasets, transforms, utils
    datagen.write_mnist(str(tmp_path), train_size=8, test_size=4)
    t = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    ds = datasets.MNIST(str(tmp_path), train=True, download=True, transform=t)
    x, y = ds[3]
    raw = ds.data[3].numpy().astype(np.float32) / 255
    assert tuple(x.shape) == (1, 28, 28) and x.dtype == torch.float32 and y == int(ds.targets[3])
    np.testing.assert_allclose(x.numpy()[0], (raw - 0.1307) / 0.3081, rtol=1e-6, atol=1e-6)
    batch = torch.stack([ds[i][0] for i in range(4)]) * 0.3081 + 0.1307
    utils.save_image(batch, str(tmp_path / "grid.png"), nrow=2)
    from PIL import Image
    grid = np.asarray(Image.open(tmp_path / "grid.png"))
    assert grid.shape == (2 * 30 + 2, 2 * 30 + 2, 3)               # 2x2 tiles, padding 2
    np.testing.assert_array_equal(grid[2:30, 2:30, 0], ds.data[0].numpy())
    _check_models(torch)
    _check_image_folder(torch, tmp_path)
    _check_cifar10(torch, tmp_path)


def _check_models(torch):
    """ResNet-18's layout and size as torchvision's (11,689,512 parameters, 122 state dict
    entries, children in torchvision's order); the generated 'pretrained' weights are the same
    numbers on either framework, He-normal in scale."""
    from torchvision import models
    net = models.resnet18(weights=None)
    assert sum(p.numel() for p in net.parameters()) == 11689512
    keys = list(net.state_dict())
    assert len(keys) == 122 and keys[:2] == ["conv1.weight", "bn1.weight"]
    assert "layer2.0.downsample.0.weight" in keys and keys[-2:] == ["fc.weight", "fc.bias"]
    assert [n for n, _ in net.named_children()] == [
        "conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool",
        "fc"]
    assert tuple(net(torch.zeros(2, 3, 32, 32)).shape) == (2, 1000)
    a = models.resnet18(weights=models.ResNet18_Weights.IMAGENET1K_V1).conv1.weight.detach()
    b = models.resnet18(pretrained=True).conv1.weight.detach()
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert abs(float(a.std()) / np.sqrt(2 / 147) - 1) < 0.05
    assert abs(float(a.sum()) + 13.8173) < 1e-3                    # pinned: same on both
    with pytest.raises(ValueError, match="num_classes"):
        models.resnet18(weights="DEFAULT", num_classes=10)
    features = models.vgg16(weights=None).features
    assert len(features) == 31 and isinstance(features[4], torch.nn.MaxPool2d)
    assert tuple(features[28].weight.shape) == (512, 512, 3, 3)


def _check_image_folder(torch, tmp_path):
    from torchvision import datasets, transforms
    datagen.write_images(str(tmp_path / "folder" / "b"), 2, 8, seed=0)
    datagen.write_images(str(tmp_path / "folder" / "a"), 1, 8, seed=1, ext=".jpg")
    (tmp_path / "folder" / "a" / "notes.txt").write_text("not an image")
    ds = datasets.ImageFolder(str(tmp_path / "folder"), transforms.ToTensor())
    assert ds.classes == ["a", "b"] and ds.class_to_idx == {"a": 0, "b": 1}
    assert [os.path.basename(p) for p, _ in ds.samples] == ["img000.jpg", "img000.png",
                                                           "img001.png"]
    assert ds.targets == [0, 1, 1] and len(ds) == 3
    x, y = ds[2]
    assert tuple(x.shape) == (3, 8, 8) and x.dtype == torch.float32 and y == 1


def test_requests_standin_serves_only_mapped_files(tmp_path, monkeypatch):
    import json
    import tarfile
    monkeypatch.syspath_prepend(os.path.join(os.path.dirname(__file__), "standins"))
    monkeypatch.delitem(sys.modules, "requests", raising=False)
    import requests
    try:
        assert requests.__version__ == "0.0-standin"
        archive = tmp_path / "cora.tgz"
        datagen.write_cora_tgz(str(archive), nodes=20, features=8)
        url = "https://example.org/cora.tgz"
        monkeypatch.setenv("REQUESTS_STANDIN_FILES", json.dumps({url: str(archive)}))
        with requests.get(url, stream=True) as r:
            with tarfile.open(fileobj=r.raw, mode="r:gz") as tar:
                assert sorted(tar.getnames()) == ["cora", "cora/cora.cites",
                                                  "cora/cora.content"]
        with pytest.raises(requests.exceptions.ConnectionError, match="no network"):
            requests.get("https://example.org/other.tgz")
    finally:
        del sys.modules["requests"], sys.modules["requests.exceptions"]


def _check_cifar10(torch, tmp_path):
    """CIFAR-10's python batches (7 training images over the five data batches, 3 test) read
    back as torchvision's CIFAR10: data (N, 32, 32, 3) uint8 from the channel-major rows,
    targets a list of ints; Pad and RandomCrop(padding=) as torchvision's on PIL images."""
    import pickle
    from torchvision import datasets, transforms
    datagen.write_cifar10(str(tmp_path), train_size=7, test_size=3, seed=1)
    train = datasets.CIFAR10(str(tmp_path), train=True, download=True)
    test = datasets.CIFAR10(str(tmp_path), train=False, transform=transforms.ToTensor())
    assert len(train) == 7 and len(test) == 3 and train.data.shape == (7, 32, 32, 3)
    assert train.data.dtype == np.uint8 and all(type(t) is int for t in train.targets)
    assert train.classes[0] == "airplane" and train.class_to_idx["truck"] == 9
    with open(tmp_path / "cifar-10-batches-py" / "data_batch_1", "rb") as f:
        batch = pickle.load(f, encoding="latin1")                  # the file this test wrote
    assert len(batch["labels"]) == 2 and batch["data"].shape == (2, 3072)
    np.testing.assert_array_equal(train.data[0, :, :, 1], batch["data"][0, 1024:2048].reshape(
        32, 32))                                                   # the green plane
    assert train.targets[:2] == batch["labels"]
    x, y = test[2]
    assert tuple(x.shape) == (3, 32, 32) and y == test.targets[2]
    np.testing.assert_allclose(x.numpy(), test.data[2].transpose(2, 0, 1) / 255.0, rtol=1e-6)
    img, _ = train[4]
    padded = np.asarray(transforms.Pad(4)(img))
    assert padded.shape == (40, 40, 3) and padded[:4].max() == 0 and padded[:, -4:].max() == 0
    np.testing.assert_array_equal(padded[4:36, 4:36], train.data[4])
    crop = np.asarray(transforms.RandomCrop(32, padding=4)(img))
    assert crop.shape == (32, 32, 3)
    assert any(np.array_equal(crop, padded[i:i + 32, j:j + 32]) for i in range(9)
               for j in range(9))
    np.testing.assert_array_equal(np.asarray(transforms.RandomCrop(32)(img)), train.data[4])
