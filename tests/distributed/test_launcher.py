"""``python -m funcgrad.distributed.run``: environments, rank prefixes, failures, signals.

The scripts launched here do not import funcgrad; the launcher does (about 2 s on a busy
machine), so the tests that start it are marked slow.
"""
import os
import signal
import time

import pytest

import distributed_procs as procs
from funcgrad.distributed import run


def _write(tmp_path, text):
    script = tmp_path / "script.py"
    script.write_text(text)
    return str(script)


def _launch(tmp_path, text, *options):
    port = procs.free_port()
    args = ["-m", "funcgrad.distributed.run", "--nproc-per-node", "2", "--master-port",
            str(port), "--stop-timeout", "5", *options, _write(tmp_path, text), "a1", "--b"]
    return procs.start(args, procs.environment()), port


def test_rank_environment_on_a_second_node():
    env = run.rank_environment(2, nproc_per_node=4, nnodes=2, node_rank=1, master_addr="m",
                               master_port=1234, base={"KEEP": "1"})
    assert env == {"KEEP": "1", "MASTER_ADDR": "m", "MASTER_PORT": "1234", "WORLD_SIZE": "8",
                   "RANK": "6", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1",
                   "PYTHONUNBUFFERED": "1"}


@pytest.mark.parametrize("argv, message", [
    (["--nproc-per-node", "0", "s.py"], "--nproc-per-node must be at least 1, got 0"),
    (["--nnodes", "2", "--node-rank", "2", "s.py"], r"--node-rank must be in \[0, 2\), got 2"),
    (["--master-port", "70000", "s.py"], "--master-port must be a TCP port, got 70000"),
])
def test_bad_options(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run.parse_args(argv)
    assert exit_info.value.code == 2
    assert message.replace("\\", "") in capsys.readouterr().err


@pytest.mark.slow
def test_every_line_prefixed_with_its_rank(tmp_path):
    process, port = _launch(tmp_path, (
        "import os, sys\n"
        "keys = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT')\n"
        "print(*(os.environ[k] for k in keys), *sys.argv[1:])\n"
        "print('second', end='')\n"
        "print('to stderr', file=sys.stderr)\n"))
    [(code, out, err)] = procs.finish([process], timeout=60)
    assert code == 0, err
    assert sorted(out.splitlines()) == [
        f"[rank0]: 0 0 2 127.0.0.1 {port} a1 --b", "[rank0]: second",
        f"[rank1]: 1 1 2 127.0.0.1 {port} a1 --b", "[rank1]: second"]
    assert sorted(err.splitlines()) == ["[rank0]: to stderr", "[rank1]: to stderr"]


@pytest.mark.slow
def test_failing_rank_stops_the_others_and_gives_its_code(tmp_path):
    process, _ = _launch(tmp_path, (
        "import os, sys, time\n"
        "if os.environ['RANK'] == '1':\n"
        "    sys.exit(7)\n"
        "print('waiting', flush=True)\n"
        "time.sleep(120)\n"))
    start = time.monotonic()
    [(code, out, err)] = procs.finish([process], timeout=60)
    assert code == 7
    assert time.monotonic() - start < 30          # rank 0 was stopped, not waited for
    assert "rank 1 (pid " in err and "exited with code 7; stopping ranks [0]" in err


@pytest.mark.slow
def test_sigterm_is_forwarded(tmp_path):
    process, _ = _launch(tmp_path, (
        "import os, signal, sys, time\n"
        "def bye(signum, frame):\n"
        "    print('got', signal.Signals(signum).name, flush=True)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', flush=True)\n"
        "time.sleep(120)\n"))
    try:
        deadline = time.monotonic() + 30
        lines = []
        while len([line for line in lines if b"ready" in line]) < 2:
            assert time.monotonic() < deadline, lines
            lines.append(process.stdout.readline())
        os.kill(process.pid, signal.SIGTERM)
        [(code, out, err)] = procs.finish([process], timeout=30)
    finally:
        procs.kill([process])
    assert code == 128 + signal.SIGTERM
    assert sorted(out.splitlines()) == ["[rank0]: got SIGTERM", "[rank1]: got SIGTERM"]


def test_exit_code_of_a_signalled_process():
    assert run.exit_code(0) == 0 and run.exit_code(3) == 3
    assert run.exit_code(-signal.SIGKILL) == 137
