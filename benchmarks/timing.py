"""Timing helpers shared by the benchmark scripts."""
import time

SETTLE_S = 0.03


def settle(seconds=SETTLE_S):
    """Busy-wait (not sleep) so the other library's spinning workers (torch's OpenMP pool,
    OpenBLAS's pool, which spin for milliseconds to ~100 ms after a call) go quiet while this
    thread's core stays awake. On 2 cores a spinning worker halves whatever runs next (measured:
    ember's Adam step at 1e6 elements 0.46-0.49 ms right after torch's, 0.29 ms after a 30 ms
    settle); sleeping instead lets the (virtual) cores idle, and a library whose workers block
    then pays their wake-up on every call."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
