"""Named result tuples (ember/return_types.py) as torch.return_types: every one torch has by that
name has the same fields in the same order, unpacks like a tuple, and ops return them."""
import pytest

import ember
from ember import return_types as E

torch = pytest.importorskip("torch")

NAMES = [n for n in dir(E) if not n.startswith("_") and isinstance(getattr(E, n), type)
         and issubclass(getattr(E, n), tuple)]


def test_there_are_result_tuples():
    assert {"sort", "topk", "aminmax", "slogdet"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_fields_are_torchs(name):
    t = getattr(torch.return_types, name, None)
    if t is None:
        pytest.skip(f"torch.return_types has no {name}")
    assert getattr(E, name)._fields == t.__match_args__


def test_ops_return_them_and_they_unpack():
    x = ember.tensor([3.0, 1.0, 2.0])
    r = ember.sort(x)
    assert type(r) is E.sort and r.values.tolist() == [1.0, 2.0, 3.0]
    values, indices = r
    assert indices.tolist() == [1, 2, 0] and r[1] is r.indices
    mn, mx = ember.aminmax(x)
    assert (float(mn), float(mx)) == (1.0, 3.0) and type(ember.aminmax(x)) is E.aminmax


def test_max_min_and_histogram_return_them():
    x = ember.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    assert type(x.max(dim=1)) is E.max and type(ember.min(x, 1)) is E.min
    assert type(ember.histogram(x.flatten(), bins=3)) is E.histogram
    assert ember.max(x, 1).indices.tolist() == [0, 1]


def test_they_print_as_torchs_one_field_per_line():
    x = [[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]]
    for op, args in (("max", (1,)), ("sort", (1,)), ("topk", (2,)), ("aminmax", ())):
        ours = repr(getattr(ember.tensor(x), op)(*args))
        theirs = repr(getattr(torch.tensor(x), op)(*args))
        assert ours == theirs.replace("torch.return_types.", "ember.return_types."), (ours, theirs)
