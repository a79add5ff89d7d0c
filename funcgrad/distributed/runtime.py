"""Joining this process to a multi-process run: XLA's coordination service and its clients.

Process 0 starts the coordination service (jaxlib's, gRPC) at the coordinator address; every
process, 0 included, connects a client to it. The CPU client funcgrad then makes learns every
process's devices through that connection and runs its collectives over TCP with gloo, so
``funcgrad.devices()`` lists the devices of all processes and ``funcgrad.local_devices()`` this
process's own. No transport of funcgrad's own is involved.

Example:
    >>> funcgrad.distributed.is_initialized()
    False
"""
import atexit
import ctypes
import functools
import sys
import threading

from funcgrad.distributed import cluster
from funcgrad.lowering import backend

DEFAULT_INITIALIZATION_TIMEOUT = 300   # seconds; as long as a slow cluster needs to start
DEFAULT_HEARTBEAT_TIMEOUT = 30         # seconds without news before a process counts as lost
DEFAULT_SHUTDOWN_TIMEOUT = 300         # seconds shutdown waits for the other processes
DEFAULT_PROGRAM_CHECK_TIMEOUT = 300    # seconds a new multi-process program waits for the others


class DistributedError(RuntimeError):
    """A multi-process run could not be formed, or lost one of its processes."""


class CoordinatorUnreachableError(DistributedError):
    """No coordination service answered at the coordinator address in time."""


class ProcessLostError(DistributedError):
    """Another process of the run stopped answering (it died, was killed, or hangs); raised in
    this process's main thread within ``heartbeat_timeout`` of its last sign of life."""

    def __init__(self, message, lost=()):
        super().__init__(message)
        self.lost = tuple(lost)


class _State:
    def __init__(self):
        self.lock = threading.Lock()
        self.service = None
        self.client = None
        self.coordinator_address = None
        self.source = None
        self.shutdown_timeout = DEFAULT_SHUTDOWN_TIMEOUT
        self.watchdog = None
        self.failure = None   # the ProcessLostError message, once a process was lost


_state = _State()


def _check_int(name, value, low):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"funcgrad.distributed.initialize: {name} must be an int >= {low}, "
                         f"got {value!r}")


def _resolve(coordinator_address, num_processes, process_id, local_device_ids):
    """Fill the arguments left as None from the launcher's environment; say what is missing."""
    source = "arguments"
    if None in (coordinator_address, num_processes, process_id):
        spec = cluster.detect()
        if spec is not None:
            source = spec.source
            coordinator_address = coordinator_address or spec.coordinator_address
            num_processes = spec.num_processes if num_processes is None else num_processes
            process_id = spec.process_id if process_id is None else process_id
            if local_device_ids is None:
                local_device_ids = spec.local_device_ids
    missing = [name for name, value in (("coordinator_address", coordinator_address),
                                        ("num_processes", num_processes),
                                        ("process_id", process_id)) if value is None]
    if missing:
        raise ValueError(
            f"funcgrad.distributed.initialize: {', '.join(missing)} not given and not found in "
            "the environment (looked for funcgrad's FUNCGRAD_COORDINATOR_ADDRESS / "
            "FUNCGRAD_NUM_PROCESSES / FUNCGRAD_PROCESS_ID, torchrun's MASTER_ADDR / MASTER_PORT "
            "/ WORLD_SIZE / RANK, SLURM's and Open MPI's variables)")
    if not isinstance(coordinator_address, str) or ":" not in coordinator_address:
        raise ValueError("funcgrad.distributed.initialize: coordinator_address must be "
                         f"'host:port', got {coordinator_address!r}")
    _check_int("num_processes", num_processes, 1)
    _check_int("process_id", process_id, 0)
    if process_id >= num_processes:
        raise ValueError(f"funcgrad.distributed.initialize: process_id={process_id} is not "
                         f"below num_processes={num_processes}")
    if isinstance(local_device_ids, int):
        local_device_ids = (local_device_ids,)
    if local_device_ids is not None:
        local_device_ids = tuple(local_device_ids)
        if sorted(local_device_ids) != list(range(len(local_device_ids))):
            raise ValueError(
                "funcgrad.distributed.initialize: on the CPU local_device_ids must number this "
                f"process's host devices 0..n-1, got {local_device_ids!r}")
    return coordinator_address, num_processes, process_id, local_device_ids, source


def _bind_address(coordinator_address):
    port = coordinator_address.rsplit(":", 1)[1]
    host = coordinator_address.rsplit(":", 1)[0]
    return f"[::]:{port}" if host.startswith("[") else f"0.0.0.0:{port}"


def _reason(exc):
    # the runtime's own message, when it says more than a failed conversion of its status
    text = str(exc)
    return "" if not text or "bad_cast" in text else f": {text}"


def _lost_contact(status=None):
    # Given to jaxlib so that a failed connect raises instead of aborting the process. (After
    # connect, jaxlib cannot pass its status to Python and terminates the process when it calls
    # this: that happens when the coordination service itself, process 0, goes away.)
    _state.failure = _state.failure or f"lost the coordination service: {status}"


def _raise_in_main_thread(error_class):
    # the exception is raised in the main thread at its next Python instruction
    ident = threading.main_thread().ident
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident),
                                               ctypes.py_object(error_class))


class _Watchdog(threading.Thread):
    """Asks the coordination service which processes are alive, again and again; when one is
    missing, makes the main thread raise ProcessLostError naming it.

    The question is answered once every live process has asked it (a process silent for
    ``heartbeat_timeout`` counts as dead), so every process runs this thread."""

    def __init__(self, client, process_id, num_processes, interval):
        super().__init__(name="funcgrad-distributed-watchdog", daemon=True)
        self.client, self.process_id, self.num_processes = client, process_id, num_processes
        self.interval = interval
        self.stopped = threading.Event()

    def run(self):
        everyone = list(range(self.num_processes))
        while not self.stopped.is_set():
            try:
                live = self.client.get_live_nodes(everyone)
            except Exception as exc:
                if not self.stopped.is_set():
                    self._lost((), f"lost contact with the coordination service ({exc})")
                return
            lost = sorted(set(everyone) - set(live))
            if self.stopped.is_set():
                return
            if lost:
                self._lost(lost, f"process{'es' if len(lost) > 1 else ''} "
                                 f"{', '.join(map(str, lost))} of {self.num_processes} stopped "
                                 "answering (died, was killed, or hangs)")
                return
            self.stopped.wait(self.interval)

    def _lost(self, lost, what):
        message = (f"funcgrad.distributed (process {self.process_id}): {what}; the run cannot go "
                   "on (coordinator " f"{_state.coordinator_address})")
        _state.failure = message

        class Lost(ProcessLostError):
            def __init__(self):
                super().__init__(message, lost)
        Lost.__name__ = Lost.__qualname__ = "ProcessLostError"
        _raise_in_main_thread(Lost)


def initialize(coordinator_address=None, num_processes=None, process_id=None,
               local_device_ids=None, initialization_timeout=DEFAULT_INITIALIZATION_TIMEOUT,
               heartbeat_timeout=DEFAULT_HEARTBEAT_TIMEOUT,
               shutdown_timeout=DEFAULT_SHUTDOWN_TIMEOUT,
               program_check_timeout=DEFAULT_PROGRAM_CHECK_TIMEOUT):
    """Join this process to a run of ``num_processes`` processes that share one global device
    set, before funcgrad makes its first device client.

    Arguments left as None are read from the launcher's environment
    (``funcgrad.distributed.cluster``: funcgrad's own variables, torchrun's, SLURM's, Open
    MPI's). Process 0 starts the coordination service at ``coordinator_address``
    ('host:port'; it listens on every interface at that port); every process connects to it,
    waiting at most ``initialization_timeout`` seconds for all ``num_processes`` to arrive.
    Afterwards ``funcgrad.devices()`` lists the devices of every process,
    ``funcgrad.local_devices()`` this process's, and ``funcgrad.process_index()`` /
    ``funcgrad.process_count()`` say where this process stands. ``local_device_ids`` numbers
    this process's devices (on the CPU: ``range(n)`` gives n host devices, as
    ``FUNCGRAD_CPU_DEVICES=n`` does). ``heartbeat_timeout`` is how long the service waits
    without news from a process before it counts it as lost.

    Each program over several processes' devices (a ``pmap``, a jit over a global mesh, an
    eager collective) is compared across those processes when it is compiled
    (``funcgrad.distributed.program_check``): processes that feed it different shapes or
    dtypes, or launch different programs at that point, all raise ProgramMismatchError instead
    of hanging; one that does not reach the program within ``program_check_timeout`` seconds
    makes the others raise DistributedError. ``program_check_timeout=0`` turns the check off.

    Raises CoordinatorUnreachableError (naming the address) when no service answers in time,
    and DistributedError when called twice or after funcgrad's first client was made.

    Example (here a client exists already, so joining a run is refused):
        >>> funcgrad.distributed.initialize("127.0.0.1:29500", num_processes=2, process_id=1)
        Traceback (most recent call last):
        ...
        funcgrad.distributed.runtime.DistributedError: funcgrad.distributed.initialize must be called before funcgrad makes its first device client (already started: ['cpu']); ...
    """
    from jaxlib import _jax

    with _state.lock:
        if _state.client is not None:
            raise DistributedError(
                "funcgrad.distributed.initialize: already initialized (process "
                f"{backend.distributed_runtime().process_id} of "
                f"{backend.distributed_runtime().num_processes} at "
                f"{_state.coordinator_address}); call funcgrad.distributed.shutdown() first")
        if isinstance(program_check_timeout, bool) or not isinstance(
                program_check_timeout, (int, float)) or not program_check_timeout >= 0:
            raise ValueError("funcgrad.distributed.initialize: program_check_timeout must be a "
                             f"number of seconds >= 0 (0: no check), got {program_check_timeout!r}")
        address, count, pid, local_ids, source = _resolve(
            coordinator_address, num_processes, process_id, local_device_ids)
        if backend.started_platforms():
            raise DistributedError(
                "funcgrad.distributed.initialize must be called before funcgrad makes its first "
                f"device client (already started: {backend.started_platforms()}); call it at "
                "the top of the program, before any array is created or any function runs")
        service = None
        if pid == 0:
            try:
                service = _jax.get_distributed_runtime_service(
                    _bind_address(address), count, heartbeat_timeout=int(heartbeat_timeout),
                    shutdown_timeout=int(shutdown_timeout), recoverable=True)
            except Exception as exc:
                raise DistributedError(
                    f"funcgrad.distributed.initialize: process 0 could not start the "
                    f"coordination service at {address}: {exc}") from exc
        client = _jax.get_distributed_runtime_client(
            address, pid, init_timeout=int(initialization_timeout),
            heartbeat_timeout=int(heartbeat_timeout), shutdown_timeout=int(shutdown_timeout),
            missed_heartbeat_callback=_lost_contact, shutdown_on_destruction=False,
            use_compression=True)
        try:
            client.connect()
        except Exception as exc:
            if service is not None:
                service.shutdown()
            raise CoordinatorUnreachableError(
                f"funcgrad.distributed.initialize: process {pid} of {count} could not join the "
                f"run at coordinator {address} within initialization_timeout="
                f"{initialization_timeout} s (is process 0 running, and is {address} reachable "
                f"from this host?){_reason(exc)}") from None
        if local_ids is not None:
            from funcgrad.config import config
            config.update("cpu_devices", len(local_ids))
        from funcgrad.distributed import program_check
        program_check.reset()
        check = functools.partial(program_check.check, timeout=float(program_check_timeout)) \
            if program_check_timeout else None
        backend.attach_distributed(backend.DistributedRuntime(
            client, pid, count, float(initialization_timeout), check))
        _state.service, _state.client = service, client
        _state.coordinator_address, _state.source = address, source
        _state.failure = None
        if count > 1:
            _state.watchdog = _Watchdog(client, pid, count,
                                        interval=min(1.0, heartbeat_timeout / 4))
            _state.watchdog.start()
        _state.shutdown_timeout = shutdown_timeout
    atexit.register(_shutdown_at_exit)


def shutdown():
    """Leave the multi-process run: wait (at most ``shutdown_timeout``) for the other processes
    to reach shutdown too, then close this process's client and, on process 0, the service.
    Runs by itself at exit; a no-op when not initialized. The device client made for the run
    stays usable for local work; a process cannot join a second run.

    Example:
        >>> funcgrad.distributed.shutdown()   # not initialized: nothing to do
    """
    _leave(wait_for_others=True)


def _shutdown_at_exit():
    # after an uncaught exception (or a lost process) nobody waits for this one: leave at once
    _leave(wait_for_others=_state.failure is None and getattr(sys, "last_value", None) is None)


def _leave(wait_for_others):
    with _state.lock:
        client, service, watchdog = _state.client, _state.service, _state.watchdog
        _state.client = _state.service = _state.watchdog = None
        if client is None:
            return
        if watchdog is not None:
            watchdog.stopped.set()
        try:
            if wait_for_others and _state.failure is None:
                try:
                    client.wait_at_barrier("funcgrad_shutdown",
                                           int(_state.shutdown_timeout * 1000))
                except Exception as exc:
                    raise DistributedError(
                        "funcgrad.distributed.shutdown: not every process reached shutdown "
                        f"within shutdown_timeout={_state.shutdown_timeout} s (one may have "
                        f"failed or still be working): {exc}") from None
        finally:
            try:
                client.shutdown()
            finally:
                if service is not None:
                    service.shutdown()


def is_initialized():
    """Whether ``initialize`` has joined this process to a multi-process run.

    Example:
        >>> funcgrad.distributed.is_initialized()
        False
    """
    return _state.client is not None


def coordinator_address():
    """The 'host:port' of the run's coordination service (None before ``initialize``).

    Example:
        >>> funcgrad.distributed.coordinator_address() is None
        True
    """
    return _state.coordinator_address


def environment_source():
    """Where ``initialize`` found its settings: 'arguments', 'funcgrad', 'torchrun', 'slurm' or
    'openmpi' (None before ``initialize``).

    Example:
        >>> funcgrad.distributed.environment_source() is None
        True
    """
    return _state.source

