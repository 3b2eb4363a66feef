"""``ember run -n N script.py args...``: start N ranks of a script under the installed mpiexec.
Each rank runs the script through a bootstrap that makes an uncaught exception on any rank print
that rank and its traceback and abort every rank, so a failing rank never leaves others hanging,
and that sets torchrun's RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE for the script."""
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

from ember.errors import EmberRuntimeError


def find_mpiexec():
    """The mpiexec installed beside this Python (pip's mpich), else the first on PATH.

    Raises EmberRuntimeError when there is none."""
    here = Path(sys.executable).with_name("mpiexec")
    if here.exists():
        return str(here)
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if found is None:
        raise EmberRuntimeError("ember run: no mpiexec found; pip install 'ember[distributed]' "
                                "(mpi4py and mpich) or put your MPI's mpiexec on PATH")
    return found


def launch(nproc, script, args, mpiexec=None, extra=()):
    """Run ``script`` with ``args`` on ``nproc`` ranks; returns mpiexec's exit status."""
    if nproc < 1:
        raise EmberRuntimeError(f"ember run: -n must be >= 1, got {nproc}")
    if not os.path.exists(script):
        raise EmberRuntimeError(f"ember run: script {script!r} not found")
    cmd = [mpiexec or find_mpiexec(), "-n", str(nproc), *extra, sys.executable, "-m",
           "ember.distributed.launch", script, *args]
    return subprocess.call(cmd)


def _bootstrap(argv):
    from ember.distributed._mpi import mpi
    from ember.distributed.group import _abort_all, exit_code, install_abort_hook
    MPI = mpi()
    world = MPI.COMM_WORLD
    if world.Get_size() > 1:
        install_abort_hook()
    # torchrun's variables, for scripts that read them (LOCAL_RANK: the rank on this node)
    local = world.Split_type(MPI.COMM_TYPE_SHARED)
    os.environ.update(RANK=str(world.Get_rank()), WORLD_SIZE=str(world.Get_size()),
                      LOCAL_RANK=str(local.Get_rank()), LOCAL_WORLD_SIZE=str(local.Get_size()))
    local.Free()
    script = argv[0]
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        # MPI_Finalize at exit would wait for the other ranks, stuck in a collective: abort.
        if exit_code(e.code) != 0 and world.Get_size() > 1:
            _abort_all(f"[ember.distributed] rank {world.Get_rank()} of {world.Get_size()} "
                       f"exited with status {e.code!r}; aborting all ranks.\n", exit_code(e.code))
        raise

if __name__ == "__main__":
    _bootstrap(sys.argv[1:])
