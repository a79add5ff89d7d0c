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
import json
import os
import struct
import tempfile

import numpy as np

_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
    "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "U16": np.uint16,
    "U32": np.uint32, "U64": np.uint64, "BOOL": np.bool_, "C64": np.complex64,
}
_MAX_HEADER = 100 * 1024 * 1024


def _bf16():
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


def _code_of(dtype):
    dtype = np.dtype(dtype)
    if dtype == _bf16():
        return "BF16"
    for code, dt in _DTYPES.items():
        if np.dtype(dt) == dtype:
            return code
    raise TypeError(f"funcgrad.save: dtype {dtype} has no safetensors code")


def _dtype_of(code):
    if code == "BF16":
        return _bf16()
    if code not in _DTYPES:
        raise ValueError(f"funcgrad.load: unsupported safetensors dtype {code!r}")
    return np.dtype(_DTYPES[code])


def _is_array(x):
    from funcgrad.core.interpreters import Value
    return isinstance(x, (np.ndarray, np.generic, Value)) or (
        hasattr(x, "detach") and hasattr(x, "numpy")) or type(x).__name__ == "Parameter"


def _to_numpy(x):
    if type(x).__name__ == "Parameter":
        x = x.data
    if hasattr(x, "detach") and hasattr(x, "cpu"):      # torch tensor
        x = x.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(x))


def _encode_tree(obj, path, tensors):
    """JSON-able structure of ``obj``; arrays are moved into ``tensors`` by dotted path."""
    if _is_array(obj):
        tensors[path] = _to_numpy(obj)
        return {"t": path}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"funcgrad.save: dict keys must be str or int, got {k!r}")
            sub = f"{path}.{k}" if path else str(k)
            items.append([k, _encode_tree(v, sub, tensors)])
        return {"d": items}
    if isinstance(obj, (list, tuple)):
        kind = "l" if isinstance(obj, list) else "u"
        return {kind: [_encode_tree(v, f"{path}.{i}" if path else str(i), tensors)
                       for i, v in enumerate(obj)]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"v": obj}
    raise TypeError(f"funcgrad.save: cannot save a {type(obj).__name__} at {path or 'top'}; "
                    f"only arrays, dicts, lists, tuples, numbers, strings and None")


def _decode_tree(node, tensors):
    if "t" in node:
        return tensors[node["t"]]
    if "d" in node:
        return {k: _decode_tree(v, tensors) for k, v in node["d"]}
    if "l" in node:
        return [_decode_tree(v, tensors) for v in node["l"]]
    if "u" in node:
        return tuple(_decode_tree(v, tensors) for v in node["u"])
    return node["v"]


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
    header = {}
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    if tree is not None:
        meta["funcgrad.tree"] = json.dumps(tree)
    if meta:
        header["__metadata__"] = meta
    offset = 0
    order = sorted(tensors, key=lambda k: (-tensors[k].dtype.itemsize, k))
    for k in order:
        arr = tensors[k]
        n = arr.nbytes
        header[k] = {"dtype": _code_of(arr.dtype), "shape": list(arr.shape),
                     "data_offsets": [offset, offset + n]}
        offset += n
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * (-len(hbytes) % 8)
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".safetensors", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(hbytes)))
            f.write(hbytes)
            for k in order:
                arr = tensors[k]
                if arr.dtype.byteorder == ">":
                    arr = arr.astype(arr.dtype.newbyteorder("<"))
                f.write(arr.tobytes(order="C"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load(path, as_numpy=False, device=None):
    """Load a safetensors file: a dict of arrays (funcgrad arrays, or NumPy with ``as_numpy``),
    or the nested structure ``save`` recorded.

    Example:
        >>> funcgrad.save({"layer": {"b": jnp.zeros(2)}}, "nested.safetensors")
        >>> funcgrad.load("nested.safetensors")
        {'layer': {'b': Array([0., 0.], dtype=float32)}}
    """
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"funcgrad.load: {path} is too short to be a safetensors file")
        (n,) = struct.unpack("<Q", raw)
        if n > _MAX_HEADER:
            raise ValueError(f"funcgrad.load: {path}: header length {n} is implausible; not a "
                             f"safetensors file?")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"funcgrad.load: {path}: invalid safetensors header ({e})") from None
        data = f.read()
    meta = header.pop("__metadata__", None) or {}
    tensors = {}
    for k, info in header.items():
        dt = _dtype_of(info["dtype"])
        start, end = info["data_offsets"]
        shape = tuple(info["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        if end - start != count * dt.itemsize or end > len(data):
            raise ValueError(f"funcgrad.load: {path}: tensor {k!r} has inconsistent offsets "
                             f"{start}..{end} for shape {shape} {dt}")
        arr = np.frombuffer(data, dtype=dt.newbyteorder("<"), count=count,
                            offset=start).reshape(shape).astype(dt)
        if not as_numpy:
            import funcgrad
            if dt == np.float64 or dt == np.int64 or dt == np.uint64 or dt == np.complex128:
                if not funcgrad.config.enable_x64:
                    arr = arr.astype({"f": np.float32, "i": np.int32, "u": np.uint32,
                                      "c": np.complex64}[dt.kind])
            arr = funcgrad.device_put(arr, device) if device is not None else \
                funcgrad.numpy.asarray(arr)
        tensors[k] = arr
    tree = meta.get("funcgrad.tree")
    if tree is not None:
        return _decode_tree(json.loads(tree), tensors)
    return tensors
