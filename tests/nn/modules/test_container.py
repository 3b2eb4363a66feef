"""The containers (ember/nn/modules/container.py): Sequential, ModuleList and ModuleDict surgery
(replace, delete, insert, append, extend, slice, repeat, pop) gives torch's order and names."""
import pytest

import ember
import ember.nn as nn

torch = pytest.importorskip("torch")


def test_sequential_surgery_as_torch():
    for lib in (torch.nn, nn):
        s = lib.Sequential(lib.ReLU(), lib.Tanh(), lib.Sigmoid())
        setattr(s, "1", lib.ELU())  # replaced in place, not moved to the end
        s[2] = lib.SELU()
        names = [type(m).__name__ for m in s]
        assert names == ["ReLU", "ELU", "SELU"] and list(s._modules) == ["0", "1", "2"]
        del s[0]
        s.insert(1, lib.GELU())
        s.append(lib.Tanh())
        s.extend([lib.ReLU()])
        assert [type(m).__name__ for m in s] == ["ELU", "GELU", "SELU", "Tanh", "ReLU"]
        assert list(s[1:3]._modules) == ["1", "2"] and len(s * 2) == 10
        assert type(s.pop(0)).__name__ == "ELU" and list(s._modules) == ["0", "1", "2", "3"]
        lin = lib.Linear(2, 2)
        lin.weight = lib.Parameter(lin.weight.detach() * 0)
        assert list(dict(lin.named_parameters())) == ["weight", "bias"]
        ml = lib.ModuleList([lib.ReLU(), lib.Tanh()])
        ml.insert(0, lib.ELU())
        del ml[1]
        assert [type(m).__name__ for m in ml + lib.ModuleList([lib.ReLU()])] == \
            ["ELU", "Tanh", "ReLU"]
        md = lib.ModuleDict({"a": lib.ReLU()})
        md["b"] = lib.Tanh()
        assert list(md) == ["a", "b"] and type(md.pop("a")).__name__ == "ReLU"



def _param_containers(lib):
    P = lib.nn.Parameter
    return [
        lib.nn.ParameterDict({"a": P(lib.ones(3)), "b": P(lib.ones(2, 2, dtype=lib.float64))}),
        lib.nn.ParameterDict({"x": P(lib.ones(()))}), lib.nn.ParameterDict(),
        lib.nn.ParameterList([P(lib.ones(3))]), lib.nn.ParameterList(),
        lib.nn.ParameterList([P(lib.ones(3)), P(lib.ones(2, 2)), lib.zeros(0, dtype=lib.float16)]),
        lib.nn.Sequential(lib.nn.Linear(1, 2), lib.nn.ParameterList([P(lib.ones(1))]),
                          lib.nn.ParameterDict({"w": P(lib.ones(2, 3))})),
    ]


@pytest.mark.parametrize("i", range(7))
def test_parameter_container_repr_as_torch(i):
    """One ``(key): Parameter containing: [type of size AxB]`` line per entry, as torch (the
    dict names the tensor type as Tensor.type() does; the list the dtype)."""
    e, t = _param_containers(ember)[i], _param_containers(torch)[i]
    assert repr(e).replace("ember.", "torch.") == repr(t)


def test_parameter_dict_names_tensor_type_as_tensor_type():
    d = nn.ParameterDict({"a": nn.Parameter(ember.ones(3))})
    assert repr(d) == ("ParameterDict(  (a): Parameter containing: "
                       f"[{d['a'].type()} of size 3])")
