"""Lazy access to mpi4py (ember/distributed/_mpi.py): imported on first use and shared, and
without it a clear error naming the extra to install."""
import sys

import pytest


def test_missing_mpi4py_names_the_extra(monkeypatch):
    from ember.distributed import _mpi
    monkeypatch.setattr(_mpi, "_MPI", None)
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    import ember.distributed as dist
    assert not dist.is_available()
    with pytest.raises(RuntimeError, match=r"ember\[distributed\]"):
        dist.init_process_group("mpi")


def test_mpi_is_imported_once_on_first_use(monkeypatch):
    mpi4py = pytest.importorskip("mpi4py.MPI")
    from ember.distributed import _mpi
    monkeypatch.setattr(_mpi, "_MPI", None)
    assert _mpi.mpi() is mpi4py and _mpi.mpi() is _mpi._MPI
