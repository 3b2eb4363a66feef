"""The per-host probe of ``direct`` against the GEMM paths: its decisions, its disk file, its
measurement, and the selector's use of it (behaviour only; no timing is asserted)."""
import json
import math
import os

import pytest

from ember.kernels import conv as C
from ember.kernels.conv import hostprobe, selector

INTEL_LIKE = {"1x1": False, "3x3_channels": 64}


@pytest.fixture
def probe_dir(tmp_path, monkeypatch):
    """An empty ember cache directory and no decisions in memory (restored afterwards)."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    hostprobe.forget()
    yield tmp_path
    hostprobe.forget()


def _pick(shape, wshape, stride=1, padding=1, direction="forward"):
    return selector.heuristic(direction, C.geometry("conv2d", shape, wshape, stride, padding,
                                                    1, 1))


def test_decisions_from_times():
    t = {"1x1": (1.0, 2.0), "3x3/64": (1.0, 2.0), "3x3/256": (1.0, 2.0)}
    assert hostprobe.decisions(t) == {"1x1": True, "3x3_channels": 256}
    t = {"1x1": (2.0, 1.0), "3x3/64": (1.0, 2.0), "3x3/256": (3.0, 2.0)}
    assert hostprobe.decisions(t) == {"1x1": False, "3x3_channels": 64}
    t = {"1x1": (2.0, 2.0), "3x3/64": (3.0, 2.0), "3x3/256": (3.0, 2.0)}   # a tie is a loss
    assert hostprobe.decisions(t) == {"1x1": False, "3x3_channels": 0}
    # a win counts from MARGIN of the alternative's time, and a width only with the narrower
    t = {"1x1": (0.95, 1.0), "3x3/64": (8.9, 7.2), "3x3/256": (5.0, 5.6)}
    assert hostprobe.decisions(t) == {"1x1": False, "3x3_channels": 0}
    t = {"1x1": (0.9, 1.0), "3x3/64": (0.9, 1.0), "3x3/256": (0.95, 1.0)}
    assert hostprobe.decisions(t) == {"1x1": True, "3x3_channels": 64}


def test_selector_follows_the_probe(monkeypatch):
    """On an AVX-512 host, stride-1 wide layers go to ``direct`` only where the probe says it
    wins; strided forward passes up to the probe's 3x3 channels too, strided weight gradients
    by rule; no outcome yet: the GEMM paths."""
    monkeypatch.setattr(selector, "_isa", lambda: "avx512")
    monkeypatch.setattr(selector, "_probe", lambda: INTEL_LIKE)
    for d in ("forward", "input", "weight"):
        assert _pick((8, 64, 56, 56), (64, 64, 3, 3), direction=d) == "direct"
        assert _pick((8, 256, 14, 14), (256, 256, 3, 3), direction=d) == "winograd"
        assert _pick((8, 64, 56, 56), (256, 64, 1, 1), padding=0, direction=d) == "direct1x1"
    assert _pick((8, 128, 28, 28), (128, 128, 3, 3)) == "winograd"   # 128 > 64 channels
    assert _pick((1, 128, 56, 56), (128, 128, 3, 3), 2) == "im2col"  # strided: 128 > 64
    assert _pick((8, 64, 112, 112), (64, 64, 3, 3), 2) == "direct"   # strided: 64 channels
    assert _pick((8, 256, 28, 28), (256, 256, 3, 3), 2, direction="weight") == "direct"
    monkeypatch.setattr(selector, "_probe", lambda: None)
    assert _pick((8, 64, 56, 56), (64, 64, 3, 3)) == "winograd"
    assert _pick((8, 64, 56, 56), (256, 64, 1, 1), padding=0) == "direct1x1"
    assert _pick((8, 128, 56, 56), (128, 128, 3, 3), 2) == "im2col"
    monkeypatch.setattr(selector, "_probe", lambda: {"1x1": True, "3x3_channels": 256})
    assert _pick((8, 256, 14, 14), (256, 256, 3, 3)) == "direct"
    assert _pick((1, 128, 56, 56), (128, 128, 3, 3), 2) == "direct"
    assert _pick((8, 64, 56, 56), (256, 64, 1, 1), padding=0) == "direct"


def test_avx2_host_never_probes(monkeypatch):
    def fail():
        raise AssertionError("probed on an AVX2 host")
    monkeypatch.setattr(selector, "_isa", lambda: "avx2")
    monkeypatch.setattr(selector, "_probe", fail)
    assert _pick((8, 64, 56, 56), (64, 64, 3, 3)) == "winograd"
    assert _pick((8, 64, 56, 56), (256, 64, 1, 1), padding=0) == "direct1x1"


def test_result_is_measured_once_per_host_and_kept_on_disk(probe_dir, monkeypatch):
    calls = []
    times = {"1x1": (2e-3, 1e-3), "3x3/64": (1e-3, 2e-3), "3x3/256": (3e-3, 2e-3)}

    def measure():
        calls.append(1)
        return times
    monkeypatch.setattr(hostprobe, "measure", measure)
    monkeypatch.setattr(hostprobe, "host_key", lambda: "host-a")
    first = hostprobe.result()
    assert (first["1x1"], first["3x3_channels"]) == (False, 64)
    assert hostprobe.result() is first and len(calls) == 1
    with open(os.path.join(probe_dir, hostprobe.FILE)) as f:
        stored = json.load(f)
    assert stored["host-a"]["3x3_channels"] == 64 and stored["host-a"]["1x1"] is False
    hostprobe.forget()                                   # a new process: read from the file
    assert hostprobe.result()["3x3_channels"] == 64 and len(calls) == 1
    hostprobe.forget()                                   # another host: measured again
    monkeypatch.setattr(hostprobe, "host_key", lambda: "host-b")
    times = {"1x1": (1e-3, 2e-3), "3x3/64": (1e-3, 2e-3), "3x3/256": (1e-3, 2e-3)}
    assert hostprobe.result()["1x1"] is True and len(calls) == 2
    with open(os.path.join(probe_dir, hostprobe.FILE)) as f:
        assert set(json.load(f)) == {"host-a", "host-b"}


def test_an_entry_of_other_kernels_is_measured_again(probe_dir, monkeypatch):
    """An entry measured with other convolution sources (``kernels_version``) is measured
    again and replaced; the current version's entry is read as it is."""
    calls = []

    def measure():
        calls.append(1)
        return {k: (1e-3, 2e-3) for k in hostprobe.PROBES}
    monkeypatch.setattr(hostprobe, "measure", measure)
    monkeypatch.setattr(hostprobe, "host_key", lambda: "host-a")
    old = {"1x1": False, "3x3_channels": 0, "kernels": "0" * 16}
    with open(os.path.join(probe_dir, hostprobe.FILE), "w") as f:
        json.dump({"host-a": old}, f)
    assert hostprobe.result()["3x3_channels"] == 256 and len(calls) == 1
    with open(os.path.join(probe_dir, hostprobe.FILE)) as f:
        stored = json.load(f)["host-a"]
    assert stored["kernels"] == hostprobe.kernels_version() != old["kernels"]
    hostprobe.forget()
    assert hostprobe.result()["3x3_channels"] == 256 and len(calls) == 1
    version = hostprobe.kernels_version()
    assert len(version) == 16 and version == hostprobe.kernels_version()


def test_no_result_while_kernels_compile(probe_dir, monkeypatch):
    monkeypatch.setattr(hostprobe, "measure", lambda: None)
    assert hostprobe.result() is None
    assert not os.path.exists(os.path.join(probe_dir, hostprobe.FILE))


def test_a_corrupt_file_is_measured_over(probe_dir, monkeypatch):
    with open(os.path.join(probe_dir, hostprobe.FILE), "w") as f:
        f.write("{not json")
    monkeypatch.setattr(hostprobe, "host_key", lambda: "host-a")
    monkeypatch.setattr(hostprobe, "measure", lambda: {k: (1e-3, 2e-3) for k in hostprobe.PROBES})
    assert hostprobe.result()["3x3_channels"] == 256


def test_measure_times_direct_against_the_gemm_path():
    """The real measurement (the test suite compiles synchronously): a positive finite time for
    ``direct`` and for the alternative of every probe layer, and the host key is stable."""
    times = hostprobe.measure()
    assert set(times) == set(hostprobe.PROBES)
    for d, alt in times.values():
        assert 0 < d < math.inf and 0 < alt < math.inf
    assert hostprobe.host_key() == hostprobe.host_key() and len(hostprobe.host_key()) == 24


def test_host_key_counts_numpys_blas_only(monkeypatch):
    """A BLAS another package loads later (SciPy's) leaves the key as it was; NumPy's library
    running other kernels (its architecture) changes it."""
    import numpy as np

    class Controller:
        def __init__(self, path, arch):
            self.path, self.arch = path, arch

        def info(self):
            return {"internal_api": "openblas", "filepath": self.path, "architecture": self.arch,
                    "version": "0"}
    numpy_dir = os.path.dirname(os.path.abspath(np.__file__))
    ours = Controller(os.path.join(numpy_dir + ".libs", "libopenblas.so"), "SkylakeX")
    scipys = Controller(os.path.join(os.path.dirname(numpy_dir), "scipy.libs", "libopenblas.so"),
                        "Haswell")
    assert hostprobe._numpy_blas([ours]) == hostprobe._numpy_blas([ours, scipys])
    assert hostprobe._numpy_blas([ours]) != hostprobe._numpy_blas(
        [Controller(ours.path, "Haswell")])


def test_background_compilation_measures_on_the_compile_thread(probe_dir, monkeypatch):
    """Under background compilation a user's call never runs the probe: ``result`` is None and
    the measurement is queued on the compile thread; once it has run, ``result`` gives (and the
    disk file keeps) its decisions. A measurement that finds kernels still compiling is queued
    again, at most ``RETRIES`` times."""
    import threading

    from ember.kernels.runtime import compiler
    threads, answers = [], [None, {"1x1": (1e-3, 2e-3), "3x3/64": (2e-3, 1e-3),
                                   "3x3/256": (2e-3, 1e-3)}]

    def measure():
        threads.append(threading.get_ident())
        return answers.pop(0)
    monkeypatch.setattr(hostprobe, "measure", measure)
    monkeypatch.setattr(hostprobe, "host_key", lambda: "host-bg")
    previous = compiler.set_compile_mode("background")
    try:
        assert hostprobe.result() is None
        compiler.wait_compiles()
        found = hostprobe.result()
    finally:
        compiler.set_compile_mode(previous)
    assert (found["1x1"], found["3x3_channels"]) == (True, 0)
    assert len(threads) == 2 and threading.get_ident() not in threads
    with open(os.path.join(probe_dir, hostprobe.FILE)) as f:
        assert json.load(f)["host-bg"]["1x1"] is True


def test_background_measurement_gives_up_after_its_retries(probe_dir, monkeypatch):
    from ember.kernels.runtime import compiler
    calls = []
    monkeypatch.setattr(hostprobe, "measure", lambda: calls.append(1))
    monkeypatch.setattr(hostprobe, "host_key", lambda: "host-bg")
    previous = compiler.set_compile_mode("background")
    try:
        assert hostprobe.result() is None
        compiler.wait_compiles()
        assert hostprobe.result() is None and len(calls) == hostprobe.RETRIES
        compiler.wait_compiles()       # the second ``result`` queued it again
    finally:
        compiler.set_compile_mode(previous)
    assert len(calls) == 2 * hostprobe.RETRIES
    assert not os.path.exists(os.path.join(probe_dir, hostprobe.FILE))
