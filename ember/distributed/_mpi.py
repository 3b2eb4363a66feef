"""Lazy access to mpi4py: imported on first use, with an error naming the extra to install."""
from ember.errors import EmberRuntimeError

_MPI = None


def mpi():
    """Return ``mpi4py.MPI``. Raises EmberRuntimeError when mpi4py is not installed."""
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise EmberRuntimeError(
                "ember.distributed needs mpi4py and an MPI library: "
                "pip install 'ember[distributed]' (mpi4py and mpich)") from e
        _MPI = MPI
    return _MPI
