"""Per-host measurement files (ember.kernels.runtime.hostrecords): plain JSON dicts in ember's
cache root, written atomically, read back as {} when absent or damaged."""
import json
import os

import pytest

from ember.kernels.runtime import hostrecords


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "root"))
    return tmp_path / "root"


def test_root_follows_the_environment(cache_root, monkeypatch):
    assert hostrecords.root() == str(cache_root)
    monkeypatch.delenv("EMBER_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert hostrecords.root() == os.path.join("/somewhere", "ember")


def test_a_written_record_reads_back_beside_the_others(cache_root):
    assert hostrecords.read("probe.json") == {}
    hostrecords.write("probe.json", "host-a", {"table": "SkylakeX"})
    hostrecords.write("probe.json", "host-b", [1, 2])
    assert hostrecords.read("probe.json") == {"host-a": {"table": "SkylakeX"}, "host-b": [1, 2]}
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(cache_root / "probe.json").st_mode & 0o777 == 0o666 & ~mask
    assert os.listdir(cache_root) == ["probe.json"]     # no temporary file left


@pytest.mark.parametrize("content", ["[1, 2]", "{not json", ""])
def test_a_damaged_file_reads_as_empty_and_is_replaced(cache_root, content):
    cache_root.mkdir()
    (cache_root / "probe.json").write_text(content)
    assert hostrecords.read("probe.json") == {}
    hostrecords.write("probe.json", "k", 1)
    assert json.loads((cache_root / "probe.json").read_text()) == {"k": 1}


def test_writing_through_a_symlink_replaces_its_target(cache_root, tmp_path):
    cache_root.mkdir()
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    os.symlink(target, cache_root / "probe.json")
    hostrecords.write("probe.json", "k", 2)
    assert os.path.islink(cache_root / "probe.json")
    assert json.loads(target.read_text()) == {"k": 2}


def test_an_unwritable_root_keeps_nothing_and_raises_nothing(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(blocker / "below"))   # a file is in the way
    hostrecords.write("probe.json", "k", 1)
    assert hostrecords.read("probe.json") == {}
