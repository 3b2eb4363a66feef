"""Tensor: an ndarray plus autograd state. There is no separate Variable."""
import builtins
import warnings
import weakref

import numpy as np

from ember import _dtype
from ember._tensor_str import PRINT_OPTIONS, add_suffixes, tensor_str
from ember.autograd import dispatch as _dispatch_mod
from ember.autograd import views as _views
from ember.autograd.state import STATE
from ember.errors import (DimensionError, EmberError, EmberIndexError, EmberRuntimeError,
                          EmberTypeError, EmberValueError, ember_class, named)


_warned = {"float_of_grad": False}   # the once-per-process warnings given


class VersionCounter:
    """Shared by a tensor and its views; bumped by every in-place op. ``writes`` (None until a
    ``.data`` alias exists) is a one-element list shared with the counters of the tensor's
    ``.data`` aliases, counting in-place writes through any of them: autograd's version checks
    read ``v`` only (torch's ``.data`` is untracked), while inference plans built on frozen
    weights (``ember.jit.plan_live``) read both, so ``p.data.mul_(...)`` is seen there."""

    __slots__ = ("v", "writes")

    def __init__(self):
        self.v = 0
        self.writes = None


def check_device(dev, who=None):
    """Raise UnsupportedError unless ``dev`` (None, a string such as "cpu:0", a device or an
    int index) names the cpu: ember is a CPU-only framework, so "cuda", "mps", ... cannot run."""
    if dev is None or isinstance(dev, device):
        return
    if isinstance(dev, int) and not isinstance(dev, bool):
        kind = "cuda"  # torch reads a bare index as a CUDA device
    elif isinstance(dev, str):
        kind = dev.split(":")[0].strip()
    else:
        raise EmberTypeError(f"{who}: expected a device (a string such as 'cpu' or an "
                             f"ember.device), got {type(dev).__name__}")
    if kind != "cpu":
        from ember.errors import DeviceUnavailableError, UnsupportedError
        head = f"{who + ': ' if who else ''}"
        if kind not in _TORCH_DEVICE_TYPES:
            raise EmberRuntimeError(f"{head}unknown device type {kind!r} in {dev!r}: expected "
                                    f"one of {', '.join(_TORCH_DEVICE_TYPES)} (and ember runs "
                                    f"only on 'cpu')")
        cls = DeviceUnavailableError if kind == "cuda" else UnsupportedError
        what = "CUDA" if kind == "cuda" else kind
        raise cls(f"{head}ember runs only on the CPU; the {what} device {dev!r} is not available "
                  "(ember.cuda.is_available() and ember.accelerator.is_available() are False). "
                  "Use 'cpu'.")


_TORCH_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip",
                       "ve", "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
                       "privateuseone")


class device:
    """The device a tensor lives on; ember has only ``cpu`` (``device("cpu")``,
    ``device("cpu:0")``, ``device("cpu", 0)``). Any other type raises UnsupportedError."""

    __slots__ = ("type", "index")

    def __init__(self, type="cpu", index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        if isinstance(type, str) and ":" in type:
            type, _, idx = type.partition(":")
            if index is not None or not idx.isdigit():
                raise EmberRuntimeError(f"Invalid device string: '{type}:{idx}'")
            index = int(idx)
        check_device(type, "ember.device")
        if index is not None and (not isinstance(index, int) or index < 0):
            raise EmberRuntimeError(f"ember.device: device index must be a non-negative "
                                    f"int, got {index!r}")
        self.type = type
        self.index = index

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except EmberError:
                return False
        return isinstance(other, device) and other.type == self.type and \
            (other.index is None or self.index is None or other.index == self.index)

    def __hash__(self):
        return hash(self.type)

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


CPU = device("cpu")


def new_tensor(args, dt, who, device=None):
    """torch's legacy constructor: ``(*sizes)``, ``(size tuple / Size)`` or ``(data)``."""
    check_device(device, who)
    npd = dt.numpy
    if not args:
        return Tensor._make(np.empty((0,), npd))
    if builtins.all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        if builtins.any(a < 0 for a in args):
            raise EmberTypeError(f"{who}: negative dimension in size {tuple(args)}")
        return Tensor._make(np.empty(tuple(int(a) for a in args), npd))
    if len(args) == 1:
        data = args[0]
        if isinstance(data, Size):
            return Tensor._make(np.empty(tuple(data), npd))
        if isinstance(data, Tensor):
            data = data._data
        elif hasattr(data, "detach") and hasattr(data, "numpy"):
            data = data.detach().cpu().numpy()
        try:
            arr = np.array(data, dtype=npd)
        except (TypeError, ValueError) as e:
            raise EmberTypeError(f"{who}: cannot build a tensor from "
                                 f"{type(args[0]).__name__}: {e}") from None
        return Tensor._make(arr)
    raise EmberTypeError(f"{who}() takes sizes as ints or one sequence of data, got "
                         f"({', '.join(type(a).__name__ for a in args)})")


def _check_tensor_argument(method, name, value):
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"{method}(): argument '{name}' (position 1) must be Tensor, not "
                             f"{type(value).__name__}")


class _GradSlot:
    """``Tensor.grad``, kept in the instance dict under ``"grad"``. Unset, it reads None, with
    torch's warning on a non-leaf tensor that does not retain its gradient. Assigning checks as
    torch does: a Tensor or None (TypeError), not the tensor itself, and of the tensor's size and
    dtype (RuntimeError, torch's words)."""

    def __get__(self, tensor, owner=None):
        if tensor is None:
            return None   # ``Tensor.grad`` on the class
        try:
            return tensor.__dict__["grad"]
        except KeyError:
            pass
        if tensor._grad_fn is not None and not tensor._retains_grad:
            warnings.warn(NON_LEAF_GRAD, UserWarning, stacklevel=2)
        return None

    def __set__(self, tensor, value):
        if value is not None:
            from ember.autograd.node import check_assigned_grad
            check_assigned_grad(tensor, value)
        tensor.__dict__["grad"] = value

    def __delete__(self, tensor):
        tensor.__dict__.pop("grad", None)


NON_LEAF_GRAD = ("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                 "Its .grad attribute won't be populated during autograd.backward(). If you "
                 "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                 ".retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by "
                 "mistake, make sure you access the leaf Tensor instead. See "
                 "github.com/pytorch/pytorch/pull/30531 for more information.")


class Tensor:
    """An n-dimensional array that can take part in automatic differentiation."""

    # Hot attributes live in slots; rarely set ones default at class level and land in the
    # (lazily created) instance dict only when set, so making a Tensor sets three slots.
    __slots__ = ("_data", "_requires_grad", "_grad_fn", "_vc", "__weakref__", "__dict__")
    grad = _GradSlot()
    _base = None
    _view = None   # (base, view ops, creation) of a differentiable view: ember/autograd/views.py
    _output_nr = 0
    _acc = None
    _hooks = None
    _post_acc_hooks = None
    _retains_grad = False
    _retain_handle = None
    _inference = False   # made under inference_mode (Tensor.is_inference)

    def __init__(self, *args, requires_grad=False, device=None):
        """torch's ``Tensor(*sizes)`` (uninitialised), ``Tensor(data)`` or ``Tensor()``, all
        of the default dtype."""
        _init(self, new_tensor(args, _dtype.get_default_dtype(), "ember.Tensor", device)._data)
        if requires_grad:
            self.requires_grad_(True)

    @classmethod
    def _make(cls, arr):
        t = _new(cls)
        t._data = arr
        t._requires_grad = False
        t._grad_fn = None
        if STATE.inference:
            t._inference = True
        return t

    def is_inference(self):
        """Whether this is an inference tensor: made under ``inference_mode()`` (or a view or
        ``detach()`` of one). Such a tensor cannot require grad or be changed in place outside
        inference mode, nor be saved for backward (torch's RuntimeErrors)."""
        return self._inference

    # ---- version counter -------------------------------------------------------------------
    def _get_vc(self):
        try:
            return self._vc
        except AttributeError:  # created on first need (save, view or in-place op)
            vc = self._vc = VersionCounter()
            return vc

    def _bump(self):
        vc = self._get_vc()
        vc.v += 1
        if vc.writes is not None:
            vc.writes[0] += 1

    @property
    def _version(self):
        return self._get_vc().v

    # ---- metadata -------------------------------------------------------------------------
    @property
    def shape(self):
        tracer = STATE.tracer
        if tracer is not None:
            return Size(tracer.size(self, d) for d in range(self._data.ndim))
        return Size(self._data.shape)

    def size(self, dim=None):
        """Return the shape, or the size of dimension ``dim``."""
        if dim is None:
            return self.shape
        nd = self._data.ndim
        _check_dim("size", dim, nd)
        if STATE.tracer is not None:
            return STATE.tracer.size(self, dim % builtins.max(nd, 1))
        return self._data.shape[dim]

    @property
    def dtype(self):
        return _dtype._FROM_NUMPY[self._data.dtype]

    @property
    def device(self):
        return CPU

    @property
    def is_cuda(self):
        return False

    @property
    def is_cpu(self):
        """True: every ember tensor lives in CPU memory."""
        return True

    # torch's other device and layout predicates: False for ember's strided CPU tensors
    is_xpu = is_mps = is_meta = is_ipu = is_xla = is_maia = is_mtia = is_vulkan = is_mkldnn = \
        property(lambda self: False)
    is_quantized = is_sparse = is_sparse_csr = is_nested = property(lambda self: False)
    layout = _dtype.strided   # ember.sparse.SparseTensor: ember.sparse_coo

    def to_dense(self, dtype=None, *, masked_grad=None):
        """This (strided) tensor itself, or cast to ``dtype``, as torch's ``to_dense``."""
        if dtype is None:
            return self
        if not isinstance(dtype, _dtype.dtype):
            raise EmberTypeError(f"to_dense(): argument 'dtype' must be an ember.dtype, not "
                                 f"{type(dtype).__name__}")
        return self.to(dtype)

    def is_coalesced(self):
        """EmberRuntimeError as torch: only sparse COO tensors are coalesced or not."""
        raise EmberRuntimeError("is_coalesced expected sparse coordinate tensor layout but got "
                                "Strided")

    def to_sparse_csr(self, dense_dim=None):
        """UnsupportedError: ember's sparse tensors are COO only (``to_sparse()``)."""
        raise _compressed_layout("to_sparse_csr")

    def to_sparse_csc(self, dense_dim=None):
        """UnsupportedError: ember's sparse tensors are COO only (``to_sparse()``)."""
        raise _compressed_layout("to_sparse_csc")

    def to_sparse_bsr(self, blocksize, dense_dim=None):
        """UnsupportedError: ember's sparse tensors are COO only (``to_sparse()``)."""
        raise _compressed_layout("to_sparse_bsr")

    def to_sparse_bsc(self, blocksize, dense_dim=None):
        """UnsupportedError: ember's sparse tensors are COO only (``to_sparse()``)."""
        raise _compressed_layout("to_sparse_bsc")

    def sparse_dim(self):
        """0 for a strided tensor, as torch."""
        return 0

    def dense_dim(self):
        """The number of dimensions of a strided tensor, as torch."""
        return self._data.ndim

    def is_pinned(self, device=None):
        """False: ember has no page-locked host memory."""
        return False

    def pin_memory(self, device=None):
        """Raises EmberRuntimeError (a RuntimeError), as torch's ``Tensor.pin_memory()`` does
        on a machine without an accelerator: page-locked host memory only serves copies to an
        accelerator, and ember runs only on the CPU (``is_pinned()`` is False;
        ``DataLoader(pin_memory=True)`` warns and loads unpinned tensors, as torch's)."""
        what = "" if device is None else f" (device={device!r})"
        raise EmberRuntimeError(
            f"pin_memory{what}: Cannot access accelerator device when none is available: "
            f"ember runs only on the CPU, so the {self.dtype} tensor of shape "
            f"{tuple(self.shape)} cannot be pinned (ember.accelerator.is_available() is False)")

    def is_neg(self):
        """False: ember has no lazy negation bit."""
        return False

    def is_distributed(self):
        """False, as torch for every local tensor."""
        return False

    def is_signed(self):
        """Whether this tensor's dtype is signed (floating point, complex and signed
        integers)."""
        return self.dtype.is_signed

    def is_same_size(self, other):
        """Whether ``other`` has this tensor's shape."""
        _check_tensor_argument("is_same_size", "other", other)
        return self.shape == other.shape

    def is_nonzero(self):
        """The truth value of a one-element tensor; EmberRuntimeError for any other size."""
        if self._data.size != 1:
            what = "no values" if self._data.size == 0 else "more than one value"
            raise EmberRuntimeError(f"is_nonzero: Boolean value of Tensor with {what} is "
                                    f"ambiguous (shape {list(self._data.shape)})")
        return builtins.bool(self._data.reshape(()))

    def is_set_to(self, tensor):
        """Whether ``tensor`` views the same memory with the same shape and strides."""
        _check_tensor_argument("is_set_to", "tensor", tensor)
        a, b = self._data, tensor._data
        return a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and \
            a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        """Number of dimensions."""
        return self._data.ndim

    ndimension = dim

    def numel(self):
        """Number of elements."""
        tracer = STATE.tracer
        if tracer is not None and hasattr(tracer, "numel"):
            return tracer.numel(self)  # a traced SymInt
        return self._data.size

    nelement = numel

    def element_size(self):
        """Bytes per element."""
        return self._data.itemsize

    def stride(self, dim=None):
        """Strides in elements (not bytes), like torch."""
        s = tuple(x // self._data.itemsize for x in self._data.strides)
        if dim is None:
            return s
        _check_dim("stride", dim, self._data.ndim)
        return s[dim]

    def is_contiguous(self, memory_format=None):
        """Whether the data is C-contiguous."""
        return self._data.flags.c_contiguous

    def is_floating_point(self):
        """Whether the dtype is a floating-point type (bfloat16 included)."""
        return self._data.dtype.kind == "f" or self._data.dtype.name == "bfloat16"

    def is_complex(self):
        """Whether the dtype is a complex type (complex64 or complex128)."""
        return self._data.dtype.kind == "c"

    def data_ptr(self):
        """Address of the first element."""
        return self._data.__array_interface__["data"][0]

    def __len__(self):
        if self._data.ndim == 0:
            raise EmberTypeError("len() of a 0-d tensor")
        if STATE.tracer is not None:
            return STATE.tracer.size(self, 0)
        return self._data.shape[0]

    # ---- autograd state ---------------------------------------------------------------------
    @property
    def grad_fn(self):
        """The backward node that made this tensor (None for a leaf). A view's is regenerated
        from its base's current history when its version changed since it was computed."""
        info = self._view
        if info is None or self._view_v == self._vc.v:
            return self._grad_fn
        return _views.refresh(self, info)

    @grad_fn.setter
    def grad_fn(self, node):
        self._grad_fn = node

    @property
    def requires_grad(self):
        return self._requires_grad or (self._view is not None and _views.inherits_grad(self))

    @requires_grad.setter
    def requires_grad(self, value):
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad=True):
        """Set whether autograd records operations on this leaf tensor; returns self.

        Raises EmberRuntimeError for non-leaf tensors and for integer or bool dtypes.
        """
        if not isinstance(requires_grad, (builtins.bool, builtins.int, np.bool_)):
            raise EmberTypeError(f"requires_grad_(): argument 'requires_grad' must be bool, not "
                                 f"{type(requires_grad).__name__}")
        if self._grad_fn is not None:
            if not requires_grad:
                raise EmberRuntimeError(
                    "requires_grad_: you can only change requires_grad flags of leaf variables. "
                    "If you want to use "
                    "a computed variable in a subgraph that doesn't require differentiation use "
                    "var_no_grad = var.detach().")
            return self
        if requires_grad and self._inference and not STATE.inference:
            raise EmberRuntimeError("Setting requires_grad=True on inference tensor outside "
                                    "InferenceMode is not allowed.")
        if requires_grad and self._data.dtype.kind not in "fc" and \
                self._data.dtype.name != "bfloat16":
            raise EmberRuntimeError(f"requires_grad_: only Tensors of floating point dtype can "
                                    f"require gradients, got {self.dtype}")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self):
        return self._grad_fn is None

    @property
    def data(self):
        """This tensor's memory as a new leaf outside autograd, with a version counter of its
        own (as torch's: in-place changes through it are not tracked by autograd; they are
        counted in ``VersionCounter.writes``, which the two counters share)."""
        vc = self._get_vc()
        if vc.writes is None:
            vc.writes = [0]
        t = Tensor._make(self._data)
        t._vc = VersionCounter()
        t._vc.writes = vc.writes
        return t

    @data.setter
    def data(self, value):
        self._data = value._data if isinstance(value, Tensor) else np.asarray(value)

    def detach(self):
        """A new tensor sharing data (and version counter) with this one, outside the graph."""
        t = Tensor._make(self._data)
        if self._inference:
            t._inference = True
        t._vc = self._get_vc()
        t._base = self._base if self._base is not None else self
        tracer = STATE.tracer
        if tracer is not None:
            tracer.record(_DETACH, (self,), (), (t,))
        return t

    def detach_(self):
        """Detach this tensor from the graph in place. Raises EmberRuntimeError on a view."""
        if self._view is not None:
            raise EmberRuntimeError("detach_: Can't detach views in-place. Use detach() "
                                    "instead.")
        self._grad_fn = None
        self._requires_grad = False
        return self

    def share_memory_(self):
        """Move this tensor's data into shared memory in place (a no-op when it is already
        there; a view moves its base too), so the processes it is sent to through
        ``ember.multiprocessing`` map the same memory. The gradient is not moved. Returns self.
        Views taken before the move keep the old memory (docs/multiprocessing.md)."""
        from ember import _shm
        if _shm.block_of(self._data) is not None:
            return self
        base = self._base
        if base is not None:
            old = base._data
            base.share_memory_()
            a, new = self._data, base._data
            lo, hi = _shm.extent(old)
            at = _shm.address(a) - _shm.address(old)  # where this view starts in its base
            if new is not old and old.size and lo <= at < hi:
                blk = _shm.block_of(new)
                offset = _shm.address(new) - blk.addr + at
                try:
                    self._data = _shm.view(blk, a.shape, a.dtype, offset, a.strides)
                    return self
                except (TypeError, ValueError):  # not a view of its base's memory after all
                    pass
        self._data = _shm.share(self._data)
        return self

    def is_shared(self):
        """Whether this tensor's data is in shared memory (``share_memory_``)."""
        from ember import _shm
        return _shm.block_of(self._data) is not None

    def retain_grad(self):
        """Keep ``.grad`` for this non-leaf tensor after backward."""
        if self.grad_fn is None:
            return
        if self._retains_grad:
            return
        self._retains_grad = True
        ref = weakref.ref(self)

        def _retain(grad):
            t = ref()
            if t is not None and grad is not None:
                g = Tensor._make(grad._data.copy()) if not STATE.grad_enabled else grad
                t.grad = g if t.grad is None else t.grad + g
        self._retain_handle = self.grad_fn._add_pre_hook(self._output_nr, _retain)

    def _move_retain_grad(self):
        """After an in-place op gave this tensor a new ``grad_fn``: ``retain_grad`` follows it
        (torch keeps the gradient of the tensor's latest value; other hooks stay)."""
        h = self._retain_handle
        fn = self._grad_fn
        if h is not None and fn is not None:
            h.remove()
            self._retain_handle = fn._add_pre_hook(self._output_nr, h._item[1])

    @property
    def retains_grad(self):
        return self._retains_grad

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; it may return a new one."""
        if not callable(hook):
            raise EmberTypeError(f"register_hook: hook must be callable, got {type(hook).__name__}")
        if not self._requires_grad:
            raise EmberRuntimeError("register_hook: cannot register a hook on a tensor that "
                                    "doesn't require gradient")
        if self.grad_fn is not None:
            return self.grad_fn._add_pre_hook(self._output_nr, hook)
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(hook)
        from ember.autograd.node import _RemovableHandle
        return _RemovableHandle(self._hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(tensor)`` on this leaf after its ``.grad`` has been accumulated.

        Raises EmberRuntimeError on a non-leaf tensor or one that doesn't require grad."""
        if not callable(hook):
            raise EmberTypeError("register_post_accumulate_grad_hook: hook must be callable, got "
                                 f"{type(hook).__name__}")
        if not self._requires_grad or self.grad_fn is not None:
            raise EmberRuntimeError("register_post_accumulate_grad_hook: only leaf tensors that "
                                    "require grad can have post-accumulate-grad hooks")
        if self._post_acc_hooks is None:
            self._post_acc_hooks = []
        self._post_acc_hooks.append(hook)
        from ember.autograd.node import _RemovableHandle
        return _RemovableHandle(self._post_acc_hooks, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Compute gradients of this tensor w.r.t. graph leaves and accumulate them in ``.grad``.

        Raises EmberRuntimeError when this tensor is not part of a graph or ``gradient`` does not
        match its shape, EmberTypeError when ``gradient`` is not a Tensor."""
        from ember.autograd.engine import backward
        _check_backward(self, gradient, inputs)
        backward((self,), None if gradient is None else (gradient,), retain_graph, create_graph,
                 inputs=inputs)

    # ---- conversion -----------------------------------------------------------------------
    def _python_value(self, what):
        tracer = STATE.tracer
        if tracer is not None:
            tracer.python_value(self, what)

    def item(self):
        """The single element as a Python number; RuntimeError if numel != 1."""
        if self._data.size != 1:
            raise EmberRuntimeError(f"item: a Tensor with {self._data.size} elements cannot be "
                                    "converted to Scalar")
        self._python_value("item")
        return self._data.reshape(()).item()

    def tolist(self):
        """Nested Python lists of the elements."""
        self._python_value("tolist")
        return self._data.tolist()

    def numpy(self, force=False):
        """The underlying ndarray (shares memory). RuntimeError when it requires grad."""
        if self._requires_grad and not force:
            raise EmberRuntimeError("numpy: can't call numpy() on Tensor that requires grad. Use "
                                    "tensor.detach().numpy() instead.")
        self._python_value("numpy")
        return self._data

    def __array__(self, dtype=None, copy=None):
        self._python_value("__array__")
        a = self._data
        if dtype is not None and a.dtype != dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    def __dlpack__(self, *args, **kwargs):
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def _scalar(self, what, cast):
        if self._data.size != 1:  # torch: ValueError (TypeError for an index)
            cls = EmberTypeError if what == "index" else EmberValueError
            raise cls(f"{what}: only one element tensors can be converted to Python scalars, got "
                      f"a Tensor of shape {list(self._data.shape)}")
        self._python_value(what)
        v = self._data.reshape(()).item()
        if v.__class__ is builtins.complex and cast is not builtins.complex and \
                cast is not builtins.bool:
            raise EmberRuntimeError(f"{what}: a complex value ({v}) cannot be converted to "
                                    f"{cast.__name__}")
        return cast(v)

    def __bool__(self):
        if self._data.size != 1:
            raise EmberRuntimeError(f"bool: Boolean value of Tensor with {self._data.size} "
                                    "elements is ambiguous")
        return self._scalar("bool", builtins.bool)

    def __int__(self):
        return self._scalar("int", builtins.int)

    def __float__(self):
        if self._requires_grad and STATE.grad_enabled and not _warned["float_of_grad"]:
            _warned["float_of_grad"] = True   # once per process, as torch's TORCH_WARN_ONCE
            import warnings
            warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead to "
                          "unexpected behavior.\nConsider using tensor.detach() first.",
                          UserWarning, stacklevel=2)
        return self._scalar("float", builtins.float)

    def __index__(self):
        if self._data.dtype.kind not in "iub":
            raise EmberTypeError("index: only integer tensors of a single element can be "
                                 "converted to an index")
        return self._scalar("index", builtins.int)

    def __complex__(self):
        return self._scalar("complex", builtins.complex)

    def __iter__(self):
        if self._data.ndim == 0:
            raise EmberTypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    __hash__ = object.__hash__
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy ufuncs on tensors, as torch: ``np.exp(t)``, ``np.maximum(t, 2)`` run NumPy on
        the data (``numpy()``: a tensor that requires grad refuses) and give a Tensor. A binary
        operator or ufunc with a NumPy scalar or array first (``np.float32(2) * t``) runs the
        Tensor's reflected operator: ember's promotion and autograd, a Tensor."""
        if method != "__call__" or "out" in kwargs:
            return NotImplemented
        if len(inputs) == 2 and inputs[1] is self and not kwargs and \
                inputs[0].__class__ is not Tensor:
            reflected = _REFLECTED.get(ufunc.__name__)
            if reflected is not None:
                return getattr(self, reflected)(inputs[0])
        out = ufunc(*[x.numpy() if isinstance(x, Tensor) else x for x in inputs], **kwargs)
        if isinstance(out, tuple):
            return tuple(_from_ufunc(o) for o in out)
        return _from_ufunc(out)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """The result of a NumPy function that converted this tensor (``np.clip(t, 0, 1)``,
        ``np.argmax(t)``) as a Tensor, as torch's."""
        return _from_ufunc(array)

    def __contains__(self, element):
        if isinstance(element, (Tensor, int, float, bool)):
            return builtins.bool((self == element).any())
        raise EmberRuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, got "
                                f"{type(element).__name__}")

    def __reduce_ex__(self, proto):
        raise EmberTypeError("ember tensors are not picklable; use ember.save (safetensors) "
                             "instead")

    def __repr__(self):
        self._python_value("repr")
        return _format(self)

    def __format__(self, spec):
        """As torch: a 0-d Tensor (not a subclass such as Parameter) formats as its Python
        number (``f"{loss}"`` is ``0.25``, ``f"{acc:.2%}"`` works); any other tensor formats as
        ``str`` with an empty spec and raises TypeError for another spec."""
        if self._data.ndim == 0 and type(self) is Tensor:
            self._python_value("format")
            return format(self._data.item(), spec)
        return object.__format__(self, spec)

    def __deepcopy__(self, memo):
        t = Tensor._make(self._data.copy())
        t._requires_grad = self._requires_grad
        grad = self.__dict__.get("grad")   # a non-leaf's unset .grad would warn
        if grad is not None:
            t.grad = Tensor._make(grad._data.copy())
        if type(self) is not Tensor:
            t = type(self)._from_tensor(t) if hasattr(type(self), "_from_tensor") else t
        memo[id(self)] = t
        return t

    def __setitem__(self, key, value):
        from ember.ops.indexing import setitem
        try:
            setitem(self, key, value)
        except EmberError:
            raise
        except (IndexError, TypeError, ValueError) as e:  # from turning ``key`` into an index
            raise _index_error(e, self) from None

    def __getitem__(self, key):
        from ember.ops.indexing import getitem
        try:
            return getitem(self, key)
        except EmberError:
            raise
        except (IndexError, TypeError, ValueError) as e:  # from turning ``key`` into an index
            raise _index_error(e, self) from None


class Size(tuple):
    """A tensor's shape: a tuple of ints with ``numel()``."""

    __slots__ = ()

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return f"ember.Size({list(self)})"


_new = object.__new__


def _compressed_layout(who):
    from ember.errors import UnsupportedError
    return UnsupportedError(f"{who}: the compressed sparse layouts (CSR, CSC, BSR, BSC) are not "
                            f"supported; ember has sparse COO tensors only (to_sparse(), "
                            f"docs/sparse.md)")


# NumPy ufunc -> the Tensor method that computes ``ufunc(other, tensor)`` (Tensor.__array_ufunc__)
_REFLECTED = {"add": "__radd__", "subtract": "__rsub__", "multiply": "__rmul__",
              "divide": "__rtruediv__", "true_divide": "__rtruediv__",
              "floor_divide": "__rfloordiv__", "power": "__rpow__", "remainder": "__rmod__",
              "matmul": "__rmatmul__", "bitwise_and": "__rand__", "bitwise_or": "__ror__",
              "bitwise_xor": "__rxor__", "equal": "__eq__", "not_equal": "__ne__",
              "less": "__gt__", "less_equal": "__ge__", "greater": "__lt__",
              "greater_equal": "__le__"}


def _from_ufunc(a):
    """A NumPy ufunc's result on tensor data as a Tensor (a NumPy scalar as a 0-d one); a bool
    result becomes uint8, as torch's ``Tensor.__array_wrap__`` makes it (``np.isnan(t)``,
    ``np.logical_not(mask)`` are uint8 tensors in torch)."""
    if isinstance(a, (np.ndarray, np.generic)):
        a = np.array(a) if a.__class__ is not np.ndarray else a
        return Tensor._make(a.astype(np.uint8) if a.dtype == np.bool_ else a)
    return a


def _check_dim(what, dim, nd):
    if isinstance(dim, bool) or not isinstance(dim, (builtins.int, np.integer)):
        raise EmberTypeError(f"{what}(): argument 'dim' must be an int, not {type(dim).__name__}")
    if nd == 0:
        raise EmberIndexError(f"{what}: dimension specified as {dim} but tensor has no dimensions")
    if not -nd <= dim < nd:
        raise DimensionError(f"{what}: dimension {dim} out of range (expected to be in range of "
                             f"[{-nd}, {nd - 1}])")


def _check_backward(t, gradient, inputs):
    if not t._requires_grad:
        raise EmberRuntimeError("backward: element 0 of tensors does not require grad and does not "
                                "have a grad_fn")
    shape = list(t._data.shape)
    if gradient is None:
        if t._data.size != 1:
            raise EmberRuntimeError(f"backward: grad can be implicitly created only for scalar "
                                    f"outputs; got shape {shape}")
    elif not isinstance(gradient, Tensor):
        raise EmberTypeError(f"backward(): argument 'gradient' must be a Tensor or None, not "
                             f"{type(gradient).__name__}")
    elif list(gradient._data.shape) != shape:
        raise EmberRuntimeError(f"backward: gradient of shape {list(gradient._data.shape)} does "
                                f"not match the tensor's shape {shape}")
    if inputs is not None:
        items = (inputs,) if isinstance(inputs, Tensor) else inputs
        if not isinstance(items, (tuple, list)) or not builtins.all(
                isinstance(i, Tensor) for i in items):
            raise EmberTypeError(f"backward(): argument 'inputs' must be a Tensor or a sequence of "
                                 f"Tensors, not {type(inputs).__name__}")


def view_dtype(t, dtype):
    """``t.view(dtype)``: the same memory read as ``dtype``, with torch's size rules: the same
    shape when the element sizes match; otherwise the last dimension (stride 1) is split or
    merged. Not differentiable (as in torch) and not traceable (UnsupportedError)."""
    from ember.errors import UnsupportedError
    if STATE.tracer is not None:
        STATE.tracer.untraceable("view(dtype): a trace cannot record a dtype reinterpretation",
                                 UnsupportedError)
    a = t._data
    new = dtype.numpy
    old_size, new_size = a.itemsize, new.itemsize
    what = f"to view {t.dtype.name} as {dtype.name} (different element sizes)"
    if old_size != new_size:
        if a.ndim == 0:
            raise EmberRuntimeError(f"view(dtype): self.dim() cannot be 0 {what}")
        if a.shape[-1] != 1 and a.strides[-1] != old_size:
            raise EmberRuntimeError(f"view(dtype): self.stride(-1) must be 1 {what}, but got "
                                    f"{a.strides[-1] // old_size}")
        if new_size > old_size:
            ratio = new_size // old_size
            if a.shape[-1] % ratio:
                raise EmberRuntimeError(f"view(dtype): self.size(-1) must be divisible by {ratio} "
                                        f"{what}, but got {a.shape[-1]}")
            for i, st in enumerate(a.strides[:-1]):
                if st % new_size:
                    raise EmberRuntimeError(f"view(dtype): self.stride({i}) must be divisible by "
                                            f"{ratio} {what}, but got {st // old_size}")
            if a.__array_interface__["data"][0] % new_size:
                raise EmberRuntimeError(f"view(dtype): the data is not aligned {what}")
        if a.shape[-1] == 1 and a.strides[-1] != old_size:
            a = np.lib.stride_tricks.as_strided(a, strides=a.strides[:-1] + (old_size,))
    out = Tensor._make(a.view(new))
    out._vc = t._get_vc()
    out._base = t._base if t._base is not None else t
    return out


def _index_error(err, t):
    return ember_class(err)(named("index", str(err)) +
                            f" (self: {t._data.dtype}{list(t._data.shape)})")


def _init(t, arr):
    t._data = arr
    t._requires_grad = False
    t._grad_fn = None


def _format(t, indent=0):
    """``repr(t)`` as torch prints it; ``indent``: columns the text starts right of (a sparse
    tensor's values)."""
    a = t._data
    dt = t.dtype
    if dt.name == "bfloat16":   # printed through float32, as torch prints bfloat16
        a = a.astype(np.float32)
    default = _dtype.get_default_dtype()
    suffix = []
    if a.size == 0:
        if a.ndim != 1:
            suffix.append(f"size={tuple(a.shape)}")
        if dt is not default:
            suffix.append(f"dtype=ember.{dt.name}")
        body = "[]"
    else:
        if not PRINT_OPTIONS["edgeitems"]:
            suffix.append(f"size={tuple(a.shape)}")
        if dt not in (default, _dtype.default_complex(), _dtype.int64, _dtype.bool_):
            suffix.append(f"dtype=ember.{dt.name}")
        body = tensor_str(a, 7 + indent, dt.is_floating_point)
    try:
        fn = t.grad_fn
    except EmberError:   # a stale view torch refuses to regenerate still prints
        fn = t._grad_fn
    if fn is not None:
        suffix.append(f"grad_fn=<{fn.name()}>")
    elif t._requires_grad:
        suffix.append("requires_grad=True")
    return add_suffixes("tensor(" + body, suffix, 7 + indent)


_dispatch_mod.Tensor = Tensor
_dispatch_mod._make = Tensor._make
_DETACH = _dispatch_mod.Op("detach", None, None, ("self",), ())
