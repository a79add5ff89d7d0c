"""sort / argsort / top_k against NumPy (NaN last, signed zeros, stability, multi-operand), under
jit, jvp/grad (check_grads) and vmap."""
import numpy as np
import pytest

import funcgrad
from funcgrad import lax
from funcgrad.test_util import check_grads
from funcgrad.transforms.batching import vmap

SPECIAL = np.array([3.0, np.nan, -0.0, 1.0, 0.0, -np.inf, np.nan, 2.0, np.inf, -1.0])


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint8", "bool"])
def test_sort_matches_numpy(dtype, rng):
    x = (rng.normal(size=(4, 7)) * 10).astype(dtype)
    for dim in (0, 1, -1):
        np.testing.assert_array_equal(np.asarray(lax.sort(x, dimension=dim)),
                                      np.sort(x, axis=dim))
    np.testing.assert_array_equal(np.asarray(funcgrad.jit(lax.sort)(x)), np.sort(x, axis=-1))


def test_sort_special_values_nan_last():
    got = np.asarray(lax.sort(SPECIAL.astype(np.float32)))
    want = np.sort(SPECIAL.astype(np.float32))
    np.testing.assert_array_equal(got, want)
    # stable: -0.0 (index 2) stays before 0.0 (index 4)
    assert np.signbit(got[2]) and not np.signbit(got[3])
    np.testing.assert_array_equal(np.asarray(lax.argsort(SPECIAL)),
                                  np.argsort(SPECIAL.astype(np.float32), kind="stable"))


def test_sort_complex_lexicographic():
    c = np.array([1 + 2j, 1 + 1j, 0 + 5j, np.nan + 0j, -1 - 1j], np.complex64)
    np.testing.assert_array_equal(np.asarray(lax.sort(c)), np.sort(c))


def test_multi_operand_sort_and_num_keys():
    k1 = np.array([1, 0, 1, 0, 1], np.int32)
    k2 = np.array([5, 3, 1, 3, 2], np.int32)
    v = np.arange(5.0, dtype=np.float32)
    a, b, c = lax.sort((k1, k2, v), num_keys=2)
    order = np.lexsort((k2, k1))
    np.testing.assert_array_equal(np.asarray(c), v[order])
    a, b = lax.sort((k1, v), num_keys=1)
    np.testing.assert_array_equal(np.asarray(b), v[np.argsort(k1, kind="stable")])
    k, vv = lax.sort_key_val(k2, v)
    np.testing.assert_array_equal(np.asarray(vv), v[np.argsort(k2, kind="stable")])


def test_argsort_descending_stable():
    x = np.array([2.0, 1.0, 2.0, 3.0, 1.0], np.float32)
    got = np.asarray(lax.argsort(x, descending=True))
    np.testing.assert_array_equal(got, [3, 0, 2, 1, 4])


def test_top_k(rng):
    x = rng.normal(size=(3, 9)).astype(np.float32)
    vals, idx = lax.top_k(x, 4)
    want_idx = np.argsort(-x, axis=-1, kind="stable")[:, :4]
    np.testing.assert_array_equal(np.asarray(idx), want_idx)
    np.testing.assert_array_equal(np.asarray(vals), np.take_along_axis(x, want_idx, -1))
    v2, i2 = funcgrad.jit(lambda a: lax.top_k(a, 4))(x)
    np.testing.assert_array_equal(np.asarray(i2), want_idx)
    vals, idx = lax.top_k(np.array([1.0, np.nan, 3.0], np.float32), 2)
    assert np.isnan(np.asarray(vals)[0]) and np.asarray(idx).tolist() == [1, 2]
    # every NaN is largest (also -nan); -0.0 and 0.0 tie, lower index first; values keep signs
    x = np.array([1.0, np.nan, -0.0, 0.0, -np.nan, np.inf, 3.0], np.float32)
    vals, idx = lax.top_k(x, 7)
    assert np.asarray(idx).tolist() == [1, 4, 5, 6, 0, 2, 3]
    np.testing.assert_array_equal(np.signbit(np.asarray(vals)), np.signbit(x[np.asarray(idx)]))
    vals, idx = lax.top_k(np.array([3, 1, 3, 7], np.uint8), 3)
    assert np.asarray(idx).tolist() == [3, 0, 2] and vals.dtype == np.uint8
    with pytest.raises(TypeError, match="k=5"):
        lax.top_k(np.ones(3, np.float32), 5)


def test_sort_errors():
    with pytest.raises(TypeError, match="0-d"):
        lax.sort(np.float32(1.0))
    with pytest.raises(TypeError, match="one shape"):
        lax.sort((np.ones(3), np.ones(4)))


def test_sort_derivatives():
    x = np.array([[3.0, 1.0, 2.0], [0.5, -1.0, 4.0]])
    w = np.arange(3.0)
    check_grads(lambda x: lax.sort(x) * w, (x,), order=2)
    check_grads(lambda x: lax.sort(x, 0) * np.arange(2.0)[:, None], (x,), order=1)
    check_grads(lambda x, y: lax.sort((x, y), num_keys=1)[1] * w, (x, 2 * x), order=1)
    check_grads(lambda x: lax.top_k(x, 2)[0] * np.arange(2.0), (x,), order=2)


def test_sort_vmap_matches_loop(rng):
    x = rng.normal(size=(3, 5)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(vmap(lax.sort)(x)), np.sort(x, -1))
    np.testing.assert_array_equal(np.asarray(vmap(lax.sort, in_axes=1)(x)), np.sort(x.T, -1))
    got = vmap(lambda a: lax.argsort(a))(x)
    np.testing.assert_array_equal(np.asarray(got), np.argsort(x, -1, kind="stable"))
    vals, idx = vmap(lambda a: lax.top_k(a, 2), in_axes=1)(x)
    np.testing.assert_array_equal(np.asarray(idx),
                                  np.argsort(-x.T, -1, kind="stable")[:, :2])
    k, v = vmap(lambda a, b: lax.sort((a, b)), in_axes=(0, None))(x, np.arange(5.0))
    np.testing.assert_array_equal(np.asarray(v), np.argsort(x, -1, kind="stable"))


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from([-2.0, -0.0, 0.0, 1.5, 3.0, np.inf, -np.inf, np.nan]),
                min_size=1, max_size=6))
def test_sort_argsort_property(values):
    x = np.array(values, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(lax.sort(x)), np.sort(x))
    np.testing.assert_array_equal(np.asarray(lax.argsort(x)), np.argsort(x, kind="stable"))
