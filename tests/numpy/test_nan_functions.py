"""nan-functions against NumPy (NaN slices, axes, keepdims, ddof, integer input)."""
import warnings

import numpy as np
import pytest

import funcgrad.numpy as jnp

from tests.numpy._helpers import J

X = np.array([[1.0, np.nan, 3.0, -2.0], [np.nan, np.nan, np.nan, np.nan],
              [2.0, 5.0, -1.0, 0.5]], np.float32)
NAMES = ["nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd"]


def _np(name, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(np, name)(*a, **k)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_nan_reductions(axis):
    f = J(lambda x: tuple(getattr(jnp, n)(x, axis=axis) for n in NAMES))
    for n, got in zip(NAMES, f(X)):
        np.testing.assert_allclose(got, _np(n, X, axis=axis), rtol=1e-5, err_msg=n)


def test_nan_keepdims_ddof_where():
    np.testing.assert_allclose(jnp.nanvar(X, axis=1, ddof=1, keepdims=True),
                               _np("nanvar", X, axis=1, ddof=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(jnp.nanstd(X, axis=0, correction=1),
                               _np("nanstd", X, axis=0, ddof=1), rtol=1e-5)
    w = np.array([True, True, False, True])
    np.testing.assert_allclose(jnp.nanmean(X, axis=1, where=w),
                               _np("nanmean", X, axis=1, where=w), rtol=1e-5)
    np.testing.assert_allclose(jnp.nansum(X, axis=1, keepdims=True),
                               np.nansum(X, axis=1, keepdims=True))


def test_nan_arg_functions():
    f = J(lambda x: (jnp.nanargmax(x, axis=1), jnp.nanargmin(x, axis=1),
                     jnp.nanargmax(x, axis=0), jnp.nanargmin(x)))
    amax1, amin1, amax0, amin = f(X)
    np.testing.assert_array_equal(amax1, [2, -1, 1])  # NumPy raises for the all-NaN row
    np.testing.assert_array_equal(amin1, [3, -1, 2])
    np.testing.assert_array_equal(amax0, np.argmax(np.where(np.isnan(X), -np.inf, X), axis=0))
    assert int(amin) == np.nanargmin(X)


def test_nan_cumulative():
    f = J(lambda x: (jnp.nancumsum(x, axis=1), jnp.nancumprod(x, axis=0), jnp.nancumsum(x)))
    a, b, c = f(X)
    np.testing.assert_allclose(a, np.nancumsum(X, axis=1), rtol=1e-6)
    np.testing.assert_allclose(b, np.nancumprod(X, axis=0), rtol=1e-6)
    np.testing.assert_allclose(c, np.nancumsum(X), rtol=1e-6)


def test_nan_functions_on_integers():
    x = np.array([[3, 1], [2, 7]], np.int32)
    for n in ["nansum", "nanmax", "nanmin", "nanmean", "nanargmax", "nancumsum"]:
        np.testing.assert_allclose(getattr(jnp, n)(x, axis=0), getattr(np, n)(x, axis=0),
                                   err_msg=n)
    assert jnp.nansum(x).dtype == np.int32
