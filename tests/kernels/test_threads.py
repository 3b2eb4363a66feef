"""ember.set_num_threads governs BLAS (through threadpoolctl) and ember's own loops."""
import pytest

import ember


def test_set_num_threads_limits_blas():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        assert ember.get_num_threads() == 1
        blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(p["num_threads"] == 1 for p in blas)
    finally:
        ember.set_num_threads(before)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_set_num_threads_rejects_bad_values(bad):
    with pytest.raises(ValueError, match="set_num_threads"):
        ember.set_num_threads(bad)
