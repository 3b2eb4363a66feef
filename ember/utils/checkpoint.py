"""Activation checkpointing, as torch.utils.checkpoint: ``checkpoint(fn, *args)`` keeps only
``fn``'s inputs and outputs alive after the forward; the backward runs ``fn`` again (with the
random state it had, so dropout masks repeat) and differentiates that recomputation.

The forward runs ``fn`` once with autograd on to find every leaf it reads (parameters included,
so ``autograd.grad`` with respect to a parameter used inside works, as torch's non-reentrant
version), then drops that graph. ``use_reentrant`` is accepted and both values behave this way.
"""
from ember import random as _random
from ember.autograd.function import Function
from ember.autograd.grad_mode import enable_grad
from ember.autograd.node import graph_leaves
from ember.errors import EmberTypeError, EmberValueError
from ember.tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


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


class _Run:
    """One checkpointed call: the function, its arguments and the random state to replay."""

    def __init__(self, function, args, kwargs, preserve_rng_state):
        self.function, self.args, self.kwargs = function, list(args), kwargs
        self.rng_state = _random.get_rng_state() if preserve_rng_state else None

    def call(self, args):
        out = self.function(*args, **self.kwargs)
        self.single = isinstance(out, Tensor)
        outs = (out,) if self.single else out
        if not isinstance(outs, tuple) or not all(isinstance(o, Tensor) for o in outs):
            raise EmberTypeError(f"checkpoint: the function must return a tensor or a tuple of "
                                 f"tensors, got {type(out).__name__}")
        return outs


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, recomputed during backward instead of keeping its
    intermediate tensors (torch.utils.checkpoint.checkpoint)."""
    if context_fn is not None:
        raise EmberValueError("checkpoint: context_fn is not supported (ember has no "
                              "TorchDispatchMode contexts)")
    if not callable(function):
        raise EmberTypeError(f"checkpoint: expected a callable, got {type(function).__name__}")
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
    if not any(t.requires_grad for t in tensors + leaves):
        return run.outputs[0] if run.single else run.outputs
    out = _Checkpoint.apply(run, len(tensors), *tensors, *leaves)
    return out[0] if run.single and isinstance(out, tuple) else out


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (a Sequential or a list of modules) in ``segments`` checkpointed
    chunks; the last chunk runs normally, as torch."""
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)
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
