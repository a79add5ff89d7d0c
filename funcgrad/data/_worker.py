"""What runs inside a DataLoader worker (a process or a thread), and the pipe protocol to it.

Uses nothing of funcgrad beyond NumPy: a worker process imports the funcgrad package (which
makes no XLA client on import) but never brings up the XLA runtime.

Protocol, main -> worker (one message each):
    ("batch", gen, task, key, seed_key)   map-style: fetch ``key`` (index list, or one index
                                          without auto-collation), seeding the batch's RNG
    ("reset", gen, seed_key)              iterable: start a fresh ``iter(dataset)``
    ("next", gen, task)                   iterable: produce the next batch (or item)
    None                                  stop
worker -> main:
    ("ok", gen, task, data) / ("end", gen, task) / ("err", gen, task, info)
    ("init_err", -1, -1, info)            worker_init_fn or setup failed; the worker exits
"""
import os
import pickle
import queue
import random
import signal
import socket
import struct
import sys
import threading
import traceback

import numpy as np

from . import collate as _collate_mod

_local = threading.local()
_default_rng = None
_default_rng_lock = threading.Lock()


class WorkerInfo:
    """Describes the worker the calling code runs in (see ``get_worker_info``).

    Attributes: ``id`` (0 .. num_workers-1), ``num_workers``, ``seed`` (this worker's seed; Python's
    ``random`` and NumPy's global generator are seeded from it), ``dataset`` (the worker's copy
    of the dataset), ``worker_type`` ("process" or "thread").

    Example:
        >>> from funcgrad.data import WorkerInfo
        >>> info = WorkerInfo(id=0, num_workers=2, seed=7, dataset=None, worker_type="thread")
        >>> info.id, info.num_workers
        (0, 2)
    """

    __slots__ = ("id", "num_workers", "seed", "dataset", "worker_type")

    def __init__(self, id, num_workers, seed, dataset, worker_type):
        self.id = id
        self.num_workers = num_workers
        self.seed = seed
        self.dataset = dataset
        self.worker_type = worker_type

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"worker_type={self.worker_type!r})")


def get_worker_info():
    """The ``WorkerInfo`` of the DataLoader worker running this code, or None in the main thread.

    Use it in ``IterableDataset.__iter__`` to split a stream between workers, or in
    ``worker_init_fn`` to configure each worker's copy of the dataset.

    Example:
        >>> from funcgrad.data import get_worker_info
        >>> get_worker_info() is None     # not inside a worker
        True
    """
    return getattr(_local, "info", None)


def current_rng():
    """The NumPy Generator that random transforms use when they were given no seed.

    Inside a DataLoader batch it is seeded from (loader seed, epoch, batch index), so random
    augmentation is reproducible whatever ``num_workers`` or worker type; for an iterable
    dataset it is seeded per (seed, epoch, worker). Outside a loader it is a process-wide
    generator seeded from the operating system.

    Example:
        >>> from funcgrad.data import current_rng
        >>> x = int(current_rng().integers(0, 10))
        >>> 0 <= x < 10
        True
    """
    rng = getattr(_local, "rng", None)
    if rng is not None:
        return rng
    global _default_rng
    with _default_rng_lock:
        if _default_rng is None:
            _default_rng = np.random.default_rng()
        return _default_rng


class _RngScope:
    """Install a Generator (or one seeded from a key list) as ``current_rng()`` for a block."""

    __slots__ = ("rng", "saved")

    def __init__(self, rng_or_key):
        self.rng = rng_or_key if isinstance(rng_or_key, np.random.Generator) \
            else np.random.default_rng(list(rng_or_key))

    def __enter__(self):
        self.saved = getattr(_local, "rng", None)
        _local.rng = self.rng

    def __exit__(self, *exc):
        _local.rng = self.saved
        return False


# ---------------------------------------------------------------------------------------------
# Fetching one task (shared by the main process and the workers).

class _FetchState:
    """Where a fetch was when it failed: the index being read, or the stage."""

    __slots__ = ("index", "stage")

    def __init__(self):
        self.index = None
        self.stage = "fetch"


def _fetch_map(dataset, key, auto_collation, collate_fn, state):
    if not auto_collation:
        state.index = key
        item = dataset[key]
        state.stage = "collate"
        return collate_fn(item)
    getitems = getattr(dataset, "__getitems__", None)
    if getitems is not None:
        state.index = key
        items = getitems(key)
    else:
        items = []
        for i in key:
            state.index = i
            items.append(dataset[i])
    state.stage = "collate"
    return collate_fn(items)


def _fetch_iter(iterator, batch_size, drop_last, auto_collation, collate_fn, state):
    """Next batch (or item) from ``iterator``; raises StopIteration when there is none."""
    if not auto_collation:
        item = next(iterator)
        state.stage = "collate"
        return collate_fn(item)
    items = []
    for _ in range(batch_size):
        try:
            items.append(next(iterator))
        except StopIteration:
            break
    if not items or (drop_last and len(items) < batch_size):
        raise StopIteration
    state.stage = "collate"
    return collate_fn(items)


def _describe_where(state, task):
    if state.stage == "collate":
        return f"collating batch {task}"
    if state.index is None:
        return f"producing batch {task}"
    if isinstance(state.index, (list, tuple, np.ndarray)):
        shown = list(state.index)[:16]
        more = "..." if len(state.index) > 16 else ""
        return f"loading batch {task} (one of indices {shown}{more})"
    return f"loading index {state.index} (batch {task})"


def _error_info(exc, where, worker_id):
    """A picklable description of ``exc`` to re-raise in the main process."""
    exc_type = type(exc)
    try:
        type_blob = pickle.dumps(exc_type)
        pickle.loads(type_blob)
    except Exception:                               # a local class, say: the name will do
        type_blob = None
    return {
        "type": type_blob,
        "type_name": f"{exc_type.__module__}.{exc_type.__qualname__}"
        if exc_type.__module__ != "builtins" else exc_type.__qualname__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc_type, exc, exc.__traceback__)),
        "where": where,
        "worker_id": worker_id,
        "pid": os.getpid(),
    }


# ---------------------------------------------------------------------------------------------
# The worker loop, independent of the transport.

class _WorkerConfig:
    """Everything a worker needs besides the dataset (pickled once, at worker start)."""

    def __init__(self, num_workers, iterable, auto_collation, collate_fn, batch_size, drop_last,
                 worker_init_fn, base_seed, worker_type):
        self.num_workers = num_workers
        self.iterable = iterable
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.worker_init_fn = worker_init_fn
        self.base_seed = base_seed
        self.worker_type = worker_type


def worker_seed(base_seed, worker_id):
    """The 63-bit seed of worker ``worker_id`` for a loader with seed ``base_seed``.

    Example:
        >>> from funcgrad.data._worker import worker_seed
        >>> worker_seed(0, 1) == worker_seed(0, 1) != worker_seed(0, 2)
        True
    """
    state = np.random.SeedSequence([base_seed, 2, worker_id]).generate_state(1, np.uint64)[0]
    return int(state >> np.uint64(1))


def _worker_loop(worker_id, dataset, cfg, recv, send):
    """Serve tasks until ``recv`` returns None or fails. ``send`` ships one result message."""
    seed = worker_seed(cfg.base_seed, worker_id)
    _local.info = WorkerInfo(worker_id, cfg.num_workers, seed, dataset, cfg.worker_type)
    if cfg.worker_type == "process":
        random.seed(seed)
        np.random.seed(seed % (2 ** 32))
    try:
        if cfg.worker_init_fn is not None:
            cfg.worker_init_fn(worker_id)
    except Exception as exc:
        send(("init_err", -1, -1, _error_info(exc, "running worker_init_fn", worker_id)))
        return
    iterator = None
    while True:
        try:
            msg = recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        kind, gen = msg[0], msg[1]
        if kind == "reset":
            _local.rng = np.random.default_rng(list(msg[2]))
            state = _FetchState()
            try:
                iterator = iter(dataset)
            except Exception as exc:
                iterator = _FailedIter(_error_info(exc, "calling iter(dataset)", worker_id))
            continue
        state = _FetchState()
        task = msg[2]
        try:
            if kind == "batch":
                with _RngScope(msg[4]):
                    data = _fetch_map(dataset, msg[3], cfg.auto_collation, cfg.collate_fn, state)
            else:                                   # "next"
                if isinstance(iterator, _FailedIter):
                    send(("err", gen, task, iterator.info))
                    iterator = iter(())
                    continue
                data = _fetch_iter(iterator, cfg.batch_size, cfg.drop_last, cfg.auto_collation,
                                   cfg.collate_fn, state)
        except StopIteration:
            send(("end", gen, task))
            continue
        except Exception as exc:
            send(("err", gen, task, _error_info(exc, _describe_where(state, task), worker_id)))
            continue
        send(("ok", gen, task, data))


class _FailedIter:
    __slots__ = ("info",)

    def __init__(self, info):
        self.info = info


# ---------------------------------------------------------------------------------------------
# Process transport: a socket pair per worker; NumPy buffers travel out of band (pickle 5).

_HEAD = struct.Struct("<QI")


class _Channel:
    """Length-prefixed pickle messages over a stream socket; array data is not copied into
    the pickle but sent as raw buffers and received straight into fresh NumPy memory."""

    def __init__(self, sock):
        self.sock = sock

    def fileno(self):
        return self.sock.fileno()

    def send(self, obj):
        buffers = []
        payload = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
        raws = [b.raw() for b in buffers]
        head = _HEAD.pack(len(payload), len(raws))
        if raws:
            head += struct.pack(f"<{len(raws)}Q", *(r.nbytes for r in raws))
        self.sock.sendall(head + payload)
        for r in raws:
            self.sock.sendall(r)

    def _read_into(self, view):
        while view.nbytes:
            got = self.sock.recv_into(view)
            if got == 0:
                raise EOFError("the other end of the DataLoader worker pipe closed")
            view = view[got:]

    def _read(self, n):
        buf = bytearray(n)
        self._read_into(memoryview(buf))
        return buf

    def recv(self):
        plen, nbuf = _HEAD.unpack(self._read(_HEAD.size))
        sizes = struct.unpack(f"<{nbuf}Q", self._read(8 * nbuf)) if nbuf else ()
        payload = self._read(plen)
        buffers = []
        for size in sizes:
            arr = np.empty(size, dtype=np.uint8)
            self._read_into(memoryview(arr))
            buffers.append(arr)
        return pickle.loads(payload, buffers=buffers)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def _process_entry(worker_id, sock, dataset, cfg):
    """Entry point of a worker process (started with 'spawn' or 'forkserver')."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)    # the main process handles Ctrl-C
    except (ValueError, OSError):
        pass
    _collate_mod._IN_WORKER = True
    chan = _Channel(sock)
    outbox = queue.SimpleQueue()
    broken = threading.Event()

    def sender():
        # Sends results while the loop computes the next one; stops on a closed pipe.
        while True:
            msg = outbox.get()
            if msg is None:
                return
            try:
                chan.send(msg)
            except Exception as exc:
                if isinstance(exc, OSError):
                    broken.set()
                    return
                # The result could not be pickled: report that instead of the data.
                try:
                    chan.send(("err", msg[1], msg[2], _error_info(
                        exc, f"sending batch {msg[2]} to the main process (pickling the "
                             f"result failed)", worker_id)))
                except OSError:
                    broken.set()
                    return

    thread = threading.Thread(target=sender, name=f"funcgrad-data-sender-{worker_id}",
                              daemon=True)
    thread.start()

    def recv():
        if broken.is_set():
            raise EOFError
        return chan.recv()

    try:
        _worker_loop(worker_id, dataset, cfg, recv, outbox.put)
    finally:
        outbox.put(None)
        thread.join(timeout=5.0)
        chan.close()
    sys.stdout.flush()


_SOCKET_BUFFER = 8 << 20


def _make_socketpair():
    """A connected pair of stream sockets with kernel buffers as large as the system allows
    (up to 8 MiB): a whole batch then goes in with one write, and the main process is woken
    once to read it rather than once per default-sized (about 200 KiB) buffer."""
    pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    for sock in pair:
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            try:
                sock.setsockopt(socket.SOL_SOCKET, option, _SOCKET_BUFFER)
            except OSError:                     # capped or refused: the default still works
                pass
    return pair
