"""SummaryWriter (ember/utils/tensorboard/writer.py): event files read back with TensorBoard's own
reader (EventAccumulator) hold what torch's SummaryWriter writes for the same calls."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.nn as nn

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: E402

from ember.utils.tensorboard import SummaryWriter  # noqa: E402


def _read(folder):
    acc = ea.EventAccumulator(str(folder), size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0,
                                                          ea.IMAGES: 0, ea.TENSORS: 0,
                                                          ea.AUDIO: 0})
    acc.Reload()
    return acc


def _log(lib, writer_cls, folder):
    """The same logging calls, on ember or torch."""
    rng = np.random.default_rng(0)
    hist = rng.standard_normal(500).astype(np.float32)
    img = rng.random((3, 6, 5)).astype(np.float32)
    batch = rng.random((4, 6, 5, 3)).astype(np.float32)
    with writer_cls(str(folder)) as w:
        for step in range(3):
            w.add_scalar("loss", lib.tensor(1.0 / (step + 1)), step)
            w.add_scalar("lr", 0.1 * step, step, new_style=True)
        w.add_scalars("run", {"a": 1.0, "b": 2.0}, 5)
        w.add_histogram("w", lib.tensor(hist), 1)
        w.add_histogram("w_np", hist, 2, bins=10)
        w.add_image("img", lib.tensor(img), 0)
        w.add_image("img_hw", lib.tensor(img[0]), 0, dataformats="HW")
        w.add_images("batch", lib.tensor(batch), 0, dataformats="NHWC")
        w.add_text("note", "hello *world*", 4)
        for dt in ("float32", "float64", "float16", "int64", "int32", "uint8", "bool"):
            w.add_tensor(f"t_{dt}", lib.tensor([[1, 0, 3]], dtype=getattr(lib, dt)), 1)
        w.add_tensor("t_c64", lib.tensor([1 + 2j, 3 - 1j], dtype=lib.complex64), 1)
        w.add_histogram_raw("raw", 0.0, 3.0, 4, 6.0, 14.0, [1.0, 2.0, 3.0], [1, 2, 1], 2)
        labels = (rng.random(50) > 0.5).astype(np.int64)
        w.add_pr_curve("pr", lib.tensor(labels), lib.tensor(rng.random(50)), 3,
                       num_thresholds=20)
        w.add_pr_curve_raw("pr_raw", [3, 2], [1, 0], [0, 1], [0, 1], [0.75, 1.0], [1.0, 0.7],
                           3, num_thresholds=2)
        w.add_custom_scalars({"cat": {"loss": ["Multiline", ["loss", "lr"]],
                                      "band": ["Margin", ["loss", "lo", "hi"]]}})
        w.add_audio("sound", lib.tensor(np.sin(np.arange(800) / 5.0)), 1, sample_rate=8000)


def test_event_files_hold_what_torch_writes(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
    _log(ember, SummaryWriter, tmp_path / "ember")
    _log(torch, TorchWriter, tmp_path / "torch")
    e, t = _read(tmp_path / "ember"), _read(tmp_path / "torch")
    assert e.Tags()["scalars"] == t.Tags()["scalars"] == ["loss"]
    assert [(s.step, s.value) for s in e.Scalars("loss")] == \
        [(s.step, s.value) for s in t.Scalars("loss")]
    assert [(s.step, s.value) for s in e.Scalars("loss")] == [(0, 1.0), (1, 0.5),
                                                             (2, np.float32(1 / 3))]
    for tag in ("w", "w_np"):
        (he,), (ht,) = e.Histograms(tag), t.Histograms(tag)
        assert he.step == ht.step and he.histogram_value == ht.histogram_value
    for tag in ("img", "img_hw", "batch"):
        (ie,), (it,) = e.Images(tag), t.Images(tag)
        assert (ie.width, ie.height, ie.encoded_image_string) == \
            (it.width, it.height, it.encoded_image_string)
    assert sorted(e.Tags()["tensors"]) == sorted(t.Tags()["tensors"])
    (te,), (tt,) = e.Tensors("note/text_summary"), t.Tensors("note/text_summary")
    assert te.step == tt.step == 4 and te.tensor_proto == tt.tensor_proto
    (le,), (lt,) = e.Tensors("lr")[1:2], t.Tensors("lr")[1:2]
    for tag in [k for k in t.Tags()["tensors"] if k.startswith(("t_", "pr"))] + \
            ["custom_scalars__config__"]:
        (xe,), (xt,) = e.Tensors(tag), t.Tensors(tag)
        assert xe.step == xt.step and xe.tensor_proto == xt.tensor_proto, tag
        assert e.SummaryMetadata(tag) == t.SummaryMetadata(tag), tag
    assert e.Histograms("raw")[0].histogram_value == t.Histograms("raw")[0].histogram_value
    (ae,), (at,) = e.Audio("sound"), t.Audio("sound")
    assert (ae.encoded_audio_string, ae.sample_rate, ae.length_frames) == \
        (at.encoded_audio_string, at.sample_rate, at.length_frames)
    assert le.tensor_proto == lt.tensor_proto
    for sub in ("run_a", "run_b"):
        se = _read(tmp_path / "ember" / sub).Scalars("run")
        st = _read(tmp_path / "torch" / sub).Scalars("run")
        assert [(s.step, s.value) for s in se] == [(s.step, s.value) for s in st]


def test_hparams_graph_purge_and_default_log_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    with SummaryWriter(comment="_exp") as w:
        w.add_graph(m, ember.randn(2, 3))
        w.add_hparams({"lr": 0.1, "opt": "sgd", "wd": True, "skip": None}, {"hp/acc": 0.75},
                      run_name="trial")
        log_dir = w.log_dir
    runs = os.listdir("runs")
    assert len(runs) == 1 and runs[0].endswith("_exp") and os.path.join("runs", runs[0]) == log_dir
    acc = _read(log_dir)
    graph = acc.Graph()
    ops = [n.op for n in graph.node]
    assert ops.count("ember::linear") == 2 and "ember::relu" in ops and "IO Node" in ops
    names = {n.name for n in graph.node}
    assert {"0/weight", "2/bias", "input/input"} <= names
    relu = next(n for n in graph.node if n.op == "ember::relu")
    assert [d.size for d in relu.attr["_output_shapes"].list.shape[0].dim] == [2, 4]
    hp = _read(os.path.join(log_dir, "trial"))
    assert [s.value for s in hp.Scalars("hp/acc")] == [0.75]
    from tensorboard.plugins.hparams import plugin_data_pb2
    content = hp.SummaryMetadata("_hparams_/session_start_info").plugin_data.content
    start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    assert start.hparams["lr"].number_value == 0.1 and start.hparams["opt"].string_value == \
        "sgd" and start.hparams["wd"].bool_value is True and "skip" not in start.hparams
    with SummaryWriter(tmp_path / "p", purge_step=7) as w:
        w.add_scalar("x", 1.0, 7)
    assert [s.step for s in _read(tmp_path / "p").Scalars("x")] == [7]


def test_errors_and_reopen_after_close(tmp_path):
    w = SummaryWriter(tmp_path)
    with pytest.raises(ember.errors.EmberValueError, match="one element"):
        w.add_scalar("x", ember.ones(2))
    with pytest.raises(ember.errors.EmberValueError, match="dataformats 'CHW' has 3"):
        w.add_image("i", ember.rand(2, 3, 4, 5))
    with pytest.raises(ember.errors.EmberTypeError, match="should be dictionary"):
        w.add_hparams([("lr", 1)], {})
    with pytest.raises(ember.errors.EmberValueError, match="no element"):
        w.add_histogram("h", ember.zeros(0))
    w.close()
    w.add_scalar("after", 2.0, 1)  # a closed writer opens a new event file, as torch
    w.flush()
    assert [s.value for s in _read(tmp_path).Scalars("after")] == [2.0]
    w.close()


def test_import_ember_does_not_import_tensorboard():
    code = ("import sys, ember, ember.nn, ember.utils; "
            "assert 'tensorboard' not in sys.modules, 'tensorboard imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=240)


def test_missing_tensorboard_is_ember_missing_extra_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard.summary.writer.event_file_writer", None)
    with pytest.raises(ember.errors.MissingDependencyError,
                       match=r"needs tensorboard.*pip install 'ember\[tensorboard\]'"):
        SummaryWriter(tmp_path)
