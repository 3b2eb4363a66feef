"""Graph passes: each a function Graph -> Graph (it may edit the graph in place and returns it).

``optimize(traced)`` copies the graph, optionally freezes parameters into constants, then runs
``PIPELINE`` in order. The pointwise-fusion pass (``fuse``) runs on the simplified, folded graph,
in the slot before ``cse``, after ``decompose`` (which splits ``layer_norm`` and bias-``linear``
into spec ops so their pointwise tails can fuse); other passes register with
``register_pass(fn, name, before=...)``.
"""
from ember.jit.passes.batchnorm import fold_batchnorm
from ember.jit.passes.cse import cse
from ember.jit.passes.dce import dce
from ember.jit.passes.decompose import decompose
from ember.jit.passes.dropout import remove_eval_dropout
from ember.jit.passes.fold import constant_fold, freeze
from ember.jit.passes.fuse import fuse
from ember.jit.passes.linear import fold_linear
from ember.jit.passes.simplify import simplify

__all__ = ["dce", "cse", "constant_fold", "freeze", "simplify", "fold_batchnorm",
           "remove_eval_dropout", "fold_linear", "decompose", "fuse", "PIPELINE", "register_pass", "run_passes",
           "optimize"]

# (name, pass) in the order optimize runs them
PIPELINE = [
    ("remove_eval_dropout", remove_eval_dropout),
    ("fold_batchnorm", fold_batchnorm),
    ("simplify", simplify),
    ("fold_linear", fold_linear),  # add(matmul(x, W), b) of constants -> linear(x, t(W), b)
    ("constant_fold", constant_fold),
    ("decompose", decompose),  # layer_norm / linear bias -> spec ops, so their tails fuse
    ("fuse", fuse),  # pointwise fusion groups (runs cse first itself)
    ("cse", cse),
    ("dce", dce),
]


def register_pass(fn, name=None, before=None, after=None):
    """Add ``fn`` to the pipeline (at the end, or before/after the pass named)."""
    name = name or fn.__name__
    names = [n for n, _ in PIPELINE]
    if name in names:
        PIPELINE[names.index(name)] = (name, fn)
        return fn
    if before is not None:
        PIPELINE.insert(names.index(before), (name, fn))
    elif after is not None:
        PIPELINE.insert(names.index(after) + 1, (name, fn))
    else:
        PIPELINE.append((name, fn))
    return fn


def run_passes(graph, passes=None, lint=True):
    """Run ``passes`` (names or functions; default the whole PIPELINE) on ``graph``."""
    table = dict(PIPELINE)
    for p in passes if passes is not None else [n for n, _ in PIPELINE]:
        fn = table[p] if isinstance(p, str) else p
        graph = fn(graph)
        if lint:
            graph.lint()
    return graph


def optimize(traced, freeze_params=True, passes=None):
    """An optimised copy of a traced callable: numerically equal on every input.

    ``freeze_params=True`` (inference) snapshots parameters and buffers into constants so batch
    norm folds into the weights and weight-only arithmetic is precomputed; the result no longer
    sees later parameter updates and has no parameter gradients. ``freeze_params=False`` keeps
    them live (batch norm folding then recomputes the folded weights on each call).
    """
    from ember.jit.traced import TracedFunction, TracedModule
    g = traced.graph.copy()
    state = list(traced.state_tensors())
    if freeze_params and state:
        g = freeze(g, state)
        state = []
    g = run_passes(g, passes)
    if isinstance(traced, TracedModule) and not freeze_params:
        out = TracedModule(traced.module, g, traced._in_spec, traced._out_spec, traced._n_inputs,
                           traced._names, traced.name)
    else:
        out = TracedFunction(g, traced._in_spec, traced._out_spec, traced._n_inputs, state,
                             traced.name)
        out.module = getattr(traced, "module", None)
    out.traced_random = getattr(traced, "traced_random", False)
    out._guards = getattr(traced, "_guards", None)  # the sizes the trace froze, as before
    out.optimized = True
    out.inference_plan = not state  # frozen: inference plans (ember.jit.plan) on fast calls
    return out
