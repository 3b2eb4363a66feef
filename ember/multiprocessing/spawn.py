"""``spawn`` / ``start_processes``: run ``fn(i, *args)`` in ``nprocs`` processes and join them,
as ``torch.multiprocessing.spawn``. A child that raises writes its traceback to a file of the
context's own; the parent terminates the other children and raises ProcessRaisedException
carrying it (ProcessExitedException for a child that died or exited non-zero)."""
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import sys
import tempfile
import time
import warnings
import weakref

from ember.errors import EmberError

__all__ = ["ProcessContext", "ProcessException", "ProcessExitedException",
           "ProcessRaisedException", "spawn", "start_processes"]


class ProcessException(EmberError):
    """A process started by ``spawn`` failed: ``error_index`` is its index, ``error_pid`` its
    pid."""

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.error_pid = error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """A process started by ``spawn`` raised an exception; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A process started by ``spawn`` was killed by a signal (``signal_name``) or exited with
    a non-zero ``exit_code`` without raising."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid, self.exit_code,
                            self.signal_name)


def _wrap(fn, i, args, error_file):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent terminating its children
    except Exception:
        import traceback
        tmp = error_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(traceback.format_exc())
        os.replace(tmp, error_file)
        sys.exit(1)


class ProcessContext:
    """The processes started by ``start_processes(..., join=False)``; ``join`` waits for them."""

    def __init__(self, processes, error_files, _folder=None):
        self.processes = processes
        self.error_files = error_files
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}
        # the folder start_processes made for the error files, removed once all are joined
        self._cleanup = weakref.finalize(self, shutil.rmtree, _folder, True) if _folder else None

    def pids(self):
        """The pid of each process, by index."""
        return [int(p.pid) for p in self.processes]

    def _join_all(self, timeout):
        end = time.monotonic() + timeout
        for p in self.processes:
            p.join(max(0.0, end - time.monotonic()))

    def join(self, timeout=None, grace_period=None):
        """Wait up to ``timeout`` seconds (None: until one exits) for the processes. Returns
        True once all have exited cleanly, False while some still run. When one failed, the
        others get ``grace_period`` seconds, then SIGTERM, then SIGKILL, and the first failure
        is raised: ProcessRaisedException with its traceback, or ProcessExitedException."""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for s in ready:
            i = self.sentinels.pop(s)
            p = self.processes[i]
            p.join()
            if p.exitcode != 0:
                failed = i
                break
        if failed is None:
            if not self.sentinels and self._cleanup is not None:
                self._cleanup()
            return not self.sentinels
        if grace_period is not None:
            self._join_all(grace_period)
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        self._join_all(30 if grace_period is None else grace_period)
        for p in self.processes:
            if p.is_alive():
                p.kill()
            p.join()
        self.sentinels.clear()
        proc, path = self.processes[failed], self.error_files[failed]
        try:
            with open(path) as f:
                trace = f.read()
        except OSError:
            trace = None
        finally:
            if self._cleanup is not None:
                self._cleanup()
        if trace is not None:
            raise ProcessRaisedException(
                f"spawn: process {failed} (pid {proc.pid}) terminated with the following "
                f"error:\n{trace}", failed, proc.pid)
        code = proc.exitcode
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"<Unknown signal {-code}>"
            raise ProcessExitedException(f"spawn: process {failed} (pid {proc.pid}) terminated "
                                         f"with signal {name}", failed, proc.pid, code, name)
        raise ProcessExitedException(f"spawn: process {failed} (pid {proc.pid}) terminated with "
                                     f"exit code {code}", failed, proc.pid, code)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start ``nprocs`` processes with ``start_method`` (``"spawn"``, ``"fork"``,
    ``"forkserver"``), process ``i`` running ``fn(i, *args)``. With ``join`` wait for all of
    them (raising as ``ProcessContext.join``) and return None; else return the
    ProcessContext."""
    ctx = multiprocessing.get_context(start_method)
    folder = tempfile.mkdtemp(prefix="ember-spawn-")
    processes, error_files = [], []
    try:
        for i in range(nprocs):
            path = os.path.join(folder, f"error-{i}.txt")
            p = ctx.Process(target=_wrap, args=(fn, i, args, path), daemon=daemon)
            p.start()
            processes.append(p)
            error_files.append(path)
    except BaseException:
        for p in processes:
            p.terminate()
            p.join()
        shutil.rmtree(folder, True)
        raise
    context = ProcessContext(processes, error_files, folder)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start ``nprocs`` fresh interpreters (the spawn start method), process ``i`` running
    ``fn(i, *args)``; ``fn`` must be defined at the top level of a module. With ``join`` wait
    for all (a child's exception is raised here as ProcessRaisedException naming its index,
    with its traceback) and return None; else return a ProcessContext. Another
    ``start_method`` warns (FutureWarning, as torch) and spawn is used: see
    ``start_processes``."""
    if start_method != "spawn":
        warnings.warn(f"spawn: this method only supports start_method=spawn (got: "
                      f"{start_method}). To use a different start_method use "
                      f"ember.multiprocessing.start_processes(...)", FutureWarning,
                      stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
