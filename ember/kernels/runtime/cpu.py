"""The host CPU's vector ISA, for kernels that choose vector width and register blocking.

``host_isa()`` reads the features LLVM reports for this CPU (``llvmlite``, imported on first
need): ``"avx512"`` (avx512f: 512-bit vectors, 32 vector registers), ``"avx2"`` (avx2 and fma:
256-bit, 16 registers), ``"sse"`` (sse2: 128-bit, 16 registers) or ``"generic"`` (128-bit
vectors that LLVM lowers as it can). ``isa()`` is the variant kernels use: the host's, or a
narrower one forced with ``EMBER_CPU_ISA`` (so an AVX-512 host also tests the AVX2 path).
``target_isa()`` is the variant Numba compiles for: the host's, or the one ``NUMBA_CPU_FEATURES``
names (Numba's disk-cache key holds its target, so a kernel whose variant is the target's can be
cached).
"""
import os

ISAS = ("generic", "sse", "avx2", "avx512")   # narrowest first
VECTOR_BYTES = {"generic": 16, "sse": 16, "avx2": 32, "avx512": 64}
REGISTERS = {"generic": 16, "sse": 16, "avx2": 16, "avx512": 32}
_host = None


def _widest(features):
    if features.get("avx512f"):
        return "avx512"
    if features.get("avx2") and features.get("fma"):
        return "avx2"
    if features.get("sse2"):
        return "sse"
    return "generic"


def host_isa():
    """The widest variant this CPU executes (see the module docstring)."""
    global _host
    if _host is None:
        try:
            from llvmlite import binding
            features = binding.get_host_cpu_features()
        except (ImportError, RuntimeError):
            features = {}
        _host = _widest(features)
    return _host


def target_isa():
    """The widest variant of Numba's compile target: ``NUMBA_CPU_FEATURES`` (``+avx2,+fma,...``)
    when set, else the host's."""
    named = os.environ.get("NUMBA_CPU_FEATURES")
    if not named:
        return host_isa()
    return _widest({f[1:]: f[0] == "+" for f in named.replace(" ", "").split(",") if f[1:]})


def isa():
    """``EMBER_CPU_ISA`` when set (one of ``ISAS``, no wider than ``host_isa()``), else the host's.
    Raises ValueError for an unknown name or a variant the host cannot execute."""
    forced = os.environ.get("EMBER_CPU_ISA")
    host = host_isa()
    if not forced:
        return host
    if forced not in ISAS:
        raise ValueError(f"EMBER_CPU_ISA: expected one of {ISAS}, got {forced!r}")
    if ISAS.index(forced) > ISAS.index(host):
        raise ValueError(f"EMBER_CPU_ISA={forced}: this CPU executes at most {host!r} "
                         f"({', '.join(ISAS[:ISAS.index(host) + 1])})")
    return forced


def variants():
    """The variants this host can execute, narrowest first."""
    return ISAS[:ISAS.index(host_isa()) + 1]
