"""Lazy access to mpi4py: imported on first use, with an error naming the extra to install."""
from ember._optional import require

_MPI = None


def mpi():
    """Return ``mpi4py.MPI``. Raises MissingDependencyError when mpi4py is not installed."""
    global _MPI
    if _MPI is None:
        _MPI = require("mpi4py.MPI", feature="ember.distributed (mpi4py and an MPI library)",
                       extra="distributed")
    return _MPI
