"""TorchScript's names for eager model code (torch.jit.script, is_scripting, ignore, ...): the
same results as torch's outside a TorchScript compile."""
from typing import Dict, List, Optional, Tuple, Union

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

_CASES = [([1, 2], List[int]), ([1, "a"], List[int]), ({"a": 1}, Dict[str, int]),
          ({"a": "b"}, Dict[str, int]), (None, Optional[int]), (3, Optional[int]),
          ("x", Optional[int]), ((1, "a"), Tuple[int, str]), ((1, 2), Tuple[int, str]),
          ((1, 2, 3), Tuple[int, ...]), (1.5, Union[int, float]), ([[1], [2]], List[List[int]]),
          (ember.ones(1), ember.Tensor), ([], List[str])]


@pytest.mark.parametrize("obj, target", _CASES, ids=str)
def test_isinstance_checks_element_types_as_torch(obj, target):
    tobj, ttarget = obj, target
    if target is ember.Tensor:
        tobj, ttarget = torch.ones(1), torch.Tensor
    assert ember.jit.isinstance(obj, target) == torch.jit.isinstance(tobj, ttarget)


def test_model_code_using_torchscript_names_runs_as_torch():
    outs = []
    for m in (torch, ember):
        class Block(m.nn.Module):
            scale: m.jit.Final[float] = 2.0

            def __init__(self):
                super().__init__()
                self.lin = m.nn.Linear(3, 2).double()
                with m.no_grad():
                    self.lin.weight.copy_(m.tensor(np.arange(6.0).reshape(2, 3) / 10))
                    self.lin.bias.zero_()

            @m.jit.ignore
            def describe(self):
                return "block"

            @m.jit.unused
            def debug(self, x):
                return x

            @m.jit.export
            def double(self, x):
                return x * self.scale

            def forward(self, x):
                if not m.jit.is_scripting():
                    x = x + 1
                h = m.jit.annotate(List[m.Tensor], [])
                h.append(self.lin(x))
                fut = m.jit.fork(self.double, h[0])
                return m.jit.wait(fut)

        blk = Block()
        x = m.tensor(np.linspace(-1, 1, 6).reshape(2, 3))
        eager = blk(x)
        outs.append((eager.detach().numpy(), blk.describe(), m.jit.is_scripting()))
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-12)
    assert outs[1][1:] == outs[0][1:] == ("block", False)


def test_script_returns_the_module_itself_which_computes_the_same():
    lin = ember.nn.Linear(3, 2)
    x = ember.randn(4, 3)
    scripted = ember.jit.script(lin)
    assert ember.equal(scripted(x), lin(x))
    fn = ember.jit.script(lambda a: a * 2)
    assert ember.equal(fn(x), x * 2)


def test_is_tracing_is_true_inside_jit_trace_only():
    seen = []

    def f(x):
        seen.append(ember.jit.is_tracing())
        return x * 2
    f(ember.ones(2))
    ember.jit.trace(f, (ember.ones(2),))
    ember.compile(f)(ember.ones(2))
    assert seen[:2] == [False, True] and not any(seen[2:])
