"""Collectives and point-to-point on ember tensors through MPI.

Contiguous, writeable tensors are handed to MPI as they are (their ndarray is the buffer, reduced
in place); others go through one contiguous copy that is written back. float16 is reduced in
float32 (MPI has no standard half type); bool reduces as logical or (SUM, MAX) / and (MIN, PRODUCT).
"""
import json
import os
import time

import numpy as np

from ember.distributed._mpi import mpi
from ember.distributed.group import ProcessGroup, _State, world_group
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError
from ember.tensor import Tensor


class ReduceOp:
    """Reduction operations, named as torch.distributed.ReduceOp."""
    SUM = "SUM"
    AVG = "AVG"
    PRODUCT = "PRODUCT"
    MIN = "MIN"
    MAX = "MAX"


_OPS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX")
_IN_PLACE = [None]  # MPI.IN_PLACE once mpi4py is imported


def _mpi_op(op, dtype, what):
    MPI = mpi()
    name = getattr(op, "name", op)
    if name not in _OPS:
        raise EmberValueError(f"{what}: unknown reduce op {op!r}; expected one of {_OPS}")
    if dtype == np.bool_:
        if name == "AVG":
            raise EmberTypeError(f"{what}: ReduceOp.AVG is not defined for bool tensors")
        return MPI.LOR if name in ("SUM", "MAX") else MPI.LAND
    if np.issubdtype(dtype, np.complexfloating):
        if name in ("MIN", "MAX"):
            raise EmberTypeError(f"{what}: ReduceOp.{name} is not defined for complex tensors "
                                 f"({dtype}); complex values have no order")
    elif name == "AVG" and not np.issubdtype(dtype, np.floating):
        raise EmberTypeError(f"{what}: ReduceOp.AVG needs a floating or complex tensor, got "
                             f"{dtype}")
    return {"SUM": MPI.SUM, "AVG": MPI.SUM, "PRODUCT": MPI.PROD, "MIN": MPI.MIN,
            "MAX": MPI.MAX}[name]


class Work:
    """Handle of an asynchronous operation: ``wait()`` blocks until it is done (and raises
    EmberRuntimeError past the group's timeout), ``is_completed()`` polls."""

    def __init__(self, requests, finish=None, what="collective", timeout=None, result=None,
                 statuses=None):
        self._requests = list(requests)
        self._statuses = statuses
        self._finish = finish
        self._what = what
        self._timeout = timeout
        self._done = False
        self._result = result

    def _complete(self):
        if not self._done:
            self._done = True
            if self._finish is not None:
                self._finish()

    def is_completed(self):
        """True once the operation has finished (its result is then in place)."""
        if self._done:
            return True
        if mpi().Request.Testall(self._requests, self._statuses):
            self._complete()
        return self._done

    def wait(self, timeout=None):
        """Block until done; returns True. Raises EmberRuntimeError when ``timeout`` (seconds;
        default the group's) passes first."""
        if self._done:
            return True
        limit = self._timeout if timeout is None else timeout
        if hasattr(limit, "total_seconds"):
            limit = limit.total_seconds()
        MPI = mpi()
        if limit is None:
            MPI.Request.Waitall(self._requests, self._statuses)
        else:
            deadline = time.monotonic() + limit
            pause = 1e-5
            while not MPI.Request.Testall(self._requests, self._statuses):
                if time.monotonic() > deadline:
                    rank = MPI.COMM_WORLD.Get_rank()
                    raise EmberRuntimeError(f"{self._what}: timed out after {limit} s on rank "
                                            f"{rank}; another rank did not join the collective")
                time.sleep(pause)
                pause = min(pause * 2, 1e-2)
        self._complete()
        return True

    def result(self):
        """The output of the operation (after ``wait``)."""
        self.wait()
        return self._result


def _group(group, what):
    if group is None:
        return world_group(what)
    if not isinstance(group, ProcessGroup):
        raise EmberTypeError(f"{what}: group must be a ProcessGroup (from new_group) or None, got "
                             f"{type(group).__name__}")
    return group


def _not_member(g):
    return g.comm is None


def _check_tensor(t, what, name="tensor"):
    from ember.tensor import Tensor
    if not isinstance(t, Tensor):
        raise EmberTypeError(f"{what}: {name} must be an ember Tensor, got {type(t).__name__}")
    return t


def _buffer(t):
    """(ndarray MPI can use, write-back function or None). float16 travels as float32."""
    arr = t._data
    if arr.dtype == np.float16:
        tmp = arr.astype(np.float32, order="C")
        return tmp, lambda: _write(t, tmp)
    if arr.flags.c_contiguous and arr.flags.writeable:
        return arr, lambda: t._bump()
    tmp = np.ascontiguousarray(arr)
    return tmp, lambda: _write(t, tmp)


def _write(t, src):
    if not t._data.flags.writeable:
        raise EmberRuntimeError("collective: the output tensor is read-only (a broadcast view); "
                                "pass a tensor that owns its memory")
    t._data[...] = src.reshape(t._data.shape)
    t._bump()


def _sendbuf(t):
    arr = t._data
    if arr.dtype == np.float16:
        return arr.astype(np.float32, order="C")
    return np.ascontiguousarray(arr)


def _start(g, name, async_op, *args):
    """Run MPI's blocking ``name`` (its best algorithms, no polling) and return None, or, when
    the caller wants a Work or the group has a timeout, start the non-blocking ``I<name>`` and
    return its request."""
    if async_op or g.timeout is not None:
        return getattr(g.comm, "I" + name.lower())(*args)
    getattr(g.comm, name)(*args)
    return None


def _finish(work, async_op):
    if work._requests == [None]:  # ran blocking: only the write-back is left
        work._requests = []
        work._complete()
        return work if async_op else None
    if async_op:
        return work
    work.wait()
    return None


def _done(async_op):
    return Work([], what="noop") if async_op else None


def _enter(what, group, *tensors):
    """The start of a collective: check ``tensors`` (``(tensor, name)`` pairs), then resolve
    ``group``; returns the group, or None when this rank is not a member (nothing to do)."""
    for t, name in tensors:
        _check_tensor(t, what, name)
    g = _group(group, what)
    return None if _not_member(g) else g


def _then_average(op, buf, n, back):
    """The finish of a reduction into ``buf`` on a group of ``n``: for AVG (which MPI lacks, so
    it ran as SUM) divide by ``n``; then the write-back ``back``."""
    avg = getattr(op, "name", op) == "AVG"

    def finish():
        if avg:
            buf[...] /= n
        back()
    return finish


def _check_holds(what, big, big_name, small, small_name, n):
    """EmberValueError unless ``big`` has ``n`` times ``small``'s elements and its dtype."""
    if big._data.size != n * small._data.size or big._data.dtype != small._data.dtype:
        raise EmberValueError(f"{what}: {big_name} {tuple(big.shape)} {big._data.dtype} must "
                              f"hold {n} x {small_name} {tuple(small.shape)} "
                              f"{small._data.dtype}")


def _alltoallv(g, async_op, send, scounts, recv, rcounts):
    """Start MPI's Alltoallv of the flat ``send`` (``scounts[r]`` elements to rank r) into
    ``recv`` (``rcounts[r]`` from rank r); returns (request, offsets of the parts in recv)."""
    from mpi4py.util.dtlib import from_numpy_dtype
    mt = from_numpy_dtype(send.dtype)
    sdispl = np.concatenate([[0], np.cumsum(scounts)[:-1]]).astype(int).tolist()
    rdispl = np.concatenate([[0], np.cumsum(rcounts)[:-1]]).astype(int).tolist()
    req = _start(g, "Alltoallv", async_op, [send, (scounts, sdispl), mt],
                 [recv, (rcounts, rdispl), mt])
    return req, rdispl


_DEBUG = (os.environ.get("EMBER_DISTRIBUTED_DEBUG", "").upper() in ("DETAIL", "1", "ON")
          or os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL")


def _debug_check(g, what, *tensors, **extra):
    """With EMBER_DISTRIBUTED_DEBUG=DETAIL (or torch's TORCH_DISTRIBUTED_DEBUG=DETAIL) every
    collective first checks that all ranks call the
    same op with the same shapes and dtypes (and root, reduce op), and says which rank differs."""
    if not _DEBUG:
        return
    sig = {"op": what, "tensors": [[list(t.shape), str(t._data.dtype)] for t in tensors]}
    sig.update(extra)
    from ember.distributed.objects import allgather_bytes
    text = json.dumps(sig, sort_keys=True)
    every = [bytes(b).decode() for b in
             allgather_bytes(g, np.frombuffer(text.encode(), np.uint8), None, what)]
    ref = every[0]
    for r, s in enumerate(every):
        if s != ref:
            raise EmberRuntimeError(f"{what}: collective mismatch (EMBER_DISTRIBUTED_DEBUG): rank "
                                    f"{g.ranks[0]} called {ref} but rank {g.ranks[r]} called {s}")


# (op, dtype) -> (MPI op, divide for AVG): filled by the checked path, read by the fast one
_FAST_OPS = {}


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` over all ranks of ``group``, in place on every rank."""
    # Fast path (a blocking call on a contiguous, writeable tensor whose op and dtype were
    # checked before): straight to MPI_Allreduce(MPI_IN_PLACE) on the tensor's own ndarray.
    g = _State.world if group is None else group
    if not async_op and not _DEBUG and isinstance(tensor, Tensor) and type(g) is ProcessGroup \
            and g.timeout is None and g.comm is not None:
        arr = tensor._data
        flags = arr.flags
        if flags.c_contiguous and flags.writeable:
            try:
                mop, avg = _FAST_OPS[op, arr.dtype]
            except (KeyError, TypeError):
                pass
            else:
                g.comm.Allreduce(_IN_PLACE[0], arr, mop)
                _State.exit_status = None  # as _world(): the program went on after a SystemExit
                if avg:
                    arr /= len(g.ranks)
                tensor._bump()
                return None
    what = "all_reduce"
    g = _enter(what, group, (tensor, "tensor"))
    if g is None:
        return _done(async_op)
    _debug_check(g, what, tensor, reduce=getattr(op, "name", op))
    buf, back = _buffer(tensor)
    mop = _mpi_op(op, tensor._data.dtype, what)
    MPI = mpi()
    if tensor._data.dtype != np.float16:
        try:
            _FAST_OPS[op, tensor._data.dtype] = (mop, getattr(op, "name", op) == "AVG")
            _IN_PLACE[0] = MPI.IN_PLACE
        except TypeError:  # an unhashable op object: always the checked path
            pass
    req = _start(g, "Allreduce", async_op, MPI.IN_PLACE, buf, mop)
    finish = _then_average(op, buf, g.size(), back)
    return _finish(Work([req], finish, what, g.timeout), async_op)


def broadcast(tensor, src, group=None, async_op=False):
    """Copy ``tensor`` from global rank ``src`` to every rank of ``group``, in place."""
    what = "broadcast"
    g = _enter(what, group, (tensor, "tensor"))
    if g is None:
        return _done(async_op)
    _debug_check(g, what, tensor, src=src)
    root = g.group_rank(src, what)
    buf, back = _buffer(tensor)
    req = _start(g, "Bcast", async_op, buf, root)
    return _finish(Work([req], back, what, g.timeout), async_op)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` over ``group`` into ``tensor`` on global rank ``dst`` only."""
    what = "reduce"
    g = _enter(what, group, (tensor, "tensor"))
    if g is None:
        return _done(async_op)
    _debug_check(g, what, tensor, dst=dst, reduce=getattr(op, "name", op))
    root = g.group_rank(dst, what)
    mop = _mpi_op(op, tensor._data.dtype, what)
    MPI = mpi()
    if g.rank() == root:
        buf, back = _buffer(tensor)
        req = _start(g, "Reduce", async_op, MPI.IN_PLACE, buf, mop, root)
        finish = _then_average(op, buf, g.size(), back)
    else:
        send = _sendbuf(tensor)
        req = _start(g, "Reduce", async_op, send, None, mop, root)
        finish = None
    return _finish(Work([req], finish, what, g.timeout), async_op)


def _check_list(tensors, n, like, what, name):
    if not isinstance(tensors, (list, tuple)) or len(tensors) != n:
        raise EmberValueError(f"{what}: {name} must be a list of {n} tensors (the group size), got "
                              f"{type(tensors).__name__} of length {len(tensors) if hasattr(tensors, '__len__') else '?'}")
    for i, t in enumerate(tensors):
        _check_tensor(t, what, f"{name}[{i}]")
        if like is not None and (t.shape != like.shape or t._data.dtype != like._data.dtype):
            raise EmberValueError(f"{what}: {name}[{i}] has shape {tuple(t.shape)} and dtype "
                                  f"{t._data.dtype}, expected {tuple(like.shape)} and "
                                  f"{like._data.dtype}")


def _split_into(outputs, stacked):
    for t, part in zip(outputs, stacked):
        _write(t, part)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Fill ``tensor_list[r]`` with rank r's ``tensor`` on every rank of ``group``."""
    what = "all_gather"
    g = _enter(what, group, (tensor, "tensor"))
    if g is None:
        return _done(async_op)
    _check_list(tensor_list, g.size(), tensor, what, "tensor_list")
    _debug_check(g, what, tensor)
    send = _sendbuf(tensor)
    recv = np.empty((g.size(),) + send.shape, send.dtype)
    req = _start(g, "Allgather", async_op, send, recv)
    return _finish(Work([req], lambda: _split_into(tensor_list, recv), what, g.timeout), async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Concatenate every rank's ``input_tensor`` along dim 0 (or stack them, when
    ``output_tensor`` has a leading dim of the group size) into ``output_tensor``."""
    what = "all_gather_into_tensor"
    g = _enter(what, group, (output_tensor, "output_tensor"), (input_tensor, "input_tensor"))
    if g is None:
        return _done(async_op)
    _check_holds(what, output_tensor, "output_tensor", input_tensor, "input_tensor", g.size())
    _debug_check(g, what, input_tensor)
    buf, back = _buffer(output_tensor)
    req = _start(g, "Allgather", async_op, _sendbuf(input_tensor), buf)
    return _finish(Work([req], back, what, g.timeout), async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input`` over ``group`` and give rank r the r-th of its equal dim-0 chunks."""
    what = "reduce_scatter_tensor"
    g = _enter(what, group, (output, "output"), (input, "input"))
    if g is None:
        return _done(async_op)
    _check_holds(what, input, "input", output, "output", g.size())
    _debug_check(g, what, input, reduce=getattr(op, "name", op))
    mop = _mpi_op(op, input._data.dtype, what)
    buf, back = _buffer(output)
    req = _start(g, "Reduce_scatter_block", async_op, _sendbuf(input), buf, mop)
    finish = _then_average(op, buf, g.size(), back)
    return _finish(Work([req], finish, what, g.timeout), async_op)


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    """Collect every rank's ``tensor`` into ``gather_list`` on global rank ``dst``."""
    what = "gather"
    g = _enter(what, group, (tensor, "tensor"))
    if g is None:
        return _done(async_op)
    root = g.group_rank(dst, what)
    _debug_check(g, what, tensor, dst=dst)
    send = _sendbuf(tensor)
    if g.rank() == root:
        _check_list(gather_list, g.size(), tensor, what, "gather_list")
        recv = np.empty((g.size(),) + send.shape, send.dtype)
        req = _start(g, "Gather", async_op, send, recv, root)
        finish = lambda: _split_into(gather_list, recv)  # noqa: E731
    else:
        req = _start(g, "Gather", async_op, send, None, root)
        finish = None
    return _finish(Work([req], finish, what, g.timeout), async_op)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    """Give rank r ``scatter_list[r]`` from global rank ``src``, written into ``tensor``."""
    what = "scatter"
    g = _enter(what, group, (tensor, "tensor"))
    if g is None:
        return _done(async_op)
    root = g.group_rank(src, what)
    _debug_check(g, what, tensor, src=src)
    buf, back = _buffer(tensor)
    if g.rank() == root:
        _check_list(scatter_list, g.size(), tensor, what, "scatter_list")
        send = np.stack([_sendbuf(t) for t in scatter_list])
    else:
        send = None
    req = _start(g, "Scatter", async_op, send, buf, root)
    return _finish(Work([req], back, what, g.timeout), async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """Send ``input_tensor_list[r]`` to rank r and receive rank r's into
    ``output_tensor_list[r]``; sizes may differ per rank pair (dtypes must match)."""
    what = "all_to_all"
    g = _enter(what, group)
    if g is None:
        return _done(async_op)
    n = g.size()
    _check_list(input_tensor_list, n, None, what, "input_tensor_list")
    _check_list(output_tensor_list, n, None, what, "output_tensor_list")
    dtypes = {t._data.dtype for t in list(input_tensor_list) + list(output_tensor_list)}
    if len(dtypes) != 1:
        raise EmberValueError(f"{what}: all tensors must share one dtype, got {sorted(map(str, dtypes))}")
    _debug_check(g, what, dtype=str(dtypes.pop()))
    parts = [_sendbuf(t).ravel() for t in input_tensor_list]
    send = np.concatenate(parts) if parts else np.empty(0)
    rcounts = [t._data.size for t in output_tensor_list]
    recv = np.empty(sum(rcounts), send.dtype)
    req, rdispl = _alltoallv(g, async_op, send, [p.size for p in parts], recv, rcounts)

    def finish():
        for t, off, c in zip(output_tensor_list, rdispl, rcounts):
            _write(t, recv[off:off + c])
    return _finish(Work([req], finish, what, g.timeout, result=output_tensor_list), async_op)


def _splits(sizes, rows, n, what, name):
    if sizes is None:
        if rows % n:
            raise EmberValueError(f"{what}: {name} has {rows} rows along dim 0, not divisible by "
                                  f"the group size {n}; pass its split sizes")
        return [rows // n] * n
    sizes = [int(k) for k in sizes]
    if len(sizes) != n or any(k < 0 for k in sizes) or sum(sizes) != rows:
        raise EmberValueError(f"{what}: {name} split sizes {sizes} must be {n} non-negative "
                              f"numbers summing to its {rows} rows along dim 0")
    return sizes


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    """Split ``input`` along dim 0 (in ``input_split_sizes`` rows, default equal parts), send
    part j to group rank j, and fill ``output`` with the parts received, in rank order
    (``output_split_sizes`` rows each). A contiguous ``output`` receives in place."""
    what = "all_to_all_single"
    g = _enter(what, group, (output, "output"), (input, "input"))
    if g is None:
        return _done(async_op)
    n = g.size()
    a, o = input._data, output._data
    if a.dtype != o.dtype:
        raise EmberValueError(f"{what}: output dtype {o.dtype} differs from input dtype {a.dtype}")
    if a.ndim == 0 or o.ndim == 0:
        raise EmberValueError(f"{what}: input {tuple(a.shape)} and output {tuple(o.shape)} need "
                              "a dim 0 to split")
    row = int(np.prod(a.shape[1:], dtype=np.int64))
    if int(np.prod(o.shape[1:], dtype=np.int64)) != row:
        raise EmberValueError(f"{what}: output rows {tuple(o.shape[1:])} and input rows "
                              f"{tuple(a.shape[1:])} must hold as many elements")
    scounts = [k * row for k in _splits(input_split_sizes, a.shape[0], n, what, "input")]
    rcounts = [k * row for k in _splits(output_split_sizes, o.shape[0], n, what, "output")]
    # shapes differ across ranks with uneven splits: compare the dtype and the rows' shape
    _debug_check(g, what, dtype=str(a.dtype), rows=list(a.shape[1:]))
    send = _sendbuf(input)
    buf, back = _buffer(output)
    req, _ = _alltoallv(g, async_op, send, scounts, buf, rcounts)
    return _finish(Work([req], back, what, g.timeout, result=send), async_op)


def barrier(group=None, async_op=False):
    """Block until every rank of ``group`` has reached the barrier."""
    g = _enter("barrier", group)
    if g is None:
        return _done(async_op)
    _debug_check(g, "barrier")
    req = _start(g, "Barrier", async_op)
    return _finish(Work([req], None, "barrier", g.timeout), async_op)


def _p2p_rank(g, peer, what):
    return g.group_rank(peer, what)


def isend(tensor, dst, group=None, tag=0):
    """Start sending ``tensor`` to global rank ``dst``; returns a Work."""
    what = "isend"
    _check_tensor(tensor, what)
    g = _group(group, what)
    send = _sendbuf(tensor)
    req = g.comm.Isend(send, _p2p_rank(g, dst, what), tag)
    return Work([req], None, what, g.timeout, result=send)


def _post_recv(tensor, src, group, tag, what, with_status=False):
    """Post the receive into ``tensor`` from global rank ``src`` (any rank when None, any tag
    when ``tag`` is None): (group, Work, its MPI.Status when ``with_status`` else None)."""
    _check_tensor(tensor, what)
    g = _group(group, what)
    MPI = mpi()
    buf, back = _buffer(tensor)
    status = MPI.Status() if with_status else None
    source = MPI.ANY_SOURCE if src is None else _p2p_rank(g, src, what)
    req = g.comm.Irecv(buf, source, MPI.ANY_TAG if tag is None else tag)
    work = Work([req], back, what, g.timeout, statuses=None if status is None else [status])
    return g, work, status


def irecv(tensor, src=None, group=None, tag=0):
    """Start receiving into ``tensor`` from global rank ``src`` (any rank when None)."""
    return _post_recv(tensor, src, group, tag, "irecv")[1]


def send(tensor, dst, group=None, tag=0):
    """Send ``tensor`` to global rank ``dst`` (blocking)."""
    isend(tensor, dst, group, tag).wait()


def recv(tensor, src=None, group=None, tag=0):
    """Receive into ``tensor`` from global rank ``src`` (any when None); returns the sender's
    global rank."""
    g, work, status = _post_recv(tensor, src, group, tag, "recv", with_status=True)
    work.wait()
    return g.ranks[status.Get_source()]
