"""NumPy's OpenBLAS on the fastest kernel table the host executes (``select``, at ``import ember``).

OpenBLAS's DYNAMIC_ARCH builds (NumPy's wheels bundle one) pick a kernel table by CPU model when
they load; a CPU newer than the library falls back to an older table although it executes a
wider one. OpenBLAS 0.3.31 (NumPy 2.4) does not know AMD Zen 5 (family 0x1A) and runs its Haswell
(AVX2) kernels there: sgemm (256x2304)@(2304x784), one thread, 96 GFLOP/s against 175 with the
SkylakeX (AVX-512) ones (docs/conv.md), so every GEMM of ember (linear layers, im2col, Winograd,
attention) ran at half speed on that CPU.

``select`` runs only where OpenBLAS picked a table below one the CPU executes (its ``flags`` in
/proc/cpuinfo: ``TABLES``) and the library exports that table: it times one-thread sgemm on
OpenBLAS's pick and on each such table (interleaved, minimum of ``ROUNDS``) and keeps the fastest
(by more than ``MARGIN``: else OpenBLAS's pick stays), through OpenBLAS's own initialisation
(``gotoblas_dynamic_quit`` / ``gotoblas_dynamic_init`` with ``OPENBLAS_CORETYPE`` set for that
call only). The outcome is kept per host (CPU model and flags, the library, OpenBLAS's pick, the
allowed ISA) in ``<ember cache dir>/blas_core.json``, so later processes switch without
measuring. Untouched: where the environment sets ``OPENBLAS_CORETYPE`` (the user's choice), where
OpenBLAS's pick is not in ``TABLES`` (a table it chose for a CPU it knows: Zen, Cooperlake, ...),
and tables wider than ``EMBER_CPU_ISA`` allows. At import, before any of ember's work, so that no
BLAS call can be in flight while the table changes (as ``threads.shorten_blas_spin``).
"""
import ctypes
import os
import time

# OpenBLAS's x86-64 tables NumPy's wheels export (``gotoblas_<NAME>``), narrowest first, with the
# /proc/cpuinfo flags each one's kernels execute and the ember ISA (``cpu.ISAS``) they need
# (Prescott, also exported, is left out: forced, the library names it Katmai)
TABLES = (("Nehalem", ("sse4_2",), "sse"),
          ("Sandybridge", ("avx",), "sse"),
          ("Haswell", ("avx2", "fma"), "avx2"),
          ("SkylakeX", ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"), "avx512"))
ROUNDS = 5
SIZE = 256          # the timed sgemm: (SIZE, SIZE) @ (SIZE, SIZE), float32, one thread
MARGIN = 0.05       # a table replaces OpenBLAS's pick only when it is this much faster
FILE = "blas_core.json"

_chosen = {}        # library path -> the table in force after ``select``


def _symbol(lib, name):
    """``lib``'s function ``name`` (``threads.openblas_function``), or None."""
    from ember.kernels.runtime import threads
    return threads.openblas_function(lib, name)[0]


def corename(lib):
    """The kernel table ``lib`` runs (``openblas_get_corename``), or None."""
    fn = _symbol(lib, "openblas_get_corename")
    if fn is None:
        return None
    fn.restype = ctypes.c_char_p
    return fn().decode()


def _rank(name):
    return next((i for i, (table, _, _) in enumerate(TABLES) if table.lower() == name.lower()),
                None)


def _cpu():
    """(model name line, set of flags) of the first CPU in /proc/cpuinfo, or None."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.strip()
                elif line.startswith("flags"):
                    return model, set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def _allowed_isa():
    from ember.kernels.runtime.cpu import ISAS
    forced = os.environ.get("EMBER_CPU_ISA")
    return ISAS.index(forced) if forced in ISAS else len(ISAS) - 1


def candidates(current, flags, exported, isa_rank):
    """The tables above ``current`` (OpenBLAS's pick) that the CPU executes (``flags``), the
    library exports (``exported``: names) and ``EMBER_CPU_ISA`` allows (``isa_rank``: an index
    into ``cpu.ISAS``); [] when ``current`` is not one of ``TABLES``."""
    from ember.kernels.runtime.cpu import ISAS
    start = _rank(current)
    if start is None:
        return []
    return [table for table, needs, isa in TABLES[start + 1:]
            if table in exported and all(f in flags for f in needs)
            and ISAS.index(isa) <= isa_rank]


def fastest(seconds, current):
    """The table to keep from ``seconds`` ({table: sgemm seconds}): the fastest, where it beats
    ``current``'s time by more than MARGIN, else ``current``."""
    best = min(seconds, key=seconds.get)
    return best if seconds[best] < seconds[current] * (1 - MARGIN) else current


def use(lib, table):
    """Make ``lib`` run kernel table ``table`` (OpenBLAS's initialisation with
    ``OPENBLAS_CORETYPE`` set for that call only); returns the table now in force."""
    os.environ["OPENBLAS_CORETYPE"] = table
    try:
        lib.gotoblas_dynamic_quit()
        lib.gotoblas_dynamic_init()
    finally:
        del os.environ["OPENBLAS_CORETYPE"]
    return corename(lib)


def measure(lib, tables):
    """{table: minimum seconds of a one-thread (SIZE, SIZE) sgemm}, the tables interleaved over
    ROUNDS rounds; ``lib`` runs the last table afterwards."""
    import numpy as np
    get, put = _symbol(lib, "openblas_get_num_threads"), _symbol(lib, "openblas_set_num_threads")
    a = np.random.default_rng(0).standard_normal((SIZE, SIZE), dtype=np.float32)
    out = np.empty_like(a)
    best = dict.fromkeys(tables, float("inf"))
    threads = get() if get is not None else None
    if put is not None:
        put(1)
    try:
        for _ in range(ROUNDS):
            for table in tables:
                use(lib, table)
                np.matmul(a, a, out=out)        # warm-up: the table's buffers and code
                t = time.perf_counter()
                np.matmul(a, a, out=out)
                best[table] = min(best[table], time.perf_counter() - t)
    finally:
        if put is not None and threads is not None:
            put(threads)
    return best


def _record_key(path, current, cpu, isa_rank):
    import hashlib
    text = "\n".join((os.path.basename(path), current, cpu[0], " ".join(sorted(cpu[1])),
                      str(isa_rank)))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def select(libraries=None):
    """Put each OpenBLAS of ``libraries`` ((path, ctypes handle) pairs; default NumPy's,
    ``threads.numpy_openblas``) on the fastest table the host executes (module docstring);
    returns {library path: table in force}."""
    if libraries is None:
        from ember.kernels.runtime import threads
        libraries = [(lib._name, lib) for lib in threads.numpy_openblas()]
    for path, lib in libraries:
        _chosen[path] = _select_one(path, lib)
    return dict(_chosen)


def _select_one(path, lib):
    current = corename(lib)
    if current is None or "OPENBLAS_CORETYPE" in os.environ or \
            _rank(current) in (None, len(TABLES) - 1) or \
            not hasattr(lib, "gotoblas_dynamic_init") or not hasattr(lib, "gotoblas_dynamic_quit"):
        return current
    cpu = _cpu()
    if cpu is None:
        return current
    isa_rank = _allowed_isa()
    exported = [table for table, _, _ in TABLES if hasattr(lib, f"gotoblas_{table.upper()}")]
    wider = candidates(current, cpu[1], exported, isa_rank)
    if not wider:
        return current
    from ember.kernels.runtime import hostrecords
    key = _record_key(path, current, cpu, isa_rank)
    stored = hostrecords.read(FILE).get(key)
    table = stored.get("table") if isinstance(stored, dict) else None
    if table not in [current] + wider:
        seconds = measure(lib, [current] + wider)
        table = fastest(seconds, current)
        hostrecords.write(FILE, key, {"table": table, "from": current, "sgemm_us": {
            name: round(s * 1e6, 1) for name, s in seconds.items()}})
    return use(lib, table) if table != corename(lib) else table


def chosen():
    """{library path: kernel table} as ``select`` left them."""
    return dict(_chosen)
