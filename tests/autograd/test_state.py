"""The autograd state (ember/autograd/state.py) is per thread: a mode set in one thread is not
seen by another."""
import threading

import ember


def test_grad_mode_is_thread_local():
    seen = []
    with ember.no_grad():
        t = threading.Thread(target=lambda: seen.append(ember.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


def test_a_thread_s_mode_does_not_leak_back():
    seen = []

    def worker():
        with ember.no_grad():
            seen.append(ember.is_grad_enabled())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [False] and ember.is_grad_enabled()
