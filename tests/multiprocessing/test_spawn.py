"""spawn and start_processes (ember/multiprocessing/spawn.py): fn runs with its index and shares
tensors, a child's exception is raised with its index and traceback (the others terminated), a
child that exits with a code is reported, and another start method warns."""
import os
import time

import pytest

import ember
import ember.multiprocessing as mp
from tests.multiprocessing.processes import TIMEOUT


def _spawned(i, t, fail):
    if fail == "raise" and i == 1:
        raise ValueError(f"boom in process {i}")
    if fail == "exit" and i == 1:
        os._exit(3)
    if fail:
        time.sleep(TIMEOUT)  # terminated by the parent once process 1 failed
    t[i] = float(i + 1)


def test_spawn_runs_fn_with_index_and_shares_tensors():
    t = ember.zeros(2).share_memory_()
    ctx = mp.spawn(_spawned, args=(t, None), nprocs=2, join=False)
    assert isinstance(ctx, mp.ProcessContext) and len(ctx.pids()) == 2
    end = time.monotonic() + TIMEOUT
    while not ctx.join(timeout=1):
        assert time.monotonic() < end, "spawned processes did not finish"
    assert t.tolist() == [1.0, 2.0]


def test_spawn_raises_a_child_exception_with_its_index_and_traceback():
    start = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException) as info:
        mp.spawn(_spawned, args=(ember.zeros(2), "raise"), nprocs=2)
    e = info.value
    assert e.error_index == 1 and isinstance(e.error_pid, int)
    assert "process 1" in str(e) and "Traceback (most recent call last)" in str(e)
    assert "ValueError: boom in process 1" in str(e) and "_spawned" in str(e)
    assert time.monotonic() - start < TIMEOUT  # process 0 was terminated, not waited for


def test_spawn_reports_a_child_that_exits_without_raising():
    with pytest.raises(mp.ProcessExitedException, match="exit code 3") as info:
        mp.start_processes(_spawned, args=(ember.zeros(2), "exit"), nprocs=2,
                           start_method="fork")
    assert info.value.error_index == 1 and info.value.exit_code == 3


def test_spawn_warns_for_another_start_method():
    t = ember.zeros(1).share_memory_()
    with pytest.warns(FutureWarning, match="start_processes"):
        mp.spawn(_spawned, args=(t, None), nprocs=1, start_method="fork")
    assert t.tolist() == [1.0]
