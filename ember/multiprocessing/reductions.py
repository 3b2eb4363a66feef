"""How tensors cross a process boundary: ``multiprocessing``'s ``ForkingPickler`` (the pickler
of ``Process`` arguments under spawn/forkserver, of ``Queue``, ``Pipe`` and ``Pool``) sends a
tensor as the descriptor of its shared-memory block plus shape, dtype, strides and offset; the
receiver maps the same block, so writes on either side are seen by both. A tensor not yet in
shared memory is moved there first, in place (as torch does). ``.grad`` is not sent: gradients
stay per process. Plain ``pickle`` still refuses tensors (``ember.save`` is the file format);
this channel is only for a program's own processes.
"""
from multiprocessing import reduction

from ember import _shm
from ember.errors import EmberRuntimeError, UnsupportedError
from ember.tensor import Tensor

_STRATEGY = "file_descriptor"
_ALL_STRATEGIES = {"file_descriptor"}


def set_sharing_strategy(new_strategy):
    """Set how tensors are shared between processes; ember has one strategy,
    ``"file_descriptor"`` (``get_all_sharing_strategies()``). ``"file_system"`` (shared files
    passed by name, cleaned up by a manager process) raises UnsupportedError; any other name
    raises EmberRuntimeError."""
    if new_strategy == "file_system":
        raise UnsupportedError("set_sharing_strategy: the 'file_system' strategy is not "
                               "supported: ember shares a tensor's memory through an unnamed "
                               "file whose descriptor is passed to the receiving process "
                               "('file_descriptor'), so nothing can be left behind in /dev/shm "
                               "(docs/multiprocessing.md)")
    if new_strategy not in _ALL_STRATEGIES:
        raise EmberRuntimeError(f"set_sharing_strategy: invalid sharing strategy "
                                f"{new_strategy!r}, expected one of {_ALL_STRATEGIES}")


def get_sharing_strategy():
    """The strategy used to share tensors: ``"file_descriptor"``."""
    return _STRATEGY


def get_all_sharing_strategies():
    """The strategies this system supports: ``{"file_descriptor"}``."""
    return set(_ALL_STRATEGIES)


def reduce_tensor(t):
    """The ``ForkingPickler`` reduction of a tensor: moves it into shared memory (in place)
    and returns how the receiving process maps it. Raises EmberRuntimeError for a non-leaf
    tensor that requires grad (autograd does not cross processes)."""
    if t._requires_grad and t.grad_fn is not None:
        raise EmberRuntimeError(
            "reduce_tensor: Cowardly refusing to serialize non-leaf tensor which requires_grad, "
            "since autograd does not support crossing process boundaries. If you just want to "
            "transfer the data, call detach() on the tensor before serializing (e.g., putting "
            "it on the queue).")
    t.share_memory_()
    a = t._data
    blk = _shm.block_of(a)
    offset = _shm.address(a) - blk.addr
    return (rebuild_tensor, (type(t), blk, a.dtype, a.shape, a.strides, offset,
                             t._requires_grad))


def rebuild_tensor(cls, blk, dtype, shape, strides, offset, requires_grad):
    """The receiving side of ``reduce_tensor``: a ``cls`` tensor over the sender's block."""
    t = cls._make(_shm.view(blk, shape, dtype, offset, strides))
    t._requires_grad = bool(requires_grad)
    return t


def reduce_block(blk):
    """A shared block travels as a duplicate of its file descriptor (sent over a Unix socket,
    or inherited by a child being started); one pickle sends each block once."""
    return (rebuild_block, (reduction.DupFd(blk.fd), blk.size))


def rebuild_block(dup_fd, size):
    """The receiving side of ``reduce_block``: this process's mapping of the block."""
    return _shm.attach(dup_fd.detach(), size)


def _subclasses(cls):
    yield cls
    for sub in cls.__subclasses__():
        yield from _subclasses(sub)


def init_reductions():
    """Register ``reduce_tensor`` with ``ForkingPickler`` for Tensor, Parameter and each other
    subclass defined so far (the pickler looks reductions up by exact type); a subclass defined
    later is registered by calling this again."""
    import ember.nn.parameter  # noqa: F401  (Parameter, as torch registers it)
    reduction.ForkingPickler.register(_shm.Block, reduce_block)
    for cls in _subclasses(Tensor):
        reduction.ForkingPickler.register(cls, reduce_tensor)
