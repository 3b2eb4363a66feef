"""``ember.profiler``: torch.profiler's API on ember's CPU ops (docs/profiler.md).

``profile`` records every op's dispatch (``aten::<op name>``), the backward engine's step per
node and ``record_function`` ranges, with wall-clock times; ``key_averages().table(...)``,
``events()`` and ``export_chrome_trace`` read them (ember.autograd.profiler has the recorder
and says exactly what is measured). ``schedule``, ``step`` and ``on_trace_ready`` follow
torch's ProfilerAction state machine. Device activities (CUDA, ...) warn and profile the CPU.
"""
import enum
import os
import sys
import warnings

from ember.autograd.profiler import DeviceType, EventList, record_function
from ember.autograd.profiler import profile as _autograd_profile
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError

__all__ = ["profile", "schedule", "supported_activities", "tensorboard_trace_handler",
           "ProfilerAction", "ProfilerActivity", "kineto_available", "DeviceType",
           "record_function", "EventList"]


class ProfilerActivity(enum.Enum):
    """The activity groups torch's profiler knows; ember records only ``CPU``."""
    CPU = 0
    XPU = 1
    CUDA = 2
    HPU = 3
    MTIA = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    """What the profiler does during a step (a ``schedule``'s answer)."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _warn(msg, category=UserWarning):
    """Warn, attributing the warning to the first caller outside ember."""
    level, f = 2, sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_HERE):
        level += 1
        f = f.f_back
    warnings.warn(msg, category, stacklevel=level)


def supported_activities():
    """The activities ember can record: ``{ProfilerActivity.CPU}``."""
    return {ProfilerActivity.CPU}


def kineto_available():
    """False: ember's profiler is its own, not Kineto."""
    return False


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """A ``profile(schedule=...)`` callable: after ``skip_first`` steps, cycles of ``wait`` steps
    doing nothing, ``warmup`` steps, then ``active`` steps recorded (the last returns
    RECORD_AND_SAVE: the trace is ready after it); ``repeat`` cycles (0: no end).
    ``skip_first_wait``: the first cycle skips its wait. Raises EmberValueError for a negative
    count or ``active`` < 1."""
    for name, value in (("wait", wait), ("warmup", warmup), ("active", active),
                        ("repeat", repeat), ("skip_first", skip_first)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise EmberTypeError(f"schedule: {name} must be an int, not {type(value).__name__}")
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise EmberValueError(
            f"schedule: invalid arguments wait={wait} (need >= 0), warmup={warmup} "
            f"(need >= 0), active={active} (need > 0), repeat={repeat} (need >= 0), "
            f"skip_first={skip_first} (need >= 0)")
    if warmup == 0:
        _warn("Profiler won't be using warmup, this can skew profiler results")
    cycle = wait + warmup + active

    def schedule_fn(step):
        if step < 0:
            raise EmberValueError(f"schedule: step must be non-negative, got {step}")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        if repeat > 0 and step / cycle >= repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return schedule_fn


def _default_schedule(_):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False,
                              use_python_export=False):
    """An ``on_trace_ready`` handler writing each trace to ``dir_name`` (created if needed) as
    ``<worker_name>.<time ns>.pt.trace.json[.gz]``, for TensorBoard's profiler plugin;
    ``worker_name`` defaults to ``<hostname>_<pid>``."""
    import socket
    import time

    def handler_fn(prof):
        nonlocal worker_name
        try:
            os.makedirs(dir_name, exist_ok=True)
        except OSError as e:
            raise EmberRuntimeError(f"tensorboard_trace_handler: can't create directory "
                                    f"{dir_name!r}: {e}") from e
        if not worker_name:
            worker_name = f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker_name}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))
    return handler_fn


def _parse_activities(activities):
    seen = set()
    for item in activities:
        keys = item.keys() if isinstance(item, dict) else (item,)
        for key in keys:
            if not isinstance(key, ProfilerActivity):
                raise EmberTypeError(f"profile: activities holds ProfilerActivity values (or "
                                     f"dicts keyed by them), not {key!r}")
            if key in seen:
                raise EmberValueError(f"profile: activity {key} specified more than once")
            seen.add(key)
    if not seen:
        raise EmberValueError("profile: no valid profiler activities found")
    return seen


class profile:
    """torch.profiler.profile: records what ember runs while active (``with`` block, or
    ``start()``/``stop()``), on every thread; see docs/profiler.md for what is measured.

    ``schedule`` (``ember.profiler.schedule``) decides per ``step()`` whether to record;
    ``on_trace_ready(prof)`` runs when a recorded cycle ends. ``record_shapes``,
    ``profile_memory``, ``with_stack``, ``with_flops`` add input shapes, output bytes, Python
    stacks and FLOP estimates. Device activities warn and profile the CPU; ``with_modules``,
    ``experimental_config`` and ``post_processing_timeout_s`` are accepted and ignored. One
    profiler records at a time (EmberRuntimeError otherwise)."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False, with_flops=False,
                 with_modules=False, experimental_config=None, execution_trace_observer=None,
                 acc_events=False, use_cuda=None, custom_trace_id_callback=None,
                 post_processing_timeout_s=None):
        acts = supported_activities() if activities is None else _parse_activities(activities)
        if use_cuda is not None:
            _warn("`use_cuda` is deprecated, use `activities` argument instead", FutureWarning)
            if use_cuda:
                acts.add(ProfilerActivity.CUDA)
            else:
                acts.discard(ProfilerActivity.CUDA)
            if not acts:
                raise EmberValueError("profile: no valid profiler activities found")
        self.activities = acts
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.experimental_config = experimental_config
        self.execution_trace_observer = execution_trace_observer
        self.acc_events = acc_events
        self.custom_trace_id_callback = custom_trace_id_callback
        self.post_processing_timeout_s = post_processing_timeout_s
        self.profiler = None
        self.use_device = None
        self._warned_device = False
        if schedule is not None:
            self.schedule = schedule
            self.record_steps = True
        else:
            self.schedule = _default_schedule
            self.record_steps = False
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.step_rec_fn = None
        self.current_action = self._action(self.step_num)
        A = ProfilerAction
        prepare, start, stop, ready = (self.prepare_trace, self.start_trace, self.stop_trace,
                                       self._trace_ready)

        def warn(msg):
            return lambda: _warn(msg)
        self.action_map = {
            (A.NONE, A.NONE): [],
            (A.NONE, A.WARMUP): [prepare],
            (A.NONE, A.RECORD): [prepare, start],
            (A.NONE, A.RECORD_AND_SAVE): [prepare, start],
            (A.WARMUP, A.NONE): [warn("Incorrect schedule: WARMUP followed by NONE"), start,
                                 stop],
            (A.WARMUP, A.WARMUP): [],
            (A.WARMUP, A.RECORD): [start],
            (A.WARMUP, A.RECORD_AND_SAVE): [start],
            (A.RECORD, A.NONE): [warn("Incorrect schedule: RECORD followed by NONE"), stop],
            (A.RECORD, A.WARMUP): [warn("Incorrect schedule: RECORD followed by WARMUP"), stop],
            (A.RECORD, A.RECORD): [],
            (A.RECORD, A.RECORD_AND_SAVE): [],
            (A.RECORD_AND_SAVE, A.NONE): [stop, ready],
            (A.RECORD_AND_SAVE, A.WARMUP): [stop, ready, prepare],
            (A.RECORD_AND_SAVE, A.RECORD): [stop, ready, prepare, start],
            (A.RECORD_AND_SAVE, A.RECORD_AND_SAVE): [stop, ready, prepare, start],
            (A.WARMUP, None): [start, stop],
            (A.RECORD, None): [stop, ready],
            (A.RECORD_AND_SAVE, None): [stop, ready],
        }
        self._started = False

    def _action(self, step):
        action = self.schedule(step)
        if not isinstance(action, ProfilerAction):
            raise EmberTypeError(f"profile: the schedule returned {action!r} for step {step}, "
                                 "not a ProfilerAction")
        return action

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if self._started:   # not stopped inside the block already
            self.stop()
        return False

    def start(self):
        """Begin: the schedule's action for the current step takes effect."""
        if self._started:
            raise EmberRuntimeError("profile.start: the profiler is already started")
        self._started = True
        self._transit(ProfilerAction.NONE, self.current_action)
        if self.record_steps:
            self._open_step()

    def stop(self):
        """End: a recording cycle in progress stops (and ``on_trace_ready`` runs)."""
        if not self._started:
            raise EmberRuntimeError("profile.stop: the profiler was not started")
        self._close_step()
        self._started = False
        self._transit(self.current_action, None)

    def step(self):
        """Signal that the next step begins: the schedule's action for it takes effect."""
        self._close_step()
        prev = self.current_action
        action = self._action(self.step_num + 1)
        self.step_num += 1
        self.current_action = action
        self._transit(prev, action)
        if self.record_steps and self._started:
            self._open_step()

    def _open_step(self):
        self.step_rec_fn = record_function(f"ProfilerStep#{self.step_num}")
        self.step_rec_fn.__enter__()

    def _close_step(self):
        if self.step_rec_fn is not None:
            rec, self.step_rec_fn = self.step_rec_fn, None
            rec.__exit__(None, None, None)

    def _transit(self, prev, current):
        for action in self.action_map.get((prev, current), ()):
            action()

    def prepare_trace(self):
        """Make a fresh recorder for the next cycle (kept across cycles with acc_events)."""
        if not self._warned_device:
            self._warned_device = True
            for act in sorted(self.activities - {ProfilerActivity.CPU}, key=lambda a: a.value):
                name = act.name.upper() if act is not ProfilerActivity.PrivateUse1 \
                    else "PrivateUse1"
                _warn(f"{name} is not available, disabling {name} profiling (ember profiles "
                      "the CPU)")
        if self.profiler is None or not self.acc_events:
            self.profiler = _autograd_profile(
                record_shapes=self.record_shapes, with_flops=self.with_flops,
                profile_memory=self.profile_memory, with_stack=self.with_stack,
                with_modules=self.with_modules, acc_events=self.acc_events,
                custom_trace_id_callback=self.custom_trace_id_callback)

    def start_trace(self):
        """Start recording."""
        if self.execution_trace_observer is not None:
            self.execution_trace_observer.start()
        if self.profiler is None:
            self.prepare_trace()
        self.profiler._start_trace()

    def stop_trace(self):
        """Stop recording."""
        if self.execution_trace_observer is not None:
            self.execution_trace_observer.stop()
        if self.profiler is not None:
            self.profiler.__exit__(None, None, None)

    def _trace_ready(self):
        if self.on_trace_ready:
            self.on_trace_ready(self)

    def _recorded(self, who):
        if self.profiler is None:
            raise EmberRuntimeError(f"{who}: nothing recorded yet (the schedule has not "
                                    "reached a recording step)")
        return self.profiler

    def events(self):
        """The events of the last recorded cycle: an EventList of FunctionEvent."""
        return self._recorded("profile.events").function_events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """The last cycle's events averaged per name (and input shapes, top stack entries):
        an EventList of FunctionEventAvg with ``table()``."""
        return self._recorded("profile.key_averages").key_averages(
            group_by_input_shape, group_by_stack_n, group_by_overload_name)

    def export_chrome_trace(self, path, use_python_export=False):
        """Write the last cycle's events to ``path`` as Chrome trace JSON, atomically
        (``.gz``: gzipped)."""
        self._recorded("profile.export_chrome_trace").export_chrome_trace(path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Write the last cycle's stacks for flame graphs (needs ``with_stack=True``)."""
        self._recorded("profile.export_stacks").export_stacks(path, metric)

    def get_trace_id(self):
        """The id of the last cycle's trace, or None."""
        return None if self.profiler is None else self.profiler.trace_id

    def set_custom_trace_id_callback(self, callback):
        """Make each new cycle's trace id ``callback()``."""
        self.custom_trace_id_callback = callback

    def add_metadata(self, key, value):
        """Accepted for torch's API; ember's traces carry no user metadata."""

    def add_metadata_json(self, key, value):
        """Accepted for torch's API; ember's traces carry no user metadata."""
