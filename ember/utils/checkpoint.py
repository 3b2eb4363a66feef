"""Activation checkpointing, as torch.utils.checkpoint: ``checkpoint(fn, *args)`` keeps only
``fn``'s inputs and outputs alive after the forward; the backward runs ``fn`` again (with the
random state it had, so dropout masks repeat) and differentiates that recomputation.

The forward runs ``fn`` once with autograd on to find every leaf it reads (parameters included,
so ``autograd.grad`` with respect to a parameter used inside works, as torch's non-reentrant
version), then drops that graph. Both values of ``use_reentrant`` compute this way; as torch's,
the reentrant one takes no keyword arguments for ``fn``, and leaving it out warns.
"""
import warnings

from ember import random as _random
from ember.autograd.function import Function
from ember.autograd.grad_mode import enable_grad, is_grad_enabled
from ember.autograd.node import graph_leaves
from ember.errors import EmberTypeError, EmberValueError
from ember.tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]

_USE_REENTRANT_WARNING = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting "
    "in PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception. "
    "use_reentrant=False is recommended, but if you need to preserve the current default "
    "behavior, you can pass use_reentrant=True. Refer to docs for more details on the "
    "differences between the two variants.")


def _detached(args):
    return [a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a
            for a in args]


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, run, n_args, *tensors):
        ctx.run, ctx.n_args = run, n_args
        ctx.inputs = tensors[:n_args]
        ctx.leaves = tensors[n_args:]
        return run.outputs

    @staticmethod
    def backward(ctx, *grads):
        run = ctx.run
        state = _random.get_rng_state()
        _random.set_rng_state(run.rng_state)
        try:
            with enable_grad():
                args = _detached(run.args)
                outs = run.call(args)
        finally:
            _random.set_rng_state(state)
        from ember.autograd import grad as autograd_grad
        wrt = [a for a in args if isinstance(a, Tensor) and a.requires_grad] + list(ctx.leaves)
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
        got = autograd_grad([o for o, _ in pairs], wrt, [g for _, g in pairs],
                            allow_unused=True) if pairs and wrt else [None] * len(wrt)
        it = iter(got)
        by_arg = [next(it) if isinstance(a, Tensor) and a.requires_grad else None for a in args]
        return (None, None) + tuple(g for a, g in zip(args, by_arg) if isinstance(a, Tensor)) \
            + tuple(it)


def _skeleton(obj, tensors):
    """``obj`` with every tensor inside its tuples, lists and dicts replaced by ``_SLOT``; the
    tensors are appended to ``tensors`` in order."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return _SLOT
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_skeleton(o, tensors) for o in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_skeleton(o, tensors) for o in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _skeleton(v, tensors)) for k, v in obj.items())
    return obj


def _filled(skeleton, tensors):
    """``skeleton`` with its slots filled from the iterator ``tensors``."""
    if skeleton is _SLOT:
        return next(tensors)
    if isinstance(skeleton, tuple) and hasattr(skeleton, "_fields"):
        return type(skeleton)(*(_filled(o, tensors) for o in skeleton))
    if isinstance(skeleton, (tuple, list)):
        return type(skeleton)(_filled(o, tensors) for o in skeleton)
    if isinstance(skeleton, dict):
        return type(skeleton)((k, _filled(v, tensors)) for k, v in skeleton.items())
    return skeleton


_SLOT = object()


class _Run:
    """One checkpointed call: the function, its arguments and the random state to replay."""

    def __init__(self, function, args, kwargs, preserve_rng_state):
        self.function, self.args, self.kwargs = function, list(args), kwargs
        self.rng_state = _random.get_rng_state() if preserve_rng_state else None

    def call(self, args):
        """The tensors of ``function(*args)``'s output, found through its tuples, lists and
        dicts (the output's shape, non-tensor values included, is kept in ``skeleton``)."""
        tensors = []
        self.skeleton = _skeleton(self.function(*args, **self.kwargs), tensors)
        return tuple(tensors)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, recomputed during backward instead of keeping its
    intermediate tensors (torch.utils.checkpoint.checkpoint). As torch, ``use_reentrant``
    left out warns and means True, which takes no ``kwargs`` (ValueError)."""
    if context_fn is not None:
        raise EmberValueError("checkpoint: context_fn is not supported (ember has no "
                              "TorchDispatchMode contexts)")
    if not callable(function):
        raise EmberTypeError(f"checkpoint: expected a callable, got {type(function).__name__}")
    if use_reentrant is None:
        warnings.warn(_USE_REENTRANT_WARNING, stacklevel=2)
        use_reentrant = True
    if kwargs and use_reentrant:
        raise EmberValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if not is_grad_enabled():   # no_grad / inference_mode: nothing to recompute, as torch
        return function(*args, **kwargs)
    run = _Run(function, args, kwargs, preserve_rng_state)
    if run.rng_state is None:
        run.rng_state = _random.get_rng_state()
    with enable_grad():
        probe_args = _detached(args)
        outs = run.call(probe_args)
    probes = {id(a) for a in probe_args if isinstance(a, Tensor)}
    leaves = [t for t in graph_leaves(outs) if id(t) not in probes]
    run.outputs = tuple(o.detach() for o in outs)
    del outs, probe_args
    tensors = [a for a in args if isinstance(a, Tensor)]
    if not run.outputs or not any(t.requires_grad for t in tensors + leaves):
        return _filled(run.skeleton, iter(run.outputs))
    out = _Checkpoint.apply(run, len(tensors), *tensors, *leaves)
    return _filled(run.skeleton, iter(out if isinstance(out, tuple) else (out,)))


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (a Sequential or a list of modules) in ``segments`` checkpointed
    chunks; the last chunk runs normally, as torch."""
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)
    if use_reentrant is None:
        warnings.warn(_USE_REENTRANT_WARNING, stacklevel=2)
        use_reentrant = True
    if not isinstance(segments, int) or segments < 1:
        raise EmberValueError(f"checkpoint_sequential: segments must be a positive int, got "
                              f"{segments!r}")
    size = len(functions) // segments

    def run_span(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run_span(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run_span(end + 1, len(functions) - 1)(input)
