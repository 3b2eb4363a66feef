"""Atomic file writes (ember/utils/files.py): the file appears whole or not at all (a failed
write leaves the previous file and no temporary), in the destination's folder, with the mode a
plain open(path, "wb") gives, written through a symbolic link."""
import os
import stat

import pytest

from ember.utils.files import atomic_write


def _write(path, data):
    atomic_write(path, data)


def test_writes_and_replaces(tmp_path):
    p = tmp_path / "f.bin"
    _write(p, b"one")
    assert p.read_bytes() == b"one"
    _write(str(p), b"two")
    assert p.read_bytes() == b"two" and os.listdir(tmp_path) == ["f.bin"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "f.bin"
    _write(p, b"old")
    with pytest.raises(TypeError):
        atomic_write(p, "not bytes")      # fails inside the write
    assert p.read_bytes() == b"old" and os.listdir(tmp_path) == ["f.bin"]


def test_mode_is_what_open_gives(tmp_path):
    plain = tmp_path / "plain"
    with open(plain, "wb"):
        pass
    p = tmp_path / "new"
    _write(p, b"x")
    assert stat.S_IMODE(os.stat(p).st_mode) == stat.S_IMODE(os.stat(plain).st_mode)
    os.chmod(p, 0o640)
    _write(p, b"y")                       # replacing keeps the existing file's mode
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o640


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links")
def test_a_link_is_written_through_and_stays_a_link(tmp_path):
    target = tmp_path / "real" / "t.bin"
    target.parent.mkdir()
    link = tmp_path / "link.bin"
    os.symlink(target, link)              # dangling: the target is created
    _write(link, b"data")
    assert link.is_symlink() and target.read_bytes() == b"data"
    _write(link, b"more")
    assert link.is_symlink() and target.read_bytes() == b"more"
    assert sorted(os.listdir(target.parent)) == ["t.bin"]
