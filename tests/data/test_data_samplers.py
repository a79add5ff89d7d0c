"""Samplers: orders, seeding, epochs, weighting and distributed sharding."""
import numpy as np
import pytest

from funcgrad.data import (BatchSampler, DistributedSampler, RandomSampler, SequentialSampler,
                           SubsetRandomSampler, WeightedRandomSampler)


def test_sequential_sampler():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    assert len(SequentialSampler(range(4))) == 4


def test_random_sampler_is_the_seeded_permutation_and_advances_per_pass():
    s = RandomSampler(range(10), seed=3)
    first, second = list(s), list(s)
    assert sorted(first) == list(range(10)) and sorted(second) == list(range(10))
    assert first == np.random.default_rng([3, 0]).permutation(10).tolist()
    assert second == np.random.default_rng([3, 1]).permutation(10).tolist()
    assert first != second
    s.set_epoch(0)
    assert list(s) == first
    assert list(RandomSampler(range(10), seed=3)) == first


def test_random_sampler_replacement_and_num_samples():
    s = RandomSampler(range(5), replacement=True, num_samples=1000, seed=0)
    draws = list(s)
    assert len(draws) == len(s) == 1000
    assert set(draws) == {0, 1, 2, 3, 4}
    counts = np.bincount(draws, minlength=5)
    assert counts.min() > 150                        # roughly uniform (200 expected each)
    over = list(RandomSampler(range(4), num_samples=10, seed=1))
    counts = np.bincount(over, minlength=4)
    assert sorted(counts.tolist()) == [2, 2, 3, 3]   # whole permutations, then a partial one
    under = list(RandomSampler(range(10), num_samples=4, seed=1))
    assert len(set(under)) == 4
    with pytest.raises(ValueError, match="RandomSampler: num_samples must be a positive int, got 0"):
        RandomSampler(range(3), num_samples=0)


def test_subset_random_sampler():
    s = SubsetRandomSampler([4, 8, 15, 16], seed=2)
    a, b = list(s), list(s)
    assert sorted(a) == sorted(b) == [4, 8, 15, 16]
    assert len(s) == 4


def test_weighted_random_sampler():
    s = WeightedRandomSampler([0.0, 3.0, 1.0, 0.0], num_samples=4000, seed=0)
    draws = np.array(list(s))
    assert set(draws.tolist()) <= {1, 2}
    frac = (draws == 1).mean()
    assert 0.72 < frac < 0.78                       # 3:1 weights -> 0.75
    nr = list(WeightedRandomSampler([1, 1, 1, 5], num_samples=4, replacement=False, seed=0))
    assert sorted(nr) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"without replacement from 1 indices of non-zero weight"):
        WeightedRandomSampler([0, 1], num_samples=2, replacement=False)
    with pytest.raises(ValueError, match=r"weights must be finite and >= 0, got \[-1.0\]"):
        WeightedRandomSampler([1, -1], num_samples=2)
    with pytest.raises(ValueError, match="must not all be zero"):
        WeightedRandomSampler([0, 0], num_samples=2)


def test_batch_sampler():
    assert list(BatchSampler(SequentialSampler(range(7)), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(SequentialSampler(range(7)), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, False)) == 3
    assert len(BatchSampler(range(7), 3, True)) == 2
    assert list(BatchSampler(iter([5, 1, 2]), 2, False)) == [[5, 1], [2]]   # any iterable
    rs = RandomSampler(range(9), seed=7)
    flat = [i for b in BatchSampler(rs, 4, False) for i in b]
    assert flat == np.random.default_rng([7, 0]).permutation(9).tolist()
    assert rs.epoch == 1                      # the batch sampler advanced the epoch
    with pytest.raises(ValueError, match="BatchSampler: batch_size must be a positive int, got 0"):
        BatchSampler(range(3), 0)
    with pytest.raises(TypeError, match="drop_last must be a bool"):
        BatchSampler(range(3), 2, drop_last="yes")


@pytest.mark.parametrize("n,replicas", [(10, 3), (12, 4), (7, 2), (2, 4)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_distributed_sampler_covers_everything_with_equal_shards(n, replicas, shuffle):
    shards = [list(DistributedSampler(range(n), num_replicas=replicas, rank=r, shuffle=shuffle,
                                      seed=11)) for r in range(replicas)]
    size = -(-n // replicas)
    assert all(len(s) == size for s in shards)
    assert all(len(DistributedSampler(range(n), replicas, r)) == size for r in range(replicas))
    together = sum(shards, [])
    assert set(together) == set(range(n))            # nothing lost
    counts = np.bincount(together, minlength=n)
    pad = size * replicas - n
    assert counts.sum() == n + pad and counts.max() <= 1 + -(-pad // n)   # padding only repeats
    if pad == 0:
        assert sorted(together) == list(range(n))    # no overlap at all


@pytest.mark.parametrize("n,replicas", [(10, 3), (7, 2), (12, 4)])
def test_distributed_sampler_drop_last_has_no_overlap(n, replicas):
    shards = [list(DistributedSampler(range(n), replicas, r, shuffle=True, seed=1, drop_last=True))
              for r in range(replicas)]
    together = sum(shards, [])
    assert all(len(s) == n // replicas for s in shards)
    assert len(together) == len(set(together)) == (n // replicas) * replicas


def test_distributed_sampler_epochs():
    def shard(epoch, rank):
        s = DistributedSampler(range(20), num_replicas=2, rank=rank, seed=5)
        s.set_epoch(epoch)
        return list(s)

    s = DistributedSampler(range(20), num_replicas=2, rank=0, seed=5)
    assert list(s) == list(s) == shard(0, 0)           # no set_epoch: same order every pass
    assert shard(1, 0) != shard(0, 0)
    assert sorted(shard(1, 0) + shard(1, 1)) == list(range(20))
    perm = np.random.default_rng([5, 1]).permutation(20)
    assert shard(1, 1) == perm[1::2].tolist()
    assert list(DistributedSampler(range(5), 2, 1, shuffle=False)) == [1, 3, 0]


def test_distributed_sampler_defaults_and_errors(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    s = DistributedSampler(range(8), shuffle=False)
    assert (s.num_replicas, s.rank, list(s)) == (4, 3, [3, 7])
    with pytest.raises(ValueError, match=r"DistributedSampler: rank must be in \[0, 1\] for num_replicas=2, got rank=2"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="num_replicas must be >= 1"):
        DistributedSampler(range(4), num_replicas=0, rank=0)
    with pytest.raises(ValueError, match="set_epoch: epoch must be >= 0"):
        s.set_epoch(-1)
