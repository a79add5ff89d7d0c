"""``funcgrad.save`` / ``funcgrad.load``: state dicts in the safetensors format.

The file is: an 8-byte little-endian header length, a JSON header mapping each tensor name to
``{"dtype", "shape", "data_offsets"}`` (plus an optional ``"__metadata__"`` dict of strings),
then the raw little-endian bytes. Files written here load in PyTorch's ``safetensors`` and
vice versa. Nothing is ever unpickled.

Nested containers (an optimizer's ``state_dict()``: dicts with int keys, lists, numbers,
strings) are saved too: arrays become tensors named by their dotted path, and the structure
with the non-array values goes to the metadata entry ``"funcgrad.tree"`` so ``load`` rebuilds
it; a file without that entry (e.g. written by PyTorch) loads as a flat dict.

Writes are atomic: the data goes to a temporary file in the same directory which then replaces
the target, so a failed save leaves any previous file intact.

Example:
    >>> model = nn.Linear(3, 2)
    >>> funcgrad.save(model.state_dict(), "model.safetensors")
    >>> sd = funcgrad.load("model.safetensors")
    >>> sorted(sd), sd["weight"].shape
    (['bias', 'weight'], (2, 3))
    >>> model.load_state_dict(sd)
    <All keys matched successfully>
"""
import errno
import json
import mmap
import os
import struct
import tempfile

import numpy as np

from funcgrad import numpy as jnp
from funcgrad.checkpoint_header import CheckpointError, code_of, read_header
from funcgrad.config import config
from funcgrad.lowering.array import device_put

_MAX_TREE_DEPTH = 200


def _code_of(dtype):
    code = code_of(dtype)
    if code is None:
        raise TypeError(f"funcgrad.save: dtype {np.dtype(dtype)} has no safetensors code")
    return code


def _is_array(x):
    from funcgrad.core.interpreters import Value
    return isinstance(x, (np.ndarray, np.generic, Value)) or (
        hasattr(x, "detach") and hasattr(x, "numpy")) or type(x).__name__ == "Parameter" or (
        hasattr(x, "addressable_shards") and hasattr(x, "sharding"))   # a jax.Array


def _to_numpy(x):
    if type(x).__name__ == "Parameter":
        x = x.data
    if hasattr(x, "detach") and hasattr(x, "cpu"):      # torch tensor
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":            # NumPy has no bfloat16: its bits
            import ml_dtypes
            import torch
            return _c_order(x.view(torch.int16).numpy().view(ml_dtypes.bfloat16))
        x = x.numpy()
    return _c_order(x)


def _c_order(x):
    """``x`` as a C-contiguous NumPy array of its own shape (``np.ascontiguousarray`` would
    turn a 0-d value into shape (1,))."""
    arr = np.asarray(x)
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def _encode_tree(obj, path, tensors, leaf=_to_numpy):
    """JSON-able structure of ``obj``; arrays are moved into ``tensors`` by dotted path (as
    ``leaf`` of them: NumPy values by default)."""
    if _is_array(obj):
        tensors[path] = leaf(obj)
        return {"t": path}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"funcgrad.save: dict keys must be str or int, got {k!r}")
            sub = f"{path}.{k}" if path else str(k)
            items.append([k, _encode_tree(v, sub, tensors, leaf)])
        return {"d": items}
    if isinstance(obj, (list, tuple)):
        kind = "l" if isinstance(obj, list) else "u"
        return {kind: [_encode_tree(v, f"{path}.{i}" if path else str(i), tensors, leaf)
                       for i, v in enumerate(obj)]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"v": obj}
    raise TypeError(f"funcgrad.save: cannot save a {type(obj).__name__} at {path or 'top'}; "
                    f"only arrays, dicts, lists, tuples, numbers, strings and None")


def _decode_tree(node, tensors, path, depth=0):
    """Rebuild the structure ``_encode_tree`` recorded, checking every node (the metadata
    comes from the file, so it may be anything)."""
    def bad(what):
        return CheckpointError(f"funcgrad.load: {path}: the funcgrad.tree metadata {what}")
    if depth > _MAX_TREE_DEPTH:
        raise bad(f"nests deeper than {_MAX_TREE_DEPTH} levels")
    if not isinstance(node, dict) or len(node) != 1:
        raise bad(f"has a malformed node {json.dumps(node)[:100]}")
    (kind, value), = node.items()
    if kind == "t":
        if not isinstance(value, str) or value not in tensors:
            raise bad(f"names a tensor {value!r} that the file does not hold")
        return tensors[value]
    if kind == "d" and isinstance(value, list):
        out = {}
        for item in value:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], (str, int))
                    and not isinstance(item[0], bool)):
                raise bad(f"has a malformed dict entry {json.dumps(item)[:100]}")
            out[item[0]] = _decode_tree(item[1], tensors, path, depth + 1)
        return out
    if kind in ("l", "u") and isinstance(value, list):
        items = [_decode_tree(v, tensors, path, depth + 1) for v in value]
        return items if kind == "l" else tuple(items)
    if kind == "v" and (value is None or isinstance(value, (bool, int, float, str))):
        return value
    raise bad(f"has a malformed node {json.dumps(node)[:100]}")


def _open_for_writing(path):
    """A temporary file beside ``path`` (for the atomic replace); errors name ``path``."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(errno.ENOENT, f"funcgrad.save: cannot save {path}: the "
                                f"directory {directory} does not exist", path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, f"funcgrad.save: cannot save {path}: it is a "
                                f"directory", path)
    try:
        return tempfile.mkstemp(prefix=".tmp-", suffix=".safetensors", dir=directory)
    except OSError as e:
        raise type(e)(e.errno, f"funcgrad.save: cannot save {path}: cannot create a file in "
                      f"{directory} ({e.strerror})", path) from e


def save(obj, path, metadata=None):
    """Save a state dict (or a module's, or any nested dict of arrays) as safetensors.

    Example:
        >>> funcgrad.save({"w": jnp.ones(3)}, "w.safetensors")
        >>> funcgrad.load("w.safetensors")
        {'w': Array([1., 1., 1.], dtype=float32)}
    """
    if hasattr(obj, "state_dict") and callable(obj.state_dict):
        obj = obj.state_dict()
    tensors = {}
    flat = isinstance(obj, dict) and all(isinstance(k, str) for k in obj) and all(
        _is_array(v) for v in obj.values())
    if flat:
        for k, v in obj.items():
            tensors[k] = _to_numpy(v)
        tree = None
    else:
        tree = _encode_tree(obj, "", tensors)
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    if tree is not None:
        meta["funcgrad.tree"] = json.dumps(tree)
    write_file(os.fspath(path), tensors, meta)


def write_file(path, tensors, metadata=None, fn="funcgrad.save"):
    """Write ``tensors`` (name -> anything with ``dtype``, ``shape`` and ``nbytes`` that
    ``np.asarray`` turns into its value, fetched one at a time while writing) as the
    safetensors file ``path``, atomically (a temporary file, fsynced, then renamed); ``fn``
    names the caller in errors.

    Example:
        >>> from funcgrad.serialization import write_file
        >>> write_file("raw.safetensors", {"a": np.arange(3, dtype=np.int8)}, {"note": "hi"})
        >>> funcgrad.load("raw.safetensors")
        {'a': Array([0, 1, 2], dtype=int8)}
    """
    header = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    offset = 0
    order = sorted(tensors, key=lambda k: (-np.dtype(tensors[k].dtype).itemsize, k))
    for k in order:
        t = tensors[k]
        n = int(t.nbytes)
        header[k] = {"dtype": _code_of(t.dtype), "shape": [int(d) for d in t.shape],
                     "data_offsets": [offset, offset + n]}
        offset += n
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * (-len(hbytes) % 8)
    fd, tmp = _open_for_writing(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(hbytes)))
            f.write(hbytes)
            for k in order:
                arr = np.ascontiguousarray(np.asarray(tensors[k]))
                if arr.dtype.byteorder == ">":
                    arr = arr.astype(arr.dtype.newbyteorder("<"))
                f.write(arr.reshape(-1).view(np.uint8).data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.errno is not None:
            raise type(e)(e.errno, f"{fn}: cannot save {path} ({e.strerror}); any "
                          f"previous file there is unchanged", path) from e
        raise


def runtime_dtype(dtype):
    """The dtype an array loaded as ``dtype`` gets on the device: 64-bit types narrow to 32
    bits unless ``enable_x64`` is set (as for every funcgrad array)."""
    dtype = np.dtype(dtype)
    if dtype.itemsize == 8 and dtype.kind in "iuf" or dtype == np.complex128:
        if not config.enable_x64:
            return np.dtype({"f": np.float32, "i": np.int32, "u": np.uint32,
                             "c": np.complex64}[dtype.kind])
    return dtype


def load(path, as_numpy=False, device=None):
    """Load a safetensors file: a dict of arrays (funcgrad arrays, or NumPy with ``as_numpy``),
    or the nested structure ``save`` recorded.

    The header is checked before any data is read (``funcgrad.checkpoint_header``): a
    malformed or hostile file raises ``funcgrad.CheckpointError`` naming the file and the
    problem. The data is memory-mapped, so loading allocates only the arrays themselves.

    Example:
        >>> funcgrad.save({"layer": {"b": jnp.zeros(2)}}, "nested.safetensors")
        >>> funcgrad.load("nested.safetensors")
        {'layer': {'b': Array([0., 0.], dtype=float32)}}
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        entries, meta, data_start = read_header(f, path)
        host = {}
        if entries and entries[-1].end > 0:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                for e in entries:
                    count = e.end - e.start
                    stored = e.dtype.newbyteorder("<") if e.dtype.itemsize > 1 else e.dtype
                    view = np.frombuffer(mm, dtype=stored, count=count // e.dtype.itemsize,
                                         offset=data_start + e.start)
                    host[e.name] = view.astype(e.dtype).reshape(e.shape)   # a copy
                    del view
        for e in entries:
            if e.name not in host:
                host[e.name] = np.zeros(e.shape, e.dtype)
    tensors = {}
    for e in entries:
        arr = host[e.name]
        if not as_numpy:
            arr = arr.astype(runtime_dtype(e.dtype), copy=False)
            arr = device_put(arr, device) if device is not None else jnp.asarray(arr)
        tensors[e.name] = arr
    tree = meta.get("funcgrad.tree")
    if tree is not None:
        try:
            structure = json.loads(tree)
        except json.JSONDecodeError as e:
            raise CheckpointError(f"funcgrad.load: {path}: the funcgrad.tree metadata is not "
                                  f"valid JSON ({e})") from None
        except RecursionError:
            raise CheckpointError(f"funcgrad.load: {path}: the funcgrad.tree metadata nests "
                                  f"too deeply") from None
        return _decode_tree(structure, tensors, path)
    return tensors
