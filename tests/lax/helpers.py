"""Shared helpers for primitive tests: compare eager, jit and a NumPy reference."""
import ml_dtypes
import numpy as np

import funcgrad

_LOW = {np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)}


def rand(rng, shape, dtype):
    """Random test data of ``dtype`` (small integers, both signs where the type allows)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "u":
        return rng.integers(0, min(np.iinfo(dtype).max, 200), size=shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-50, 50, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return np.asarray(rng.standard_normal(shape)).astype(dtype)


def _assert_close(got, want, rtol, atol, what):
    got_np = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype in _LOW:
        got_np, want = got_np.astype(np.float32), want.astype(np.float32)
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got_np, want, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(got_np, want, err_msg=what)


def check(fn, ref, args, rtol=1e-6, atol=1e-6, jit=True):
    """``fn(*args)`` eagerly and under jit must match ``ref(*numpy args)`` (values, shape, dtype)."""
    want = ref(*[np.asarray(a) for a in args])
    eager = fn(*args)
    _assert_close(eager, want, rtol, atol, "eager")
    if jit:
        jitted = funcgrad.jit(fn)(*args)
        _assert_close(jitted, want, rtol, atol, "jit")
    return eager
