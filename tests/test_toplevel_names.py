"""JAX's top-level names funcgrad adds (jacobian, linear_transpose, closure_convert,
custom_gradient, named_call, typeof, enable_x64, live_arrays, float0) and the small modules
funcgrad.dtypes, funcgrad.errors, funcgrad.dlpack and funcgrad.custom_batching."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.custom_batching import custom_vmap

RNG = np.random.default_rng(0)


def test_jacobian_is_reverse_mode_jacobian():
    w = RNG.normal(size=(3, 4)).astype(np.float32)
    x = RNG.normal(size=4).astype(np.float32)
    jac = funcgrad.jacobian(lambda v: jnp.tanh(w @ v))(x)
    want = (1 - np.tanh(w @ x) ** 2)[:, None] * w
    np.testing.assert_allclose(np.asarray(jac), want, rtol=1e-5, atol=1e-6)


def test_linear_transpose_is_the_matrix_transpose():
    m = RNG.normal(size=(3, 5)).astype(np.float32)
    f_t = funcgrad.linear_transpose(lambda v: jnp.asarray(m) @ v,
                                    funcgrad.ShapeDtypeStruct((5,), np.float32))
    ct = RNG.normal(size=3).astype(np.float32)
    (got,) = f_t(ct)
    np.testing.assert_allclose(np.asarray(got), m.T @ ct, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="floating-point"):
        funcgrad.linear_transpose(lambda v: v, np.zeros(2, np.int32))


def test_closure_convert_hoists_closed_over_floats_for_custom_vjp():
    def outer(w, x):
        f, consts = funcgrad.closure_convert(lambda v: jnp.sin(v * w), x)
        return f(x, *consts), len(consts)
    out, n = outer(jnp.float32(2.0), jnp.float32(0.3))
    assert n == 1
    np.testing.assert_allclose(float(out), np.sin(0.6), rtol=1e-6)
    g = funcgrad.grad(lambda w: outer(w, jnp.float32(0.3))[0])(jnp.float32(2.0))
    np.testing.assert_allclose(float(g), 0.3 * np.cos(0.6), rtol=1e-5)


def test_custom_gradient_replaces_the_derivative():
    @funcgrad.custom_gradient
    def log1pexp(x):
        e = jnp.exp(x)
        return jnp.log1p(e), lambda g: (g * (1.0 - 1.0 / (1.0 + e)),)
    # the naive derivative at 100 is nan (inf / inf); the custom one is 1
    assert float(funcgrad.grad(log1pexp)(jnp.float32(100.0))) == 1.0
    np.testing.assert_allclose(float(funcgrad.jit(funcgrad.grad(log1pexp))(0.0)), 0.5)


def test_named_call_stages_one_named_equation():
    f = funcgrad.named_call(lambda x: jnp.sin(x) * 2.0, name="scaled_sin")
    jx = funcgrad.make_jaxpr(f)(1.0)
    assert [e.params.get("name") for e in jx.jaxpr.eqns] == ["scaled_sin"]
    np.testing.assert_allclose(float(funcgrad.grad(f)(0.5)), 2 * np.cos(0.5), rtol=1e-6)


def test_typeof_enable_x64_float0():
    aval = funcgrad.typeof(jnp.ones((2, 3), jnp.int8))
    assert aval.shape == (2, 3) and aval.dtype == np.int8
    with funcgrad.enable_x64():
        assert jnp.arange(3.0).dtype == np.float64
    assert jnp.arange(3.0).dtype == np.float32
    assert funcgrad.float0 == funcgrad.dtypes.float0
    g = funcgrad.grad(lambda x, n: x * n, argnums=1, allow_int=True)(2.0, 3)
    assert np.asarray(g).dtype == funcgrad.float0


def test_live_arrays_lists_arrays_alive():
    x = jnp.arange(5.0) + 1.0
    ids = {id(a) for a in funcgrad.live_arrays()}
    assert id(x) in ids
    assert all(isinstance(a, funcgrad.Array) for a in funcgrad.live_arrays("cpu"))
    assert funcgrad.live_arrays("tpu") == []


def test_custom_vmap_uses_the_rule_under_vmap_only():
    calls = []

    @custom_vmap
    def f(x, y):
        return x * y

    @f.def_vmap
    def rule(axis_size, in_batched, x, y):
        calls.append((axis_size, tuple(in_batched)))
        xb = x if in_batched[0] else jnp.broadcast_to(x, (axis_size,) + x.shape)
        return xb * y + 100.0, True

    assert float(f(2.0, 3.0)) == 6.0 and calls == []
    out = funcgrad.vmap(f, in_axes=(0, None))(jnp.array([1.0, 2.0]), 3.0)
    np.testing.assert_array_equal(np.asarray(out), [103.0, 106.0])
    assert calls == [(2, (True, False))]
    np.testing.assert_array_equal(
        np.asarray(funcgrad.jit(funcgrad.vmap(f, in_axes=(0, None)))(jnp.ones(3), 1.0)), [101.0] * 3)
    assert float(funcgrad.grad(f)(2.0, 3.0)) == 3.0     # differentiates the function itself


def test_custom_vmap_errors():
    @custom_vmap
    def f(x):
        return x

    with pytest.raises(AttributeError, match="def_vmap"):
        f(1.0)

    @f.def_vmap
    def bad(axis_size, in_batched, x):
        return (x, x), True
    with pytest.raises(TypeError, match="must return"):
        funcgrad.vmap(f)(jnp.ones(2))


def test_dlpack_round_trip_with_numpy():
    import funcgrad.dlpack as dl
    host = RNG.normal(size=(3, 4)).astype(np.float32)
    x = dl.from_dlpack(host)
    np.testing.assert_array_equal(np.asarray(x), host)
    back = np.from_dlpack(x * 2.0)
    np.testing.assert_array_equal(back, host * 2.0)
    assert type(dl.to_dlpack(x)).__name__ == "PyCapsule"
    assert dl.is_supported_dtype(np.float32) and not dl.is_supported_dtype(np.dtype("U3"))
    with pytest.raises(TypeError, match="to_dlpack"):
        dl.to_dlpack(host)


def test_dtypes_and_errors_modules():
    assert funcgrad.dtypes.canonicalize_dtype(np.float64) == np.float32
    assert funcgrad.dtypes.scalar_type_of(jnp.ones(2, jnp.int8)) is int
    assert funcgrad.dtypes.issubdtype(np.float32, np.floating)
    assert funcgrad.dtypes.bfloat16 == jnp.bfloat16
    with pytest.raises(funcgrad.errors.ConcretizationTypeError):
        funcgrad.jit(lambda x: 1 if x > 0 else 0)(1.0)
    assert issubclass(funcgrad.errors.JaxRuntimeError, Exception)


def test_names_exist_like_jax():
    names = ("jacobian linear_transpose closure_convert custom_gradient named_call typeof "
             "enable_x64 live_arrays float0 dtypes errors dlpack custom_batching clear_caches")
    assert [n for n in names.split() if not hasattr(funcgrad, n)] == []
    assert all(hasattr(funcgrad.random, n) for n in ("key", "key_data", "wrap_key_data"))


@pytest.mark.slow
def test_image_resize_under_jit_vmap_and_errors():
    from funcgrad import image
    img = jnp.asarray(RNG.uniform(0, 1, (3, 8, 6)).astype(np.float32))
    one = np.stack([np.asarray(image.resize(i, (4, 9), "cubic")) for i in img])
    batched = funcgrad.jit(funcgrad.vmap(lambda i: image.resize(i, (4, 9), "cubic")))(img)
    np.testing.assert_allclose(np.asarray(batched), one, rtol=1e-5, atol=1e-6)
    # linear upsampling by 2 of a ramp interpolates between pixel centres
    up = image.resize(jnp.arange(4.0), (8,), "linear")
    np.testing.assert_allclose(np.asarray(up), [0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3.0])
    g = funcgrad.grad(lambda x: image.resize(x, (4, 3), "area").sum())(img[0])
    np.testing.assert_allclose(np.asarray(g), np.full((8, 6), 12 / 48), rtol=1e-5)
    with pytest.raises(ValueError, match="unknown resize method"):
        image.resize(img, (3, 4, 4), "bogus")
    with pytest.raises(ValueError, match="one size per dimension"):
        image.resize(img, (4, 4), "linear")
    with pytest.raises(ValueError, match="NEAREST"):
        image.scale_and_translate(img, (3, 4, 4), (1, 2), [1.0, 1.0], [0.0, 0.0], "nearest")


def test_array_copy_to_host_async_then_read():
    x = jnp.arange(4.0) * 3.0
    assert x.copy_to_host_async() is None
    np.testing.assert_array_equal(np.asarray(x), [0.0, 3.0, 6.0, 9.0])
