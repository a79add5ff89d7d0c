"""Agreeing on every program that spans several processes, before it first runs.

A program over the devices of several processes (a ``pmap``, a jit over a global mesh, an eager
collective) runs only when every process launches the same one: fed different shapes, one
process waits in a collective the others never join, and the run hangs or XLA aborts. So when
such a program is compiled (once per entry of its program cache; later calls cost nothing),
each process publishes a fingerprint of it (a hash of the lowered module, its arguments'
shapes and dtypes and the device assignment) to the coordination service's key-value store,
under the number of this check among those of the same set of processes, and reads the other
processes'. A difference raises ProgramMismatchError on every process, naming the function and
what each process passed, instead of hanging.

Example:
    >>> from funcgrad.distributed import program_check
    >>> program_check.describe([jnp.ones((2, 3)), jnp.int32(1)])
    '(float32[2,3], int32[])'
"""
import collections
import hashlib
import json
import threading
import time

import numpy as np

from funcgrad.distributed import runtime
from funcgrad.distributed.runtime import DistributedError
from funcgrad.lowering import backend

POLL_SECONDS = 1.0   # how often a waiting process looks up whether its run was lost


class ProgramMismatchError(DistributedError):
    """Processes of a run launched different programs over their shared devices (different
    shapes or dtypes fed to one collective, or different functions at the same point); raised
    on every process that took part, before the program runs.

    ``function`` names the program, ``mine`` and ``theirs`` describe this process's and the
    differing process's arguments, ``process`` is that process's index."""

    def __init__(self, function, detail, process=None, mine=None, theirs=None):
        super().__init__(f"{function}: {detail}")
        self.function, self.detail = function, detail
        self.process, self.mine, self.theirs = process, mine, theirs


_lock = threading.Lock()
_counts = collections.Counter()    # process set -> checks made so far


def describe(avals):
    """The arguments' dtypes and shapes as one line (``avals``: anything with ``.shape`` and
    ``.dtype``).

    Example:
        >>> from funcgrad.distributed import program_check
        >>> program_check.describe([np.zeros((4,), np.float32)])
        '(float32[4])'
    """
    return "(" + ", ".join(f"{np.dtype(a.dtype).name}[{','.join(map(str, a.shape))}]"
                           for a in avals) + ")"


def _fingerprint(text, arguments, devices):
    ids = ",".join(str(d.id) for d in devices)
    return hashlib.sha256("\n".join((text, arguments, ids)).encode()).hexdigest()


def reset():
    """Forget the checks made so far: a new run numbers its programs from 0 again
    (``initialize`` calls it).

    Example:
        >>> from funcgrad.distributed import program_check
        >>> program_check.reset()
    """
    with _lock:
        _counts.clear()


def check(name, text, avals, devices, timeout):
    """Compare program ``name`` (lowered module ``text``, global argument ``avals``, run on
    ``devices``) with what the other processes of ``devices`` compiled at the same point;
    raise ProgramMismatchError on a difference, DistributedError when a process does not reach
    this point within ``timeout`` seconds."""
    rt = backend.distributed_runtime()
    me = rt.process_id
    processes = sorted({d.process_index for d in devices})
    group = "-".join(map(str, processes))
    with _lock:
        number = _counts[group]
        _counts[group] += 1
    arguments = describe(avals)
    digest = _fingerprint(text, arguments, devices)
    prefix = f"funcgrad/program_check/{group}/{number}/"
    rt.client.key_value_set(prefix + str(me), json.dumps(
        {"digest": digest, "name": name, "arguments": arguments}), allow_overwrite=True)
    where = (f"multi-process program {number} of this process, over {len(devices)} devices "
             f"of processes {group.replace('-', ', ')}")
    deadline = time.monotonic() + timeout
    for other in processes:
        if other == me:
            continue
        theirs = json.loads(_wait(rt.client, prefix + str(other), other, f"{name} ({where})",
                                  deadline, timeout))
        if theirs["digest"] == digest:
            continue
        if theirs["arguments"] != arguments:
            what = (f"process {me} passes {arguments}, process {other} passes "
                    f"{theirs['arguments']}")
        elif theirs["name"] != name:
            what = f"process {other} launched {theirs['name']} at this point instead"
        else:
            what = f"the same arguments {arguments}, but process {other} lowered another program"
        raise ProgramMismatchError(
            name, f"processes {me} and {other} launched different programs over the same "
            f"devices ({what}); every process must call the same multi-process programs in the "
            f"same order with arguments of the same shapes and dtypes ({where})",
            process=other, mine=arguments, theirs=theirs["arguments"])


def _wait(client, key, other, where, deadline, timeout):
    # short waits, so that a lost process (the watchdog's ProcessLostError, raised between
    # Python instructions) interrupts the wait
    while True:
        if runtime._state.failure is not None:
            # the watchdog raises ProcessLostError in this thread right after it records the
            # failure: give it the moment it needs, then say what is known
            time.sleep(POLL_SECONDS)
            raise DistributedError(f"{where}: {runtime._state.failure}")
        left = deadline - time.monotonic()
        if left <= 0:
            raise DistributedError(
                f"{where}: process {other} did not reach this program within "
                f"program_check_timeout={timeout} s (it runs other programs or in another order, "
                "repeats a program it has compiled before with other shapes, or is still busy)")
        try:
            return client.blocking_key_value_get(key, int(1000 * min(POLL_SECONDS, left)))
        except DistributedError:   # the watchdog's ProcessLostError, arriving here
            raise
        except Exception as exc:
            if "DEADLINE_EXCEEDED" not in str(exc):
                raise DistributedError(f"{where}: could not read process {other}'s program from "
                                       f"the coordination service: {exc}") from None
