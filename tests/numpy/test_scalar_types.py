"""``jnp.float32`` and friends are dtypes that can be called, as in JAX."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp

NAMES = ["bool_", "int8", "int16", "int32", "uint8", "uint32", "bfloat16", "float16", "float32",
         "complex64"]


@pytest.mark.parametrize("name", NAMES)
def test_calling_a_scalar_type_makes_an_array_of_that_dtype(name):
    t = getattr(jnp, name)
    want = np.dtype(t)
    x = t(3)
    assert type(x) is funcgrad.Array and x.dtype == want and x.shape == ()
    assert not x.aval.weak_type
    assert np.asarray(x) == np.asarray(3).astype(want)
    v = t(np.arange(4))
    assert v.dtype == want and np.asarray(v).tolist() == np.arange(4).astype(want).tolist()
    traced = funcgrad.jit(lambda y: t(y))(np.float32(1.0))
    assert traced.dtype == want


@pytest.mark.parametrize("name", NAMES)
def test_scalar_types_work_where_numpy_takes_a_dtype(name):
    t = getattr(jnp, name)
    want = np.dtype(name.rstrip("_") if name != "bfloat16" else "bfloat16")
    assert np.dtype(t) == want and t.dtype == want
    assert jnp.zeros(2, t).dtype == want and jnp.zeros(2, dtype=t).dtype == want
    assert jnp.zeros(2, t).dtype == t and t == jnp.zeros(2, t).dtype
    assert np.zeros(2, t).dtype == want
    assert jnp.arange(3).astype(t).dtype == want
    assert isinstance(np.zeros((), want)[()], t)
    assert not isinstance(1.5, jnp.int8)
    assert repr(t) == f"<class 'funcgrad.numpy.{name}'>"


def test_scalar_types_in_dtype_helpers():
    assert jnp.finfo(jnp.float16).eps == np.finfo(np.float16).eps
    assert jnp.iinfo(jnp.int8).max == 127
    assert jnp.issubdtype(jnp.float32, jnp.floating)
    assert not jnp.issubdtype(jnp.int32, jnp.floating)
    assert jnp.promote_types(jnp.int8, jnp.float16) == np.float16
    assert jnp.result_type(jnp.float16, 1.0) == np.float16
    assert funcgrad.lax.convert_element_type(jnp.ones(2), jnp.int32).dtype == np.int32
