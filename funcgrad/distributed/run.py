"""``python -m funcgrad.distributed.run``: start the processes of a multi-process run, in the
manner of torchrun.

    python -m funcgrad.distributed.run --nproc-per-node 2 train.py --epochs 3
    python -m funcgrad.distributed.run --nnodes 2 --node-rank 0 --nproc-per-node 4 \\
        --master-addr 10.0.0.1 --master-port 29500 train.py

Each process gets torchrun's variables (``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``,
``RANK``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``), which
``funcgrad.distributed.initialize()`` reads. Every line a process prints is prefixed with its
rank (``[rank1]: ...``) on the launcher's stdout or stderr, as it came. SIGINT and SIGTERM sent to
the launcher are forwarded to every process. When a process exits with an error, the others are
stopped (SIGTERM, then SIGKILL after ``--stop-timeout`` seconds) and the launcher exits with the
failing rank's code (128 + N for a process killed by signal N).

Example:
    >>> from funcgrad.distributed import run
    >>> run.rank_environment(local_rank=1, nproc_per_node=2, nnodes=1, node_rank=0,
    ...                      master_addr="127.0.0.1", master_port=29500)["RANK"]
    '1'
"""
import argparse
import os
import signal
import subprocess
import sys
import threading
import time


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m funcgrad.distributed.run",
        description="Start the processes of a funcgrad multi-process run on this node.")
    parser.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1,
                        help="processes to start on this node (default 1)")
    parser.add_argument("--nnodes", type=int, default=1, help="nodes in the run (default 1)")
    parser.add_argument("--node-rank", "--node_rank", type=int, default=0,
                        help="this node's index among the nodes (default 0)")
    parser.add_argument("--master-addr", "--master_addr", default="127.0.0.1",
                        help="host of the node running rank 0 (default 127.0.0.1)")
    parser.add_argument("--master-port", "--master_port", type=int, default=29500,
                        help="port of the coordination service on that host (default 29500)")
    parser.add_argument("--stop-timeout", type=float, default=10.0,
                        help="seconds the others get to exit after SIGTERM (default 10)")
    parser.add_argument("-m", "--module", action="store_true",
                        help="run the script argument as a module, like python -m")
    parser.add_argument("script", help="the training script (or module with -m)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER,
                        help="arguments passed on to the script")
    args = parser.parse_args(argv)
    for name in ("nproc_per_node", "nnodes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, "
                         f"got {getattr(args, name)}")
    if not 0 <= args.node_rank < args.nnodes:
        parser.error(f"--node-rank must be in [0, {args.nnodes}), got {args.node_rank}")
    if not 0 < args.master_port < 65536:
        parser.error(f"--master-port must be a TCP port, got {args.master_port}")
    return args


def rank_environment(local_rank, nproc_per_node, nnodes, node_rank, master_addr, master_port,
                     base=None):
    """The environment of the process with ``local_rank`` on node ``node_rank``: ``base``
    (default: the launcher's own) plus torchrun's variables.

    Example:
        >>> from funcgrad.distributed import run
        >>> env = run.rank_environment(1, nproc_per_node=2, nnodes=2, node_rank=1,
        ...                            master_addr="10.0.0.1", master_port=29500, base={})
        >>> env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["MASTER_ADDR"]
        ('3', '4', '1', '10.0.0.1')
    """
    env = dict(os.environ if base is None else base)
    env.update({
        "MASTER_ADDR": str(master_addr), "MASTER_PORT": str(master_port),
        "WORLD_SIZE": str(nnodes * nproc_per_node),
        "RANK": str(node_rank * nproc_per_node + local_rank),
        "LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": str(nproc_per_node),
        "GROUP_RANK": str(node_rank), "PYTHONUNBUFFERED": "1",
    })
    return env


def exit_code(returncode):
    """A process's return code as a shell reports it (128 + N when killed by signal N).

    Example:
        >>> from funcgrad.distributed import run
        >>> run.exit_code(3), run.exit_code(-9)
        (3, 137)
    """
    return 128 - returncode if returncode < 0 else returncode


class _Rank:
    def __init__(self, rank, process):
        self.rank, self.process = rank, process
        self.pumps = []


def _pump(stream, out, prefix, lock):
    # copy one child's stream to ``out`` a line at a time, each line prefixed with its rank
    binary = getattr(out, "buffer", None)
    for line in iter(stream.readline, b""):
        line = prefix + (line if line.endswith(b"\n") else line + b"\n")
        with lock:
            if binary is not None:
                binary.write(line)
            else:   # a text-only stream (a captured sys.stdout)
                out.write(line.decode(errors="replace"))
            out.flush()
    stream.close()


class Launcher:
    """Starts the ranks of one node, relays their output, forwards signals and stops them all
    when one fails; ``wait()`` returns the launcher's exit code."""

    def __init__(self, args):
        self.args = args
        self.ranks = []
        self.lock = threading.Lock()
        self.signalled = None

    def start(self):
        a = self.args
        command = [sys.executable, "-u"] + (["-m"] if a.module else []) + [a.script]
        command += a.script_args
        for local_rank in range(a.nproc_per_node):
            env = rank_environment(local_rank, a.nproc_per_node, a.nnodes, a.node_rank,
                                   a.master_addr, a.master_port)
            # a session of its own: a Ctrl-C at the terminal reaches the launcher only, which
            # forwards it once to every rank
            process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, start_new_session=True)
            rank = _Rank(int(env["RANK"]), process)
            prefix = f"[rank{rank.rank}]: ".encode()
            for stream, out in ((process.stdout, sys.stdout), (process.stderr, sys.stderr)):
                pump = threading.Thread(target=_pump, args=(stream, out, prefix, self.lock),
                                        daemon=True)
                pump.start()
                rank.pumps.append(pump)
            self.ranks.append(rank)

    def _send(self, signum, ranks):
        for rank in ranks:
            if rank.process.poll() is None:
                try:
                    os.kill(rank.process.pid, signum)
                except ProcessLookupError:
                    pass

    def forward(self, signum, frame=None):
        self.signalled = signum
        self._send(signum, self.ranks)

    def _stop_all(self):
        self._send(signal.SIGTERM, self.ranks)
        deadline = time.monotonic() + self.args.stop_timeout
        while time.monotonic() < deadline and any(r.process.poll() is None for r in self.ranks):
            time.sleep(0.05)
        self._send(signal.SIGKILL, self.ranks)
        for rank in self.ranks:
            rank.process.wait()

    def _report(self, message):
        with self.lock:
            sys.stderr.write(f"funcgrad.distributed.run: {message}\n")
            sys.stderr.flush()

    def wait(self):
        failed = None
        while failed is None:
            running = [r for r in self.ranks if r.process.poll() is None]
            failed = next((r for r in self.ranks if r.process.returncode not in (None, 0)),
                          None)
            if not running or self.signalled is not None:
                break
            time.sleep(0.05)
        if failed is not None:
            others = [r.rank for r in self.ranks if r is not failed and r.process.poll() is None]
            self._report(f"rank {failed.rank} (pid {failed.process.pid}) exited with code "
                         f"{exit_code(failed.process.returncode)}"
                         + (f"; stopping ranks {others}" if others else ""))
        if failed is not None or self.signalled is not None:
            self._stop_all()
        for rank in self.ranks:
            for pump in rank.pumps:
                pump.join(timeout=5)
        if failed is not None:
            return exit_code(failed.process.returncode)
        if self.signalled is not None:
            return 128 + self.signalled
        return 0


def main(argv=None):
    """Run the launcher with command-line ``argv`` (default ``sys.argv[1:]``); returns the exit
    code: 0 when every rank succeeded, else the first failing rank's.

    Example:
        >>> from funcgrad.distributed import run
        >>> run.main(["--nproc-per-node", "2", "-m", "platform"])
        [rank...]: ...
        [rank...]: ...
        0
    """
    launcher = Launcher(parse_args(sys.argv[1:] if argv is None else argv))
    previous = {s: signal.signal(s, launcher.forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        launcher.start()
        return launcher.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(main())
