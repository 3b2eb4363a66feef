"""torch.save's zip checkpoints loaded by ember.load without unpickling (ember/torch_files.py):
files written by torch itself, read back equal; what torch's default torch.load refuses, ember
refuses too, naming it, and nothing a file names is imported or run."""
import io
import math
import os
import pickle
import sys
import zipfile

import numpy as np
import pytest

import ember
from ember.serialization import SerializationError, UnsafeFileError

torch = pytest.importorskip("torch")


def _saved(tmp_path, obj, name="ckpt.pt"):
    path = tmp_path / name
    torch.save(obj, path)
    return path


def _same(ours, theirs):
    assert isinstance(ours, ember.Tensor), type(ours)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    assert tuple(ours.shape) == tuple(theirs.shape)
    a, b = ours.detach(), theirs.detach()
    if str(theirs.dtype) == "torch.bfloat16":
        a, b = a.float(), b.float()
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_models_state_dict_loads_and_runs_as_torchs(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5))
    net.train()
    net(torch.randn(2, 3, 8, 8))          # running statistics and num_batches_tracked move
    net.eval()
    sd = ember.load(_saved(tmp_path, net.state_dict()))
    assert list(sd) == list(net.state_dict()) and sd._metadata[""] == {"version": 1}
    for k, v in net.state_dict().items():
        _same(sd[k], v)
    ours = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3), ember.nn.BatchNorm2d(4),
                               ember.nn.ReLU(), ember.nn.Flatten(), ember.nn.Linear(144, 5))
    assert str(ours.load_state_dict(sd)) == "<All keys matched successfully>"
    ours.eval()
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours(ember.from_numpy(x)).detach().numpy(), expected,
                               rtol=1e-5, atol=1e-6)


def test_every_dtype_layout_and_plain_value_of_a_checkpoint(tmp_path):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    tensors = {"t": base.t(), "tail": base.view(-1)[5:], "scalar": torch.tensor(2.5),
               "empty": torch.zeros(0, 3), "half": base.half(), "bf16": base.bfloat16(),
               "bool": base > 7, "i8": base.to(torch.int8), "u8": base.to(torch.uint8),
               "i16": base.short(), "i32": base.int(), "i64": base.long(),
               "f64": base.double() / 7, "c64": torch.complex(base, -base),
               "c128": torch.complex(base.double(), base.double())}
    plain = {"ints": [0, -1, 255, 65536, 2 ** 40, -2 ** 70], "floats": (1.5, math.inf, -0.0),
             "text": "héllo", "bytes": b"\x00\xff", "none": None, "flags": [True, False],
             "set": {1, 2}, "frozen": frozenset({"a"}), "nested": {3: [(), ((1,),)]},
             "dtype": torch.float16, "device": torch.device("cpu"), "size": torch.Size([2, 3]),
             "complex": 1 + 2j}
    loaded = ember.load(_saved(tmp_path, {"tensors": tensors, "plain": plain}))
    for k, v in tensors.items():
        _same(loaded["tensors"][k], v)
    got = loaded["plain"]
    assert got["ints"] == plain["ints"] and got["floats"] == plain["floats"]
    assert math.copysign(1, got["floats"][2]) == -1
    assert (got["text"], got["bytes"], got["none"], got["flags"]) == \
        ("héllo", b"\x00\xff", None, [True, False])
    assert got["set"] == {1, 2} and got["frozen"] == frozenset({"a"})
    assert got["nested"] == {3: [(), ((1,),)]} and got["complex"] == 1 + 2j
    assert got["dtype"] is ember.float16 and str(got["device"]) == "cpu"
    assert tuple(got["size"]) == (2, 3) and isinstance(got["size"], ember.Size)


def test_optimizer_state_and_parameters_resume_training(tmp_path):
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(lin.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        lin(torch.randn(4, 3)).pow(2).sum().backward()
        opt.step()
    ck = ember.load(_saved(tmp_path, {"model": lin.state_dict(), "opt": opt.state_dict(),
                                      "param": torch.nn.Parameter(torch.ones(2)),
                                      "leaf": torch.ones(2, requires_grad=True), "epoch": 7}))
    assert isinstance(ck["param"], ember.nn.Parameter) and ck["param"].requires_grad
    assert ck["leaf"].requires_grad and ck["leaf"].is_leaf and ck["epoch"] == 7
    ours = ember.nn.Linear(3, 2)
    ours.load_state_dict(ck["model"])
    ours_opt = ember.optim.Adam(ours.parameters(), lr=0.1)
    ours_opt.load_state_dict(ck["opt"])
    state = ours_opt.state_dict()["state"]
    for i, s in opt.state_dict()["state"].items():
        _same(state[i]["exp_avg"], s["exp_avg"])
        assert float(state[i]["step"]) == float(s["step"])


def test_a_whole_pickled_module_is_refused_naming_its_class(tmp_path):
    path = _saved(tmp_path, torch.nn.Linear(2, 2))
    with pytest.raises(UnsafeFileError, match=r"torch\.nn\.modules\.linear\.Linear.*"
                                              r"weights_only=True"):
        ember.load(path)


def test_numpy_arrays_and_scalars_of_numbers_load_object_arrays_do_not(tmp_path):
    arrays = {"a": np.arange(6.0).reshape(2, 3), "f": np.asfortranarray(np.ones((2, 3), "i8")),
              "be": np.arange(3, dtype=">i4"), "b": np.array([True, False]),
              "c": np.array([1 + 2j], np.complex64), "s": np.float64(2.5), "i": np.int64(3)}
    got = ember.load(_saved(tmp_path, arrays))
    for k, v in arrays.items():
        assert type(got[k]) is type(v)
        assert np.asarray(got[k]).dtype == np.asarray(v).dtype.newbyteorder("=")
        np.testing.assert_array_equal(got[k], v)
    assert np.dtype("i4").byteorder == "=" and np.dtype(">i4").byteorder == ">"
    with pytest.raises(UnsafeFileError, match="NumPy dtype 'O"):
        ember.load(_saved(tmp_path, {"o": np.array([{"x": 1}], dtype=object)}, "obj.pt"))


def _archive(tmp_path, program, members=()):
    path = tmp_path / "crafted.pt"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("crafted/data.pkl", program)
        for name, data in members:
            z.writestr(name, data)
    return path


def test_a_file_naming_code_runs_and_imports_nothing(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))
    path = _archive(tmp_path, pickle.dumps({"x": Evil()}, protocol=2))
    with pytest.raises(UnsafeFileError, match=r"the global (posix|os)\.system"):
        ember.load(path)
    assert not marker.exists()
    program = b"\x80\x02cember_unimported_module_xyz\nthing\n)R."
    with pytest.raises(UnsafeFileError, match="ember_unimported_module_xyz.thing"):
        ember.load(_archive(tmp_path, program))
    assert "ember_unimported_module_xyz" not in sys.modules


def test_torchscript_archives_and_damaged_files_say_what_they_are(tmp_path):
    scripted = torch.jit.script(torch.nn.Linear(2, 2))
    path = tmp_path / "scripted.pt"
    torch.jit.save(scripted, str(path))
    with pytest.raises(UnsafeFileError, match="TorchScript archive"):
        ember.load(path)
    good = _saved(tmp_path, {"w": torch.ones(3)}).read_bytes()
    with pytest.raises(SerializationError, match="damaged|corrupt|no member"):
        ember.load(io.BytesIO(good[:len(good) // 2]))
    with pytest.raises(SerializationError, match="data.pkl"):
        ember.load(_empty_zip(tmp_path))


def _empty_zip(tmp_path):
    path = tmp_path / "empty.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("readme.txt", "nothing")
    return path


def test_a_big_endian_archive_reads_its_byte_order(tmp_path):
    path = _saved(tmp_path, {"w": torch.arange(4, dtype=torch.float32)})
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    prefix = next(n for n in members if n.endswith("data.pkl"))[:-len("data.pkl")]
    members[prefix + "byteorder"] = b"big"
    key = next(n for n in members if n.startswith(prefix + "data/"))
    members[key] = np.frombuffer(members[key], "<f4").astype(">f4").tobytes()
    swapped = tmp_path / "big.pt"
    with zipfile.ZipFile(swapped, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)
    assert ember.load(swapped)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_damaged_pickle_programs_raise_ember_errors_only(tmp_path):
    """Bytes of the data program changed at random: each load succeeds or raises one of
    ember's serialization errors (no NumPy internal error, no hang, nothing run)."""
    import random
    buf = io.BytesIO()
    torch.save({"m": torch.nn.Linear(3, 2).state_dict(), "x": [1, 2.5, "s", (None, True)],
                "n": np.arange(3.0), "b": np.arange(3, dtype=">i4")}, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        members = {n: z.read(n) for n in z.namelist()}
    program = next(n for n in members if n.endswith("data.pkl"))
    rng = random.Random(0)
    for _ in range(300):
        changed = bytearray(members[program])
        for _ in range(rng.randint(1, 4)):
            changed[rng.randrange(len(changed))] = rng.randrange(256)
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            for n, data in members.items():
                z.writestr(n, bytes(changed) if n == program else data)
        try:
            ember.load(io.BytesIO(out.getvalue()))
        except SerializationError:
            pass
