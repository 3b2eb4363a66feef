"""A hard timeout for every test of DataLoader's worker processes (SIGALRM, then faulthandler as a
last resort), so a stuck worker fails the test instead of hanging the run."""
import faulthandler
import signal
import threading

import pytest

HARD_TIMEOUT_S = 60


@pytest.fixture(autouse=True)
def _hard_timeout():
    main = threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM")
    if main:
        def expired(signum, frame):
            raise TimeoutError(f"test ran past its {HARD_TIMEOUT_S} s hard timeout")
        old = signal.signal(signal.SIGALRM, expired)
        signal.alarm(HARD_TIMEOUT_S)
    faulthandler.dump_traceback_later(2 * HARD_TIMEOUT_S, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        if main:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
