"""torchvision.transforms: Compose, ToTensor, Normalize, Lambda, Resize, CenterCrop."""
import numbers

import numpy as np
import torch
from PIL import Image


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class ToTensor:
    """PIL image or HxW[xC] uint8 array -> float32 tensor (C, H, W) in [0, 1]."""

    def __call__(self, pic):
        a = np.array(pic)                  # a writable copy, as torchvision's
        a = a[:, :, None] if a.ndim == 2 else a
        t = torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1)))
        return t.float().div(255) if a.dtype == np.uint8 else t.float()


class Normalize:
    def __init__(self, mean, std, inplace=False):
        self.mean, self.std, self.inplace = mean, std, inplace

    def __call__(self, tensor):
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype).view(-1, 1, 1)
        std = torch.as_tensor(self.std, dtype=tensor.dtype).view(-1, 1, 1)
        out = tensor.sub_(mean) if self.inplace else tensor.sub(mean)
        return out.div_(std)


class Lambda:
    def __init__(self, lambd):
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)


def _size(size):
    return (size, size) if isinstance(size, numbers.Number) else tuple(size)


class Resize:
    """PIL resize, bilinear; an int size sets the shorter side, keeping the aspect ratio."""

    def __init__(self, size, interpolation=Image.BILINEAR):
        self.size, self.interpolation = size, interpolation

    def __call__(self, img):
        w, h = img.size
        if isinstance(self.size, numbers.Number):
            s = int(self.size)
            oh, ow = (s, int(s * w / h)) if h <= w else (int(s * h / w), s)
        else:
            oh, ow = self.size
        return img.resize((ow, oh), self.interpolation)


class CenterCrop:
    def __init__(self, size):
        self.size = _size(size)

    def __call__(self, img):
        w, h = img.size
        th, tw = self.size
        top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
        return img.crop((left, top, left + tw, top + th))
