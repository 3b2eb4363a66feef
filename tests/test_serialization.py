"""ember.save / ember.load: safetensors round trips, torch interop, pickle refusal, atomicity."""
import io
import os
import pickle

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.optim as optim
from ember.serialization import UnsafeFileError


def _model():
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3))


def test_state_dict_roundtrip(tmp_path):
    m = _model()
    path = tmp_path / "m.safetensors"
    ember.save(m.state_dict(), path)
    sd = ember.load(path)
    assert list(sd) == list(m.state_dict())
    m2 = _model()
    m2.load_state_dict(sd)
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), m2.state_dict()[k].numpy())
        assert v.dtype == sd[k].dtype
    assert sd["1.num_batches_tracked"].dtype == ember.int64


def test_nested_checkpoint_roundtrip(tmp_path):
    m = _model()
    opt = optim.Adam(m.parameters(), lr=0.01, betas=(0.8, 0.9))
    m(ember.randn(2, 1, 4, 4)).sum().backward()
    opt.step()
    ck = {"model": m.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "loss": 0.25,
          "name": "lenet", "flags": [True, None, (1, 2.5)], "best": float("inf"),
          "arr": np.arange(4, dtype=np.int32), "scalar": ember.tensor(2.0)}
    ember.save(ck, tmp_path / "ck.st")
    back = ember.load(tmp_path / "ck.st")
    assert back["epoch"] == 3 and back["loss"] == 0.25 and back["name"] == "lenet"
    assert back["flags"] == [True, None, (1, 2.5)] and back["best"] == float("inf")
    assert back["arr"].dtype == ember.int32 and back["scalar"].item() == 2.0
    og = back["optimizer"]
    assert og["param_groups"][0]["betas"] == (0.8, 0.9) and list(og["state"]) == list(range(6))
    opt2 = optim.Adam(_model().parameters())
    opt2.load_state_dict(og)
    assert opt2.param_groups[0]["lr"] == 0.01


def test_file_objects_and_plain_tensor():
    buf = io.BytesIO()
    ember.save(ember.arange(5), buf)
    buf.seek(0)
    t = ember.load(buf)
    assert t.tolist() == [0, 1, 2, 3, 4]


def test_unsupported_object_raises(tmp_path):
    with pytest.raises(TypeError, match="cannot serialize"):
        ember.save({"f": object()}, tmp_path / "x.st")
    assert not os.listdir(tmp_path)


def test_refuses_pickle_files(tmp_path):
    evil = tmp_path / "evil.pkl"

    class Boom:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))
    with open(evil, "wb") as fh:
        pickle.dump(Boom(), fh)
    with pytest.raises(UnsafeFileError, match="pickle"):
        ember.load(evil)
    assert not (tmp_path / "pwned").exists()
    with open(tmp_path / "p0.pkl", "wb") as fh:
        pickle.dump({"a": 1}, fh, protocol=0)
    with pytest.raises(RuntimeError, match="pickle"):
        ember.load(tmp_path / "p0.pkl")
    (tmp_path / "junk.bin").write_bytes(b"hello world, not a tensor file")
    with pytest.raises(UnsafeFileError, match="not a safetensors"):
        ember.load(tmp_path / "junk.bin")


def test_refuses_torch_save_zip(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.ones(2)}, tmp_path / "t.pt")
    with pytest.raises(UnsafeFileError, match="zip"):
        ember.load(tmp_path / "t.pt")


def test_atomic_save_keeps_old_file_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "ck.st"
    ember.save({"w": ember.ones(3)}, path)
    before = path.read_bytes()

    def boom(src, dst):
        raise OSError("disk on fire")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk on fire"):
        ember.save({"w": ember.zeros(3)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert ember.load(path)["w"].tolist() == [1, 1, 1]
    assert sorted(os.listdir(tmp_path)) == ["ck.st"]


def test_atomic_save_failure_while_writing(tmp_path, monkeypatch):
    path = tmp_path / "ck.st"
    ember.save({"w": ember.ones(3)}, path)

    def bad_fsync(fd):
        raise OSError("fsync failed")
    monkeypatch.setattr(os, "fsync", bad_fsync)
    with pytest.raises(OSError):
        ember.save({"w": ember.zeros(3)}, path)
    monkeypatch.undo()
    assert ember.load(path)["w"].tolist() == [1, 1, 1]
    assert sorted(os.listdir(tmp_path)) == ["ck.st"]


def test_torch_written_safetensors_loads_into_same_architecture(tmp_path):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    tm = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2),
                             torch.nn.Flatten(), torch.nn.Linear(8, 3))
    tm(torch.randn(4, 1, 4, 4))
    st.save_file(tm.state_dict(), str(tmp_path / "torch.safetensors"))
    m = _model()
    m.load_state_dict(ember.load(tmp_path / "torch.safetensors"))
    m.eval()
    tm.eval()
    x = np.random.default_rng(0).standard_normal((2, 1, 4, 4)).astype(np.float32)
    with torch.no_grad():
        np.testing.assert_allclose(m(ember.tensor(x)).detach().numpy(),
                                   tm(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
    ember.save(m.state_dict(), tmp_path / "ember.safetensors")
    back = st.load_file(str(tmp_path / "ember.safetensors"))
    tm.load_state_dict(back)
