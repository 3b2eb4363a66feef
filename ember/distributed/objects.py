"""Object collectives that never pickle: values travel as JSON text, so receiving them can
never import or run code. Accepted: None, bool, int, float, str, and lists and dicts (with str
keys) of those, nested. Anything else (tuples, tensors, arrays, custom classes) is refused."""
import json
import math

import numpy as np

from ember.distributed.group import world_group
from ember.errors import EmberTypeError


def _check(obj, what, path="obj"):
    if obj is None or isinstance(obj, (bool, int, str)):
        return
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise EmberTypeError(f"{what}: {path} = {obj!r} is not JSON-compatible (inf/nan)")
        return
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            _check(v, what, f"{path}[{i}]")
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, str):
                raise EmberTypeError(f"{what}: {path} has key {k!r} of type {type(k).__name__}; "
                                     "only str keys are JSON-compatible")
            _check(v, what, f"{path}[{k!r}]")
        return
    raise EmberTypeError(f"{what}: {path} is a {type(obj).__name__}; ember's object collectives "
                         "carry only JSON-compatible values (None, bool, int, float, str, list, "
                         "dict with str keys) and never pickle. Send tensors with the tensor "
                         "collectives; convert tuples to lists")


def _encode(obj, what, path):
    _check(obj, what, path)
    return np.frombuffer(json.dumps(obj, allow_nan=False).encode("utf-8"), np.uint8)


def _decode(buf):
    return json.loads(bytes(buf).decode("utf-8"))


def broadcast_object_list(object_list, src=0, group=None, device=None):
    """Replace ``object_list``'s items on every rank with those of global rank ``src``.

    Raises EmberTypeError (on ``src``) for a value that is not JSON-compatible."""
    what = "broadcast_object_list"
    g = world_group(what) if group is None else group
    if g.comm is None:
        return
    root = g.group_rank(src, what)
    _debug_check(g, what, src=src)
    n = np.zeros(1, np.int64)
    if g.rank() == root:
        try:
            data = _encode(list(object_list), what, "object_list")
            n[0] = data.size
        except EmberTypeError:
            n[0] = -1
            _call(g, what, "Bcast", n, root)
            raise
    _call(g, what, "Bcast", n, root)
    if n[0] < 0:
        raise EmberTypeError(f"{what}: rank {src} passed a value that is not JSON-compatible")
    if g.rank() != root:
        data = np.empty(int(n[0]), np.uint8)
    _call(g, what, "Bcast", data, root)
    if g.rank() != root:
        values = _decode(data)
        object_list[:] = values[:len(object_list)] + object_list[len(values):]


def all_gather_object(object_list, obj, group=None):
    """Fill ``object_list[r]`` with rank r's ``obj`` on every rank.

    Raises EmberTypeError for a value that is not JSON-compatible (checked on every rank before
    anything is sent, so a refused value cannot leave the others waiting)."""
    what = "all_gather_object"
    g = world_group(what) if group is None else group
    if g.comm is None:
        return
    _debug_check(g, what)
    try:
        data = _encode(obj, what, "obj")
        err = 0
    except EmberTypeError:
        data, err = np.empty(0, np.uint8), 1
    values = allgather_bytes(g, data, -1 if err else None, what)
    if err:
        _encode(obj, what, "obj")
    if values is None:
        raise EmberTypeError(f"{what}: another rank passed a value that is not JSON-compatible")
    object_list[:len(values)] = [_decode(v) for v in values]


def _debug_check(g, what, **extra):
    from ember.distributed.collectives import _debug_check as check
    check(g, what, **extra)


def _call(g, what, name, *args):
    """MPI's blocking ``name`` on ``g``, or, when the group has a timeout, the non-blocking one
    waited for under it."""
    if g.timeout is None:
        getattr(g.comm, name)(*args)
    else:
        from ember.distributed.collectives import Work
        Work([getattr(g.comm, "I" + name.lower())(*args)], None, what, g.timeout).wait()


def allgather_bytes(g, data, count=None, what="all_gather_object"):
    """Every rank's uint8 ``data`` (a list, in rank order) over group ``g``, through buffers only;
    None when any rank passed ``count=-1`` (an error it reports itself)."""
    comm = g.comm
    counts = np.empty(comm.Get_size(), np.int64)
    _call(g, what, "Allgather", np.array([data.size if count is None else count], np.int64),
          counts)
    if (counts < 0).any():
        return None
    recv = np.empty(int(counts.sum()), np.uint8)
    displ = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist()
    _call(g, what, "Allgatherv", data, [recv, (counts.astype(int).tolist(), displ)])
    return [recv[d:d + c] for d, c in zip(displ, counts.tolist())]
