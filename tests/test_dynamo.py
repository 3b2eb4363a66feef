"""ember._dynamo (ember/_dynamo.py), torch._dynamo's user-facing names: the same names as torch's
that ember's compiler answers (reset, explain, config.cache_size_limit, is_compiling,
OptimizedModule, the type of a compiled module), and an unknown name is an AttributeError."""
import pytest

import ember
import ember._dynamo as dynamo

torch = pytest.importorskip("torch")


def test_names_torch_programs_use_exist_in_both():
    import torch._dynamo as td
    for name in ("reset", "explain", "config", "is_compiling", "OptimizedModule"):
        assert hasattr(td, name) and hasattr(dynamo, name), name
    assert isinstance(dynamo.config.cache_size_limit, int)
    assert dynamo.is_compiling() is False
    dynamo.reset()


def test_a_compiled_module_is_an_optimized_module():
    m = ember.compile(ember.nn.Linear(2, 2))
    assert isinstance(m, dynamo.OptimizedModule)


def test_unknown_names_are_attribute_errors():
    with pytest.raises(AttributeError, match="ember._dynamo"):
        dynamo.no_such_thing
