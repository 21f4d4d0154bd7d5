"""Datasets and batching (Paddle's ``paddle.io``): ``Dataset``, ``TensorDataset``,
``BatchSampler``, ``DistributedBatchSampler`` and ``DataLoader``.

Samples are tuples (or single values) of arrays, numbers or tensors; the default collate
function stacks each field into a tensor. Shuffling draws from primflow's random generator
(``pf.seed``), so processes seeded alike see the same order.

Example:
    >>> import primflow as pf
    >>> from primflow.io import DataLoader, TensorDataset
    >>> ds = TensorDataset([pf.arange(6).reshape([3, 2]), pf.arange(3)])
    >>> [b[0].shape for b in DataLoader(ds, batch_size=2)]
    [[2, 2], [1, 2]]
"""

from __future__ import annotations

import math

from ..core.tensor import Tensor
from ..ops import randperm, stack, to_tensor


class Dataset:
    """Map-style dataset: subclasses define ``__getitem__(index)`` and ``__len__``.

    Example:
        >>> from primflow.io import Dataset
        >>> class Squares(Dataset):
        ...     def __getitem__(self, i): return i * i
        ...     def __len__(self): return 4
        >>> Squares()[3]
        9
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __len__")


class TensorDataset(Dataset):
    """Rows of equally long tensors: item i is ``tuple(t[i] for t in tensors)``.

    Example:
        >>> import primflow as pf
        >>> from primflow.io import TensorDataset
        >>> len(TensorDataset([pf.zeros([5, 2]), pf.ones([5])]))
        5
    """

    def __init__(self, tensors):
        tensors = list(tensors)
        lengths = {t.shape[0] for t in tensors}
        if len(lengths) != 1:
            raise ValueError(f"TensorDataset: tensors have different first dims {lengths}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


def _permutation(n):
    return [int(i) for i in randperm(n).tolist()] if n else []


class BatchSampler:
    """Yields lists of indices: ``batch_size`` at a time, in order or shuffled.

    Example:
        >>> from primflow.io import BatchSampler
        >>> list(BatchSampler(range(5), batch_size=2, drop_last=True))
        [[0, 1], [2, 3]]
    """

    def __init__(self, dataset=None, sampler=None, shuffle=False, batch_size=1,
                 drop_last=False):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"BatchSampler: batch_size must be a positive int, got "
                             f"{batch_size!r}")
        if (dataset is None) == (sampler is None):
            raise ValueError("BatchSampler: give exactly one of dataset and sampler")
        for flag, value in (("shuffle", shuffle), ("drop_last", drop_last)):
            if not isinstance(value, bool):  # Paddle: "shuffle should be a boolean value"
                raise TypeError(f"BatchSampler: {flag} must be True or False, got {value!r}")
        if dataset is not None and not hasattr(dataset, "__len__"):
            raise TypeError(f"BatchSampler: the dataset must have a length (a Dataset, list "
                            f"or TensorDataset), got {type(dataset).__name__}")
        self.dataset, self.sampler = dataset, sampler
        self.shuffle, self.batch_size, self.drop_last = shuffle, batch_size, drop_last

    def _indices(self):
        if self.sampler is not None:
            return list(self.sampler)
        n = len(self.dataset)
        return _permutation(n) if self.shuffle else list(range(n))

    def __iter__(self):
        batch = []
        for i in self._indices():
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)


class DistributedBatchSampler(BatchSampler):
    """Each of ``num_replicas`` processes gets its own contiguous ``1/num_replicas`` of the
    (optionally shuffled, then padded by repeating) indices, in batches (Paddle's
    ``DistributedBatchSampler``; ``set_epoch`` reshuffles).

    Example:
        >>> from primflow.io import DistributedBatchSampler
        >>> s = DistributedBatchSampler(range(5), batch_size=2, num_replicas=2, rank=1)
        >>> list(s)
        [[3, 4], [0]]
    """

    def __init__(self, dataset, batch_size, num_replicas=None, rank=None, shuffle=False,
                 drop_last=False):
        super().__init__(dataset=dataset, shuffle=shuffle, batch_size=batch_size,
                         drop_last=drop_last)
        if num_replicas is None or rank is None:
            from ..distributed import get_rank, get_world_size  # noqa: PLC0415

            num_replicas = get_world_size() if num_replicas is None else num_replicas
            rank = get_rank() if rank is None else rank
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedBatchSampler: rank {rank} is outside 0.."
                             f"{num_replicas - 1}")
        self.nranks, self.local_rank = num_replicas, rank
        self.epoch = 0
        self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch):
        """Sets the epoch that seeds the shuffle (call it each epoch)."""
        self.epoch = int(epoch)

    def _indices(self):
        n = len(self.dataset)
        indices = list(range(n))
        if self.shuffle:
            import random  # noqa: PLC0415 - a generator seeded by the epoch, as Paddle

            random.Random(self.epoch).shuffle(indices)
            self.epoch += 1
        indices += indices[:self.total_size - n]
        start = self.local_rank * self.num_samples
        return indices[start:start + self.num_samples]

    def __len__(self):
        n = self.num_samples
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)


def _python_number_dtype(values):
    """The dtype NumPy gives an array of these Python numbers (as Paddle's collate does):
    float64 if any is a float, else int64 if any is an int, else bool."""
    kinds = {type(v) for v in values}
    if float in kinds:
        return "float64"
    return "int64" if int in kinds else "bool"


def default_collate_fn(samples):
    """Stacks a list of samples field by field into tensors, as Paddle's collate does:
    arrays and tensors stack along a new first axis (keeping their dtype), Python numbers
    become an int64, float64 or bool vector (NumPy's dtypes), strings and bytes stay a list,
    and tuples, lists and dicts are collated field by field.

    Example:
        >>> from primflow.io import default_collate_fn
        >>> a, b = default_collate_fn([(1.0, 2), (3.0, 4)])
        >>> a.dtype.name, b.numpy()
        ('float64', array([2, 4]))
    """
    first = samples[0]
    if isinstance(first, Tensor):
        return stack(samples)
    if isinstance(first, (str, bytes)):
        return list(samples)
    if isinstance(first, dict):
        return {k: default_collate_fn([s[k] for s in samples]) for k in first}
    if isinstance(first, (tuple, list)):
        if any(len(s) != len(first) for s in samples):
            raise ValueError(f"DataLoader: samples in one batch have different numbers of "
                             f"fields ({sorted({len(s) for s in samples})}); every sample "
                             f"must return the same fields")
        return [default_collate_fn([s[i] for s in samples]) for i in range(len(first))]
    if type(first) in (bool, int, float):
        return to_tensor(list(samples), dtype=_python_number_dtype(samples))
    return stack([to_tensor(s) for s in samples])  # arrays and NumPy scalars keep their dtype


class DataLoader:
    """Iterates over batches of a dataset (Paddle's ``DataLoader``): ``batch_size``,
    ``shuffle``, ``drop_last`` and ``collate_fn``, or a ``batch_sampler``. ``loader()``
    also returns an iterator, as in Paddle. Loading runs in this process
    (``num_workers`` is accepted and ignored).

    Example:
        >>> import primflow as pf
        >>> from primflow.io import DataLoader
        >>> loader = DataLoader([(float(i), i) for i in range(5)], batch_size=2)
        >>> len(loader), [b[0].shape for b in loader]
        (3, [[2], [2], [1]])
    """

    def __init__(self, dataset, feed_list=None, places=None, return_list=True,
                 batch_sampler=None, batch_size=1, shuffle=False, drop_last=False,
                 collate_fn=None, num_workers=0, use_buffer_reader=True, prefetch_factor=2,
                 use_shared_memory=True, timeout=0, worker_init_fn=None):
        _check_loader_args(dataset, num_workers, collate_fn)
        self.dataset = dataset
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or drop_last:
                # Paddle asserts the same: the sampler already decides all three
                raise ValueError(
                    f"DataLoader: batch_sampler is given, so batch_size, shuffle and "
                    f"drop_last must keep their defaults (got batch_size={batch_size!r}, "
                    f"shuffle={shuffle!r}, drop_last={drop_last!r}); set them on the "
                    f"sampler instead")
        elif batch_size is not None:
            batch_sampler = BatchSampler(dataset=dataset, shuffle=shuffle,
                                         batch_size=batch_size, drop_last=drop_last)
        elif shuffle or drop_last:
            raise ValueError("DataLoader: batch_size=None yields one sample at a time, so "
                             "shuffle and drop_last do not apply; leave them False")
        self.batch_sampler = batch_sampler
        self.batch_size = getattr(batch_sampler, "batch_size", batch_size)
        # batch_size=None: each sample on its own, converted to tensors (Paddle)
        self.collate_fn = collate_fn or (default_collate_fn if batch_sampler is not None
                                         else _as_tensors)

    def __iter__(self):
        if self.batch_sampler is None:
            for i in range(len(self.dataset)):
                yield self.collate_fn(self.dataset[i])
            return
        for indices in self.batch_sampler:
            yield self.collate_fn([self.dataset[i] for i in indices])

    def __call__(self):
        return iter(self)

    def __len__(self):
        return len(self.dataset if self.batch_sampler is None else self.batch_sampler)


def _as_tensors(sample):
    """One sample with its arrays and numbers as tensors (strings stay)."""
    if isinstance(sample, (Tensor, str, bytes)):
        return sample
    if isinstance(sample, dict):
        return {k: _as_tensors(v) for k, v in sample.items()}
    if isinstance(sample, (tuple, list)):
        return [_as_tensors(v) for v in sample]
    if type(sample) in (bool, int, float):
        return to_tensor(sample, dtype=_python_number_dtype([sample]))
    return to_tensor(sample)


def _check_loader_args(dataset, num_workers, collate_fn):
    """Clear errors for DataLoader arguments that would otherwise fail later, far from the
    call (or never: a negative ``num_workers`` was ignored)."""
    if dataset is None or not hasattr(dataset, "__getitem__"):
        raise TypeError(f"DataLoader: dataset must support indexing (a Dataset, list or "
                        f"TensorDataset), got {type(dataset).__name__}")
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ValueError(f"DataLoader: num_workers must be an int >= 0, got {num_workers!r}")
    if collate_fn is not None and not callable(collate_fn):
        raise TypeError(f"DataLoader: collate_fn must be callable, got "
                        f"{type(collate_fn).__name__}")


__all__ = ["Dataset", "TensorDataset", "BatchSampler", "DistributedBatchSampler",
           "DataLoader", "default_collate_fn"]
