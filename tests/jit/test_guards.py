"""A trace called with inputs of new shapes gives eager's answer, or it says it does not.

Sizes read while tracing are traced when they reach an op (``x.view(x.size(0), -1)``); when
Python code makes a plain value of one (``1 / math.sqrt(d)``, ``int(n)``, a comparison, a NumPy
index array built from a size inside an op) the tracer records a shape guard, and the traced
callable warns (``TracerWarning`` naming the line) when it is called with shapes for which a
guarded value differs.
"""
import math
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import jit


def rand(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def clean_call(fn, *args):
    """``fn(*args)`` with any TracerWarning an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", jit.TracerWarning)
        return fn(*args)


def warned_call(fn, *args):
    with pytest.warns(jit.TracerWarning) as rec:
        out = fn(*args)
    msgs = [str(w.message) for w in rec if issubclass(w.category, jit.TracerWarning)]
    return out, msgs


def same(a, b):
    assert a.shape == b.shape
    np.testing.assert_allclose(a.detach()._data, b.detach()._data, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------- the cases
def test_interpolate_scale_factor_at_a_new_size_warns():
    t = jit.trace(lambda x: F.interpolate(x, scale_factor=2), (rand(1, 2, 8, 8),))
    same(clean_call(t, rand(3, 2, 8, 8, seed=1)), F.interpolate(rand(3, 2, 8, 8, seed=1),
                                                                scale_factor=2))
    out, msgs = warned_call(t, rand(1, 2, 16, 16))
    assert out.shape == (1, 2, 16, 16)  # frozen: eager gives 32x32, and the trace says so
    assert "[1, 2, 8, 8]" in msgs[0] and "[1, 2, 16, 16]" in msgs[0]
    assert "upsample_nearest2d" in msgs[0] or "interpolate" in msgs[0]


def test_interpolate_to_a_fixed_size_from_a_new_input_size_is_right_and_silent():
    # the interpolation kernel computes its taps from the input it is given
    fn = lambda x: F.interpolate(x, size=(5, 5), mode="bilinear")  # noqa: E731
    t = jit.trace(fn, (rand(1, 2, 8, 8),))
    same(clean_call(t, rand(1, 2, 16, 16)), fn(rand(1, 2, 16, 16)))


def test_attention_at_a_new_sequence_length_is_right_and_silent():
    sdpa = jit.trace(F.scaled_dot_product_attention, (rand(2, 4, 5, 8),) * 3)
    q = rand(3, 4, 9, 8, seed=2)
    same(clean_call(sdpa, q, q, q), F.scaled_dot_product_attention(q, q, q))
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    t = jit.trace(lambda x: mha(x, x, x)[0], (rand(2, 5, 8),))
    x = rand(3, 7, 8, seed=3)
    same(clean_call(t, x), mha(x, x, x)[0])
    # the scale 1/sqrt(head_dim) is a Python float: a new head size is not followed
    q = rand(2, 4, 5, 16, seed=4)
    out, msgs = warned_call(sdpa, q, q, q)
    assert "float()" in msgs[0] and "scaled_dot_product_attention" in msgs[0]
    assert "was 8" in msgs[0] and "now 16" in msgs[0]


class Flat(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        y = self.conv(x)
        return self.fc(y.view(y.size(0), -1))


def test_view_of_size0_minus1_is_batch_generic():
    m = Flat().eval()
    t = jit.trace(m, (rand(2, 3, 6, 6),))
    assert t.shape_guards is None  # nothing shape-derived was frozen
    for b in (1, 5):
        x = rand(b, 3, 6, 6, seed=b)
        with ember.no_grad():
            same(clean_call(t, x), m(x))


def test_view_of_int_size_at_a_new_batch_warns():
    t = jit.trace(lambda x: x.view(int(x.size(0)), -1), (rand(2, 3, 4),))
    out, msgs = warned_call(t, rand(6, 3, 4))
    assert "int()" in msgs[0] and "%x.size(0) was 2" in msgs[0]


def test_mlp_at_a_new_batch_is_right_and_silent():
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    t = jit.trace(mlp, (rand(3, 4),))
    assert t.shape_guards is None
    opt = jit.optimize(t)
    for b in (1, 7):
        x = rand(b, 4, seed=b)
        with ember.no_grad():
            same(clean_call(t, x), mlp(x))
            same(clean_call(opt, x), mlp(x))


def test_the_warning_names_the_users_line_and_the_call_site():
    def model(x):
        scale = 1.0 / math.sqrt(x.shape[-1])  # the read
        return x * scale
    read_line = model.__code__.co_firstlineno + 1
    t = jit.trace(model, (rand(2, 8),))
    clean_call(t, rand(5, 8))  # a new batch: the scale is unchanged
    with pytest.warns(jit.TracerWarning) as rec:
        t(rand(2, 16))
        call_line = rec[0].lineno if rec else None
    w = rec[0]
    msg = str(w.message)
    assert f"{__file__}:{read_line}:" in msg and "math.sqrt(x.shape[-1])" in msg
    assert w.filename == __file__ and w.lineno == call_line
    assert "[2, 8]" in msg and "[2, 16]" in msg and "was 8" in msg and "now 16" in msg
    with warnings.catch_warnings():  # once per new shape
        warnings.simplefilter("error", jit.TracerWarning)
        t(rand(2, 16))


def test_a_read_inside_numpy_names_the_users_line():
    def model(x):
        n = int(np.prod(x.shape))  # the read happens inside NumPy
        return x.reshape(n) * 2.0
    read_line = model.__code__.co_firstlineno + 1
    t = jit.trace(model, (rand(2, 8),))
    with pytest.warns(jit.TracerWarning) as rec:
        try:
            t(rand(3, 8))
        except Exception:
            pass  # the frozen size no longer fits; the warning came first
    msg = str(rec[0].message)
    assert f"{__file__}:{read_line}:" in msg and "np.prod(x.shape)" in msg


# ---------------------------------------------------------------------------- more shape reads
def test_numel_is_traced():
    fn = lambda x: x.sum() / x.numel()  # noqa: E731
    t = jit.trace(fn, (rand(2, 8),))
    x = rand(4, 3, seed=1)
    same(clean_call(t, x), fn(x))


def test_a_comparison_warns_only_when_its_result_changes():
    def fn(x):
        return x * 2 if x.size(0) > 3 else x * 3
    t = jit.trace(fn, (rand(2, 4),))
    same(clean_call(t, rand(3, 4)), fn(rand(3, 4)))
    out, msgs = warned_call(t, rand(5, 4))
    assert "%x.size(0) > 3 was False" in msgs[0] and "now 5 > 3 is True" in msgs[0]


@pytest.mark.parametrize("cid", ["kl_div", "cross_entropy_probs", "cosine_broadcast",
                                 "pixel_shuffle", "batch_norm_train"])
def test_shape_derived_values_in_functional_follow_a_new_shape(cid):
    r = np.random.default_rng(0)
    ls = F.log_softmax

    def make(b):
        return {
            "kl_div": (lambda x, y: F.kl_div(x, y, reduction="batchmean"),
                       (ls(rand(b, 4, seed=b), 1), F.softmax(rand(b, 4, seed=b + 9), 1))),
            "cross_entropy_probs": (lambda x, y: F.cross_entropy(x, y),
                                    (rand(b, 5, seed=b), F.softmax(rand(b, 5, seed=b + 9), 1))),
            "cosine_broadcast": (lambda x, y: F.cosine_similarity(x, y, 1),
                                 (rand(b, 5, seed=b), rand(1, 5, seed=b + 9))),
            # a new height and width with the traced element count
            "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2),
                              (rand(1, 8, 2, 3, seed=b),) if b == 2 else
                              (rand(1, 8, 3, 2, seed=b),)),
            "batch_norm_train": (lambda x, m, v: F.batch_norm(x, m, v, training=True),
                                 (rand(b, 3, 2, seed=b), rand(3, seed=b + 9),
                                  ember.tensor(r.random(3).astype(np.float32) + 0.5))),
        }[cid]
    fn, ex = make(2)
    t = jit.trace(fn, tuple(a.clone() for a in ex))
    for b in (3, 6):
        _, args = make(b)
        mine, theirs = [a.clone() for a in args], [a.clone() for a in args]
        same(clean_call(t, *mine), fn(*theirs))
        for a, e in zip(mine, theirs):  # running statistics updated once, as eager
            same(a, e)


def test_optimized_and_nested_traces_keep_the_guards():
    t = jit.trace(lambda x: x * (1.0 / math.sqrt(x.size(1))), (rand(2, 8),))
    opt = jit.optimize(t)
    assert opt.shape_guards is t.shape_guards
    with pytest.warns(jit.TracerWarning, match="was 8"):
        jit.optimize(jit.trace(lambda x: x * (1.0 / math.sqrt(x.size(1))),
                               (rand(2, 8),)))(rand(2, 4))
    # a trace of a function whose own trace froze the scale warns when it is called anew
    for inner in (t, opt):
        outer = jit.trace(lambda x: inner(x) + 1, (rand(2, 8),))
        clean_call(outer, rand(3, 8))
        with pytest.warns(jit.TracerWarning, match="was 8"):
            outer(rand(2, 4))


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def test_every_test_model_is_silent_and_right_at_new_batch_sizes():
    from tests.jit.models import MODELS, example
    for name in sorted(MODELS):
        model = MODELS[name]().eval()
        t = jit.trace(model, (example(model),))
        for batch in (1, 5):
            x = example(model, batch, seed=7)
            with ember.no_grad():
                ref = model(x)
                got = clean_call(t, x)
            for a, b in zip(_flat(got), _flat(ref)):
                np.testing.assert_allclose(a._data, b._data, rtol=1e-4, atol=1e-5,
                                           err_msg=f"{name} at batch {batch}")


@pytest.mark.parametrize("optimized", [False, True])
def test_saved_traces_keep_their_guards(tmp_path, optimized):
    m = nn.Linear(8, 8)

    def fn(x):
        h = m(x)  # the guard is read from a value computed through the parameters
        return h * (1.0 / math.sqrt(h.size(1)))
    t = jit.trace(fn, (rand(2, 5, 8),))
    if optimized:
        t = jit.optimize(t)
    jit.save(t, tmp_path / "t.ejit")
    loaded = jit.load(tmp_path / "t.ejit")
    assert loaded.shape_guards.describe() == t.shape_guards.describe()
    x = rand(3, 5, 8, seed=1)
    with ember.no_grad():
        same(clean_call(loaded, x), fn(x))
    with pytest.warns(jit.TracerWarning, match="was 5"):
        loaded(rand(2, 7, 8))


class Upsample(nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=2)


def test_onnx_export_warns_when_a_dynamic_axis_reaches_a_frozen_size():
    pytest.importorskip("onnx")
    import io
    import ember.onnx
    x = rand(1, 3, 6, 6)
    with pytest.warns(jit.TracerWarning, match="dynamic axes") as rec:
        ember.onnx.export(Upsample(), (x,), io.BytesIO(), input_names=["x"],
                          dynamic_axes={"x": [0, 2, 3]})
    msg = str(rec[0].message)
    assert "F.interpolate(x, scale_factor=2)" in msg and "%x.size(2)" in msg
    # a dynamic batch does not reach the frozen sizes; nor in a conv net or attention
    for model, args, dyn in ((Upsample(), (x,), {"input_0": [0]}),
                             (Flat(), (x,), {"input_0": [0]}),
                             (nn.MultiheadAttention(6, 2, batch_first=True),
                              (rand(2, 5, 6),) * 3,
                              {n: [0, 1] for n in ("input_0", "input_1", "input_2")})):
        names = [f"input_{i}" for i in range(len(args))]
        clean_call(lambda: ember.onnx.export(model, args, io.BytesIO(), input_names=names,
                                             dynamic_axes=dyn))


def test_the_number_of_unbind_outputs_is_guarded():
    gru = nn.GRU(4, 6).eval()  # loops over unbind(x, 0): the trace holds the sequence length
    t = jit.trace(gru, (rand(5, 2, 4),))
    with ember.no_grad():
        same(clean_call(t, rand(5, 3, 4, seed=1))[0], gru(rand(5, 3, 4, seed=1))[0])
    fn = lambda x: ember.cat(x.split(2, 1)[::-1], 1)  # noqa: E731
    split = jit.trace(fn, (rand(2, 6),))
    same(clean_call(split, rand(3, 5, seed=2)), fn(rand(3, 5, seed=2)))  # still 3 pieces
    with pytest.warns(jit.TracerWarning, match="the number of outputs of split"):
        with pytest.raises(ValueError):  # having warned, the frozen unpacking does not fit
            split(rand(2, 8))
    # a list of sizes fixes the count itself: nothing to guard
    assert jit.trace(lambda x: x.split([2, 4], 1)[1], (rand(2, 6),)).shape_guards is None
    with pytest.warns(jit.TracerWarning, match="the number of outputs of unbind"):
        try:
            with ember.no_grad():
                t(rand(7, 2, 4))
        except Exception:  # noqa: BLE001 - having warned, the frozen loop may not fit
            pass
