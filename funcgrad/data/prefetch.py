"""Device prefetch: start moving the next batches to the device while the current one is used.

Transfers are asynchronous, so issuing ``device_put`` for batch k+1 (and k+2, ...) before the
model consumes batch k lets the copy overlap the computation.

Example:
    >>> from funcgrad.data import prefetch_to_device
    >>> import numpy as np
    >>> batches = ({"x": np.full((4, 2), k, np.float32)} for k in range(3))
    >>> [float(b["x"][0, 0]) for b in prefetch_to_device(batches, size=2)]
    [0.0, 1.0, 2.0]
"""
import collections
import collections.abc
import dataclasses
import operator

import numpy as np

from funcgrad.lowering import array, backend, sharding

__all__ = ["prefetch_to_device", "shard"]


def _tree_map(fn, tree):
    """Apply ``fn`` to every array-like leaf of nested dicts/lists/tuples/namedtuples."""
    if isinstance(tree, collections.abc.Mapping):
        out = {k: _tree_map(fn, v) for k, v in tree.items()}
        try:
            return type(tree)(out)
        except TypeError:
            return out
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(_tree_map(fn, v) for v in tree))
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        return dataclasses.replace(tree, **{f.name: _tree_map(fn, getattr(tree, f.name))
                                            for f in dataclasses.fields(tree) if f.init})
    if isinstance(tree, (list, tuple)):
        return type(tree)(_tree_map(fn, v) for v in tree)
    if tree is None or isinstance(tree, (str, bytes)):
        return tree
    return fn(tree)


def shard(batch, num_shards):
    """Reshape every array leaf of ``batch`` from (N, ...) to (num_shards, N // num_shards, ...).

    Errors when N is not a multiple of ``num_shards`` (use ``drop_last=True`` or a batch size
    divisible by the device count).

    Example:
        >>> from funcgrad.data import shard
        >>> import numpy as np
        >>> shard({"x": np.zeros((8, 3))}, 4)["x"].shape
        (4, 2, 3)
    """
    num_shards = operator.index(num_shards)

    def split(x):
        x = np.asarray(x)
        if x.ndim == 0 or x.shape[0] % num_shards:
            raise ValueError(f"shard: cannot split an array of shape {x.shape} along axis 0 "
                             f"into {num_shards} equal parts (one per device); use a batch "
                             f"size divisible by {num_shards}, and drop_last=True")
        return x.reshape((num_shards, x.shape[0] // num_shards) + x.shape[1:])

    return _tree_map(split, batch)


def _resolve_devices(devices):
    if devices is None:
        return None, False
    if isinstance(devices, (list, tuple)):
        devs = list(devices)
        if not devs:
            raise ValueError("prefetch_to_device: devices is an empty list")
        return devs, True
    if isinstance(devices, str) and devices == "all":
        return list(backend.devices()), True
    return devices, False


def _sharded_put(x, devs):
    """Put the rows x[i] on devs[i]: one Array split over ``devs`` along its leading axis,
    laid out as ``pmap`` takes its arguments (so it is consumed without a copy)."""
    return sharding.shard_value(x, devs, 0, "prefetch_to_device")


def prefetch_to_device(iterable, size=2, devices=None):
    """Yield the batches of ``iterable`` with every array leaf on a device, ``size`` ahead.

    Each leaf goes through ``funcgrad.device_put``, which starts an asynchronous copy and
    returns at once; the next ``size`` batches are put before the current one is handed out,
    so their copies overlap the work on it. Order is kept.

    ``devices``: None for the default device, or one device: every leaf becomes a
    ``funcgrad.Array`` on it. A list of devices (or "all"): every leaf of shape (N, ...) is
    split along axis 0 into ``len(devices)`` equal parts, and becomes one sharded
    ``funcgrad.Array`` of shape (len(devices), N // len(devices), ...) whose part i lies on
    ``devices[i]``: what ``pmap`` over those devices consumes in place. Works on nested dicts/tuples/lists/namedtuples/dataclasses; strings and
    None pass through.

    Example:
        >>> from funcgrad.data import prefetch_to_device
        >>> import numpy as np
        >>> out = list(prefetch_to_device([np.arange(4)], size=1))
        >>> np.asarray(out[0]).tolist()
        [0, 1, 2, 3]
    """
    try:
        size = operator.index(size)
    except TypeError:
        raise TypeError(f"prefetch_to_device: size must be an int >= 1, got {size!r}") from None
    if size < 1:
        raise ValueError(f"prefetch_to_device: size must be >= 1, got {size}")
    target, sharded = _resolve_devices(devices)
    if sharded:
        n = len(target)

        def put_leaf(x):
            return _sharded_put(shard(x, n), target)
    else:
        def put_leaf(x):
            return array.device_put(np.asarray(x) if not hasattr(x, "block_until_ready")
                                       else x, target)

    def put(batch):
        return _tree_map(put_leaf, batch)

    return _prefetch_gen(iter(iterable), size, put)


def _prefetch_gen(it, size, put):
    queue = collections.deque()
    try:
        for _ in range(size):
            try:
                queue.append(put(next(it)))
            except StopIteration:
                break
        while queue:
            ready = queue.popleft()
            try:
                queue.append(put(next(it)))     # start the next transfer before handing over
            except StopIteration:
                pass
            yield ready
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
