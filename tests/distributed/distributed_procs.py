"""Starting the processes of a multi-process test: free ports, time limits, kill by pid."""
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
TIME_LIMIT = 60   # seconds any started process may run


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(**extra):
    """This process's environment with the worktree importable, one log level, and ``extra``
    (whose None values remove a variable)."""
    env = dict(os.environ)
    for name in list(env):   # no launcher variables leak in from the test runner
        if name.startswith(("MASTER_", "FUNCGRAD_COORDINATOR", "FUNCGRAD_PROCESS",
                            "FUNCGRAD_NUM_PROCESSES", "SLURM_", "OMPI_")) or name in (
                "RANK", "WORLD_SIZE", "LOCAL_RANK"):
            del env[name]
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    for name, value in extra.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = str(value)
    return env


def start(args, env):
    return subprocess.Popen([sys.executable, *args], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def finish(processes, timeout=TIME_LIMIT):
    """(returncode, stdout, stderr) of each process, waiting at most ``timeout`` seconds for all
    of them together; any still running then is killed (by pid) and the test fails."""
    deadline = time.monotonic() + timeout
    results = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=max(0.1, deadline - time.monotonic()))
            results.append((process.returncode, out.decode(), err.decode()))
    finally:
        kill(processes)
    return results


def kill(processes):
    for process in processes:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)   # its own session: it and its children
            except ProcessLookupError:
                pass
            process.wait(timeout=10)


def run_ranks(args, count=2, timeout=TIME_LIMIT, **env):
    """Run ``args`` as ranks 0..count-1 of one run on 127.0.0.1 (torchrun's variables, a free
    port, ``env`` added); ((returncode, stdout, stderr) of each rank, the port)."""
    port = free_port()
    started = []
    try:
        for rank in range(count):
            started.append(start(args, environment(MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                                                   WORLD_SIZE=count, RANK=rank, **env)))
        return finish(started, timeout=timeout), port
    finally:
        kill(started)
