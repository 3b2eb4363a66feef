"""ember.cuda.amp (ember/amp/cuda_amp.py), torch.cuda.amp's deprecated spelling: ember has no
CUDA, so autocast and GradScaler warn and are disabled as torch's on a machine without CUDA;
custom_fwd/custom_bwd are amp's for device "cuda"."""
import warnings

import numpy as np
import pytest
import torch

import ember


def test_cuda_amp_autocast_is_deprecated_and_disabled():
    for m in (torch, ember):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with m.cuda.amp.autocast():
                assert (m.ones(2, 2) @ m.ones(2, 2)).dtype == m.float32
        cats = {x.category for x in w}
        assert FutureWarning in cats and UserWarning in cats


@pytest.mark.filterwarnings("ignore:.*CUDA is not available:UserWarning")
def test_cuda_grad_scaler_warns_and_passes_through():
    w = ember.nn.Parameter(ember.tensor([1.0, 2.0]))
    opt = ember.optim.SGD([w], lr=0.5)
    with pytest.warns(FutureWarning, match="torch.cuda.amp.GradScaler"):
        s = ember.cuda.amp.GradScaler()
    assert not s.is_enabled()
    loss = (w * w).sum()
    assert s.scale(loss) is loss
    loss.backward()
    s.step(opt)
    s.update()
    np.testing.assert_allclose(w.detach().numpy(), [0.0, 0.0])


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("m", [torch, ember], ids=["torch", "ember"])
def test_custom_fwd_for_cuda_does_not_cast_on_the_cpu(m):
    @m.cuda.amp.custom_fwd(cast_inputs=m.float16)
    def f(a):
        return a @ a

    x = m.ones(2, 2)
    assert f(x).dtype == m.float32
    with m.autocast("cpu"):
        assert f(x).dtype == m.bfloat16     # the cpu region's rule, no float16 cast
