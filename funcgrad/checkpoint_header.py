"""Reading and validating a safetensors header before any tensor data is touched.

A checkpoint may come from anywhere, so ``funcgrad.load`` trusts nothing in it. The rules are
those of the ``safetensors`` library (a file it accepts, this accepts, and the reverse):

* the first 8 bytes give the header length N (little-endian), and 8 + N fits in the file;
* the header is UTF-8 JSON: an object mapping tensor names to ``{"dtype", "shape",
  "data_offsets"}``, plus an optional ``"__metadata__"`` object of string values;
* a dtype is a known code, a shape a list of non-negative integers, and the offsets a pair
  ``[start, end]`` with ``end - start`` equal to the element count times the item size;
* the tensors, ordered by offset, tile the data area exactly: the first starts at 0, each
  starts where the previous ended (no overlap, no gap), and the last ends at the file's end.

Every violation raises ``CheckpointError`` naming the file and what is wrong; nothing is
allocated beyond the file's own size.

Example:
    >>> from funcgrad.checkpoint_header import read_header
    >>> funcgrad.save({"w": jnp.ones((2, 3))}, "model.safetensors")
    >>> with open("model.safetensors", "rb") as f:
    ...     entries, metadata, data_start = read_header(f, "model.safetensors")
    >>> [(e.name, e.dtype, e.shape, e.start, e.end) for e in entries]
    [('w', dtype('float32'), (2, 3), 0, 24)]
"""
import json
import math
import os
import struct

import numpy as np

MAX_HEADER = 100 * 1024 * 1024          # the safetensors library's limit
_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
    "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "U16": np.uint16,
    "U32": np.uint32, "U64": np.uint64, "BOOL": np.bool_, "C64": np.complex64,
}


class CheckpointError(ValueError):
    """A checkpoint file is malformed or was not written by a safetensors writer.

    Example:
        >>> with open("broken.safetensors", "wb") as f:
        ...     _ = f.write(bytes(2))
        >>> try:
        ...     funcgrad.load("broken.safetensors")
        ... except funcgrad.CheckpointError as e:
        ...     print(e)
        funcgrad.load: broken.safetensors has 2 bytes, too short to be a safetensors file
    """


def _ml_dtypes():
    import ml_dtypes
    return {"BF16": ml_dtypes.bfloat16, "F8_E4M3": ml_dtypes.float8_e4m3fn,
            "F8_E5M2": ml_dtypes.float8_e5m2}


def dtype_of(code):
    """The NumPy dtype of a safetensors dtype code, or None for an unknown code."""
    if not isinstance(code, str):
        return None
    if code in _DTYPES:
        return np.dtype(_DTYPES[code])
    extra = _ml_dtypes()
    return np.dtype(extra[code]) if code in extra else None


def code_of(dtype):
    """The safetensors dtype code of a NumPy dtype, or None if the format has none."""
    dtype = np.dtype(dtype)
    for code, dt in list(_DTYPES.items()) + list(_ml_dtypes().items()):
        if np.dtype(dt) == dtype:
            return code
    return None


def _is_count(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


class TensorEntry:
    """One tensor of the header: name, dtype, shape and byte range within the data area."""

    __slots__ = ("name", "dtype", "shape", "start", "end")

    def __init__(self, name, dtype, shape, start, end):
        self.name, self.dtype, self.shape, self.start, self.end = name, dtype, shape, start, end


def _entry(path, name, info):
    def bad(what):
        return CheckpointError(f"funcgrad.load: {path}: tensor {name!r}: {what}")
    if not isinstance(info, dict):
        raise bad(f"expected an object with dtype, shape and data_offsets, got "
                  f"{type(info).__name__}")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in info]
    if missing:
        raise bad(f"missing {', '.join(missing)}")
    dtype = dtype_of(info["dtype"])
    if dtype is None:
        raise bad(f"unknown dtype {info['dtype']!r} (known: "
                  f"{', '.join(list(_DTYPES) + list(_ml_dtypes()))})")
    shape = info["shape"]
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise bad(f"shape must be a list of non-negative integers, got {shape!r}")
    offsets = info["data_offsets"]
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(_is_count(o) for o in offsets)):
        raise bad(f"data_offsets must be two non-negative integers, got {offsets!r}")
    start, end = offsets
    if end < start:
        raise bad(f"data_offsets {offsets} are reversed")
    nbytes = math.prod(shape) * dtype.itemsize
    if end - start != nbytes:
        raise bad(f"data_offsets {offsets} hold {end - start} bytes, but shape {shape} of "
                  f"{info['dtype']} needs {nbytes}")
    return TensorEntry(name, dtype, tuple(shape), start, end)


def _parse_json(path, raw):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"funcgrad.load: {path}: the header is not UTF-8 ({e})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CheckpointError(f"funcgrad.load: {path}: the header is not valid JSON ({e}); "
                              f"not a safetensors file?") from None
    except RecursionError:
        raise CheckpointError(f"funcgrad.load: {path}: the header nests too deeply") from None


def read_header(f, path):
    """Read and check the header of the open binary file ``f`` (named ``path`` in errors).

    Returns ``(entries, metadata, data_start)``: the tensors ordered by offset, the metadata
    dict (str -> str) and the file position where the data area begins.
    """
    size = os.fstat(f.fileno()).st_size
    raw = f.read(8)
    if len(raw) != 8:
        raise CheckpointError(f"funcgrad.load: {path} has {size} bytes, too short to be a "
                              f"safetensors file")
    (n,) = struct.unpack("<Q", raw)
    if n > MAX_HEADER or 8 + n > size:
        raise CheckpointError(f"funcgrad.load: {path}: the header claims {n} bytes but the "
                              f"file has {size} bytes (at most {MAX_HEADER} are allowed); "
                              f"the file is truncated or not a safetensors file")
    header = _parse_json(path, f.read(n))
    if not isinstance(header, dict):
        raise CheckpointError(f"funcgrad.load: {path}: the header must be a JSON object, got "
                              f"{type(header).__name__}")
    meta = header.pop("__metadata__", None)
    if meta is None:
        meta = {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"funcgrad.load: {path}: __metadata__ must map names to "
                              f"strings, got {json.dumps(meta)[:200]}")
    entries = sorted((_entry(path, k, v) for k, v in header.items()),
                     key=lambda e: (e.start, e.end))
    data_size = size - 8 - n
    pos = 0
    for e in entries:
        if e.start != pos:
            what = "overlaps the previous tensor" if e.start < pos else "leaves a gap before it"
            raise CheckpointError(f"funcgrad.load: {path}: tensor {e.name!r} at bytes "
                                  f"{e.start}..{e.end} {what} (previous data ends at {pos})")
        pos = e.end
    if pos != data_size:
        where = "beyond the end of" if pos > data_size else "short of the end of"
        raise CheckpointError(f"funcgrad.load: {path}: the tensors' data ends at byte {pos}, "
                              f"{where} the data area ({data_size} bytes)")
    return entries, meta, 8 + n
