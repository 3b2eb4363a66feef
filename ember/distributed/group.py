"""Process groups on MPI communicators: init_process_group, new_group, ranks and sizes."""
import atexit
import os
import sys
import time
import traceback

from ember.distributed._mpi import mpi
from ember.errors import EmberRuntimeError, EmberValueError, MissingDependencyError


class ProcessGroup:
    """A set of ranks sharing an MPI communicator. ``comm`` is None on ranks outside the group."""

    def __init__(self, comm, ranks, timeout=None):
        self.comm = comm
        self.ranks = list(ranks)  # global ranks, in group-rank order
        self.timeout = timeout

    def rank(self):
        """This process's rank inside the group (-1 when not a member)."""
        return -1 if self.comm is None else self.comm.Get_rank()

    def size(self):
        """Number of ranks in the group."""
        return len(self.ranks)

    def group_rank(self, global_rank, what):
        """Translate a global rank into this group's rank. Raises EmberValueError if absent."""
        try:
            return self.ranks.index(global_rank)
        except ValueError:
            raise EmberValueError(f"{what}: global rank {global_rank} is not in the group "
                                  f"(ranks {self.ranks})") from None

    def __repr__(self):
        return f"ProcessGroup(ranks={self.ranks})"


class _State:
    world = None
    hook_installed = False
    exit_status = None  # what sys.exit was last called with (None: not called)


def _abort_all(message, code):
    """Print ``message`` for this rank, give the launcher a moment to forward it, MPI_Abort."""
    MPI = mpi()
    sys.stderr.write(message)
    sys.stderr.flush()
    sys.stdout.flush()
    time.sleep(0.5)  # let the launcher forward the output before it kills every rank
    MPI.COMM_WORLD.Abort(code)


def _excepthook(etype, value, tb):
    """Print the failing rank and its traceback, then abort every rank (no hang)."""
    MPI = mpi()
    text = "".join(traceback.format_exception(etype, value, tb))
    _abort_all(f"[ember.distributed] rank {MPI.COMM_WORLD.Get_rank()} of "
               f"{MPI.COMM_WORLD.Get_size()} failed; aborting all ranks.\n{text}", 1)


def exit_code(code):
    """The process exit status Python gives ``SystemExit(code)``."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def abort_on_failed_exit(code):
    """A rank leaving with a non-zero status while the default group is initialized aborts the
    job: MPI_Finalize at exit would otherwise wait for ranks stuck in a collective with it."""
    status = exit_code(code)
    if status == 0 or _State.world is None:
        return
    MPI = mpi()
    if MPI.Is_finalized() or MPI.COMM_WORLD.Get_size() == 1:
        return
    _abort_all(f"[ember.distributed] rank {MPI.COMM_WORLD.Get_rank()} of "
               f"{MPI.COMM_WORLD.Get_size()} exited with status {code!r}; aborting all ranks.\n",
               status)


def _recording_exit(*args):
    """sys.exit, remembering its status for the exit handler."""
    _State.exit_status = args[0] if args else None
    _State.sys_exit(*args)


def _at_exit():
    if _State.exit_status is not None:
        abort_on_failed_exit(_State.exit_status)


def install_abort_hook():
    """Make a rank that fails abort the job: an uncaught exception prints the rank and its
    traceback, and ``sys.exit`` with a non-zero status (while the default group is initialized)
    says so, both then call MPI_Abort. A clean ``sys.exit(0)`` finalizes MPI as usual."""
    if not _State.hook_installed:
        sys.excepthook = _excepthook
        _State.sys_exit = sys.exit
        sys.exit = _recording_exit
        atexit.register(_at_exit)  # runs before mpi4py's MPI_Finalize (registered earlier)
        _State.hook_installed = True


_LAUNCH = ("launch every rank with `ember run -n N script.py` (or `mpiexec -n N python "
           "script.py`, or your cluster's MPI launcher)")


def _rendezvous_error(what):
    return EmberRuntimeError(
        f"init_process_group: {what}, but ember forms its process group from MPI's launcher, not "
        "from env:// / tcp:// rendezvous (MASTER_ADDR, MASTER_PORT): MPI's way to join separately "
        "started processes (MPI_Comm_accept/connect between singletons) is broken in MPICH 5.0 "
        f"(pmodels/mpich#7805); {_LAUNCH}")


def init_process_group(backend="mpi", init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Join the default process group over ``MPI.COMM_WORLD`` (launch with ``ember run -n N`` or
    ``mpiexec``). ``timeout`` (seconds or a ``timedelta``) bounds how long a collective waits.
    ``init_method`` may be None or "env://"; ``rank`` / ``world_size`` and torch's ``RANK`` /
    ``WORLD_SIZE`` variables, when given, are checked against MPI's.

    Raises EmberValueError for a backend other than "mpi", EmberRuntimeError when called twice,
    for a ``tcp://`` / ``file://`` init_method or a ``store``, and when ``rank``/``world_size`` (or
    the environment) disagree with MPI's, as when torchrun started the processes."""
    if backend not in ("mpi", None):
        raise EmberValueError(f"init_process_group: backend {backend!r} is not supported; ember's "
                              "only backend is 'mpi' (launch with `ember run -n N script.py`)")
    if _State.world is not None:
        raise EmberRuntimeError("init_process_group: the default process group is already "
                                "initialized; call destroy_process_group() first")
    if init_method not in (None, "env://"):
        raise _rendezvous_error(f"init_method={init_method!r} was given")
    if store is not None:
        raise _rendezvous_error(f"a store ({type(store).__name__}) was given")
    MPI = mpi()
    size, me = MPI.COMM_WORLD.Get_size(), MPI.COMM_WORLD.Get_rank()
    for name, given, actual in (("world_size", world_size, size), ("rank", rank, me)):
        env = os.environ.get(name.upper())
        for src, val in (("argument", given), ("environment", env)):
            if val is None or val == "":
                continue
            try:
                val = int(val)
            except (TypeError, ValueError):
                raise EmberValueError(f"init_process_group: {name} from the {src} must be an "
                                      f"integer, got {val!r}") from None
            if val < 0 or val == actual:
                continue
            if size == 1:
                raise _rendezvous_error(f"{name}={val} from the {src} but this process was not "
                                        "started by an MPI launcher (MPI sees a world of 1)")
            raise EmberRuntimeError(
                f"init_process_group: {name}={val} from the {src} but MPI reports {actual}; "
                f"ember joins processes through MPI: {_LAUNCH}")
    if timeout is not None and hasattr(timeout, "total_seconds"):
        timeout = timeout.total_seconds()
    _State.world = ProcessGroup(MPI.COMM_WORLD.Dup(), range(size), timeout)
    if size > 1:
        install_abort_hook()


def is_available():
    """True when mpi4py can be imported."""
    try:
        mpi()
    except MissingDependencyError:
        return False
    return True


def is_initialized():
    """True between init_process_group and destroy_process_group."""
    return _State.world is not None


def is_mpi_available():
    """True when the MPI backend can be used."""
    return is_available()


def get_backend(group=None):
    """The backend name: always "mpi"."""
    _resolve(group, "get_backend")
    return "mpi"


def _world(what):
    _State.exit_status = None  # the program went on: a SystemExit it caught is not its exit
    if _State.world is None:
        raise EmberRuntimeError(f"{what}: the default process group has not been initialized; "
                                "call ember.distributed.init_process_group() first")
    return _State.world


def _resolve(group, what):
    return _world(what) if group is None else group


def get_rank(group=None):
    """This process's rank in ``group`` (default: the world); -1 when not a member."""
    return _resolve(group, "get_rank").rank()


def get_world_size(group=None):
    """Number of ranks in ``group`` (default: the world)."""
    return _resolve(group, "get_world_size").size()


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False):
    """A new group of the given global ``ranks`` (default: all). Every rank must call it, as in
    torch; ranks outside it get a group whose collectives do nothing.

    Raises EmberValueError on duplicate or out-of-range ranks."""
    world = _world("new_group")
    size = world.size()
    ranks = list(range(size)) if ranks is None else sorted(int(r) for r in ranks)
    if len(set(ranks)) != len(ranks) or any(r < 0 or r >= size for r in ranks):
        raise EmberValueError(f"new_group: ranks must be distinct and in [0, {size}), got {ranks}")
    MPI = mpi()
    sub = world.comm.Get_group().Incl(ranks)
    comm = world.comm.Create(sub)
    sub.Free()
    if comm == MPI.COMM_NULL:
        comm = None
    if timeout is not None and hasattr(timeout, "total_seconds"):
        timeout = timeout.total_seconds()
    return ProcessGroup(comm, ranks, world.timeout if timeout is None else timeout)


def destroy_process_group(group=None):
    """Free ``group``'s communicator; with no argument, leave the default group."""
    if group is None:
        if _State.world is not None and _State.world.comm is not None:
            _State.world.comm.Free()
        _State.world = None
    elif group.comm is not None:
        group.comm.Free()
        group.comm = None


def world_group(what):
    """The default group (raises EmberRuntimeError when not initialized)."""
    return _world(what)
