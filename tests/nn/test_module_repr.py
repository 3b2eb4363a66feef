"""print(model) as torch prints it: a ModuleList shows a run of children that print the same
once, as ``(0-1): 2 x Layer(...)`` (nn.TransformerEncoder's layers)."""
import pytest

import ember

torch = pytest.importorskip("torch")


def _build(nn):
    return nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2),
                          nn.Sequential(nn.Linear(2, 3), nn.Tanh()),
                          nn.Sequential(nn.Linear(2, 3), nn.Tanh())])


def test_module_list_repr_matches_torch():
    assert repr(_build(ember.nn)) == repr(_build(torch.nn))
    assert repr(ember.nn.ModuleList()) == repr(torch.nn.ModuleList()) == "ModuleList()"
    one = ember.nn.ModuleList([ember.nn.ReLU()])
    assert repr(one) == repr(torch.nn.ModuleList([torch.nn.ReLU()]))


def test_transformer_encoder_repr_matches_torch():
    e = ember.nn.TransformerEncoder(ember.nn.TransformerEncoderLayer(8, 2, 16), 3,
                                    enable_nested_tensor=False)
    t = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16), 3,
                                    enable_nested_tensor=False)
    assert repr(e) == repr(t)
    assert "(0-2): 3 x TransformerEncoderLayer(" in repr(e)
