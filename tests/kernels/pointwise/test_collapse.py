"""collapse_dims and iteration_order against brute-force indexing."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ember.kernels.pointwise import collapse_dims, iteration_order


def _walk(shape, strides):
    """Offsets of every operand, in C order over ``shape``."""
    return [tuple(sum(i * s for i, s in zip(idx, st)) for st in strides)
            for idx in itertools.product(*(range(n) for n in shape))]


@st.composite
def layouts(draw):
    ndim = draw(st.integers(0, 5))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    n_ops = draw(st.integers(1, 3))
    strides = []
    for _ in range(n_ops):
        kind = draw(st.sampled_from(["contiguous", "random", "broadcast", "reversed"]))
        if kind == "random":
            st_ = tuple(draw(st.lists(st.integers(-12, 12), min_size=ndim, max_size=ndim)))
        else:
            st_, acc = [], 1
            for n in reversed(shape):
                st_.insert(0, acc)
                acc *= max(n, 1)
            if kind == "broadcast":
                st_ = [0 if draw(st.booleans()) else s for s in st_]
            elif kind == "reversed":
                st_ = [-s if draw(st.booleans()) else s for s in st_]
            st_ = tuple(st_)
        strides.append(st_)
    return shape, strides


@settings(max_examples=400, deadline=None)
@given(layouts())
def test_collapse_preserves_the_walk(layout):
    shape, strides = layout
    collapsed = collapse_dims(shape, *strides)
    assert len(collapsed.strides) == len(strides)
    assert all(len(s) == len(collapsed.shape) for s in collapsed.strides)
    assert 1 not in collapsed.shape
    assert _walk(collapsed.shape, collapsed.strides) == _walk(shape, strides)
    assert collapsed.excluded is None


@settings(max_examples=300, deadline=None)
@given(layouts(), st.data())
def test_collapse_keeps_the_excluded_dim(layout, data):
    shape, strides = layout
    if not shape:
        return
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    collapsed = collapse_dims(shape, *strides, exclude=d)
    e = collapsed.excluded
    assert collapsed.shape[e] == shape[d]
    if 0 not in shape:
        assert [s[e] for s in collapsed.strides] == [s[d] for s in strides]
        assert _walk(collapsed.shape, collapsed.strides) == _walk(shape, strides)
        # indices before / after the excluded dim walk the dims before / after it
        before = collapsed.shape[:e]
        assert int(np.prod(before)) == int(np.prod(shape[:d % len(shape)]))


def test_collapse_examples():
    assert collapse_dims((2, 3, 4), (12, 4, 1)) == ((24,), ((1,),), None)
    assert collapse_dims((2, 3, 4), (12, 4, 1), (0, 4, 1)) == ((2, 12), ((12, 1), (0, 1)), None)
    assert collapse_dims((2, 3), (-3, -1)) == ((6,), ((-1,),), None)
    assert collapse_dims((), ()) == ((), ((),), None)
    assert collapse_dims((1, 1), (5, 7)) == ((), ((),), None)
    assert collapse_dims((3, 0, 2), (2, 2, 1)) == ((0,), ((0,),), None)
    assert collapse_dims((2, 1, 3), (3, 3, 1), exclude=1) == ((2, 1, 3), ((3, 3, 1),), 1)
    assert collapse_dims((2, 3, 4), (12, 4, 1), exclude=-1) == ((6, 4), ((4, 1),), 1)


def test_collapse_rejects_bad_arguments():
    with pytest.raises(ValueError, match="strides"):
        collapse_dims((2, 3), (1,))
    with pytest.raises(ValueError, match="exclude"):
        collapse_dims((2, 3), (3, 1), exclude=2)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_iteration_order_makes_permuted_arrays_contiguous(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    base = np.empty([shape[p] for p in perm], np.float32)
    a = base.transpose(np.argsort(perm))  # same shape as ``shape``, memory order ``perm``
    strides = tuple(s // 4 if n > 1 else 0 for s, n in zip(a.strides, a.shape))
    order = iteration_order(a.shape, strides)
    collapsed = collapse_dims([a.shape[d] for d in order], [strides[d] for d in order])
    assert len(collapsed.shape) <= 1
    assert sorted(order) == list(range(len(shape)))
