"""torchvision.utils.make_grid and save_image."""
import math

import numpy as np
import torch
from PIL import Image


def make_grid(tensor, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False,
              pad_value=0.0):
    """A (B, C, H, W) batch (or list of (C, H, W)) tiled into one (3 or C, H', W') image."""
    if isinstance(tensor, (list, tuple)):
        tensor = torch.stack(list(tensor), dim=0)
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(0)
    if tensor.dim() == 3:
        tensor = tensor.unsqueeze(0)
    if tensor.size(1) == 1:
        tensor = torch.cat((tensor, tensor, tensor), 1)
    tensor = tensor.clone()
    if normalize:
        lo, hi = value_range if value_range is not None else (float(tensor.min()),
                                                              float(tensor.max()))
        tensor = tensor.clamp(min=lo, max=hi).sub(lo).div(max(hi - lo, 1e-5))
    n = tensor.size(0)
    xmaps = min(nrow, n)
    ymaps = int(math.ceil(float(n) / xmaps))
    height, width = int(tensor.size(2) + padding), int(tensor.size(3) + padding)
    grid = torch.full((tensor.size(1), height * ymaps + padding, width * xmaps + padding),
                      pad_value, dtype=tensor.dtype)
    k = 0
    for y in range(ymaps):
        for x in range(xmaps):
            if k >= n:
                break
            grid[:, y * height + padding:(y + 1) * height,
                 x * width + padding:(x + 1) * width] = tensor[k]
            k += 1
    return grid


def save_image(tensor, fp, format=None, **kwargs):
    """make_grid, then the image as 8-bit RGB through PIL."""
    grid = make_grid(tensor, **kwargs)
    arr = grid.mul(255).add_(0.5).clamp_(0, 255).permute(1, 2, 0).to(torch.uint8).numpy()
    Image.fromarray(np.ascontiguousarray(arr)).save(fp, format=format)
