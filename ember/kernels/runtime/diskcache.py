"""On-disk home of generated kernel modules, so that Numba's ``cache=True`` can key on a real file.

Sources live in ``$EMBER_CACHE_DIR/pointwise`` (default ``$XDG_CACHE_HOME/ember/pointwise``, else
``~/.cache/ember/pointwise``) as ``k_<hash>.py``, the hash taken over the source, the Numba
version and the helpers' source; Numba keeps its compiled code (and its index, a pickle) in
``__pycache__`` beside them. A file, once written (atomically: temporary file then rename), is
rewritten only when its bytes differ from the source, since Numba's cache is invalidated by a
changed modification time.

Trust: the directory and its ``__pycache__`` are created owner-only (``0o700``) and used only
while both are owned by this user and not writable by group or others, and the directory's
parent is not writable by others (unless sticky), so no one else can plant a kernel file or a
Numba index pickle in them. A kernel is
executed from the source ember generated, never from the file's contents: the file is only
compared byte for byte (and rewritten when it differs) so that Numba's cache keys on exactly that
source. When the directory is refused or cannot be written, one private temporary directory is
used for the whole process (removed at exit; nothing is reused across processes) and a
RuntimeWarning says why, once.
"""
import atexit
import hashlib
import os
import shutil
import stat
import sys
import tempfile
import threading
import types
import warnings

__all__ = ["cache_dir", "configured_dir", "module_name", "load_source", "release", "unsafe_reason"]

_helpers_digest = None
_lock = threading.Lock()
_fallback = None     # this process's private temporary directory, once needed
_refused = set()     # configured directories already warned about


def configured_dir():
    """The persistent cache directory the environment names (it may not exist yet)."""
    from ember.kernels.runtime import hostrecords
    return os.path.join(hostrecords.root(), "pointwise")


def unsafe_reason(path):
    """Why the existing directory ``path`` may not hold kernels ember executes, or None."""
    try:
        st = os.stat(path)
        parent = os.stat(os.path.dirname(os.path.abspath(path)))
    except OSError as e:
        return f"it cannot be inspected ({e.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"it is owned by another user (uid {st.st_uid}, this process runs as {os.getuid()})"
    if st.st_mode & 0o022:
        return (f"it is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}; "
                f"`chmod 700 {path}` fixes it)")
    if parent.st_mode & 0o002 and not parent.st_mode & stat.S_ISVTX:
        return "its parent directory is writable by others (and not sticky)"
    if not os.access(path, os.W_OK | os.X_OK):
        return "it is not writable"
    return None


def _mkdir_private(path):
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass


def _prepare(path):
    """Create ``path`` (and a missing parent) and its ``__pycache__`` (Numba's index pickles and
    compiled code) owner-only; the reason they are refused, or None."""
    try:
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            os.makedirs(parent, mode=0o700, exist_ok=True)
        _mkdir_private(path)
    except OSError as e:
        return f"it cannot be created ({e.strerror})"
    reason = unsafe_reason(path)
    if reason is not None:
        return reason
    pycache = os.path.join(path, "__pycache__")
    try:
        _mkdir_private(pycache)
    except OSError as e:
        return f"its __pycache__ cannot be created ({e.strerror})"
    reason = unsafe_reason(pycache)
    return None if reason is None else f"its __pycache__ is unsafe: {reason}"


def _remove(path, owner):
    if os.getpid() == owner:  # not from a forked child, whose parent still uses it
        shutil.rmtree(path, ignore_errors=True)


def cache_dir():
    """The directory kernel sources are written to: the configured one when it is safe (see the
    module docstring), else this process's one private temporary directory."""
    global _fallback
    path = configured_dir()
    reason = _prepare(path)
    if reason is None:
        return path
    with _lock:
        if path not in _refused:
            _refused.add(path)
            warnings.warn(f"ember: the pointwise kernel cache {path!r} is not used because "
                          f"{reason}; compiled kernels are kept in a private temporary directory "
                          f"for this process only (set EMBER_CACHE_DIR to a directory you own)",
                          RuntimeWarning, stacklevel=2)
        if _fallback is None or not os.path.isdir(_fallback):
            _fallback = tempfile.mkdtemp(prefix="ember-pointwise-")
            atexit.register(_remove, _fallback, os.getpid())
        return _fallback


def _helpers_hash():
    global _helpers_digest
    if _helpers_digest is None:
        helpers = os.path.join(os.path.dirname(__file__), "nbhelpers.py")
        with open(helpers, "rb") as f:
            _helpers_digest = hashlib.sha256(f.read()).hexdigest()
    return _helpers_digest


def module_name(source, numba_version):
    """The module (and file) name of a kernel source."""
    h = hashlib.sha256("\0".join([source, numba_version, _helpers_hash()]).encode()).hexdigest()
    return f"k_{h[:32]}"


def _holds(path, expected):
    """Whether the regular file ``path`` holds exactly ``expected``."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return False
        return f.read(len(expected) + 1) == expected


def _write(directory, name, data):
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(directory, name + ".py"))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_source(source, numba_version):
    """The module of kernel ``source``: the file in the cache directory is made to hold exactly
    ``source`` (written when missing or different), then ``source`` itself is executed under
    that file name, so Numba's cache keys on it.

    Raises OSError when the file cannot be written, and whatever executing ``source`` raises.
    """
    name = module_name(source, numba_version)
    full_name = f"ember_pointwise_{name}"
    module = sys.modules.get(full_name)
    if module is not None:
        return module
    directory = cache_dir()
    path = os.path.join(directory, name + ".py")
    data = source.encode()
    if not _holds(path, data):
        _write(directory, name, data)
    code = compile(data, path, "exec", dont_inherit=True)
    module = types.ModuleType(full_name)
    module.__file__ = path
    sys.modules[full_name] = module  # Numba's cache finds a function's module by name
    try:
        exec(code, module.__dict__)  # noqa: S102 - ember's own generated source, not the file's
    except BaseException:
        del sys.modules[full_name]
        raise
    return module


def release(module):
    """Forget a kernel module loaded by ``load_source`` (its functions keep working); the
    engine calls it for kernels its bounded cache drops."""
    if sys.modules.get(module.__name__) is module:
        del sys.modules[module.__name__]
