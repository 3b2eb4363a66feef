"""The projector files of add_embedding (ember/utils/tensorboard/_embedding.py) are byte for byte
torch's: tensors.tsv, metadata.tsv (plain and with a header), sprite.png, and
projector_config.pbtxt."""
import numpy as np
import pytest

pytest.importorskip("tensorboard")

import ember  # noqa: E402
from ember.utils.tensorboard import SummaryWriter  # noqa: E402


def _log(lib, writer_cls, folder):
    rng = np.random.default_rng(0)
    with writer_cls(str(folder)) as w:
        w.add_embedding(lib.tensor(rng.random((4, 3))), metadata=["a", "b", "c", "d"],
                        label_img=lib.tensor(rng.random((4, 3, 2, 2))), tag="emb/x")
        w.add_embedding(lib.tensor(rng.random((2, 2))), metadata=[[1, "x"], [2, "y"]],
                        metadata_header=["id", "name"], global_step=3)


def test_projector_files_are_torchs(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
    _log(ember, SummaryWriter, tmp_path / "ember")
    _log(torch, TorchWriter, tmp_path / "torch")
    for f in ("projector_config.pbtxt", "00000/emb%2fx/tensors.tsv", "00000/emb%2fx/metadata.tsv",
              "00000/emb%2fx/sprite.png", "00003/default/metadata.tsv",
              "00003/default/tensors.tsv"):
        assert (tmp_path / "ember" / f).read_bytes() == (tmp_path / "torch" / f).read_bytes(), f
