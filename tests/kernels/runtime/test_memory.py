"""Freed-memory reuse: on by default, switchable, and off with EMBER_MEMORY_REUSE=0; NumPy's
huge-page advice off after import."""
import ctypes
import os
import subprocess
import sys

import pytest

import ember


def test_memory_reuse_switch():
    if not ember.set_memory_reuse(False):
        return  # not glibc: nothing to switch, set_memory_reuse reports it
    assert ember.get_memory_reuse() is False
    assert ember.set_memory_reuse(True) and ember.get_memory_reuse() is True


def test_environment_variable_disables_the_default():
    code = "import ember; print(ember.get_memory_reuse())"
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "EMBER_MEMORY_REUSE": "0"})
    assert off.stdout.strip() == "False"
    assert on.stdout.strip() in ("True", "False")
    if ember.set_memory_reuse(True):
        assert on.stdout.strip() == "True"


_ADAPTIVE = r"""
import ctypes
import numpy as np
import pytest

import ember

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                               "usmblks", "fsmblks", "uordblks", "fordblks",
                                               "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
print(ember.set_memory_reuse(False), ember.get_memory_reuse())
def mapped_chunks():
    return libc.mallinfo2().hblks

a = np.ones(1 << 21)    # 16 MiB: above glibc's initial 128 KiB threshold, so mmapped ...
del a                   # ... and freeing it raises glibc's dynamic threshold to 16 MiB,
before = mapped_chunks()
b = np.ones(1 << 21)    # so this one comes from the heap, unless the threshold was fixed
print(mapped_chunks() > before)
"""


def test_reuse_off_leaves_an_untouched_glibc_adaptive():
    """With EMBER_MEMORY_REUSE=0, ember never calls mallopt, and set_memory_reuse(False) does not
    either: setting any threshold would switch off glibc's dynamic mmap threshold."""
    try:
        ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        pytest.skip("not glibc >= 2.33")
    out = subprocess.run([sys.executable, "-c", _ADAPTIVE], capture_output=True, text=True,
                         env={**os.environ, "EMBER_MEMORY_REUSE": "0"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False", "False"]


_HUGE_PAGE_FLAG = r"""
import numpy as np
import ember
a = np.ones(1 << 23)                 # 64 MiB
inside = a.__array_interface__["data"][0] + (1 << 22)
with open("/proc/self/smaps") as f:
    mapping = None
    for line in f:
        first = line.split()[0]
        if "-" in first and ":" not in first:            # a mapping's header line
            lo, hi = (int(v, 16) for v in first.split("-"))
            mapping = lo <= inside < hi
        elif line.startswith("VmFlags:") and mapping:
            print("hg" in line.split())                  # madvise(MADV_HUGEPAGE) on it
"""


@pytest.mark.parametrize("env,advised", [({}, "False"), ({"NUMPY_MADVISE_HUGEPAGE": "1"}, "True")])
def test_import_switches_numpys_huge_page_advice_off_unless_numpy_s_variable_is_set(env, advised):
    """NumPy advises MADV_HUGEPAGE on its large arrays; after ``import ember`` a new large array's
    mapping carries no such advice (its first touches then never stall in compaction), unless
    the user set NumPy's own NUMPY_MADVISE_HUGEPAGE."""
    if not os.path.exists("/proc/self/smaps"):
        pytest.skip("no /proc/self/smaps (not Linux)")
    if advised == "True" and not os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"):
        pytest.skip("a kernel without transparent huge pages refuses the advice")
    from ember.kernels.runtime import memory
    if memory._madvise_hugepage() is None:
        pytest.skip("this NumPy has no huge-page switch")
    base = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    out = subprocess.run([sys.executable, "-c", _HUGE_PAGE_FLAG], capture_output=True, text=True,
                         env={**base, **env}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [advised]
