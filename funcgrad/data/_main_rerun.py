"""Worker processes for a script without an ``if __name__ == "__main__":`` guard.

Python's 'forkserver' and 'spawn' start methods import the main module again in every worker,
so that classes and functions defined in the script unpickle there. In a script that iterates a
DataLoader at top level that import runs the loop again, and the worker dies trying to start
workers of its own ("An attempt has been made to start a new process before the current process
has finished its bootstrapping phase"). PyTorch on Linux forks, which copies the script's state
instead; funcgrad does not fork a parent whose XLA runtime threads may hold locks.

When the loader is started from the main module's top level outside a ``__main__`` guard, each
worker is started here instead: a fresh interpreter (``subprocess``, fork + exec: nothing of the
parent's runtime is copied) that runs the script's top-level statements one by one, as module
``__mp_main__`` with output discarded, and stops before the first statement that

* is the statement that is iterating the loader in the parent (known from the parent's stack),
* would bring up the XLA runtime (the first funcgrad computation: ``get_client`` is replaced by a
  stop while the script runs), or
* iterates any DataLoader,

keeping every name defined before it: imports, constants, dataset classes, collate functions.
Then it unpickles the dataset and runs the ordinary worker loop. A dataset class (or
``collate_fn`` / ``worker_init_fn``) defined after that point cannot be found; the worker then
fails at once with ``UnguardedMainError``, which says which line to move it above.
"""
import ast
import contextlib
import io
import multiprocessing.process
import os
import pickle
import signal
import socket
import subprocess
import sys

from . import _worker

_RERUNNING = False      # True in a worker while it runs the script's top level


class UnguardedMainError(RuntimeError):
    """A DataLoader worker could not rebuild the dataset of a script that has no
    ``if __name__ == "__main__":`` guard: what it needs is defined after the script's first
    funcgrad computation or DataLoader loop (the point where workers stop running the script).

    Example:
        >>> from funcgrad.data import UnguardedMainError
        >>> issubclass(UnguardedMainError, RuntimeError)
        True
    """


class _Stop(BaseException):
    """Ends a worker's run of the script (a BaseException: ``except Exception`` in the script
    does not swallow it)."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


def stop_if_rerunning(what):
    """Called where a worker's run of the script must end (a DataLoader pass starting)."""
    if _RERUNNING:
        raise _Stop(what)


def _is_main_guard(stmt):
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare):
        return False
    test = stmt.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(consts) == 1


def _main_path(filename):
    if os.path.isabs(filename):
        return filename
    return os.path.join(multiprocessing.process.ORIGINAL_DIR or os.getcwd(), filename)


def unguarded_main_statement():
    """``{"path", "module", "line"}`` when the caller runs, directly or not, under a top-level
    statement of the main script that is not an ``if __name__ == "__main__":`` block (``line``:
    where that statement starts); None otherwise (a guarded script, an interactive session,
    ``python -c``, or a call that does not come from the main module's top level).

    Example:
        >>> from funcgrad.data._main_rerun import unguarded_main_statement
        >>> unguarded_main_statement() is None      # doctests do not run from a script
        True
    """
    main = sys.modules.get("__main__")
    main_globals = getattr(main, "__dict__", None)
    frame, top = sys._getframe(1), None
    while frame is not None:
        if frame.f_globals is main_globals and frame.f_code.co_name == "<module>":
            top = frame
        frame = frame.f_back
    if top is None or getattr(main, "__file__", None) is None:
        return None
    path = _main_path(top.f_code.co_filename)
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    line = top.f_lineno
    for stmt in tree.body:
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            if _is_main_guard(stmt):
                return None
            spec = getattr(main, "__spec__", None)
            return {"path": path, "module": getattr(spec, "name", None), "line": stmt.lineno}
    return None


# --- parent side: a worker process started with fork + exec -----------------------------------

_BOOT = ("import sys; sys.path[:] = {path!r}; "
         "from funcgrad.data import _main_rerun; _main_rerun.worker_main({fd})")


class ExecWorker:
    """A worker process started as a fresh interpreter, with the part of the
    ``multiprocessing.Process`` interface the pool uses (``pid``, ``sentinel``, ``exitcode``,
    ``join``, ``is_alive``, ``terminate``, ``kill``, ``close``)."""

    def __init__(self, worker_id, sock, dataset, cfg, main):
        # The dataset pickles by reference to classes of ``__main__``, which the worker can
        # unpickle only after it has run the script: it travels as bytes, after the start.
        self._first = (dict(main, argv=list(sys.argv), worker_id=worker_id),
                       pickle.dumps((dataset, cfg), protocol=5))
        self._sock = sock
        self._proc = self.pid = self.sentinel = None

    def start(self):
        done_r, done_w = os.pipe()       # the worker holds the write end: EOF when it exits
        fd = self._sock.fileno()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT.format(path=list(sys.path), fd=fd)],
                pass_fds=(fd, done_w), close_fds=True)
        except BaseException:
            os.close(done_r)
            raise
        finally:
            os.close(done_w)
        self.pid = self._proc.pid
        self.sentinel = done_r

    def send_start(self, chan):
        chan.send(self._first)
        self._first = None

    @property
    def exitcode(self):
        return self._proc.poll()

    def is_alive(self):
        return self._proc.poll() is None

    def join(self, timeout=None):
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def terminate(self):
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)

    def kill(self):
        if self._proc.poll() is None:
            self._proc.kill()

    def close(self):
        if self.sentinel is not None:
            os.close(self.sentinel)
            self.sentinel = None


# --- worker side -------------------------------------------------------------------------------

def _compile_statements(path):
    with open(path, "rb") as f:
        source = f.read()
    tree = ast.parse(source, filename=path)
    for stmt in tree.body:
        yield stmt.lineno, compile(ast.Module([stmt], type_ignores=[]), path, "exec")


def _run_script(main):
    """Run the script's top level as ``__mp_main__`` up to the stop; returns (the module, a
    description of where and why it stopped)."""
    global _RERUNNING
    import types
    from funcgrad.lowering import backend

    module = types.ModuleType("__mp_main__")
    module.__file__ = main["path"]
    if main["module"]:
        module.__package__ = main["module"].rpartition(".")[0]
    sys.modules["__main__"] = sys.modules["__mp_main__"] = module

    def no_runtime(*args, **kwargs):
        raise _Stop("computes with funcgrad")

    real_get_client, backend.get_client = backend.get_client, no_runtime
    _RERUNNING = True
    stopped = (main["line"], "iterates the DataLoader in the main process")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            for line, code in _compile_statements(main["path"]):
                if line >= main["line"]:
                    break
                try:
                    exec(code, module.__dict__)
                except _Stop as stop:
                    stopped = (line, stop.reason)
                    break
                except SystemExit:
                    stopped = (line, "exits")
                    break
    finally:
        _RERUNNING = False
        backend.get_client = real_get_client
    return stopped


def _unguarded_error(exc, main, stopped):
    line, reason = stopped
    return UnguardedMainError(
        f"DataLoader: worker could not rebuild the dataset, collate_fn or worker_init_fn "
        f"({type(exc).__name__}: {exc}). The script {main['path']} has no "
        f"`if __name__ == \"__main__\":` guard around the loop at line {main['line']}, so each "
        f"worker runs the script's top-level statements to find its classes and functions, and "
        f"stops before line {line} (the first statement that {reason}); what the loader needs "
        f"is defined after it. Define datasets, collate functions and worker_init_fn above line "
        f"{line} (or in a module the script imports), or put the script's work under "
        f"`if __name__ == \"__main__\":`")


def worker_main(fd):
    """Entry point of a worker started by ``ExecWorker``: run the script, rebuild the dataset,
    serve batches."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)    # the main process handles Ctrl-C
    except (ValueError, OSError):
        pass
    sock = socket.socket(fileno=fd)
    chan = _worker._Channel(sock)
    main, payload = chan.recv()
    sys.argv[:] = main["argv"]
    wid = main["worker_id"]
    try:
        stopped = _run_script(main)
    except BaseException as exc:         # the script failed before the stop
        chan.send(("init_err", -1, -1, _worker._error_info(
            exc, f"running the top level of {main['path']} (up to line {main['line']})", wid)))
        return
    try:
        dataset, cfg = pickle.loads(payload)
    except Exception as exc:
        chan.send(("init_err", -1, -1, _worker._error_info(
            _unguarded_error(exc, main, stopped), "starting", wid)))
        return
    del payload
    _worker._process_entry(wid, sock, dataset, cfg)
