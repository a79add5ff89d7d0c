"""The NumPy/JAX array methods added for issue 21 (sort, argsort, searchsorted, trace, copy,
view, itemsize, compress, choose, argpartition, flat, byteswap), checked against NumPy."""
import subprocess
import sys

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp

RNG = np.random.default_rng(0)
A = RNG.normal(size=(3, 4)).astype(np.float32)


def test_sort_argsort_match_numpy():
    x = jnp.asarray(A)
    np.testing.assert_array_equal(np.asarray(x.sort()), np.sort(A))
    np.testing.assert_array_equal(np.asarray(x.sort(axis=0)), np.sort(A, axis=0))
    np.testing.assert_array_equal(np.asarray(x.sort(descending=True)), -np.sort(-A))
    np.testing.assert_array_equal(np.asarray(x.argsort(axis=0)), np.argsort(A, axis=0))
    np.testing.assert_array_equal(np.asarray(funcgrad.jit(lambda a: a.argsort())(x)),
                                  np.argsort(A))


def test_searchsorted_trace_copy_itemsize():
    s = np.array([1.0, 3.0, 5.0, 7.0], np.float32)
    v = np.array([0.0, 3.0, 4.0, 9.0], np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.asarray(s).searchsorted(v)), s.searchsorted(v))
    np.testing.assert_array_equal(np.asarray(jnp.asarray(s).searchsorted(v, side="right")),
                                  s.searchsorted(v, side="right"))
    x = jnp.asarray(A)
    np.testing.assert_allclose(float(x.trace()), A.trace(), rtol=1e-6)
    np.testing.assert_allclose(float(x.trace(offset=1)), A.trace(offset=1), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(x.copy()), A)
    assert x.itemsize == 4 and jnp.zeros(2, jnp.int16).itemsize == 2
    assert funcgrad.grad(lambda a: a.trace())(x).shape == (3, 4)
    np.testing.assert_array_equal(np.asarray(funcgrad.grad(lambda a: a.trace())(x)),
                                  np.eye(3, 4, dtype=np.float32))


def test_compress_choose_argpartition():
    x = jnp.asarray(A)
    cond = np.array([True, False, True, True])
    np.testing.assert_array_equal(np.asarray(x.compress(jnp.asarray(cond), axis=1)),
                                  A.compress(cond, axis=1))
    idx = np.array([0, 2, 1, 0])
    choices = [np.arange(4) * k for k in (1, 10, 100)]
    np.testing.assert_array_equal(np.asarray(jnp.asarray(idx).choose(
        [jnp.asarray(c) for c in choices])), idx.choose(choices))
    p = np.asarray(x.argpartition(2, axis=1))
    part = np.take_along_axis(A, p, axis=1)
    assert np.all(part[:, :2] <= part[:, 2:3]) and np.all(part[:, 3:] >= part[:, 2:3])
    np.testing.assert_array_equal(part[:, 2], np.sort(A, axis=1)[:, 2])


@pytest.mark.parametrize("src,dst", [(np.float32, np.int32), (np.float32, np.uint8),
                                     (np.float32, np.uint16), (np.uint8, np.uint16),
                                     (np.int16, np.float32), (np.bool_, np.uint8),
                                     (np.int8, np.uint8)])
def test_view_matches_numpy(src, dst):
    host = (RNG.normal(size=(2, 8)) * 50).astype(src)
    got = jnp.asarray(host).view(dst)
    want = host.view(dst)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), want)
    jitted = funcgrad.jit(lambda a: a.view(dst))(jnp.asarray(host))
    np.testing.assert_array_equal(np.asarray(jitted), want)


def test_view_errors_name_the_problem():
    with pytest.raises(ValueError, match="not a multiple"):
        jnp.zeros((3,), jnp.uint8).view(jnp.uint16)
    with pytest.raises(ValueError, match="0-d"):
        jnp.array(1.0, jnp.float32).view(jnp.uint8)
    assert jnp.zeros(3).view() is not None


@pytest.mark.parametrize("dt", [np.uint16, np.int32, np.float32, np.uint8])
def test_byteswap_matches_numpy(dt):
    host = (RNG.normal(size=(3, 5)) * 100).astype(dt)
    np.testing.assert_array_equal(np.asarray(jnp.asarray(host).byteswap()), host.byteswap())
    batched = funcgrad.vmap(lambda r: r.byteswap())(jnp.asarray(host))
    np.testing.assert_array_equal(np.asarray(batched), host.byteswap())
    with pytest.raises(ValueError, match="immutable"):
        jnp.asarray(host).byteswap(inplace=True)


def test_flat_reads_row_major():
    x = jnp.asarray(A)
    assert len(x.flat) == A.size
    assert float(x.flat[5]) == A.flat[5]
    np.testing.assert_array_equal(np.asarray(x.flat[2:7]), A.flat[2:7])
    np.testing.assert_array_equal(np.array([float(v) for v in x.flat]), A.ravel())
    np.testing.assert_array_equal(np.asarray(x.flat), A.ravel())
    with pytest.raises(TypeError, match="immutable"):
        x.flat[0] = 1.0


# jax.Array's public names (JAX 0.10.2) that funcgrad.Array lacked before issue 21, without
# the sharding ones (addressable_shards & co.) and copy_to_host_async, which come with pmap.
ADDED = ["argpartition", "argsort", "byteswap", "choose", "compress", "copy", "flat",
         "itemsize", "searchsorted", "sort", "trace", "view"]
SHARDING = {"addressable_data", "addressable_shards", "committed", "global_shards",
            "is_fully_addressable", "is_fully_replicated", "copy_to_host_async"}


def test_added_methods_exist():
    assert [n for n in ADDED if not hasattr(funcgrad.Array, n)] == []


def test_methods_against_jax_array_names():
    pytest.importorskip("jax")
    # in a subprocess: jax and funcgrad share jaxlib's process-wide state
    res = subprocess.run([sys.executable, "-c", "import jax; print(' '.join(n for n in "
                          "dir(jax.Array) if not n.startswith('_')))"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    want = set(res.stdout.split()) - SHARDING
    assert sorted(want - set(dir(funcgrad.Array))) == []
