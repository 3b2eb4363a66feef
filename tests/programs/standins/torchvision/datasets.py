"""torchvision.datasets.MNIST (idx files under ``root/MNIST/raw``), CIFAR10 (the python
batches under ``root/cifar-10-batches-py``), FakeData, ImageFolder."""
import gzip
import os
import pickle

import numpy as np
import torch
from PIL import Image

_SPLITS = {True: "train", False: "t10k"}


def read_idx(path):
    """An idx file (MNIST's format: big-endian header, then uint8 data) as a NumPy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise RuntimeError(f"{path}: not an unsigned-byte idx file")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


class MNIST(torch.utils.data.Dataset):
    """(PIL image of mode 'L', int label) pairs; ``data`` uint8 (N, 28, 28), ``targets`` int64."""

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        self.root, self.train = root, train
        self.transform, self.target_transform = transform, target_transform
        raw = os.path.join(root, "MNIST", "raw")
        stem = _SPLITS[bool(train)]
        files = []
        for kind in ("images-idx3", "labels-idx1"):
            name = os.path.join(raw, f"{stem}-{kind}-ubyte")
            name = name if os.path.exists(name) else name + ".gz"
            if not os.path.exists(name):
                raise RuntimeError(f"Dataset not found at {raw} (this stand-in never downloads)")
            files.append(name)
        self.data = torch.from_numpy(read_idx(files[0]).copy())
        self.targets = torch.from_numpy(read_idx(files[1]).astype(np.int64))

    # torchvision's old names, kept there as deprecated aliases (older tutorials use them)
    @property
    def train_data(self):
        return self.data

    @property
    def test_data(self):
        return self.data

    @property
    def train_labels(self):
        return self.targets

    @property
    def test_labels(self):
        return self.targets

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        img = Image.fromarray(self.data[index].numpy(), mode="L")
        target = int(self.targets[index])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target


class CIFAR10(torch.utils.data.Dataset):
    """(PIL RGB image, int label) pairs from CIFAR-10's python batches (``data_batch_1..5`` for
    training, ``test_batch``; each a pickled dict with ``data`` uint8 (N, 3072) and ``labels``)
    under ``root/cifar-10-batches-py``, the files the tests generate (datagen.write_cifar10);
    ``data`` uint8 (N, 32, 32, 3), ``targets`` a list of ints, as torchvision's."""

    base_folder = "cifar-10-batches-py"
    train_list = [f"data_batch_{i}" for i in range(1, 6)]
    test_list = ["test_batch"]

    def __init__(self, root, train=True, transform=None, target_transform=None,
                 download=False):
        self.root, self.train = root, train
        self.transform, self.target_transform = transform, target_transform
        folder = os.path.join(root, self.base_folder)
        names = self.train_list if train else self.test_list
        if not all(os.path.exists(os.path.join(folder, n)) for n in names):
            raise RuntimeError(f"Dataset not found at {folder} (this stand-in never "
                               f"downloads)")
        if download:
            print("Files already downloaded and verified")
        data, self.targets = [], []
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                entry = pickle.load(f, encoding="latin1")     # files the test wrote
            data.append(entry["data"])
            self.targets.extend(entry["labels"] if "labels" in entry else entry["fine_labels"])
        self.data = np.vstack(data).reshape(-1, 3, 32, 32).transpose((0, 2, 3, 1))
        with open(os.path.join(folder, "batches.meta"), "rb") as f:
            self.classes = pickle.load(f, encoding="latin1")["label_names"]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        img, target = Image.fromarray(self.data[index]), self.targets[index]
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target


class FakeData(torch.utils.data.Dataset):
    """``size`` random RGB images of ``image_size`` (C, H, W) with random labels; image i is
    the same on every access, as torchvision's (seeded by ``random_offset + i``)."""

    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None,
                 target_transform=None, random_offset=0):
        self.size, self.image_size, self.num_classes = size, tuple(image_size), num_classes
        self.transform, self.target_transform = transform, target_transform
        self.random_offset = random_offset

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        if index >= len(self):
            raise IndexError(f"{type(self).__name__} index out of range")
        rng = np.random.default_rng(index + self.random_offset)
        c, h, w = self.image_size
        pixels = rng.integers(0, 256, size=(h, w, c), dtype=np.uint8)
        img = Image.fromarray(pixels[:, :, 0] if c == 1 else pixels, mode="L" if c == 1 else "RGB")
        target = int(rng.integers(0, self.num_classes))
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target


IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def pil_loader(path):
    with open(path, "rb") as f:
        return Image.open(f).convert("RGB")


class ImageFolder(torch.utils.data.Dataset):
    """``root/<class>/**/<image>``: (loaded image, class index) pairs; classes are the sorted
    sub-folder names, samples sorted by path within each class, as torchvision's."""

    def __init__(self, root, transform=None, target_transform=None, loader=pil_loader,
                 is_valid_file=None, allow_empty=False):
        self.root, self.loader = root, loader
        self.transform, self.target_transform = transform, target_transform
        self.extensions = IMG_EXTENSIONS if is_valid_file is None else None
        valid = is_valid_file or (lambda p: p.lower().endswith(IMG_EXTENSIONS))
        self.classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
        if not self.classes:
            raise FileNotFoundError(f"Couldn't find any class folder in {root}.")
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.samples = []
        for c in self.classes:
            for folder, _, names in sorted(os.walk(os.path.join(root, c), followlinks=True)):
                self.samples += [(os.path.join(folder, n), self.class_to_idx[c])
                                 for n in sorted(names) if valid(os.path.join(folder, n))]
        if not self.samples and not allow_empty:
            raise FileNotFoundError(f"Found no valid file for the classes {self.classes} in "
                                    f"{root}.")
        self.imgs, self.targets = self.samples, [t for _, t in self.samples]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, target = self.samples[index]
        sample = self.loader(path)
        if self.transform is not None:
            sample = self.transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target
