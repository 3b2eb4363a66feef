"""Atomic file writes: a temp file in the destination's folder, fsync, then ``os.replace``, so a
failed write leaves any previous file intact. The one writer of files a user names: used by
``ember.save``, ``ember.jit.save``, ``ember.onnx.export`` and ``ember onnx run --save``.

A path that is a symbolic link (or passes through one) is written through, as ``open(path,
"wb")`` and ``torch.save`` do: the link's target (``os.path.realpath``, created when the link
dangles) is replaced, in the target's folder, and the link stays a link.

The new file gets the mode a plain ``open(path, "wb")`` would give it: ``0o666`` less the
process umask for a new file, the existing file's mode when it replaces one (the temporary file
``mkstemp`` makes is ``0o600`` whatever the umask)."""
import os
import stat
import tempfile

__all__ = ["atomic_write"]


def _umask():
    """The process umask, read without changing it where the OS allows (Linux)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no read-only query elsewhere: set and restore at once
    os.umask(mask)
    return mask


def _target_mode(path):
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def atomic_write(path, payload):
    """Write bytes ``payload`` to ``path`` (through a symbolic link to its target) atomically,
    with ``open``'s mode (see the module docstring); the temp file is removed on failure."""
    path = os.path.realpath(os.fspath(path))   # through symbolic links, as open() writes
    folder = os.path.dirname(path)
    mode = _target_mode(path)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            if hasattr(os, "fchmod"):
                os.fchmod(fh.fileno(), mode)
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        if not hasattr(os, "fchmod"):
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
