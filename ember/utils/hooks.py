"""``RemovableHandle``: what the ``register_*_hook`` methods return, and what a program's own hook
registry can hand out (torch.utils.hooks)."""
import itertools
import weakref

__all__ = ["RemovableHandle"]


def _ref(container):
    """A callable returning ``container``: a weak reference where it can be one (a dict
    subclass, an OrderedDict), else the container itself (a plain dict or set)."""
    try:
        return weakref.ref(container)
    except TypeError:
        return lambda: container


class RemovableHandle:
    """Removes one hook: ``remove()`` (or leaving a ``with`` block) deletes the entry ``id`` of
    ``hooks_dict`` and ``id`` from each ``extra_dict`` (a dict or set, or a list of them: the
    flags kept beside the hook), as torch's. ``id`` is unique in the process."""

    _ids = itertools.count()

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = _ref(hooks_dict)
        self.id = next(RemovableHandle._ids)
        extras = [] if extra_dict is None else \
            list(extra_dict) if isinstance(extra_dict, (list, tuple)) else [extra_dict]
        self.extra_dict_ref = tuple(_ref(d) for d in extras)

    def remove(self):
        """Unregister the hook (nothing happens the second time)."""
        hooks = self.hooks_dict_ref()
        if hooks is not None:
            hooks.pop(self.id, None)
        for ref in self.extra_dict_ref:
            extra = ref()
            if isinstance(extra, dict):
                extra.pop(self.id, None)
            elif extra is not None:
                extra.discard(self.id)

    def __getstate__(self):
        return (self.hooks_dict_ref(), self.id, tuple(ref() for ref in self.extra_dict_ref))

    def __setstate__(self, state):
        hooks, self.id, extras = state
        self.hooks_dict_ref = _ref({} if hooks is None else hooks)
        self.extra_dict_ref = tuple(_ref(d) for d in extras if d is not None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
