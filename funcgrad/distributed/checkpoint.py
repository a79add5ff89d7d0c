"""Sharded checkpoints: every process writes its own shards, loading re-shards.

``save(state_dict, checkpoint_id=dir)`` writes a nested dict of arrays (a module's or an
optimizer's ``state_dict()``, or any tree of dicts, lists and tuples) into the directory
``dir``. Each process writes the shards its own devices hold into one safetensors file of its
own, in parallel with the others; of the copies of a replicated block only the first device's
is written (JAX's ``replica_id == 0``), so every byte is stored once. A small ``manifest.json``
records the tree, each array's global shape and dtype, and which file holds which block
(``[start, stop)`` per dimension). ``load(target, checkpoint_id=dir)`` reads it back onto
another mesh, another sharding or another number of processes: each process reads (through a
memory map) only the bytes of the blocks its devices need.

The names follow ``torch.distributed.checkpoint`` (``save(state_dict, checkpoint_id=...)``,
``load(state_dict, checkpoint_id=...)``, which fills ``state_dict`` in place); as in Orbax's
``restore(path, target)``, the target's leaves give the layout of what is loaded (an array
keeps its sharding, a ``Sharding`` or a device is used as given).

A save is atomic as a whole: the shard files of a save get a name of their own, and the
checkpoint switches to them only when process 0 replaces ``manifest.json`` (one rename, after
every process reported its files written and fsynced). A save that fails or is killed midway
leaves the previous checkpoint in ``dir`` loadable; its stray files are removed by the next
save that completes.

Example:
    >>> import funcgrad.distributed.checkpoint as dcp
    >>> state = {"w": jnp.arange(6.0).reshape(2, 3), "step": 3}
    >>> dcp.save(state, checkpoint_id="ckpt")
    >>> dcp.load(None, checkpoint_id="ckpt")
    {'w': Array([[0., 1., 2.],
           [3., 4., 5.]], dtype=float32), 'step': 3}
"""
import json
import math
import mmap
import os
import re
import secrets

import numpy as np
from jaxlib import _jax

from funcgrad.checkpoint_header import CheckpointError, code_of, dtype_of, read_header
from funcgrad.core.avals import ShapedArray
from funcgrad.distributed.collectives import all_reduce, broadcast_one_to_all
from funcgrad.lowering import backend
from funcgrad.lowering import sharding as shardings
from funcgrad.lowering.array import Array, device_put
from funcgrad.serialization import (_encode_tree, _is_array, _to_numpy, runtime_dtype,
                                    write_file)

FORMAT = "funcgrad.distributed.checkpoint"
VERSION = 1
MANIFEST = "manifest.json"
_SHARD_FILE = re.compile(r"^shards-[0-9a-f]{8}-p\d{5}\.safetensors$")


# --- the blocks of an array ---------------------------------------------------------------
def _box(index, shape):
    """A device's block of an array of ``shape`` as ``((start, stop), ...)`` from its index
    (a tuple of slices, as ``devices_indices_map`` gives)."""
    index = tuple(index) + (slice(None),) * (len(shape) - len(index))
    box = []
    for s, size in zip(index, shape):
        start, stop, step = s.indices(size)
        if step != 1:
            raise ValueError(f"funcgrad.distributed.checkpoint: a shard index {index} with a "
                             "step is not a block")
        box.append((start, stop))
    return tuple(box)


def _sharding_of(x):
    """The sharding of a saved leaf, or None for a host value or a single-device Array."""
    if type(x).__name__ == "Parameter":
        x = x.data
    s = getattr(x, "sharding", None)
    if s is None or isinstance(s, _jax.SingleDeviceSharding) or not hasattr(
            s, "devices_indices_map"):
        return None
    return s


def _device_order(sharding, index_map):
    order = getattr(sharding, "_device_assignment", None)
    return list(order) if order is not None else sorted(index_map, key=lambda d: d.id)


def plan(shape, sharding):
    """The distinct blocks of an array of ``shape`` laid out by ``sharding``, in device order:
    ``[(box, device that writes it), ...]``. Of devices holding the same block, the first (its
    replica 0) writes it. Every process computes the same plan, so none needs to ask another.

    Example:
        >>> from funcgrad.distributed.checkpoint import plan
        >>> x = funcgrad.device_put(np.zeros((4, 2)), funcgrad.local_devices())   # replicated
        >>> [(box, dev.id) for box, dev in plan(x.shape, x.sharding)]
        [(((0, 4), (0, 2)), 0)]
    """
    if sharding is None:
        return [(tuple((0, n) for n in shape), None)]
    index_map = sharding.devices_indices_map(tuple(shape))
    seen = {}
    for device in _device_order(sharding, index_map):
        seen.setdefault(_box(index_map[device], shape), device)
    return list(seen.items())


def _local_blocks(x, shape):
    """{box: host-copyable block} of this process's devices' shards of ``x``."""
    if type(x).__name__ == "Parameter":
        x = x.data
    if isinstance(x, shardings.ShardedArray):
        # the buffers themselves: on main, ShardedArray.addressable_shards pairs the sharding's
        # global device list with the local buffers, which is wrong in a multi-process run
        index_map = x.sharding.devices_indices_map(x.shape)
        out = {}
        for buf in x._buf._arrays:
            device = buf._sharding._device
            box = _box(index_map[device], x.shape)
            aval = ShapedArray(tuple(b - a for a, b in box), x.aval.dtype, False)
            out[(box, device)] = Array(aval, buf)
        return out
    return {(_box(s.index, shape), s.device): s.data for s in x.addressable_shards}


class _Block:
    """A block to write: its dtype, shape and size now, its bytes (copied from the device)
    when the writer asks for them."""

    def __init__(self, data, dtype, shape):
        self.data, self.dtype, self.shape = data, np.dtype(dtype), tuple(shape)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        start = getattr(getattr(data, "_buf", None), "_copy_single_device_array_to_host_async",
                        None)
        if start is not None:       # start every device-to-host copy before writing the first
            start()

    def __array__(self, dtype=None, copy=None):
        value = np.asarray(self.data).astype(self.dtype, copy=False).reshape(self.shape)
        return value if dtype is None else value.astype(dtype)


# --- save ---------------------------------------------------------------------------------
def _keep(x):
    """A leaf as saved: a Parameter's array, a torch tensor's NumPy value, arrays as they are."""
    if type(x).__name__ == "Parameter":
        return x.data
    if type(x).__module__.startswith("torch"):
        return _to_numpy(x)
    return x


def _describe(key, x):
    """(manifest entry without files, [(box, writer device)]) of array leaf ``x``."""
    if isinstance(x, (np.ndarray, np.generic)) or not hasattr(x, "dtype"):
        x = np.asarray(x)
    dtype = np.dtype(x.dtype)
    code = code_of(dtype)
    if code is None:
        raise TypeError(f"funcgrad.distributed.checkpoint.save: {key}: dtype {dtype} has no "
                        "safetensors code")
    shape = tuple(int(n) for n in x.shape)
    return {"shape": list(shape), "dtype": code}, plan(shape, _sharding_of(x))


def _writer_process(device):
    return 0 if device is None else device.process_index


def _file_name(save_id, process):
    return f"shards-{save_id:08x}-p{process:05d}.safetensors"


def _agree(flag):
    """The sum of ``flag`` over the processes (each process's own flag in a one-process run);
    every process must call it at the same point: it is the save's barrier too."""
    if backend.process_count() == 1:
        return int(flag)
    return int(all_reduce(np.int32(flag), "sum"))


def _new_save_id(path):
    """A save id that no file in ``path`` carries yet (drawn by process 0, which every process
    sees the directory of), agreed by every process."""
    taken = set()
    if backend.process_index() == 0 and os.path.isdir(path):
        taken = {name[7:15] for name in os.listdir(path) if _SHARD_FILE.match(name)}
    mine = secrets.randbits(31)
    while f"{mine:08x}" in taken:
        mine = secrets.randbits(31)
    if backend.process_count() == 1:
        return mine
    return int(broadcast_one_to_all(np.int32(mine)))


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save(state_dict, checkpoint_id):
    """Save ``state_dict`` (a nested dict / list / tuple of arrays, numbers, strings and None;
    a module or optimizer is asked for its ``state_dict()``) into directory ``checkpoint_id``.

    Every process of the run calls it with its view of the same tree; each writes the blocks of
    its own devices (one copy of each replicated block), process 0 the manifest. Sharded
    arrays keep their global shape; a host value or single-device array is written once, by
    process 0. Returns once the checkpoint is committed on every process; on failure no
    process commits and each raises ``CheckpointError`` (the previous checkpoint stays).

    Example:
        >>> import funcgrad.distributed.checkpoint as dcp
        >>> model = nn.Linear(3, 2)
        >>> dcp.save(model.state_dict(), checkpoint_id="linear")
        >>> sorted(dcp.load(None, checkpoint_id="linear"))
        ['bias', 'weight']
    """
    fn = "funcgrad.distributed.checkpoint.save"
    if hasattr(state_dict, "state_dict") and callable(state_dict.state_dict):
        state_dict = state_dict.state_dict()
    path = os.fspath(checkpoint_id)
    leaves = {}
    single = _is_array(state_dict)     # one array, not a tree: saved under the key ""
    tree = _encode_tree({"": state_dict} if single else state_dict, "", leaves, leaf=_keep)
    arrays, mine = {}, {}
    me = backend.process_index()
    for key, x in leaves.items():
        entry, blocks = _describe(key, x)
        shape = tuple(entry["shape"])
        local = None
        entry["shards"] = []
        for n, (box, device) in enumerate(blocks):
            process = _writer_process(device)
            name = f"{key}@{n}"
            entry["shards"].append({"process": process, "tensor": name,
                                    "box": [list(b) for b in box]})
            if process != me:
                continue
            if device is None:
                data = x.data if type(x).__name__ == "Parameter" else x
            else:
                local = _local_blocks(x, shape) if local is None else local
                data = local[(box, device)]
            mine[name] = _Block(data, dtype_of(entry["dtype"]), [b - a for a, b in box])
        arrays[key] = entry

    save_id = _new_save_id(path)
    failure = None
    try:
        os.makedirs(path, exist_ok=True)
        write_file(os.path.join(path, _file_name(save_id, me)), mine, {"format": FORMAT}, fn)
    except Exception as exc:     # every process learns of it below, and none commits
        failure = exc
    failed = _agree(failure is not None)
    if failed:
        raise CheckpointError(
            f"{fn}: writing the shards of {path} failed on {failed} of "
            f"{backend.process_count()} processes; the previous checkpoint there is unchanged"
            + (f" (here: {failure})" if failure is not None else "")) from failure
    for entry in arrays.values():
        for shard in entry["shards"]:
            shard["file"] = _file_name(save_id, shard.pop("process"))
    if me == 0:
        try:
            _commit(path, {"format": FORMAT, "version": VERSION, "tree": tree,
                           "arrays": arrays, "single": single,
                           "process_count": backend.process_count()})
        except Exception as exc:
            failure = exc
    failed = _agree(failure is not None)
    if failed:
        raise CheckpointError(f"{fn}: process 0 could not commit the manifest of {path}; the "
                              "previous checkpoint there is unchanged"
                              + (f" ({failure})" if failure is not None else "")) from failure
    if me == 0:
        _remove_stale(path, save_id)


def _commit(path, manifest):
    """Write the manifest beside the old one, fsync, and switch with one rename."""
    tmp = os.path.join(path, f".{MANIFEST}.tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f, separators=(",", ":"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(path, MANIFEST))
    _fsync_dir(path)


def _remove_stale(path, save_id):
    """Delete the shard files of earlier or failed saves (and leftover temporary files)."""
    keep = f"shards-{save_id:08x}-"
    for name in os.listdir(path):
        stale = (_SHARD_FILE.match(name) and not name.startswith(keep)) or (
            name.startswith(".tmp-") and name.endswith(".safetensors"))
        if stale:
            try:
                os.unlink(os.path.join(path, name))
            except OSError:
                pass


# --- load ---------------------------------------------------------------------------------
def _read_manifest(path, fn):
    where = os.path.join(path, MANIFEST)
    try:
        with open(where) as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"{fn}: {path} holds no committed checkpoint (no {MANIFEST})") \
            from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{fn}: {where} is not valid JSON ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{fn}: {where} is not a {FORMAT} manifest")
    if manifest.get("version") != VERSION:
        raise CheckpointError(f"{fn}: {where} has version {manifest.get('version')!r}; this "
                              f"funcgrad reads version {VERSION}")
    return manifest


class _Files:
    """The shard files of one load, each opened and its header checked once, memory-mapped."""

    def __init__(self, path):
        self.path, self.open = path, {}

    def tensor(self, file, name, fn):
        if file not in self.open:
            if os.path.basename(file) != file:
                raise CheckpointError(f"{fn}: the manifest names a file {file!r} outside "
                                      f"{self.path}")
            where = os.path.join(self.path, file)
            try:
                f = open(where, "rb")
            except FileNotFoundError:
                raise CheckpointError(f"{fn}: {where}, named by the manifest, is missing") \
                    from None
            entries, _, start = read_header(f, where)
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) \
                if entries and entries[-1].end else None
            self.open[file] = (f, mm, {e.name: e for e in entries}, start)
        f, mm, entries, start = self.open[file]
        e = entries.get(name)
        if e is None:
            raise CheckpointError(f"{fn}: {os.path.join(self.path, file)} holds no tensor "
                                  f"{name!r}")
        if e.end == e.start:
            return np.zeros(e.shape, e.dtype)
        stored = e.dtype.newbyteorder("<") if e.dtype.itemsize > 1 else e.dtype
        return np.frombuffer(mm, stored, (e.end - e.start) // e.dtype.itemsize,
                             start + e.start).reshape(e.shape)   # a view: nothing read yet

    def close(self):
        for f, mm, _, _ in self.open.values():
            if mm is not None:
                mm.close()
            f.close()
        self.open.clear()


def _read_box(files, key, entry, box, fn):
    """The block ``box`` of array ``key``, copied from the saved blocks that overlap it."""
    dtype = dtype_of(entry["dtype"])
    out = np.empty(tuple(b - a for a, b in box), dtype)
    covered = 0
    for shard in entry["shards"]:
        saved = [tuple(b) for b in shard["box"]]
        inter = [(max(a, c), min(b, d)) for (a, b), (c, d) in zip(box, saved)]
        if any(lo >= hi for lo, hi in inter) and out.size:
            continue
        data = files.tensor(shard["file"], shard["tensor"], fn)
        if data.shape != tuple(b - a for a, b in saved):
            raise CheckpointError(f"{fn}: {key}: block {shard['tensor']!r} has shape "
                                  f"{data.shape}, the manifest says {saved}")
        src = tuple(slice(lo - c, hi - c) for (lo, hi), (c, _) in zip(inter, saved))
        dst = tuple(slice(lo - a, hi - a) for (lo, hi), (a, _) in zip(inter, box))
        out[dst] = data[src]
        covered += math.prod(hi - lo for lo, hi in inter)
        if not out.size:
            break
    if covered != out.size:
        raise CheckpointError(f"{fn}: {key}: the saved blocks cover {covered} of the "
                              f"{out.size} elements of block {box}; the checkpoint is "
                              "incomplete")
    return out


def _layout(target, key, fn):
    """What a target leaf asks for: ('host', dtype), ('device', device, dtype) or
    ('sharded', sharding, dtype)."""
    if type(target).__name__ == "Parameter":
        target = target.data
    if target is None:
        return "device", None, None
    if isinstance(target, (np.ndarray, np.generic)):
        return "host", None, target.dtype
    if isinstance(target, _jax.Device):
        return "device", target, None
    if isinstance(target, _jax.SingleDeviceSharding):
        return "device", target._device, None
    if isinstance(target, _jax.Sharding):
        return "sharded", target, None
    if hasattr(target, "shape") and hasattr(target, "dtype"):
        s = _sharding_of(target)
        if s is not None:
            return "sharded", s, target.dtype
        device = getattr(target, "device", None)
        return "device", device if isinstance(device, _jax.Device) else None, target.dtype
    raise TypeError(f"{fn}: the target at {key!r} is a {type(target).__name__}; give an array "
                    "(its sharding is kept), a Sharding, a device, a NumPy array or None")


def _load_array(files, key, entry, target, fn):
    kind, where, want = _layout(target, key, fn)
    shape = tuple(entry["shape"])
    if want is not None and hasattr(target, "shape") and tuple(target.shape) != shape:
        raise ValueError(f"{fn}: {key} was saved with shape {shape}, the target has shape "
                         f"{tuple(target.shape)}")
    saved = dtype_of(entry["dtype"])
    if saved is None:
        raise CheckpointError(f"{fn}: {key}: unknown dtype {entry['dtype']!r}")
    dtype = np.dtype(want) if want is not None else saved
    full = tuple((0, n) for n in shape)
    if kind == "host":
        return _read_box(files, key, entry, full, fn).astype(dtype, copy=False)
    dtype = runtime_dtype(dtype)
    if kind == "device":
        if where is not None and where.process_index != backend.process_index():
            raise ValueError(f"{fn}: {key}: the target device {where} belongs to process "
                             f"{where.process_index}, not to this one "
                             f"({backend.process_index()})")
        return device_put(_read_box(files, key, entry, full, fn).astype(dtype, copy=False),
                          where)
    sharding = where.with_rank(len(shape), fn) if hasattr(where, "with_rank") else where
    try:
        index_map = sharding.devices_indices_map(shape)
    except ValueError as e:
        raise ValueError(f"{fn}: {key} (shape {shape}): {e}") from None
    me = backend.process_index()
    local = [d for d in _device_order(sharding, index_map) if d.process_index == me]
    blocks = {}
    pieces = []
    for d in local:   # a block that several local devices hold is read once
        box = _box(index_map[d], shape)
        if box not in blocks:
            blocks[box] = _read_box(files, key, entry, box, fn).astype(dtype, copy=False)
        pieces.append(blocks[box])
    aval = ShapedArray(shape, dtype, False)
    return shardings.put_pieces(aval, sharding, pieces, local)


def _saved_values(node, path, out):
    """{path: value} of the non-array leaves of a saved tree, {path: None} for its arrays."""
    (kind, value), = node.items()
    if kind == "d":
        for k, child in value:
            _saved_values(child, f"{path}.{k}" if path else str(k), out)
    elif kind in ("l", "u"):
        for i, child in enumerate(value):
            _saved_values(child, f"{path}.{i}" if path else str(i), out)
    else:
        out[path] = value if kind == "v" else None
    return out


def _map_target(target, path, fn):
    """``target`` with each leaf replaced by ``fn(path, leaf)``; dicts and lists are filled in
    place (as ``torch.distributed.checkpoint.load`` does), tuples rebuilt."""
    if isinstance(target, dict):
        for k in list(target):
            target[k] = _map_target(target[k], f"{path}.{k}" if path else str(k), fn)
        return target
    if isinstance(target, list):
        for i, v in enumerate(target):
            target[i] = _map_target(v, f"{path}.{i}" if path else str(i), fn)
        return target
    if isinstance(target, tuple) and not hasattr(target, "_fields"):
        return tuple(_map_target(v, f"{path}.{i}" if path else str(i), fn)
                     for i, v in enumerate(target))
    return fn(path, target)


def load(state_dict, checkpoint_id):
    """Load the checkpoint in directory ``checkpoint_id`` into the layout ``state_dict`` asks
    for, and return it.

    ``state_dict`` is a tree like the saved one (or a part of it): each leaf says where its
    array goes. An array keeps its sharding (and dtype), a ``NamedSharding`` /
    ``SingleDeviceSharding`` or device is used as given, a NumPy array asks for a host copy,
    and None for the default device. Dicts and lists are filled in place, as in
    ``torch.distributed.checkpoint.load``. ``state_dict=None`` loads everything that was saved,
    each array on the default device. The mesh, the sharding and the number of processes may
    differ from the save's: each process reads only the blocks its devices need.

    Example:
        >>> import funcgrad.distributed.checkpoint as dcp
        >>> dcp.save({"w": np.arange(4, dtype=np.int32)}, checkpoint_id="small")
        >>> dcp.load({"w": np.zeros(4, np.int32)}, checkpoint_id="small")
        {'w': array([0, 1, 2, 3], dtype=int32)}
    """
    fn = "funcgrad.distributed.checkpoint.load"
    path = os.fspath(checkpoint_id)
    manifest = _read_manifest(path, fn)
    arrays = manifest.get("arrays")
    if not isinstance(arrays, dict):
        raise CheckpointError(f"{fn}: {path}/{MANIFEST} lists no arrays")
    try:
        saved = _saved_values(manifest["tree"], "", {})
    except (KeyError, TypeError, ValueError, AttributeError):
        raise CheckpointError(f"{fn}: {path}/{MANIFEST} has a malformed tree") from None
    files = _Files(path)

    def leaf(key, target):
        if key in arrays:
            return _load_array(files, key, arrays[key], target, fn)
        if key in saved:
            return saved[key]
        raise KeyError(f"{fn}: {path} holds nothing at {key!r} (it holds "
                       f"{', '.join(sorted(saved)[:20])}{' ...' if len(saved) > 20 else ''})")
    try:
        if state_dict is None:
            from funcgrad.serialization import _decode_tree
            loaded = {key: leaf(key, None) for key in arrays}
            result = _decode_tree(manifest["tree"], loaded, path)
            return result[""] if manifest.get("single") else result
        if hasattr(state_dict, "state_dict") and callable(state_dict.state_dict):
            state_dict = state_dict.state_dict()
        if _is_array(state_dict) or not isinstance(state_dict, (dict, list, tuple)):
            return leaf("", state_dict)
        return _map_target(state_dict, "", leaf)
    finally:
        files.close()


__all__ = ["save", "load", "plan", "CheckpointError"]
