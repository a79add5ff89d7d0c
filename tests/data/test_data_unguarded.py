"""A training script without an ``if __name__ == "__main__":`` guard, PyTorch-style, that
iterates DataLoaders with worker processes after a jitted model has run (issue 21)."""
import os
import subprocess
import sys
import textwrap

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))

_UNGUARDED = textwrap.dedent("""
    import os
    import sys
    import numpy as np
    import funcgrad
    import funcgrad.numpy as jnp
    from funcgrad.data import DataLoader, Dataset
    from data_helpers import xla_client_count, xla_thread_count

    print("top level runs")         # once: the workers discard what the script prints
    SCALE = float(sys.argv[1])      # the workers see the parent's argv

    {early}
    class Squares(Dataset):
        def __len__(self):
            return 24

        def __getitem__(self, i):
            return (np.float32(i * SCALE) ** 2, i, np.int32(os.getpid()),
                    np.int32(xla_thread_count()), np.int32(xla_client_count()))

    {late}
    f = funcgrad.jit(lambda v: jnp.tanh(v) * 2.0)
    assert np.allclose(np.asarray(f(np.ones(3, np.float32))), np.tanh(1.0) * 2.0)
    assert xla_thread_count() > 0            # the runtime's threads are running here
    try:
        funcgrad.numpy.zeros(2)              # `except Exception` does not stop a worker's run
    except Exception:
        pass

    for shuffle in (False, True):
        loader = DataLoader(Squares(), batch_size=5, num_workers=2, shuffle=shuffle, timeout=60)
        seen, pids = [], set()
        for x, i, pid, threads, clients in loader:
            assert np.allclose(np.asarray(x), (np.asarray(i) * SCALE) ** 2)
            assert (np.asarray(threads) == 0).all() and (np.asarray(clients) == 0).all()
            seen += np.asarray(i).tolist()
            pids |= set(np.asarray(pid).tolist())
            np.asarray(f(jnp.asarray(x)))    # the batches feed the jitted model
        assert sorted(seen) == list(range(24)), seen
        assert len(pids) == 2 and os.getpid() not in pids, pids
    print("OK")
""")


def _run(tmp_path, early="", late=""):
    script = tmp_path / "train_unguarded.py"
    script.write_text(_UNGUARDED.format(early=early, late=late))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([_REPO, _HERE]))
    return subprocess.run([sys.executable, str(script), "0.5"], env=env, capture_output=True,
                          text=True, timeout=120, cwd=str(tmp_path))


@pytest.mark.slow
def test_unguarded_script_iterates_loaders_with_worker_processes(tmp_path):
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["top", "level", "runs", "OK"], proc.stdout
    assert "bootstrapping phase" not in proc.stderr


@pytest.mark.slow
def test_dataset_defined_after_the_first_computation_fails_at_once(tmp_path):
    # the class comes after a funcgrad computation, which is where workers stop running it
    proc = _run(tmp_path, early="funcgrad.numpy.ones(2)\n", late="")
    assert proc.returncode == 1
    assert "funcgrad.data._main_rerun.UnguardedMainError" in proc.stderr, proc.stderr[-3000:]
    assert "Can't get attribute 'Squares'" in proc.stderr
    assert "stops before line 13 (the first statement that computes with funcgrad)" \
        in proc.stderr
    assert 'put the script\'s work under `if __name__ == "__main__":`' in proc.stderr


def test_detection_of_the_main_guard(tmp_path):
    from funcgrad.data import _main_rerun
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent("""
        import json
        from funcgrad.data._main_rerun import unguarded_main_statement

        def where():
            return unguarded_main_statement()

        top = where()
        if __name__ == "__main__":
            guarded = where()
            print(json.dumps([top, guarded]))
    """))
    env = dict(os.environ, PYTHONPATH=_REPO)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    import json
    top, guarded = json.loads(out)
    assert top == {"path": str(script), "module": None, "line": 8}
    assert guarded is None
    assert _main_rerun.unguarded_main_statement() is None       # pytest: no script top level
