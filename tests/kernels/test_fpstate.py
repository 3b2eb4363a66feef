"""ember.kernels.fpstate: the cheap "ignore" floating-point error state of the kernels."""
import threading
import warnings

import numpy as np
import pytest

from ember.kernels import fpstate


def test_quiet_ignores_until_restore_and_nests():
    x = np.array([-1.0, 0.0], np.float32)
    before = np.geterr()
    outer = fpstate.quiet()
    inner = fpstate.quiet()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = np.sqrt(x) / x   # nan and 0/0: no warning
    fpstate.restore(inner)
    assert np.geterr()["invalid"] == "ignore"
    fpstate.restore(outer)
    assert np.geterr() == before and np.isnan(r).all()
    with np.errstate(invalid="raise"):
        with pytest.raises(FloatingPointError):
            np.sqrt(x)


@pytest.mark.skipif(fpstate._extobj_contextvar is None,
                    reason="NumPy 1's error state is process-wide (np.errstate's too)")
def test_quiet_is_per_thread():
    """Another thread's kernel does not change this thread's error state."""
    seen = []
    token = fpstate.quiet()
    try:
        t = threading.Thread(target=lambda: seen.append(np.geterr()["invalid"]))
        t.start()
        t.join()
    finally:
        fpstate.restore(token)
    assert seen == [np.geterr()["invalid"]] != ["ignore"]
