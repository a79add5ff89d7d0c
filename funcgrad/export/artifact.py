"""The bytes of an exported artifact: a fixed binary preamble, a JSON header, and sections
(StableHLO portable artifacts, safetensors weights, the nested backward pass).

Layout (all integers little-endian; ``docs/export.md`` has the whole description)::

    offset  size  field
    0       8     magic b"FGEXPORT"
    8       4     u32 format version (FORMAT_VERSION)
    12      4     u32 CRC-32 (zlib) of the N header bytes
    16      8     u64 N, the JSON header's length in bytes (a multiple of 8)
    24      N     JSON header, UTF-8, padded with spaces
    24+N    ...   data area: each section at header["sections"][name]["offset"] (from the
                  start of the data area), "length" bytes, with its zlib CRC-32 in "crc32";
                  sections start at multiples of 8, with zero bytes between them

Nothing is unpickled: the header is JSON, the modules are StableHLO bytecode, the weights are
safetensors.

Example:
    >>> from funcgrad.export import artifact
    >>> blob = artifact.pack({"name": "f"}, {"notes": b"hello"})
    >>> blob[:8], len(blob)
    (b'FGEXPORT', 128)
    >>> header, sections = artifact.unpack(blob, "example")
    >>> header["name"], sections["notes"]
    ('f', b'hello')
"""
import json
import struct
import zlib

import numpy as np

from funcgrad import tree_util
from funcgrad.checkpoint_header import code_of, dtype_of

MAGIC = b"FGEXPORT"
FORMAT_VERSION = 1            # the newest format this funcgrad writes and reads
OLDEST_FORMAT_VERSION = 1     # the oldest it still reads
_PREAMBLE = struct.Struct("<8sIIQ")


class ExportFormatError(ValueError):
    """An exported artifact is corrupt, truncated, or from a newer funcgrad."""


def pack(header, sections):
    """The artifact bytes for ``header`` (a JSON-able dict) and ``sections`` (name -> bytes)."""
    table, offset, chunks = {}, 0, []
    for name, data in sections.items():
        data = bytes(data)
        table[name] = {"offset": offset, "length": len(data), "crc32": zlib.crc32(data)}
        pad = -len(data) % 8
        chunks.append(data + b"\0" * pad)
        offset += len(data) + pad
    header = dict(header, format_version=FORMAT_VERSION, sections=table)
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return _PREAMBLE.pack(MAGIC, FORMAT_VERSION, zlib.crc32(text), len(text)) + text + \
        b"".join(chunks)


def unpack(data, where):
    """(header, sections) of artifact bytes ``data``; ``ExportFormatError`` naming ``where``
    and the problem for anything malformed."""
    data = memoryview(bytes(data))
    if len(data) < _PREAMBLE.size:
        raise ExportFormatError(f"{where}: {len(data)} bytes is too short for a funcgrad "
                                f"export artifact (the preamble alone is {_PREAMBLE.size})")
    magic, version, header_crc, n = _PREAMBLE.unpack_from(data, 0)
    if magic != MAGIC:
        raise ExportFormatError(f"{where}: not a funcgrad export artifact (starts with "
                                f"{bytes(magic)!r}, expected {MAGIC!r})")
    if version > FORMAT_VERSION:
        raise ExportFormatError(
            f"{where}: the artifact has format version {version}, newer than the versions this "
            f"funcgrad reads ({OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}); it was written by "
            f"a newer funcgrad: upgrade funcgrad to load it")
    if version < OLDEST_FORMAT_VERSION:
        raise ExportFormatError(f"{where}: format version {version} is no longer supported "
                                f"(this funcgrad reads {OLDEST_FORMAT_VERSION} to "
                                f"{FORMAT_VERSION})")
    start = _PREAMBLE.size + n
    if start > len(data):
        raise ExportFormatError(f"{where}: the header claims {n} bytes but only "
                                f"{len(data) - _PREAMBLE.size} follow the preamble; the "
                                f"artifact is truncated")
    if zlib.crc32(data[_PREAMBLE.size:start]) != header_crc:
        raise ExportFormatError(f"{where}: the header fails its CRC-32 check; the artifact "
                                f"is corrupt")
    try:
        header = json.loads(bytes(data[_PREAMBLE.size:start]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ExportFormatError(f"{where}: the header is not valid UTF-8 JSON ({e})") from None
    if not isinstance(header, dict) or not isinstance(header.get("sections"), dict):
        raise ExportFormatError(f"{where}: the header is not an object with a section table")
    if header.get("format_version") != version:
        raise ExportFormatError(f"{where}: the header says format version "
                                f"{header.get('format_version')!r}, the preamble {version}")
    sections = {}
    body = data[start:]
    end = max((int(e.get("offset", 0)) + int(e.get("length", 0)) + 7) // 8 * 8
              for e in header["sections"].values() if isinstance(e, dict)) \
        if header["sections"] else 0
    if end != len(body):
        what = "is truncated" if end > len(body) else "has trailing bytes"
        raise ExportFormatError(f"{where}: the sections end at byte {end} of the data area, "
                                f"which has {len(body)}; the artifact {what}")
    covered = []
    for name, entry in header["sections"].items():
        try:
            off, length, crc = int(entry["offset"]), int(entry["length"]), int(entry["crc32"])
        except (KeyError, TypeError, ValueError):
            raise ExportFormatError(f"{where}: section {name!r} has a malformed entry "
                                    f"{entry!r}") from None
        if off < 0 or length < 0 or off + length > len(body):
            raise ExportFormatError(f"{where}: section {name!r} spans bytes {off}..{off + length}"
                                    f" of the data area, which has {len(body)}; the artifact "
                                    f"is truncated")
        chunk = bytes(body[off:off + length])
        if zlib.crc32(chunk) != crc:
            raise ExportFormatError(f"{where}: section {name!r} fails its CRC-32 check; the "
                                    f"artifact is corrupt")
        sections[name] = chunk
        covered.append((off, off + length))
    pos = 0
    for lo, hi in sorted(covered) + [(len(body), len(body))]:
        if any(body[pos:max(pos, lo)]):
            raise ExportFormatError(f"{where}: nonzero bytes between sections at data offset "
                                    f"{pos}; the artifact is corrupt")
        pos = max(pos, hi)
    return header, sections


def require(header, key, kind, where):
    """``header[key]``, checked to be an instance of ``kind``."""
    value = header.get(key)
    if not isinstance(value, kind):
        raise ExportFormatError(f"{where}: header field {key!r} is missing or malformed "
                                f"({value!r})")
    return value


# --- weights as safetensors -------------------------------------------------------------------
def weights_to_safetensors(names, arrays):
    """A safetensors blob of ``arrays`` under ``names`` (in that order)."""
    header, offset, chunks = {}, 0, []
    for name, arr in zip(names, arrays):
        arr = np.asarray(arr, order="C")
        code = code_of(arr.dtype)
        if code is None:
            raise TypeError(f"export: weight {name!r} has dtype {arr.dtype}, which safetensors "
                            f"cannot store")
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        raw = arr.tobytes(order="C")
        header[name] = {"dtype": code, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def weights_from_safetensors(blob, names, where):
    """The arrays named ``names`` in safetensors ``blob`` (NumPy, in that order)."""
    if len(blob) < 8:
        raise ExportFormatError(f"{where}: the weights section is too short")
    (n,) = struct.unpack_from("<Q", blob, 0)
    if 8 + n > len(blob):
        raise ExportFormatError(f"{where}: the weights header claims {n} bytes, the section "
                                f"has {len(blob) - 8}")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ExportFormatError(f"{where}: the weights header is not JSON ({e})") from None
    data = memoryview(blob)[8 + n:]
    out = []
    for name in names:
        info = header.get(name)
        dtype = dtype_of(info.get("dtype")) if isinstance(info, dict) else None
        try:
            shape = tuple(int(d) for d in info["shape"])
            start, end = (int(v) for v in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            dtype = None
        if dtype is None or any(d < 0 for d in shape) or not 0 <= start <= end <= len(data) \
                or end - start != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise ExportFormatError(f"{where}: weight {name!r} is missing or malformed in the "
                                    f"weights section ({info!r})")
        stored = dtype.newbyteorder("<") if dtype.itemsize > 1 else dtype
        arr = np.frombuffer(data[start:end], dtype=stored).astype(dtype).reshape(shape)
        out.append(arr)
    return out


# --- pytree structures as JSON ----------------------------------------------------------------
class _Leaf:
    pass


_LEAF = _Leaf()


def tree_to_json(treedef, what):
    """A JSON description of ``treedef`` (tuples, lists, dicts with str/int keys, None, leaves);
    TypeError for other node types, naming ``what``."""
    def enc(node):
        if node is _LEAF:
            return "*"
        if node is None:
            return {"n": None}
        if type(node) is tuple:
            return {"t": [enc(x) for x in node]}
        if type(node) is list:
            return {"l": [enc(x) for x in node]}
        if type(node) is dict:
            if not all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in node):
                raise TypeError(f"export: {what} has a dict with keys {list(node)}; only str "
                                f"and int keys can be exported")
            return {"d": [[k, enc(v)] for k, v in node.items()]}
        raise TypeError(f"export: {what} contains a {type(node).__name__}; exported functions "
                        f"take and return tuples, lists, dicts, None and arrays (convert "
                        f"{type(node).__name__} to one of those)")
    return enc(treedef.unflatten([_LEAF] * treedef.num_leaves))


def tree_from_json(node, where):
    """The PyTreeDef that ``tree_to_json`` described."""
    def dec(n):
        if n == "*":
            return 0
        if isinstance(n, dict) and len(n) == 1:
            (kind, body), = n.items()
            if kind == "n":
                return None
            if kind in ("t", "l") and isinstance(body, list):
                items = [dec(x) for x in body]
                return tuple(items) if kind == "t" else items
            if kind == "d" and isinstance(body, list):
                return {k: dec(v) for k, v in body}
        raise ExportFormatError(f"{where}: malformed tree node {json.dumps(n)[:80]}")
    try:
        return tree_util.tree_structure(dec(node))
    except (TypeError, ValueError, RecursionError) as e:
        raise ExportFormatError(f"{where}: malformed tree ({e})") from None
