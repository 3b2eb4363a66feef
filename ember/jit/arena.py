"""The programs of one compiled function and their memory plans.

``ember.compile`` runs a compiled function as array-mode programs: the forward and the backward
of a compiled backward (``CompiledAutograd``), or one whole training step (``WholeStep``). Each
program gets a memory plan (``ember.jit.passes.memory``): an elementwise result is written into
an argument that dies at its node (in-place reuse), always; with ``ARENA`` the GEMM, ``linear``,
arithmetic and fusion-group temporaries also go into an arena of buffers kept across calls.

The arena is off by default: measured on the compiled MLP, LeNet-5 and GPT steps (docs/jit.md,
*Memory plan*), its buffers are held between calls on top of what a call still allocates, so
the process's footprint grows (LeNet-5 at batch 64: 1.9 MB of arena against a step's 3.9 MB
peak), and writing into buffers last touched a call ago cost 2-5% of the step against the
allocator's just-freed (cached) blocks.

With the arena, the programs of one function share it: a planned value lives inside one program
call -- nothing a program returns, so nothing the forward saves for the backward, is planned --
so the k-th buffer of a shape and dtype is the same array in every program, and the arena holds,
per shape and dtype, the most buffers any one program needs rather than their sum. One call
runs in the arena at a time: a call that finds it busy -- another thread running a program of
the same function, or a program called from inside one of them (a hook) -- runs its program
without the arena (compiled on first need), so no two calls write the same buffer.
"""
import threading

import numpy as np

__all__ = ["ARENA", "Program", "compile_programs", "shared_buffers"]

ARENA = False


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
    """A compiled array-mode program whose memory plan (``plan``) has arena buffers (``arena``)
    it may share with other programs guarded by the same ``lock``; ``source`` is its code."""

    def __init__(self, graph, name, plan, arena, lock, rules=()):
        from ember.jit.codegen import compile_graph
        self.graph, self.name, self.plan, self.arena = graph, name, plan, arena
        self.rules = tuple(rules)
        self.fn, self.source = compile_graph(graph, "array", name, plan=plan, arena=arena,
                                             rules=self.rules)
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
        """The program without its arena (its in-place reuse kept): what a call runs while
        the arena is busy."""
        if self._unplanned is None:
            from ember.jit.codegen import compile_graph
            from ember.jit.passes.memory import plan_memory
            self._unplanned = compile_graph(self.graph, "array", self.name,
                                            plan=plan_memory(self.graph, arena=False),
                                            rules=self.rules)[0]
        return self._unplanned


def compile_programs(programs, rules=None):
    """[(callable, source, plan)] for ``programs`` [(graph, name)], each compiled with its
    memory plan and the lowering rules ``rules(graph)`` gives (``codegen.generate``); with
    ``ARENA`` each callable a ``Program``, all sharing one arena and one lock (see the
    module)."""
    from ember.jit.codegen import compile_graph
    from ember.jit.passes.memory import plan_memory
    plans = [plan_memory(g, arena=ARENA) for g, _ in programs]
    lowering = [() if rules is None else tuple(rules(g)) for g, _ in programs]
    if not ARENA:
        return [compile_graph(g, "array", name, plan=plan, rules=r) + (plan,)
                for (g, name), plan, r in zip(programs, plans, lowering)]
    lock = threading.Lock()
    out = []
    for (g, name), plan, arena, r in zip(programs, plans, shared_buffers(plans), lowering):
        p = Program(g, name, plan, arena, lock, r)
        out.append((p, p.source, plan))
    return out
