"""Inference plans for a trace whose parameters and buffers stay live (``ember.compile``).

``ember.jit.plan`` runs graphs whose weights are constants (a frozen trace). A trace compiled by
``ember.compile`` keeps its parameters and buffers as formals, so that a training step between
two calls is seen; its calls without a gradient ran the generated array-mode code op by op (no
fused convolution/linear epilogues, batch norm not folded). ``LivePlanner`` gives such a trace
the plan: it freezes the graph on the state tensors' current values (``passes.freeze``, then
the whole pipeline: batch norm folds into the convolutions) and runs a ``plan.Planner`` over the
frozen graph, for as long as every state tensor holds the same array at the same version.

A state tensor that changes (an optimizer step, ``load_state_dict``, an in-place write under
``no_grad`` or through ``.data``: each bumps the tensor's version or the write count it shares
with its ``.data`` aliases, or replaces its array) makes the frozen graph stale:
that call and the next take the ordinary path (``run`` returns None) and the frozen graph is
built again on the second call that finds the state unchanged, so a loop that alternates
training steps and evaluation calls never pays for freezing. A graph that writes its state in
place (training-mode batch norm) is never planned.

The plan's kernels are Numba's: the first frozen graph of a process is built only once a
background thread has imported them and built Numba's compiler tables (``kernels_warm``; ~0.4 +
0.55 s of CPU on a warm kernel cache, which the main thread spent inside one call before);
until then calls take the ordinary path.
"""
import threading

from ember.jit.plan import Planner

__all__ = ["LivePlanner", "STABLE_CALLS", "kernels_warm", "wait_kernels"]

# calls that must find the state unchanged before its frozen graph is built (the first of them
# takes the ordinary path)
STABLE_CALLS = 2


_warm = None   # the thread that imports the plan's kernels (None: not started)


def _warm_up():
    try:
        from ember.jit.plan import _kernels
        if _kernels() is None:
            return
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.registry import cpu_target
        with global_compiler_lock:   # what a dispatcher's first compile or cache load builds
            cpu_target.typing_context.refresh()
            cpu_target.target_context.refresh()
    except Exception:  # noqa: BLE001 - Numba unusable: Planner finds out and takes the ordinary path
        pass


def kernels_warm():
    """Whether the plan's kernel modules are imported (starts the thread that imports them on
    the first call; False until it has finished)."""
    global _warm
    if _warm is None:
        _warm = threading.Thread(target=_warm_up, name="ember-plan-kernels", daemon=True)
        _warm.start()
    return not _warm.is_alive()


def wait_kernels(timeout=None):
    """Wait for the thread ``kernels_warm`` started (starting it if needed); True when done."""
    kernels_warm()
    _warm.join(timeout)
    return not _warm.is_alive()


def _watched(t):
    vc = t._get_vc()
    return t, t._data, vc, vc.v, vc.writes[0] if vc.writes else 0


def _same_check(watch):
    """``same(state)``, generated for the watched tensors: True while ``state`` (a sequence)
    holds the same tensors, each with the same array, version and write count as when
    watched. One straight-line function (a loop over LeNet-5's 10 tensors read them in ~17k
    instructions a call, this in ~4k)."""
    env, conds = {}, []
    for i, (t, d, vc, v, n) in enumerate(watch):
        env[f"t{i}"], env[f"d{i}"], env[f"c{i}"] = t, d, vc
        conds += [f"s[{i}] is not t{i}", f"t{i}._data is not d{i}", f"c{i}.v != {int(v)}",
                  f"(c{i}.writes and c{i}.writes[0] != {int(n)})"]
    lines = ["def same(s):", f"    if len(s) != {len(watch)}: return False"]
    for i in range(0, len(conds), 8):
        lines.append(f"    if {' or '.join(conds[i:i + 8])}: return False")
    lines.append("    return True")
    exec(compile("\n".join(lines), "<ember.jit live-plan state check>", "exec"), env)  # noqa: S102
    return env["same"]


class LivePlanner:
    """The inference plans of ``graph``, whose formals after the first ``n_inputs`` are state
    (parameters, buffers) bound per call (see the module)."""

    def __init__(self, graph, n_inputs):
        from ember.jit.plan import supported
        self.graph = graph
        self.n_inputs = n_inputs
        self.enabled = supported(graph)
        self.errors = []      # why a frozen graph could not be built (the ordinary path then)
        self.builds = 0       # frozen graphs built so far
        self._planner = None  # the Planner over the frozen graph of the watched state
        self._watch = None    # per state tensor: (tensor, its array, its version counter,
        #                      version, writes through its .data aliases)
        self._same_fn = None  # ``_same_check`` of ``_watch`` (from the frozen graph's build)
        self._stable = 0      # consecutive calls that found the watched state unchanged

    def _same(self, state):
        same = self._same_fn
        if same is not None:
            return same(state)
        watch = self._watch
        if watch is None or len(watch) != len(state):
            return False
        for t, (w, d, vc, v, n) in zip(state, watch):
            if t is not w or t._data is not d or vc.v != v or (vc.writes and vc.writes[0] != n):
                return False
        return True

    def _freeze(self, state):
        from ember.jit.passes import freeze, run_passes
        from ember.jit.plan import _inlined
        # the trace's fusion groups (its weight arithmetic among them) back to their ops, so
        # that constant folding reaches what the frozen weights alone compute
        g = _inlined(self.graph)
        g = freeze(g.copy() if g is self.graph else g, list(state))
        return run_passes(g)

    def run(self, arrays, state):
        """The graph's outputs for the input ``arrays`` (a tuple, as ``Planner.run`` takes them)
        and the ``state`` tensors bound to the state formals, or None: the caller then runs its
        ordinary path (the state changed since the frozen graph was built, the plan is not built
        yet or busy, or the graph cannot be planned)."""
        same = self._same_fn   # set while a frozen graph's planner exists
        if same is not None and self.enabled and same(state):
            res = self._planner.run(arrays)
            if res is None and self._planner.errors and not self.errors:
                self.errors.extend(self._planner.errors)
            return res
        if not self.enabled:
            return None
        if not self._same(state):
            self._planner = None
            self._watch = [_watched(t) for t in state]
            self._same_fn = None
            self._stable = 1
            return None
        planner = self._planner
        if planner is None:
            self._stable += 1
            if self._stable < STABLE_CALLS or not kernels_warm():
                return None
            try:
                g = self._freeze(state)
            except Exception as e:  # noqa: BLE001 - e.g. a buffer the graph writes: never planned
                self.enabled = False
                self.errors.append(f"{type(e).__name__}: {e}")
                return None
            planner = self._planner = Planner(g)
            self.builds += 1
            # the watch as one generated check, now that the state held still (a loop that
            # alternates training steps and evaluation calls does not compile one per step)
            self._same_fn = _same_check(self._watch)
            if not planner.enabled:
                self.enabled = False
                return None
        res = planner.run(arrays)
        if res is None and planner.errors and not self.errors:
            self.errors.extend(planner.errors)
        return res

    def plans(self):
        """{input shapes: InferencePlan} of the current frozen graph ({} when none)."""
        return self._planner.plans() if self._planner is not None else {}
