"""Small data in the formats pytorch/examples programs read, generated instead of downloaded:
MNIST idx files, CIFAR-10 python batches, a word corpus, RGB images, Cora (NumPy and PIL only,
no framework)."""
import os

import numpy as np

# ember's bundled UCI digits (ember/datasets/README.md), read as NumPy arrays
DIGITS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "ember", "datasets", "digits.npz")


def write_idx(path, array):
    """``array`` (uint8) as an idx file: zero, zero, type 0x08, ndim, big-endian sizes, data."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 0x08, array.ndim]))
        for n in array.shape:
            f.write(int(n).to_bytes(4, "big"))
        f.write(array.tobytes())


def write_mnist(root, train_size=512, test_size=128):
    """``root/MNIST/raw`` as torchvision lays it out: the bundled UCI digits (8x8, 0..16),
    each pixel a 3x3 block, padded to 28x28 and scaled to 0..255; the test images follow the
    training images in the digits' order."""
    with np.load(DIGITS, allow_pickle=False) as f:
        images, labels = f["images"], f["labels"]
    if train_size + test_size > len(images):
        raise ValueError(f"write_mnist: {train_size} + {test_size} > {len(images)} digits")
    big = np.kron(images.astype(np.float64), np.ones((3, 3)))           # (N, 24, 24)
    big = np.pad(big, ((0, 0), (2, 2), (2, 2))) * (255.0 / 16.0)
    big = np.rint(big).astype(np.uint8)
    raw = os.path.join(root, "MNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    splits = {"train": slice(0, train_size), "t10k": slice(train_size, train_size + test_size)}
    for stem, part in splits.items():
        write_idx(os.path.join(raw, f"{stem}-images-idx3-ubyte"), big[part])
        write_idx(os.path.join(raw, f"{stem}-labels-idx1-ubyte"), labels[part])


CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck"]


def write_cifar10(root, train_size=50, test_size=20, seed=0):
    """``root/cifar-10-batches-py`` as CIFAR-10's python version lays it out: ``data_batch_1``
    .. ``data_batch_5`` (the ``train_size`` images split among them) and ``test_batch``, each a
    pickled dict with ``data`` uint8 (N, 3072, channel-major rows) and ``labels``, and
    ``batches.meta`` with ``label_names``. Image i of class c: a smooth pattern whose
    frequencies and colour depend on c, plus noise, so that a classifier has something to
    learn."""
    import pickle
    rng = np.random.default_rng(seed)
    folder = os.path.join(root, "cifar-10-batches-py")
    os.makedirs(folder, exist_ok=True)
    yy, xx = np.mgrid[0:32, 0:32] / 32.0

    def batch(n, label):
        labels = rng.integers(0, 10, size=n)
        images = np.empty((n, 3, 32, 32))
        for i, c in enumerate(labels):
            for ch in range(3):
                phase = rng.uniform(0, 2 * np.pi)
                images[i, ch] = 0.5 + 0.4 * np.sin(2 * np.pi * ((1 + c % 5) * xx + (
                    1 + (c + ch) % 3) * yy) + phase)
        images += rng.normal(0, 0.05, size=images.shape)
        data = np.rint(np.clip(images, 0, 1) * 255).astype(np.uint8).reshape(n, 3072)
        return {"batch_label": label, "labels": [int(c) for c in labels], "data": data,
                "filenames": [f"img{i:05d}.png" for i in range(n)]}

    sizes = [train_size // 5 + (k < train_size % 5) for k in range(5)]
    for k, n in enumerate(sizes):
        with open(os.path.join(folder, f"data_batch_{k + 1}"), "wb") as f:
            pickle.dump(batch(n, f"training batch {k + 1} of 5"), f)
    with open(os.path.join(folder, "test_batch"), "wb") as f:
        pickle.dump(batch(test_size, "testing batch 1 of 1"), f)
    with open(os.path.join(folder, "batches.meta"), "wb") as f:
        pickle.dump({"label_names": CIFAR10_CLASSES, "num_cases_per_batch": max(sizes),
                     "num_vis": 3072}, f)


def write_corpus(folder, train_lines=300, other_lines=40, seed=0):
    """train.txt, valid.txt, test.txt as in wikitext-2 (one sentence a line, words split by
    spaces) from a small grammar, so that a language model has context to learn."""
    rng = np.random.default_rng(seed)
    subjects, verbs = ["the cat", "a dog", "the bird", "my friend"], ["sees", "likes", "finds"]
    objects, places = ["the ball", "a tree", "the house"], ["in the park", "at home", "today"]

    def sentence():
        parts = [subjects[rng.integers(4)], verbs[rng.integers(3)], objects[rng.integers(3)]]
        if rng.random() < 0.5:
            parts.append(places[rng.integers(3)])
        return " " + " ".join(parts) + " . "

    os.makedirs(folder, exist_ok=True)
    for name, n in (("train", train_lines), ("valid", other_lines), ("test", other_lines)):
        with open(os.path.join(folder, name + ".txt"), "w", encoding="utf8") as f:
            f.write("\n".join(sentence() for _ in range(n)) + "\n")


def write_images(folder, count, size, seed=0, ext=".png"):
    """``count`` smooth RGB images of ``size`` x ``size`` (sums of random sinusoids), PIL-saved."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    yy, xx = np.mgrid[0:size, 0:size] / size
    for i in range(count):
        img = np.zeros((size, size, 3))
        for c in range(3):
            fx, fy, phase = rng.uniform(1, 6, size=3)
            img[:, :, c] = 0.5 + 0.5 * np.sin(2 * np.pi * (fx * xx + fy * yy) + phase)
        Image.fromarray(np.rint(img * 255).astype(np.uint8)).save(
            os.path.join(folder, f"img{i:03d}{ext}"))


def write_cora(folder, nodes=1800, features=64, classes=7, edges_per_node=2, seed=0):
    """``cora.content`` (paper id, binary word features, class name a line) and ``cora.cites``
    (cited id, citing id a line), Cora's layout: features drawn with class-dependent rates,
    and citations mostly between papers of one class."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(10 ** 6, size=nodes, replace=False) + 1
    labels = rng.integers(classes, size=nodes)
    rates = np.full((classes, features), 0.05)
    for c in range(classes):
        rates[c, rng.choice(features, size=features // classes, replace=False)] = 0.5
    x = (rng.random((nodes, features)) < rates[labels]).astype(np.int64)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "cora.content"), "w") as f:
        for i in range(nodes):
            f.write(f"{ids[i]}\t" + "\t".join(map(str, x[i])) + f"\tClass_{labels[i]}\n")
    with open(os.path.join(folder, "cora.cites"), "w") as f:
        for i in range(nodes):
            for _ in range(edges_per_node):
                same = np.flatnonzero(labels == labels[i])
                j = rng.choice(same) if rng.random() < 0.8 else rng.integers(nodes)
                if j != i:
                    f.write(f"{ids[j]}\t{ids[i]}\n")


def write_cora_tgz(path, **kwargs):
    """``cora.tgz`` as linqs-data serves it: a gzip tar holding the folder ``cora/`` with
    ``cora.content`` and ``cora.cites`` (write_cora's, ``kwargs`` passed on)."""
    import tarfile
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        write_cora(os.path.join(tmp, "cora"), **kwargs)
        with tarfile.open(path, "w:gz") as tar:
            tar.add(os.path.join(tmp, "cora"), arcname="cora")
