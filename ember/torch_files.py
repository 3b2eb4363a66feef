"""``torch.save``'s zip checkpoints read without unpickling (``ember.load`` of a ``.pt`` file).

A ``torch.save`` file is a zip archive: ``<name>/data.pkl`` describes the object as a pickle
program, ``<name>/data/<key>`` hold the tensors' storages as raw bytes (``byteorder`` names their
byte order). ``read`` interprets the pickle program's data opcodes itself (no ``pickle`` module,
nothing imported, nothing the file names is called): the globals it may name resolve only
through ``GLOBALS``, an allow-list of what ``torch.load(weights_only=True)`` (torch's default)
accepts — torch's tensor and Parameter rebuild functions (implemented here on NumPy), storage
types, dtypes, ``torch.device``, ``torch.Size``, ``collections.OrderedDict``, sets, ``complex``
and protocol 2's ``_codecs.encode`` for bytes — plus plain data torch's default refuses but
checkpoints often hold: ``frozenset``, ``slice``, ``bytearray`` and NumPy arrays and scalars of
number dtypes (rebuilt from their raw bytes; object and structured dtypes refused). ``BUILD``
only sets an ``OrderedDict``'s attributes (a state dict's ``_metadata``) and such an array's or
dtype's state. Any other global (a whole pickled Module, a user class, a function) is an
``UnsafeFileError`` naming it; ember never runs pickled code, ``weights_only=False`` included. TorchScript archives
(``torch.jit.save``: they hold code) and the legacy pre-1.6 format are refused with their reason.

Tensors come back as ember tensors on the CPU (C-contiguous copies: views that shared a storage
in the file no longer share memory), with ``requires_grad`` as saved; Parameters as
``ember.nn.Parameter``.
"""
import io
import re
import struct
import zipfile
from collections import OrderedDict

import numpy as np

from ember.errors import EmberRuntimeError

# storage types torch pickles (``torch.FloatStorage`` ...) -> ember dtype name
STORAGES = {"FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
            "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
            "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8",
            "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
            "ComplexDoubleStorage": "complex128"}
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
          "uint8", "bool", "complex64", "complex128", "float", "double", "half", "long", "int",
          "short", "cfloat", "cdouble")


class _Refused(Exception):
    """A global, opcode or construct outside what ``read`` accepts (its words as args[0])."""


class _Storage:
    __slots__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = dtype


def _ember():
    import ember
    return ember


def _tensor(storage, offset, size, stride):
    flat, _ = storage
    itemsize = flat.dtype.itemsize
    if not size:
        if not 0 <= offset < flat.size:
            raise _Refused(f"a 0-d tensor at offset {offset} of a storage of {flat.size} "
                           "elements")
        return _ember().from_numpy(np.array(flat[offset]))
    if any(s < 0 for s in stride) or any(n < 0 for n in size):
        raise _Refused(f"a tensor of size {tuple(size)} and stride {tuple(stride)}")
    if 0 not in size:
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if offset < 0 or last >= flat.size:
            raise _Refused(f"a tensor of size {tuple(size)}, stride {tuple(stride)} and offset "
                           f"{offset} beyond its storage of {flat.size} elements")
    view = np.lib.stride_tricks.as_strided(flat[offset:], tuple(size),
                                           tuple(s * itemsize for s in stride))
    return _ember().from_numpy(np.ascontiguousarray(view))


def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False,
                    backward_hooks=None, metadata=None):
    t = _tensor(storage, storage_offset, size, stride)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(data, requires_grad, backward_hooks, state=None):
    from ember.nn import Parameter
    return Parameter(data.detach(), requires_grad=requires_grad)


def _ordered_dict(items=()):
    return OrderedDict(items)


def _codecs_encode(text, encoding="latin1"):
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _Refused(f"_codecs.encode of {type(text).__name__} as {encoding!r}")
    return text.encode("latin1")


def _device(kind, index=None):
    return _ember().device("cpu")


def _size(dims=()):
    return _ember().Size(tuple(int(d) for d in dims))


class _NDArrayType:
    """``numpy.ndarray`` as a pickle names it (an argument of ``_reconstruct`` only)."""


_SIMPLE_KINDS = "biufc"     # NumPy dtypes of plain numbers: bool, int, uint, float, complex


def _np_dtype(code, align=False, copy=True):
    # a copy, as NumPy's own pickles ask: BUILD then sets its byte order, never the shared one's
    dt = np.dtype(code, False, True) if isinstance(code, str) and \
        re.fullmatch(r"[biufc][0-9]{1,2}", code) else None
    if dt is None or dt.kind not in _SIMPLE_KINDS or dt.fields is not None:
        raise _Refused(f"the NumPy dtype {code!r} (not a plain number type)")
    return dt


def _np_reconstruct(cls, shape, typecode):
    if not isinstance(cls, tuple) or not isinstance(cls[2], _NDArrayType):
        raise _Refused(f"numpy _reconstruct of {cls!r}")
    return np.ndarray.__new__(np.ndarray, (0,), "b")    # filled by BUILD, as NumPy's own


def _array_state(state):
    """Whether ``state`` is NumPy's pickled state of a plain-number array: (1, shape, dtype,
    is_fortran, raw bytes of exactly that many elements)."""
    if not (isinstance(state, tuple) and len(state) == 5 and state[0] == 1 and
            isinstance(state[1], tuple) and isinstance(state[2], np.dtype) and
            isinstance(state[3], bool) and isinstance(state[4], bytes)):
        return False
    shape, dt = state[1], state[2]
    if dt.kind not in _SIMPLE_KINDS or dt.fields is not None or \
            not all(isinstance(n, int) and n >= 0 for n in shape):
        return False
    return len(state[4]) == int(np.prod(shape, dtype=np.int64)) * dt.itemsize


def _np_scalar(dtype, data):
    if not isinstance(dtype, np.dtype) or dtype.kind not in _SIMPLE_KINDS or \
            not isinstance(data, bytes) or len(data) != dtype.itemsize:
        raise _Refused("a NumPy scalar that is not a plain number")
    return np.frombuffer(data, dtype)[0]


def _globals():
    table = {("collections", "OrderedDict"): _ordered_dict,
             ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
             ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
             ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
             ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
             ("torch", "device"): _device, ("torch", "Size"): _size,
             ("_codecs", "encode"): _codecs_encode,
             ("builtins", "set"): set, ("builtins", "frozenset"): frozenset,
             ("builtins", "complex"): complex, ("builtins", "slice"): slice,
             ("builtins", "bytearray"): bytearray}
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        table[module, "_reconstruct"] = _np_reconstruct
        table[module, "scalar"] = _np_scalar
    table["numpy", "ndarray"] = _NDArrayType()
    table["numpy", "dtype"] = _np_dtype
    for module, name in list(table):            # protocol 2 names Python 2's module
        if module == "builtins":
            table["__builtin__", name] = table[module, name]
    for name, dtype in STORAGES.items():
        table["torch", name] = _Storage(dtype)
    for name in DTYPES:
        table["torch", name] = ("dtype", name)
    return table


GLOBALS = _globals()
_CALLABLE = frozenset(k for k, v in GLOBALS.items() if callable(v))


def _mark_error(op):
    raise _Refused(f"opcode {op!r} without a MARK")


class _Reader:
    """The pickle program's data opcodes over a stack, a mark stack and a memo (protocols
    0-5, as ``pickle``'s own opcode table names them)."""

    def __init__(self, program, persistent):
        self.data, self.pos = program, 0
        self.stack, self.marks, self.memo = [], [], {}
        self.persistent = persistent

    def _take(self, n):
        if self.pos + n > len(self.data):
            raise _Refused("a pickle program that ends early")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def _line(self):
        end = self.data.find(b"\n", self.pos)
        if end < 0:
            raise _Refused("a pickle program that ends early")
        out = self.data[self.pos:end]
        self.pos = end + 1
        return out

    def _pop_mark(self):
        if not self.marks:
            _mark_error("MARK")
        start = self.marks.pop()
        items = self.stack[start:]
        del self.stack[start:]
        return items

    def _int(self, n, signed):
        return int.from_bytes(self._take(n), "little", signed=signed)

    def run(self):
        push, stack = self.stack.append, self.stack
        while True:
            op = self._take(1)
            if op == b"\x80":                           # PROTO
                self._take(1)
            elif op == b"\x95":                         # FRAME
                self._take(8)
            elif op == b".":                            # STOP
                if len(stack) != 1:
                    raise _Refused("a pickle program that leaves more than one value")
                return stack.pop()
            elif op == b"(":                            # MARK
                self.marks.append(len(stack))
            elif op == b")":
                push(())
            elif op == b"t":
                push(tuple(self._pop_mark()))
            elif op in (b"\x85", b"\x86", b"\x87"):     # TUPLE1..3
                n = op[0] - 0x84
                items = tuple(stack[-n:])
                del stack[-n:]
                push(items)
            elif op == b"]":
                push([])
            elif op == b"l":
                push(self._pop_mark())
            elif op == b"a":
                value = stack.pop()
                stack[-1].append(value)
            elif op == b"e":
                items = self._pop_mark()
                stack[-1].extend(items)
            elif op == b"}":
                push({})
            elif op == b"d":
                items = self._pop_mark()
                push(dict(zip(items[::2], items[1::2])))
            elif op == b"s":
                value, key = stack.pop(), stack.pop()
                stack[-1][key] = value
            elif op == b"u":
                items = self._pop_mark()
                target = stack[-1]
                for k, v in zip(items[::2], items[1::2]):
                    target[k] = v
            elif op == b"\x8f":                         # EMPTY_SET
                push(set())
            elif op == b"\x90":                         # ADDITEMS
                items = self._pop_mark()
                stack[-1].update(items)
            elif op == b"\x91":                         # FROZENSET
                push(frozenset(self._pop_mark()))
            elif op == b"N":
                push(None)
            elif op == b"\x88":
                push(True)
            elif op == b"\x89":
                push(False)
            elif op == b"J":
                push(self._int(4, True))
            elif op == b"K":
                push(self._int(1, False))
            elif op == b"M":
                push(self._int(2, False))
            elif op == b"\x8a":                         # LONG1
                push(int.from_bytes(self._take(self._int(1, False)), "little", signed=True))
            elif op == b"\x8b":                         # LONG4
                push(int.from_bytes(self._take(self._int(4, True)), "little", signed=True))
            elif op in (b"I", b"L"):
                text = self._line().rstrip(b"L")
                push({b"00": False, b"01": True}.get(text) if text in (b"00", b"01")
                     else int(text))
            elif op == b"G":
                push(struct.unpack(">d", self._take(8))[0])
            elif op == b"F":
                push(float(self._line()))
            elif op == b"X":
                push(self._take(self._int(4, False)).decode("utf-8", "surrogatepass"))
            elif op == b"\x8c":
                push(self._take(self._int(1, False)).decode("utf-8", "surrogatepass"))
            elif op == b"\x8d":
                push(self._take(self._int(8, False)).decode("utf-8", "surrogatepass"))
            elif op == b"V":
                push(self._line().decode("raw-unicode-escape"))
            elif op == b"B":
                push(bytes(self._take(self._int(4, False))))
            elif op == b"C":
                push(bytes(self._take(self._int(1, False))))
            elif op == b"\x8e":
                push(bytes(self._take(self._int(8, False))))
            elif op == b"\x96":                         # BYTEARRAY8
                push(bytearray(self._take(self._int(8, False))))
            elif op == b"T":
                push(bytes(self._take(self._int(4, True))).decode("latin1"))
            elif op == b"U":
                push(bytes(self._take(self._int(1, False))).decode("latin1"))
            elif op == b"q":
                self.memo[self._int(1, False)] = stack[-1]
            elif op == b"r":
                self.memo[self._int(4, False)] = stack[-1]
            elif op == b"p":
                self.memo[int(self._line())] = stack[-1]
            elif op == b"\x94":                         # MEMOIZE
                self.memo[len(self.memo)] = stack[-1]
            elif op in (b"h", b"j", b"g"):
                key = self._int(1, False) if op == b"h" else self._int(4, False) \
                    if op == b"j" else int(self._line())
                if key not in self.memo:
                    raise _Refused(f"a memo entry {key} read before it was written")
                push(self.memo[key])
            elif op == b"c":                            # GLOBAL
                module = self._line().decode("utf-8")
                push(self._global(module, self._line().decode("utf-8")))
            elif op == b"\x93":                         # STACK_GLOBAL
                name, module = stack.pop(), stack.pop()
                push(self._global(module, name))
            elif op == b"R":                            # REDUCE
                args, func = stack.pop(), stack.pop()
                push(self._call(func, args))
            elif op == b"\x81":                         # NEWOBJ
                args, cls = stack.pop(), stack.pop()
                push(self._call(cls, args))
            elif op == b"\x92":                         # NEWOBJ_EX
                kwargs, args, cls = stack.pop(), stack.pop(), stack.pop()
                if kwargs:
                    raise _Refused("NEWOBJ_EX with keyword arguments")
                push(self._call(cls, args))
            elif op == b"b":                            # BUILD
                state = stack.pop()
                self._build(stack[-1], state)
            elif op == b"Q":                            # BINPERSID
                push(self.persistent(stack.pop()))
            elif op == b"P":
                raise _Refused("a text persistent id")
            elif op == b"0":
                stack.pop()
            elif op == b"1":
                self._pop_mark()
            elif op == b"2":
                push(stack[-1])
            else:
                raise _Refused(f"pickle opcode {op!r} (what it builds is not plain data)")

    def _global(self, module, name):
        found = GLOBALS.get((module, name))
        if found is None:
            raise _Refused(f"the global {module}.{name}")
        if isinstance(found, tuple):                    # a dtype
            return getattr(_ember(), found[1])
        return (module, name, found)

    def _call(self, func, args):
        if not (isinstance(func, tuple) and len(func) == 3 and (func[0], func[1]) in _CALLABLE):
            raise _Refused(f"a call of {func!r}")
        if not isinstance(args, tuple):
            raise _Refused(f"{func[0]}.{func[1]} called with {type(args).__name__} arguments")
        return func[2](*args)

    @staticmethod
    def _build(obj, state):
        if isinstance(obj, OrderedDict) and isinstance(state, dict) and \
                all(isinstance(k, str) and not k.startswith("__") for k in state):
            for k, v in state.items():       # a state dict's _metadata
                setattr(obj, k, v)
            return
        if isinstance(obj, np.ndarray) and _array_state(state):
            obj.__setstate__(state)          # a plain-number array from its raw bytes
            return
        if isinstance(obj, np.dtype) and isinstance(state, tuple) and len(state) == 8 and \
                state[1] in ("<", ">", "|", "=") and \
                state[:1] + state[2:] == (3, None, None, None, -1, -1, 0):
            obj.__setstate__(state)          # its byte order, as NumPy's own pickles set it
            return
        raise _Refused(f"setting the state of a {type(obj).__name__}")


def is_torchscript(archive):
    return any(n.endswith(("/constants.pkl", "/code/")) or "/code/" in n
               for n in archive.namelist())


def read(data, name, who="ember.load"):
    """The object ``torch.save`` wrote into ``data`` (a zip archive's bytes); UnsafeFileError
    for what torch's default ``torch.load`` refuses too (module docstring), SerializationError
    for a corrupt archive."""
    from ember.serialization import SerializationError, UnsafeFileError
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as e:
        raise SerializationError(f"{who}: {name} is a damaged zip archive ({e})") from None
    if is_torchscript(archive):
        raise UnsafeFileError(f"{who}: {name} is a TorchScript archive (torch.jit.save); it "
                              "holds code, which ember does not run. Save the state_dict with "
                              "torch.save (or export to ONNX) and load that")
    pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise SerializationError(f"{who}: {name} is a zip archive without torch.save's "
                                 "<name>/data.pkl")
    prefix = pickles[0][:-len("data.pkl")]
    big = _read(archive, prefix + "byteorder", required=False) == b"big"
    storages = {}

    def persistent(pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and
                isinstance(pid[1], tuple) and isinstance(pid[1][2], _Storage)):
            raise _Refused(f"the persistent id {pid!r}")
        key = str(pid[2])
        if key not in storages:
            raw = _read(archive, f"{prefix}data/{key}")
            dt = np.dtype(getattr(_ember(), pid[1][2].dtype).numpy)
            if len(raw) % dt.itemsize:
                raise _Refused(f"storage {key} of {len(raw)} bytes for {dt.name} elements")
            flat = np.frombuffer(raw, dt.newbyteorder(">") if big else dt.newbyteorder("<"))
            storages[key] = (flat.astype(dt, copy=False), key)
        return storages[key]
    try:
        return _Reader(_read(archive, pickles[0]), persistent).run()
    except SerializationError:
        raise
    except _Refused as e:
        raise UnsafeFileError(
            f"{who}: {name} holds {e.args[0]}, which ember does not load: a torch.save file "
            "loads as torch.load(weights_only=True) reads it (tensors, Parameters, state "
            "dicts, lists, tuples, dicts, numbers, strings, dtypes), and ember never runs "
            "pickled code (weights_only=False included). Save the object's state_dict "
            "(tensors and plain values) instead") from None
    except (IndexError, KeyError, TypeError, ValueError, AttributeError, UnicodeDecodeError,
            RecursionError, EmberRuntimeError) as e:
        raise SerializationError(f"{who}: {name}: corrupt torch.save data ({type(e).__name__}: "
                                 f"{e})") from None


def _read(archive, member, required=True):
    from ember.serialization import SerializationError
    try:
        return archive.read(member)
    except KeyError:
        if not required:
            return None
        raise SerializationError(f"the archive has no member {member!r}") from None
    except (zipfile.BadZipFile, ValueError, OSError) as e:
        raise SerializationError(f"the archive's member {member!r} is damaged ({e})") from None
