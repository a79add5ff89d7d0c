"""funcgrad.numpy sorting/searching/order statistics against NumPy, under jit, grad and vmap."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.test_util import check_grads
from funcgrad.transforms.batching import vmap

X = np.array([[3.0, np.nan, 1.0, 2.0, -0.0], [0.5, -1.0, 4.0, 4.0, np.inf]], np.float32)


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_sort_argsort(axis):
    np.testing.assert_array_equal(np.asarray(jnp.sort(X, axis=axis)), np.sort(X, axis=axis))
    np.testing.assert_array_equal(np.asarray(jnp.argsort(X, axis=axis)),
                                  np.argsort(X, axis=axis, kind="stable"))


def test_sort_variants():
    x = np.array([2, 1, 2, 3, 1], np.int32)
    np.testing.assert_array_equal(np.asarray(jnp.argsort(x, descending=True)), [3, 0, 2, 1, 4])
    np.testing.assert_array_equal(np.asarray(jnp.sort(x, descending=True)), [3, 2, 2, 1, 1])
    np.testing.assert_array_equal(np.asarray(jnp.msort(X[:, :3])), np.sort(X[:, :3], axis=0))
    c = np.array([1 + 2j, 1 - 1j, -3 + 0j], np.complex64)
    np.testing.assert_array_equal(np.asarray(jnp.sort_complex(c)), np.sort_complex(c))
    p = np.asarray(jnp.partition(np.array([5, 4, 1, 3, 2]), 2))
    assert p[2] == 3 and (p[:2] <= 3).all() and (p[3:] >= 3).all()
    ap = np.asarray(jnp.argpartition(np.array([5, 4, 1, 3, 2]), 1))
    assert np.array([5, 4, 1, 3, 2])[ap[1]] == 2
    with pytest.raises(ValueError, match="kth"):
        jnp.partition(np.arange(3), 5)


def test_searchsorted_and_lexsort():
    a = np.array([1.0, 2.0, 2.0, 3.0, np.nan], np.float32)
    v = np.array([[2.0, 0.0, 2.5], [9.0, np.nan, 1.0]], np.float32)
    for side in ("left", "right"):
        np.testing.assert_array_equal(np.asarray(jnp.searchsorted(a, v, side=side)),
                                      np.searchsorted(a, v, side=side))
        got = funcgrad.jit(lambda a, v: jnp.searchsorted(a, v, side=side))(a, v)
        np.testing.assert_array_equal(np.asarray(got), np.searchsorted(a, v, side=side))
    unsorted = np.array([3.0, 1.0, 2.0], np.float32)
    sorter = np.argsort(unsorted)
    np.testing.assert_array_equal(np.asarray(jnp.searchsorted(unsorted, 2.5, sorter=sorter)),
                                  np.searchsorted(unsorted, 2.5, sorter=sorter))
    assert int(jnp.searchsorted(np.zeros(0, np.float32), 1.0)) == 0
    k1, k2 = np.array([1, 0, 2, 0]), np.array([0, 0, 1, 0])
    np.testing.assert_array_equal(np.asarray(jnp.lexsort((k1, k2))), np.lexsort((k1, k2)))


def test_unique_concrete_and_sized():
    u = np.array([3, 1, 3, 2, 1, 7], np.int32)
    got = jnp.unique(u, return_index=True, return_inverse=True, return_counts=True)
    want = np.unique(u, return_index=True, return_inverse=True, return_counts=True)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.ravel(w))
    f = funcgrad.jit(lambda u: jnp.unique(u, return_index=True, return_inverse=True,
                                          return_counts=True, size=6, fill_value=-1))
    vals, idx, inv, cnt = f(u)
    np.testing.assert_array_equal(np.asarray(vals), [1, 2, 3, 7, -1, -1])
    np.testing.assert_array_equal(np.asarray(idx)[:4], want[1])
    np.testing.assert_array_equal(np.asarray(inv), want[2].ravel())
    np.testing.assert_array_equal(np.asarray(cnt), [2, 1, 2, 1, 0, 0])
    np.testing.assert_array_equal(np.asarray(jnp.unique(u, size=2)), [1, 2])
    fl = np.array([np.nan, 1.0, np.nan], np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.unique(fl, size=2)), [1.0, np.nan])
    with pytest.raises(TypeError, match="size="):
        funcgrad.jit(jnp.unique)(u)


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_quantile_methods(method, rng):
    r = rng.normal(size=(3, 7)).astype(np.float32)
    q = np.array([0.0, 0.1, 0.5, 0.9, 1.0], np.float32)
    np.testing.assert_allclose(np.asarray(jnp.quantile(r, q, axis=1, method=method)),
                               np.quantile(r, q, axis=1, method=method), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(jnp.percentile(r, 30, method=method)),
                               np.percentile(r, 30, method=method), rtol=1e-5)


def test_median_nan_and_keepdims(rng):
    np.testing.assert_array_equal(np.asarray(jnp.median(X, axis=1)), np.median(X, axis=1))
    np.testing.assert_allclose(np.asarray(jnp.nanmedian(X, axis=1)), np.nanmedian(X, axis=1))
    np.testing.assert_allclose(np.asarray(jnp.nanquantile(X, [0.2, 0.7], axis=1)),
                               np.nanquantile(X, [0.2, 0.7], axis=1), rtol=1e-6)
    # (no inf here: NumPy's lerp gives nan between a finite value and inf)
    np.testing.assert_allclose(np.asarray(jnp.nanpercentile(X[:, :4], 60, axis=0)),
                               np.nanpercentile(X[:, :4], 60, axis=0), rtol=1e-6)
    r = rng.normal(size=(2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(jnp.median(r, axis=(0, 2), keepdims=True)),
                               np.median(r, axis=(0, 2), keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jnp.median(np.arange(6))), 2.5)
    assert np.isnan(np.asarray(jnp.nanmedian(np.array([np.nan, np.nan], np.float32))))


def test_order_statistics_grad_and_vmap(rng):
    check_grads(lambda x: jnp.median(x), (np.array([0.3, 2.0, -1.0, 5.0]),), order=1)
    check_grads(lambda x: jnp.quantile(x, 0.3), (np.array([0.3, 2.0, -1.0, 5.0]),), order=1)
    check_grads(lambda x: jnp.sort(x)[::2], (np.array([0.3, 2.0, -1.0, 5.0]),), order=1)
    r = rng.normal(size=(4, 5)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(vmap(jnp.median)(r)), np.median(r, axis=1),
                               rtol=1e-6)
    got = vmap(lambda v: jnp.searchsorted(np.array([-1.0, 0.0, 1.0], np.float32), v))(r)
    np.testing.assert_array_equal(np.asarray(got),
                                  np.searchsorted(np.array([-1.0, 0.0, 1.0]), r))


def test_percentile_of_a_host_q_is_divided_on_the_host(rng):
    # 30 / 100 divided on a device can round below 0.3 (XLA:GPU multiplies by the reciprocal)
    # and move 'lower' from element 6 of 21 to element 5; NumPy divides in float64.
    r = rng.normal(size=(3, 7)).astype(np.float32)
    for q in (30, 30.0, np.float32(30), np.array([10, 30, 70]), [30, 50.0]):
        jaxpr = str(funcgrad.make_jaxpr(lambda x: jnp.percentile(x, q, method="lower"))(r))
        assert " div" not in jaxpr, jaxpr
        np.testing.assert_array_equal(np.asarray(jnp.percentile(r, q, method="lower")),
                                      np.percentile(r, q, method="lower").astype(np.float32))
        np.testing.assert_array_equal(np.asarray(jnp.nanpercentile(r, q, method="higher")),
                                      np.nanpercentile(r, q, method="higher").astype(np.float32))
    # a traced q is divided on the device
    got = funcgrad.jit(lambda x, q: jnp.percentile(x, q))(r, np.float32(45.0))
    np.testing.assert_allclose(np.asarray(got), np.percentile(r, 45.0), rtol=1e-6)
