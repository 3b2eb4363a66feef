"""Tensor basics: dtypes, metadata, conversion, creation, views and version counters."""
import numpy as np
import pytest

import ember


def test_dtypes_and_defaults():
    assert ember.tensor([1.0, 2.0]).dtype is ember.float32
    assert ember.tensor([1, 2]).dtype is ember.int64
    assert ember.tensor([True]).dtype is ember.bool
    assert ember.tensor(np.zeros(2)).dtype is ember.float64
    for d in (ember.float32, ember.float64, ember.float16, ember.int64, ember.int32, ember.int8,
              ember.uint8, ember.bool):
        t = ember.zeros(2, 3, dtype=d)
        assert t.dtype is d and t.shape == (2, 3)
    assert ember.tensor([1.5], dtype=ember.float64).dtype is ember.float64


def test_metadata():
    t = ember.arange(24).reshape(2, 3, 4)
    assert t.shape == ember.Size([2, 3, 4]) and t.size() == (2, 3, 4) and t.size(1) == 3
    assert t.dim() == 3 and t.numel() == 24 and t.stride() == (12, 4, 1)
    assert t.device == "cpu" and str(t.device) == "cpu"
    assert t.is_contiguous()
    assert not t.transpose(0, 2).is_contiguous()
    assert t.transpose(0, 2).contiguous().is_contiguous()
    assert t.T.shape == (4, 3, 2)
    with pytest.raises(IndexError):
        t.size(3)


def test_conversions():
    t = ember.tensor([[1.5, 2.0]])
    assert t.tolist() == [[1.5, 2.0]]
    assert ember.tensor(3.5).item() == 3.5
    assert float(ember.tensor([2.0])) == 2.0 and int(ember.tensor([3])) == 3
    assert bool(ember.tensor([1])) is True
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(ember.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="cannot be converted"):
        ember.tensor([1.0, 2.0]).item()
    assert t.to(ember.float64).dtype is ember.float64
    assert t.double().dtype is ember.float64 and t.long().dtype is ember.int64
    assert t.int().dtype is ember.int32 and t.bool().dtype is ember.bool
    assert t.float() is t


def test_numpy_shares_memory_and_from_numpy_is_zero_copy():
    a = np.arange(6, dtype=np.float32)
    t = ember.from_numpy(a)
    a[0] = 42
    assert t[0].item() == 42
    t.numpy()[1] = 7
    assert a[1] == 7
    assert np.asarray(t) is a
    with pytest.raises(TypeError):
        ember.from_numpy(np.array(["x"]))
    r = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        r.numpy()


def test_dlpack_round_trip():
    t = ember.arange(5, dtype=ember.float32)
    u = ember.from_dlpack(t)
    u[0] = 9.0
    assert t[0].item() == 9.0
    assert np.from_dlpack(t)[0] == 9.0


def test_repr_is_torch_like():
    assert repr(ember.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(ember.tensor([1, 2])) == "tensor([1, 2])"
    assert "dtype=ember.float64" in repr(ember.zeros(2, dtype=ember.float64))
    assert "requires_grad=True" in repr(ember.zeros(2, requires_grad=True))
    x = ember.ones(2, requires_grad=True)
    assert "grad_fn=<MulBackward0>" in repr(x * 2)


def test_creation_functions():
    assert ember.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert ember.linspace(0, 1, 3).tolist() == [0.0, 0.5, 1.0]
    assert ember.eye(2, 3).tolist() == [[1, 0, 0], [0, 1, 0]]
    assert ember.full((2,), 7).dtype is ember.int64
    assert ember.full((2,), 0.5).tolist() == [0.5, 0.5]
    x = ember.randn(3, 4)
    for fn in (ember.zeros_like, ember.ones_like, ember.empty_like, ember.rand_like,
               ember.randn_like):
        assert fn(x).shape == (3, 4)
    assert ember.full_like(x, 2.0).tolist()[0][0] == 2.0
    assert sorted(ember.randperm(5).tolist()) == [0, 1, 2, 3, 4]
    r = ember.randint(3, 7, (100,))
    assert r.dtype is ember.int64 and r.min().item() >= 3 and r.max().item() < 7
    assert ember.normal(2.0, 0.5, (1000,)).mean().item() == pytest.approx(2.0, abs=0.1)
    assert ember.zeros((2, 3)).shape == (2, 3)
    with pytest.raises(RuntimeError, match="negative dimension"):
        ember.zeros(-1)


def test_generators_make_runs_reproducible():
    ember.manual_seed(0)
    a = ember.randn(5)
    ember.manual_seed(0)
    b = ember.randn(5)
    assert a.tolist() == b.tolist()
    g1, g2 = ember.Generator().manual_seed(3), ember.Generator().manual_seed(3)
    assert ember.rand(4, generator=g1).tolist() == ember.rand(4, generator=g2).tolist()
    state = g1.get_state()
    x = ember.rand(3, generator=g1)
    g1.set_state(state)
    assert ember.rand(3, generator=g1).tolist() == x.tolist()


@pytest.mark.parametrize("make_view", [
    lambda t: t.view(6, 2), lambda t: t.reshape(12), lambda t: t.transpose(0, 1),
    lambda t: t.permute(1, 0), lambda t: t[1], lambda t: t[:, 1:3], lambda t: t.narrow(0, 1, 2),
    lambda t: t.unsqueeze(0), lambda t: t.t(), lambda t: t.expand(2, 3, 4)[0],
    lambda t: t.view(3, 1, 4).squeeze(1),
])
def test_views_share_memory_and_version(make_view):
    t = ember.zeros(3, 4)
    v = make_view(t)
    assert np.shares_memory(v.numpy(), t.numpy())
    before = t._version
    t.add_(1)
    assert v._version == t._version == before + 1
    assert float(v.sum()) == v.numel()


def test_reshape_copies_when_it_must():
    t = ember.arange(6.0).reshape(2, 3).t()
    r = t.reshape(6)
    assert not np.shares_memory(r.numpy(), t.numpy())
    with pytest.raises(RuntimeError, match="reshape"):
        t.view(6)


def test_setitem_and_getitem_forms():
    t = ember.zeros(4, 5)
    t[1] = 1.0
    t[:, 0] = ember.arange(4.0)
    t[ember.tensor([2, 3]), 4] = 5.0
    t[t > 4] = -1.0
    ref = np.zeros((4, 5), np.float32)
    ref[1] = 1
    ref[:, 0] = np.arange(4)
    ref[[2, 3], 4] = 5
    ref[ref > 4] = -1
    np.testing.assert_array_equal(t.numpy(), ref)
    assert t[..., None].shape == (4, 5, 1)
    assert t[ember.tensor([True, False, True, False])].shape == (2, 5)
    with pytest.raises(IndexError):
        t[10]
    with pytest.raises(IndexError, match="tensors used as indices"):
        t[ember.tensor([0.5])]


def test_inplace_ops_bump_version_and_return_self():
    t = ember.ones(3)
    for op in (lambda x: x.add_(1), lambda x: x.mul_(2), lambda x: x.sub_(1), lambda x: x.div_(2),
               lambda x: x.clamp_(0, 1), lambda x: x.zero_(), lambda x: x.fill_(3),
               lambda x: x.copy_(ember.ones(3)), lambda x: x.relu_(),
               lambda x: x.masked_fill_(ember.tensor([True, False, True]), 0)):
        v = t._version
        assert op(t) is t
        assert t._version == v + 1
    with pytest.raises(RuntimeError, match="can't be cast"):
        ember.ones(3, dtype=ember.int64).add_(0.5)


def test_operators_with_scalars_on_both_sides():
    x = ember.tensor([1.0, 2.0])
    assert (2 - x).tolist() == [1.0, 0.0]
    assert (2 / x).tolist() == [2.0, 1.0]
    assert (2 ** x).tolist() == [2.0, 4.0]
    assert (x ** 2).tolist() == [1.0, 4.0]
    assert (-x).tolist() == [-1.0, -2.0]
    assert (x == 1).tolist() == [True, False]
    assert (ember.tensor([5, 7]) // 2).tolist() == [2, 3]
    assert (ember.tensor([1, 2]) * 1.5).dtype is ember.float32
    assert (ember.tensor([1, 2]) / 2).dtype is ember.float32
    i = ember.tensor([1, 2])
    i += 1
    assert i.tolist() == [2, 3]


def test_type_promotion_follows_torch():
    f32 = ember.ones(2)
    assert (f32 + ember.ones(2, dtype=ember.int64)).dtype is ember.float32
    assert (f32 + ember.tensor(1.0, dtype=ember.float64)).dtype is ember.float32
    assert (f32 + ember.ones(2, dtype=ember.float64)).dtype is ember.float64
    assert (ember.ones(2, dtype=ember.int32) + ember.ones(2, dtype=ember.int64)).dtype is ember.int64
    assert (ember.ones(2, dtype=ember.uint8) + ember.ones(2, dtype=ember.int8)).dtype is ember.int16
    assert ember.ones(2, dtype=ember.int64).exp().dtype is ember.float32


def test_max_min_overloads():
    x = ember.tensor([[1.0, 5.0], [3.0, 2.0]])
    assert ember.max(x).item() == 5.0
    v, i = ember.max(x, 1)
    assert v.tolist() == [5.0, 3.0] and i.tolist() == [1, 0]
    assert x.min(dim=0).indices.tolist() == [0, 1]
    assert ember.max(x, ember.full((2, 2), 2.5)).tolist() == [[2.5, 5.0], [3.0, 2.5]]


def test_tensors_refuse_pickle():
    import pickle
    with pytest.raises(TypeError, match="safetensors"):
        pickle.dumps(ember.ones(2))


def test_numpy_scalars_defer_to_tensor_operators():
    t = ember.tensor([1.0, 2.0])
    out = np.float32(2.0) * t
    assert isinstance(out, ember.Tensor) and out.tolist() == [2.0, 4.0]
    assert isinstance(np.float64(1.0) + t, ember.Tensor)
    assert 2.0 in t and 3.0 not in t


@pytest.mark.parametrize("values", [[0.0, 0.5, 1.0, 0.5], [1.0, 2.0], [1.5, 2.25, 3.1],
                                    [1e-5, 1.0], [1e6, 1.5], [0.1], [3.14159265],
                                    [float("nan"), 1.5], [100.5, 2.0], [[1.25, -2.0], [0.0, 3.5]]])
def test_float_repr_matches_torch(values):
    """Four digits unless every value is whole (ember printed 0.5 where torch prints 0.5000)."""
    torch = pytest.importorskip("torch")
    assert repr(ember.tensor(values)) == repr(torch.tensor(values))


def test_device_and_layout_predicates_match_torch():
    """Every is_* property of torch 2.13's Tensor exists and answers as for a CPU tensor."""
    torch = pytest.importorskip("torch")
    t, e = torch.ones(2), ember.ones(2)
    props = [n for n in dir(torch.Tensor) if n.startswith("is_") and not callable(getattr(t, n))]
    assert {"is_xpu", "is_mps", "is_meta", "is_quantized", "is_sparse", "is_nested",
            "is_cpu"} <= set(props)
    for name in props:
        assert getattr(e, name) == getattr(t, name), name


@pytest.mark.parametrize("expr", [
    "x.is_pinned()", "x.is_neg()", "x.is_distributed()", "x.is_signed()", "u.is_signed()",
    "x.is_same_size(y)", "x.is_same_size(x[:1])", "s.is_nonzero()", "z.is_nonzero()",
    "x.is_set_to(x)", "x.is_set_to(x.view(2))", "x.is_set_to(x[:1])", "x.is_set_to(y)",
])
def test_predicate_methods_match_torch(expr):
    torch = pytest.importorskip("torch")

    def env(lib):
        return {"x": lib.ones(2), "y": lib.zeros(2), "u": lib.ones(2, dtype=lib.uint8),
                "s": lib.tensor(3.0), "z": lib.zeros(())}
    assert eval(expr, env(ember)) == eval(expr, env(torch))


@pytest.mark.parametrize("expr, match", [
    ("lib.ones(2).is_nonzero()", "more than one value"), ("lib.tensor([]).is_nonzero()",
                                                          "no values"),
    ("lib.ones(2).is_coalesced()", "expected sparse coordinate tensor layout"),
])
def test_predicate_method_errors_match_torch(expr, match):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match=match):
        eval(expr, {"lib": torch})
    with pytest.raises(ember.errors.EmberRuntimeError, match=match):
        eval(expr, {"lib": ember})


@pytest.mark.parametrize("call", ["x.pin_memory()", "x.pin_memory('cpu')"])
def test_pin_memory_without_an_accelerator_raises_runtime_error_as_torch(call):
    """``Tensor.pin_memory()`` (nanoGPT's get_batch pins its batches for CUDA): torch 2.13
    raises RuntimeError where there is no accelerator; ember, which has none, raises
    EmberRuntimeError naming the op, dtype and shape (it was an AttributeError)."""
    torch = pytest.importorskip("torch")
    if torch.accelerator.is_available():
        pytest.skip("torch has an accelerator here, so its pin_memory succeeds")
    with pytest.raises(RuntimeError):
        eval(call, {"x": torch.ones(2, 3)})
    with pytest.raises(ember.errors.EmberRuntimeError,
                       match=r"pin_memory.*accelerator.*float32.*\(2, 3\)"):
        eval(call, {"x": ember.ones(2, 3)})


def test_float_of_a_tensor_requiring_grad_warns_once_as_torch(monkeypatch):
    import sys
    import warnings
    monkeypatch.setitem(sys.modules["ember.tensor"]._warned, "float_of_grad", False)
    t = ember.tensor([1.5], requires_grad=True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert float(ember.ones(1)) == 1.0 and t.item() == 1.5   # no warning for these
        with ember.no_grad():
            float(t)
        float(t * 2)
        float(t)
    assert len(seen) == 1 and seen[0].category is UserWarning
    assert "Consider using tensor.detach() first" in str(seen[0].message)
    assert seen[0].filename == __file__


def test_grad_of_a_non_leaf_warns_as_torchs(recwarn):
    import warnings
    x = ember.ones(2, requires_grad=True)
    y = x * 2
    with pytest.warns(UserWarning, match=r"The \.grad attribute of a Tensor that is not a leaf "
                                         r"Tensor is being accessed"):
        assert y.grad is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad is None and ember.ones(2).grad is None   # leaves: silent
        z = x * 3
        z.retain_grad()
        assert z.grad is None
        z.sum().backward()
        assert z.grad.tolist() == [1.0, 1.0]
        assert ember.Tensor.grad is None


def test_format_of_a_tensor_follows_torch():
    """``f"loss {loss}"`` prints the number for a 0-d tensor, with or without a spec; a tensor
    with dimensions (and a 0-d Parameter) formats as str, and refuses a spec."""
    torch = pytest.importorskip("torch")
    for m in (ember, torch):
        loss, acc = m.tensor(0.25), m.tensor(0.8125)
        assert f"{loss}" == "0.25" and f"{acc:.1%}" == "81.2%" and f"{m.tensor(7):03d}" == "007"
        assert f"{m.tensor(True)}" == "True" and f"{m.tensor(12345.5):,.1f}" == "12,345.5"
        assert f"{m.tensor(3.0, requires_grad=True) * 2}" == "6.0"
        assert f"{m.tensor([1, 2])}" == str(m.tensor([1, 2]))
        assert f"{m.nn.Parameter(m.tensor(2.0))}" == str(m.nn.Parameter(m.tensor(2.0)))
        with pytest.raises(TypeError, match="unsupported format string passed to Tensor"):
            f"{m.tensor([1.5, 2.0]):.2f}"


@pytest.mark.parametrize("expr", [
    "np.exp(t)", "np.sqrt(t)", "np.add(t, 1)", "np.maximum(t, 2)", "np.float64(2) * t",
    "np.float32(2) - t", "np.int64(3) / t", "np.float64(1.5) ** t", "np.float32(2) > t",
    "np.array([1.0, 2.0]) == t", "np.clip(t, 0, 1)", "np.argmax(t)", "np.round(t, 1)",
    "np.abs(t)", "np.modf(t)[1]", "np.log(L.tensor(2.0))"])
def test_numpy_functions_on_tensors_give_torchs_tensors(expr):
    torch = pytest.importorskip("torch")
    ours = eval(expr, {"np": np, "t": ember.tensor([1.0, 4.0]), "L": ember})
    theirs = eval(expr, {"np": np, "t": torch.tensor([1.0, 4.0]), "L": torch})
    assert isinstance(ours, ember.Tensor) and isinstance(theirs, torch.Tensor)
    assert ours.tolist() == theirs.tolist()
    if theirs.dtype != torch.uint8:      # torch turns NumPy's bool results into uint8
        assert str(ours.dtype)[6:] == str(theirs.dtype)[6:]


def test_numpy_operators_keep_autograd_and_refuse_grad_tensors_as_torch():
    x = ember.ones(2, requires_grad=True)
    (np.float32(3) * x + np.ones(2, np.float32) * x).sum().backward()
    assert x.grad.tolist() == [4.0, 4.0]
    with pytest.raises(RuntimeError, match="requires grad"):
        np.exp(x)


def _assign_grad_cases(m):
    x = m.ones(2, 3, requires_grad=True)
    return x, {
        "size": lambda: setattr(x, "grad", m.ones(3, 2)),
        "broadcastable size": lambda: setattr(x, "grad", m.ones(3)),
        "dtype": lambda: setattr(x, "grad", m.ones(2, 3, dtype=m.float64)),
        "integer dtype": lambda: setattr(x, "grad", m.ones(2, 3, dtype=m.int64)),
        "itself": lambda: setattr(x, "grad", x),
        "list": lambda: setattr(x, "grad", [1.0]),
        "ndarray": lambda: setattr(x, "grad", np.ones((2, 3), np.float32)),
        "non-leaf size": lambda: setattr(x * 2, "grad", m.ones(3)),
    }


@pytest.mark.parametrize("case", sorted(_assign_grad_cases(ember)[1]))
def test_assigning_a_wrong_grad_raises_as_torch(case):
    """``x.grad = t`` checks t as torch: a Tensor or None (TypeError), not x itself, of x's size
    and dtype (RuntimeError with torch's words)."""
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as theirs:
        _assign_grad_cases(torch)[1][case]()
    x, cases = _assign_grad_cases(ember)
    with pytest.raises(type(theirs.value)) as ours:
        cases[case]()
    assert str(ours.value).startswith(str(theirs.value)[:60])
    assert x.grad is None


def test_assigning_a_matching_grad_or_none_works_as_torch():
    x = ember.ones(2, 3, requires_grad=True)
    g = ember.full((2, 3), 2.0)
    x.grad = g
    assert x.grad is g
    x.sum().backward()
    assert x.grad.tolist() == [[3.0] * 3] * 2
    x.grad = None
    assert x.grad is None
    del x.grad
    assert x.grad is None


def test_is_inference_marks_tensors_made_in_inference_mode_as_torch():
    """Tensor.is_inference(): tensors made under inference_mode (results, factories, views and
    detach() of them) are inference tensors; results outside it and clones are not; such a
    tensor refuses requires_grad_ and in-place updates outside inference mode."""
    torch = pytest.importorskip("torch")
    seen = []
    for m in (torch, ember):
        with m.inference_mode():
            a = m.ones(3)
            b, c = a * 2, m.tensor([1.0, 2.0])
        with m.no_grad():
            n = m.ones(1)
        seen.append([a.is_inference(), b.is_inference(), c.is_inference(), n.is_inference(),
                     m.ones(1).is_inference(), a[:2].is_inference(), a.detach().is_inference(),
                     (a + 1).is_inference(), a.clone().is_inference()])
        with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor "
                                               "outside InferenceMode is not allowed"):
            a.requires_grad_()
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside "
                                               "InferenceMode is not allowed"):
            a[0] = 1.0
        with m.inference_mode():
            a.add_(1)
        assert a.tolist() == [2.0, 2.0, 2.0]
    assert seen[0] == seen[1] == [True, True, True, False, False, True, True, False, False]


def test_numpy_ufuncs_with_bool_results_give_uint8_tensors_as_torch():
    """torch's Tensor.__array_wrap__ turns NumPy's bool results into uint8 tensors
    (``np.isnan(t)``, ``np.logical_not(mask)``); bool tensors' other NumPy interop keeps bool."""
    torch = pytest.importorskip("torch")
    import warnings
    b = np.array([True, False])
    for m in (torch, ember):
        t = m.tensor([1.0, float("nan")])
        mask = m.tensor([True, False])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            r1, r2 = np.isnan(t), np.logical_not(mask)
        assert str(r1.dtype).endswith("uint8") and r1.tolist() == [0, 1]
        assert str(r2.dtype).endswith("uint8") and r2.tolist() == [0, 1]
        assert m.from_numpy(b).dtype == m.bool and m.tensor(b).dtype == m.bool
        assert m.as_tensor(b).dtype == m.bool and m.tensor(np.bool_(True)).dtype == m.bool
        assert mask.numpy().dtype == np.bool_ and np.asarray(mask).dtype == np.bool_
        assert (t > 0).numpy().dtype == np.bool_
