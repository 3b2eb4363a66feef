"""The bounded LRU cache (recency order, eviction callback outside the lock, one factory call per
key under concurrency) and ``remembered``, the memo of validated call arguments."""
import threading

import pytest

from ember.kernels.lru import LRUCache, remembered


def test_least_recently_used_is_dropped_first_and_reported():
    dropped = []
    c = LRUCache(2, on_evict=lambda k, v: dropped.append((k, v)))
    c.get_or_create("a", lambda: 1)
    c.get_or_create("b", lambda: 2)
    assert c.get("a") == 1                             # "a" is now the most recent
    c.get_or_create("c", lambda: 3)
    assert dropped == [("b", 2)] and "b" not in c and len(c) == 2
    assert c.get("b", "missing") == "missing"
    assert c.get_or_create("a", lambda: pytest.fail("a is cached")) == 1
    c.maxsize = 1
    assert dropped == [("b", 2), ("c", 3)] and list(c._data) == ["a"]
    c.clear()
    assert len(c) == 0 and dropped[-1] == ("a", 1)


def test_eviction_callback_runs_outside_the_lock():
    c = LRUCache(1, on_evict=lambda k, v: seen.append(c.get("new")))
    seen = []
    c.get_or_create("old", object)
    c.get_or_create("new", lambda: "value")       # the callback reads the cache: no deadlock
    assert seen == ["value"]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", None])
def test_maxsize_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="maxsize must be a positive int"):
        LRUCache(bad)
    c = LRUCache(3)
    with pytest.raises(ValueError, match="maxsize must be a positive int"):
        c.maxsize = bad
    assert c.maxsize == 3


def test_concurrent_get_or_create_calls_the_factory_once_per_key():
    c = LRUCache(64)
    calls = []
    start = threading.Barrier(8)

    def factory():
        calls.append(1)
        return object()

    results = []

    def worker():
        start.wait()
        results.append(c.get_or_create("k", factory))
    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len({id(r) for r in results}) == 1


def test_remembered_computes_once_per_key_and_stays_bounded():
    cache, calls = {}, []

    def compute(a, b):
        calls.append((a, b))
        return a + b
    assert remembered(cache, 3, ("k", 1), compute, 1, 2) == 3
    assert remembered(cache, 3, ("k", 1), compute, 1, 2) == 3
    assert calls == [(1, 2)]
    for i in range(2, 6):
        remembered(cache, 3, ("k", i), compute, i, 0)
    assert len(cache) <= 3
    assert remembered(cache, 3, ["unhashable"], compute, 5, 5) == 10   # computed, not kept
    assert ["unhashable"] not in list(map(list, cache)) and len(calls) == 6


def test_remembered_keeps_nothing_when_compute_raises():
    cache = {}

    def compute():
        raise ValueError("bad arguments")
    with pytest.raises(ValueError):
        remembered(cache, 4, "k", compute)
    assert cache == {}
