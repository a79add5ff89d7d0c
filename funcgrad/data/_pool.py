"""Main-process side of DataLoader workers: starting, feeding, watching and stopping them."""
import multiprocessing
import multiprocessing.connection
import os
import pickle
import queue
import signal
import sys
import threading
import time
import warnings
import weakref

from . import _main_rerun, _worker

# Modules the forkserver imports once, so that each forked worker starts with them loaded.
# Importing them starts no threads (funcgrad creates its XLA client lazily). '__main__' (which
# Python preloads by default) is left out on purpose: a main module that computes with funcgrad
# at top level would start the XLA runtime's threads in the forkserver, and every worker forked
# from it afterwards could deadlock. Each worker imports the main module itself instead. (Python
# 3.11 never hands the server the main module's path, so it does not preload it anyway; Python
# versions that fixed this would.)
_FORKSERVER_PRELOAD = ["numpy", "funcgrad.data._worker"]


class WorkerDiedError(RuntimeError):
    """A DataLoader worker process exited while the loader still needed it.

    Example:
        >>> from funcgrad.data import WorkerDiedError
        >>> issubclass(WorkerDiedError, RuntimeError)
        True
    """


class WorkerTimeoutError(RuntimeError):
    """No batch arrived from the DataLoader workers within ``timeout`` seconds.

    Example:
        >>> from funcgrad.data import WorkerTimeoutError
        >>> issubclass(WorkerTimeoutError, RuntimeError)
        True
    """


def _signal_name(num):
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def describe_exit(exitcode):
    """Human-readable account of a process exit code (negative means killed by a signal).

    Example:
        >>> from funcgrad.data._pool import describe_exit
        >>> describe_exit(-9)
        'was killed by signal 9 (SIGKILL)'
        >>> describe_exit(3)
        'exited with code 3'
    """
    if exitcode is None:
        return "stopped answering (it is still running)"
    if exitcode < 0:
        return f"was killed by signal {-exitcode} ({_signal_name(-exitcode)})"
    return f"exited with code {exitcode}"


def resolve_context(context):
    """The multiprocessing context for workers: by default 'forkserver' where the platform
    has it, else 'spawn'; a start-method name or a context object selects another.

    Example:
        >>> from funcgrad.data._pool import resolve_context
        >>> resolve_context("spawn").get_start_method()
        'spawn'
    """
    methods = multiprocessing.get_all_start_methods()
    if context is None:
        context = "forkserver" if "forkserver" in methods else "spawn"
    if isinstance(context, str):
        if context not in methods:
            raise ValueError(f"DataLoader: multiprocessing_context {context!r} is not available "
                             f"on this platform; choose one of {methods}")
        ctx = multiprocessing.get_context(context)
    elif hasattr(context, "Process") and hasattr(context, "get_start_method"):
        ctx = context
    else:
        raise TypeError(f"DataLoader: multiprocessing_context must be None, a start-method name "
                        f"or a multiprocessing context, got {context!r}")
    method = ctx.get_start_method()
    if method == "fork" and "jaxlib" in sys.modules:
        warnings.warn("DataLoader: multiprocessing_context='fork' with the XLA runtime loaded: "
                      "forking a process whose runtime threads hold locks can deadlock the "
                      "workers. Use 'forkserver' or 'spawn' (the default).", RuntimeWarning,
                      stacklevel=4)
    if method == "forkserver":
        _maybe_preload_forkserver(ctx)
    return ctx


def _maybe_preload_forkserver(ctx):
    try:
        from multiprocessing import forkserver
        server = forkserver._forkserver
        if server._forkserver_pid is None and server._preload_modules == ["__main__"]:
            ctx.set_forkserver_preload(_FORKSERVER_PRELOAD)
    except (AttributeError, ImportError):      # private API moved: workers just start slower
        pass


class _Probe(pickle.Pickler):
    """Pickles to nowhere (array buffers are not even copied), refusing funcgrad device arrays."""

    def reducer_override(self, obj):
        mod = type(obj).__module__ or ""
        if (mod == "funcgrad" or (mod.startswith("funcgrad.") and not mod.startswith(
                "funcgrad.data"))) and hasattr(obj, "__array__"):
            shape = getattr(obj, "shape", "?")
            raise _DeviceArrayFound(f"{mod}.{type(obj).__qualname__} of shape {shape}")
        return NotImplemented


class _DeviceArrayFound(Exception):
    pass


class _Sink:
    def write(self, data):
        return len(data)


def check_sendable(dataset, cfg, start_method):
    """Raise a clear TypeError when the worker arguments hold device arrays or cannot be
    pickled, before any worker is started."""
    try:
        _Probe(_Sink(), protocol=5, buffer_callback=lambda buf: None).dump((dataset, cfg))
    except _DeviceArrayFound as found:
        raise TypeError(
            f"DataLoader: the dataset (or collate_fn/worker_init_fn) holds a {found}; worker "
            f"processes must not touch funcgrad device arrays (each would start its own XLA "
            f"runtime). Keep the data in NumPy (numpy.asarray(x) once, up front), or use "
            f"worker_type='thread'") from None
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise TypeError(
            f"DataLoader: could not send the dataset, collate_fn or worker_init_fn to the "
            f"worker processes: the {start_method!r} start method pickles them, and pickling "
            f"failed with {type(exc).__name__}: {exc}. Define them at module level (not as "
            f"lambdas or local functions), or use worker_type='thread'") from exc


class _PoolState:
    """The resources of a pool, kept apart from it so a finalizer can release them."""

    def __init__(self):
        self.procs = []
        self.chans = []
        self.closed = False

    def shutdown(self):
        if self.closed:
            return
        self.closed = True
        for chan in self.chans:
            try:
                chan.sock.settimeout(0.2)
                chan.send(None)
            except Exception:
                pass
            chan.close()
        deadline = time.monotonic() + 0.5
        for p in self.procs:
            try:
                p.join(max(0.0, deadline - time.monotonic()))
            except Exception:
                pass
        for p in self.procs:
            try:
                if p.is_alive():
                    p.terminate()
                    p.join(1.0)
                if p.is_alive():
                    p.kill()
                    p.join(1.0)
            except Exception:
                pass
        for p in self.procs:
            try:
                p.close()
            except Exception:
                pass


class ProcessPool:
    """``num_workers`` worker processes, each with its own socket pair."""

    kind = "process"

    def __init__(self, dataset, cfg, context):
        ctx = resolve_context(context)
        self.start_method = ctx.get_start_method()
        self.num_workers = cfg.num_workers
        self.outstanding = [0] * cfg.num_workers
        self.generation = 0
        self._state = _PoolState()
        self._finalizer = weakref.finalize(self, self._state.shutdown)
        self._ready = []
        self.pids = []
        check_sendable(dataset, cfg, self.start_method)
        # A script without a __main__ guard would run its loop again in every worker that
        # imports it: such workers run the script only up to the loop (see _main_rerun).
        main = _main_rerun.unguarded_main_statement() if self.start_method != "fork" else None
        if main is not None:
            self.start_method = "exec (unguarded main script)"
        try:
            for wid in range(cfg.num_workers):
                mine, theirs = _worker._make_socketpair()
                if main is not None:
                    proc = _main_rerun.ExecWorker(wid, theirs, dataset, cfg, main)
                else:
                    proc = ctx.Process(target=_worker._process_entry,
                                       args=(wid, theirs, dataset, cfg),
                                       name=f"funcgrad-data-worker-{wid}", daemon=True)
                try:
                    proc.start()
                finally:
                    theirs.close()
                self._state.procs.append(proc)
                self._state.chans.append(_worker._Channel(mine))
                self.pids.append(proc.pid)
            if main is not None:                # all are booting: now hand out the work
                for proc, chan in zip(self._state.procs, self._state.chans):
                    proc.send_start(chan)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            self.shutdown()
            raise TypeError(
                f"DataLoader: could not send the dataset, collate_fn or worker_init_fn to the "
                f"worker processes: the {self.start_method!r} start method pickles them, and "
                f"pickling failed with {type(exc).__name__}: {exc}. Define them at module level "
                f"(not as lambdas or local functions), or use worker_type='thread'") from exc
        except BaseException:
            self.shutdown()
            raise

    @property
    def procs(self):
        return self._state.procs

    def send(self, wid, msg, doing=lambda wid: ""):
        """Send ``msg`` to worker ``wid``; WorkerDiedError (saying what the worker still owed,
        from ``doing(wid)``) when it has exited."""
        try:
            self._state.chans[wid].send(msg)
        except OSError:
            raise self._dead_error(wid, doing(wid) or " before it could be given more work") \
                from None

    def _dead_error(self, wid, doing):
        proc = self._state.procs[wid]
        proc.join(0.5)
        return WorkerDiedError(
            f"DataLoader: worker {wid} (pid {proc.pid}) {describe_exit(proc.exitcode)} "
            f"unexpectedly{doing}. The worker may have called os._exit, crashed in native code, "
            f"or been killed (the out-of-memory killer sends SIGKILL); set num_workers=0 to "
            f"debug in the main process")

    def recv(self, timeout, doing=lambda wid: ""):
        """Next (worker id, message); None when ``timeout`` seconds pass (None: wait forever).
        Raises WorkerDiedError as soon as any worker has exited."""
        if self._ready:
            return self._ready.pop(0)
        chans, procs = self._state.chans, self._state.procs
        by_fd = {}
        for wid, chan in enumerate(chans):
            by_fd[chan.fileno()] = wid
        sentinels = {p.sentinel: wid for wid, p in enumerate(procs)}
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = multiprocessing.connection.wait(list(chans) + list(sentinels), left)
            if not ready:
                return None
            got, died = [], []
            for obj in ready:
                if isinstance(obj, int):
                    died.append(sentinels[obj])
                else:
                    got.append(by_fd[obj.fileno()])
            for wid in died:                    # drain what it sent before dying
                if wid not in got and multiprocessing.connection.wait([chans[wid]], 0):
                    got.append(wid)
            for wid in sorted(got):
                try:
                    self._ready.append((wid, chans[wid].recv()))
                except (EOFError, ConnectionError):
                    raise self._dead_error(wid, doing(wid)) from None
            if self._ready:
                return self._ready.pop(0)
            if died:
                raise self._dead_error(died[0], doing(died[0]))

    def check_alive(self):
        """Raise WorkerDiedError if a worker has exited (its pipe is closed, or it has an exit
        code); results still waiting in the pipes are kept for the next ``recv``."""
        for wid, (chan, proc) in enumerate(zip(self._state.chans, self._state.procs)):
            try:
                while multiprocessing.connection.wait([chan], 0):
                    self._ready.append((wid, chan.recv()))
            except (EOFError, ConnectionError):
                raise self._dead_error(wid, " while idle between epochs") from None
            if proc.exitcode is not None:
                raise self._dead_error(wid, " while idle between epochs")

    def shutdown(self):
        self._finalizer()


class ThreadPool:
    """``num_workers`` threads in this process; results come back on one queue, unpickled."""

    kind = "thread"

    def __init__(self, dataset, cfg):
        self.num_workers = cfg.num_workers
        self.outstanding = [0] * cfg.num_workers
        self.generation = 0
        self.start_method = "thread"
        self.pids = [os.getpid()] * cfg.num_workers
        self._results = queue.SimpleQueue()
        self._inboxes = [queue.SimpleQueue() for _ in range(cfg.num_workers)]
        self._threads = []
        for wid in range(cfg.num_workers):
            t = threading.Thread(target=_thread_entry,
                                 args=(wid, dataset, cfg, self._inboxes[wid], self._results),
                                 name=f"funcgrad-data-thread-{wid}", daemon=True)
            t.start()
            self._threads.append(t)
        self._finalizer = weakref.finalize(self, _stop_threads, self._inboxes)

    def send(self, wid, msg, doing=lambda wid: ""):
        self._inboxes[wid].put(msg)

    def recv(self, timeout, doing=lambda wid: ""):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 0.25 if deadline is None else min(0.25, deadline - time.monotonic())
            if left <= 0:
                return None
            try:
                return self._results.get(timeout=left)
            except queue.Empty:
                for wid, t in enumerate(self._threads):
                    if not t.is_alive():
                        raise WorkerDiedError(f"DataLoader: worker thread {wid} stopped "
                                              f"unexpectedly{doing(wid)}")

    def check_alive(self):
        for wid, t in enumerate(self._threads):
            if not t.is_alive():
                raise WorkerDiedError(f"DataLoader: worker thread {wid} stopped unexpectedly "
                                      f"between epochs")

    def shutdown(self):
        self._finalizer()
        for t in self._threads:
            t.join(timeout=1.0)


def _stop_threads(inboxes):
    for box in inboxes:
        box.put(None)


def _thread_entry(wid, dataset, cfg, inbox, results):
    try:
        _worker._worker_loop(wid, dataset, cfg, inbox.get, lambda msg: results.put((wid, msg)))
    except BaseException as exc:      # SystemExit from dataset code: report, do not vanish
        results.put((wid, ("init_err", -1, -1, _worker._error_info(
            exc, "running the worker thread", wid))))
