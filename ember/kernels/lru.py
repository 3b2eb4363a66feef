"""A bounded, thread-safe least-recently-used cache for compiled kernels and the objects that hold
them (``pointwise.engine``'s kernels, ``jit.fused``'s fusion groups), so that a program making
ever new expressions keeps a bounded number of them alive; and ``remembered``, the lock-free
memo of validated call arguments on per-call hot paths (convolution geometries, pooling
arguments)."""
import threading
from collections import OrderedDict

__all__ = ["LRUCache", "remembered"]


class LRUCache:
    """At most ``maxsize`` entries, the least recently used dropped first; ``on_evict(key,
    value)``, when given, runs for each dropped entry (outside the lock)."""

    def __init__(self, maxsize, on_evict=None):
        if not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"LRUCache: maxsize must be a positive int, got {maxsize!r}")
        self._maxsize = maxsize
        self._on_evict = on_evict
        self._data = OrderedDict()
        self._lock = threading.RLock()

    @property
    def maxsize(self):
        return self._maxsize

    @maxsize.setter
    def maxsize(self, n):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"LRUCache: maxsize must be a positive int, got {n!r}")
        with self._lock:
            self._maxsize = n
            dropped = self._trim()
        self._evicted(dropped)

    def get(self, key, default=None):
        """The value of ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            value = self._data.get(key, _MISSING)
            if value is _MISSING:
                return default
            self._data.move_to_end(key)
            return value

    def get_or_create(self, key, factory):
        """The value of ``key``, made by ``factory()`` (under the lock, once) when missing."""
        with self._lock:
            value = self._data.get(key, _MISSING)
            if value is not _MISSING:
                self._data.move_to_end(key)
                return value
            value = self._data[key] = factory()
            dropped = self._trim()
        self._evicted(dropped)
        return value

    def clear(self):
        with self._lock:
            dropped = list(self._data.items())
            self._data.clear()
        self._evicted(dropped)

    def __len__(self):
        return len(self._data)

    def __contains__(self, key):
        return key in self._data

    def _trim(self):
        dropped = []
        while len(self._data) > self._maxsize:
            dropped.append(self._data.popitem(last=False))
        return dropped

    def _evicted(self, dropped):
        if self._on_evict is not None:
            for k, v in dropped:
                self._on_evict(k, v)


_MISSING = object()


def remembered(cache, limit, key, compute, *args):
    """``compute(*args)``, kept in the dict ``cache`` under ``key`` (emptied when it holds
    ``limit`` entries); a key that cannot be hashed (a list among the arguments) is computed every
    call. A ``compute`` that raises keeps nothing. No lock: two threads may compute the same
    entry. Callers key each argument with its class, so that ``stride=True`` or ``1.0``, which
    a check refuses, never meets the entry of ``1``."""
    try:
        hit = cache.get(key)
    except TypeError:
        return compute(*args)
    if hit is None:
        hit = compute(*args)
        if len(cache) >= limit:
            cache.clear()
        cache[key] = hit
    return hit
