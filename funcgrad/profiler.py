"""Profiler traces for TensorBoard and Perfetto, as ``jax.profiler``.

``trace(log_dir)`` (or ``start_trace`` / ``stop_trace``) records, through jaxlib's profiler
(XLA's ``ProfilerSession``): the Python calls of the host (function entry and exit), the spans
named with ``TraceAnnotation``, ``StepTraceAnnotation`` and ``annotate_function``, each jitted
call (``jit(<name>)``) and each compilation (``compile <name>``), XLA's compiler passes and
executions, and device activity where the backend reports it (GPU kernels and copies with the
CUDA plugin). On stop, the session is written as TensorBoard's profile plugin expects:
``log_dir/plugins/profile/<run>/<host>.xplane.pb`` (open with ``tensorboard --logdir log_dir``
and its "Profile" tab) together with ``<host>.trace.json.gz``, the same events in Chrome's
trace-event JSON; ``create_perfetto_trace=True`` also writes ``perfetto_trace.json.gz`` beside
them, which https://ui.perfetto.dev opens directly.

While a trace runs, jitted calls take ``jit``'s general dispatch path (a few microseconds more
per call) so that each one is named in the trace.

Example:
    >>> import tempfile
    >>> f = funcgrad.jit(lambda x: jnp.tanh(x) * 2.0)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with funcgrad.profiler.trace(d):
    ...         for step in range(2):
    ...             with funcgrad.profiler.StepTraceAnnotation("train", step_num=step):
    ...                 _ = f(jnp.ones(3)).block_until_ready()
    ...     names = {e.get("name") for e in funcgrad.profiler.read_trace_events(d)}
    >>> {"train", "jit(<lambda>)", "compile <lambda>"} <= names
    True
"""
import contextlib
import functools
import glob
import gzip
import json
import os
import sys
import threading

import jaxlib
from jaxlib import _profiler

from funcgrad.lowering import backend, dispatch

ProfileOptions = _profiler.ProfileOptions

_lock = threading.Lock()
_state = {"session": None, "log_dir": None, "perfetto": False}
_server = [None]


def start_trace(log_dir, create_perfetto_trace=False, profiler_options=None):
    """Start recording a trace that ``stop_trace`` writes under ``log_dir``.

    ``profiler_options`` is a ``funcgrad.profiler.ProfileOptions`` (jaxlib's:
    ``host_tracer_level``, ``python_tracer_level``, ``duration_ms``...); the default records
    Python calls (``python_tracer_level=1``) and host spans. Only one trace runs at a time.

    Example:
        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> funcgrad.profiler.start_trace(d)
        >>> _ = (jnp.ones(2) + 1.0).block_until_ready()
        >>> run_dir = funcgrad.profiler.stop_trace()
        >>> run_dir.startswith(os.path.join(d, "plugins", "profile"))
        True
        >>> sorted(n.endswith((".xplane.pb", ".trace.json.gz")) for n in os.listdir(run_dir))
        [True, True]
    """
    with _lock:
        if _state["session"] is not None:
            raise RuntimeError("funcgrad.profiler.start_trace: a trace is already running "
                               f"(writing to {_state['log_dir']!r}); call stop_trace() first")
        if profiler_options is None:
            profiler_options = ProfileOptions()
            profiler_options.python_tracer_level = 1
        _profiler.set_metadata("funcgrad_version", _funcgrad_version())
        _profiler.set_metadata("jaxlib_version", jaxlib.__version__)
        for device in backend.devices():
            _profiler.set_metadata(f"{device.platform}_version",
                                   device.client.platform_version)
            break
        _state["session"] = _profiler.ProfilerSession(profiler_options)
        _state["log_dir"] = os.fspath(log_dir)
        _state["perfetto"] = bool(create_perfetto_trace)
        dispatch.set_profiling(True)


def _funcgrad_version():
    package = sys.modules.get("funcgrad")    # the package this module belongs to
    return getattr(package, "__version__", "unknown")


def stop_trace():
    """Stop the running trace and write it under the ``log_dir`` given to ``start_trace``;
    returns the run directory (``log_dir/plugins/profile/<run>``)."""
    with _lock:
        session = _state["session"]
        if session is None:
            raise RuntimeError("funcgrad.profiler.stop_trace: no trace is running "
                               "(start one with start_trace(log_dir))")
        log_dir, perfetto = _state["log_dir"], _state["perfetto"]
        _state.update(session=None, log_dir=None, perfetto=False)
        dispatch.set_profiling(False)
        try:
            session.stop_and_export(log_dir)
        finally:
            _profiler.clear_metadata()
        run_dir = _latest_run(log_dir)
        if perfetto:
            _write_perfetto_trace(run_dir)
        return run_dir


@contextlib.contextmanager
def trace(log_dir, create_perfetto_trace=False, profiler_options=None):
    """Record a trace of the ``with`` block into ``log_dir`` (see ``start_trace``).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     with funcgrad.profiler.trace(d, create_perfetto_trace=True):
        ...         _ = funcgrad.jit(jnp.sin)(jnp.ones(2)).block_until_ready()
        ...     sorted(funcgrad.profiler.trace_files(d))
        ['perfetto', 'trace_json', 'xplane']
    """
    start_trace(log_dir, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


def _latest_run(log_dir):
    runs = glob.glob(os.path.join(log_dir, "plugins", "profile", "*"))
    if not runs:
        raise RuntimeError(f"funcgrad.profiler: the profiler wrote no run under {log_dir!r}")
    return max(runs, key=os.path.getmtime)


def _write_perfetto_trace(run_dir):
    """Perfetto's UI rejects the trace JSON's ``metadata`` member: write a copy without it."""
    source, = glob.glob(os.path.join(run_dir, "*.trace.json.gz"))
    with gzip.open(source, "rb") as f:
        events = json.load(f)
    events.pop("metadata", None)
    target = os.path.join(run_dir, "perfetto_trace.json.gz")
    with gzip.open(target, "wt", encoding="utf-8") as f:
        json.dump(events, f)
    return target


def trace_files(log_dir):
    """The files of the latest run under ``log_dir``: ``{"xplane": [...], "trace_json": [...],
    "perfetto": [...]}`` (kinds with no file left out)."""
    run_dir = _latest_run(os.fspath(log_dir))
    patterns = {"xplane": "*.xplane.pb", "trace_json": "*.trace.json.gz",
                "perfetto": "perfetto_trace.json.gz"}
    found = {kind: sorted(glob.glob(os.path.join(run_dir, p))) for kind, p in patterns.items()}
    return {kind: files for kind, files in found.items() if files}


def read_trace_events(log_dir):
    """The trace events (Chrome trace-event dicts: ``name``, ``ph``, ``ts``, ``dur``, ``pid``,
    ``tid``, ``args``) of the latest run under ``log_dir``, read from its ``trace.json.gz``."""
    path = trace_files(log_dir)["trace_json"][0]
    with gzip.open(path, "rb") as f:
        return json.load(f)["traceEvents"]


class TraceAnnotation(_profiler.TraceMe):
    """A named span in the trace for the duration of a ``with`` block (also a decorator through
    ``annotate_function``); keyword arguments are recorded with it. Costs almost nothing when
    no trace is running.

    Example:
        >>> with funcgrad.profiler.TraceAnnotation("load batch", size=32):
        ...     x = jnp.ones(32)
    """


class StepTraceAnnotation(TraceAnnotation):
    """Marks one training step (``step_num``) so that TensorBoard's profile plugin shows its
    step-time breakdown.

    Example:
        >>> for step in range(2):
        ...     with funcgrad.profiler.StepTraceAnnotation("train", step_num=step):
        ...         pass
    """

    def __init__(self, name, **kwargs):
        super().__init__(name, _r=1, **kwargs)


def annotate_function(func=None, name=None, **kwargs):
    """Wrap ``func`` so that each call is a named span (its qualified name by default); usable as
    ``@annotate_function`` or ``@annotate_function(name="...")``.

    Example:
        >>> @funcgrad.profiler.annotate_function
        ... def preprocess(x):
        ...     return x * 2.0
        >>> preprocess(jnp.ones(2))
        Array([2., 2.], dtype=float32)
    """
    if func is None:
        return functools.partial(annotate_function, name=name, **kwargs)
    label = name or getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))

    @functools.wraps(func)
    def wrapper(*args, **kw):
        with TraceAnnotation(label, **kwargs):
            return func(*args, **kw)
    return wrapper


def device_memory_profile(backend_name=None):
    """A snapshot of the device buffers alive now, as a gzipped ``pprof`` profile (bytes):
    ``pprof --web file`` shows which Python lines allocated how much.

    Example:
        >>> x = jnp.ones((256, 256))
        >>> profile = funcgrad.profiler.device_memory_profile()
        >>> profile[:2] == b"\\x1f\\x8b"      # gzip
        True
    """
    client = backend.get_client(backend_name) if backend_name else \
        backend.default_device().client
    return gzip.compress(client.heap_profile())


def save_device_memory_profile(filename, backend_name=None):
    """Write ``device_memory_profile(backend_name)`` to ``filename``."""
    data = device_memory_profile(backend_name)
    with open(filename, "wb") as f:
        f.write(data)


def start_server(port):
    """Start a profiler server on ``port`` (for TensorBoard's "capture profile" button or
    ``tensorboard-plugin-profile``'s remote capture); returns it.

    Example:
        >>> server = funcgrad.profiler.start_server(0)     # 0: any free port
        >>> funcgrad.profiler.stop_server()
    """
    if _server[0] is not None:
        raise RuntimeError("funcgrad.profiler.start_server: a profiler server is already "
                           "running; call stop_server() first")
    _server[0] = _profiler.start_server(port)
    return _server[0]


def stop_server():
    """Stop the server that ``start_server`` started."""
    if _server[0] is None:
        raise RuntimeError("funcgrad.profiler.stop_server: no profiler server is running")
    _server[0] = None
