"""ember's operators, one module per family: the composites (ops written in other spec ops, named
by ``composite:`` in the spec, ``ember/ops/spec/<family>.yaml``) and torch's entry points of that
family (overloaded signatures, named results, Tensor methods that are not one spec op).
``namespace.build`` puts them into ``ember`` and onto ``Tensor``; kernels are in
``ember.kernels``, the autograd machinery in ``ember.autograd``."""
