"""CPU feature detection: the ISA variant ``EMBER_CPU_ISA`` forces (never wider than the host),
and the variant Numba's target (``NUMBA_CPU_FEATURES``) compiles for."""
import pytest


def test_forcing_a_wider_isa_than_the_host_is_an_error(monkeypatch):
    from ember.kernels.runtime import cpu
    monkeypatch.setattr(cpu, "_host", "sse")
    monkeypatch.setenv("EMBER_CPU_ISA", "avx2")
    with pytest.raises(ValueError, match="EMBER_CPU_ISA=avx2: this CPU executes at most 'sse'"):
        cpu.isa()
    monkeypatch.setenv("EMBER_CPU_ISA", "neon")
    with pytest.raises(ValueError, match="expected one of"):
        cpu.isa()
    monkeypatch.setenv("EMBER_CPU_ISA", "generic")
    assert cpu.isa() == "generic" and cpu.variants() == ("generic", "sse")


def test_target_isa_follows_numba_cpu_features(monkeypatch):
    """Numba's disk-cache key holds its target, so a forced variant is cached exactly when
    ``NUMBA_CPU_FEATURES`` names that variant's target (as benchmarks/instructions.py does)."""
    from ember.kernels.runtime import cpu
    monkeypatch.setattr(cpu, "_host", "avx512")
    monkeypatch.delenv("NUMBA_CPU_FEATURES", raising=False)
    assert cpu.target_isa() == "avx512"
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "+64bit,+avx,+avx2,+fma,+sse2,-avx512f")
    assert cpu.target_isa() == "avx2"
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "+sse2, +avx2")      # avx2 without fma
    assert cpu.target_isa() == "sse"
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "+avx512f,+avx2,+fma")
    assert cpu.target_isa() == "avx512"




@pytest.mark.parametrize("features, widest", [
    ({"avx512f": True, "avx2": True, "fma": True, "sse2": True}, "avx512"),
    ({"avx2": True, "fma": True, "sse2": True}, "avx2"),
    ({"avx2": True, "fma": False, "sse2": True}, "sse"),      # AVX2 without FMA: no avx2 variant
    ({"sse2": True}, "sse"),
    ({}, "generic"),
])
def test_widest_variant_of_a_feature_set(features, widest, monkeypatch):
    from ember.kernels.runtime import cpu
    assert cpu._widest(features) == widest
    monkeypatch.setattr(cpu, "_host", widest)
    monkeypatch.delenv("EMBER_CPU_ISA", raising=False)
    assert cpu.isa() == widest
    assert cpu.variants() == cpu.ISAS[:cpu.ISAS.index(widest) + 1]
    assert cpu.variants()[-1] == widest


def test_variant_tables_cover_every_isa():
    from ember.kernels.runtime import cpu
    assert set(cpu.VECTOR_BYTES) == set(cpu.REGISTERS) == set(cpu.ISAS)
    assert [cpu.VECTOR_BYTES[i] for i in cpu.ISAS] == sorted(cpu.VECTOR_BYTES.values())
    assert cpu.host_isa() in cpu.ISAS
