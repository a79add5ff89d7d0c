"""StackDataset (torch.utils.data.StackDataset): tuples or dicts of same-index items,
batched through DataLoader, against PyTorch when it is importable."""
import numpy as np
import pytest

from funcgrad.data import DataLoader, StackDataset, TensorDataset


class Counting:
    """A dataset that records whether it was fetched by __getitems__."""

    def __init__(self, n):
        self.n, self.batched = n, 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.float32(i) * 0.5

    def __getitems__(self, idx):
        self.batched += 1
        return [np.float32(i) * 0.5 for i in idx]


def test_tuple_and_dict_items_and_batches():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    c = Counting(6)
    ds = StackDataset(TensorDataset(x), c)
    assert len(ds) == 6
    (xi,), ci = ds[-1]
    assert xi.tolist() == [10.0, 11.0] and ci == 2.5
    xs, cs = next(iter(DataLoader(ds, batch_size=4)))
    assert xs[0].tolist() == x[:4].tolist() and cs.tolist() == [0.0, 0.5, 1.0, 1.5]
    assert c.batched == 1                      # the loader used __getitems__
    named = StackDataset(image=x, label=np.arange(6) % 3)
    batch = next(iter(DataLoader(named, batch_size=3, shuffle=False)))
    assert sorted(batch) == ["image", "label"]
    assert batch["image"].tolist() == x[:3].tolist() and batch["label"].tolist() == [0, 1, 2]


def test_errors():
    with pytest.raises(ValueError, match=r"different lengths \{'a': 3, 'b': 4\}"):
        StackDataset(a=np.zeros(3), b=np.zeros(4))
    with pytest.raises(ValueError, match="either positionally .* or by keyword"):
        StackDataset(np.zeros(3), b=np.zeros(3))
    with pytest.raises(IndexError, match="index 5 is out of range for a dataset of length 3"):
        StackDataset(np.zeros(3))[5]


def test_matches_pytorch():
    torch = pytest.importorskip("torch")
    a, b = np.arange(5) * 2, np.arange(5) * 3
    ours, theirs = StackDataset(a, b), torch.utils.data.StackDataset(a, b)
    assert [ours[i] for i in range(5)] == [theirs[i] for i in range(5)]
    assert ours.__getitems__([4, 0]) == theirs.__getitems__([4, 0])
    ours, theirs = StackDataset(p=a, q=b), torch.utils.data.StackDataset(p=a, q=b)
    assert ours.__getitems__([1, 3]) == theirs.__getitems__([1, 3])
