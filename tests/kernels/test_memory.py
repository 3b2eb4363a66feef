"""Freed-memory reuse: on by default, switchable, and off with EMBER_MEMORY_REUSE=0."""
import os
import subprocess
import sys

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
