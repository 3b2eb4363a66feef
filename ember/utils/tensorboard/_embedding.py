"""The files of TensorBoard's projector (``add_embedding``): ``tensors.tsv``,
``metadata.tsv``, ``sprite.png`` in ``<log_dir>/<step>/<tag>`` and ``projector_config.pbtxt``,
as torch writes them."""
import io
import math
import os

import numpy as np

from ember._optional import require
from ember.errors import EmberValueError
from ember.utils.tensorboard import summary as _summary

_FEATURE = "ember.utils.tensorboard"


def encode_tag(tag):
    """``tag`` made safe as one folder name (``%``, ``/`` and ``\\`` escaped), as torch."""
    return tag.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")


def _write(path, text):
    with open(path, "wb") as f:
        f.write(text.encode() if isinstance(text, str) else text)


def write_embedding(logdir, mat, metadata, label_img, global_step, tag, metadata_header):
    """Write one embedding's files under ``logdir`` and return its EmbeddingInfo proto."""
    proj = require("tensorboard.plugins.projector.projector_config_pb2", feature=_FEATURE,
                   extra="tensorboard")
    mat = _summary.make_np(mat, "add_embedding")
    step = 0 if global_step is None else global_step
    subdir = f"{str(step).zfill(5)}/{encode_tag(tag)}"
    path = os.path.join(logdir, subdir)
    if os.path.exists(path) and not os.path.isdir(path):
        raise EmberValueError(f"add_embedding: {path!r} exists, but is a file")
    os.makedirs(path, exist_ok=True)
    if mat.ndim != 2:
        raise EmberValueError(f"add_embedding: mat should be 2D (points x features), got shape "
                              f"{list(mat.shape)}")
    info = proj.EmbeddingInfo(tensor_name=f"{tag}:{str(step).zfill(5)}",
                              tensor_path=f"{subdir}/tensors.tsv")
    if metadata is not None:
        if mat.shape[0] != len(metadata):
            raise EmberValueError(f"add_embedding: {len(metadata)} labels for "
                                  f"{mat.shape[0]} data points")
        if metadata_header:
            if len(metadata_header) != len(metadata[0]):
                raise EmberValueError("add_embedding: len of header must be equal to the "
                                      "number of columns in metadata")
            rows = ["\t".join(str(e) for e in row) for row in [metadata_header] + list(metadata)]
        else:
            rows = [str(x) for x in metadata]
        _write(os.path.join(path, "metadata.tsv"), "\n".join(rows) + "\n")
        info.metadata_path = f"{subdir}/metadata.tsv"
    if label_img is not None:
        imgs = _summary.make_np(label_img, "add_embedding")
        if imgs.shape[0] != mat.shape[0]:
            raise EmberValueError(f"add_embedding: {imgs.shape[0]} images for "
                                  f"{mat.shape[0]} data points")
        _write(os.path.join(path, "sprite.png"), _sprite(imgs))
        info.sprite.image_path = f"{subdir}/sprite.png"
        info.sprite.single_image_dim.extend([imgs.shape[3], imgs.shape[2]])
    _write(os.path.join(path, "tensors.tsv"),
           "".join("\t".join(str(v.item()) for v in row) + "\n" for row in mat))
    return info


def _sprite(imgs):
    """The N x C x H x W label images tiled into one square PNG."""
    pil = require("PIL.Image", feature=_FEATURE, extra="tensorboard")
    grid = _summary._grid(imgs, ncols=math.ceil(imgs.shape[0] ** 0.5))
    square = np.zeros((grid.shape[2], grid.shape[2], 3))
    hwc = grid.transpose(1, 2, 0)
    square[:hwc.shape[0], :, :] = hwc
    out = io.BytesIO()
    pil.fromarray(np.uint8((square * 255).clip(0, 255))).save(out, format="PNG")
    return out.getvalue()


def write_config(logdir, config):
    """Write the projector's config (all embeddings logged so far) as text."""
    text_format = require("google.protobuf.text_format", feature=_FEATURE,
                          extra="tensorboard")
    _write(os.path.join(logdir, "projector_config.pbtxt"), text_format.MessageToString(config))
