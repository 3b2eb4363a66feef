"""The optimizer's update of every parameter in one kernel call: a lowering rule of the step
program (``codegen.generate``'s ``rules``).

``joint_passes._in_place`` leaves one fusion group per parameter writing the new parameter and
its state into their own memory (``attrs["into"]``), one after another at the end of the step.
Each is a call of its own: SGD with momentum on LeNet-5's ten parameters took 76 us of group
calls a step, where one pass over their 62 k elements takes ~13 us. ``GroupedUpdates`` writes
the groups of one expression on arguments of the same dtypes, each below ``MAX_SIZE`` elements
(larger ones run their own group, split over the threads), within a region of independent
update groups, as one ``fused.FusedGroups`` call at the first of them; the others answer
``SKIP``. Each parameter's update is the same expression on its own arguments in
the same order as before, so the results are the per-group ones.
"""
import math

from ember.jit.codegen import SKIP, Statement
from ember.jit.fused import FusedGroups, fused_group

__all__ = ["GroupedUpdates", "MAX_SIZE"]

# Members up to this many elements: the size below which the engine runs a group's kernel on one
# thread for an update's cost per element (SGD with momentum ~0.25 ns, Adam ~0.6 against its
# 40 us threshold on TBB), so one thread running all of them loses no parallelism.
MAX_SIZE = 1 << 16


def _in_place(n):
    """Whether ``n`` is a fusion group writing every output into one of its arguments."""
    if n.kind != "fusion_group":
        return False
    into = n.attrs.get("into")
    return bool(into) and all(i is not None for i in into)


def _member(n):
    """The signature ``n`` groups by (its expression, outputs' arguments, argument dtypes and
    0-d-ness), or None when it stays a call of its own (above MAX_SIZE)."""
    into = n.attrs["into"]
    if math.prod(n.args[into[0]].shape) > MAX_SIZE:
        return None
    group = fused_group(n.attrs["graph"])
    return (group.expr.key(), tuple(into),
            tuple((a.dtype, a.shape == ()) for a in n.args))


class GroupedUpdates:
    """Lowering rule (``rule(node, writer)``) for ``graph``'s in-place update groups: within a
    region of consecutive ones that are independent (none reads or writes a value another
    writes: each parameter's update reads its own gradient, state and the shared
    hyper-parameters), those of one signature (``_member``) are one ``FusedGroups`` call at the
    first of them, defining all their outputs; the others answer ``SKIP``; other nodes None.
    Moving a later member up to the first is safe there: nothing between them reads or writes
    what it reads or writes."""

    def __init__(self, graph):
        self.runs = {}     # id(first node) -> the run's nodes
        self.skip = set()  # ids of the other members
        region, read, written = [], set(), set()
        for n in graph.nodes:
            if _in_place(n):
                writes = {id(n.args[i]) for i in n.attrs["into"]} | {id(o) for o in n.outputs}
                reads = {id(a) for a in n.args}
                if not (writes & (read | written) or reads & written):
                    region.append(n)
                    read |= reads
                    written |= writes
                    continue
                self._group(region)
                region, read, written = [n], reads, writes
                continue
            self._group(region)
            region, read, written = [], set(), set()
        self._group(region)

    def _group(self, region):
        classes = {}
        for n in region:
            sig = _member(n)
            if sig is not None:
                classes.setdefault(sig, []).append(n)
        for run in classes.values():
            if len(run) > 1:
                self.runs[id(run[0])] = run
                self.skip.update(id(n) for n in run[1:])

    def __call__(self, node, writer):
        if id(node) in self.skip:
            return SKIP
        run = self.runs.get(id(node))
        if run is None:
            return None
        call = writer.bind(FusedGroups(fused_group(node.attrs["graph"]), node.attrs["into"],
                                       len(run)), "update_groups")
        args = ", ".join(writer.ref(a) for n in run for a in n.args)
        return Statement(rhs=f"{call}({args})",
                         defines=tuple(o for n in run for o in n.outputs), unpack=True)
