"""bfloat16 tensors (ember/autograd/bfloat16.py: ops read bfloat16 as float32 and round their
results) against torch's: creation, conversion, printing, views, ops computed in
float32 and rounded per op (bit-identical to torch's CPU results here), promotion with float32,
autograd and an optimizer step in bfloat16, Module.to(bfloat16), and safetensors files both
ways (ember reads torch's BF16 files, torch reads ember's)."""
import os

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")


def _bits(e, t, ulps=0):
    """ember and torch bfloat16 tensors hold the same bits (within ``ulps`` bfloat16 steps,
    for results of several rounded ops, whose rounding points can differ from torch's fused
    kernels)."""
    assert e.dtype == ember.bfloat16 and t.dtype == torch.bfloat16
    a, b = e.detach().float().numpy(), t.detach().float().numpy()
    if ulps == 0:
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=ulps * 2.0 ** -7, atol=ulps * 2.0 ** -7 *
                                   float(np.abs(b).max()))


def test_creation_conversion_and_printing_match_torch():
    v = [1.5, 2.25, 3.1, -1e-3, 100.0]
    e, t = ember.tensor(v, dtype=ember.bfloat16), torch.tensor(v, dtype=torch.bfloat16)
    _bits(e, t)
    _bits(ember.tensor(v).bfloat16(), torch.tensor(v).bfloat16())
    _bits(ember.tensor(v).to(ember.bfloat16), torch.tensor(v).to(torch.bfloat16))
    short = [1.5, 2.25, 3.1]
    assert repr(ember.tensor(short, dtype=ember.bfloat16)) == \
        repr(torch.tensor(short, dtype=torch.bfloat16)).replace("torch", "ember")
    assert e.is_floating_point() and ember.bfloat16.is_floating_point
    assert ember.zeros(2, dtype=ember.bfloat16).dtype == ember.bfloat16
    assert ember.tensor(v, dtype="bfloat16").dtype == ember.bfloat16


def test_views_stay_views_and_data_ops_keep_the_dtype():
    e = ember.arange(12.0).bfloat16()
    v = e.reshape(3, 4)[1:]
    v[0, 0] = 100.0
    assert e[4].item() == 100.0 and v.dtype == ember.bfloat16
    assert ember.cat([e, e]).dtype == ember.bfloat16
    assert ember.stack([e, e]).dtype == ember.bfloat16


@pytest.mark.parametrize("fn", [
    lambda m, x, y: x + y, lambda m, x, y: x * 2.5, lambda m, x, y: (x / y).exp(),
    lambda m, x, y: x.sum(), lambda m, x, y: x @ y.T, lambda m, x, y: m.nn.functional.gelu(x),
    lambda m, x, y: x.softmax(-1), lambda m, x, y: x.mean(0), lambda m, x, y: x.max(1).values,
    lambda m, x, y: (x > y), lambda m, x, y: x + m.ones(5),   # float32 wins: a float32 result
], ids=["add", "mul_scalar", "div_exp", "sum", "matmul", "gelu", "softmax", "mean", "max",
        "gt", "promote_f32"])
def test_ops_compute_in_float32_and_round_as_torch(fn):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5)) + 3
    re = fn(ember, ember.tensor(a).bfloat16(), ember.tensor(b).bfloat16())
    rt = fn(torch, torch.tensor(a).bfloat16(), torch.tensor(b).bfloat16())
    assert str(re.dtype).split(".")[1] == str(rt.dtype).split(".")[1]
    np.testing.assert_array_equal(re.float().numpy() if re.dtype != ember.bool else re.numpy(),
                                  rt.float().numpy() if rt.dtype != torch.bool else rt.numpy())


@pytest.mark.parametrize("fn", [
    lambda m, x: m.nn.functional.softmax(x, dim=-1, dtype=m.float32),
    lambda m, x: x.log_softmax(-1, dtype=m.float32),
    lambda m, x: m.cumsum(x, dim=-1, dtype=m.float32),
    lambda m, x: x.sum(-1, dtype=m.float64), lambda m, x: x.mean(dtype=m.float32),
    lambda m, x: x.softmax(-1, dtype=m.bfloat16),
], ids=["softmax", "log_softmax", "cumsum", "sum", "mean", "softmax_bf16"])
def test_an_explicit_dtype_gives_that_dtype_as_torch(fn):
    """Attention in bf16 models: ``softmax(scores, -1, dtype=torch.float32)`` is float32."""
    x = np.random.default_rng(1).standard_normal((3, 6))
    xe = ember.tensor(x).bfloat16().requires_grad_()
    xt = torch.tensor(x).bfloat16().requires_grad_()
    re, rt = fn(ember, xe), fn(torch, xt)
    assert str(re.dtype).split(".")[1] == str(rt.dtype).split(".")[1]
    np.testing.assert_allclose(re.detach().double().numpy(), rt.detach().double().numpy(),
                               rtol=1e-6)
    re.pow(2).sum().backward()
    rt.pow(2).sum().backward()
    _bits(xe.grad, xt.grad, ulps=1)


def test_training_step_in_bfloat16_matches_torch():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(),
                             torch.nn.Linear(8, 2)).to(torch.bfloat16)
    em = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.Tanh(),
                             ember.nn.Linear(8, 2)).to(ember.bfloat16)
    em.load_state_dict({k: ember.tensor(v.float().numpy()).bfloat16()
                        for k, v in tm.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    ye, yt = em(ember.tensor(x).bfloat16()), tm(torch.tensor(x).bfloat16())
    _bits(ye, yt)
    ye.float().pow(2).sum().backward()
    yt.float().pow(2).sum().backward()
    for (k, p), (_, q) in zip(em.named_parameters(), tm.named_parameters()):
        _bits(p.grad, q.grad, ulps=2)      # tanh's backward is one fused kernel in torch
    ember.optim.SGD(em.parameters(), lr=0.1).step()
    torch.optim.SGD(tm.parameters(), lr=0.1).step()
    for (k, p), (_, q) in zip(em.named_parameters(), tm.named_parameters()):
        _bits(p, q, ulps=2)


def test_safetensors_files_both_ways(tmp_path):
    from safetensors.torch import load_file, save_file
    t = torch.randn(3, 4).bfloat16()
    save_file({"w": t}, os.path.join(tmp_path, "t.safetensors"))
    _bits(ember.load(os.path.join(tmp_path, "t.safetensors"))["w"], t)
    m = ember.nn.Linear(4, 3).to(ember.bfloat16)
    ember.save(m.state_dict(), os.path.join(tmp_path, "e.safetensors"))
    back = load_file(os.path.join(tmp_path, "e.safetensors"))
    _bits(m.weight, back["weight"])
    again = ember.load(os.path.join(tmp_path, "e.safetensors"))
    assert again["weight"].dtype == ember.bfloat16


def test_bfloat16_times_float32_in_a_product_raises_as_torch():
    """Products do not promote in torch, bfloat16 included: mm of bfloat16 and float32 raises
    with torch's words (ember's bfloat16 rule, which computes in float32, does not hide it)."""
    for m in (torch, ember):
        a, b = m.ones(2, 3, dtype=m.bfloat16), m.ones(3, 2)
        with pytest.raises(RuntimeError, match=r"expected m1 and m2 to have the same dtype, but "
                                               r"got: c10::BFloat16 != float"):
            m.mm(a, b)
        with pytest.raises(RuntimeError, match="expected scalar type BFloat16 but found Float"):
            m.bmm(a[None], b[None])
    assert ember.mm(ember.ones(2, 3, dtype=ember.bfloat16),
                    ember.ones(3, 2, dtype=ember.bfloat16)).dtype == ember.bfloat16
