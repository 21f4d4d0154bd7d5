"""``paddle.io.DataLoader`` batches with Paddle's shapes and dtypes, and its argument
rules. Expected shapes and dtypes were printed by PaddlePaddle 3.3.1 (CPU) for the same
datasets."""

import numpy as np
import pytest

import paddle
from paddle.io import BatchSampler, DataLoader, Dataset


class Items(Dataset):
    def __init__(self, items):
        self.items = items

    def __getitem__(self, index):
        return self.items[index]

    def __len__(self):
        return len(self.items)


def layout(batch):
    """(shape, dtype name) of every tensor in a collated batch, nested like the batch."""
    if isinstance(batch, dict):
        return {k: layout(v) for k, v in batch.items()}
    if isinstance(batch, list):
        return [layout(v) for v in batch]
    if isinstance(batch, paddle.Tensor):
        return (batch.shape, batch.dtype.name)
    return batch


def first_batch(items, batch_size=2):
    return next(iter(DataLoader(Items(items), batch_size=batch_size)))


def test_the_paddle_3_demo_dataset_batches_as_paddle():
    # the Paddle 3.0 document's DemoDataset: (float32 [3, 2] array, np.array([1.])); with
    # batch_size=1 PaddlePaddle 3.3.1 gives [1, 3, 2] float32 and [1, 1] float64
    sample = (np.array([[1., 2.], [3., 4.], [5., 6.]]).astype("float32"), np.array([1.]))
    assert layout(first_batch([sample] * 3, 1)) == [([1, 3, 2], "float32"), ([1, 1], "float64")]
    assert layout(first_batch([sample] * 3, 2)) == [([2, 3, 2], "float32"), ([2, 1], "float64")]
    data, label = first_batch([sample] * 3, 2)
    np.testing.assert_array_equal(data.numpy(), np.stack([sample[0]] * 2))
    np.testing.assert_array_equal(label.numpy(), [[1.0], [1.0]])


@pytest.mark.parametrize("sample, expected", [
    # PaddlePaddle 3.3.1, batch_size=2
    ((np.array([1.0, 2.0]), 3), [([2, 2], "float64"), ([2], "int64")]),
    ((1.5, 2), [([2], "float64"), ([2], "int64")]),  # Python numbers: NumPy's dtypes
    ((np.float32(1.5), np.int32(2)), [([2], "float32"), ([2], "int32")]),
    ((np.array(1.5), np.array(2)), [([2], "float64"), ([2], "int64")]),
    ((np.array([True]), True), [([2, 1], "bool"), ([2], "bool")]),
    ({"a": np.array([1.0], dtype="float32"), "b": 2},
     {"a": ([2, 1], "float32"), "b": ([2], "int64")}),
    (([np.array([1.0]), np.array([2.0])],), [[([2, 1], "float64"), ([2, 1], "float64")]]),
    (("abc", 1), [["abc", "abc"], ([2], "int64")]),  # strings stay a list
], ids=["array+int", "python numbers", "numpy scalars", "0-d arrays", "bool", "dict",
        "nested list", "string"])
def test_collated_shapes_and_dtypes_as_paddle(sample, expected):
    assert layout(first_batch([sample, sample])) == expected


def test_batch_sampler_excludes_batch_size_shuffle_and_drop_last():
    ds = Items([np.array([float(i)]) for i in range(10)])
    sampler = BatchSampler(ds, batch_size=3)
    for kwargs in ({"shuffle": True}, {"batch_size": 5}, {"drop_last": True},
                   {"batch_size": None}):
        with pytest.raises(ValueError, match="batch_sampler is given"):
            DataLoader(ds, batch_sampler=sampler, **kwargs)
    loader = DataLoader(ds, batch_sampler=sampler, batch_size=1, shuffle=False)
    assert [b.shape for b in loader][:2] == [[3, 1], [3, 1]]


def test_batch_size_none_yields_single_samples():
    ds = Items([np.array([float(i)]) for i in range(4)])
    loader = DataLoader(ds, batch_size=None)
    assert len(loader) == 4
    assert [b.numpy().tolist() for b in loader] == [[0.0], [1.0], [2.0], [3.0]]


def test_samples_with_different_field_counts_raise():
    with pytest.raises(ValueError, match="different numbers of fields"):
        first_batch([(1.0, 2.0), (1.0,)])
