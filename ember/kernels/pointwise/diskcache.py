"""On-disk home of generated kernel modules, so that Numba's ``cache=True`` can key on a real file.

Sources live in ``$EMBER_CACHE_DIR/pointwise`` (default ``$XDG_CACHE_HOME/ember/pointwise``, else
``~/.cache/ember/pointwise``) as ``k_<hash>.py``, the hash taken over the source, the Numba
version and the helpers' source; Numba keeps its compiled code in ``__pycache__`` beside them. A
file, once written (atomically: temporary file then rename), is never rewritten, since Numba's
cache is invalidated by a changed modification time.
"""
import hashlib
import importlib.util
import os
import sys
import tempfile

_helpers_digest = None


def cache_dir():
    """The directory kernel sources are written to (created if missing); a fresh temporary
    directory when the configured one cannot be created or written."""
    root = os.environ.get("EMBER_CACHE_DIR")
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ember")
    path = os.path.join(root, "pointwise")
    try:
        os.makedirs(path, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    return tempfile.mkdtemp(prefix="ember-pointwise-")


def _helpers_hash():
    global _helpers_digest
    if _helpers_digest is None:
        helpers = os.path.join(os.path.dirname(__file__), "_nbhelpers.py")
        with open(helpers, "rb") as f:
            _helpers_digest = hashlib.sha256(f.read()).hexdigest()
    return _helpers_digest


def module_name(source, numba_version):
    """The module (and file) name of a kernel source."""
    h = hashlib.sha256("\0".join([source, numba_version, _helpers_hash()]).encode()).hexdigest()
    return f"k_{h[:32]}"


def load_source(source, numba_version):
    """Write ``source`` to the cache directory unless present, import it and return the module.

    Raises OSError when the file cannot be written, and whatever importing it raises.
    """
    name = module_name(source, numba_version)
    directory = cache_dir()
    path = os.path.join(directory, name + ".py")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(source)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    full_name = f"ember_pointwise_{name}"
    module = sys.modules.get(full_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(full_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[full_name] = module  # Numba's cache finds a function's module by name
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[full_name]
            raise
    return module
