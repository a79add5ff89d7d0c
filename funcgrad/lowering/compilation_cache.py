"""The persistent compilation cache: compiled XLA executables kept on disk, so a second process
that compiles the same program (a model's training step, its eager operations) loads the
executable instead of running XLA again.

Off by default; ``funcgrad.config.update("compilation_cache_dir", path)`` (or the environment
variable ``FUNCGRAD_COMPILATION_CACHE_DIR``, or JAX's ``JAX_COMPILATION_CACHE_DIR``) turns it
on. An entry's key is a SHA-256 of everything that decides the compiled code: the StableHLO
text, the serialized compile options (device assignment, XLA option overrides), ``XLA_FLAGS``,
the platform, its version and device kind, and the jaxlib and cache-format versions. An entry
is one file ``<key>.fgx``: a header with a checksum of the payload, then the bytes of
``client.serialize_executable``.

Concurrent processes need no locks: an entry is written to a temporary file in the same
directory and renamed into place (``os.replace`` is atomic), so a reader sees a whole entry or
none; a damaged entry (bad checksum) is a miss. Reading an entry touches its mtime, and after a
write the oldest entries (by mtime) are removed until the directory holds at most
``config.compilation_cache_max_size`` bytes (1 GiB by default): least recently used first.

Programs with Python host callbacks (``debug.print``, ``pure_callback``) are not cached: the
executable refers to Python objects of this process.

Example:
    >>> import tempfile
    >>> from funcgrad.lowering import compilation_cache
    >>> with tempfile.TemporaryDirectory() as d, \\
    ...         funcgrad.config.override("compilation_cache_dir", d):
    ...     _ = funcgrad.jit(lambda x: x * 3.0 + 1.0)(jnp.ones(2))
    ...     compilation_cache.stats()["entries"] >= 1
    True
"""
import hashlib
import os
import tempfile
import time

import jaxlib
from jaxlib import _jax

from funcgrad.config import config

FORMAT_VERSION = 1
_MAGIC = b"funcgrad-xla-cache\x00"
_SUFFIX = ".fgx"
_counts = {"hits": 0, "misses": 0, "writes": 0, "errors": 0}


def directory():
    """The cache directory (created on first use), or None when the cache is off."""
    path = config.compilation_cache_dir
    if not path:
        return None
    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    return path


def cache_key(module_text, options, device):
    """The hex SHA-256 key of compiling ``module_text`` with ``options`` for ``device``."""
    h = hashlib.sha256()
    parts = (f"format {FORMAT_VERSION}", f"jaxlib {jaxlib.__version__}", device.platform,
             device.device_kind, device.client.platform_version,
             os.environ.get("XLA_FLAGS", ""))
    for part in parts:
        h.update(str(part).encode())
        h.update(b"\x00")
    h.update(options.SerializeAsString())
    h.update(b"\x00")
    h.update(module_text.encode() if isinstance(module_text, str) else bytes(module_text))
    return h.hexdigest()


def _path(key):
    return os.path.join(directory(), key + _SUFFIX)


def get(key):
    """The serialized executable stored under ``key``, or None (a miss)."""
    path = _path(key)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        _counts["misses"] += 1
        return None
    head = len(_MAGIC) + 32
    payload = data[head:]
    if not data.startswith(_MAGIC) or hashlib.sha256(payload).digest() != data[len(_MAGIC):head]:
        _counts["errors"] += 1           # torn or foreign file: recompile, overwrite later
        return None
    try:
        os.utime(path)                   # recently used: evicted last
    except OSError:
        pass
    _counts["hits"] += 1
    return payload


def put(key, payload):
    """Store ``payload`` under ``key`` atomically, then evict down to the size bound."""
    d = directory()
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, _path(key))
    except OSError:
        _counts["errors"] += 1
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return
    _counts["writes"] += 1
    evict(config.compilation_cache_max_size)


def _entries(d):
    out = []
    for name in os.listdir(d):
        if not name.endswith(_SUFFIX) or name.startswith(".tmp-"):
            continue
        try:
            st = os.stat(os.path.join(d, name))
        except OSError:
            continue                     # removed by another process meanwhile
        out.append((st.st_mtime, st.st_size, name))
    return out


_STALE_TMP_SECONDS = 3600


def _remove_stale_temporaries(d):
    """Temporary files of writers that died mid-write (older than an hour: no live writer
    takes that long)."""
    now = time.time()
    for name in os.listdir(d):
        if name.startswith(".tmp-"):
            path = os.path.join(d, name)
            try:
                if now - os.stat(path).st_mtime > _STALE_TMP_SECONDS:
                    os.unlink(path)
            except OSError:
                pass


def evict(max_bytes):
    """Remove the least recently used entries until the cache holds at most ``max_bytes``
    (and temporary files that crashed writers left behind)."""
    d = directory()
    if d is None:
        return
    _remove_stale_temporaries(d)
    entries = sorted(_entries(d))
    total = sum(size for _, size, _ in entries)
    for _, size, name in entries:
        if total <= max_bytes:
            break
        try:
            os.unlink(os.path.join(d, name))
        except OSError:
            pass
        total -= size


def stats():
    """This process's hits, misses, writes and damaged entries, with the directory's entry count
    and size in bytes.

    Example:
        >>> from funcgrad.lowering import compilation_cache
        >>> sorted(compilation_cache.stats())
        ['bytes', 'entries', 'errors', 'hits', 'misses', 'writes']
    """
    d = directory()
    entries = _entries(d) if d is not None else []
    return dict(_counts, entries=len(entries), bytes=sum(size for _, size, _ in entries))


def load_or_compile(module_text, options, device, compile_fn):
    """(loaded executable, whether it came from the cache): from the cache when the cache is on
    and holds it, else ``compile_fn()``, which is then stored."""
    if directory() is None:
        return compile_fn(), False
    client = device.client
    key = cache_key(module_text, options, device)
    payload = get(key)
    if payload is not None:
        try:
            return client.deserialize_executable(payload, _jax.DeviceList((device,)),
                                                 options), True
        except Exception:
            _counts["errors"] += 1       # written by an incompatible build: recompile
    loaded = compile_fn()
    try:
        payload = client.serialize_executable(loaded)
    except Exception:
        _counts["errors"] += 1           # this platform cannot serialize: no caching
        return loaded, False
    put(key, payload)
    return loaded, False
