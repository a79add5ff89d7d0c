"""Dataset combinators: TensorDataset, Subset, ConcatDataset, ChainDataset, random_split."""
import numpy as np
import pytest

from funcgrad.data import (ArrayDataset, ChainDataset, ConcatDataset, Dataset, IterableDataset,
                           Subset, TensorDataset, random_split)


def test_tensor_dataset_items_and_batched_fetch():
    x = np.arange(12).reshape(6, 2)
    y = np.array([5, 4, 3, 2, 1, 0])
    ds = TensorDataset(x, y)
    assert len(ds) == 6
    a, b = ds[2]
    assert a.tolist() == [4, 5] and int(b) == 3
    a, b = ds[-1]
    assert a.tolist() == [10, 11] and int(b) == 0
    items = ds.__getitems__([3, 0])
    assert [(i.tolist(), int(j)) for i, j in items] == [([6, 7], 2), ([0, 1], 5)]
    assert ArrayDataset is TensorDataset


def test_tensor_dataset_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"TensorDataset: .*lengths \[3, 2\]"):
        TensorDataset(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="TensorDataset: needs at least one array"):
        TensorDataset()
    ds = TensorDataset(np.zeros(3))
    with pytest.raises(IndexError, match=r"TensorDataset.__getitem__: index 3 is out of range .*length 3"):
        ds[3]
    with pytest.raises(IndexError, match=r"indices \[7\] are out of range"):
        ds.__getitems__([0, 7])
    with pytest.raises(TypeError, match="index must be an integer"):
        ds[1.5]


def test_tensor_dataset_stores_numpy_copies_of_array_likes():
    ds = TensorDataset([[1, 2], [3, 4]])
    assert isinstance(ds.arrays[0], np.ndarray)
    assert ds[1][0].tolist() == [3, 4]


def test_subset_maps_indices_and_forwards_getitems():
    ds = TensorDataset(np.arange(10) * 10)
    sub = Subset(ds, np.array([9, 3, 5]))
    assert len(sub) == 3
    assert [int(sub[k][0]) for k in range(3)] == [90, 30, 50]
    assert [int(t[0]) for t in sub.__getitems__([2, 0])] == [50, 90]
    assert int(sub[-1][0]) == 50


class _Plain(Dataset):
    def __init__(self, values):
        self.values = list(values)

    def __len__(self):
        return len(self.values)

    def __getitem__(self, i):
        return self.values[i]


def test_concat_dataset_indexes_across_parts():
    ds = ConcatDataset([_Plain("ab"), _Plain(""), _Plain("cde")])
    assert len(ds) == 5
    assert [ds[i] for i in range(5)] == list("abcde")
    assert ds[-1] == "e" and ds[-5] == "a"
    assert ds.cumulative_sizes == [2, 2, 5]
    with pytest.raises(IndexError, match="index 5 is out of range for a dataset of length 5"):
        ds[5]
    plus = _Plain("x") + _Plain("yz")
    assert isinstance(plus, ConcatDataset) and [plus[i] for i in range(3)] == ["x", "y", "z"]


class _Count(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def test_chain_and_concat_reject_the_wrong_kind():
    chained = ChainDataset([_Count(2), _Count(3)])
    assert list(chained) == [0, 1, 0, 1, 2] and len(chained) == 5
    assert list(_Count(1) + _Count(2)) == [0, 0, 1]
    with pytest.raises(TypeError, match="ConcatDataset: dataset 1 is an IterableDataset"):
        ConcatDataset([_Plain("a"), _Count(2)])


def test_base_classes_explain_missing_methods():
    with pytest.raises(TypeError, match="does not define __getitem__"):
        Dataset()[0]
    with pytest.raises(TypeError, match="does not define __iter__"):
        iter(IterableDataset())


def test_random_split_counts_are_a_seeded_partition():
    ds = TensorDataset(np.arange(20))
    a, b, c = random_split(ds, [10, 7, 3], seed=4)
    assert (len(a), len(b), len(c)) == (10, 7, 3)
    everything = a.indices + b.indices + c.indices
    assert sorted(everything) == list(range(20))
    a2, b2, c2 = random_split(ds, [10, 7, 3], seed=4)
    assert a2.indices == a.indices and c2.indices == c.indices
    a3, _, _ = random_split(ds, [10, 7, 3], seed=5)
    assert a3.indices != a.indices
    expected = np.random.default_rng(4).permutation(20).tolist()
    assert everything == expected


def test_random_split_fractions_hand_out_the_remainder():
    ds = TensorDataset(np.arange(11))
    parts = random_split(ds, [0.5, 0.3, 0.2], seed=0)
    # floor: 5, 3, 2 = 10; the one left over goes to the first split
    assert [len(p) for p in parts] == [6, 3, 2]
    assert sorted(sum((p.indices for p in parts), [])) == list(range(11))


def test_random_split_errors():
    ds = TensorDataset(np.arange(5))
    with pytest.raises(ValueError, match=r"random_split: the lengths \[2, 2\] add up to 4 but the dataset has 5"):
        random_split(ds, [2, 2])
    with pytest.raises(ValueError, match="non-negative"):
        random_split(ds, [6, -1])
    with pytest.raises(TypeError, match="counts or fractions"):
        random_split(ds, [0.5, 0.2])
