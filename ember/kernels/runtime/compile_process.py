"""Kernel compiles in a separate, low-priority process: the compile thread's jobs hand them over.

A compile is LLVM work of one core for seconds; on the compile thread of the user's process it
also takes the GIL between LLVM calls and a core from the program (a cold LeNet-5 run's steps
halved while it compiled). Under ``EMBER_JIT_COMPILE=background`` the compile thread
(``compiler``) therefore asks one worker process, started on the first compile with
``os.nice(10)`` (``EMBER_JIT_NICE`` sets another), to compile the kernel into Numba's disk
cache, waits for its answer without the GIL, then loads the kernel from the cache (a cache load:
milliseconds, after the process's first).
When the worker cannot run a kernel (a kernel not reachable as ``module.qualname``, a kernel
without a disk cache, an argument type not described below) or cannot start or dies, the thread
compiles the kernel itself, as before.

A request crosses the process boundary as one line of JSON (no pickle): a kernel module and
qualified name with the argument types described by ``describe`` (arrays, numbers, booleans,
integer and boolean literals and tuples of them; rebuilt by ``rebuild`` and checked equal
before sending), or a generated pointwise kernel's source (``diskcache.load_source`` compiles
it there). The reply is one line: ``{"ok": true}`` or ``{"ok": false, "error": ...}``. The
worker exits when its input closes. Started as ``python -m
ember.kernels.runtime.compile_process`` (``run``), with ``EMBER_JIT_COMPILE=sync``.
"""
import json
import os
import subprocess
import sys
import threading

USE_PROCESS = True    # False: every compile runs on the compile thread (tests, EMBER_JIT_PROCESS=0)
NICE = 10             # the worker's niceness increment (EMBER_JIT_NICE sets another)

_proc = None          # the worker (subprocess.Popen), False once it could not start or died
_lock = threading.Lock()
_abandoned = []       # workers of the parent a forked child inherited (kept from __del__)


def enabled():
    """Whether compiles go to the worker: not with ``EMBER_JIT_PROCESS=0``, after the worker
    could not start or died, or where ``sys.executable`` is not a Python that runs ``-m``: a
    frozen application (PyInstaller and the like) would start the user's program again."""
    return (USE_PROCESS and os.environ.get("EMBER_JIT_PROCESS", "1") != "0" and
            _proc is not False and bool(sys.executable) and not getattr(sys, "frozen", False))


# ------------------------------------------------------------------------------ Numba types
def describe(t):
    """A JSON-able description of Numba type ``t``, or None when it has none here."""
    from numba.core import types
    if isinstance(t, (types.IntegerLiteral, types.BooleanLiteral)):
        return ["literal", t.literal_value]
    if isinstance(t, types.Array):
        d = describe(t.dtype)
        return None if d is None else ["array", d, t.ndim, t.layout, t.mutable, t.aligned]
    if isinstance(t, (types.Integer, types.Float, types.Complex, types.Boolean)):
        return ["scalar", str(t)]
    if isinstance(t, types.UniTuple):
        d = describe(t.dtype)
        return None if d is None else ["unituple", d, t.count]
    if isinstance(t, types.Tuple):
        ds = [describe(x) for x in t.types]
        return None if any(d is None for d in ds) else ["tuple", ds]
    return None


def rebuild(d):
    """The Numba type ``describe`` described. Raises ValueError for another description."""
    from numba.core import types
    kind = d[0]
    if kind == "array":
        _, dtype, ndim, layout, mutable, aligned = d
        return types.Array(rebuild(dtype), int(ndim), str(layout), readonly=not mutable,
                           aligned=bool(aligned))
    if kind == "scalar":
        t = getattr(types, str(d[1]), None)
        if isinstance(t, (types.Integer, types.Float, types.Complex, types.Boolean)):
            return t
    elif kind == "literal" and isinstance(d[1], (bool, int)):
        return types.literal(d[1])
    elif kind == "unituple":
        return types.UniTuple(rebuild(d[1]), int(d[2]))
    elif kind == "tuple":
        return types.Tuple(tuple(rebuild(x) for x in d[1]))
    raise ValueError(f"compile_process: no Numba type for description {d!r}")


def request_for(dispatcher, sig):
    """The worker's request compiling ``dispatcher`` for ``sig``, or None when the worker cannot
    (see the module docstring)."""
    fn = getattr(dispatcher, "py_func", None)
    cache = getattr(dispatcher, "_cache", None)
    if fn is None or cache is None or type(cache).__name__ == "NullCache":
        return None
    module, qualname = fn.__module__, fn.__qualname__
    if not module.startswith("ember.") or "<" in qualname:
        return None
    if _resolve(module, qualname, import_=False) is not dispatcher:
        return None
    desc = [describe(t) for t in sig]
    if any(d is None for d in desc):
        return None
    try:
        if tuple(rebuild(d) for d in desc) != tuple(sig):
            return None
    except (ValueError, TypeError):
        return None
    return {"kernel": [module, qualname], "sig": desc}


def _resolve(module, qualname, import_=True):
    if module != "ember" and not module.startswith("ember."):   # only ember's own kernels
        raise ValueError(f"compile worker: {module!r} is not one of ember's modules")
    if import_:
        import importlib
        obj = importlib.import_module(module)
    else:
        obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


# ------------------------------------------------------------------------------- parent side
def _start():
    """Start the worker; False when it cannot be started."""
    env = dict(os.environ)
    env["EMBER_JIT_COMPILE"] = "sync"
    env["EMBER_JIT_PROCESS"] = "0"
    env["EMBER_JIT_NICE"] = str(niceness())
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        return subprocess.Popen([sys.executable, "-m", "ember.kernels.runtime.compile_process"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env, close_fds=True)
    except (OSError, ValueError):
        return False


def run(request):
    """Send ``request`` to the worker (started on first use) and wait for its answer: True when
    the worker built the kernel into the disk cache, False when it could not (its error, a
    worker that cannot start or died: the caller compiles the kernel itself). Called from the
    compile thread only; the wait releases the GIL."""
    global _proc
    with _lock:
        if _proc is None:
            _proc = _start()
        proc = _proc
    if not proc:
        return False
    try:
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        line = proc.stdout.readline()
    except (OSError, ValueError):
        line = b""
    if not line:     # the worker died or was stopped (``stop``): compile here from now on
        with _lock:
            if _proc is proc:
                _proc = False
        return False
    try:
        return bool(json.loads(line).get("ok"))
    except ValueError:
        return False


def stop():
    """Stop the worker (interpreter exit): a compile in flight there is abandoned (Numba writes
    its cache files whole, by rename), and a thread waiting for it gets False at once."""
    global _proc
    with _lock:
        proc, _proc = _proc, False
    if proc:
        try:
            proc.kill()
            proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass


def after_fork_in_child():
    """In a forked child: the parent's worker is not this process's; its pipes are closed here
    (so the worker still sees its input close when the parent exits) and a new one starts on
    the child's first compile."""
    global _proc, _lock
    proc, _proc, _lock = _proc, None, threading.Lock()
    if proc:
        _abandoned.append(proc)
        for f in (proc.stdin, proc.stdout):
            try:
                os.close(f.fileno())
            except (OSError, ValueError):
                pass


# -------------------------------------------------------------------------------- worker side
def _serve(line):
    request = json.loads(line)
    if "source" in request:
        from ember.kernels.runtime import compiler, diskcache, threads
        threads.parallel_layer()    # the layer the user's process starts before its kernels
        diskcache.load_source(request["source"], compiler.numba_module().__version__)
        return
    from ember.kernels.runtime import compiler
    module, qualname = request["kernel"]
    dispatcher = _resolve(module, qualname)
    compiler._compile(dispatcher, tuple(rebuild(d) for d in request["sig"]))


def niceness():
    """The worker's niceness increment: ``EMBER_JIT_NICE`` (an integer; 0 keeps the program's
    own priority, for a host whose cores other processes keep busy, where a niced compile waits
    minutes), else ``NICE``. A value that is not an integer is ignored with a warning naming it."""
    v = os.environ.get("EMBER_JIT_NICE", "").strip()
    if not v:
        return NICE
    try:
        return int(v)
    except ValueError:
        import warnings
        warnings.warn(f"EMBER_JIT_NICE: expected an integer niceness increment, got {v!r}; "
                      f"the compile worker runs at nice +{NICE}", RuntimeWarning, stacklevel=2)
        return NICE


def main():
    """The worker's loop: one request per input line, one answer per output line."""
    try:
        os.nice(niceness())
    except (OSError, AttributeError):
        pass
    out = os.fdopen(os.dup(1), "wb")    # the answers; anything else printed goes to stderr
    os.dup2(2, 1)
    for line in sys.stdin.buffer:
        try:
            _serve(line)
        except Exception as e:
            answer = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        else:
            answer = {"ok": True}
        out.write((json.dumps(answer) + "\n").encode())
        out.flush()


if __name__ == "__main__":
    main()
