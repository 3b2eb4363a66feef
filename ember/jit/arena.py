"""The programs of one compiled function, their memory plans sharing one arena.

``ember.compile`` runs a compiled function as array-mode programs: the forward and the backward
of a compiled backward (``CompiledAutograd``), or one whole training step (``WholeStep``). Each
program gets a memory plan (``ember.jit.passes.memory``: its GEMM, ``linear``, arithmetic and
fusion-group temporaries written into buffers kept across calls). A planned value lives inside
one program call -- nothing a program returns, and so nothing the forward saves for the
backward, is planned -- so the programs of one function never need their buffers at the same
time, and they share one arena: the k-th buffer of a shape and dtype is the same array in every
program, and the arena holds, per shape and dtype, the most buffers any one program needs rather
than their sum.

One call runs in the arena at a time. A call that finds it busy -- another thread running a
program of the same function, or a program called from inside one of them (a hook) -- runs its
program without the plan (compiled on first need), so no two calls write the same buffer.
``MEMORY_PLAN = False`` compiles the programs without plans (comparisons).
"""
import threading

import numpy as np

__all__ = ["MEMORY_PLAN", "Program", "compile_programs", "shared_buffers"]

MEMORY_PLAN = True


def shared_buffers(plans):
    """One list of arrays per ``MemoryPlan`` of ``plans``, for its buffers in order: the k-th
    buffer of a (shape, dtype) is the same array in every plan."""
    pool = {}    # (shape, dtype) -> arrays
    out = []
    for plan in plans:
        seen = {}
        arrays = []
        for key in plan.buffers:
            k = seen.get(key, 0)
            seen[key] = k + 1
            same = pool.setdefault(key, [])
            if k == len(same):
                same.append(np.empty(key[0], key[1]))
            arrays.append(same[k])
        out.append(arrays)
    return out


class Program:
    """A compiled array-mode program with a memory plan (``plan``) whose buffers (``arena``) it
    may share with other programs guarded by the same ``lock``; ``source`` is its code."""

    def __init__(self, graph, name, plan, arena, lock):
        from ember.jit.codegen import compile_graph
        self.graph, self.name, self.plan, self.arena = graph, name, plan, arena
        self.fn, self.source = compile_graph(graph, "array", name, plan=plan, arena=arena)
        self._lock = lock
        self._unplanned = None

    def __call__(self, *arrays):
        if self._lock.acquire(blocking=False):
            try:
                return self.fn(*arrays)
            finally:
                self._lock.release()
        return self.unplanned(*arrays)

    @property
    def unplanned(self):
        """The program without its plan: what a call runs while the arena is busy."""
        if self._unplanned is None:
            from ember.jit.codegen import compile_graph
            self._unplanned = compile_graph(self.graph, "array", self.name)[0]
        return self._unplanned


def compile_programs(programs):
    """[(callable, source)] for ``programs`` [(graph, name)]: each a ``Program`` with its memory
    plan, all sharing one arena and one lock (see the module); without plans
    (``MEMORY_PLAN`` False) each graph's plain compiled function."""
    from ember.jit.codegen import compile_graph
    if not MEMORY_PLAN:
        return [compile_graph(g, "array", name) for g, name in programs]
    from ember.jit.passes.memory import plan_memory
    plans = [plan_memory(g) for g, _ in programs]
    lock = threading.Lock()
    out = []
    for (g, name), plan, arena in zip(programs, plans, shared_buffers(plans)):
        p = Program(g, name, plan, arena, lock)
        out.append((p, p.source))
    return out
