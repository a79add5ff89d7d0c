"""pure_callback, debug.callback and debug.print: host Python functions inside transformed
code, checked against NumPy and against the same calls made eagerly."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax


def test_pure_callback_matches_numpy_eager_and_jitted(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)

    def host(a, scale):
        assert isinstance(a, np.ndarray)                 # the host function sees NumPy arrays
        return np.sin(a) * scale, np.cumsum(a, axis=1).astype(np.float64)

    spec = (funcgrad.ShapeDtypeStruct((3, 4), np.float32),
            funcgrad.ShapeDtypeStruct((3, 4), np.float32))
    f = lambda a: lax.pure_callback(host, spec, a, scale=2.0)
    for got in (f(x), funcgrad.jit(f)(x)):
        np.testing.assert_allclose(np.asarray(got[0]), np.sin(x) * 2, rtol=1e-6)
        assert got[1].dtype == np.float32        # converted to the declared dtype
        np.testing.assert_allclose(np.asarray(got[1]), np.cumsum(x, axis=1), rtol=1e-6)
    assert funcgrad.pure_callback is lax.pure_callback


def test_pure_callback_checks_the_declared_shapes():
    bad = funcgrad.jit(lambda a: lax.pure_callback(lambda v: v[:2], a, a))
    with pytest.raises(Exception, match=r"pure_callback\(<lambda>\): result 0 of the callback "
                                        r"has shape \(2,\), result_shape_dtypes declares f32\[3\]"):
        bad(jnp.ones(3)).block_until_ready()    # a GPU reports it when the result is read
    with pytest.raises(TypeError, match="result_shape_dtypes leaves need shape and dtype"):
        lax.pure_callback(np.sin, 3.0, jnp.ones(2))


def test_unused_pure_callback_is_dropped_but_debug_callbacks_stay():
    calls = []

    def f(x):
        lax.pure_callback(lambda v: calls.append("pure") or v, x, x)
        funcgrad.debug.callback(lambda v: calls.append("debug"), x)
        return x + 1
    np.testing.assert_allclose(np.asarray(funcgrad.jit(f)(jnp.ones(2))), [2.0, 2.0])
    assert calls == ["debug"]
    text = funcgrad.jit(f).lower(jnp.ones(2)).as_text()
    target = "xla_ffi_python_%s_callback" % ("cpu" if funcgrad.default_backend() == "cpu"
                                              else "gpu")
    assert text.count(target) == 1 and "has_side_effect = true" in text


@pytest.mark.parametrize("method, calls_per_batch", [("sequential", 4), ("expand_dims", 1),
                                                     ("broadcast_all", 1)])
def test_pure_callback_under_vmap(method, calls_per_batch, rng):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    seen = []

    def host(a, b):
        seen.append((a.shape, b.shape))
        return a * b + 1
    f = lambda a: lax.pure_callback(host, a, a, w, vmap_method=method)
    got = funcgrad.jit(funcgrad.vmap(f))(x)
    np.testing.assert_allclose(np.asarray(got), x * w + 1, rtol=1e-6)
    assert len(seen) == calls_per_batch
    want_b = {"sequential": (3,), "expand_dims": (1, 3), "broadcast_all": (4, 3)}[method]
    assert seen[0] == ((3,) if method == "sequential" else (4, 3), want_b)
    with pytest.raises(ValueError, match="vmap_method must be one of"):
        lax.pure_callback(host, x, x, w, vmap_method="loop")


def test_pure_callback_has_no_derivative_unless_given_one():
    f = lambda a: jnp.sum(lax.pure_callback(np.sin, a, a))
    with pytest.raises(TypeError, match="pure_callback has no derivative"):
        funcgrad.grad(f)(jnp.ones(2))

    @funcgrad.custom_jvp
    def host_sin(a):
        return lax.pure_callback(np.sin, a, a)

    @host_sin.defjvp
    def _(primals, tangents):
        (a,), (t,) = primals, tangents
        return host_sin(a), lax.pure_callback(np.cos, a, a) * t
    x = np.array([0.1, 0.7, 2.0], np.float32)
    g = funcgrad.jit(funcgrad.grad(lambda a: jnp.sum(host_sin(a))))(x)
    np.testing.assert_allclose(np.asarray(g), np.cos(x), rtol=1e-6)


def test_debug_print_under_every_transformation(capsys):
    def f(x):
        funcgrad.debug.print("x={} total={t:.1f}", x, t=jnp.sum(x))
        return jnp.sum(x ** 2)
    x = jnp.arange(3.0)
    f(x)
    funcgrad.jit(f)(x)
    g = funcgrad.jit(funcgrad.grad(f))(x)
    np.testing.assert_allclose(np.asarray(g), [0.0, 2.0, 4.0])
    funcgrad.vmap(f)(jnp.arange(4.0).reshape(2, 2))
    out = capsys.readouterr().out.splitlines()
    assert out == ["x=[0. 1. 2.] total=3.0"] * 3 + ["x=[0. 1.] total=1.0", "x=[2. 3.] total=5.0"]


def test_debug_print_in_loops_and_branches(capsys):
    def body(c, t):
        funcgrad.debug.print("step {} carry {}", t, c)
        return c + t, c
    funcgrad.jit(lambda c: lax.scan(body, c, jnp.arange(3))[0])(jnp.asarray(10))
    funcgrad.jit(lambda p: lax.cond(p > 0, lambda: funcgrad.debug.print("positive {}", p),
                                    lambda: funcgrad.debug.print("not positive {}", p)))(
        jnp.asarray(-2))
    assert capsys.readouterr().out.splitlines() == [
        "step 0 carry 10", "step 1 carry 10", "step 2 carry 11", "not positive -2"]


def test_debug_callback_receives_pytrees_and_numpy(capsys):
    got = []
    funcgrad.jit(lambda d: funcgrad.debug.callback(lambda tree, k: got.append((tree, k)),
                                                   d, k=d["a"] * 2))(
        {"a": jnp.ones(2), "b": jnp.asarray(3)})
    (tree, k), = got
    assert sorted(tree) == ["a", "b"] and isinstance(tree["a"], np.ndarray)
    np.testing.assert_array_equal(k, [2.0, 2.0]) and int(tree["b"]) == 3
    with pytest.raises(TypeError, match="funcgrad.debug.print: the format must be a str"):
        funcgrad.debug.print(3, 4)
