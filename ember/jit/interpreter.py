"""A node-by-node interpreter for a Graph (``run_forward``), freeing values at their last use.

The generated code (``ember.jit.codegen``) is the fast way to run a graph; this interpreter is the
reference: it walks ``graph.nodes``, evaluates each with the same per-kind callables, and drops
every intermediate from its environment right after the last node that reads it (``free=False``
keeps them all, for comparison). ``mode='tensor'`` runs through dispatch (autograd records when
grad mode is on); ``mode='array'`` runs the kernels on ndarrays.
"""

import numpy as np

from ember.jit.codegen import _function_callable, _tensor_sym, node_callable, resolve_class
from ember.jit.ir import ArrayRef, GenRef, SymRef, Value

__all__ = ["Interpreter", "run_forward"]


class Interpreter:
    """Run ``graph`` on new formals."""

    def __init__(self, graph, mode="tensor"):
        self.graph = graph
        self.mode = mode
        self._fns = {}
        last = {}
        for i, n in enumerate(graph.nodes):
            for v in n.inputs:
                last[id(v)] = i
        outs = {id(o) for o in graph.outputs}
        self.frees = [[] for _ in graph.nodes]
        for v in graph.values():
            if id(v) in outs:
                continue
            if id(v) in last:
                self.frees[last[id(v)]].append(id(v))
            elif v.node is not None:
                self.frees[graph.index(v.node)].append(id(v))
        self.peak_live = 0

    def _fn(self, node):
        if node.kind == "fusion_group":
            from ember.jit.fused import fused_group
            fg = fused_group(node.attrs["graph"])
            return fg.run_arrays if self.mode == "array" else fg.run_tensors
        key = node.kind if node.kind != "python_function" else node.attrs["cls"]
        f = self._fns.get(key)
        if f is None:
            if node.kind == "python_function":
                f = _function_callable(resolve_class(node.attrs["cls"]), self.mode)
            else:
                f = node_callable(node.kind, self.mode)
            self._fns[key] = f
        return f

    def _resolve(self, x, env):
        if isinstance(x, Value):
            return env[id(x)]
        if isinstance(x, SymRef):
            r = env[id(x.value)]
            return int(r) if self.mode == "array" else _tensor_sym(r)
        if isinstance(x, GenRef):
            from ember.random import Generator, default_generator
            if x.name == "default":
                return default_generator
            g = self.graph.generators.get(x.name)
            if g is None:
                g = self.graph.generators[x.name] = Generator()
            return g
        if isinstance(x, ArrayRef):
            return self.graph.constants[x.name]
        if isinstance(x, list):
            return [self._resolve(y, env) for y in x]
        if isinstance(x, tuple):
            return tuple(self._resolve(y, env) for y in x)
        if isinstance(x, slice):
            return slice(self._resolve(x.start, env), self._resolve(x.stop, env),
                         self._resolve(x.step, env))
        return x

    def run(self, *formals, free=True):
        """Evaluate; returns the tuple of outputs."""
        from ember.autograd._generated.records import OPS
        from ember.tensor import Tensor
        g = self.graph
        if len(formals) != len(g.inputs):
            raise TypeError(f"graph takes {len(g.inputs)} formals, got {len(formals)}")
        env = {id(v): x for v, x in zip(g.inputs, formals)}
        live = 0
        for i, n in enumerate(g.nodes):
            if n.kind == "constant":
                a = g.constants[n.attrs["name"]]
                res = (a if self.mode == "array" else Tensor._make(a),)
            else:
                args = [self._resolve(a, env) for a in n.args]
                op = OPS.get(n.kind)
                if op is not None:
                    args += [self._resolve(n.attrs[k], env) for k in op.const_names
                             if k in n.attrs]
                out = self._fn(n)(*args)
                if n.kind in ("python_function", "fusion_group") or (op is not None and op.multi):
                    res = tuple(out)
                else:
                    res = (out,)
            for o, r in zip(n.outputs, res):
                if self.mode == "array" and not isinstance(r, np.ndarray):
                    r = np.asarray(r)
                env[id(o)] = r
            if free:
                for k in self.frees[i]:
                    del env[k]
            live = max(live, len(env))
        self.peak_live = live
        return tuple(env[id(o)] for o in g.outputs)


def run_forward(graph, *formals, mode="tensor", free=True):
    """Run ``graph`` once with the interpreter."""
    return Interpreter(graph, mode).run(*formals, free=free)


