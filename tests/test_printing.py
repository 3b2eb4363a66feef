"""set_printoptions / get_printoptions as torch's: precision, threshold, edgeitems, sci_mode and
the profiles change how tensors print; options are restored after each test."""
import pytest

import ember
import ember._printing

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _restore():
    before_e, before_t = ember._printing.get_printoptions(), torch._tensor_str.PRINT_OPTS.__dict__.copy()
    yield
    ember.set_printoptions(**{k: v for k, v in before_e.items()})
    torch.set_printoptions(**before_t)


@pytest.mark.parametrize("opts,values", [
    (dict(precision=2), [1.23456, 2.0]),
    (dict(threshold=5), list(range(10))),
    (dict(threshold=5, edgeitems=2), list(range(10))),
    (dict(sci_mode=True), [1.5, 200.0]),
    (dict(profile="full"), [float(i % 7) for i in range(1200)]),
    (dict(profile="short"), [1.23456, 2.0]),
])
def test_printoptions_print_as_torch(opts, values):
    ember.set_printoptions(**opts)
    torch.set_printoptions(**opts)
    e, t = repr(ember.tensor(values, dtype=ember.float32)), repr(torch.tensor(values,
                                                                          dtype=torch.float32))
    assert e.replace(" ", "") == t.replace(" ", "")
    assert ember._printing.get_printoptions() == torch._tensor_str.PRINT_OPTS.__dict__


def test_bad_profile_is_an_error():
    with pytest.raises(ember.EmberError, match="profile must be one of"):
        ember.set_printoptions(profile="long")
