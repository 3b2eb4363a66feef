"""NumPy's OpenBLAS on the fastest kernel table the host executes (ember.kernels.runtime.blas_core):
which tables are tried, which one is kept, and the switch itself in a fresh process."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from ember.kernels.runtime import blas_core
from ember.kernels.runtime.cpu import ISAS

AVX512 = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}
EVERY = ["Nehalem", "Sandybridge", "Haswell", "SkylakeX"]
ALL_ISAS = len(ISAS) - 1


def test_candidates_are_the_wider_tables_the_cpu_executes():
    flags = {"sse4_2", "avx", "avx2", "fma"} | AVX512
    # Zen 5 under OpenBLAS 0.3.31: its pick is Haswell, the CPU executes SkylakeX
    assert blas_core.candidates("Haswell", flags, EVERY, ALL_ISAS) == ["SkylakeX"]
    assert blas_core.candidates("Sandybridge", flags, EVERY, ALL_ISAS) == ["Haswell", "SkylakeX"]
    assert blas_core.candidates("SkylakeX", flags, EVERY, ALL_ISAS) == []


def test_candidates_need_every_flag_the_export_and_the_allowed_isa():
    flags = {"sse4_2", "avx", "avx2", "fma"} | AVX512
    assert blas_core.candidates("Haswell", flags - {"avx512bw"}, EVERY, ALL_ISAS) == []
    assert blas_core.candidates("Haswell", flags, EVERY[:-1], ALL_ISAS) == []
    # EMBER_CPU_ISA=avx2 allows no AVX-512 table
    assert blas_core.candidates("Sandybridge", flags, EVERY, ISAS.index("avx2")) == ["Haswell"]
    assert blas_core.candidates("Sandybridge", {"avx"}, EVERY, ALL_ISAS) == []


def test_a_table_openblas_chose_for_a_cpu_it_knows_stays():
    flags = {"avx2", "fma"} | AVX512
    for name in ("Zen", "Cooperlake", "SapphireRapids", "Unknown"):
        assert blas_core.candidates(name, flags, EVERY, ALL_ISAS) == []


def test_fastest_replaces_the_pick_only_by_more_than_the_margin():
    assert blas_core.fastest({"Haswell": 300e-6, "SkylakeX": 210e-6}, "Haswell") == "SkylakeX"
    assert blas_core.fastest({"Haswell": 300e-6, "SkylakeX": 290e-6}, "Haswell") == "Haswell"
    assert blas_core.fastest({"Haswell": 200e-6, "SkylakeX": 300e-6}, "Haswell") == "Haswell"
    assert blas_core.fastest({"Sandybridge": 9e-4, "Haswell": 3e-4, "SkylakeX": 4e-4},
                             "Sandybridge") == "Haswell"


class _Library:
    """A stand-in OpenBLAS: its corename, and whether anything tried to re-initialise it."""

    def __init__(self, name):
        self.name, self.calls = name, []
        self.gotoblas_HASWELL = self.gotoblas_SKYLAKEX = object()
        self.openblas_get_corename = lambda: self.name.encode()   # a function: takes restype

    def gotoblas_dynamic_quit(self):
        self.calls.append("quit")

    def gotoblas_dynamic_init(self):
        self.calls.append("init")


def test_the_environments_coretype_is_the_users_choice(monkeypatch):
    # OpenBLAS read its variable when it loaded; this only checks that ember then keeps out
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    lib = _Library("Haswell")
    assert blas_core.select([("stand-in", lib)])["stand-in"] == "Haswell"
    assert lib.calls == []


def test_the_widest_table_is_left_without_reading_the_cpu(monkeypatch):
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.setattr(blas_core, "_cpu", lambda: pytest.fail("read /proc/cpuinfo"))
    lib = _Library("SkylakeX")
    assert blas_core.select([("stand-in", lib)])["stand-in"] == "SkylakeX"
    assert lib.calls == []


_SWITCH = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import ember
    from ember.kernels.runtime import blas_core, hostrecords, threads
    libs = [lib for lib in threads.numpy_openblas()
            if blas_core.corename(lib) and hasattr(lib, "gotoblas_dynamic_init")]
    if not libs:
        print(json.dumps({"skip": "NumPy's BLAS is not an OpenBLAS with kernel tables"}))
        sys.exit()
    lib = libs[0]
    at_import = blas_core.corename(lib)
    get = blas_core._symbol(lib, "openblas_get_num_threads")
    threads_before = get()
    if "OPENBLAS_CORETYPE" in os.environ:
        print(json.dumps({"env": os.environ["OPENBLAS_CORETYPE"], "at_import": at_import,
                          "after": blas_core.select([(lib._name, lib)])[lib._name]}))
        sys.exit()
    if "sse4_2" not in blas_core._cpu()[1]:
        print(json.dumps({"skip": "the CPU does not execute OpenBLAS's Nehalem table"}))
        sys.exit()
    forced = blas_core.use(lib, "Nehalem")
    measured = blas_core.select([(lib._name, lib)])[lib._name]
    record = hostrecords.read(blas_core.FILE)
    a = np.random.default_rng(1).standard_normal((300, 200)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((200, 100)).astype(np.float32)
    error = float(np.abs(a @ b - a.astype(np.float64) @ b).max())
    blas_core.use(lib, "Nehalem")
    blas_core.measure = lambda *args: sys.exit("measured again")
    again = blas_core.select([(lib._name, lib)])[lib._name]
    print(json.dumps({"forced": forced, "measured": measured, "in_force": blas_core.corename(lib),
                      "again": again, "record": record, "error": error,
                      "threads": [threads_before, get()]}))
""")


def test_a_table_below_the_widest_is_measured_switched_and_remembered(tmp_path):
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", _SWITCH], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if "skip" in got:
        pytest.skip(got["skip"])
    if "env" in got:    # the machine names OpenBLAS's table: ember leaves it
        assert got["after"] == got["at_import"]
        return
    assert got["forced"] == "Nehalem"
    (entry,) = got["record"].values()
    assert entry["from"] == "Nehalem" and "Nehalem" in entry["sgemm_us"]
    assert entry["table"] == blas_core.fastest(entry["sgemm_us"], "Nehalem")
    assert got["measured"] == got["in_force"] == got["again"] == entry["table"]
    assert got["error"] < 1e-3
    assert got["threads"][0] == got["threads"][1]      # the timing ran on one thread, restored
    assert os.stat(tmp_path / blas_core.FILE).st_mode & 0o777 == 0o666 & ~_umask()


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
