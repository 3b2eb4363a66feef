"""Kernels built at install time, and the copy that puts them in a fresh kernel cache.

A fresh install compiles every Numba kernel it meets (LeNet-5's training step: 30-60 s of a
core), so a new user's first short run spends it on NumPy fallbacks. ``ember prebuild`` (an
install step after ``pip install``; ``make demo`` runs it) calls ``build``, which runs
``ember.prebuild``'s few small training steps -- a LeNet-style CNN (batch 1 and 64, SGD
momentum), an MLP (Adam), an ImageNet classifier's layers (7x7/2 stem, BatchNorm, padded 3x3/2
max pool, basic blocks; also run for inference eager and traced + optimised), a GPT-style
transformer (LayerNorm, exact GELU, masked-softmax and SDPA attention, AdamW, gradient
clipping), all float32, on the default thread count and on one -- with
``EMBER_JIT_COMPILE=sync`` in a child process whose Numba and ember caches point into
``prebuilt_dir()`` (``EMBER_PREBUILT_DIR``, default ``<sys.prefix>/share/ember/prebuilt``: the
environment ember is installed in).

At run time, the first time a process asks whether a kernel module was compiled before
(``compiler.compiled_before``), ``seed`` copies the prebuilt cache files this process's Numba
cache lacks into it (file copies: no Numba import) and marks their modules compiled, so their
kernels load from the disk cache on first use instead of compiling in the background while the
fallbacks run. Numba checks every entry itself (source hash, Numba version, CPU name and
features, kernel bytecode): an entry built for another host or another version of a kernel is
a cache miss and compiles as before. Nothing is copied when the prebuilt directory is missing,
or the process's cache location is not one this module knows (``NUMBA_CACHE_DIR``, or
writable ``__pycache__`` directories beside the sources); existing files are never replaced.
Trust: the prebuilt directory is used only when owned by this user or root and not writable by
group or others (its index files are pickles Numba loads).
"""
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time

MANIFEST = "manifest.json"
_KERNELS_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # ember/kernels
_seeded = None      # None: not tried yet; else the list of module names seeded
_pointwise = set()  # stems (``k_<hash>``) of the generated pointwise kernel files seeded


def prebuilt_dir():
    """Where the install-time kernel cache lives (it may not exist)."""
    return os.environ.get("EMBER_PREBUILT_DIR") or os.path.join(sys.prefix, "share", "ember",
                                                                 "prebuilt")


def _numba_subdir(source_dir):
    """Numba's cache subdirectory for sources in ``source_dir`` under ``NUMBA_CACHE_DIR``
    (``_CacheLocator.get_suitable_cache_subpath``)."""
    path = os.path.abspath(source_dir)
    return "_".join([os.path.split(path)[-1], hashlib.sha1(path.encode()).hexdigest()])


def _target(source_dir):
    """The directory this process's Numba caches kernels of ``source_dir`` in, or None when it
    is neither ``NUMBA_CACHE_DIR``'s nor a writable ``__pycache__`` beside the sources
    (Numba's first two locators)."""
    root = os.environ.get("NUMBA_CACHE_DIR")
    if root:
        return os.path.join(root, _numba_subdir(source_dir))
    pycache = os.path.join(source_dir, "__pycache__")
    if os.access(pycache if os.path.isdir(pycache) else source_dir, os.W_OK):
        return pycache
    return None


def _trusted(path):
    try:
        st = os.stat(path)
    except OSError:
        return False
    owner_ok = not hasattr(os, "getuid") or st.st_uid in (0, os.getuid())
    return stat.S_ISDIR(st.st_mode) and owner_ok and not st.st_mode & 0o022


def seed():
    """Copy the prebuilt kernel cache files this process's cache lacks into it, once per
    process; the names of the kernel modules they belong to (empty when nothing applies)."""
    global _seeded
    if _seeded is not None:
        return _seeded
    _seeded = []
    root = prebuilt_dir()
    try:
        with open(os.path.join(root, MANIFEST)) as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return _seeded
    if not _trusted(root) or manifest.get("kernels_root") != _KERNELS_ROOT:
        return _seeded   # built for another copy of ember: its cache paths would not match
    from ember.kernels.runtime import diskcache
    for entry in manifest.get("dirs", ()):
        src = os.path.join(root, "numba", entry["subdir"])
        if entry["kind"] == "pointwise":
            source_dir = diskcache.cache_dir()
        else:
            source_dir = os.path.join(_KERNELS_ROOT, *entry["package"].split("/"))
        dst = _target(source_dir)
        if dst is None or not _trusted(src):
            continue
        modules = _copy_missing(src, dst, entry.get("files", ()))
        if entry["kind"] == "pointwise":
            _pointwise.update(modules)
        else:
            prefix = "ember.kernels." + (entry["package"].replace("/", ".") + "."
                                         if entry["package"] else "")
            _seeded.extend(prefix + m for m in modules)
    _seeded = sorted(set(_seeded))
    return _seeded


def has_pointwise(stem):
    """Whether the seeded cache holds generated pointwise kernel ``stem`` (``k_<hash>``)."""
    return stem in _pointwise


def _copy_missing(src, dst, files):
    """Copy each index (``.nbi``) in ``files`` whose name ``dst`` lacks, with its data files;
    the source module names (file stems) of those copied or already there."""
    modules = set()
    try:
        os.makedirs(dst, mode=0o700, exist_ok=True)
    except OSError:
        return modules
    for index in (f for f in files if f.endswith(".nbi")):
        stem = index.split(".", 1)[0]
        if os.path.exists(os.path.join(dst, index)):
            modules.add(stem)
            continue
        base = index[:-len(".nbi")]
        try:
            for name in files:   # data files first: an index names only files that exist
                if name.startswith(base + ".") and name.endswith(".nbc"):
                    shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
            tmp = os.path.join(dst, f".{index}.{os.getpid()}.tmp")
            shutil.copyfile(os.path.join(src, index), tmp)
            os.replace(tmp, os.path.join(dst, index))
        except OSError:
            continue
        modules.add(stem)
    return modules


# ------------------------------------------------------------------------------------- build
def _manifest(root, pointwise_dir):
    """The manifest of the cache the build wrote under ``root``/numba."""
    numba_root = os.path.join(root, "numba")
    known = {}
    for dirpath, _, filenames in os.walk(_KERNELS_ROOT):
        if any(f.endswith(".py") for f in filenames) and "__pycache__" not in dirpath:
            rel = os.path.relpath(dirpath, _KERNELS_ROOT)
            package = "" if rel == "." else rel.replace(os.sep, "/")
            known[_numba_subdir(dirpath)] = ("kernels", package)
    known[_numba_subdir(pointwise_dir)] = ("pointwise", None)
    dirs = []
    for sub in sorted(os.listdir(numba_root)) if os.path.isdir(numba_root) else ():
        if sub not in known:
            continue
        kind, package = known[sub]
        files = sorted(f for f in os.listdir(os.path.join(numba_root, sub))
                       if f.endswith((".nbi", ".nbc")))
        dirs.append({"subdir": sub, "kind": kind, "package": package, "files": files})
    return {"kernels_root": _KERNELS_ROOT, "built": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                  time.gmtime()),
            "dirs": dirs}


def write_manifest(root, pointwise_dir, **extra):
    """Write (and return) the manifest of the Numba cache under ``root``/numba, built with
    ``NUMBA_CACHE_DIR=root/numba`` and generated pointwise kernels in ``pointwise_dir``
    (``diskcache.cache_dir()`` of the building process)."""
    manifest = _manifest(root, pointwise_dir)
    manifest.update(extra)
    tmp = os.path.join(root, f".{MANIFEST}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(tmp, os.path.join(root, MANIFEST))
    return manifest


def build(root=None, quiet=False):
    """Build the prebuilt kernel cache under ``root`` (default ``prebuilt_dir()``): run the
    workloads in a child process with ``EMBER_JIT_COMPILE=sync``, then write the manifest.
    Returns the manifest. Raises RuntimeError when the child fails."""
    root = os.path.abspath(root or prebuilt_dir())
    os.makedirs(root, mode=0o755, exist_ok=True)
    os.chmod(root, 0o755)
    env = dict(os.environ)
    env.update(NUMBA_CACHE_DIR=os.path.join(root, "numba"),
               EMBER_CACHE_DIR=os.path.join(root, "ember"), EMBER_JIT_COMPILE="sync",
               EMBER_JIT_PROCESS="0")
    env.pop("EMBER_CPU_ISA", None)
    import resource
    start = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "ember.prebuild"],
                          env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError("ember prebuilt kernels: the build's workloads failed: "
                           + (proc.stderr or proc.stdout)[-2000:])
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    manifest = write_manifest(root, proc.stdout.strip().splitlines()[-1],
                              build_s=round(time.perf_counter() - start, 1),
                              build_cpu_s=round(cpu, 1))
    if not quiet:
        n = sum(1 for d in manifest["dirs"] for f in d["files"] if f.endswith(".nbi"))
        print(f"ember: built {n} kernel cache indexes in {manifest['build_s']} s "
              f"({manifest['build_cpu_s']} s of CPU) under {root}")
    return manifest
