"""Small data sets shipped inside the package.

``load_digits()``: the UCI handwritten digits (1,797 8x8 images, classes 0-9), by E. Alpaydin
and C. Kaynak, UCI Machine Learning Repository, licensed CC BY 4.0; see
``ember/datasets/README.md`` for source and citation.
"""
import os

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))


def load_digits(as_tensors=False):
    """Return (images uint8 (1797, 8, 8) in 0..16, labels uint8 (1797,)); ember Tensors
    (float32 images scaled to [0, 1], int64 labels) when ``as_tensors``."""
    with np.load(os.path.join(_HERE, "digits.npz"), allow_pickle=False) as f:
        images, labels = f["images"], f["labels"]
    if as_tensors:
        from ember.tensor import Tensor
        return (Tensor._make(images.astype(np.float32) / 16.0),
                Tensor._make(labels.astype(np.int64)))
    return images, labels
