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
    assert isinstance(back["arr"], np.ndarray) and back["arr"].dtype == np.int32  # same type
    assert isinstance(back["scalar"], ember.Tensor) and back["scalar"].item() == 2.0
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


def test_torch_save_zip_loads_through_the_pickle_free_reader(tmp_path):
    torch = pytest.importorskip("torch")      # details: tests/test_torch_files.py
    torch.save({"w": torch.ones(2)}, tmp_path / "t.pt")
    assert ember.load(tmp_path / "t.pt")["w"].tolist() == [1.0, 1.0]


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


# ---------------------------------------------------------------------------- damaged files
def _header_edit(data, edit):
    """``data`` re-encoded after ``edit(header_dict)`` (tensor bytes unchanged)."""
    import json
    import struct
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    edit(header)
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data[8 + n:]


def _doc_edit(edit):
    import json

    def run(header):
        doc = json.loads(header["__metadata__"]["ember"])
        edit(doc)
        header["__metadata__"]["ember"] = json.dumps(doc)
    return run


@pytest.mark.parametrize("damage,match", [
    (lambda d: d[:-3], r"truncated: tensor 'w' needs bytes \[\d+, \d+\)"),
    (lambda d: d[:30], r"truncated: its header claims \d+ bytes"),
    (lambda d: d[:5], r"not a safetensors file \(only 5 bytes\)"),
    (lambda d: b"", r"not a safetensors file \(it is empty\)"),
    (lambda d: d[:9] + b"\x00" + d[10:], "corrupt safetensors header"),
    (lambda d: _header_edit(d, lambda h: h["w"].update(shape=[7])), "needs 28 bytes"),
    (lambda d: _header_edit(d, lambda h: h["w"].pop("dtype")), "corrupt header entry"),
    (lambda d: _header_edit(d, lambda h: h["__metadata__"].update(ember="{")),
     "corrupt 'ember' metadata"),
    (lambda d: _header_edit(d, _doc_edit(lambda doc: doc.update(format=7))),
     "format version 7; this ember reads version 1"),
    (lambda d: _header_edit(d, _doc_edit(lambda doc: doc["structure"]["__dict__"].update(
        extra={"__tensor__": "gone"}))), "names tensor 'gone', which the file does not contain"),
    (lambda d: _header_edit(d, _doc_edit(lambda doc: doc.update(structure={"__items__": [1]}))),
     "corrupt 'ember' structure"),
])
def test_damaged_files_raise_clear_errors(tmp_path, damage, match):
    from ember.serialization import SerializationError
    path = tmp_path / "ck.st"
    ember.save({"w": ember.ones(3), "step": 2}, path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(SerializationError, match=r"ember.load: '.*ck.st'.*" + match):
        ember.load(path)


# ---------------------------------------------------------------------------- file modes
def _writers():
    def ember_save(path):
        ember.save({"w": ember.ones(2)}, path)

    traced = []

    def jit_save(path):   # one traced function: the same bytes on every save
        traced[:] = traced or [ember.jit.trace(lambda x: x + 1, (ember.randn(2),))]
        ember.jit.save(traced[0], path)

    def onnx_export(path):
        pytest.importorskip("onnx")
        ember.onnx.export(lambda x: x + 1, (ember.randn(2),), path)

    def onnx_run_save(path):   # ember onnx run --save
        from ember.onnx.cli import _save_outputs
        _save_outputs(path, ["y"], [np.arange(3.0)])
    return [ember_save, jit_save, onnx_export, onnx_run_save]


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
@pytest.mark.parametrize("write", _writers(), ids=lambda w: w.__name__)
def test_saved_files_get_the_umask_mode_and_keep_an_existing_mode(tmp_path, write, umask):
    import stat
    for mask, mode in ((0o022, 0o644), (0o027, 0o640), (0o002, 0o664)):
        umask(mask)
        path = tmp_path / f"new{mask:o}"
        write(path)
        assert stat.S_IMODE(os.stat(path).st_mode) == mode
    umask(0o077)
    path = tmp_path / "existing"
    path.write_bytes(b"old")
    os.chmod(path, 0o604)
    write(path)
    assert path.read_bytes() != b"old" and stat.S_IMODE(os.stat(path).st_mode) == 0o604
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing", "new2", "new22", "new27"]


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name != "posix", reason="POSIX symlinks")
@pytest.mark.parametrize("write", _writers(), ids=lambda w: w.__name__)
def test_saving_to_a_symlink_writes_through_to_its_target(tmp_path, write, umask):
    """As open(path, "wb") and torch.save: the link stays a link, its target gets the new bytes
    (atomically, the temp file in the target's folder, the target's mode kept), also through a
    relative link, a chain of links, a linked folder, and a dangling link (target created)."""
    import stat
    umask(0o022)
    real, links = tmp_path / "real", tmp_path / "links"
    real.mkdir()
    links.mkdir()
    target = real / "model.bin"
    target.write_bytes(b"stale")
    os.chmod(target, 0o640)
    os.symlink(target, links / "abs")
    os.symlink(os.path.join("..", "real", "model.bin"), links / "rel")
    os.symlink(links / "abs", links / "chain")
    os.symlink(real, tmp_path / "folder_link")
    via = [links / "abs", links / "rel", links / "chain", tmp_path / "folder_link" / "model.bin"]
    fresh = tmp_path / "direct.bin"
    write(fresh)
    want = fresh.read_bytes()
    for link in via:
        target.write_bytes(b"stale")
        write(link)
        got = target.read_bytes()   # safetensors' metadata order varies: compare by size
        assert got != b"stale" and len(got) == len(want) and got[:8] == want[:8], link
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
        if link.parent == links:
            assert os.path.islink(link)
    assert sorted(os.listdir(real)) == ["model.bin"]
    assert sorted(os.listdir(links)) == ["abs", "chain", "rel"]
    os.symlink(real / "new.bin", links / "dangling")
    write(links / "dangling")
    assert os.path.islink(links / "dangling") and len((real / "new.bin").read_bytes()) == len(want)
    assert stat.S_IMODE(os.stat(real / "new.bin").st_mode) == 0o644


def test_torch_save_writes_through_a_symlink_too(tmp_path):
    torch = pytest.importorskip("torch")
    target = tmp_path / "t.pt"
    target.write_bytes(b"stale")
    os.symlink(target, tmp_path / "link.pt")
    torch.save({"w": torch.ones(2)}, tmp_path / "link.pt")
    assert os.path.islink(tmp_path / "link.pt") and target.read_bytes() != b"stale"


# ---------------------------------------------------------------------------- safe globals
def test_safe_globals_register_functions_by_name():
    from ember.errors import EmberTypeError, EmberValueError
    from ember.serialization import add_safe_globals, get_safe_globals, safe_globals

    def make():
        class Fn(ember.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g
        return Fn
    a, b = make(), make()
    before = get_safe_globals()
    with safe_globals([a]):
        assert (a, f"{__name__}.{a.__qualname__}") in get_safe_globals()
        with pytest.raises(EmberValueError, match="already registered for another class"):
            add_safe_globals([b])
        add_safe_globals([a])  # the same class and name again: nothing to do
    assert get_safe_globals() == before
    with pytest.raises(EmberTypeError, match="subclass of ember.autograd.Function"):
        add_safe_globals([os.system])
    with pytest.raises(EmberTypeError, match="a list"):
        add_safe_globals(a)


# ---------------------------------------------------------------- whole modules
class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 1)
        self.head = nn.Linear(8, 3)
        self.tied = nn.Linear(8, 3)
        self.tied.weight = self.head.weight  # shared: stored once, shared again after load
        self.rnn = nn.GRU(8, 4)
        self.register_buffer("steps", ember.zeros(1))
        self.scale = 2.5
        self.kinds = {"a": (1, ember.float64)}

    def forward(self, x):
        return self.head(self.enc(x)) * self.scale + self.rnn(x)[0].sum()


class _Counted(nn.Module):
    """Counts __init__ calls: loading must not run it."""
    inits = 0

    def __init__(self, n=3):
        super().__init__()
        type(self).inits += 1
        self.fc = nn.Linear(n, 2)
        self.act = nn.functional.relu
        self.norm_layer = nn.BatchNorm1d          # a Module class as an attribute (torchvision)
        self.where = ember.device("cpu")
        self.shape = ember.Size([2, n])

    def forward(self, x):
        return self.act(self.fc(x))

    def __setstate__(self, state):
        raise AssertionError("ember.load must not call __setstate__")


def _rewrite_structure(path, edit):
    """Rewrite the JSON structure of an ember file in place with ``edit(structure)``."""
    import json
    import struct
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    doc = json.loads(header["__metadata__"]["ember"])
    edit(doc["structure"])
    header["__metadata__"]["ember"] = json.dumps(doc)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])


def test_whole_model_of_a_user_class_roundtrips_without_registration(tmp_path):
    """torch.save(model, f) / torch.load(f) of a user's Module subclass: the class resolves in
    its already imported module, whatever weights_only says; tied parameters stay tied, the
    training flag and plain attributes come back, no hooks appear."""
    import pathlib
    m = _Net().eval()
    x = ember.randn(4, 2, 8)
    for dest, kw in ((tmp_path / "m.pt", {}), (str(tmp_path / "s.pt"), {"weights_only": False}),
                     (io.BytesIO(), {"map_location": "cpu"}),
                     (pathlib.Path(tmp_path / "d.pt"), {"map_location": ember.device("cpu")})):
        ember.save(m, dest)
        if isinstance(dest, io.BytesIO):
            dest.seek(0)
        m2 = ember.load(dest, **kw)
        assert type(m2) is _Net and m2.training is False and m2.enc.training is False
        assert m2.tied.weight is m2.head.weight and isinstance(m2.head.weight, nn.Parameter)
        assert m2.scale == 2.5 and m2.kinds == {"a": (1, ember.float64)}
        assert m2.enc.layers[0].activation is nn.functional.relu
        assert list(m2.state_dict()) == list(m.state_dict())
        assert not m2._forward_hooks and not m2._forward_pre_hooks and not m2._backward_hooks
        np.testing.assert_array_equal(m2(x).detach().numpy(), m(x).detach().numpy())
    m2.train()
    assert m2.head.training and not m.head.training
    m2(x).sum().backward()
    assert m2.head.weight.grad is not None and m.head.weight.grad is None


def test_whole_model_is_built_without_running_its_code(tmp_path):
    m = _Counted()
    before = _Counted.inits
    ember.save(m, tmp_path / "c.pt")
    m2 = ember.load(tmp_path / "c.pt")
    assert _Counted.inits == before and type(m2) is _Counted
    assert m2.act is nn.functional.relu and m2.norm_layer is nn.BatchNorm1d
    assert m2.where == ember.device("cpu") and m2.shape == ember.Size([2, 3])
    assert isinstance(m2.shape, ember.Size)
    x = ember.randn(5, 3)
    np.testing.assert_array_equal(m2(x).detach().numpy(), m(x).detach().numpy())


class _Hooked(nn.Module):
    """Registers its own method as a forward hook (a common pattern)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.calls = 0
        self.register_forward_hook(self._count)

    def _count(self, module, args, out):
        self.calls += 1

    def forward(self, x):
        return self.fc(x)


def test_a_module_method_registered_as_hook_is_saved_bound_to_the_loaded_module(tmp_path):
    m = _Hooked()
    m(ember.ones(1, 2))
    ember.save(m, tmp_path / "h.pt")
    m2 = ember.load(tmp_path / "h.pt")
    (hook,) = m2._forward_hooks.values()
    assert hook.__self__ is m2 and hook.__func__ is _Hooked._count
    m2(ember.ones(1, 2))
    assert m2.calls == 2 and m.calls == 1

    def edit(st):  # a file naming another method, or one of another object, is refused
        st["__state__"]["_forward_hooks"]["__items__"][0][1]["__method__"] = "nope"
    _rewrite_structure(tmp_path / "h.pt", edit)
    with pytest.raises(ember.serialization.SerializationError, match="_Hooked.nope"):
        ember.load(tmp_path / "h.pt")


@pytest.mark.filterwarnings("ignore:.*is deprecated in favor of")
@pytest.mark.parametrize("wrap", ["weight_norm", "spectral_norm"])
def test_modules_with_weight_or_spectral_norm_hooks_save_whole(tmp_path, wrap):
    """torch pickles the WeightNorm/SpectralNorm hook objects; ember stores them as ember hook
    classes from a fixed list (they were refused as unknown callables)."""
    m = getattr(nn.utils, wrap)(nn.Linear(3, 4)).eval()
    ember.save(m, tmp_path / "w.pt")
    m2 = ember.load(tmp_path / "w.pt")
    (hook,) = m2._forward_pre_hooks.values()
    (orig,) = m._forward_pre_hooks.values()
    assert type(hook) is type(orig) and vars(hook) == vars(orig)
    x = ember.randn(2, 3)
    np.testing.assert_allclose(m2(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)

    def edit(st):
        st["__state__"]["_forward_pre_hooks"]["__items__"][0][1]["__hook__"] = "os.system"
    _rewrite_structure(tmp_path / "w.pt", edit)
    with pytest.raises(ember.serialization.SerializationError, match="'os.system'"):
        ember.load(tmp_path / "w.pt")


def test_pruned_modules_save_whole_and_prune_on(tmp_path):
    """The pruning methods' hook objects (a PruningContainer of two rounds, a structured
    method, a custom mask) are ember hook classes from the fixed list: the loaded model
    computes the same, prunes further and removes its pruning as the original would."""
    from ember.nn.utils import prune
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    prune.l1_unstructured(m[0], "weight", amount=0.5)
    prune.random_unstructured(m[0], "weight", amount=0.3)
    prune.ln_structured(m[2], "weight", amount=1, n=2, dim=0)
    prune.custom_from_mask(m[2], "bias", ember.tensor([1.0, 0.0]))
    ember.save(m, tmp_path / "p.pt")
    m2 = ember.load(tmp_path / "p.pt")
    (container,) = m2[0]._forward_pre_hooks.values()
    assert [type(h).__name__ for h in container._pruning_methods] == \
        ["L1Unstructured", "RandomUnstructured"]
    x = ember.randn(5, 4)
    np.testing.assert_array_equal(m2(x).detach().numpy(), m(x).detach().numpy())
    for model in (m, m2):
        prune.l1_unstructured(model[0], "weight", amount=0.2)
        prune.remove(model[0], "weight")
        prune.remove(model[2], "bias")
    np.testing.assert_array_equal(m2[0].weight.detach().numpy(), m[0].weight.detach().numpy())
    assert [n for n, _ in m2.named_parameters()] == [n for n, _ in m.named_parameters()]


def test_parametrized_modules_are_refused_as_torch(tmp_path):
    torch = pytest.importorskip("torch")
    tm = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 3))
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        torch.save(tm, io.BytesIO())
    m = nn.Sequential(nn.utils.parametrizations.weight_norm(nn.Linear(3, 3)))
    with pytest.raises(ember.errors.EmberRuntimeError,
                       match="only supported through state_dict.*module at '0'"):
        ember.save(m, tmp_path / "p.pt")
    ember.save(m.state_dict(), tmp_path / "sd.pt")  # the supported way


def test_checkpoint_dict_with_models_and_optimizer_state(tmp_path):
    m = _Counted()
    opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    m(ember.randn(4, 3)).sum().backward()
    opt.step()
    shared = nn.Linear(3, 3)
    ember.save({"model": m, "opt": opt.state_dict(), "epoch": 3,
                "pair": [shared, nn.Sequential(shared, nn.ReLU())]}, tmp_path / "ck.pt")
    ck = ember.load(tmp_path / "ck.pt")
    assert ck["epoch"] == 3 and type(ck["model"]) is _Counted
    a, seq = ck["pair"]
    assert seq[0] is a  # a module shared across entries stays shared
    opt2 = optim.SGD(ck["model"].parameters(), lr=1.0)
    opt2.load_state_dict(ck["opt"])
    assert opt2.param_groups[0]["lr"] == 0.1 and opt2.param_groups[0]["momentum"] == 0.9
    np.testing.assert_array_equal(ck["model"].fc.weight.detach().numpy(),
                                  m.fc.weight.detach().numpy())


def test_registered_names_still_resolve(tmp_path):
    from ember.serialization import safe_globals
    m = _Counted()
    with safe_globals([(_Counted, "mylib.Counted")]):
        ember.save(m, tmp_path / "r.pt")
        assert type(ember.load(tmp_path / "r.pt")) is _Counted
    with pytest.raises(ember.serialization.SerializationError,
                       match="'mylib.Counted'.*add_safe_globals"):
        ember.load(tmp_path / "r.pt")  # saved under the registered name only


def test_a_class_of_a_module_not_imported_is_refused_naming_the_module(tmp_path, monkeypatch):
    import importlib
    import sys
    (tmp_path / "ember_user_models.py").write_text(
        "import ember.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(2, 2)\n"
        "    def forward(self, x):\n"
        "        return self.fc(x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("ember_user_models")
    ember.save(mod.Net(), tmp_path / "n.pt")
    monkeypatch.delitem(sys.modules, "ember_user_models")
    with pytest.raises(ember.serialization.SerializationError,
                       match="'ember_user_models.Net'.*not imported; import ember_user_models "
                             "before ember.load"):
        ember.load(tmp_path / "n.pt")
    assert "ember_user_models" not in sys.modules  # ember never imported it
    importlib.import_module("ember_user_models")
    assert type(ember.load(tmp_path / "n.pt")).__name__ == "Net"


@pytest.mark.parametrize("where, match", [
    (["os", "system"], "'os.system', which is not an ember.nn.Module subclass"),
    (["collections", "OrderedDict"], "not an ember.nn.Module subclass"),
    (["builtins", "eval"], "not an ember.nn.Module subclass"),
    (["ember_never_imported_mod", "Net"], "import ember_never_imported_mod before"),
    (["os", "path.join"], "not an ember.nn.Module subclass"),
    ([__name__, "_Net.forward"], "not an ember.nn.Module subclass"),
    ([__name__, "Nope"], "does not define"),
    ([__name__, "_Net.__init__.<locals>.X"], "does not define"),
    (["__main__", "NotInTheScript"], "running script does not define; define or import "
                                     "NotInTheScript in the script"),
])
def test_files_naming_other_objects_are_refused(tmp_path, where, match):
    import sys
    ember.save(nn.Sequential(_Counted()), tmp_path / "e.pt")

    def edit(st):
        inner = st["__state__"]["_modules"]["__dict__"]["0"]
        inner["__module__"] = ".".join(where)
        inner["__where__"] = where
    _rewrite_structure(tmp_path / "e.pt", edit)
    with pytest.raises(ember.serialization.SerializationError, match=match):
        ember.load(tmp_path / "e.pt")
    assert "ember_never_imported_mod" not in sys.modules


def test_unrepresentable_attributes_and_local_classes_fail_at_save_naming_them(tmp_path):
    m = _Counted()
    m.fc.helper = object()
    with pytest.raises(ember.errors.EmberTypeError, match="'fc.helper' of type builtins.object"):
        ember.save(m, tmp_path / "a.pt")
    m = _Counted()
    m.post = lambda x: x
    with pytest.raises(ember.errors.EmberTypeError, match="'post' is the function"):
        ember.save(m, tmp_path / "b.pt")

    class Local(nn.Module):
        pass
    with pytest.raises(ember.errors.EmberTypeError, match="Local cannot be found by that name"):
        ember.save({"m": Local()}, tmp_path / "c.pt")
    assert not os.listdir(tmp_path)


def test_a_class_defined_in_the_main_script_saves_and_loads(tmp_path):
    import subprocess
    import sys
    script = tmp_path / "train.py"
    script.write_text(
        "import ember as torch\n"
        "import ember.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(3, 1)\n"
        "    def forward(self, x):\n"
        "        return self.fc(x)\n"
        "if __name__ == '__main__':\n"
        "    m = Net()\n"
        "    torch.save(m, 'net.pt')\n"
        "    m2 = torch.load('net.pt', weights_only=False)\n"
        "    x = torch.ones(2, 3)\n"
        "    assert type(m2) is Net and torch.allclose(m2(x), m(x))\n"
        "    print('ok')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.dirname(ember.__file__)))] +
        [p for p in [os.environ.get("PYTHONPATH")] if p]))
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


STANDARD_MODULES = [
    lambda: nn.Linear(4, 3), lambda: nn.Conv2d(2, 3, 3, padding=1), lambda: nn.LSTM(4, 5, 2),
    lambda: nn.GRU(4, 3, batch_first=True), lambda: nn.Embedding(10, 4),
    lambda: nn.BatchNorm1d(4), lambda: nn.LayerNorm(4), lambda: nn.Dropout(0.5),
    lambda: nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)),
    lambda: nn.ModuleList([nn.Linear(4, 4)]), lambda: nn.MultiheadAttention(4, 2),
    lambda: nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0), lambda: nn.PReLU(),
]


@pytest.mark.parametrize("make", STANDARD_MODULES)
def test_standard_modules_roundtrip_whole(tmp_path, make):
    m = make().eval()
    ember.save(m, tmp_path / "m.pt")
    m2 = ember.load(tmp_path / "m.pt")
    assert type(m2) is type(m) and m2.training is False
    assert {k: v.tolist() for k, v in m2.state_dict().items()} == \
        {k: v.tolist() for k, v in m.state_dict().items()}
    assert repr(m2) == repr(m)
    x = ember.randint(0, 10, (2, 3)) if isinstance(m, nn.Embedding) else ember.randn(3, 2, 4)
    if isinstance(m, nn.Conv2d):
        x = ember.randn(1, 2, 5, 5)
    if isinstance(m, nn.BatchNorm1d):
        x = ember.randn(3, 4)
    if isinstance(m, nn.ModuleList):
        m, m2 = m[0], m2[0]
    args = (x, x, x) if isinstance(m, nn.MultiheadAttention) else (x,)
    out, out2 = m(*args), m2(*args)
    out, out2 = (out[0], out2[0]) if isinstance(out, tuple) else (out, out2)
    np.testing.assert_array_equal(out2.detach().numpy(), out.detach().numpy())


def test_ember_modules_save_whole_and_unregistered_functions_refuse(tmp_path):
    lstm = nn.LSTM(3, 4, 2)
    ember.save(lstm, tmp_path / "l.st")
    l2 = ember.load(tmp_path / "l.st")
    x = ember.randn(5, 1, 3)
    np.testing.assert_array_equal(l2(x)[0].detach().numpy(), lstm(x)[0].detach().numpy())
    lin = nn.Linear(2, 2)
    lin.register_forward_hook(lambda *a: None)
    with pytest.raises(ember.errors.EmberTypeError, match="_forward_hooks.*function"):
        ember.save(lin, tmp_path / "h.st")
    with pytest.raises(ember.errors.EmberTypeError, match="Python function"):
        ember.serialization.add_safe_globals([os.system])


def test_numpy_arrays_come_back_as_numpy_and_npy_files_load(tmp_path):
    a = np.arange(6.0).reshape(2, 3)
    ember.save(a, tmp_path / "a.st")
    back = ember.load(tmp_path / "a.st")
    assert isinstance(back, np.ndarray)
    np.testing.assert_array_equal(ember.from_numpy(back[1:]).numpy(), a[1:])
    np.save(tmp_path / "b.npy", a)
    t = ember.load(tmp_path / "b.npy")
    assert isinstance(t, ember.Tensor) and t.dtype == ember.float64
    np.testing.assert_array_equal(t.numpy(), a)
    np.save(tmp_path / "c.npy", np.array([{"x": 1}], dtype=object))
    with pytest.raises(ember.serialization.UnsafeFileError, match="unpickling"):
        ember.load(tmp_path / "c.npy")


# ---------------------------------------------------------------------------- adversarial names
DTYPE_NAMES = ["BF16", "I16", "F16", "F32", "BOOL", "U8", "dtype", "shape", "data_offsets",
               "__metadata__x", '"BF16"', 'a"b', "back\\slash", '{"dtype":"BF16"}', "ü名 ✓",
               "new\nline", " BF16 ", "BF16\u0000"]


@pytest.mark.parametrize("with_bf16", [True, False])
def test_tensor_names_equal_to_dtype_names_or_json_round_trip(tmp_path, with_bf16):
    """Names are data: a tensor named "BF16" beside a bfloat16 tensor kept its name and dtype
    (the header was rewritten by string replacement, so it loaded as "I16", and ember could not
    reload its own file: "invalid offset")."""
    rng = np.random.default_rng(0)
    d = {name: ember.tensor(rng.standard_normal(i + 1).astype(np.float32))
         for i, name in enumerate(DTYPE_NAMES)}
    d["I16"] = ember.arange(3, dtype=ember.int16)
    if with_bf16:
        d["BF16"] = ember.tensor([1.5, -2.0, 3.25], dtype=ember.bfloat16)
        d['"BF16"'] = ember.tensor([0.5], dtype=ember.bfloat16)
    path = tmp_path / "names.st"
    ember.save(d, path)
    back = ember.load(path)
    assert list(back) == list(d)
    for k, v in d.items():
        assert back[k].dtype == v.dtype, k
        np.testing.assert_array_equal(back[k].float().numpy(), v.float().numpy(), err_msg=k)
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    t = st.load_file(str(path))   # the file itself is a plain safetensors file torch reads
    assert set(t) == set(d)
    assert (t["BF16"].dtype == torch.bfloat16) == with_bf16 and t["I16"].dtype == torch.int16


def test_torch_written_bfloat16_with_adversarial_names_loads(tmp_path):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    sd = {"BF16": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
          "I16": torch.tensor([7], dtype=torch.int16), 'x"BF16"y': torch.ones(2)}
    st.save_file(sd, str(tmp_path / "t.st"), metadata={"note": '"BF16" I16'})
    back = ember.load(tmp_path / "t.st")
    assert back["BF16"].dtype == ember.bfloat16 and back["BF16"].float().tolist() == [1.5, -2.0]
    assert back["I16"].dtype == ember.int16 and back["I16"].tolist() == [7]
    assert back['x"BF16"y'].tolist() == [1.0, 1.0]


def test_files_naming_the_former_misc_module_still_load(tmp_path):
    """ember.nn.modules.misc was split into torch's module names (padding, pixelshuffle, ...);
    a whole Module saved while its classes lived there still loads."""
    from ember.serialization import safe_globals
    m = ember.nn.Sequential(ember.nn.ZeroPad2d(1), ember.nn.PixelShuffle(2),
                            ember.nn.Fold((4, 4), 2))
    old = [(type(c), f"ember.nn.modules.misc.{type(c).__name__}") for c in m]
    with safe_globals(old):
        ember.save(m, tmp_path / "m.pt")
    loaded = ember.load(tmp_path / "m.pt")
    assert [type(c) for c in loaded] == [type(c) for c in m]
    assert loaded[0].padding == (1, 1, 1, 1) and loaded[1].upscale_factor == 2
