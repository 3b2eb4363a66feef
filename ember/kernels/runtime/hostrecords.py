"""Per-host measurements kept between processes: small JSON files in ember's cache root
(``$EMBER_CACHE_DIR``, default ``$XDG_CACHE_HOME/ember``, else ``~/.cache/ember``), each a dict
keyed by a hash of what the measurement depends on (``conv_probe.json``: the convolution probe;
``blas_core.json``: OpenBLAS's kernel table). Files hold plain data, read with ``json``; a file
that is missing, unreadable or not a dict reads as {}."""
import json
import os


def root():
    """ember's cache root the environment names (it may not exist yet)."""
    named = os.environ.get("EMBER_CACHE_DIR")
    if named:
        return named
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                        "ember")


def path(name):
    return os.path.join(root(), name)


def read(name):
    """The dict in file ``name``, or {}."""
    try:
        with open(path(name)) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write(name, key, value):
    """Set ``key`` to ``value`` in file ``name`` (the file written whole to a temporary file in
    its directory, then renamed over it; an existing symlink's target is replaced the same way).
    An unwritable directory keeps nothing: the caller holds its result in memory."""
    target = os.path.realpath(path(name))
    try:
        os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
        data = read(name)
        data[key] = value
        tmp = f"{target}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, target)
    except OSError:
        pass
