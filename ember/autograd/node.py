"""Backward graph nodes, saved tensors and gradient accumulation for leaves."""
import itertools
import weakref

import numpy as np

from ember.autograd.state import STATE
from ember.errors import EmberRuntimeError, EmberTypeError
from ember.kernels.runtime.fpstate import quiet as _fp_quiet, restore as _fp_restore

_seq = itertools.count()
next_seq = _seq.__next__

_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward."
)


class Node:
    """A function of the backward graph: maps gradients of its outputs to gradients of its inputs.

    ``next_functions`` holds, per input, ``(node, output_nr)`` or ``None`` when that input needs
    no gradient. Subclasses implement ``apply(grads) -> tuple`` aligned with ``next_functions``.
    """

    __slots__ = ("next_functions", "needs", "_seq", "__weakref__", "__dict__")
    _saved = ()
    _op_name = "node"
    # rarely set: class defaults, stored in the instance dict only when set
    _pre_hooks = None
    _post_hooks = None
    _trace = None
    _out_meta = None
    _cplx = None  # (mode, real inputs) on nodes with complex values: complex_support.apply
    # the outputs' dtypes of a bfloat16 product (autocast.LOWER: matmul, linear, convolutions,
    # ...): the engine casts each gradient reaching it to its output's dtype, as torch's engine
    # casts every gradient (a formula computed in float32 for a bfloat16 input, batch norm's,
    # gives the op before it a float32 gradient), so the product's formulas multiply operands
    # of one dtype; other ops keep a float32 gradient (fewer roundings in composites)
    _grad_dtypes = None

    # results are arrays the kernels just made, unless they alias an input (see engine._claims):
    # true for the spec-generated backward classes only, never for user code
    _fresh_results = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._fresh_results = cls.__module__ == "ember.autograd._generated.nodes"

    def __init__(self):
        self.next_functions = ()
        self.needs = ()
        self._seq = next(_seq)

    def name(self):
        """The node's class name, e.g. ``MulBackward0``."""
        return type(self).__name__

    def apply(self, grads):
        raise NotImplementedError(f"{self.name()}.apply")

    def register_hook(self, fn):
        """Call ``fn(grad_inputs, grad_outputs)`` after this node runs; it may return new grad_inputs."""
        if self._post_hooks is None:
            self._post_hooks = []
        self._post_hooks.append(fn)
        return _RemovableHandle(self._post_hooks, fn)

    def register_prehook(self, fn):
        """Call ``fn(grad_outputs)`` before this node runs; it may return new grad_outputs."""
        return self._add_pre_hook(None, fn)

    def _add_pre_hook(self, output_nr, fn):
        if self._pre_hooks is None:
            self._pre_hooks = []
        entry = (output_nr, fn)
        self._pre_hooks.append(entry)
        return _RemovableHandle(self._pre_hooks, entry)

    def release(self):
        """Free the saved tensors (after a backward without retain_graph): unpacking one then
        raises, as in torch; a node that saved nothing can run again."""
        for slot in self._saved:
            if getattr(self, slot) is not None:
                setattr(self, slot, _RELEASED)

    def __repr__(self):
        return f"<{self.name()}>"


class _RemovableHandle:
    __slots__ = ("_list", "_item")

    def __init__(self, lst, item):
        self._list = lst
        self._item = item

    def remove(self):
        """Unregister the hook."""
        try:
            self._list.remove(self._item)
        except ValueError:
            pass


class _Released:
    __slots__ = ()

    def unpack(self, node):
        raise EmberRuntimeError(_FREED)


_RELEASED = _Released()


class SavedTensor:
    """A tensor saved for backward, with the version it had when saved.

    Saved outputs keep only their array (no reference cycle through ``grad_fn``) and are rebuilt
    with the node as ``grad_fn`` when unpacked.
    """

    __slots__ = ("tensor", "data", "vc", "version", "name", "output_nr", "packed", "unpack_hook")

    def __init__(self, t, name, output_nr=-1):
        vc = t._get_vc()
        self.vc = vc
        self.version = vc.v
        self.name = name
        self.output_nr = output_nr
        hooks = STATE.saved_hooks
        if hooks:    # saved_tensors_hooks (ember.autograd.graph): keep what the pack hook returns
            pack, self.unpack_hook = hooks[-1]
            self.packed = pack(t)
            self.tensor = self.data = None
            return
        self.unpack_hook = None
        if output_nr >= 0:
            self.tensor = None
            self.data = t._data
        else:
            self.tensor = t
            self.data = None

    def unpack(self, node):
        """Return the saved tensor; RuntimeError when it was modified in place since saving."""
        if self.unpack_hook is not None:
            return self._unpack_hooked(node)
        if self.vc.v != self.version:
            t = self.tensor
            arr = self.data if t is None else t._data
            raise EmberRuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: {node.name()} (op '{node._op_name}') saved '{self.name}' "
                f"[{arr.dtype}{list(arr.shape)}] at version {self.version}; it is now at version "
                f"{self.vc.v}. Use out-of-place ops or clone() before the in-place one.")
        if self.tensor is not None:
            return self.tensor
        from ember.tensor import Tensor
        out = Tensor._make(self.data)
        out._vc = self.vc
        if STATE.grad_enabled:
            out._grad_fn = node
            out._requires_grad = True
            out._output_nr = self.output_nr
        return out


    def _unpack_hooked(self, node):
        """The tensor the unpack hook of ``saved_tensors_hooks`` returns for the packed value
        (an output of ``node`` gets ``node`` as its grad_fn again)."""
        from ember.tensor import Tensor
        t = self.unpack_hook(self.packed)
        if not isinstance(t, Tensor):
            raise EmberTypeError(f"Output of saved tensor unpack_hook expected to be a Tensor "
                                 f"but got result of type {type(t).__name__}")
        if self.output_nr >= 0 and STATE.grad_enabled:
            out = Tensor._make(t._data)
            out._grad_fn = node
            out._requires_grad = True
            out._output_nr = self.output_nr
            return out
        return t


def unpack(saved, node):
    """Unpack a saved slot: SavedTensor, released marker, or a plain Python value."""
    if saved.__class__ is SavedTensor or saved is _RELEASED:
        return saved.unpack(node)
    return saved


_make = None   # Tensor._make, bound on first use (ember.tensor imports this module)


def kernel_grads(out, needs, n):
    """The gradients a first-order backward kernel returned (``backward_kernel:`` in the op
    spec) as an ``n``-tuple of tensors, one per tensor input: ``out`` is one ndarray (the first
    input's gradient) or a tuple of ndarrays or None, one per input in order (missing trailing
    entries are None); entries of inputs that need no gradient are dropped. None when ``out``
    is None (the kernel declines these arrays: the formulas run). Each array becomes a
    C-contiguous tensor."""
    global _make
    if out is None:
        return None
    make = _make
    if make is None:
        from ember.tensor import Tensor
        make = _make = Tensor._make
    if out.__class__ is not tuple:
        out = make(out if out.flags.c_contiguous else np.array(out, order="C"))
        return (out,) if n == 1 else (out,) + (None,) * (n - 1)
    gs = [None] * n
    for i, a in enumerate(out):
        if a is not None and needs[i]:
            gs[i] = make(a if a.flags.c_contiguous else np.array(a, order="C"))
    return tuple(gs)


class AccumulateGrad(Node):
    """The sink of a leaf tensor: runs the leaf's hooks and adds the gradient into ``.grad``."""

    __slots__ = ("_variable",)
    _op_name = "accumulate_grad"

    def __init__(self, variable):
        super().__init__()
        self._variable = weakref.ref(variable)

    @property
    def variable(self):
        """The leaf tensor (held weakly: the tensor owns its accumulator, not the reverse)."""
        return self._variable()

    def release(self):
        """Nothing to free: the node is shared by every graph that uses the leaf."""

    def apply(self, grads):
        return self.accumulate(grads[0], False)

    def accumulate(self, g, owned):
        """Run the leaf's hooks on ``g``, then add it into the leaf's ``.grad``.

        ``owned`` says the engine allocated ``g``'s memory during this backward and nothing
        outside the engine has seen it, so it may become ``.grad`` without a copy.
        """
        var = self._variable()
        if var is None or g is None:
            return ()
        cast = as_leaf_dtype(var, g)
        if cast is not g:
            g, owned = cast, True
        hooks = var._hooks
        if hooks:
            owned = False  # a hook may keep the gradient it is shown
            for h in list(hooks):
                r = h(g)
                if r is not None:
                    g = r
        accumulate_into(var, g, owned)
        post = var._post_acc_hooks
        if post:
            for h in list(post):
                h(var)
        return ()


def check_assigned_grad(tensor, value):
    """torch's checks of ``tensor.grad = value`` (value not None)."""
    from ember import _dtype
    from ember.kernels.dtypes import cpp_name, scalar_name
    from ember.tensor import Tensor
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"assigned grad expected to be a Tensor or None but got grad of "
                             f"type {_type_name(value)}")
    if value is tensor:
        raise EmberRuntimeError("can't assign Variable as its own grad")
    if value._data.shape != tensor._data.shape:   # (plain ints: no shape guard in a trace)
        raise EmberRuntimeError(f"attempting to assign a gradient of size '{list(value.shape)}' "
                                f"to a tensor of size '{list(tensor.shape)}'. Please ensure that "
                                f"the gradient and the tensor are the same size")
    gdt, tdt = value.dtype, tensor.dtype
    if gdt != tdt:
        raise EmberRuntimeError(
            f"attempting to assign a gradient with dtype '{cpp_name(_dtype.to_numpy_dtype(gdt))}'"
            f" to a tensor with grad_dtype '{scalar_name(_dtype.to_numpy_dtype(tdt))}'. The "
            f"gradient must match the tensor's grad_dtype (defaults to the tensor's dtype).")


def _type_name(value):
    """A value's type as torch names it in argument errors (``numpy.ndarray``, ``list``)."""
    cls = type(value)
    mod = cls.__module__
    return cls.__name__ if mod in ("builtins", None) else f"{mod.split('.')[0]}.{cls.__name__}" \
        if mod.startswith("numpy") else cls.__name__


def as_leaf_dtype(var, g):
    """``g`` in leaf ``var``'s floating dtype, as torch's engine casts a gradient to its input's
    dtype (a float32 parameter times a float64 tensor gets a float32 ``.grad``, a bfloat16 leaf
    a bfloat16 one); ``g`` itself when the dtypes match or either is not floating."""
    want, have = var._data.dtype, g._data.dtype
    if want == have or want.kind not in "fV" or have.kind not in "fV":
        return g
    return g.to(var.dtype)


def graph_leaves(tensors):
    """The leaf tensors requiring grad that the graphs of ``tensors`` reach (a leaf among
    ``tensors`` itself included), each once, in no particular order."""
    stack, seen, leaves = [], set(), {}
    for t in tensors:
        if t.grad_fn is not None:
            stack.append(t.grad_fn)
        elif t._requires_grad:
            leaves[id(t)] = t
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            v = node.variable
            if v is not None:
                leaves[id(v)] = v
            continue
        for edge in node.next_functions:
            if edge is not None:
                stack.append(edge[0])
    return list(leaves.values())


def accumulate_into(var, g, owned):
    """Add gradient ``g`` into ``var.grad`` as torch does.

    A first gradient becomes ``.grad`` itself only when ``owned`` (engine memory nobody else
    holds) and grad mode is off; otherwise it is copied (a differentiable clone in grad mode).
    A later one is added in place into ``.grad`` when grad mode is off (``.grad`` keeps its
    identity), out of place when it is on.
    """
    old = var.grad
    if old is None:
        if STATE.grad_enabled:
            var.grad = g.clone()
        elif owned:
            var.grad = g
        else:
            from ember.tensor import Tensor
            var.grad = Tensor._make(g._data.copy())
    elif STATE.grad_enabled:
        var.grad = old + g
    else:
        arr = old._data
        if arr.shape == g._data.shape and arr.flags.writeable:
            fp = _fp_quiet()   # inf + -inf is nan, no NumPy warning (kernels/runtime/fpstate.py)
            try:
                np.add(arr, g._data, out=arr, casting="same_kind")
            finally:
                _fp_restore(fp)
            old._bump()
        else:
            var.grad = old + g


def grad_accumulator(t):
    """Return the AccumulateGrad node of leaf ``t``, created once and owned by ``t``."""
    acc = t._acc
    if acc is None:
        acc = t._acc = AccumulateGrad(t)
    return acc
