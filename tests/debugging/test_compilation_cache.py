"""The persistent compilation cache: a second process loads executables instead of compiling,
concurrent writers leave whole entries, damaged entries are recompiled, the size bound evicts
the least recently used entries, and the key covers what decides the compiled code."""
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.lowering import compilation_cache, executable

WORKER = pathlib.Path(__file__).with_name("cache_worker.py")
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _env():
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("FUNCGRAD_COMPILATION_CACHE_DIR", None)
    return env


def run_worker(cache_dir):
    out = subprocess.run([sys.executable, str(WORKER), str(cache_dir)], capture_output=True,
                         text=True, timeout=180, env=_env(), cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def cache_dir(tmp_path):
    with funcgrad.config.override("compilation_cache_dir", str(tmp_path)):
        yield tmp_path


@pytest.mark.slow
def test_second_process_loads_instead_of_compiling(tmp_path):
    cold = run_worker(tmp_path)
    warm = run_worker(tmp_path)
    assert cold["stats"]["hits"] == 0 and cold["stats"]["writes"] >= 1
    assert warm["stats"]["misses"] == 0 and warm["stats"]["writes"] == 0
    assert warm["stats"]["hits"] == cold["stats"]["writes"]
    assert warm["stats"]["entries"] == cold["stats"]["entries"]
    assert warm["loss"] == cold["loss"]


@pytest.mark.slow
def test_concurrent_processes_write_whole_entries(tmp_path):
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(), cwd=ROOT) for _ in range(2)]
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=180)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert results[0]["loss"] == results[1]["loss"]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]
    after = run_worker(tmp_path)                  # every entry reads back whole
    assert after["stats"]["misses"] == 0 and after["stats"]["errors"] == 0
    assert after["loss"] == results[0]["loss"]


def _fresh_compile(fn, *args):
    """Compile ``fn`` for ``args`` without this process's in-memory caches."""
    jitted = funcgrad.jit(fn)
    jitted.clear_cache()
    closed = jitted.lower(*args).jaxpr
    return executable.compile_closed_jaxpr(closed, funcgrad.devices()[0], name="probe")


def test_hit_in_process_gives_the_same_results(cache_dir):
    def f(a):
        return jnp.sin(a) * 3.0 + 1.5
    x = jnp.linspace(0.0, 1.0, 5)
    before = dict(compilation_cache.stats())
    first = _fresh_compile(f, x)
    second = _fresh_compile(f, x)
    now = compilation_cache.stats()
    assert now["writes"] == before["writes"] + 1 and now["hits"] == before["hits"] + 1
    np.testing.assert_array_equal(np.asarray(first([x])[0]), np.asarray(second([x])[0]))
    np.testing.assert_allclose(np.asarray(second([x])[0]), np.sin(np.linspace(0, 1, 5)) * 3
                               + 1.5, rtol=1e-6)


def test_damaged_entry_is_recompiled_and_replaced(cache_dir):
    def f(a):
        return a * 7.0 - 2.0
    x = jnp.ones(3)
    before = set(cache_dir.iterdir())
    _fresh_compile(f, x)
    entry, = set(cache_dir.iterdir()) - before
    data = entry.read_bytes()
    entry.write_bytes(data[:-10])                 # a torn write
    errors = compilation_cache.stats()["errors"]
    exe = _fresh_compile(f, x)
    assert compilation_cache.stats()["errors"] == errors + 1
    np.testing.assert_array_equal(np.asarray(exe([x])[0]), [5.0, 5.0, 5.0])
    assert len(entry.read_bytes()) == len(data)   # rewritten whole


def test_size_bound_evicts_least_recently_used(cache_dir):
    old, new = cache_dir / ("a" * 64 + ".fgx"), cache_dir / ("b" * 64 + ".fgx")
    for i, p in enumerate((old, new)):
        p.write_bytes(b"x" * 1000)
        os.utime(p, (1000 + i, 1000 + i))
    os.utime(old, (3000, 3000))                   # as a read would: now the newest
    compilation_cache.evict(1500)
    assert old.exists() and not new.exists()
    compilation_cache.evict(0)
    assert not old.exists()


def test_stale_temporary_files_are_removed(cache_dir):
    stale, fresh = cache_dir / ".tmp-dead.fgx", cache_dir / ".tmp-writing.fgx"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    compilation_cache.evict(2 ** 30)
    assert not stale.exists() and fresh.exists()


def test_read_touches_the_entry(cache_dir):
    compilation_cache.put("c" * 64, b"payload")
    path = cache_dir / ("c" * 64 + ".fgx")
    os.utime(path, (1000, 1000))
    assert compilation_cache.get("c" * 64) == b"payload"
    assert path.stat().st_mtime > 1000


def test_put_respects_the_configured_bound(cache_dir):
    with funcgrad.config.override("compilation_cache_max_size", 2500):
        for i in range(5):
            compilation_cache.put(f"{i:064x}", bytes(1000))
            time.sleep(0.01)
    names = sorted(p.name for p in cache_dir.iterdir())
    assert names == [f"{3:064x}.fgx", f"{4:064x}.fgx"]


def test_key_covers_program_options_and_device():
    dev = funcgrad.devices()[0]
    opts = executable.compile_options(dev)
    k = compilation_cache.cache_key("module {}", opts, dev)
    assert k == compilation_cache.cache_key("module {}", executable.compile_options(dev), dev)
    assert k != compilation_cache.cache_key("module { }", opts, dev)
    other = executable.compile_options(dev)
    other.num_replicas = 2
    assert k != compilation_cache.cache_key("module {}", other, dev)
    os.environ["XLA_FLAGS"], saved = "--xla_cpu_enable_fast_math=true", \
        os.environ.get("XLA_FLAGS")
    try:
        assert k != compilation_cache.cache_key("module {}", opts, dev)
    finally:
        if saved is None:
            del os.environ["XLA_FLAGS"]
        else:
            os.environ["XLA_FLAGS"] = saved


def test_programs_with_host_callbacks_are_not_cached(cache_dir):
    seen = []
    f = funcgrad.jit(lambda a: funcgrad.debug.callback(seen.append, a) or a * 2.0)
    x = jnp.ones(2)
    writes = compilation_cache.stats()["writes"]
    np.testing.assert_array_equal(np.asarray(f(x)), [2.0, 2.0])
    assert compilation_cache.stats()["writes"] == writes and len(seen) == 1
