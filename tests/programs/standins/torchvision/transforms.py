"""torchvision.transforms: Compose, ToTensor, Normalize, Lambda, Resize, CenterCrop,
RandomResizedCrop, RandomHorizontalFlip, Pad, RandomCrop (their random draws from torch's
generator, as torchvision's)."""
import math
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


class RandomResizedCrop:
    """A crop of random area (``scale`` of the image's) and aspect ratio (``ratio``, drawn
    log-uniformly), resized to ``size``; after 10 misses, the central crop of the ratio
    clamped to ``ratio``."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=Image.BILINEAR, antialias=True):
        self.size, self.scale, self.ratio = _size(size), scale, ratio
        self.interpolation = interpolation

    @staticmethod
    def get_params(img, scale, ratio):
        width, height = img.size
        area = height * width
        log_ratio = torch.log(torch.tensor(ratio))
        for _ in range(10):
            target_area = area * torch.empty(1).uniform_(scale[0], scale[1]).item()
            aspect = math.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1]).item())
            w = int(round(math.sqrt(target_area * aspect)))
            h = int(round(math.sqrt(target_area / aspect)))
            if 0 < w <= width and 0 < h <= height:
                i = torch.randint(0, height - h + 1, size=(1,)).item()
                j = torch.randint(0, width - w + 1, size=(1,)).item()
                return i, j, h, w
        in_ratio = float(width) / float(height)
        if in_ratio < min(ratio):
            w, h = width, int(round(width / min(ratio)))
        elif in_ratio > max(ratio):
            h, w = height, int(round(height * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img):
        i, j, h, w = self.get_params(img, self.scale, self.ratio)
        return img.crop((j, i, j + w, i + h)).resize(self.size[::-1], self.interpolation)


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) < self.p:
            return img.transpose(Image.FLIP_LEFT_RIGHT)
        return img


def _padding(padding):
    """torchvision's padding forms: int (all sides), (left/right, top/bottom), or (left, top,
    right, bottom)."""
    if isinstance(padding, numbers.Number):
        return (int(padding),) * 4
    padding = tuple(int(p) for p in padding)
    return padding * 2 if len(padding) == 2 else padding


class Pad:
    """Constant padding of a PIL image by ``padding`` pixels (``fill``); only padding_mode
    'constant', the one the programs run here use."""

    def __init__(self, padding, fill=0, padding_mode="constant"):
        if padding_mode != "constant":
            raise NotImplementedError(f"Pad: the stand-in has only padding_mode='constant', "
                                      f"not {padding_mode!r}")
        self.padding, self.fill = _padding(padding), fill

    def __call__(self, img):
        from PIL import ImageOps
        return ImageOps.expand(img, border=self.padding, fill=self.fill)


class RandomCrop:
    """A crop of ``size`` at a random place (top, then left, each from torch.randint, as
    torchvision's), after an optional constant ``padding``."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0,
                 padding_mode="constant"):
        if pad_if_needed:
            raise NotImplementedError("RandomCrop: the stand-in has no pad_if_needed")
        self.size = _size(size)
        self.pad = None if padding is None else Pad(padding, fill, padding_mode)

    @staticmethod
    def get_params(img, output_size):
        w, h = img.size
        th, tw = output_size
        if h < th or w < tw:
            raise ValueError(f"Required crop size {(th, tw)} is larger than input image size "
                             f"{(h, w)}")
        if w == tw and h == th:
            return 0, 0, h, w
        i = torch.randint(0, h - th + 1, size=(1,)).item()
        j = torch.randint(0, w - tw + 1, size=(1,)).item()
        return i, j, th, tw

    def __call__(self, img):
        if self.pad is not None:
            img = self.pad(img)
        i, j, h, w = self.get_params(img, self.size)
        return img.crop((j, i, j + w, i + h))
