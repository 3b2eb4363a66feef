"""Concatenations without copies in an inference plan.

A ``cat`` whose result is contiguous slices of one buffer -- every dimension before the
concatenated one has size 1 (a batch of one, channels concatenated) -- gets a buffer allocated
once per plan, and each convolution step whose output is one of its operands writes straight
into its slice (``_ConvStep.y`` is that view). The ``cat`` is then the view of the buffer's
prefix: no copy. Operands no step writes in place (a pooling's result, a value placed in another
buffer, a graph input) are copied into their slice once, by the first ``cat`` that reads them.

``cat`` nodes whose operand lists extend one another share one buffer: DenseNet's dense block
concatenates ``[x0]``, ``[x0, y1]``, ``[x0, y1, y2]``, ... before each layer, which are all
prefixes of the block's last list, so the block's whole concatenation work is the one copy of
``x0``. Inception and SqueezeNet's Fire modules concatenate the outputs of parallel
convolutions: each branch writes its slice.

The buffers are the plan's, reused by every call, as its steps' outputs are: a ``cat`` that is
an output of the graph is left to its kernel (a fresh array), and ``InferencePlan.run`` copies
any returned array that shares memory with a buffer.
"""
import numpy as np

__all__ = ["ConcatBuffers"]


def _cat_dim(node, env):
    """The concatenated dimension of ``node`` when its result can be slices of one buffer,
    else None."""
    from ember.jit.ir import Value
    if node.kind != "cat" or len(node.args) != 1 or not isinstance(node.args[0], list):
        return None
    vals = node.args[0]
    out = env.get(id(node.outputs[0]))
    if not vals or not isinstance(out, np.ndarray) or out.ndim == 0:
        return None
    d = node.attrs.get("dim", 0)
    if not isinstance(d, int):
        return None
    d = d + out.ndim if d < 0 else d
    if not 0 <= d < out.ndim or int(np.prod(out.shape[:d])) != 1:
        return None
    for v in vals:
        a = env.get(id(v)) if isinstance(v, Value) else None
        if a is None or not isinstance(a, np.ndarray) or a.dtype != out.dtype or \
                a.ndim != out.ndim or v.node is None or v.node.kind == "constant":
            return None
    return d


class _Group:
    """One buffer and the operand list (the longest of its ``cat`` nodes) laid out in it."""

    def __init__(self, vals, d):
        self.vals, self.d = list(vals), d
        self.buffer = None
        self.starts = []

    def allocate(self, env):
        arrays = [env[id(v)] for v in self.vals]
        shape = list(arrays[0].shape)
        sizes = [a.shape[self.d] for a in arrays]
        shape[self.d] = sum(sizes)
        self.buffer = np.empty(shape, arrays[0].dtype)
        self.starts = list(np.cumsum([0] + sizes))

    def view(self, lo, hi):
        """The buffer's slice of positions [lo, hi) (contiguous: the dimensions before ``d``
        have size 1)."""
        idx = (slice(None),) * self.d + (slice(int(self.starts[lo]), int(self.starts[hi])),)
        return self.buffer[idx]


class ConcatBuffers:
    """The plan's concatenation buffers: ``place`` gives a step the slice its output goes to,
    ``lines`` the statements that stand for a ``cat``."""

    def __init__(self, graph, env, outs):
        """Buffers for the ``cat`` nodes of ``graph`` (None: none) given every value's array
        ``env`` (id -> array) and the ids of the graph's outputs ``outs``."""
        self._groups = []
        self._of_cat = {}    # id(cat node) -> (group, operand count)
        self._home = {}      # id(value) -> (group, position): its one slice written in place
        self._placed = set()
        for node in graph.nodes if graph is not None else ():
            d = _cat_dim(node, env)
            if d is None or id(node.outputs[0]) in outs:
                continue
            vals = node.args[0]
            group = next((gr for gr in self._groups if gr.d == d and
                          _prefix_related(gr.vals, vals)), None)
            if group is None:
                group = _Group(vals, d)
                self._groups.append(group)
            elif len(vals) > len(group.vals):
                group.vals = list(vals)
            self._of_cat[id(node)] = (group, len(vals))
        for group in self._groups:
            group.allocate(env)
            for i, v in enumerate(group.vals):
                self._home.setdefault(id(v), (group, i))

    def __bool__(self):
        return bool(self._of_cat)

    def arrays(self):
        return [gr.buffer for gr in self._groups]

    def place(self, value, shape, dtype):
        """The slice ``value`` is written into by the step producing it (which then writes
        nowhere else), or None."""
        home = self._home.get(id(value))
        if home is None:
            return None
        group, i = home
        view = group.view(i, i + 1)
        if view.shape != tuple(shape) or view.dtype != dtype or not view.flags.c_contiguous:
            return None
        self._placed.add(id(value))
        return view

    def covers(self, node):
        """Whether ``cat`` ``node`` is the view of one of the buffers."""
        return id(node) in self._of_cat

    def lines(self, node, name_of, bind):
        """Source lines computing ``cat`` ``node`` (its operands already computed): the copies
        of the operands no step wrote in place and no earlier ``cat`` of its buffer copied,
        then the view."""
        group, n = self._of_cat[id(node)]
        done = 0   # positions an earlier cat of the buffer saw (the dict keeps graph order)
        for k, (gr, m) in self._of_cat.items():
            if k == id(node):
                break
            if gr is group:
                done = max(done, m)
        lines = []
        for i, v in enumerate(group.vals[:n]):
            if i < done or self._home.get(id(v)) == (group, i) and id(v) in self._placed:
                continue
            lines.append(f"{bind(np.copyto)}({bind(group.view(i, i + 1))}, {name_of(v)})")
        lines.append(f"{name_of(node.outputs[0])} = {bind(group.view(0, n))}")
        return lines


def _prefix_related(a, b):
    n = min(len(a), len(b))
    return all(x is y for x, y in zip(a[:n], b[:n]))
