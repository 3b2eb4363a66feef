"""Numba, imported lazily, and the compilation of ember's kernels.

Numba is imported on first need only (never by ``import ember``): ``numba_module``,
``available``, ``has_compiler``, and ember's kernel modules through ``kernel_module``. A kernel
not built yet is compiled on one background thread while its caller runs its NumPy / BLAS path
(tiered compilation: ``ready``, ``tier``, ``EMBER_JIT_COMPILE``; see docs/process.md). Which
threads run parallel kernels is ``threads.parallel_layer``.
"""
import os
import sys
import threading

from ember.kernels.runtime import threads

_numba = None
_checked = False
_lock = threading.Lock()


def numba_module():
    """The ``numba`` module, or None when it cannot be imported."""
    global _numba, _checked
    if not _checked:
        try:
            with threads.importing_many():
                import numba
        except ImportError:
            numba = None
        _numba, _checked = numba, True
    return _numba


_found = False   # ``available`` found Numba installed (not imported yet)


def available():
    """Whether Numba can be imported, without importing it (``has_compiler`` imports it). The
    search of ``sys.path`` runs once (0.5-1 ms; fusion groups ask on every call)."""
    global _found
    if _checked:
        return _numba is not None
    if _found or sys.modules.get("numba") is not None:
        return True
    import importlib.util
    if importlib.util.find_spec("numba") is None:
        numba_module()   # not installed: remember (the import fails at once)
        return False
    _found = True
    return True


_imported = set()   # modules ``importing`` has seen imported (or fail to import)


def _imported_now(name):
    module = sys.modules.get(name)
    return module is not None and not getattr(getattr(module, "__spec__", None),
                                              "_initializing", False)


def importing(name):
    """True while module ``name`` (``"numba"`` or a kernel module that imports it, such as
    ``"ember.kernels.pool.pool2d_numba"``) is being imported on the compile thread: under "background"
    the process's first import of Numba (0.2-0.7 s) runs there, like a compile, and the caller
    runs its NumPy / BLAS path meanwhile. A module whose kernels an earlier process compiled
    (``compiled_before``) is imported there too, at priority LOAD, ahead of any compile, and
    Numba's tables are built after it (``_warm_up``); a ``tier`` choosing meanwhile is
    provisional. False once it is imported, when Numba is not installed, under "sync" and "off",
    and for a module compiled before once Numba's tables are built: the caller then imports it
    itself."""
    if name in _imported or _imported_now(name):
        return False
    if compile_mode() != "background" or not available():
        return False
    before = compiled_before(name)
    if before and _numba_warm:
        return False
    import importlib

    def job():
        try:
            with threads.importing_many():   # (Numba's import, when this module is the first)
                importlib.import_module(name)
            if before:
                _warm_up()
        finally:
            _imported.add(name)   # imported, or failed: the caller's own import then says so
    if before:
        # its kernels are in the disk cache: Numba's import and tables (0.7-1 s, once) load on
        # the compile thread ahead of any compile, and a tier chosen meanwhile is chosen again
        # once they have (``tier``)
        _waiting_for_load()
        submit(("import", name), f"import {name}", job, record=False, priority=LOAD)
    else:
        submit(("import", name), f"import {name}", job, priority=NOW)
    return name not in _imported


_modules = {}   # kernel module name -> module, or False (Numba has no compiler here)


def kernel_module(name):
    """The Numba kernel module ``name`` of ember (``"ember.kernels.pool.pool2d_numba"``), imported on
    first use (never by ``import ember``), or None: Numba has no compiler here, or its first
    import is still running on the compile thread (``importing``: the caller runs its NumPy path
    meanwhile and asks again on its next call)."""
    mod = _modules.get(name)
    if mod is None:
        if importing(name):
            return None
        mod = False
        if has_compiler():
            import importlib
            mod = importlib.import_module(name)
        _modules[name] = mod
    return mod or None


def has_compiler():
    """True when Numba is importable, so expressions run as compiled kernels."""
    return numba_module() is not None


# ------------------------------------------------------------------------- tiered compilation
# A kernel that is neither compiled in this process nor in Numba's disk cache is compiled on one
# background thread while its caller runs the NumPy / BLAS path; the caller switches once it is
# ready. EMBER_JIT_COMPILE: "background" (the default), "sync" (compile on first use, blocking:
# the test suite's setting) or "off" (never compile: NumPy / BLAS paths only; explicitly asked
# compiled paths, e.g. a forced conv algorithm, still compile). See docs/process.md.
_MODES = ("background", "sync", "off")
_mode = None
_queue = None
_pending = {}        # key ((id(dispatcher), signature), ...) queued or compiling -> (priority, seq)
                     # of its live queue entry
_compiled = []       # (name, seconds) of the compiles the background thread ran
_failed = []         # (name, error) of the ones that raised
# whether this process has compiled or loaded a kernel: the first one also loads Numba's typing
# and target registries (numba.np.*, and SciPy for its BLAS check): 0.5-1 s, even for a kernel
# read from the disk cache, so that first load runs on the compile thread too
_numba_warm = False


def compile_mode():
    """``"background"``, ``"sync"`` or ``"off"`` (``EMBER_JIT_COMPILE``, read on first use)."""
    global _mode
    if _mode is None:
        mode = os.environ.get("EMBER_JIT_COMPILE", "background")
        if mode not in _MODES:
            raise ValueError(f"EMBER_JIT_COMPILE: expected one of {_MODES}, got {mode!r}")
        _mode = mode
    return _mode


def set_compile_mode(mode):
    """Set how kernels that are not built yet are compiled (see ``compile_mode``); returns the
    previous mode. Raises ValueError for another name."""
    global _mode
    if mode not in _MODES:
        raise ValueError(f"set_compile_mode: expected one of {_MODES}, got {mode!r}")
    previous, _mode = compile_mode(), mode
    return previous


def signature(*examples):
    """Numba argument types of example values (``numba.typeof`` of each)."""
    numba = numba_module()
    return tuple(numba.typeof(a) for a in examples)


def _in_disk_cache(dispatcher, sig):
    cache = getattr(dispatcher, "_cache", None)
    try:
        key = cache._index_key(sig, dispatcher.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:   # no cache (cache=False) or Numba's internals changed: compile to know
        return False


def _worker():
    import time
    while True:
        priority, seq, key, name, job, record = _queue.get()
        with _lock:
            live = _pending.get(key) == (priority, seq)
        if not live:   # an entry a later ``submit`` moved up: it has run already
            _task_done()
            continue
        if priority == LATER and seq not in _graced:
            # a LATER compile runs for seconds: first let the callers that switch at once (the
            # next training step, after an import this thread ran) queue theirs ahead of it
            _graced.add(seq)
            _grace()
            _queue.put((priority, seq, key, name, job, record))
            _task_done()
            continue
        _graced.discard(seq)
        _yield_to_foreground()
        start = time.perf_counter()
        try:
            with _job_lock:
                if _closing:     # the interpreter is exiting (``_at_exit``): run nothing more
                    continue
                with _lock:     # (kept choices: the same thread counts, the same bits)
                    if TAKE_CORE and not _keep_first:
                        threads.compiling(True)
                job()
        except Closing:
            pass
        except Exception as e:   # the caller's NumPy path stays in use
            _failed.append((name, f"{type(e).__name__}: {e}"))
        else:
            if record:
                _compiled.append((name, time.perf_counter() - start))
        finally:
            with _lock:
                _pending.pop(key, None)
            _task_done()


# The compile thread's jobs (Numba's import and tables, disk-cache loads: 0.5-1 s at a process's
# start; compiles) are mostly Python under the GIL, and a program's thread that shares the GIL
# with them, dropping it in every NumPy call, waits a switch interval (5 ms) to take it back each
# time: LeNet-5's first eager step took ~90 ms (warm caches), against ~32 ms with the compile
# thread held, and the three first calls of its compiled step 80-100 ms each against ~30; the
# first 60 steps took as long either way. So the thread starts no job while the program's thread
# is in a latency-bound first pass: inside a ``foreground`` block (an ``ember.compile``
# function's first calls: the call creating an optimizer's state, the trace and compile, the
# check), or queueing new jobs (a first step meeting its kernels): not before FOREGROUND_GAP_S
# after the last block ended or job was queued by another thread. A job waits at most
# FOREGROUND_MAX_S; one already running finishes; ``wait_compiles`` lifts the hold.
FOREGROUND_MAX_S = 1.0
FOREGROUND_GAP_S = 0.02
_held = threading.Condition(threading.Lock())
_holds = 0          # blocks inside ``foreground``, on any thread
_hold_end = 0.0     # perf_counter() when the last block ended or another thread queued a job
_draining = 0       # ``wait_compiles`` callers waiting (the hold is lifted for them)


class foreground:
    """Context manager: the compile thread starts no job while the block runs and for
    FOREGROUND_GAP_S after (each job waits at most FOREGROUND_MAX_S), so that a latency-bound
    call does not share the GIL with Numba's import or a kernel load. Nests; any thread."""

    def __enter__(self):
        global _holds
        with _held:
            _holds += 1
        return self

    def __exit__(self, *exc):
        global _holds, _hold_end
        import time
        with _held:
            _holds = max(0, _holds - 1)
            if not _holds:
                _hold_end = time.perf_counter()
                _held.notify_all()
        return False


def _busy():
    """Note that a thread other than the compile thread queued a job just now (``submit``)."""
    global _hold_end
    import time
    with _held:
        _hold_end = time.perf_counter()


def _yield_to_foreground():
    """On the compile thread, before a job: wait while ``foreground`` holds it (at most
    FOREGROUND_MAX_S)."""
    import time
    deadline = time.perf_counter() + FOREGROUND_MAX_S
    with _held:
        while not _draining and not _closing:
            now = time.perf_counter()
            until = deadline if _holds else min(deadline, _hold_end + FOREGROUND_GAP_S)
            if until <= now:
                return
            _held.wait(until - now)


def _task_done():
    """``task_done`` for the entry the worker took; with nothing left to run, ember's threads get
    every core back first (``threads.compiling``), so ``wait_compiles`` returns with them."""
    if _queue.empty():
        threads.compiling(False)
    _queue.task_done()


# Queue order: a compile whose caller switches to the kernel as soon as it is ready (pooling,
# the col2im adds: their fallbacks give the kernel's bits) runs before one queued while a
# ``tier`` chose (a convolution algorithm): that call switches once its kernel is ready too, but
# its compiles are the long ones (the direct convolution's 3-8 s). A key queued LATER and asked
# for again outside a ``tier`` moves up to NOW. Measured on a cold LeNet-5 run
# (docs/performance.md, "Cold start: compile volume"): the pooling, col2im and pointwise kernels
# (8 s under load) waited behind 110-170 s (under load) of convolution compiles.
LOAD, NOW, LATER = -1, 0, 1   # ``submit`` priorities (LOAD: a disk-cache load, see ``ready``)
# a job running takes a core from ember's threads (``threads.compiling``); EMBER_JIT_CORE=0: not
TAKE_CORE = os.environ.get("EMBER_JIT_CORE", "1") != "0"
_seq = 0              # submission counter: first in, first out within a priority
_graced = set()       # seqs of LATER entries the worker has already held back once
LATER_GRACE_S = 0.25  # how long the worker waits before starting a LATER compile


def _grace():
    import time
    time.sleep(LATER_GRACE_S)
_choosing = threading.local()   # .depth > 0 while this thread runs a ``tier``'s ``choose``


def _priority():
    return LATER if getattr(_choosing, "depth", 0) else NOW


def submit(key, name, job, record=True, priority=None):
    """Run ``job()`` (a compile) on the background compile thread unless ``key`` is already
    queued; compiles run one at a time, each listed by ``background_compiles`` under ``name``
    unless not ``record``. ``priority`` NOW runs before LATER, in submission order within each;
    by default LATER for a compile queued while a ``tier`` chooses, else NOW. The thread is a
    daemon, and at exit the queue is dropped; a compile in flight is finished first
    (``_at_exit``)."""
    global _queue, _thread, _seq
    if priority is None:
        priority = _priority()
    _waiting_for_compile(key)
    with _lock:
        queued = _pending.get(key)
        if queued is not None and queued[0] <= priority:
            return
        if _queue is None:
            import queue
            _register_fork_hooks()
            _queue = queue.PriorityQueue()
            import atexit
            atexit.register(_at_exit)
            _thread = threading.Thread(target=_worker, name="ember-jit", daemon=True)
            _thread.start()
        _seq += 1
        # queued LATER and now asked for NOW: a second entry, NOW; the first is skipped (a job
        # already running keeps its entry: a NOW entry then runs nothing, see ``_worker``)
        _pending[key] = (priority, _seq)
        item = (priority, _seq, key, name, job, record)
    if threading.current_thread() is not _thread:
        _busy()
    _queue.put(item)


_closing = False


class Closing(Exception):
    """Raised in a compile-thread job at interpreter exit, in place of the compile it would run."""


def _at_exit():
    """At interpreter exit: no further job starts, and the one in flight ends first. A compile
    is LLVM work outside the GIL; a process that exited under it tore LLVM down mid-compile (a
    segmentation fault after the program's last line, seen with convolution kernels compiling).
    A job waiting for the compile process (``compile_process``) returns at once: the worker is
    stopped and the job compiles nothing here."""
    global _closing
    _closing = True
    # the compile thread may be importing it right now (no ``stop`` yet): ``prebuild`` then
    # sees ``_closing`` once the import is done and starts no worker
    stop = getattr(sys.modules.get("ember.kernels.runtime.compile_process"), "stop", None)
    if stop is not None:
        stop()
    with _job_lock:
        pass


def prebuild(request):
    """On the compile thread, under "background": have the compile process build ``request``
    (``compile_process.request_for``'s, or ``{"source": ...}`` for a generated kernel module)
    into Numba's disk cache, so that the job's own compile that follows is a cache load. True
    when it did; False when it could not (None request, the process unavailable, its error):
    the job then compiles the kernel itself. Raises ``Closing`` at interpreter exit."""
    if request is None or compile_mode() != "background":
        return False
    if "source" in request and _prebuilt_pointwise(request["source"]):
        return True      # in the cache already: the job's own compile loads it
    from ember.kernels.runtime import compile_process
    if _closing:        # the exit came during the import: no worker to start now
        raise Closing()
    if not compile_process.enabled():
        return False
    # the wait holds no lock a fork or the exit needs (no import, no LLVM work here): a fork
    # meanwhile need not wait for the worker's compile
    held = threading.current_thread() is _thread
    if held:
        _job_lock.release()
    try:
        done = compile_process.run(request)
    finally:
        if held:
            _job_lock.acquire()
    if _closing:
        raise Closing()
    return done


def _prebuilt_pointwise(source):
    """Whether the install-time cache seeded the generated pointwise kernel of ``source``."""
    _seed_prebuilt()
    prebuilt = sys.modules.get("ember.kernels.runtime.prebuilt")
    if prebuilt is None or not prebuilt._pointwise:
        return False
    from ember.kernels.runtime import diskcache
    return prebuilt.has_pointwise(diskcache.module_name(source, numba_module().__version__))


# ---------------------------------------------------------------------------------- fork safety
# A job of the compile thread holds locks a forked child could never take again: Python's import
# lock of the module it imports (``import numba`` takes 0.2-0.7 s), Numba's compiler lock, LLVM's
# own mutexes (llvmlite drops the GIL in its calls, so a fork can land inside one). A fork from
# any other thread therefore waits for the job in flight to end (``_job_lock``) and holds the
# thread before its next job; the child starts without it: no queue, nothing pending, so an op
# whose kernel is not built queues it again in the child (a new compile thread there) and runs
# its NumPy path meanwhile, and the parent's thread goes on with its queue. See docs/process.md.
_job_lock = threading.Lock()
_thread = None
_fork_held = []      # the locks ``_before_fork`` took, released after the fork
_hooks_registered = False


def _before_fork():
    if _thread is None or threading.current_thread() is _thread:
        return
    _job_lock.acquire()
    _lock.acquire()
    _fork_held.extend((_lock, _job_lock))


def _after_fork_in_parent():
    while _fork_held:
        _fork_held.pop(0).release()


def _after_fork_in_child():
    global _queue, _thread, _lock, _job_lock, _seed_lock, _held, _holds, _draining
    _fork_held.clear()
    _lock, _job_lock, _seed_lock = threading.Lock(), threading.Lock(), threading.Lock()
    _held, _holds, _draining = threading.Condition(threading.Lock()), 0, 0
    _queue = _thread = None
    _pending.clear()
    worker = sys.modules.get("ember.kernels.runtime.compile_process")
    if worker is not None:
        worker.after_fork_in_child()


def _register_fork_hooks():
    """Register the fork hooks (once per process, before the thread starts). Registered last,
    ``_before_fork`` runs first: the "before" hooks of modules imported earlier, ``logging``'s
    lock among them, would otherwise be held while it waits for a job that needs them. Numba
    imports two modules that register hooks, ``logging`` and ``random``: they are imported
    first, so that neither registers while a fork waits (its "before" would be skipped)."""
    global _hooks_registered
    if _hooks_registered or not hasattr(os, "register_at_fork"):
        return
    import logging  # noqa: F401
    import random  # noqa: F401
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
    _hooks_registered = True


# ------------------------------------------------------------------------------ stable tiers
# Where an op's compiled kernel and its fallback differ in the last bits (a BLAS GEMM against a
# Numba loop, sums in another order), the op asks ``tier`` which one a call runs: the choice of
# its key's first call, chosen again once (when that call ran its fallback while the kernel
# loaded or compiled) after the kernel is ready; under ``use_deterministic_algorithms(True)`` the
# first choice is kept, so the same call gives the same bits every time in the process. Keys
# first seen once the kernel is ready run compiled. Fallbacks that give the kernel's bits (max
# pooling, the col2im adds, relu/tanh/sigmoid backward) switch freely.
_tiers = {}
_UNSEEN = object()


def tier(key, choose):
    """The tier call ``key`` (a hashable naming the op, its shapes, dtypes and arguments) runs
    on: ``choose()`` on the key's first call in this process (any value, None included), that
    same value on later ones; of two threads making a key's first call at once, both get the
    first value stored. A choice made while a kernel it asked for was not ready is chosen again,
    once, on the key's first call after that kernel is: one made while a disk-cache load was
    queued (Numba's import and tables, the process's first 0.7-1 s of Numba: ``ready``,
    ``importing``: *provisional*), and one made while a background compile it queued or found
    queued ran (*awaiting*, up to ``MAX_RECHOICES`` times per key), unless
    ``ember.use_deterministic_algorithms(True)`` was in force at the choice: then the first
    choice is kept and the call gives the same bits every time. A switch may change the last
    bits (a Numba kernel against the NumPy / BLAS fallback)."""
    t = _tiers.get(key, _UNSEEN)
    if t is _UNSEEN:
        t = _tiers.setdefault(key, _choose_tier(key, choose))
        if _importing_now():
            submit(("tier", key), f"tier {key}", lambda: _choose_again(key, choose, 3),
                   record=False, priority=NOW)
            _await(key, [("tier", key)])
    elif _provisional and key in _provisional and not _loading():
        t = _tiers[key] = _choose_tier(key, choose)
    elif _awaiting and key in _awaiting and _awaited_done(key):
        _rechoices[key] = _rechoices.get(key, 0) + 1
        t = _tiers[key] = _choose_tier(key, choose)
    return t


_provisional = set()   # tier keys chosen while a disk-cache load was queued
_awaiting = {}         # tier key -> the compile-queue keys its choice waited for
_rechoices = {}        # tier key -> how often it chose again after its compiles
MAX_RECHOICES = 3      # a key's choices after compiles it waited for (one, unless it queues more)


def _choose_tier(key, choose):
    """``choose()`` for ``key``; the key is provisional when a kernel it asked for was waiting
    for a disk-cache load (``_waiting_for_load``), and awaiting the compiles it queued or found
    queued (``submit``, ``_waiting_for_compile``)."""
    outer, outer_keys = getattr(_choosing, "waited", False), getattr(_choosing, "compiles", None)
    _choosing.waited, _choosing.compiles = False, []
    try:
        t = _choosing_with(choose)
        waited, compiles = _choosing.waited, _choosing.compiles
    finally:
        _choosing.waited, _choosing.compiles = outer, outer_keys
    if outer_keys is not None:      # a tier chosen inside another's choice: both await
        outer_keys.extend(compiles)
    if waited:
        _provisional.add(key)
    else:
        _provisional.discard(key)
    _awaiting.pop(key, None)
    _await(key, compiles)
    return t


def _await(key, compiles):
    """Let ``key`` choose again once the compile-queue entries ``compiles`` have run (not under
    ``use_deterministic_algorithms``, nor past ``MAX_RECHOICES``)."""
    if not compiles or _rechoices.get(key, 0) >= MAX_RECHOICES or _deterministic():
        return
    _awaiting[key] = tuple(set(_awaiting.get(key, ())).union(compiles))


def _awaited_done(key):
    with _lock:
        return not any(k in _pending for k in _awaiting.get(key, ()))


_keep_first = False    # ``keep_first_choices``: ember.use_deterministic_algorithms sets it


def keep_first_choices(keep):
    """Keep each ``tier`` key's first choice for the process (True: the same bits on every call)
    instead of choosing again once its kernels are compiled; ``ember.use_deterministic_algorithms``
    sets it (the runtime imports no layer above it)."""
    global _keep_first
    with _lock:
        _keep_first = bool(keep)
        if _keep_first:     # a compile running keeps no core from ember's threads from now on
            threads.compiling(False)


def _deterministic():
    return _keep_first


def _waiting_for_compile(key):
    """Note, for the ``tier`` choosing on this thread, that it waits for queue entry ``key``."""
    compiles = getattr(_choosing, "compiles", None)
    if compiles is not None and getattr(_choosing, "depth", 0):
        compiles.append(key)


def _waiting_for_load():
    """Note, for the ``tier`` choosing on this thread, that a kernel it asked for is loading."""
    if getattr(_choosing, "depth", 0):
        _choosing.waited = True


def _loading():
    """Whether a disk-cache load (priority LOAD) is queued or running."""
    with _lock:
        return any(p[0] == LOAD for p in _pending.values())


def _choosing_with(choose):
    """``choose()``, with the compiles it queues put LATER (see ``submit``)."""
    _choosing.depth = getattr(_choosing, "depth", 0) + 1
    try:
        return choose()
    finally:
        _choosing.depth -= 1


def _importing_now():
    with _lock:
        return any(k[0] == "import" for k in _pending)


def _choose_again(key, choose, left):
    """Compile-thread job: run a kept call's ``choose`` again once the imports queued before it
    are done, so that the compiles it stopped short of (its kernel module was still being
    imported) are queued, and the key awaits them (``tier``): new shapes, and later processes
    through the disk cache, get the kernel too. Again after any import it queued in turn (at most
    ``left`` times)."""
    outer = getattr(_choosing, "compiles", None)
    _choosing.compiles = compiles = []
    try:
        _choosing_with(choose)
    finally:
        _choosing.compiles = outer
    _await(key, compiles)
    if left > 1 and _importing_now():
        submit(("tier", key, left), f"tier {key}", lambda: _choose_again(key, choose, left - 1),
               record=False, priority=NOW)
        _await(key, [("tier", key, left)])


def settled(key):
    """The choice ``tier`` made for ``key`` where it is final (made, and neither provisional nor
    awaiting compiles: every later ``tier(key, ...)`` returns it), else None."""
    t = _tiers.get(key)
    if t is None or key in _provisional or key in _awaiting:
        return None
    return t


def forget_tiers():
    """Forget the tiers ``tier`` kept: each key chooses again on its next call, which may then
    give other bits than before (tests that swap a kernel's readiness use it)."""
    _tiers.clear()
    _provisional.clear()
    _awaiting.clear()
    _rechoices.clear()


def pending(key):
    with _lock:
        return key in _pending


def wait_compiles():
    """Block until every queued background compile has finished."""
    global _draining
    if _queue is None:
        return
    with _held:
        _draining += 1
        _held.notify_all()
    try:
        _queue.join()
    finally:
        with _held:
            _draining -= 1


def background_compiles():
    """(name, seconds) of each compile the background thread has run, and (name, error) of each
    that raised (the caller then keeps its NumPy / BLAS path)."""
    return list(_compiled), list(_failed)


def _warmed():
    global _numba_warm
    _numba_warm = True


def _warm_up():
    """Build Numba's typing and target tables (what the process's first kernel load or compile
    builds: ~0.4 s of CPU here) on this thread, so that later loads from the disk cache take
    10-40 ms each."""
    if _numba_warm:
        return
    numba_module()
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import cpu_target
    with global_compiler_lock, threads.importing_many():
        cpu_target.typing_context.refresh()
        cpu_target.target_context.refresh()
    _warmed()


# A process that meets a kernel before it is ready keeps that call on its fallback (``tier``),
# unless the kernel is in Numba's disk cache: then Numba's import and tables (0.7-1 s of CPU,
# once) run on the compile thread at priority LOAD, the call runs its fallback meanwhile, and
# its tier is provisional (chosen again once the loads are done); later loads (10-40 ms each)
# run on the calling thread. Which modules' kernels were compiled is known without importing
# Numba: a marker file per module (and Numba cache directory) under
# ``$EMBER_CACHE_DIR/numba-compiled``, written after a compile. Only its existence is read; a
# stale one costs a load job that finds nothing, then the compile is queued as usual.
_before = {}         # module name -> whether its marker existed when first asked
_marked = set()


def _marker(module):
    import hashlib
    from ember.kernels.runtime import hostrecords
    ident = "\0".join((module, os.environ.get("NUMBA_CACHE_DIR", ""), os.path.dirname(__file__)))
    return os.path.join(hostrecords.root(), "numba-compiled",
                        hashlib.sha256(ident.encode()).hexdigest()[:32])


def compiled_before(module):
    """Whether an earlier process compiled kernels of ember's module ``module`` (its marker
    existed when this process first asked; read once per module), or the install-time build
    put them in this process's cache (``prebuilt.seed``, on the first call)."""
    known = _before.get(module)
    if known is None:
        _seed_prebuilt()
        known = _before.get(module)
    if known is None:
        known = _before[module] = module.startswith("ember.") and os.path.exists(_marker(module))
    return known


_prebuilt_done = False
_seed_lock = threading.Lock()   # one thread seeds; another asking meanwhile waits for it


def _seed_prebuilt():
    """Once per process: copy the install-time kernel cache (``prebuilt``) into this process's
    Numba cache; the modules it holds count as compiled before. Off under "off" (nothing loads
    from the cache there) and with ``EMBER_PREBUILT=0``."""
    global _prebuilt_done
    if _prebuilt_done:
        return
    with _seed_lock:
        if _prebuilt_done:
            return
        try:
            if compile_mode() != "off" and os.environ.get("EMBER_PREBUILT", "1") != "0":
                from ember.kernels.runtime import prebuilt
                for module in prebuilt.seed():
                    _before.setdefault(module, True)
        except OSError:
            pass
        finally:
            _prebuilt_done = True


def _mark_compiled(module):
    if module in _marked or not module.startswith("ember."):
        return
    _marked.add(module)
    path = _marker(module)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "a"):
            pass
    except OSError:   # an unwritable cache: later processes fall back while they compile
        pass


_ready_seen = {}     # (id(dispatcher), id(sig)) -> sig, of signatures found compiled
_unloadable = set()  # (id(dispatcher), sig) whose disk-cache entry raised when loaded


def _compile(dispatcher, sig):
    """Compile (or load from the disk cache) ``dispatcher`` for ``sig``; a ``parallel=True``
    kernel starts Numba's threading layer, so ember picks it first (``parallel_layer``):
    otherwise the first such compile starts Numba's default choice (OpenMP here), every
    ``prange`` then runs on it and ember's TBB-only paths turn themselves off."""
    if dispatcher.targetoptions.get("parallel"):
        threads.parallel_layer()
    dispatcher.compile(sig)
    _mark_compiled(dispatcher.py_func.__module__)


def ready(dispatcher, sig, force=False, later=False):
    """Whether ``dispatcher`` (a Numba ``@njit`` function) can run argument types ``sig`` (see
    ``signature``) now. True when it is compiled for them in this process or, under "background"
    and "sync", when its disk cache holds them (loaded now, once Numba's tables are built: the
    first load, which builds them, is queued, at priority LOAD for a module compiled before,
    and a ``tier`` choosing meanwhile is provisional; an entry that raises when loaded is
    listed by ``background_compiles`` and the caller runs its fallback) or the mode is "sync"
    or ``force`` (compiled now, blocking). Otherwise False: under
    "background" its compile is queued on the background thread (once) and the caller runs its
    NumPy / BLAS path meanwhile. A plain Python callable (a wrapper in place of a dispatcher) is
    always ready. A (dispatcher, sig object) found ready is remembered by identity: the lookup
    hashes every Numba type of ``sig`` (~1 us each), more than a batch-of-one kernel runs.
    ``later``: a compile it queues waits behind those queued NOW (a ``prange`` driver whose
    caller meanwhile runs the one-thread kernel it calls over ember's pool)."""
    key = (id(dispatcher), id(sig))
    if _ready_seen.get(key) is sig:
        return True
    overloads = getattr(dispatcher, "overloads", None)
    if overloads is None or sig in overloads:
        if overloads is not None:
            _ready_seen[key] = sig   # keeps sig alive, so its id is not reused
        return True
    mode = compile_mode()
    if force or mode == "sync":
        _compile(dispatcher, sig)
        _warmed()
        return True
    if mode == "off":
        return False
    key = (id(dispatcher), sig)
    if pending(key):
        _waiting_for_compile(key)
        return False
    warm = compiled_before(dispatcher.py_func.__module__)
    name = getattr(dispatcher.py_func, "__qualname__", "kernel")
    if warm and not _numba_warm:
        # the process's first load builds Numba's tables (0.4-0.7 s): on the compile thread,
        # ahead of any compile; a tier chosen meanwhile chooses again once it is done
        _waiting_for_load()

        def load():
            _warm_up()
            if _in_disk_cache(dispatcher, sig):
                _compile(dispatcher, sig)
        submit(key, f"load {dispatcher.py_func.__module__}.{name}", load, record=False,
               priority=LOAD)
        return False
    if key in _unloadable:
        return False
    if (_numba_warm or warm) and _in_disk_cache(dispatcher, sig):
        from numba.core.compiler_lock import global_compiler_lock
        lock = getattr(global_compiler_lock, "_lock", None)
        # not while a compile runs, unless the module's kernels are expected on disk: a call
        # that ran its fallback now would keep it (``tier``)
        if lock is not None and lock.acquire(blocking=warm):
            try:
                _compile(dispatcher, sig)
            except Exception as e:   # noqa: BLE001 - an unreadable cache entry: the fallback runs
                # (seen: an entry whose environment names the module '<dynamic>', written by a
                # process that built the kernel from exec'd source, raises ModuleNotFoundError)
                _unloadable.add(key)
                _failed.append((f"load {dispatcher.py_func.__module__}.{name}",
                                f"{type(e).__name__}: {e}"))
                return False
            finally:
                lock.release()
            _warmed()
            return True

    def job():
        from ember.kernels.runtime import compile_process
        prebuild(compile_process.request_for(dispatcher, sig))
        _compile(dispatcher, sig)
        _warmed()
    submit(key, f"{dispatcher.py_func.__module__}.{name}", job,
           priority=LATER if later else None)
    return False
