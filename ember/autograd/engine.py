"""The backward engine: one iterative pass over the graph in dependency order."""
import heapq

import numpy as np

from ember.autograd import complex_support as _complex
from ember.autograd.node import (AccumulateGrad, SavedTensor, accumulate_into, as_leaf_dtype,
                                 grad_accumulator)
from ember.autograd.state import STATE
from ember.autograd.function import _FunctionNode, ember_own
from ember.errors import EmberRuntimeError
from ember.kernels.runtime.fpstate import IGNORE as _FP_IGNORE, enter as _fp_enter, leave as _fp_leave


def _tensor_cls():
    from ember.tensor import Tensor
    return Tensor


def _as_grad(Tensor, g, t, i):
    """The seed gradient of output ``i`` and whether the engine allocated it (implicit ones)."""
    if g is None:
        if t._data.size != 1:
            raise EmberRuntimeError(f"grad can be implicitly created only for scalar outputs; "
                                    f"output {i} has shape {list(t._data.shape)}")
        return Tensor._make(np.ones_like(t._data)), True
    if not isinstance(g, Tensor):
        g = Tensor._make(np.asarray(g, dtype=t._data.dtype))
    if g._data.shape != t._data.shape:
        raise EmberRuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                                f"{list(g._data.shape)} and output[{i}] has a shape of "
                                f"{list(t._data.shape)}.")
    return g, False


def _root_edge(t, i):
    if not t._requires_grad:
        raise EmberRuntimeError(f"element {i} of tensors does not require grad and does not have a "
                                "grad_fn")
    if t.grad_fn is not None:
        return (t.grad_fn, t._output_nr)
    return (grad_accumulator(t), 0)


def _collect(roots):
    """Count, for every node reachable from ``roots``, how many edges point at it."""
    deps = {}
    seen = set()
    stack = []
    for n, _ in roots:
        if n not in seen:
            seen.add(n)
            stack.append(n)
    while stack:
        node = stack.pop()
        for edge in node.next_functions:
            if edge is None:
                continue
            nxt = edge[0]
            deps[nxt] = deps.get(nxt, 0) + 1
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return deps


def _needed(roots, targets):
    """Nodes from which some target node is reachable (others need not run for autograd.grad)."""
    order = []
    seen = set()
    stack = [(n, False) for n, _ in roots]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        for e in node.next_functions:
            if e is not None and e[0] not in seen:
                stack.append((e[0], False))
    needed = set(targets)
    for node in order:  # post-order: children first
        if node in needed:
            continue
        for e in node.next_functions:
            if e is not None and e[0] in needed:
                needed.add(node)
                break
    return needed


# Gradient ownership. With grad mode off during backward (no create_graph), the engine tracks,
# per backward, the gradients whose memory it allocated itself and that nothing outside it has
# seen: the implicit ones seed, its own sums, and results of generated backward nodes that are
# fresh arrays (or a view of an owned incoming gradient, passed on). Only those may be summed
# into in place or become a leaf's ``.grad`` without a copy. A gradient loses ownership when a
# hook sees it, autograd.grad captures it, or a custom Function receives it; a user's
# ``gradient=`` and whatever a hook returns are never owned. With create_graph nothing is owned.

def _root(a):
    """The ndarray owning ``a``'s memory (end of its base chain), or None for foreign memory."""
    b = a.base
    while b is not None:
        if not isinstance(b, np.ndarray):
            return None
        a = b
        b = a.base
    return a if a.flags.owndata else None


def _exclusive_root(a):
    """``a``'s root when ``a`` may be written in place as a whole (writeable, no overlapping
    strides), else None."""
    f = a.flags
    if not f.writeable:
        return None
    if a.base is None:
        return a if f.owndata else None
    if not (f.c_contiguous or f.f_contiguous):
        return None
    return _root(a)


def _saved_roots(node):
    """The ndarrays owning the memory of the tensors ``node`` saved for backward (by id)."""
    roots = set()
    for name in node._saved:
        v = getattr(node, name, None)
        for x in (v if v.__class__ is list or v.__class__ is tuple else (v,)):
            if x.__class__ is SavedTensor:
                arr = x.data if x.tensor is None else x.tensor._data
                if arr is None:     # packed by saved_tensors_hooks: the hook owns it
                    continue
            else:
                arr = getattr(x, "_data", None)
                if arr is None or not isinstance(arr, np.ndarray):
                    continue
            roots.add(id(arr))
            if arr.base is not None:
                r = _root(arr)
                if r is not None:
                    roots.add(id(r))
    return roots


def _claims(node, grads, in_owned, results):
    """Which results of a generated node the engine owns (see the note above): a result whose
    memory is fresh (no incoming gradient's, no saved tensor's), or an owned incoming
    gradient's passed on; never memory shared by two results."""
    roots = []
    shared = False
    for r in results:
        root = None
        if r is not None:
            a = r._data
            if a.base is None:   # the common case: an array the formula just made
                f = a.flags
                if f.owndata and f.writeable:
                    root = a
            else:
                root = _exclusive_root(a)
            if root is not None:
                for other in roots:
                    if other is root:
                        shared = True
                        break
        roots.append(root)
    if shared:   # results sharing memory: none of them is owned
        roots = [None if r is not None and sum(o is r for o in roots) > 1 else r for r in roots]
    incoming = None
    saved = None
    out = []
    for root in roots:
        if root is None:
            out.append(False)
            continue
        if incoming is None:
            incoming = [(g._data if g._data.base is None else _root(g._data), o)
                        for g, o in zip(grads, in_owned) if g is not None]
        for groot, o in incoming:
            if groot is root:
                out.append(o)   # passed on: owned only if the incoming gradient was
                break
        else:
            if saved is None:
                saved = _saved_roots(node) if node._saved else ()
            out.append(id(root) not in saved)
    return out


def _sum(old, g, owned):
    """``old + g`` for one gradient buffer, in place into ``old`` when the engine owns it."""
    if owned is not None:
        if id(old) in owned and g is not old:
            a, b = old._data, g._data
            if a.shape == b.shape and a.dtype == b.dtype:
                fp = _fp_enter(_FP_IGNORE)   # inf + -inf is nan, no NumPy warning
                try:
                    np.add(a, b, out=a)
                finally:
                    _fp_leave(fp)
                owned.pop(id(g), None)
                return old
        owned.pop(id(old), None)
        owned.pop(id(g), None)
        s = old + g
        owned[id(s)] = s
        return s
    return old + g


_CALLBACKS = []
_DEPTH = [0]
# the recording profiler (ember.autograd.profiler) or None: it times each node's step
_profile = None


def queue_callback(fn):
    """Run ``fn()`` once the backward pass now running has finished (torch's
    ``Variable._execution_engine.queue_callback``). Raises EmberRuntimeError outside backward."""
    if not _DEPTH[0]:
        raise EmberRuntimeError("queue_callback: can only be called during a backward pass")
    _CALLBACKS.append(fn)


def run(tensors, grad_tensors, retain_graph, create_graph, capture=None, accumulate=True):
    """Run backward from ``tensors``. ``capture`` maps (node, output_nr) -> slot for autograd.grad.

    Returns the list of captured gradients (None where nothing flowed).
    """
    tracer = STATE.tracer
    if tracer is not None and hasattr(tracer, "graph_break"):  # ember.compile
        why = "a backward pass (loss.backward() or autograd.grad)"
        if capture is None and accumulate and hasattr(tracer, "capture_backward"):
            why = tracer.capture_backward(tensors, grad_tensors, retain_graph, create_graph)
            if why is None:   # traced into the compiled function's graph (a whole step)
                return []
        elif capture is not None and not accumulate and not tracer.joint_backward and \
                getattr(tracer, "step_capture", None) is not None:   # autograd.grad
            got, why = tracer.step_capture.grad(tracer, tensors, grad_tensors, create_graph,
                                                capture)
            if why is None:
                return got
        tracer.graph_break(why)
    outer = not _DEPTH[0]
    _DEPTH[0] += 1
    try:
        out = _run(tensors, grad_tensors, retain_graph, create_graph, capture, accumulate)
    except BaseException:
        if outer:
            _CALLBACKS.clear()
        raise
    finally:
        _DEPTH[0] -= 1
    if outer and _CALLBACKS:
        callbacks = list(_CALLBACKS)
        _CALLBACKS.clear()
        for fn in callbacks:
            fn()
    return out


def _run(tensors, grad_tensors, retain_graph, create_graph, capture, accumulate):
    Tensor = _tensor_cls()
    if retain_graph is None:
        retain_graph = create_graph
    owned = None if create_graph else {}
    roots = []
    buffers = {}
    for i, t in enumerate(tensors):
        edge = _root_edge(t, i)
        g, fresh = _as_grad(Tensor, None if grad_tensors is None else grad_tensors[i], t, i)
        if fresh and owned is not None:
            owned[id(g)] = g
        roots.append(edge)
        node, nr = edge
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = {}
        buf[nr] = g if nr not in buf else _sum(buf[nr], g, owned)
    deps = _collect(roots)
    captured = [None] * (len(capture) if capture else 0)
    needed = _needed(roots, {k[0] for k in capture}) if capture and not accumulate else None
    ready = []
    seen_roots = set()
    for node, _ in roots:
        if node not in seen_roots and deps.get(node, 0) == 0:
            seen_roots.add(node)
            ready.append((-node._seq, id(node), node))
    heapq.heapify(ready)
    prev_mode, prev_autocast = STATE.grad_enabled, STATE.autocast
    STATE.grad_enabled = bool(create_graph)
    STATE.autocast = None   # backward ops run in the forward's dtypes, as torch
    heappop, heappush = heapq.heappop, heapq.heappush
    prof = _profile
    try:
        while ready:
            node = heappop(ready)[2]
            if prof is not None:
                mark = prof.begin_node(node)
            buf = buffers.pop(node, None)
            if buf is None:
                grads = [None]
            elif len(buf) == 1 and 0 in buf:
                grads = [buf[0]]
            else:
                grads = [buf.get(k) for k in range(max(buf) + 1)]
            if node._pre_hooks:
                for nr, hook in list(node._pre_hooks):
                    if nr is None:
                        if owned:
                            for g in grads:
                                owned.pop(id(g), None)
                        r = hook(grads)
                        if r is not None:
                            grads = list(r)
                    elif nr < len(grads) and grads[nr] is not None:
                        if owned:
                            owned.pop(id(grads[nr]), None)
                        r = hook(grads[nr])
                        if r is not None:
                            grads[nr] = r
            if capture:
                if node.__class__ is AccumulateGrad and (node, 0) in capture and grads \
                        and grads[0] is not None:
                    grads[0] = _leaf_hooks(node, grads[0], owned)
                for k, g in enumerate(grads):
                    slot = capture.get((node, k))
                    if slot is not None and g is not None:
                        if owned:
                            owned.pop(id(g), None)
                        for s in slot:
                            captured[s] = g if captured[s] is None else captured[s] + g
            if not owned:
                in_owned = None
            elif len(grads) == 1:
                g = grads[0]
                in_owned = (g is not None and owned.pop(id(g), None) is not None,)
            else:
                in_owned = [g is not None and owned.pop(id(g), None) is not None for g in grads]
            claims = None
            if needed is not None and node not in needed:
                results = ()
            elif node.__class__ is AccumulateGrad:
                if accumulate and grads and grads[0] is not None:
                    node.accumulate(grads[0], bool(in_owned and in_owned[0]))
                results = ()
            elif not grads or _all_none(grads):
                results = ()
            else:
                results = _apply(node, grads)
                if node._post_hooks:
                    for hook in node._post_hooks:
                        r = hook(results, grads)
                        if r is not None:
                            results = tuple(r)
                elif owned is not None and node._fresh_results:
                    claims = _claims(node, grads, in_owned or [False] * len(grads), results)
                if not retain_graph:
                    node.release()
            edges = node.next_functions
            for j, edge in enumerate(edges):
                if edge is None:
                    continue
                nxt, nr = edge
                g = results[j] if j < len(results) else None
                if g is not None:
                    if claims is not None and claims[j]:
                        owned[id(g)] = g
                    b = buffers.get(nxt)
                    if b is None:
                        b = buffers[nxt] = {}
                    old = b.get(nr)
                    b[nr] = g if old is None else _sum(old, g, owned)
                d = deps[nxt] - 1
                deps[nxt] = d
                if d == 0:
                    heappush(ready, (-nxt._seq, id(nxt), nxt))
            if prof is not None:
                prof.end(mark)
    finally:
        STATE.grad_enabled = prev_mode
        STATE.autocast = prev_autocast
    return captured


def _leaf_hooks(acc, g, owned):
    """Run a leaf's tensor hooks on ``g`` before autograd.grad captures it (as torch does)."""
    var = acc.variable
    if var is not None:
        g = as_leaf_dtype(var, g)
    hooks = None if var is None else var._hooks
    if hooks:
        if owned:
            owned.pop(id(g), None)
        for h in list(hooks):
            r = h(g)
            if r is not None:
                g = r
    return g


def _apply(node, grads):
    if node._out_meta is not None and (_has_none(grads) or len(grads) < len(node._out_meta)):
        grads = _fill_missing(node, grads)
    if node._grad_dtypes is not None:
        grads = _in_output_dtypes(grads, node._grad_dtypes)
    # a backward kernel's inf and nan are values, with no NumPy warning (kernels/runtime/fpstate.py);
    # the backward of a user's custom Function is the user's code, under the user's own state
    fp = None if node.__class__ is _FunctionNode and not ember_own(node.fn_cls) else \
        _fp_enter(_FP_IGNORE)
    try:
        results = node.apply(grads) if node._cplx is None else _complex.apply(node, grads)
    except Exception as e:
        if node._trace:
            raise EmberRuntimeError(f"Error in {node.name()}: {e}\nThe forward call that created "
                                    f"it:\n{node._trace}") from e
        raise
    finally:
        if fp is not None:
            _fp_leave(fp)
    if STATE.anomaly and STATE.anomaly == "nan":
        for i, r in enumerate(results):
            if r is not None and r._data.dtype.kind == "f" and np.isnan(r._data).any():
                raise EmberRuntimeError(f"Function '{node.name()}' returned nan values in its "
                                        f"{i}th output.\n{node._trace or ''}")
    return results


def _all_none(grads):
    for g in grads:
        if g is not None:
            return False
    return True


def _has_none(grads):
    for g in grads:
        if g is None:
            return True
    return False


def _in_output_dtypes(grads, dtypes):
    """Each gradient in its output's dtype (torch's engine casts a gradient to the dtype of
    the tensor it belongs to: a float32 gradient of a bfloat16 output becomes bfloat16)."""
    return [g if g is None or g._data.dtype == d or g._data.dtype.kind not in "fV"
            else g.to(_dtype_of(d)) for g, d in zip(grads, dtypes)] + list(grads[len(dtypes):])


def _dtype_of(np_dtype):
    from ember import _dtype
    return _dtype.from_numpy_dtype(np_dtype)


def _fill_missing(node, grads):
    """Zeros for the missing gradients of a node's differentiable outputs (None stays None for
    the others: indices, masks and workspaces no gradient reaches; a max pool's int64 indices
    were a zero-filled array per pool per step)."""
    metas = node._out_meta
    Tensor = _tensor_cls()
    return [g if g is not None or m is None else Tensor._make(np.zeros(m[0], m[1]))
            for g, m in zip(grads + [None] * (len(metas) - len(grads)), metas)]


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate gradients of ``tensors`` into the ``.grad`` of graph leaves."""
    Tensor = _tensor_cls()
    if isinstance(tensors, Tensor):
        tensors = (tensors,)
    if grad_tensors is not None and isinstance(grad_tensors, Tensor):
        grad_tensors = (grad_tensors,)
    if inputs is not None:
        inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
        grads = grad(tensors, inputs, grad_tensors, retain_graph, create_graph, allow_unused=True)
        prev = STATE.grad_enabled
        STATE.grad_enabled = bool(create_graph)
        try:
            for t, g in zip(inputs, grads):
                if g is None:
                    continue
                accumulate_into(t, g, False)  # leaf hooks ran when the gradient was captured
        finally:
            STATE.grad_enabled = prev
        return
    run(tuple(tensors), grad_tensors, retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, materialize_grads=False):
    """Return the gradients of ``outputs`` w.r.t. ``inputs`` without touching ``.grad``.

    ``only_inputs`` is torch's deprecated, ignored flag (gradients are only ever returned for
    ``inputs``); ``only_inputs=False`` warns as torch does. Raises RuntimeError when an input
    was not used in the graph and ``allow_unused`` is false.
    """
    if not only_inputs:
        import warnings
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). "
                      "To accumulate gradient for other parts of the graph, please use "
                      "torch.autograd.backward.", FutureWarning, stacklevel=2)
    Tensor = _tensor_cls()
    single = isinstance(inputs, Tensor)
    outputs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    inputs = (inputs,) if single else tuple(inputs)
    if grad_outputs is not None:
        grad_outputs = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs)
    capture = {}
    for i, t in enumerate(inputs):
        if not t._requires_grad:
            raise EmberRuntimeError(f"grad: input {i} does not require grad")
        key = (t.grad_fn, t._output_nr) if t.grad_fn is not None else (grad_accumulator(t), 0)
        capture.setdefault(key, []).append(i)
    res = run(outputs, grad_outputs, retain_graph, create_graph, capture, accumulate=False)
    for i, g in enumerate(res):
        if g is None:
            if materialize_grads:
                res[i] = Tensor._make(np.zeros_like(inputs[i]._data))
            elif not allow_unused:
                raise EmberRuntimeError(f"grad: one of the differentiated Tensors (input {i}) "
                                        "appears to not have been used in the graph. Set "
                                        "allow_unused=True if this is the desired behavior.")
    return tuple(res)
