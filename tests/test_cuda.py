"""ember.cuda (ember/cuda.py) answers as torch.cuda without CUDA: no device, seeding a no-op, the
queries torch programs make; what needs a GPU is a clear UnsupportedError naming CUDA."""
import pytest

import ember
from ember.errors import UnsupportedError

torch = pytest.importorskip("torch")


def test_queries_answer_as_torch_without_cuda():
    assert ember.cuda.is_available() is False and ember.cuda.device_count() == 0
    assert ember.cuda.is_initialized() is False
    ember.cuda.manual_seed(0)
    ember.cuda.manual_seed_all(0)  # no-ops, as torch without CUDA
    ember.cuda.seed()
    ember.cuda.seed_all()
    ember.cuda.empty_cache()
    assert ember.cuda.get_rng_state_all() == []   # a checkpoint's per-device states: none
    ember.cuda.set_rng_state_all([])
    if not torch.cuda.is_available():
        assert torch.cuda.get_rng_state_all() == []
        assert ember.cuda.device_count() == torch.cuda.device_count()
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved",
                 "max_memory_reserved"):      # logged by training loops: 0 without CUDA
        assert getattr(ember.cuda, name)() == 0
        if not torch.cuda.is_available():
            assert getattr(torch.cuda, name)() == 0


@pytest.mark.parametrize("name,args", [("current_device", ()), ("synchronize", ()),
                                       ("set_device", (0,)), ("get_device_name", ()),
                                       ("init", ())])
def test_what_needs_a_gpu_is_an_unsupported_error(name, args):
    with pytest.raises(UnsupportedError, match="CUDA") as e:
        getattr(ember.cuda, name)(*args)
    assert isinstance(e.value, RuntimeError)
