"""Datasets, samplers and ``DataLoader`` (in the calling process or in worker processes),
following torch.utils.data.

Shuffling draws from an ``ember.Generator`` (the one given, else one seeded from the default
generator each epoch), so ``ember.manual_seed`` makes the batch order reproducible.
"""
import bisect
import collections.abc
import copy
import math
import multiprocessing
import numbers
import os
import warnings

import numpy as np

from ember import random as _random
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError, UnsupportedError
from ember.tensor import Tensor
from ember.utils.data._worker import WorkerInfo, get_worker_info, make_fetcher

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
           "ChainDataset", "StackDataset", "random_split", "DataLoader", "Sampler",
           "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler", "DistributedSampler", "default_collate", "default_convert",
           "get_worker_info", "WorkerInfo"]

# names torch.utils.data has at the top that live in a submodule here, imported on first use
# (``distributed`` asks ember.distributed for rank and world size)
_LAZY = {"DistributedSampler": "distributed"}
_SUBMODULES = ("dataloader", "dataset", "distributed", "sampler")


def __getattr__(name):
    import importlib
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------- datasets
class Dataset:
    """A map-style dataset: ``__getitem__(index)`` and usually ``__len__``."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read by iterating it (``__iter__``)."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other):
        raise UnsupportedError("ember does not chain IterableDatasets")


class TensorDataset(Dataset):
    """Samples are the i-th rows of each tensor (all share their first dimension)."""

    def __init__(self, *tensors):
        if any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise EmberValueError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise EmberValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise EmberValueError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise EmberValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        sample = idx if d == 0 else idx - self.cumulative_sizes[d - 1]
        return self.datasets[d][sample]


class ChainDataset(IterableDataset):
    """Several iterable datasets one after another (built lazily: each is iterated in turn)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def _each(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise EmberTypeError(f"ChainDataset only supports IterableDataset, got "
                                     f"{type(d).__name__}")
            yield d

    def __iter__(self):
        for d in self._each():
            yield from d

    def __len__(self):
        return sum(len(d) for d in self._each())


class StackDataset(Dataset):
    """Datasets of one length side by side: item ``i`` is the tuple of their items ``i``
    (datasets given positionally) or the dict of them by name (given as keywords)."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise EmberValueError("StackDataset: give the datasets either positionally (tuple "
                                  "items) or as keywords (dict items), not both")
        if not args and not kwargs:
            raise EmberValueError("StackDataset: at least one dataset should be passed")
        self.datasets = args if args else kwargs
        sizes = [len(d) for d in (args or kwargs.values())]
        if any(n != sizes[0] for n in sizes):
            raise EmberValueError(f"StackDataset: size mismatch between datasets ({sizes})")
        self._length = sizes[0]

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self):
        return self._length


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping Subsets of the given lengths (or fractions summing
    to 1). Raises ValueError when the lengths do not add up."""
    gen = _random.resolve(generator)
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = [int(math.floor(n * frac)) for frac in lengths]
        rem = n - sum(counts)
        for i in range(rem):
            counts[i % len(counts)] += 1
        for i, c in enumerate(counts):
            if c == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              "empty dataset.", stacklevel=2)
        lengths = counts
    if sum(lengths) != n:
        raise EmberValueError("Sum of input lengths does not equal the length of the input "
                              "dataset!")
    perm = gen.permutation(n).tolist()
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[offset:offset + length]))
        offset += length
    return out


# ---------------------------------------------------------------------------- samplers
class Sampler:
    """Iterates indices of a dataset."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


def _epoch_generator(generator):
    if generator is not None:
        return generator
    seed = int(_random.default_generator.integers(0, 2 ** 62, ()))
    return _random.Generator().manual_seed(seed)


_CHUNK = 32  # indices drawn per generator call when sampling with replacement (torch's)


def _check_num_samples(num_samples):
    if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
        raise EmberValueError(f"num_samples should be a positive integer value, but got "
                              f"num_samples={num_samples}")


class RandomSampler(Sampler):
    """A random permutation of the dataset's indices, or (``replacement=True``)
    ``num_samples`` uniform draws, as torch's. Indices are drawn lazily while iterating:
    32 at a time with replacement, one permutation at a time without, so a huge
    ``num_samples`` costs no memory up front. Raises EmberTypeError for a non-bool
    ``replacement``, EmberValueError for a ``num_samples`` that is not a positive integer."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise EmberTypeError(f"replacement should be a boolean value, but got "
                                 f"replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise EmberValueError(f"num_samples should be a positive integer value, but got "
                                  f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        g = _epoch_generator(self.generator)
        if self.replacement:
            for _ in range(self.num_samples // _CHUNK):
                yield from g.integers(0, n, (_CHUNK,)).tolist()
            yield from g.integers(0, n, (self.num_samples % _CHUNK,)).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from g.permutation(n).tolist()
        yield from g.permutation(n).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        g = _epoch_generator(self.generator)
        return iter([self.indices[i] for i in g.permutation(len(self.indices)).tolist()])

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices in ``[0, len(weights))`` drawn with probabilities proportional
    to ``weights`` (a 1-d sequence, kept as a float64 tensor), as torch's. With replacement the
    draws are made lazily, 32 at a time (memory independent of ``num_samples``); without,
    ``num_samples`` may not exceed ``len(weights)`` and each index appears at most once, in
    the order of successive weighted draws (zero-weight indices last). Raises EmberValueError
    for bad arguments, and EmberRuntimeError while iterating over weights that are no
    distribution (as torch's ``multinomial``)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        _check_num_samples(num_samples)
        if not isinstance(replacement, bool):
            raise EmberValueError(f"replacement should be a boolean value, but got "
                                  f"replacement={replacement}")
        w = weights._data if isinstance(weights, Tensor) else weights
        w = np.array(w, dtype=np.float64)
        if w.ndim != 1:
            raise EmberValueError(f"weights should be a 1d sequence but given weights have "
                                  f"shape {tuple(w.shape)}")
        self.weights = Tensor._make(w)
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def _checked_weights(self):
        w = self.weights._data
        if not np.isfinite(w).all():
            raise EmberRuntimeError("invalid multinomial distribution (encountering "
                                    "probability entry = infinity or NaN)")
        if (w < 0).any():
            raise EmberRuntimeError("invalid multinomial distribution (encountering "
                                    "probability entry < 0)")
        if not w.sum() > 0:
            raise EmberRuntimeError("invalid multinomial distribution (sum of probabilities "
                                    "<= 0)")
        if not self.replacement:
            if self.num_samples > w.shape[0]:
                raise EmberRuntimeError(f"cannot sample n_sample > prob_dist.size(-1) samples "
                                        f"without replacement (num_samples="
                                        f"{self.num_samples}, {w.shape[0]} weights)")
        return w

    def __iter__(self):
        w = self._checked_weights()
        g = _epoch_generator(self.generator)
        if not self.replacement:
            # successive draws without replacement = the smallest exponential race times
            # E_i / w_i (E_i ~ Exp(1)), in increasing order; as torch, zero-weight indices
            # come last, in random order, once the others are exhausted
            zero = w == 0
            race = -np.log1p(-g.random(w.shape[0])) / np.where(zero, 1.0, w)
            yield from np.lexsort((race, zero))[:self.num_samples].tolist()
            return
        cdf = np.cumsum(w)
        total, last = cdf[-1], int(np.flatnonzero(w)[-1])
        chunks, rest = divmod(self.num_samples, _CHUNK)
        for i in range(chunks + 1):
            idx = np.searchsorted(cdf, g.random(_CHUNK if i < chunks else rest) * total,
                                  side="right")
            yield from np.minimum(idx, last).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise EmberValueError(f"batch_size should be a positive integer value, but got "
                                  f"batch_size={batch_size}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


# ---------------------------------------------------------------------------- collation
def default_convert(data):
    """ndarrays to Tensors, recursively; everything else unchanged."""
    if isinstance(data, np.ndarray):
        return Tensor._make(data)
    if isinstance(data, dict):
        return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(d) for d in data)
    return data


_COLLATE_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                  "lists; found {}")


def _stack(arrays):
    """One array stacking equal-shaped ``arrays``; raises torch.stack's RuntimeError naming
    the first entry whose shape differs (variable-length samples need a ``collate_fn``)."""
    shape = arrays[0].shape
    for i, a in enumerate(arrays):
        if a.shape != shape:
            raise EmberRuntimeError(f"stack expects each tensor to be equal size, but got "
                                    f"{list(shape)} at entry 0 and {list(a.shape)} at entry {i}")
    return Tensor._make(np.stack(arrays))


def default_collate(batch):
    """Stack a list of samples into a batch as torch's ``default_collate``: Tensors and
    ndarrays stacked, NumPy scalars to a tensor of their dtype, Python floats to float64 and
    ints to int64, strings kept as they are batched; mappings (of their own type), namedtuples
    and sequences collated element-wise (tuples into lists).

    Raises RuntimeError for samples of different shapes or sequences of different lengths, and
    TypeError for an element type it cannot batch (string or object arrays included).
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _stack([b._data for b in batch])
    if isinstance(elem, np.ndarray):   # subclasses (memmap, matrix) as plain ndarrays
        if elem.dtype.kind in "SaUO":
            raise EmberTypeError(_COLLATE_ERROR.format(elem.dtype))
        return _stack([np.asarray(b) for b in batch])
    if isinstance(elem, (np.bool_, np.number)):   # a NumPy scalar keeps its dtype
        return Tensor._make(np.array(batch))
    if isinstance(elem, bool):
        return Tensor._make(np.array(batch, np.bool_))
    if isinstance(elem, numbers.Integral):
        return Tensor._make(np.array(batch, np.int64))
    if isinstance(elem, numbers.Real):
        return Tensor._make(np.array(batch, np.float64))
    if isinstance(elem, (str, bytes)):
        return batch  # as torch: the samples' own sequence (a tuple inside a tuple sample)
    if isinstance(elem, collections.abc.Mapping):
        out = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)   # an OrderedDict, defaultdict or dict subclass stays one
                clone.update(out)
                return clone
            return type(elem)(out)
        except TypeError:
            return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise EmberRuntimeError("each element in list of batch should be of equal size")
        return [default_collate(s) for s in zip(*batch)]   # a list for tuples too, as torch
    raise EmberTypeError(_COLLATE_ERROR.format(type(elem)))


# ---------------------------------------------------------------------------- loader
class _InfiniteConstantSampler(Sampler):
    """None forever: the index of each item read from an IterableDataset."""

    def __iter__(self):
        while True:
            yield None


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise EmberValueError(f"DataLoader: {name} option should be an int >= {minimum}, but got "
                              f"{name}={value!r}")


def _available_cpus():
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


class _SingleProcessDataLoaderIter:
    """What ``iter(loader)`` gives with ``num_workers=0`` (torch's class of that name): the
    batches in the sampler's order, fetched in this process; ``len()`` is the loader's. A
    StopIteration from the dataset ends it (map-style too, as torch's; the generator this
    replaced turned that into a RuntimeError); Python 2's ``.next()`` does not exist, as on
    torch."""

    def __init__(self, loader):
        self._loader = loader
        self._iterable = loader._iterable
        self._fetcher = make_fetcher(loader._iterable, loader.dataset, loader._auto_collation,
                                     loader.collate_fn, loader.drop_last, loader._fast_tensor())
        self._sampler_iter = iter(loader._index_sampler)
        self._num_yielded = 0

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        index = next(self._sampler_iter)
        batch = self._fetcher.fetch(index)
        self._num_yielded += 1
        return batch


class DataLoader:
    """Iterates batches of ``dataset``, with torch.utils.data.DataLoader's arguments and behavior.

    ``num_workers=0`` loads in the calling process. ``num_workers > 0`` starts that many worker
    processes (``multiprocessing_context``: ``'fork'``, ``'spawn'``, ``'forkserver'`` or a
    context object; default the platform's default start method, as torch). The sampler runs in
    this process; batch indices go to the workers round-robin, ``prefetch_factor`` (default 2)
    batches in flight per worker, and batches come back in sampler order (``in_order=False``:
    as they are ready). In a worker, ``collate_fn`` runs on the samples, ``worker_init_fn
    (worker_id)`` runs once at start, and ``get_worker_info()`` returns ``(id, num_workers,
    seed, dataset)``. An ``IterableDataset`` is iterated in full by each worker's copy: shard
    it with ``get_worker_info()``.

    Seeding: each ``iter(loader)`` (with persistent workers, the first) draws ``base_seed``
    from ``generator`` (else ember's default generator), before the sampler draws; worker
    ``i`` seeds Python's ``random`` and ember's default generator with ``base_seed + i`` and
    NumPy's global RNG from a SeedSequence of (i, base_seed), as torch seeds its workers. So the
    same ``generator`` seed gives the same data, whatever ``num_workers``.

    ``persistent_workers=True`` keeps the workers (and their dataset copies) across epochs.
    ``timeout`` (seconds, > 0) bounds the wait for each batch. ``pin_memory`` is accepted and
    does nothing (a CPU framework has no pinned memory; it warns as torch does without an
    accelerator).

    Transfer: workers pickle their batches to this process (Tensors and NumPy arrays as raw
    out-of-band buffers written to and read from a pipe without an intermediate copy). The pipe
    connects this process with its own children, a trusted channel: unpickling can run code,
    which is only ever code the workers were given. With ``'spawn'``/``'forkserver'`` the
    dataset, ``collate_fn`` and ``worker_init_fn`` are pickled to the workers, so they must be
    importable (defined at module level), and the main module needs an
    ``if __name__ == "__main__":`` guard.

    Errors: an exception in a worker is raised here as an ember error (the matching builtin
    class, e.g. ValueError -> EmberValueError) whose message names the worker and holds its
    original traceback; a worker that dies (a signal, the OOM killer) is an EmberRuntimeError
    naming it. Either way, and when the iterator is dropped or the loop broken, all workers are
    shut down and joined.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise EmberValueError("num_workers option should be non-negative; use num_workers=0 to "
                                  "disable multiprocessing.")
        if not isinstance(timeout, (int, float)) or timeout < 0:
            raise EmberValueError("timeout option should be non-negative")
        if num_workers == 0:
            if prefetch_factor is not None:
                raise EmberValueError("prefetch_factor option could only be specified in "
                                      "multiprocessing. let num_workers > 0 to enable "
                                      "multiprocessing, otherwise set prefetch_factor to None.")
            if persistent_workers:
                raise EmberValueError("persistent_workers option needs num_workers > 0")
            if timeout:
                raise EmberValueError("DataLoader: timeout applies to worker processes; it needs "
                                      "num_workers > 0")
        elif prefetch_factor is None:
            prefetch_factor = 2
        else:
            _check_int("prefetch_factor", prefetch_factor, 1)
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = self._check_context(multiprocessing_context, num_workers)
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._iterator = None
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise EmberValueError("DataLoader with IterableDataset: expected unspecified "
                                      f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise EmberValueError("DataLoader with IterableDataset: expected unspecified "
                                      "sampler")
        if sampler is not None and shuffle:
            raise EmberValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise EmberValueError("batch_sampler option is mutually exclusive with batch_size, "
                                      "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise EmberValueError("batch_size=None option disables auto-batching and is mutually "
                                  "exclusive with drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            else:
                sampler = RandomSampler(dataset, generator=generator) if shuffle \
                    else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        cpus = _available_cpus()
        if num_workers > 0 and cpus is not None and num_workers > cpus:
            warnings.warn(f"This DataLoader will create {num_workers} worker processes in total. "
                          f"Our suggested max number of worker in current system is {cpus}, "
                          "which is smaller than what this DataLoader is going to create. Please "
                          "be aware that excessive worker creation might get DataLoader running "
                          "slow or even freeze, lower the worker number to avoid potential "
                          "slowness/freeze if necessary.", stacklevel=2)

    @staticmethod
    def _check_context(ctx, num_workers):
        if ctx is None:
            return None
        if num_workers == 0:
            raise EmberValueError("multiprocessing_context can only be used with multi-process "
                                  f"loading (num_workers > 0), but got num_workers={num_workers}")
        if isinstance(ctx, str):
            methods = multiprocessing.get_all_start_methods()
            if ctx not in methods:
                raise EmberValueError(f"multiprocessing_context option should specify a valid "
                                      f"start method in {methods!r}, but got "
                                      f"multiprocessing_context={ctx!r}")
            return multiprocessing.get_context(ctx)
        if not isinstance(ctx, multiprocessing.context.BaseContext):
            raise EmberTypeError("multiprocessing_context option should be a valid context object "
                                 "or a string specifying the start method, but got "
                                 f"multiprocessing_context={ctx!r}")
        return ctx

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        """What the loader iterates: batches of indices (auto-collation), else indices."""
        return self.batch_sampler if self._auto_collation else self.sampler

    def _fast_tensor(self):
        return type(self.dataset) is TensorDataset and self.collate_fn is default_collate

    def _base_seed(self):
        return int(_random.resolve(self.generator).integers(0, 2 ** 63 - 1, ()))

    def __iter__(self):
        if self.pin_memory:
            # (attributed here, not to the caller: Python's default filter shows it once, as
            # torch's, not once per loop that iterates a loader)
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then "
                          "device pinned memory won't be used.")
        if self.num_workers == 0:
            self._base_seed()  # drawn as torch does, so the sampler's stream is that of workers
            return _SingleProcessDataLoaderIter(self)
        from ember.utils.data._loader_iter import MultiProcessingIter
        if not self.persistent_workers:
            return MultiProcessingIter(self, self._base_seed())
        if self._iterator is None or self._iterator._shutdown:
            self._iterator = MultiProcessingIter(self, self._base_seed())
        else:
            self._iterator._reset()
        return self._iterator

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size:
                return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)
