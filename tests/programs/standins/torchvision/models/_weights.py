"""Weights enums for the stand-in's model builders. The stand-in never downloads: asking for
pretrained weights (``weights=...`` or ``pretrained=True``) gives GENERATED stand-in weights,
drawn deterministically from the architecture and parameter names (the same numbers on torch
and on ember), not ImageNet weights. They keep activations at a steady scale (He-normal
convolutions and linear layers, zero biases, unit batch-norm scales), which is all the
programs run here need of them (a fixed feature extractor, an initial model)."""
import enum
import zlib

import numpy as np
import torch


def weights_enum(name, arch):
    """The enum ``name`` (``ResNet18_Weights`` ...) of one member, ``IMAGENET1K_V1`` (also
    ``DEFAULT``), whose value is ``arch``: it names the generated stand-in weights."""
    return enum.Enum(name, [("IMAGENET1K_V1", arch), ("DEFAULT", arch)])


def generated_state_dict(model, arch):
    """A state dict for ``model`` with every entry drawn from a generator seeded by
    ``arch`` and the entry's name: weights of two or more dimensions N(0, 2 / fan_in),
    one-dimensional weights (norm scales) 1, biases and running means 0, running variances 1."""
    state = {}
    for name, value in model.state_dict().items():
        shape, leaf = tuple(value.shape), name.rsplit(".", 1)[-1]
        if leaf == "weight" and len(shape) > 1:
            rng = np.random.default_rng(zlib.crc32(f"{arch}.{name}".encode()))
            fan_in = int(np.prod(shape[1:]))
            array = rng.standard_normal(shape, dtype=np.float32) * np.float32(
                np.sqrt(2.0 / fan_in))
        elif leaf in ("weight", "running_var"):
            array = np.ones(shape, dtype=np.float32)
        elif leaf == "num_batches_tracked":
            state[name] = torch.zeros((), dtype=torch.int64)
            continue
        else:
            array = np.zeros(shape, dtype=np.float32)
        state[name] = torch.from_numpy(array)
    return state


def build(model_fn, weights, kwargs, weights_cls):
    """``model_fn(pretrained, **kwargs)``, loaded with the generated weights when asked for:
    ``weights`` (an enum member, its name, or None) or the legacy ``pretrained=True``
    (torchvision's IMAGENET1K_V1)."""
    if kwargs.pop("pretrained", False) and weights is None:
        weights = weights_cls.IMAGENET1K_V1
    if isinstance(weights, str):
        weights = weights_cls[weights]
    if weights is not None and not isinstance(weights, weights_cls):
        raise ValueError(f"The weights {weights!r} are not {weights_cls.__name__}")
    if weights is not None:
        classes = kwargs.setdefault("num_classes", 1000)
        if classes != 1000:
            raise ValueError(f"The parameter 'num_classes' expected value 1000 but got "
                             f"{classes} instead.")
    model = model_fn(weights is not None, **kwargs)
    if weights is not None:
        model.load_state_dict(generated_state_dict(model, weights.value))
    return model
