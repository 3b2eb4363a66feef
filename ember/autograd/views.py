"""Autograd of views and in-place ops, as torch's.

A view op's output that aliases its input carries its view info ``t._view = (base, ops,
creation)``: its autograd base (the first tensor of the chain that is not itself such a view),
the view ops that make it from that base, ``((op, consts, output index or -1), ...)``
(replayed on demand), and how it was created (torch's CreationMeta: in grad mode, in no_grad
mode, as one of several outputs, inside a custom Function); ``t._view_v`` is the version its
``grad_fn`` was computed at.

- An in-place op with autograd on a view rebases its base's history: the base's ``grad_fn``
  becomes a ``CopySlices`` node whose gradient is the incoming one with the view's region
  replaced by the op's gradient mapped back through the view (``rebase``).
- A view's ``grad_fn`` is regenerated from its base's current history when read after its
  version changed (``refresh``), by replaying its view ops on the base.
- In-place ops whose other input partially overlaps the written memory are refused
  (``check_overlap``), as torch's ``assert_no_partial_overlap``.
"""
import numpy as np

from ember.autograd.node import Node, grad_accumulator
from ember.autograd.state import STATE
from ember.errors import EmberRuntimeError, UnsupportedError

# torch's CreationMeta
DEFAULT, NO_GRAD, MULTI, CUSTOM = 0, 1, 2, 3

_new = object.__new__
# views whose elements are parts (real, imaginary) of the base's elements
_PART_VIEWS = frozenset(("real", "imag", "view_as_real", "view_as_complex"))


def link_view(op, src, consts, outs, multi):
    """Outputs of view op ``op`` that alias ``src`` share its version counter and memory base;
    those of a differentiable dtype get view info extending ``src``'s."""
    vc = src._get_vc()
    mem = src._base if src._base is not None else src
    info = src._view
    if info is None:
        base, ops, creation = src, (), DEFAULT
    else:
        base, ops, creation = info
    if multi:
        creation = MULTI
    elif not STATE.grad_enabled:
        creation = NO_GRAD
    sdata = src._data
    sdt = sdata.dtype
    diff = sdt.kind in "fcV"
    for k, o in enumerate(outs):
        a = o._data
        if np.may_share_memory(a, sdata):
            o._vc = vc
            o._base = mem
            if diff if a.dtype is sdt else a.dtype.kind in "fcV":
                o._view = (base, ops + ((op, consts, k if multi else -1),), creation)
                o._view_v = vc.v


def inherits_grad(t):
    """Whether view ``t`` requires grad through its base (a view made in grad mode of a base
    that required grad later, when a gradient-carrying value was written into it)."""
    info = t._view
    return info is not None and info[2] == DEFAULT and info[0]._requires_grad


def refresh_inputs(tensors):
    """Bring up to date the views among ``tensors`` that require grad through their base
    (``inherits_grad``); returns whether any does."""
    from ember.tensor import Tensor
    found = False
    for t in tensors:
        if isinstance(t, Tensor) and not t._requires_grad and inherits_grad(t):
            t.grad_fn  # noqa: B018 - regenerates it (``refresh``)
            found = True
    return found


def _rebase_message(t, creation, indirect):
    """torch's handle_view_on_rebase message for a view not made in grad mode by a single-
    output view op."""
    fn = t._grad_fn
    what = "its base or another view of its base has been" if indirect else "is being"
    if creation == NO_GRAD or fn is None:
        prefix = (f"Output {t._output_nr} of {fn.name()} is a view of a view which was created "
                  f"in" if fn is not None else "A view was created in")
        msg = f"{prefix} no_grad mode and {what} modified inplace with grad mode enabled."
    else:
        msg = f"Output {t._output_nr} of {fn.name()} is a view and {what} modified inplace."
    if creation == MULTI:
        return msg + (" This view is the output of a function that returns multiple views. Such "
                      "functions do not allow the output views to be modified inplace. You "
                      "should replace the inplace operation by an out-of-place one.")
    if creation == CUSTOM:
        return msg + (" This view was created inside a custom Function (or because an input was "
                      "returned as-is) and the autograd logic to handle view+inplace would "
                      "override the custom backward associated with the custom Function, leading "
                      "to incorrect gradients. This behavior is forbidden. You can fix this by "
                      "cloning the output of the custom Function.")
    return msg + (" Given that this use case is ambiguous and error-prone, it is forbidden. You "
                  "can clarify your code by moving both the view and the inplace either both "
                  "inside the no_grad block (if you don't want the inplace to be tracked) or "
                  "both outside (if you want the inplace to be tracked).")


def check_inplace(op, t):
    """Raise torch's errors for an in-place op with autograd on view ``t``: one not made in
    grad mode by a single-output view op (or made inside a custom Function), or a view that
    requires grad of a leaf; UnsupportedError for an as_strided view of a tensor that is not
    its own contiguous storage (docs/unsupported.md)."""
    base, ops, creation = t._view
    if creation != DEFAULT:
        raise EmberRuntimeError(f"{op.name}_: {_rebase_message(t, creation, False)}")
    if (base._requires_grad or t._requires_grad) and base._grad_fn is None:
        raise EmberRuntimeError(f"{op.name}_: a view of a leaf Variable that requires grad is "
                                "being used in an in-place operation.")
    if _through_as_strided(ops) and not _is_own_storage(base._data):
        raise UnsupportedError(
            f"{op.name}_: in-place op with autograd on an as_strided view of a tensor that is "
            "not a contiguous tensor owning its whole storage: its backward could not place "
            "the view in a gradient (docs/unsupported.md); clone() the base first")


def _replay(ops, t):
    """Apply the view ops ``ops`` to ``t`` (recorded by autograd and the tracer as usual)."""
    from ember.autograd.dispatch import dispatch
    for op, consts, k in ops:
        r = dispatch(op, (t,), consts)
        t = r if k < 0 else r[k]
    return t


def _alias(base, history):
    """A tensor on ``base``'s memory with a version counter of its own: with ``base``'s
    history when ``history``, else a leaf that requires grad."""
    from ember.tensor import Tensor, VersionCounter
    a = _new(Tensor)
    a._data = base._data
    a._vc = VersionCounter()
    if not history:
        a._requires_grad, a._grad_fn = True, None
        return a
    a._requires_grad, a._grad_fn = base._requires_grad, base._grad_fn
    if base._output_nr:
        a._output_nr = base._output_nr
    if base._grad_fn is None and base._requires_grad:
        a._acc = grad_accumulator(base)
    return a


def _replay_recorded(ops, src):
    """``_replay`` in grad mode with no tracer (the nodes it links are what the caller wants)."""
    grad, tracer = STATE.grad_enabled, STATE.tracer
    STATE.grad_enabled, STATE.tracer = True, None
    try:
        return _replay(ops, src)
    finally:
        STATE.grad_enabled, STATE.tracer = grad, tracer


def refresh(t, info):
    """``t.grad_fn`` of view ``t`` whose version changed since it was computed: regenerated
    from its base's current history by replaying its view ops (torch's view regeneration).
    Raises EmberRuntimeError for a view made in no_grad mode or as one of several outputs
    whose base requires grad, as torch does."""
    base, ops, creation = info
    if t._grad_fn is None and not base._requires_grad:
        return None
    if creation != DEFAULT:
        raise EmberRuntimeError(_rebase_message(t, creation, True))
    out = _replay_recorded(ops, _alias(base, True))
    t._grad_fn = out._grad_fn
    if out._output_nr or t._output_nr:
        t._output_nr = out._output_nr
    t._requires_grad = out._requires_grad
    t._view_v = t._vc.v
    return t._grad_fn


class CopySlices(Node):
    """The history of a base after an in-place op on one of its views: the gradient of the
    base's old value is the incoming gradient with the view's region replaced by the in-place
    op's gradient for the view (mapped back through the view ops); the op's other inputs get
    the op's gradients for them."""

    __slots__ = ("fn", "ops", "chain", "changes_dtype", "own_storage", "mask")
    _op_name = "copy_slices"

    def name(self):
        return "CopySlices"

    def release(self):
        if self.fn is not None:
            self.fn.release()
        self.mask = None

    def _scatter(self, w):
        """``w`` (view-shaped) mapped back to the base's shape, zero outside the view: the
        backward of the view ops."""
        from ember.autograd.engine import _apply
        for node, nr in self.chain:
            gl = [None] * (nr + 1)
            gl[nr] = w
            w = _apply(node, gl)[0]
        return w

    def apply(self, grads):
        from ember.autograd._generated import functions as G
        from ember.autograd.engine import _apply
        g = grads[0]
        n = len(self.next_functions)
        if g is None:
            return (None,) * n
        if self.own_storage:   # as_strided reads the storage: give it one laid out as the base's
            g = G.clone(g)
        gs = _replay(self.ops, g)
        fn = self.fn
        res = list(_apply(fn, [gs])) if fn is not None else [None]
        out = res + [None] * (n - len(res))
        if self.needs[0]:
            r0 = res[0] if res[0] is not None else G.zeros_like(gs)
            if self.changes_dtype:   # a region of real/imaginary parts: replace by arithmetic
                out[0] = G.add(G.sub(g, self._scatter(gs)), self._scatter(r0))
            else:
                out[0] = G.where(self._region(gs), self._scatter(r0), g)
        return tuple(out)

    def _region(self, gs):
        from ember.autograd._generated import functions as G
        mask = self.mask
        if mask is None:
            grad = STATE.grad_enabled
            STATE.grad_enabled = False
            try:
                mask = G.ne(self._scatter(G.ones_like(gs)), 0)
            finally:
                STATE.grad_enabled = grad
            self.mask = mask
        return mask


def rebase(view, info, fn):
    """After an in-place op with autograd on ``view`` whose result has history ``fn``, make
    ``CopySlices`` the history of the view's base (the view's own ``grad_fn`` is regenerated
    when next read: its version changed). Returns whether the base did not require grad
    before."""
    base, ops, _ = info
    out = _replay_recorded(ops, _alias(base, False))
    chain = []
    node, nr = out._grad_fn, out._output_nr
    for _ in ops:
        chain.append((node, nr))
        node, nr = node.next_functions[0]
    cs = CopySlices()
    cs.fn = fn
    cs.ops = ops
    cs.chain = tuple(chain)
    cs.changes_dtype = any(op.name in _PART_VIEWS for op, _, _ in ops)
    cs.own_storage = _through_as_strided(ops)
    cs.mask = None
    if base._grad_fn is not None:
        edge = (base._grad_fn, base._output_nr)
    elif base._requires_grad:
        edge = (grad_accumulator(base), 0)
    else:
        edge = None
    if fn is not None:
        cs.next_functions = (edge,) + tuple(fn.next_functions[1:])
        cs.needs = (edge is not None,) + tuple(fn.needs[1:])
    else:
        cs.next_functions, cs.needs = (edge,), (edge is not None,)
    gained = not base._requires_grad
    base._grad_fn = cs
    base._requires_grad = True
    if base._output_nr:
        base._output_nr = 0
    if base._retains_grad:
        base._move_retain_grad()
    view._requires_grad = True
    return gained


def _through_as_strided(ops):
    for op, _, _ in ops:
        if op.name == "as_strided":
            return True
    return False


def _is_own_storage(a):
    """Whether ndarray ``a`` is C-contiguous and the whole of its storage (what as_strided's
    offsets count from), as a fresh contiguous gradient is."""
    from ember.kernels import strided
    if not a.flags.c_contiguous:
        return False
    flat, offset = strided.storage(a)
    return offset == 0 and flat.size == a.size


def _dense(a):
    """torch's is_non_overlapping_and_dense for an ndarray (any order of dimensions)."""
    f = a.flags
    if f.c_contiguous or f.f_contiguous:
        return True
    expect = a.itemsize
    for s, n in sorted((abs(s), n) for s, n in zip(a.strides, a.shape) if n != 1):
        if s != expect:
            return False
        expect *= n
    return True


def _extent(a):
    lo = hi = a.__array_interface__["data"][0]
    for s, n in zip(a.strides, a.shape):
        if s < 0:
            lo += s * (n - 1)
        else:
            hi += s * (n - 1)
    return lo, hi + a.itemsize


def check_overlap(op, dst, src, whole=False):
    """Raise torch's error when array ``src`` (an input of an in-place op writing ``dst``)
    partially overlaps ``dst``: some, not all, of its elements are memory ``dst`` writes, or
    the same memory in another layout. Identical memory (``x.add_(x)``) passes unless
    ``whole`` (any overlap refused), and so do layouts torch calls too hard to decide (either
    one not dense)."""
    if not src.size or not dst.size:
        return
    if src is not dst:
        if (src.base is None and dst.base is None) or not np.may_share_memory(dst, src):
            return
        if not (_dense(dst) and _dense(src)):
            return
        if not whole and _extent(dst) == _extent(src) and dst.strides == src.strides and \
                dst.shape == src.shape:
            return
    elif not whole:
        return
    raise EmberRuntimeError(f"{op.name}_: unsupported operation: some elements of the input "
                            "tensor and the written-to tensor refer to a single memory location. "
                            "Please clone() the tensor before performing the operation.")


def basic_region(a, key):
    """``a[key]`` as a view when ``key`` is basic indexing (ints, slices, None, Ellipsis), else
    None."""
    items = key if isinstance(key, tuple) else (key,)
    for k in items:
        if not (k is None or k is Ellipsis or isinstance(k, slice) or
                (isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)))):
            return None
    if Ellipsis not in items:
        items = items + (Ellipsis,)
    return a[items]


def internal_overlap_message(op, dst):
    """torch's error for writing a tensor whose elements share memory (a 0 stride), or None."""
    if any(s == 0 and n > 1 for s, n in zip(dst.strides, dst.shape)):
        return (f"{op.name}_: unsupported operation: more than one element of the written-to "
                "tensor refers to a single memory location. Please clone() the tensor before "
                "performing the operation.")
    return None
