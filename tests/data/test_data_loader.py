"""DataLoader in the main process (num_workers=0): batching, order, epochs, errors."""
import numpy as np
import pytest

from funcgrad.data import (BatchSampler, DataLoader, DistributedSampler, IterableDataset,
                           SequentialSampler, TensorDataset, current_rng, get_worker_info)

from data_helpers import BatchedImages, FailAt, Images, Shards, random_augment


def _ids(loader):
    return [b["index"].tolist() for b in loader]


def test_sequential_batches_len_and_drop_last():
    ds = TensorDataset(np.arange(10, dtype=np.float32), np.arange(10) % 3)
    loader = DataLoader(ds, batch_size=4)
    batches = list(loader)
    assert len(loader) == 3
    assert [x.tolist() for x, _ in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[0][1].tolist() == [0, 1, 2, 0] and batches[0][0].dtype == np.float32
    dropped = DataLoader(ds, batch_size=4, drop_last=True)
    assert len(dropped) == 2 and [x.shape for x, _ in dropped] == [(4,), (4,)]


def test_shuffle_is_seeded_and_epochs_differ():
    ds = Images(20)
    a = DataLoader(ds, batch_size=5, shuffle=True, seed=3)
    e0, e1 = _ids(a), _ids(a)
    assert sorted(sum(e0, [])) == list(range(20)) and e0 != e1
    assert sum(e0, []) == np.random.default_rng([3, 0]).permutation(20).tolist()
    b = DataLoader(ds, batch_size=5, shuffle=True, seed=3)
    assert _ids(b) == e0 and _ids(b) == e1
    b.set_epoch(1)
    assert _ids(b) == e1 and b.epoch == 2
    c = DataLoader(ds, batch_size=5, shuffle=True, seed=4)
    assert _ids(c) != e0


def test_random_transforms_repeat_per_seed_and_epoch():
    ds = Images(12, transform=random_augment())
    loader = DataLoader(ds, batch_size=4, shuffle=True, seed=9)
    first = [b["image"] for b in loader]
    loader.set_epoch(0)
    again = [b["image"] for b in loader]
    assert all(np.array_equal(x, y) for x, y in zip(first, again))
    loader.set_epoch(1)
    other = [b["image"] for b in loader]
    assert not all(np.array_equal(x, y) for x, y in zip(first, other))
    # the per-batch generator is the documented one: seed, epoch, 0, batch index
    loader2 = DataLoader(Images(4), batch_size=4, seed=9,
                         collate_fn=lambda items: current_rng().integers(0, 2 ** 31))
    expected = np.random.default_rng([9, 0, 0, 0]).integers(0, 2 ** 31)
    assert next(iter(loader2)) == expected


def test_getitems_and_getitem_paths_agree():
    plain = _ids(DataLoader(Images(11), batch_size=4, shuffle=True, seed=1))
    batched = _ids(DataLoader(BatchedImages(11), batch_size=4, shuffle=True, seed=1))
    assert plain == batched


def test_batch_size_none_yields_unbatched_items():
    ds = TensorDataset(np.arange(3))
    loader = DataLoader(ds, batch_size=None)
    assert [int(x[0]) for x in loader] == [0, 1, 2] and len(loader) == 3


def test_custom_batch_sampler_and_collate_fn():
    bs = BatchSampler(SequentialSampler(range(7)), 3, drop_last=False)
    loader = DataLoader(Images(7), batch_sampler=bs, collate_fn=lambda items: [it["index"] for it in items])
    assert list(loader) == [[0, 1, 2], [3, 4, 5], [6]] and len(loader) == 3


def test_set_epoch_is_forwarded_to_a_custom_sampler():
    ds = Images(10)
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, seed=2)
    loader = DataLoader(ds, batch_size=10, sampler=sampler)
    loader.set_epoch(4)
    assert sampler.epoch == 4
    got = _ids(loader)[0]
    assert got == np.random.default_rng([2, 4]).permutation(10)[1::2].tolist()


def test_iterable_dataset_in_main_process():
    loader = DataLoader(Shards(7), batch_size=3)
    batches = list(loader)
    assert [b["x"].tolist() for b in batches] == [[0, 1, 2], [3, 4, 5], [6]]
    assert batches[0]["worker"].tolist() == [-1, -1, -1]
    assert len(loader) == 3
    assert len(DataLoader(Shards(7), batch_size=3, drop_last=True)) == 2
    assert [b["x"].tolist() for b in DataLoader(Shards(7), batch_size=3, drop_last=True)] == \
        [[0, 1, 2], [3, 4, 5]]


class _NoLen(IterableDataset):
    def __iter__(self):
        return iter(range(3))


def test_len_of_unsized_iterable_is_a_clear_error():
    with pytest.raises(TypeError, match="DataLoader.__len__: the IterableDataset _NoLen has no __len__"):
        len(DataLoader(_NoLen()))


def test_errors_in_main_process_keep_their_type_and_say_which_index():
    loader = DataLoader(FailAt(10, bad=6), batch_size=4)
    it = iter(loader)
    next(it)
    with pytest.raises(ValueError, match="item 6 is corrupt") as err:
        next(it)
    assert any("loading index 6 (batch 1)" in note for note in err.value.__notes__)


@pytest.mark.parametrize("kwargs,pattern", [
    (dict(shuffle=True, sampler=SequentialSampler(range(3))), "either sampler or shuffle"),
    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler excludes"),
    (dict(batch_size=None, drop_last=True), "drop_last=True needs a batch_size"),
    (dict(batch_size=0), "batch_size must be a positive int or None, got 0"),
    (dict(num_workers=-1), "num_workers must be >= 0, got -1"),
    (dict(prefetch_factor=4), "prefetch_factor=4 needs num_workers > 0"),
    (dict(persistent_workers=True), "persistent_workers=True needs num_workers > 0"),
    (dict(worker_type="fiber"), "worker_type must be 'process' or 'thread', got 'fiber'"),
    (dict(timeout=-1), "timeout must be a number of seconds >= 0"),
    (dict(num_workers=1, multiprocessing_context="teleport"), "multiprocessing_context 'teleport' is not available"),
    (dict(seed=1, generator=np.random.default_rng(0)), "pass seed= or generator=, not both"),
    (dict(generator=7), "generator must be a numpy.random.Generator"),
    (dict(pin_memory="yes"), "pin_memory must be a bool"),
])
def test_argument_errors(kwargs, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        DataLoader(TensorDataset(np.arange(3)), **kwargs)


def test_iterable_dataset_rejects_shuffle():
    with pytest.raises(ValueError, match="shuffle=True is not possible with an IterableDataset"):
        DataLoader(Shards(3), shuffle=True)


def test_get_worker_info_is_none_in_main_process():
    assert get_worker_info() is None


def test_distributed_loaders_partition_the_data_each_epoch():
    ds = Images(23)
    seen = {}
    for epoch in range(2):
        shards = []
        for rank in range(3):
            sampler = DistributedSampler(ds, num_replicas=3, rank=rank, seed=8)
            loader = DataLoader(ds, batch_size=4, sampler=sampler)
            loader.set_epoch(epoch)
            shards.append(sum(_ids(loader), []))
        assert [len(s) for s in shards] == [8, 8, 8]
        together = sum(shards, [])
        assert set(together) == set(range(23)) and len(together) == 24   # one padded repeat
        seen[epoch] = shards
    assert seen[0] != seen[1]


@pytest.mark.parametrize("kwargs", [dict(), dict(num_workers=2, worker_type="thread")],
                         ids=["main", "threads"])
def test_iterators_made_before_use_keep_their_epochs(kwargs):
    """iter(loader) fixes the epoch at once: two iterators made up front are epochs 0 and 1,
    whichever is consumed first, and (without persistent workers) both can run interleaved."""
    ds = Images(12)
    ref = DataLoader(ds, batch_size=5, shuffle=True, seed=8)
    epoch0, epoch1 = _ids(ref), _ids(ref)
    assert epoch0 != epoch1
    loader = DataLoader(ds, batch_size=5, shuffle=True, seed=8, **kwargs)
    it0, it1 = iter(loader), iter(loader)
    pairs = list(zip(it1, it0))
    assert [b["index"].tolist() for _, b in pairs] == epoch0
    assert [b["index"].tolist() for b, _ in pairs] == epoch1


def test_persistent_workers_supersede_an_older_unfinished_iterator():
    loader = DataLoader(Images(12), batch_size=3, num_workers=1, worker_type="thread",
                        persistent_workers=True, seed=0)
    done = iter(loader)
    assert len(list(done)) == 4
    old = iter(loader)
    next(old)
    new = iter(loader)
    with pytest.raises(RuntimeError, match="superseded by a newer iter"):
        next(old)
    with pytest.raises(StopIteration):
        next(done)                   # a finished iterator just stays finished
    assert [b["index"].tolist() for b in new] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
    loader.shutdown()


def test_pytorch_style_pin_memory_and_generator():
    """pin_memory is accepted and changes nothing; generator= draws the seed."""
    ds = Images(10)
    plain = _ids(DataLoader(ds, batch_size=4, shuffle=True, seed=11))
    assert _ids(DataLoader(ds, batch_size=4, shuffle=True, seed=11, pin_memory=True)) == plain
    a = DataLoader(ds, batch_size=4, shuffle=True, generator=np.random.default_rng(5))
    b = DataLoader(ds, batch_size=4, shuffle=True, generator=np.random.default_rng(5))
    assert a.seed == b.seed and _ids(a) == _ids(b)
    assert sorted(sum(_ids(a), [])) == list(range(10))
