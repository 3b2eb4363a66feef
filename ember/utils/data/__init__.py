"""Datasets, samplers and ``DataLoader`` (single process), following torch.utils.data.

Shuffling draws from an ``ember.Generator`` (the one given, else one seeded from the default
generator each epoch), so ``ember.manual_seed`` makes the batch order reproducible.
"""
import bisect
import math
import numbers
import warnings

import numpy as np

from ember import random as _random
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError, UnsupportedError
from ember.tensor import Tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
           "random_split", "DataLoader", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "default_collate",
           "default_convert", "get_worker_info"]


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


class RandomSampler(Sampler):
    """A random permutation (or draws with replacement) of the dataset's indices."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
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
            return iter(g.integers(0, n, (self.num_samples,)).tolist())
        out = []
        for _ in range(self.num_samples // n):
            out.extend(g.permutation(n).tolist())
        out.extend(g.permutation(n).tolist()[:self.num_samples % n])
        return iter(out)

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
    def __init__(self, weights, num_samples, replacement=True, generator=None):
        w = weights._data if isinstance(weights, Tensor) else np.asarray(weights)
        self.weights = np.asarray(w, np.float64)
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        g = _epoch_generator(self.generator)
        p = self.weights / self.weights.sum()
        return iter(g.choice(len(p), self.num_samples, replace=self.replacement, p=p).tolist())

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


def default_collate(batch):
    """Stack a list of samples into a batch: Tensors/ndarrays stacked, numbers to tensors,
    tuples/lists/dicts collated element-wise, strings kept as lists.

    Raises TypeError for an element type it cannot batch.
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return Tensor._make(np.stack([b._data for b in batch]))
    if isinstance(elem, np.ndarray):
        return Tensor._make(np.stack(batch))
    if isinstance(elem, (bool, np.bool_)):
        return Tensor._make(np.array(batch, np.bool_))
    if isinstance(elem, numbers.Integral):
        return Tensor._make(np.array(batch, np.int64))
    if isinstance(elem, numbers.Real):
        return Tensor._make(np.array(batch, np.float64))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, dict):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, (list, tuple)):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise EmberRuntimeError("each element in list of batch should be of equal size")
        out = [default_collate(s) for s in zip(*batch)]
        return tuple(out) if isinstance(elem, tuple) else out
    raise EmberTypeError("default_collate: batch must contain tensors, numpy arrays, numbers, "
                         f"dicts or lists; found {type(elem)}")


def get_worker_info():
    """Always None: ember's DataLoader loads in the calling process."""
    return None


# ---------------------------------------------------------------------------- loader
class DataLoader:
    """Iterates batches of ``dataset`` (torch's arguments; ``num_workers`` > 0 is accepted and
    loads in the calling process)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise EmberValueError("num_workers option should be non-negative; use num_workers=0 to "
                                  "disable multiprocessing.")
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
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
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle \
                else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self._auto_collation = batch_sampler is not None or (self._iterable and batch_size)
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    def _fast_tensor_batch(self, indices):
        ds = self.dataset
        if type(ds) is TensorDataset and self.collate_fn is default_collate:
            idx = np.asarray(indices, np.int64)
            return tuple(Tensor._make(t._data[idx]) for t in ds.tensors)
        return None

    def __iter__(self):
        if self._iterable:
            yield from self._iter_iterable()
            return
        if self.batch_sampler is None:
            for i in self.sampler:
                yield self.collate_fn(self.dataset[i])
            return
        for indices in self.batch_sampler:
            fast = self._fast_tensor_batch(indices)
            if fast is not None:
                yield fast
            else:
                yield self.collate_fn([self.dataset[i] for i in indices])

    def _iter_iterable(self):
        if not self.batch_size:
            for item in self.dataset:
                yield self.collate_fn(item)
            return
        batch = []
        for item in self.dataset:
            batch.append(item)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size:
                return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)
