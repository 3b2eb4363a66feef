"""Per-host measurement of where the wide ``direct`` kernels beat the GEMM paths, for stride-1
layers (``selector._wide_direct``), run once per host and kept on disk.

Whether ember's AVX-512 ``direct`` kernels beat BLAS-based algorithms (``direct1x1``,
``winograd``, ``im2col``) depends on the host's BLAS more than on its ISA: OpenBLAS runs its
Haswell (AVX2) kernels on AMD Zen 5, where ``direct`` won on every wide layer, but its SkylakeX
kernels on Intel Xeons, where the GEMM paths win on 1x1 layers and on 3x3 layers of 128 channels
and more. So the selector does not decide by vendor or ISA: ``measure`` times ``direct`` against
the algorithm the heuristic picks without it on a few probe layers, forward, float32, one thread
(thread CPU time, min of ``ROUNDS`` interleaved calls, all on the calling thread), and ``result``
keeps the outcome per host (CPU model and flags, ember's ISA variant, NumPy's BLAS, its version
and kernel architecture) in ``<ember cache dir>/conv_probe.json``.

Probe layers and the decisions they make (``PROBES``):
- ``1x1``: 2x128x28x28 -> 128, 1x1: wide ``direct`` for 1x1 stride-1 layers iff it wins;
- ``3x3/64``: 4x64x56x56 -> 64 and ``3x3/256``: 2x256x14x14 -> 256, 3x3: wide ``direct`` for
  stride-1 kernels larger than 1x1 with max(C/g, K/g) up to the widest probe ``direct`` wins
  together with every narrower one (0 when the 64-channel probe loses).

``direct`` wins a probe when it takes at most ``MARGIN`` of the alternative's time: the probe
runs one thread, the layers two or more, and a near tie there went the other way at two
threads. AMD EPYC Zen 4, ms direct / alternative: one thread 3x3/64 8.9 / 7.2, 3x3/256 5.2 /
5.6 (then "up to 256 channels" by the widest win alone); two threads, 8x256x14x14 -> 256
forward 9.1 (direct) against 6.6 (Winograd), forward + backward 31.2 against 19.4.

An entry holds the hash of the convolution engine's sources it was measured with
(``kernels_version``); with other kernels (an upgrade, a local change: this Xeon's entry
still held the timings of the kernels before the packed weight's row padding) it is measured
again.

Intel Xeon (Sapphire Rapids, OpenBLAS SkylakeX kernels), one thread, CPU ms, direct vs the
GEMM path: 8x64x56x56->256 1x1 forward 53.3 vs 16.5, weight 62.9 vs 16.7; 8x256x14x14->256 3x3
forward 59.9 vs 35.1 (winograd); 8x64x56x56->64 3x3 forward 21.3 vs 28.5 (direct wins).

The measurement never runs inside a user's call when kernels compile in the background
(``EMBER_JIT_COMPILE`` "background", the default): ``result`` then queues it on the compile thread
(``compiler.submit``, after the compiles already queued) and returns None until it has finished;
the selector keeps the GEMM paths for the calls that chose meanwhile (``compiler.tier``), and
calls first seen later, and later processes through the disk file, follow the probe. It runs on
that thread's CPU clock, so the caller's work beside it does not count in its times (BLAS is
held at one thread meanwhile, process-wide, as under ``parallel.policy``). Under "sync"
and "off" (the test suite, explicit settings) ``result`` measures at once. While the kernels a
probe needs are still compiling, the measurement is None and runs again after them (at most
``RETRIES`` times per process).
"""
import hashlib
import os
import threading
import time

import numpy as np

from ember.kernels.runtime import hostrecords

PROBES = {   # name: (input shape, weight shape, padding)
    "1x1": ((2, 128, 28, 28), (128, 128, 1, 1), 0),
    "3x3/64": ((4, 64, 56, 56), (64, 64, 3, 3), 1),
    "3x3/256": ((2, 256, 14, 14), (256, 256, 3, 3), 1),
}
ROUNDS = 5
MARGIN = 0.9
FILE = "conv_probe.json"
RETRIES = 3

_lock = threading.Lock()
_result = None
_host_key = None
_queued = False


def decisions(times):
    """{"1x1": bool, "3x3_channels": int} from {probe name: (direct s, alternative s)}: the
    rules ``selector._wide_direct`` applies (see the module docstring)."""
    def wins(name):
        d, alt = times[name]
        return d <= MARGIN * alt
    widest = 0
    for name in ("3x3/64", "3x3/256"):   # narrowest first
        if not wins(name):
            break
        widest = PROBES[name][1][0]
    return {"1x1": wins("1x1"), "3x3_channels": widest}


def result():
    """This host's decisions (``decisions``), from memory, the disk file or a measurement (on
    the compile thread under background compilation, else now); None until there is one."""
    global _result, _queued
    if _result is not None:
        return _result
    with _lock:
        if _result is not None:
            return _result
        key = host_key()
        stored = hostrecords.read(FILE).get(key)
        if _valid(stored) and stored.get("kernels") == kernels_version():
            _result = stored
            return _result
        from ember.kernels.runtime import compiler
        if compiler.compile_mode() != "background":
            return _measure_and_keep(key)
        if not _queued:
            _queued = True
            _queue(key, 0)
        return None


def _queue(key, attempt):
    """Queue the measurement on the compile thread, behind the compiles already queued."""
    from ember.kernels.runtime import compiler

    def job():
        global _queued
        if _result is not None:
            return
        found = _measure_and_keep(key)   # not under _lock: ``result`` answers None meanwhile
        if found is None:
            if attempt + 1 < RETRIES:   # after the compiles this measurement queued
                _queue(key, attempt + 1)
            else:
                _queued = False         # a later call queues it again
    compiler.submit(("conv host probe", attempt), "conv host probe", job, record=False,
                    priority=compiler.LATER)


def _measure_and_keep(key):
    """Measure now, store and keep the decisions; None when a kernel is not ready."""
    global _result
    times = measure()
    if times is None:
        return None
    found = decisions(times)
    found["times_ms"] = {k: [round(v * 1e3, 3) for v in t] for k, t in times.items()}
    found["kernels"] = kernels_version()
    hostrecords.write(FILE, key, found)
    _result = found
    return found


def _valid(entry):
    return (isinstance(entry, dict) and isinstance(entry.get("1x1"), bool)
            and isinstance(entry.get("3x3_channels"), int))


def forget():
    """Drop the decisions kept in memory (the disk file stays)."""
    global _result, _queued
    with _lock:
        _result, _queued = None, False


_kernels_version = None


def kernels_version():
    """Hash of the convolution engine's sources (``ember/kernels/conv/*.py``): the probe's
    outcome depends on the kernels it times, so an entry measured with other kernels (an
    upgrade, a local change) is measured again and replaced. Read once per process."""
    global _kernels_version
    if _kernels_version is None:
        h = hashlib.sha256()
        folder = os.path.dirname(os.path.abspath(__file__))
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                with open(os.path.join(folder, name), "rb") as f:
                    h.update(name.encode() + b"\0" + f.read())
        _kernels_version = h.hexdigest()[:16]
    return _kernels_version


def host_key():
    """Hash naming what the probe's outcome depends on: CPU model and flags, ember's ISA variant
    (``EMBER_CPU_ISA`` included), NumPy's BLAS (``_numpy_blas``) and ``OPENBLAS_CORETYPE``."""
    global _host_key
    if _host_key is not None and not os.environ.get("EMBER_CPU_ISA"):
        return _host_key
    from ember.kernels.runtime import cpu
    from ember.kernels.runtime.threads import blas_controllers
    parts = [cpu.isa(), os.environ.get("OPENBLAS_CORETYPE", "")]
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "flags")):
                    parts.append(line.strip())
                if line.startswith("flags"):
                    break
    except OSError:
        pass
    parts += _numpy_blas(blas_controllers())
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]
    if not os.environ.get("EMBER_CPU_ISA"):
        _host_key = key
    return key


def _numpy_blas(controllers):
    """NumPy's BLAS: its build's name and version, and the kernel architecture its library runs
    (from the threadpoolctl ``controllers`` loaded from NumPy's own directories; the BLAS of
    other packages loaded later, SciPy's, do not change the key)."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        parts = [f"{blas.get('name', '')} {blas.get('version', '')}"]
    except Exception:   # older NumPy: no dict mode
        parts = [np.__version__]
    root = os.path.dirname(os.path.abspath(np.__file__))
    for c in controllers:
        info = getattr(c, "info", lambda: {})()
        if str(info.get("filepath", "")).startswith((root + os.sep, root + ".libs" + os.sep)):
            parts.append(f"{info.get('internal_api', '')} {info.get('architecture', '')}")
    return sorted(parts)


def measure():
    """{probe name: (direct seconds, alternative seconds)}, or None when a kernel is not ready
    (its compile is queued). One thread: ember's chunks inline, BLAS held at one thread."""
    from . import parallel, selector
    from .geometry import geometry
    rng = np.random.default_rng(0)
    saved = getattr(parallel._mode, "n", None)
    parallel._mode.n = 1
    try:
        with parallel.policy(True):
            plans = []
            for name, (xs, ws, pad) in PROBES.items():
                g = geometry("conv2d", xs, ws, 1, pad, 1, 1)
                alt = selector.heuristic("forward", g, direct_ok=False)
                for algo in ("direct", alt):
                    if algo in ("direct", "winograd", "thin") and \
                            not selector._ready_now(algo, "forward", g, np.float32):
                        return None
                x = rng.standard_normal(xs, dtype=np.float32)
                w = rng.standard_normal(ws, dtype=np.float32)
                plans.append((name, g, alt, x, w))
            times = {}
            for name, g, alt, x, w in plans:
                best = {"direct": float("inf"), alt: float("inf")}
                for algo in best:                       # warm-up: workspaces, packing
                    selector._call(algo, "forward", g, x, w)
                for _ in range(ROUNDS):
                    for algo in best:
                        t0 = time.thread_time()
                        selector._call(algo, "forward", g, x, w)
                        best[algo] = min(best[algo], time.thread_time() - t0)
                times[name] = (best["direct"], best[alt])
            return times
    finally:
        parallel._mode.n = saved
