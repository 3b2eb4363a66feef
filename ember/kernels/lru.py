"""A bounded, thread-safe least-recently-used cache for compiled kernels and the objects that hold
them (``pointwise.engine``'s kernels, ``jit.fused``'s fusion groups), so that a program making
ever new expressions keeps a bounded number of them alive."""
import threading
from collections import OrderedDict

__all__ = ["LRUCache"]


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
