"""Freed-memory reuse: on by default, switchable, and off with EMBER_MEMORY_REUSE=0."""
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
