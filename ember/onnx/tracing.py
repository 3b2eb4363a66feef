"""Adapter over ``ember.jit.trace`` for export: records, for every IR node, the user's source
line that called the op (``node.source``) and, for custom autograd Functions, the Function class,
by running the JIT's tracer under an outer recorder that receives the events the JIT forwards to
an enclosing tracer."""
import contextlib

from ember.autograd.state import STATE

__all__ = ["trace_for_export"]


class _SourceRecorder:
    """An outermost tracer that records nothing itself: on each event forwarded by the JIT's
    tracer, it stamps the node that tracer just added with the calling user frame."""

    def __init__(self):
        self.functions = {}   # id(node) -> (node, Function class)

    def _last(self):
        graph = getattr(STATE.tracer, "graph", None)
        if graph is None or not graph.nodes:
            return None
        return graph.nodes[-1]

    def _stamp(self):
        node = self._last()
        if node is not None and getattr(node, "source", None) is None:
            from ember.jit.tracer import user_frame
            fn, line, src = user_frame()
            node.source = f"{fn}:{line}" + (f": {src}" if src else "")
        return node

    def record(self, op, tensors, consts, outputs):
        self._stamp()

    def record_inplace(self, target, result):
        self._stamp()

    def record_function(self, cls, args, outs):
        node = self._stamp()
        if node is not None and node.kind == "python_function":
            self.functions[id(node)] = (node, cls)

    def size(self, tensor, dim):
        return tensor._data.shape[dim]

    def python_value(self, tensor, what):
        pass

    def data_read(self, tensor, op, why):
        pass


@contextlib.contextmanager
def _recording(rec):
    prev = STATE.tracer
    STATE.tracer = rec
    try:
        yield rec
    finally:
        STATE.tracer = prev


def trace_for_export(model, args):
    """Trace ``model(*args)`` with ember.jit (no check run, no grad). Returns (traced callable,
    {id(node): (node, Function class)}); the graph's nodes carry ``source`` ('file:line: code')."""
    from ember.autograd.grad_mode import no_grad
    from ember.jit import trace
    if STATE.tracer is not None:
        from ember.onnx.errors import OnnxExportError
        raise OnnxExportError("ember.onnx.export cannot be called while a trace is recording")
    rec = _SourceRecorder()
    with no_grad(), _recording(rec):
        traced = trace(model, args, check_trace=False, strict=False)
    return traced, rec.functions
