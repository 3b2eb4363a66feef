"""Process-wide thread settings: ember's thread count, the BLAS libraries' threads, and which
threads run ember's parallel compiled kernels (Numba's TBB layer or ember's pool).

``set_num_threads(n)`` sets the thread count of ember's own parallel loops
(``ember.kernels.runtime.threadpool``: convolution chunks, compiled pointwise kernels, pooling)
and of every BLAS library in the process that threadpoolctl can see (imported lazily, optional).
While a background compile runs (``compiling``) both use one thread fewer than the host's cores
at most (``working_threads``), so the compile has a core of its own.

BLAS thread counts are process-wide: OpenBLAS's pthreads build (what NumPy and SciPy wheels
ship) has one count for the whole process (``openblas_set_num_threads_local`` sets that same
count there), so a per-thread limit does not exist. ember therefore coordinates its own BLAS
users through one lock with two shared modes (``blas_mode``):

- ``LIMITED``: a convolution split over ember's own threads (``ember.kernels.conv.parallel``)
  or a GEMM split over the TBB threads (``linalg.gemm_into``) runs every BLAS at one thread
  (see those modules for why). Concurrent holders share the limited state (a count of
  holders); the last one out restores the counts it saved.
- ``FREE``: ember's other BLAS calls (GEMMs that do not split, convolutions that use BLAS's
  own threads) run with the BLAS's configured count.

A thread asking for the mode not in force waits until its holders leave, so each of ember's
GEMMs runs at one known BLAS thread count (OpenBLAS's GEMM bits can depend on its thread count,
measured: (257x1000) @ (1000x33) float32 differs between one and two threads). A mode asked
for by a thread that already holds one (a nested call) or by a pool worker (inside a chunk) is
granted at once as the one already held. ``set_num_threads`` waits for all holders to leave
before changing the counts. BLAS calls that are not ember's (user code in another thread) are
not coordinated: they run single-threaded while a limited convolution is in flight.
``set_conv_blas_limit(False)`` (or ``EMBER_CONV_BLAS_LIMIT=0``) stops ember from ever changing
BLAS thread counts during convolutions: those then run in the calling thread with BLAS's own
threads.

The BLAS libraries are found again (threadpoolctl's controller is rebuilt) whenever a compiled
extension module imported since the last look brought a shared object named as a BLAS (a BLAS
is loaded by one: SciPy's own OpenBLAS), so it is limited too and gets the count set by
``set_num_threads``. Pure-Python imports do not trigger a look: Numba's background import grows
``sys.modules`` through a cold process's first calls, and a look per change cost LeNet-5's
first five steps 123 lookups, 37 ms; nor do extension modules that load no BLAS (the standard
library's, Numba's: a look per such import cost LeNet-5's first 30 steps 17 looks of 3-10 ms).

Parallel compiled kernels run on Numba's TBB threading layer when the ``tbb`` package is
installed (``parallel_layer() == "tbb"``), else as serial ``nogil`` kernels split over ember's
own pool (``"pool"``). Measured on the project's 2-core VM, bias+ReLU over 1e6 float32 elements:
one thread 0.09 ms; TBB 0.05 ms; ember's pool 0.17 ms (waking a blocked Python worker and handing
it the GIL costs ~100 us here); Numba's OpenMP layer 0.055 ms, but a GEMM followed by it took
8.0 ms instead of 0.84 (its spinning workers next to OpenBLAS's), and the workqueue layer
0.22 ms. TBB's workers spin briefly and then sleep, so they neither pay the wake-up on
back-to-back calls nor fight OpenBLAS's threads. ember starts the layer itself unless Numba's
threads are already running (then TBB is used only if it is the running layer) or
``NUMBA_THREADING_LAYER`` names another. Starting Numba's threads is a setting of the whole
process: Numba launches its threading layer once, so the host program's own ``parallel=True``
Numba code then runs on TBB too (TBB is also Numba's own first choice when it can load it).
``set_parallel_layer("pool")`` before the first parallel kernel, or
``EMBER_THREADING_LAYER=pool``, keeps ember from starting them: its parallel kernels then run on
ember's pool (see docs/process.md).
"""
import ctypes
import os
import sys
import threading

from ember.kernels.runtime import blas_core, threadpool

def _default_count():
    """The thread count before any ``set_num_threads``: torch's rule (``OMP_NUM_THREADS``, then
    ``MKL_NUM_THREADS`` over it, when a positive integer) with ``EMBER_NUM_THREADS`` over both,
    else the machine's core count; at most ``NUMBA_NUM_THREADS`` when that is set (ember's
    parallel kernels run on Numba's threads, which it caps: a count above it split work into
    runs for threads Numba never starts). An invalid value is ignored with a warning, as torch
    does."""
    cap = os.environ.get("NUMBA_NUM_THREADS", "")
    cap = int(cap) if cap.strip().isdigit() and int(cap) > 0 else None
    n = None
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "EMBER_NUM_THREADS"):
        value = os.environ.get(name)
        if value is None:
            continue
        try:
            count = int(value)
            if count < 1:
                raise ValueError
            n = count
        except ValueError:
            import warnings
            warnings.warn(f"ember: ignoring {name}={value!r}: expected a positive integer",
                          RuntimeWarning, stacklevel=2)
    n = n or os.cpu_count() or 1
    return min(n, cap) if cap else n


_CPU_COUNT = _default_count()   # the default count (the core count unless the environment sets one)
_num_threads = None
_compile_cap = None     # ember's thread count while a background compile runs (``compiling``)
_working = _CPU_COUNT   # the count ember's kernels split over now (``working_threads``)
_cap_stale = False      # the BLAS counts do not follow the cap yet (set at the next mode entered)
_cap_saved = {}         # filepath -> BLAS count to restore when the cap ends

LIMITED = "limited"
FREE = "free"
_EXCLUSIVE = "exclusive"

_lock = threading.Lock()
_cond = threading.Condition(_lock)
_mode = None                # mode in force, or None when nobody holds one
_active = 0                 # threads holding the mode in force
_waiting = {LIMITED: 0, FREE: 0, _EXCLUSIVE: 0}
_n_waiting = 0              # sum of _waiting
_saved = {}                 # filepath -> BLAS thread count restored when LIMITED ends
_held = threading.local()   # this thread's (mode, depth)
_limit_enabled = os.environ.get("EMBER_CONV_BLAS_LIMIT", "1") != "0"

_controllers = None         # threadpoolctl controllers of the BLAS libraries, () if unavailable
_scanned_modules = -1       # len(sys.modules) when they were last looked for
_seen_modules = set()       # names in sys.modules then


def get_num_threads():
    """Return the number of threads ember's kernels use (default: ``OMP_NUM_THREADS`` /
    ``MKL_NUM_THREADS`` / ``EMBER_NUM_THREADS`` when set, as torch, else the core count; at most
    ``NUMBA_NUM_THREADS`` when set)."""
    if _num_threads is None:
        return _CPU_COUNT
    return _num_threads


def working_threads():
    """The thread count ember's kernels split their work over now: ``get_num_threads()``, one
    fewer than the host's cores at most while a background compile runs (``compiling``)."""
    return _working


def compiling(running):
    """The compile thread tells whether a background compile (or kernel load) is running: while
    one is, ember's parallel loops and BLAS use at most one thread fewer than the host's cores
    (at least one), so the compile has a core of its own. On 2 cores a busy compile worker,
    niced or SCHED_IDLE, cost a two-thread GPT step (GEMMs on OpenBLAS's threads, TBB kernels)
    60-75% (56 -> 90-98 ms) against one thread's 85-87, and slowed the compile with it: a cold
    GPT process finished 104 / 106 steps in its first 10 s at one thread against 77 / 78 at
    two. The BLAS counts follow at the next ``blas_mode`` entered while none is held (never
    while a BLAS call of ember's runs)."""
    global _compile_cap, _cap_stale
    cap = max(1, (os.cpu_count() or 1) - 1) if running else None
    if cap != _compile_cap:
        _compile_cap = cap
        _update_working()
        _cap_stale = True


def _update_working():
    global _working
    n = _CPU_COUNT if _num_threads is None else _num_threads
    _working = n if _compile_cap is None else min(n, _compile_cap)


def _apply_cap():
    """Set the BLAS counts to the compile cap, or back to the counts it saved (``_lock`` held,
    no mode held)."""
    global _cap_stale
    _cap_stale = False
    cap = _compile_cap
    for c in _scan():
        if cap is None:
            n = _cap_saved.get(c.filepath)
            if n is not None and c.get_num_threads() != n:
                _set_count(c, n)
        else:
            n = c.get_num_threads()
            _cap_saved.setdefault(c.filepath, n)
            if n > cap:
                _set_count(c, cap)
    if cap is None:
        _cap_saved.clear()


def blas_controllers(refresh=False):
    """threadpoolctl controllers of the BLAS libraries loaded now (``()`` without threadpoolctl).

    Looked up again when ``refresh`` or when modules were imported since the last lookup; a
    library found for the first time gets the count set by ``set_num_threads``."""
    with _cond:
        return _scan(refresh)


# Top-level packages whose extension modules never load a BLAS library: the standard library's,
# Numba's and llvmlite's (Numba's background import brings ~50 of them through a process's first
# steps, each batch a look at /proc/self/maps of 3-5 ms while that import maps memory), and
# NumPy's (its submodules share the BLAS its core module loaded when NumPy was imported), and
# ember's own (pure Python).
_NO_BLAS_PACKAGES = frozenset(sys.stdlib_module_names) | {"numba", "llvmlite", "numpy", "ember"}


def _new_extension_module():
    """Whether a compiled extension module that may bring a BLAS library was imported since the
    last call (updates the record of modules seen)."""
    global _scanned_modules
    names = set(sys.modules) - _seen_modules     # copied in C: safe beside importing threads
    _seen_modules.update(names)
    _scanned_modules = len(sys.modules)
    from importlib.machinery import EXTENSION_SUFFIXES
    suffixes = tuple(EXTENSION_SUFFIXES)
    for name in names:
        if name.partition(".")[0] in _NO_BLAS_PACKAGES:
            continue
        # the module's own dict: no module-level __getattr__ (lazy imports) runs
        path = getattr(sys.modules.get(name), "__dict__", {}).get("__file__")
        if isinstance(path, str) and path.endswith(suffixes):
            return True
    return False


_libraries = None           # paths of the shared objects loaded at the last full look
_prefixes = None            # file name prefixes of the BLAS libraries (``_blas_prefixes``)
_MAPPED = None              # pattern of a mapped shared object's path in /proc/self/maps


def _loaded_libraries():
    """Paths of the shared objects mapped into this process, from /proc/self/maps (~0.3 ms),
    or None without it. (Not ``dl_iterate_phdr`` with a Python callback: it waits for the GIL
    inside the loader's lock, and a thread importing an extension module holds the GIL while
    it waits for that lock: a hang, as threadpoolctl's notes say, and as measured here.)"""
    global _MAPPED
    try:
        with open("/proc/self/maps", "rb") as f:
            maps = f.read()
    except OSError:
        return None
    if _MAPPED is None:
        import re
        _MAPPED = re.compile(rb" (/[^\n]+\.so[^\n/]*)\n")
    return set(_MAPPED.findall(maps))


def _blas_prefixes():
    """File name prefixes of the BLAS libraries threadpoolctl controls."""
    global _prefixes
    if _prefixes is None:
        from threadpoolctl import (BLISController, FlexiBLASController, MKLController,
                                   OpenBLASController)
        _prefixes = tuple({p.encode() for c in (OpenBLASController, BLISController,
                                                MKLController, FlexiBLASController)
                           for p in c.filename_prefixes})
    return _prefixes


def _new_blas_library():
    """Whether a shared object named as a BLAS was loaded since the last full look (True where
    the loaded objects cannot be listed). A compiled extension module rarely brings one:
    Numba's background import loads ~60 of them (the standard library's, Numba's, llvmlite's)
    through a cold process's first seconds, and a full look per batch cost LeNet-5's first 30
    training steps 17 looks of 3-10 ms each."""
    global _libraries
    names = _loaded_libraries()
    if names is None or _libraries is None:
        return True
    new, _libraries = names - _libraries, names
    try:
        prefixes = _blas_prefixes()
    except Exception:  # noqa: BLE001 - threadpoolctl missing or changed: look every time
        return True
    return any(os.path.basename(n).startswith(prefixes) for n in new)


_importing = 0    # ``importing_many`` blocks running: their new modules are looked at after


class importing_many:
    """Context manager around an import that brings extension modules for a while (Numba's:
    ~50 over 0.3-0.7 s, with SciPy's BLAS among them). Meanwhile calls on other threads do not
    look for new BLAS libraries (each look, with that import mapping memory, takes 3-5 ms of
    the caller's step); the first call after it looks once at everything it brought."""

    def __enter__(self):
        global _importing
        with _cond:
            _importing += 1

    def __exit__(self, *exc):
        global _importing
        with _cond:
            _importing -= 1


def _scan(refresh=False):
    global _controllers, _scanned_modules, _libraries
    changed = (not _importing and len(sys.modules) != _scanned_modules
               and _new_extension_module() and _new_blas_library())
    if _controllers is None or refresh or changed:
        _libraries = _loaded_libraries()
        old = {c.filepath for c in _controllers or ()}
        try:
            from threadpoolctl import ThreadpoolController
            found = tuple(ThreadpoolController().select(user_api="blas").lib_controllers)
        except Exception:  # threadpoolctl missing or unable to inspect a library
            found = ()
        _controllers, _scanned_modules = found, len(sys.modules)
        if _num_threads is not None:
            for c in found:
                if c.filepath not in old:
                    _set(c, _num_threads)
    return _controllers


# OpenBLAS's idle workers spin (sched_yield) for 2^OPENBLAS_THREAD_TIMEOUT cycles after each
# threaded call: 2^28 by default, ~0.1 s, while a training step calls a GEMM every ~0.5 ms, so a
# worker never sleeps and holds a core that the TBB kernels between the GEMMs need (2 cores:
# the GPT benchmark's step 66-70 -> 54-55 ms, ResNet-18's training step at batch 8 610 -> 441,
# ResNet-50's 1658 -> 1214). When ember is imported, the OpenBLAS NumPy bundles (``numpy.libs``,
# already loaded) reads its idle wait again (``openblas_read_env``) as 2^BLAS_SPIN_LOG2 cycles
# (~0.1 ms) and its workers are stopped (``blas_thread_shutdown_``); they start again on the next
# threaded call with that wait. A shorter wait lets them fall asleep between the GEMMs of a
# small MLP, whose wake-ups then cost more than the spin (784-512-512-10 at batch 64, no grad:
# 535 us at 2^18, 686 at 2^16, 550 at 2^28). At import, before any of ember's work, so that no
# BLAS call of the program can be in flight while the workers stop. Not where the environment
# sets OPENBLAS_THREAD_TIMEOUT (the user's choice: OPENBLAS_THREAD_TIMEOUT=28 keeps OpenBLAS's
# default).
BLAS_SPIN_LOG2 = 18


def numpy_openblas():
    """ctypes handles of the OpenBLAS libraries in NumPy's ``numpy.libs`` that are loaded now
    (``RTLD_NOLOAD``: nothing is loaded here), or []."""
    import importlib.util
    spec = importlib.util.find_spec("numpy")
    if spec is None or not spec.origin:
        return []
    libs = os.path.join(os.path.dirname(os.path.dirname(spec.origin)), "numpy.libs")
    try:
        names = sorted(n for n in os.listdir(libs) if "openblas" in n)
    except OSError:
        return []
    found = []
    for name in names:
        try:
            found.append(ctypes.CDLL(os.path.join(libs, name),
                                     mode=getattr(os, "RTLD_NOLOAD", 4) | ctypes.RTLD_GLOBAL))
        except OSError:
            continue
    return found


def openblas_function(lib, name):
    """(function, ILP64) of OpenBLAS library ``lib``'s ``name`` under the prefixes and suffixes
    its builds give it (the renamed SciPy-built symbols first: ``scipy_cblas_sgemm64_``; ILP64:
    a 64-bit integer suffix), or (None, False)."""
    for prefix in ("scipy_", ""):
        for suffix in ("64_", "_64", ""):
            fn = getattr(lib, f"{prefix}{name}{suffix}", None)
            if fn is not None:
                return fn, bool(suffix)
    return None, False


def shorten_blas_spin(log2=None):
    """Set the idle wait of NumPy's OpenBLAS to 2^``log2`` cycles (default BLAS_SPIN_LOG2; see
    there); returns the waits now in force, one per library (``[]``: none found, or a build
    without ``openblas_read_env`` / ``blas_thread_shutdown_``). Leaves a wait the environment
    sets."""
    log2 = BLAS_SPIN_LOG2 if log2 is None else int(log2)
    waits = []
    for lib in numpy_openblas():
        try:
            read_env, shutdown = lib.openblas_read_env, lib.blas_thread_shutdown_
            timeout = lib.openblas_thread_timeout
        except AttributeError:      # a build without them: its default wait stays
            continue
        if "OPENBLAS_THREAD_TIMEOUT" not in os.environ and timeout() != log2:
            os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(log2)
            try:
                read_env()
            finally:
                del os.environ["OPENBLAS_THREAD_TIMEOUT"]
            if timeout() == log2:
                shutdown()      # the workers read the wait when they start
        waits.append(timeout())
    return waits


def _set_count(controller, n):
    # threadpoolctl (3.8) lets only the first Python thread that set an OpenBLAS limit set it
    # again ("controlling thread"; the others are silently ignored); ember's changes are
    # serialised by ember's own lock and may come from any thread, so they skip that check.
    setter = getattr(controller, "_real_set_num_threads", None) or controller.set_num_threads
    setter(n)


def _set(controller, n):
    if _compile_cap is not None:
        _cap_saved[controller.filepath] = n
        n = min(n, _compile_cap)
    if _mode == LIMITED:
        _saved[controller.filepath] = n
        n = 1
    if controller.get_num_threads() != n:
        _set_count(controller, n)


def _may_enter(mode):
    if mode == _EXCLUSIVE:
        return _active == 0
    if _waiting[_EXCLUSIVE]:
        return False
    other = FREE if mode == LIMITED else LIMITED
    return _active == 0 or (_mode == mode and not _waiting[other])


def _wait_until(mode):
    """Wait (holding ``_lock``) until ``mode`` may be entered."""
    global _n_waiting
    _waiting[mode] += 1
    _n_waiting += 1
    try:
        while not _may_enter(mode):
            _cond.wait()
    finally:
        _waiting[mode] -= 1
        _n_waiting -= 1


def _enter(mode):
    global _mode, _active
    with _lock:
        if _active == 0 and not _n_waiting and mode is FREE:
            _mode, _active = mode, 1
            if _num_threads is not None:
                _scan()                 # a BLAS imported since gets the configured count
            if _cap_stale:
                _apply_cap()
            return
        if not _may_enter(mode):
            _wait_until(mode)
        if _active == 0:
            if _cap_stale:
                _apply_cap()
            if mode == LIMITED:
                controllers = _scan()
                _mode = mode
                _saved.clear()
                for c in controllers:
                    n = c.get_num_threads()
                    _saved[c.filepath] = n
                    if n != 1:
                        _set_count(c, 1)
            else:
                _mode = mode
                if _num_threads is not None:
                    _scan()             # a BLAS imported since gets the configured count
        _active += 1


def _leave():
    global _mode, _active
    with _lock:
        _active -= 1
        if _active == 0:
            if _mode == LIMITED:
                for c in _scan():
                    n = _saved.get(c.filepath, 1)
                    if n != 1:
                        _set_count(c, n)
                _saved.clear()
            _mode = None
            if _n_waiting:
                _cond.notify_all()


class _Hold:
    """Context manager holding the BLAS lock in one mode (see ``blas_mode``); one instance per
    mode, its state kept per thread."""

    __slots__ = ("mode",)

    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        global _active, _mode
        held = _held.__dict__
        mode = held.get("mode")
        if mode is not None:
            held["depth"] += 1
            return mode
        if threadpool._inside.__dict__.get("flag", False):
            return None
        mode = self.mode if (self.mode is not LIMITED or _limit_enabled) else FREE
        with _lock:
            # the common cases, inline: join the mode in force, or start FREE with nobody waiting
            if not _n_waiting and (_mode is mode if _active else mode is FREE):
                if not _active:
                    _mode = mode
                    if _num_threads is not None and len(sys.modules) != _scanned_modules:
                        _scan()         # a BLAS imported since gets the configured count
                    if _cap_stale:
                        _apply_cap()
                _active += 1
                entered = True
            else:
                entered = False
        if not entered:
            _enter(mode)
        held["mode"], held["depth"] = mode, 1
        return mode

    def __exit__(self, *exc):
        held = _held.__dict__
        if held.get("mode") is not None:
            held["depth"] -= 1
            if not held["depth"]:
                held["mode"] = None
                _leave()
        return False


_HOLDS = {LIMITED: _Hold(LIMITED), FREE: _Hold(FREE)}


def blas_mode(mode):
    """Context manager: hold the BLAS lock in ``mode`` (``LIMITED`` or ``FREE``) for one call.
    ``__enter__`` returns the mode granted: a nested call gets the mode its thread already
    holds, a pool worker outside any gets ``None`` (no wait), and ``LIMITED`` becomes ``FREE``
    while ``set_conv_blas_limit(False)``."""
    return _HOLDS[mode]


def _before_fork():
    _lock.acquire()


def _after_fork_in_parent():
    _lock.release()


def _after_fork_in_child():
    """Only the forking thread runs in a child: the BLAS modes held by the others are dropped
    (the BLAS counts a limited convolution of theirs saved are restored) and the lock, which
    the fork caught held, is new."""
    global _lock, _cond, _mode, _active, _n_waiting, _layer_lock
    mine = _held.__dict__.get("mode")
    if _mode == LIMITED and mine is None:
        for c in _controllers or ():
            n = _saved.get(c.filepath, 1)
            if n != 1:
                _set_count(c, n)
        _saved.clear()
    _lock = threading.Lock()
    _cond = threading.Condition(_lock)
    _layer_lock = threading.Lock()
    if _compile_cap is not None:    # the child has no compile thread: its cap ends
        compiling(False)
    _mode, _active = mine, (1 if mine is not None else 0)
    _n_waiting = 0
    for k in _waiting:
        _waiting[k] = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


def set_num_threads(n):
    """Set the thread count for ember's parallel loops and every BLAS library in the process.

    Waits until ember's BLAS calls in flight in other threads finish. Raises ValueError when
    ``n`` is not a positive integer.
    """
    global _num_threads
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive int, got {n!r}")
    # a thread already holding a mode (or a pool worker, whose caller holds one) cannot wait
    nested = getattr(_held, "mode", None) is not None or threadpool.inside()
    with _lock:
        if not nested and not _may_enter(_EXCLUSIVE):
            _wait_until(_EXCLUSIVE)
        _num_threads = n
        _update_working()
        for c in _scan(refresh=True):
            _set(c, n)
        _cond.notify_all()


def set_conv_blas_limit(enabled):
    """Let convolutions and large GEMMs (``linalg.gemm_into``) hold every BLAS at one thread
    while they split work over ember's threads (True, the default unless
    ``EMBER_CONV_BLAS_LIMIT=0``), or never touch BLAS thread counts (False: they then run in
    the calling thread on BLAS's own threads)."""
    global _limit_enabled
    _limit_enabled = bool(enabled)


def get_conv_blas_limit():
    """Whether convolutions may hold BLAS at one thread (see ``set_conv_blas_limit``)."""
    return _limit_enabled


# ------------------------------------------------------------------ Numba's threading layer
_layer = None
_LAYERS = ("tbb", "pool")
_requested = os.environ.get("EMBER_THREADING_LAYER", "tbb")
_layer_lock = threading.Lock()
_current = threading.local()   # this Python thread's Numba thread count (``sync_threads``)


def _preload_tbb():
    """Load the TBB runtime of the ``tbb`` wheel (installed in ``sys.prefix/lib``, off the loader
    path in a virtual environment) so Numba's TBB extension can link to it."""
    for name in ("libtbb.so.12", "libtbb.12.dylib"):
        path = os.path.join(sys.prefix, "lib", name)
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                pass
            return


def _numba():
    from ember.kernels.runtime.compiler import numba_module
    return numba_module()


def _start():
    numba = _numba()
    if numba is None or _requested == "pool":
        return "pool"
    from numba.np.ufunc import parallel
    if parallel._is_initialized:
        return "tbb" if numba.threading_layer() == "tbb" else "pool"
    if os.environ.get("NUMBA_THREADING_LAYER", "tbb") != "tbb":
        return "pool"
    _preload_tbb()
    try:
        from numba.np.ufunc import tbbpool  # noqa: F401  (fails without a usable TBB)
    except ImportError:
        return "pool"
    saved = numba.config.THREADING_LAYER
    numba.config.THREADING_LAYER = "tbb"
    try:
        parallel._launch_threads()
    except (ValueError, ImportError, OSError):
        numba.config.THREADING_LAYER = saved
        return "pool"
    return "tbb" if numba.threading_layer() == "tbb" else "pool"


def parallel_layer():
    """``"tbb"`` when parallel kernels run on Numba's TBB layer, else ``"pool"`` (ember's own
    thread pool running serial kernels). Decided once per process."""
    global _layer
    if _layer is None:
        with _layer_lock:
            if _layer is None:
                _layer = _start()
    return _layer


def set_parallel_layer(name):
    """Run ember's parallel compiled kernels on Numba's TBB layer (``"tbb"``, the default unless
    ``EMBER_THREADING_LAYER=pool``; ember starts Numba's threads for it) or on ember's own pool
    (``"pool"``: ember never starts Numba's threads). Threads Numba has started stay running;
    ``"tbb"`` then applies only if TBB is the layer they run. Raises ValueError for another name."""
    global _layer, _requested
    if name not in _LAYERS:
        raise ValueError(f"set_parallel_layer: expected one of {_LAYERS}, got {name!r}")
    with _layer_lock:
        _requested, _layer = name, None


def sync_threads(n):
    """Use ``n`` threads (capped by ``NUMBA_NUM_THREADS``) in Numba's parallel loops launched from
    this Python thread (Numba's count is per thread); return the count used."""
    numba = sys.modules.get("numba") or _numba()
    n = max(1, min(n, numba.config.NUMBA_NUM_THREADS))
    if getattr(_current, "n", None) != n:
        numba.set_num_threads(n)
        _current.n = n
    return n


def tbb_parts(n_items, n_threads, per_thread=4):
    """Runs of a ``prange`` over ``n_items`` independent items on Numba's TBB layer with
    ``n_threads`` threads (``per_thread`` runs each, so a late thread takes fewer), or 0 when
    that does not apply (TBB is not the layer, one thread or one item, or the layer is not
    chosen yet while Numba's first import runs on the compile thread: choosing it imports
    Numba, 0.3-2.6 s of a cold process's first step): then the caller splits the items over
    ember's pool instead."""
    if n_threads <= 1 or n_items <= 1:
        return 0
    if _layer is None:
        from ember.kernels.runtime import compiler
        if compiler.importing("numba"):
            return 0
    if parallel_layer() != "tbb":
        return 0
    n = sync_threads(n_threads)
    return min(n_items, per_thread * n) if n > 1 else 0


shorten_blas_spin()
blas_core.select()      # the fastest kernel table the host executes (blas_core's docstring)
