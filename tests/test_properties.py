"""Property tests against NumPy: broadcasting, reshape/permute, and indexing."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember

settings.register_profile("ember", max_examples=60, deadline=None)
settings.load_profile("ember")

floats = st.floats(-100, 100, width=32)


@given(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4), st.data())
def test_broadcasting_binary_ops_match_numpy(shapes, data):
    a = data.draw(hnp.arrays(np.float32, shapes.input_shapes[0], elements=floats))
    b = data.draw(hnp.arrays(np.float32, shapes.input_shapes[1], elements=floats))
    ta, tb = ember.from_numpy(a), ember.from_numpy(b)
    for op, ref in ((ember.add, np.add), (ember.mul, np.multiply), (ember.maximum, np.maximum),
                    (ember.sub, np.subtract)):
        out = op(ta, tb)
        assert out.shape == shapes.result_shape
        np.testing.assert_array_equal(out.numpy(), ref(a, b))


@given(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3), st.data())
def test_broadcast_gradients_sum_back_to_input_shape(shapes, data):
    a = data.draw(hnp.arrays(np.float64, shapes.input_shapes[0], elements=st.floats(-3, 3)))
    b = data.draw(hnp.arrays(np.float64, shapes.input_shapes[1], elements=st.floats(-3, 3)))
    ta = ember.from_numpy(a).requires_grad_()
    tb = ember.from_numpy(b).requires_grad_()
    (ta * tb).sum().backward()
    full = np.broadcast_shapes(a.shape, b.shape)
    ga = np.broadcast_to(b, full).copy()
    gb = np.broadcast_to(a, full).copy()

    def sum_to(g, shape):
        lead = g.ndim - len(shape)
        g = g.sum(axis=tuple(range(lead)))
        axes = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
        return g.sum(axis=axes, keepdims=True).reshape(shape)
    np.testing.assert_allclose(ta.grad.numpy(), sum_to(ga, a.shape))
    np.testing.assert_allclose(tb.grad.numpy(), sum_to(gb, b.shape))


@given(hnp.array_shapes(min_dims=1, max_dims=4, max_side=4), st.data())
def test_reshape_and_permute_match_numpy(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    t = ember.from_numpy(a)
    perm = data.draw(st.permutations(range(len(shape))))
    np.testing.assert_array_equal(t.permute(*perm).numpy(), a.transpose(perm))
    np.testing.assert_array_equal(t.reshape(-1).numpy(), a.reshape(-1))
    np.testing.assert_array_equal(t.permute(*perm).reshape(-1).numpy(),
                                  a.transpose(perm).reshape(-1))
    np.testing.assert_array_equal(t.flatten().numpy(), a.flatten())


@st.composite
def basic_index(draw, shape):
    key = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "full", "none"]))
        if kind == "int" and n > 0:
            key.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            step = draw(st.one_of(st.none(), st.integers(1, 3)))
            key.append(slice(start, stop, step))
        elif kind == "none":
            key += [None, slice(None)]  # None adds an axis without consuming one
        else:
            key.append(slice(None))
    if draw(st.booleans()) and key:
        key[draw(st.integers(0, len(key) - 1))] = Ellipsis
    return tuple(key)


@given(hnp.array_shapes(min_dims=1, max_dims=3, max_side=5), st.data())
def test_basic_and_advanced_indexing_match_numpy(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    t = ember.from_numpy(a.copy())
    key = data.draw(basic_index(shape))
    np.testing.assert_array_equal(t[key].numpy(), a[key])
    idx = data.draw(hnp.arrays(np.int64, st.integers(0, 4), elements=st.integers(0, shape[0] - 1)))
    np.testing.assert_array_equal(t[ember.from_numpy(idx)].numpy(), a[idx])
    mask = data.draw(hnp.arrays(np.bool_, shape))
    np.testing.assert_array_equal(t[ember.from_numpy(mask)].numpy(), a[mask])
    tg = ember.from_numpy(a.copy()).requires_grad_()
    tg[key].sum().backward()
    ref = np.zeros_like(a)
    np.add.at(ref, key, 1.0) if a[key].size else None
    np.testing.assert_array_equal(tg.grad.numpy(), ref)
