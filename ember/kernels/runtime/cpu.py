"""The host CPU's vector ISA, for kernels that choose vector width and register blocking.

``host_isa()`` reads the features LLVM reports for this CPU (``llvmlite``, imported on first
need): ``"avx512"`` (avx512f: 512-bit vectors, 32 vector registers), ``"avx2"`` (avx2 and fma:
256-bit, 16 registers), ``"sse"`` (sse2: 128-bit, 16 registers) or ``"generic"`` (128-bit
vectors that LLVM lowers as it can). ``isa()`` is the variant kernels use: the host's, or a
narrower one forced with ``EMBER_CPU_ISA`` (so an AVX-512 host also tests the AVX2 path).
"""
import os

ISAS = ("generic", "sse", "avx2", "avx512")   # narrowest first
VECTOR_BYTES = {"generic": 16, "sse": 16, "avx2": 32, "avx512": 64}
REGISTERS = {"generic": 16, "sse": 16, "avx2": 16, "avx512": 32}
_host = None


def host_isa():
    """The widest variant this CPU executes (see the module docstring)."""
    global _host
    if _host is None:
        try:
            from llvmlite import binding
            features = binding.get_host_cpu_features()
        except (ImportError, RuntimeError):
            features = {}
        if features.get("avx512f"):
            _host = "avx512"
        elif features.get("avx2") and features.get("fma"):
            _host = "avx2"
        elif features.get("sse2"):
            _host = "sse"
        else:
            _host = "generic"
    return _host


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
