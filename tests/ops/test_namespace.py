"""The public namespace and Tensor's methods built by ember/ops/namespace.py: every table entry is
installed, torch's aliases are the ops they name, and every hand-written public function and
method raises ember's errors naming it (ember.errors.public) while a spec op's generated entry
and the hot ``view`` stay unwrapped."""
import types

import pytest

import ember
from ember.autograd.dispatch import named_by_dispatch
from ember.errors import EmberError
from ember.ops import namespace


def _wrapped(fn):
    return hasattr(fn, "__wrapped_public__")


def test_every_family_entry_point_is_in_ember_and_wrapped():
    for family, names in namespace.FUNCTIONS.items():
        for name in names:
            fn = getattr(ember, name)
            assert _wrapped(fn) or named_by_dispatch(name, fn), (family.__name__, name)
    with pytest.raises(EmberError, match="^native_batch_norm: "):   # named as torch's op
        ember.native_batch_norm(ember.ones(2, 3), ember.ones(4), None, None, None, True, 0.1, 1e-5)
    assert ember.FloatTensor is namespace.tensor_types.LEGACY["FloatTensor"]


def test_every_public_function_and_method_names_itself_in_its_errors():
    bad = [n for n, f in vars(ember).items() if n[0] != "_" and isinstance(f, types.FunctionType)
           and not _wrapped(f) and not named_by_dispatch(n, f)]
    assert not bad, bad
    bad = [n for n, f in vars(ember.Tensor).items()
           if (n[0] != "_" or n[:2] == "__" == n[-2:]) and isinstance(f, types.FunctionType)
           and f.__module__ != ember.Tensor.__module__ and not _wrapped(f)
           and not named_by_dispatch(n, f) and n not in namespace.NOT_WRAPPED]
    assert not bad, bad
    assert not _wrapped(ember.Tensor.view)   # hot: raises only ember's errors already
    with pytest.raises(EmberError, match="^max: "):
        ember.ones(2, 3).max(dim=5)
    with pytest.raises(EmberError, match="atleast_2d"):
        ember.atleast_2d(ember.ones(2), "x")


def test_methods_properties_and_aliases_are_installed():
    T = ember.Tensor
    for name in list(namespace.METHODS) + list(namespace.LATE_METHODS) + list(
            namespace.SORTING_METHODS):
        assert callable(getattr(T, name)), name
    for name in namespace.PROPERTIES:
        assert isinstance(vars(T)[name], property), name
    x = ember.tensor([0.25, -0.5])
    for alias, target in namespace.ALIASES.items():
        assert getattr(ember, alias) is not None and hasattr(T, alias), alias
    assert ember.arcsin(x).tolist() == ember.asin(x).tolist() == x.arcsin().tolist()
    y = x.clone()
    y.arcsin_()
    assert y.tolist() == ember.asin(x).tolist()
    for name in namespace.INPLACE_COMPOSITES:
        assert callable(getattr(T, name + "_")), name
    z = ember.tensor([2.0, 3.0])
    assert z.square_().tolist() == [4.0, 9.0] and z.tolist() == [4.0, 9.0]
    assert ember.slogdet is namespace.linalg.TOPLEVEL["slogdet"] and not hasattr(T, "lu_unpack")


def test_only_the_namespace_module_installs_on_tensor():
    import os
    import re
    root = os.path.dirname(ember.__file__)
    install = re.compile(r"setattr\((Tensor|tensor_cls)\b|^\s*(Tensor|tensor_cls)\.\w+\s*=", re.M)
    bad = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
           if f.endswith(".py") and os.path.join(d, f) != namespace.__file__
           and install.search(open(os.path.join(d, f)).read())]
    assert not bad, f"Tensor methods installed outside ember/ops/namespace.py: {bad}"
