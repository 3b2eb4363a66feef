"""torch.autograd.profiler for ember: the recorder behind ``ember.profiler``, its events
(``FunctionEvent``, ``FunctionEventAvg``, ``EventList``), tables and Chrome traces.

While a profiler records, ``dispatch`` and ``dispatch_inplace`` hand every op to
``_Recorder.op`` (otherwise they pay one global check per op) and the backward engine opens one
range per node it runs. What is measured, on every thread:

* an op (``aten::<op name>``, ``aten::<op name>_`` in place): wall time of its ``dispatch``
  call, the kernel with its autograd bookkeeping (backward node linked, tracer told), from
  ``time.perf_counter_ns``; ops an op runs inside (an in-place op's out-of-place result) nest;
* a backward node (``autograd::engine::evaluate_function: MulBackward0``): the engine's whole
  step for it (hooks, the derivative formulas, which are ops and nest, gradient sums);
* ``record_function(name)``: the block it wraps; ops inside nest.

"Self" time is the total less that of the direct children. Memory (``profile_memory``) is
the bytes of the arrays an op returns that own their memory (views and in-place results 0):
allocations, not frees. FLOPs (``with_flops``): matmul, mm, bmm, addmm, linear, conv2d, conv3d.
"""
import enum
import os
import sys
import threading
import warnings
from time import perf_counter_ns as _now
from time import time_ns as _epoch_ns

from ember.autograd import dispatch as _dispatch
from ember.autograd import engine as _engine
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg",
           "DeviceType", "Interval"]

_get_ident = threading.get_ident
# an entry (one range), a list: name, parent entry, start ns, end ns, thread ident, input
# shapes, kind, stack, flops, own memory bytes
_NAME, _PARENT, _START, _END, _TID, _SHAPES, _KIND, _STACK, _FLOPS, _MEM = range(10)
_OP, _USER, _BACKWARD = 0, 1, 2
_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_FLOP_K = {  # op name -> (input index, dims) whose product is the inner size of each output
    "mm": (0, -1), "matmul": (0, -1), "bmm": (0, -1), "linear": (0, -1), "addmm": (1, -1),
    "conv2d": (1, None), "conv3d": (1, None)}
_LOCK = threading.Lock()
_ACTIVE = None   # the recording _Recorder, or None


class DeviceType(enum.Enum):
    """Where an event ran (torch's ``DeviceType``); ember's are all on the CPU."""
    CPU = 0
    CUDA = 1


def _shape(t):
    data = getattr(t, "_data", None)
    if data is not None and hasattr(data, "shape"):
        return list(data.shape)
    shape = getattr(t, "shape", None)
    return list(shape) if shape is not None else []


def _out_bytes(res):
    if isinstance(res, (tuple, list)):
        return sum(_out_bytes(r) for r in res)
    data = getattr(res, "_data", None)
    if data is None or getattr(data, "base", 0) is not None:
        return 0
    return int(data.nbytes)


def _flops(op, tensors, res):
    spec = _FLOP_K.get(op.name)
    if spec is None or isinstance(res, (tuple, list)) or len(tensors) <= spec[0]:
        return 0
    i, dim = spec
    shape = _shape(tensors[i])
    if not shape:
        return 0
    inner = shape[dim] if dim is not None else _prod(shape[1:])
    return 2 * _prod(_shape(res)) * inner


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


def _python_stack():
    """The caller's Python frames outside ember, innermost first (``file(line): function``)."""
    out = []
    f = sys._getframe(2)
    while f is not None:
        code = f.f_code
        if not code.co_filename.startswith(_EMBER_DIR):
            out.append(f"{code.co_filename}({f.f_lineno}): {code.co_name}")
        f = f.f_back
    return out


class _Recorder:
    """The ranges of one recording (one trace); installed in dispatch and the engine while it
    records."""

    def __init__(self, record_shapes=False, with_stack=False, with_flops=False,
                 profile_memory=False):
        self.entries = []
        self._stacks = {}     # thread ident -> its open entries, outermost first
        self.threads = []     # thread idents in order of their first range
        self._names = {}
        self.shapes, self.stack, self.flops, self.memory = \
            record_shapes, with_stack, with_flops, profile_memory
        self.detail = record_shapes or with_stack or with_flops or profile_memory
        self.epoch_ns = _epoch_ns()
        self.t0 = _now()
        self.t1 = None

    def _thread(self, tid):
        self.threads.append(tid)
        return self._stacks.setdefault(tid, [])

    def op(self, op, tensors, consts, inplace):
        """Run ``op`` through dispatch (in place: dispatch_inplace), recording its range."""
        tid = _get_ident()
        stack = self._stacks.get(tid)
        if stack is None:
            stack = self._thread(tid)
        key = (op, inplace)
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = f"aten::{op.name}{'_' if inplace else ''}"
        entry = [name, stack[-1] if stack else None, 0, 0, tid, None, _OP, None, 0, 0]
        if self.detail:
            if self.shapes:
                entry[_SHAPES] = [_shape(t) for t in tensors] + [[] for _ in consts]
            if self.stack:
                entry[_STACK] = _python_stack()
        self.entries.append(entry)
        stack.append(entry)
        entry[_START] = _now()
        try:
            if inplace:
                res = _dispatch.dispatch_inplace(op, tensors, consts, True)
            else:
                res = _dispatch.dispatch(op, tensors, consts, True)
        finally:
            self._close(stack, entry, _now())
        if self.detail:
            if self.memory and not inplace:
                entry[_MEM] = _out_bytes(res)
            if self.flops:
                entry[_FLOPS] = _flops(op, tensors, res)
        return res

    def begin(self, name, kind=_USER):
        """Open a range named ``name`` on this thread; returns it for ``end``."""
        tid = _get_ident()
        stack = self._stacks.get(tid)
        if stack is None:
            stack = self._thread(tid)
        entry = [name, stack[-1] if stack else None, 0, 0, tid, None, kind, None, 0, 0]
        if self.stack and kind == _USER:
            entry[_STACK] = _python_stack()
        self.entries.append(entry)
        stack.append(entry)
        entry[_START] = _now()
        return entry

    def begin_node(self, node):
        """Open the range of the backward engine's step for ``node``."""
        return self.begin(f"autograd::engine::evaluate_function: {node.name()}", _BACKWARD)

    def end(self, entry):
        """Close ``entry`` (and any range left open inside it)."""
        t = _now()
        stack = self._stacks.get(entry[_TID])
        if stack is not None:
            self._close(stack, entry, t)

    @staticmethod
    def _close(stack, entry, t):
        if not entry[_END]:
            entry[_END] = t
        if stack and stack[-1] is entry:
            stack.pop()
            return
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is entry:
                for e in stack[i + 1:]:   # left open by an exception: they end here
                    if not e[_END]:
                        e[_END] = t
                del stack[i:]
                return

    def finish(self):
        """Close what is still open (at the time recording stopped)."""
        self.t1 = t = _now()
        for stack in list(self._stacks.values()):
            for e in stack:
                if not e[_END]:
                    e[_END] = t
            stack.clear()

    def function_events(self, use_device=None, profile_memory=False, with_flops=False):
        """The recorded ranges as an EventList of FunctionEvents, parents linked to children."""
        t0 = self.t0
        order = {tid: i + 1 for i, tid in enumerate(self.threads)}
        events = EventList(use_device=use_device, profile_memory=profile_memory,
                           with_flops=with_flops)
        by_entry = {}
        for i, e in enumerate(self.entries, 1):
            name = e[_NAME]
            kind = e[_KIND]
            ev = FunctionEvent(
                i, _rewrite_name(name), order.get(e[_TID], 0), (e[_START] - t0) / 1000,
                (max(e[_END], e[_START]) - t0) / 1000, trace_name=name,
                input_shapes=e[_SHAPES] or [], stack=e[_STACK] or [],
                scope=1 if kind == _BACKWARD else 0, is_user_annotation=kind == _USER,
                flops=e[_FLOPS], cpu_memory_usage=e[_MEM], use_device=use_device)
            by_entry[id(e)] = ev
            parent = e[_PARENT]
            if parent is not None:
                p = by_entry.get(id(parent))
                if p is not None:
                    ev.cpu_parent = p
                    p.cpu_children.append(ev)
            events.append(ev)
        for ev in reversed(events):   # children come after parents: totals include children
            if ev.cpu_parent is not None:
                ev.cpu_parent.cpu_memory_usage += ev.cpu_memory_usage
        events._tree_built = True
        return events


def _rewrite_name(name):
    return "ProfilerStep*" if name.startswith("ProfilerStep#") else name


def _install(rec, who):
    global _ACTIVE
    with _LOCK:
        if _ACTIVE is not None:
            raise EmberRuntimeError(f"{who}: another profiler is already recording (one "
                                    "profiler at a time; profilers do not nest)")
        _ACTIVE = rec
        _engine._profile = rec
        _dispatch._profile = rec.op


def _uninstall(rec):
    global _ACTIVE
    with _LOCK:
        if _ACTIVE is rec:
            _dispatch._profile = None
            _engine._profile = None
            _ACTIVE = None
    rec.finish()


def is_recording():
    """Whether a profiler is recording now."""
    return _ACTIVE is not None


class record_function:
    """Label a block (context manager) or every call of a function (decorator) in the profile:
    the range ``name`` holds the ops run inside it. Does nothing while no profiler records."""

    def __init__(self, name, args=None):
        if not isinstance(name, str):
            raise EmberTypeError(f"record_function: name must be a str, not "
                                 f"{type(name).__name__}")
        self.name = name
        self.args = args
        self._rec = None
        self._entry = None

    def __enter__(self):
        rec = _ACTIVE
        if rec is not None:
            self._rec = rec
            self._entry = rec.begin(self.name)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        entry = self._entry
        if entry is not None:
            self._entry = None
            self._rec.end(entry)
            self._rec = None
        return False

    def __call__(self, fn):
        import functools

        name, args = self.name, self.args

        @functools.wraps(fn)
        def wrapped(*a, **kw):
            with record_function(name, args):
                return fn(*a, **kw)
        return wrapped


class Interval:
    """A time range in microseconds since recording started."""

    __slots__ = ("start", "end")

    def __init__(self, start, end):
        self.start = start
        self.end = end

    def elapsed_us(self):
        """The range's length in microseconds."""
        return self.end - self.start


def _format_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_share(us, total):
    if total == 0:
        return "NaN"
    return f"{us * 100.0 / total:.2f}%"


def _format_memory(nbytes):
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


class _Times:
    """Averages and formatted times of an event with ``*_time_total`` and ``count``."""

    @property
    def cpu_time(self):
        """Average CPU time per call (us)."""
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self):
        """Average device time per call (us): 0, ember runs on the CPU."""
        return 0.0 if self.count == 0 else self.device_time_total / self.count

    cuda_time = device_time

    @property
    def cuda_time_total(self):
        return self.device_time_total

    @property
    def self_cuda_time_total(self):
        return self.self_device_time_total

    @property
    def self_cuda_memory_usage(self):
        return self.self_device_memory_usage

    cpu_time_str = property(lambda self: _format_time(self.cpu_time))
    cpu_time_total_str = property(lambda self: _format_time(self.cpu_time_total))
    self_cpu_time_total_str = property(lambda self: _format_time(self.self_cpu_time_total))
    device_time_str = property(lambda self: _format_time(self.device_time))
    device_time_total_str = property(lambda self: _format_time(self.device_time_total))
    self_device_time_total_str = property(lambda self: _format_time(self.self_device_time_total))


class FunctionEvent(_Times):
    """One recorded range: an op, a backward node or a ``record_function`` block. Times are in
    microseconds since recording started (``time_range``); ``cpu_children`` are the ranges
    directly inside it, ``cpu_parent`` the one directly around it."""

    def __init__(self, id, name, thread, start_us, end_us, *, trace_name=None, input_shapes=None,
                 stack=None, scope=0, is_user_annotation=False, flops=0, cpu_memory_usage=0,
                 use_device=None):
        self.id = id
        self.name = name
        self.trace_name = trace_name if trace_name is not None else name
        self.time_range = Interval(start_us, end_us)
        self.thread = thread
        self.fwd_thread = None
        self.count = 1
        self.cpu_children = []
        self.cpu_parent = None
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.stack = stack if stack is not None else []
        self.scope = scope
        self.use_device = use_device
        self.cpu_memory_usage = cpu_memory_usage
        self.device_memory_usage = 0
        self.is_async = False
        self.is_remote = False
        self.is_legacy = False
        self.sequence_nr = -1
        self.node_id = -1
        self.device_type = DeviceType.CPU
        self.device_index = 0
        self.flops = flops
        self.is_user_annotation = is_user_annotation
        self.overload_name = ""
        self.kernels = []

    @property
    def key(self):
        """The name events are grouped by in ``key_averages``."""
        return self.name

    @property
    def cpu_time_total(self):
        """Wall time of the range (us)."""
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self):
        """The range's time less that of its direct children (us)."""
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def self_cpu_memory_usage(self):
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    device_time_total = self_device_time_total = self_device_memory_usage = 0

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} cpu_time={self.cpu_time_str} "
                f"start_us={self.time_range.start} end_us={self.time_range.end} "
                f"cpu_children={[c.id for c in self.cpu_children]} thread={self.thread} "
                f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage}>")


class FunctionEventAvg(_Times):
    """The events of one key (name, and input shapes or stack when grouped by them) summed:
    ``count`` calls, ``cpu_time_total`` and ``self_cpu_time_total`` (us), ``cpu_time`` per
    call."""

    def __init__(self):
        self.key = None
        self.count = 0
        self.node_id = 0
        self.is_async = False
        self.is_remote = False
        self.use_device = None
        self.cpu_time_total = 0
        self.device_time_total = 0
        self.self_cpu_time_total = 0
        self.self_device_time_total = 0
        self.input_shapes = None
        self.overload_name = None
        self.stack = None
        self.scope = None
        self.cpu_memory_usage = 0
        self.device_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.self_device_memory_usage = 0
        self.cpu_children = None
        self.cpu_parent = None
        self.device_type = DeviceType.CPU
        self.is_legacy = False
        self.is_user_annotation = False
        self.flops = 0

    def add(self, other):
        """Add ``other`` (an event or an average of the same key) into this one."""
        if not isinstance(other, (FunctionEvent, FunctionEventAvg)):
            raise EmberTypeError(f"FunctionEventAvg.add: expected a FunctionEvent or "
                                 f"FunctionEventAvg, got {type(other).__name__}")
        if self.key is None:
            self.key = other.key
            for name in ("node_id", "is_async", "is_remote", "cpu_parent", "cpu_children",
                         "overload_name", "input_shapes", "stack", "scope", "device_type",
                         "is_legacy", "use_device", "is_user_annotation"):
                setattr(self, name, getattr(other, name))
        elif other.key != self.key:
            raise EmberValueError(f"FunctionEventAvg.add: keys differ ({other.key!r} added to "
                                  f"{self.key!r})")
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        self.count += other.count
        self.flops += other.flops or 0
        return self

    __iadd__ = add

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
                f"cpu_time={self.cpu_time_str} count={self.count} "
                f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage}>")


_SORT_KEYS = ("cpu_time", "cpu_time_total", "self_cpu_time_total", "cpu_memory_usage",
              "self_cpu_memory_usage", "count", "flops", "device_time", "device_time_total",
              "self_device_time_total", "cuda_time", "cuda_time_total", "self_cuda_time_total",
              "xpu_time", "xpu_time_total", "self_xpu_time_total", "device_memory_usage",
              "self_device_memory_usage", "cuda_memory_usage", "self_cuda_memory_usage")


class EventList(list):
    """A list of FunctionEvents (or their averages) with ``table``, ``key_averages``,
    ``total_average`` and ``export_chrome_trace``."""

    def __init__(self, *args, use_device=None, profile_memory=False, with_flops=False):
        super().__init__(*args)
        self._use_device = use_device
        self._profile_memory = profile_memory
        self._with_flops = with_flops
        self._tree_built = False

    def __str__(self):
        return self.table()

    @property
    def self_cpu_time_total(self):
        """The sum of the events' self CPU times (us)."""
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shapes=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """An EventList of FunctionEventAvg, one per key: the event's name, and its input shapes
        (``group_by_input_shapes``) and top ``group_by_stack_n`` stack entries when asked."""
        stats = {}
        for ev in self:
            key = (ev.key, ev.node_id, ev.device_type, ev.is_legacy, ev.is_user_annotation)
            if group_by_input_shapes:
                key += (str(ev.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(ev.stack[:group_by_stack_n])
            avg = stats.get(key)
            if avg is None:
                avg = stats[key] = FunctionEventAvg()
            avg.add(ev)
        out = EventList(stats.values(), use_device=self._use_device,
                        profile_memory=self._profile_memory, with_flops=self._with_flops)
        for avg in out:
            avg.stack = (avg.stack or [])[:group_by_stack_n]
            if not group_by_input_shapes:
                avg.input_shapes = ""
            if not group_by_overload_name:
                avg.overload_name = ""
        return out

    def total_average(self):
        """Every event summed into one FunctionEventAvg keyed ``Total``."""
        total = FunctionEventAvg()
        for ev in self:
            total.key = None
            total.add(ev)
        total.key = "Total"
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False, time_unit=None):
        """The events as torch's text table: name, self CPU %, self CPU, CPU total %, CPU total,
        CPU time avg, number of calls, and input shapes, memory, FLOPs and source locations
        when recorded. ``sort_by``: an attribute to sort by, largest first (``cpu_time_total``,
        ``self_cpu_time_total``, ``count``, ...; default: recording order); ``row_limit``: at
        most this many rows (-1: all); ``time_unit``: ``s``, ``ms`` or ``us`` for every time."""
        return _build_table(self, sort_by, row_limit, max_src_column_width,
                            max_name_column_width, max_shapes_column_width, header,
                            top_level_events_only, time_unit, self._profile_memory,
                            self._with_flops)

    def export_chrome_trace(self, path):
        """Write the events to ``path`` as Chrome trace JSON (chrome://tracing, Perfetto),
        atomically; a path ending ``.gz`` is gzipped."""
        _write_trace(self, path, {}, "export_chrome_trace")

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Write one line per event with a recorded stack: its frames outermost first, joined
        by ``;``, then the metric's value (us), for flame-graph tools."""
        if metric not in ("self_cpu_time_total", "self_cuda_time_total",
                          "self_xpu_time_total", "self_privateuse1_time_total"):
            raise EmberValueError(f"export_stacks: metric must be 'self_cpu_time_total' or a "
                                  f"device's, got {metric!r}")
        attr = "self_cpu_time_total" if metric == "self_cpu_time_total" else \
            "self_device_time_total"
        lines = []
        table = str.maketrans(" ;\t\n", "____")
        for ev in self:
            value = int(getattr(ev, attr))
            if ev.stack and value > 0:
                frames = ";".join(e.translate(table) for e in reversed(ev.stack))
                lines.append(f"{frames} {value}\n")
        from ember.utils.files import atomic_write
        atomic_write(path, "".join(lines).encode())


def _sort_attr(sort_by):
    attr = sort_by.replace("cuda", "device").replace("xpu", "device") \
        .replace("privateuse1", "device")
    if sort_by not in _SORT_KEYS:
        raise EmberValueError(f"table: unknown sort_by {sort_by!r}; one of "
                              f"{', '.join(_SORT_KEYS[:7])}, ...")
    return attr


def _build_table(events, sort_by, row_limit, max_src_width, max_name_width, max_shapes_width,
                 header, top_level_only, time_unit, profile_memory, with_flops):
    if sort_by is not None:
        attr = _sort_attr(sort_by)
        events = sorted(events, key=lambda e: getattr(e, attr), reverse=True)
    if len(events) == 0:
        return ""

    def fmt(us):
        if time_unit == "s":
            return f"{us / 1e6:.3f}s"
        if time_unit == "ms":
            return f"{us / 1e3:.3f}ms"
        if time_unit == "us":
            return f"{us:.3f}us"
        return _format_time(us)

    has_shapes = any(e.input_shapes is not None and len(e.input_shapes) > 0 for e in events)
    stacks = [e.stack for e in events if e.stack]
    name_width = max(len(e.key) for e in events) + 4
    if max_name_width is not None:
        name_width = min(name_width, max_name_width)
    shapes_width = max(len(str(e.input_shapes)) for e in events) + 4
    if max_shapes_width is not None:
        shapes_width = min(shapes_width, max_shapes_width)
    src_width = None
    if stacks:
        src_width = max(len(entry) for s in stacks for entry in s) + 4
        if max_src_width is not None:
            src_width = min(src_width, max_src_width)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
    headers.append("# of Calls")
    widths = [name_width] + [12] * (len(headers) - 1)
    aligns = [">"] * len(headers)
    if has_shapes:
        headers.append("Input Shapes")
        widths.append(shapes_width)
        aligns.append(">")
    scale = None
    if with_flops:
        positive = [e.flops for e in events if e.flops and e.flops > 0]
        if positive:
            units = ("FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs")
            level = 0
            while level < len(units) - 1 and min(positive) >= 1000 ** (level + 1):
                level += 1
            scale = 1000.0 ** -level
            headers.append(f"Total {units[level]}")
            widths.append(12)
            aligns.append(">")
    if stacks:
        headers.append("Source Location")
        widths.append(src_width)
        aligns.append("<")
    row_format = "".join(f"{{:{a}{w}}}  " for a, w in zip(aligns, widths))
    sep = "".join("-" * w + "  " for w in widths)
    line_length = sum(widths) + 2 * (len(widths) - 1)

    total_self = sum(e.self_cpu_time_total for e in events)
    out = []
    if header is not None:
        out += ["=" * line_length, header]
    if top_level_only:
        out += ["=" * line_length, "This report only display top-level ops statistics"]
    out += [sep, row_format.format(*headers), sep]

    def trim(path):
        if len(path) > src_width:
            path = path[len(path) - src_width:]
            if len(path) > 3:
                path = "..." + path[3:]
        return path

    shown = 0
    for e in events:
        if shown == row_limit:
            break
        if top_level_only and e.cpu_parent is not None:
            continue
        shown += 1
        name = e.key
        if max_name_width is not None and len(name) >= max_name_width - 3:
            name = name[:max_name_width - 3] + "..."
        row = [name, _format_share(e.self_cpu_time_total, total_self), fmt(e.self_cpu_time_total),
               _format_share(e.cpu_time_total, total_self), fmt(e.cpu_time_total),
               fmt(e.cpu_time)]
        if profile_memory:
            row += [_format_memory(e.cpu_memory_usage), _format_memory(e.self_cpu_memory_usage)]
        row.append(e.count)
        if has_shapes:
            row.append(str(e.input_shapes)[:shapes_width])
        if scale is not None:
            row.append("--" if not e.flops or e.flops <= 0 else f"{e.flops * scale:8.3f}")
        if stacks:
            row.append(trim(e.stack[0]) if e.stack else "")
        out.append(row_format.format(*row))
        if stacks and e.stack:
            blank = [""] * (len(headers) - 1)
            for entry in e.stack[1:]:
                out.append(row_format.format(*blank, trim(entry)))
            out.append(row_format.format(*blank, ""))
    out += [sep, f"Self CPU time total: {fmt(total_self)}"]
    return "\n".join(out) + "\n"


def _trace_dict(events, meta):
    pid = os.getpid()
    trace = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0,
              "args": {"name": "python"}}]
    threads = set()
    for ev in events:
        if ev.thread not in threads:
            threads.add(ev.thread)
            trace.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": ev.thread,
                          "ts": 0, "args": {"name": f"thread {ev.thread}"}})
        args = {"External id": ev.id}
        if ev.input_shapes:
            args["Input Dims"] = ev.input_shapes
        if ev.flops:
            args["flops"] = ev.flops
        trace.append({"ph": "X", "cat": "user_annotation" if ev.is_user_annotation else "cpu_op",
                      "name": ev.trace_name, "pid": pid, "tid": ev.thread,
                      "ts": ev.time_range.start, "dur": ev.time_range.elapsed_us(),
                      "args": args})
    out = {"schemaVersion": 1, "deviceProperties": [], "displayTimeUnit": "ms"}
    out.update(meta)
    out["traceEvents"] = trace
    return out


def _write_trace(events, path, meta, who):
    import gzip
    import json

    from ember.utils.files import atomic_write
    path = os.fspath(path)
    if not isinstance(path, str):
        raise EmberTypeError(f"{who}: path must be a str or os.PathLike, not "
                             f"{type(path).__name__}")
    meta = dict(meta)
    meta.setdefault("traceName", path)
    payload = json.dumps(_trace_dict(events, meta)).encode()
    if path.endswith(".gz"):
        payload = gzip.compress(payload)
    atomic_write(path, payload)


class profile:
    """torch.autograd.profiler.profile: records the ops, backward nodes and ``record_function``
    ranges run while the context is active, on every thread (see the module docstring for what
    is measured). One profiler records at a time; a second raises EmberRuntimeError.

    ``use_cuda``/``use_device`` warn and profile the CPU (ember has no device);
    ``with_modules`` and ``experimental_config`` are accepted and ignored."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False,
                 custom_trace_id_callback=None, post_processing_timeout_s=None):
        self.enabled = bool(enabled)
        self.use_cuda = use_cuda
        self.use_device = None
        self._ask_device = "cuda" if use_cuda else use_device
        self.record_shapes = record_shapes
        self.with_flops = with_flops
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_modules = with_modules
        self.acc_events = acc_events
        self.custom_trace_id_callback = custom_trace_id_callback
        self.entered = False
        self.trace_id = None
        self._recorder = None
        self._recording = False
        self._function_events = None
        self._old_events = None

    def config(self):
        return dict(record_shapes=self.record_shapes, with_stack=self.with_stack,
                    with_flops=self.with_flops, profile_memory=self.profile_memory)

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise EmberRuntimeError("profile: the profiler context manager is not reentrant")
        self._start_trace()
        return self

    def _start_trace(self):
        if self._ask_device:
            dev = str(self._ask_device).upper()
            level, f = 2, sys._getframe(1)   # the first caller outside ember
            while f is not None and f.f_code.co_filename.startswith(_EMBER_DIR):
                level, f = level + 1, f.f_back
            warnings.warn(f"{dev} is not available, disabling {dev} profiling (ember profiles "
                          "the CPU)", UserWarning, stacklevel=level)
            self._ask_device = None
        rec = _Recorder(**self.config())
        _install(rec, "profile")
        self.entered = True
        if self.custom_trace_id_callback is not None:
            self.trace_id = self.custom_trace_id_callback()
        else:
            import uuid
            self.trace_id = uuid.uuid4().hex.upper()
        if self.acc_events and self._recorder is not None:
            self._old_events = list(self._events("profile"))   # the cycles so far
        self._function_events = None
        self._recorder = rec
        self._recording = True

    def __exit__(self, exc_type, exc_value, traceback):
        if not self.enabled or not self._recording:
            return False
        self._recording = False
        _uninstall(self._recorder)
        return False

    def _events(self, who):
        if not self.enabled:
            return EventList()
        if self._recording:
            raise EmberRuntimeError(f"{who}: the profiler is still recording; read its results "
                                    "after it stops (the end of the with block or stop())")
        if self._recorder is None:
            raise EmberRuntimeError(f"{who}: nothing recorded yet: run code inside the "
                                    "profiler (a with block, or start() and stop()) first")
        if self._function_events is None:
            events = self._recorder.function_events(self.use_device, self.profile_memory,
                                                    self.with_flops)
            if self._old_events:
                events = EventList(self._old_events + list(events), use_device=self.use_device,
                                   profile_memory=self.profile_memory,
                                   with_flops=self.with_flops)
                events._tree_built = True
            self._function_events = events
        return self._function_events

    @property
    def function_events(self):
        """The recorded events (an EventList of FunctionEvent), in order of their start."""
        return self._events("profile.function_events")

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False):
        """The recorded events, one row each (``EventList.table``)."""
        return self._events("profile.table").table(
            sort_by=sort_by, row_limit=row_limit, max_src_column_width=max_src_column_width,
            max_name_column_width=max_name_column_width,
            max_shapes_column_width=max_shapes_column_width, header=header,
            top_level_events_only=top_level_events_only)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """The events averaged per name (and input shapes, stack: ``EventList.key_averages``)."""
        return self._events("profile.key_averages").key_averages(
            group_by_input_shape, group_by_stack_n, group_by_overload_name)

    def total_average(self):
        """Every event summed into one FunctionEventAvg keyed ``Total``."""
        return self._events("profile.total_average").total_average()

    @property
    def self_cpu_time_total(self):
        """The sum of the events' self CPU times (us)."""
        return self._events("profile.self_cpu_time_total").self_cpu_time_total

    def export_chrome_trace(self, path, metadata=None, use_python_export=False):
        """Write the events to ``path`` as Chrome trace JSON, atomically (``.gz``: gzipped)."""
        events = self._events("profile.export_chrome_trace")
        meta = {"trace_id": self.trace_id, "record_shapes": int(bool(self.record_shapes)),
                "baseTimeNanoseconds": self._recorder.epoch_ns}
        meta.update(metadata or {})
        _write_trace(events, path, meta, "profile.export_chrome_trace")

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Write the events' stacks for flame graphs (needs ``with_stack=True``)."""
        if not self.with_stack:
            raise EmberRuntimeError("profile.export_stacks: needs with_stack=True")
        self._events("profile.export_stacks").export_stacks(path, metric)

    def __str__(self):
        if self._recording or self._recorder is None:
            return "<unfinished ember.autograd.profile>"
        return str(self.function_events)

    __repr__ = __str__
