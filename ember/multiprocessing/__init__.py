"""``ember.multiprocessing``: Python's ``multiprocessing`` with tensors shared, not copied,
between processes (as ``torch.multiprocessing``).

Everything of ``multiprocessing`` is re-exported (``Process``, ``Queue``, ``Pool``,
``get_context``, ``set_start_method``, ``cpu_count``, ...). Importing this package registers
reductions with ``multiprocessing``'s pickler, so a tensor passed to a child process (its
``Process`` arguments under spawn or forkserver, a ``Queue``, a ``Pipe``, a ``Pool``) is moved
into shared memory and the child maps the same memory; under fork a shared tensor is inherited
as the same memory. ``model.share_memory()`` then lets several processes train one model in
place (Hogwild). ``spawn`` / ``start_processes`` run ``fn(i, *args)`` in N processes and raise
a child's exception in the parent. See docs/multiprocessing.md.
"""
import multiprocessing
from multiprocessing import *  # noqa: F401,F403

from ember.multiprocessing.reductions import (get_all_sharing_strategies,
                                              get_sharing_strategy, init_reductions,
                                              set_sharing_strategy)
from ember.multiprocessing.spawn import (ProcessContext, ProcessException,
                                         ProcessExitedException, ProcessRaisedException, spawn,
                                         start_processes)

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies",
           "spawn", "start_processes", "ProcessContext", "ProcessException",
           "ProcessExitedException", "ProcessRaisedException"] + list(multiprocessing.__all__)

init_reductions()
