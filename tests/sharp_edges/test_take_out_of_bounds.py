"""Out-of-bounds indices in take/take_along_axis fill by default, as JAX; x[idx] and
x.at[idx].get() clamp array indices, as JAX (issue 23)."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as fnp

IDX = np.array([5, -1, -4, 0, 2, 3, -3], np.int32)


def _fill_reference(x, idx, fill):
    """NumPy: np.take where -n <= i < n, ``fill`` elsewhere."""
    n = x.shape[0]
    ok = (idx >= -n) & (idx < n)
    out = np.take(x, np.where(ok, idx, 0))
    return np.where(ok, out, fill)


@pytest.mark.parametrize("dtype, fill", [(np.float32, np.nan), (np.int32, -2**31),
                                         (np.uint8, 255), (np.bool_, True)])
def test_take_fills_by_default(dtype, fill):
    x = np.arange(3).astype(dtype)
    want = _fill_reference(x, IDX, fill)
    np.testing.assert_array_equal(np.asarray(fnp.take(x, IDX)), want)
    np.testing.assert_array_equal(np.asarray(funcgrad.jit(fnp.take)(x, IDX)), want)
    np.testing.assert_array_equal(np.asarray(fnp.take(x, IDX, mode="fill", fill_value=7)),
                                  _fill_reference(x, IDX, 7).astype(dtype))
    got = np.asarray(fnp.take_along_axis(x, IDX, axis=0))
    np.testing.assert_array_equal(got, want)


def test_take_modes():
    x = np.arange(12.0).reshape(3, 4)
    idx = np.array([[0, 4], [-5, 2]])
    np.testing.assert_array_equal(np.asarray(fnp.take(x, idx, axis=1, mode="clip")),
                                  np.take(x, idx, axis=1, mode="clip"))
    np.testing.assert_array_equal(np.asarray(fnp.take(x, idx, axis=1, mode="wrap")),
                                  np.take(x, idx, axis=1, mode="wrap"))
    filled = np.asarray(fnp.take(x, idx, axis=1))                  # (3, 2, 2)
    assert np.isnan(filled[:, 0, 1]).all() and np.isnan(filled[:, 1, 0]).all()
    np.testing.assert_array_equal(filled[:, 0, 0], x[:, 0])
    np.testing.assert_array_equal(filled[:, 1, 1], x[:, 2])
    with pytest.raises(ValueError, match="take: mode must be 'fill'.*got 'raise'"):
        fnp.take(x, idx, mode="raise")
    along = np.array([[0, 9, -1, 2]] * 3)
    got = np.asarray(fnp.take_along_axis(x, along, axis=1))
    assert np.isnan(got[:, 1]).all()
    np.testing.assert_array_equal(got[:, [0, 2, 3]], x[:, [0, 3, 2]])
    np.testing.assert_array_equal(np.asarray(fnp.take_along_axis(x, along, 1, mode="clip")),
                                  x[:, [0, 3, 3, 2]])


def test_gradient_of_filled_take_is_zero_out_of_bounds():
    g = funcgrad.grad(lambda v: fnp.sum(fnp.take(v, np.array([0, 7, 2]), fill_value=0.0)))
    np.testing.assert_array_equal(np.asarray(g(fnp.ones(3))), [1.0, 0.0, 1.0])


def test_indexing_and_at_get_clamp_array_indices():
    x = fnp.arange(3.0)
    np.testing.assert_array_equal(np.asarray(x[np.array([5, -1])]), [2.0, 2.0])
    np.testing.assert_array_equal(np.asarray(x.at[np.array([5, -1])].get()), [2.0, 2.0])
    out = np.asarray(x.at[np.array([5, -1])].get(mode="fill"))
    assert np.isnan(out[0]) and out[1] == 2.0


def test_matches_jax_defaults():
    jnp = pytest.importorskip("jax.numpy")
    x = np.arange(6.0).reshape(2, 3)
    for idx in (IDX, np.array([[1, 7], [-9, 0]])):
        for axis in (None, 1):
            np.testing.assert_array_equal(np.asarray(fnp.take(x, idx, axis=axis)),
                                          np.asarray(jnp.take(x, idx, axis=axis)))
    along = np.array([[0, 9, -1], [-4, 2, 1]])
    np.testing.assert_array_equal(np.asarray(fnp.take_along_axis(x, along, axis=1)),
                                  np.asarray(jnp.take_along_axis(x, along, axis=1)))
    xi = np.arange(3, dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(fnp.take(xi, IDX)), np.asarray(jnp.take(xi, IDX)))
    idx = np.array([5, -1, -7])
    np.testing.assert_array_equal(np.asarray(fnp.asarray(x[0]).at[idx].get()),
                                  np.asarray(jnp.asarray(x[0]).at[idx].get()))
    np.testing.assert_array_equal(np.asarray(fnp.asarray(x[0])[idx]),
                                  np.asarray(jnp.asarray(x[0])[idx]))
