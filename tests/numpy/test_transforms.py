"""A representative subset of the breadth functions under grad (finite differences in float64),
vmap (against a Python loop) and jit (against eager)."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.test_util import check_grads


@pytest.fixture
def rng64(x64):
    return np.random.default_rng(1)


def test_grads_of_breadth_functions(rng64):
    x = rng64.uniform(0.5, 2.0, 6)
    y = rng64.uniform(0.5, 2.0, 6)
    xp = np.sort(rng64.uniform(0, 3, 6))
    fns = [
        lambda x: jnp.nanmean(jnp.where(x > 1.9, jnp.nan, x) ** 2),
        lambda x: jnp.nanstd(x, ddof=1),
        lambda x: jnp.sum(jnp.interp(jnp.asarray(np.linspace(0.1, 2.9, 5)), jnp.asarray(xp), x)),
        lambda x: jnp.sum(jnp.convolve(x, jnp.asarray(y)) ** 2),
        lambda x: jnp.trapezoid(x ** 2, jnp.asarray(xp)),
        lambda x: jnp.sum(jnp.cov(jnp.stack([x, x ** 2]))),
        lambda x: jnp.sum(jnp.logaddexp2(x, jnp.asarray(y))),
        lambda x: jnp.polyval(x, 0.7),
        lambda x: jnp.sum(jnp.gradient(x ** 3)),
        lambda x: jnp.sum(jnp.cross(x[:3], x[3:])),
        lambda x: jnp.sum(jnp.diff(x, n=2) ** 2),
        lambda x: jnp.sum(jnp.kron(x[:2], x[2:4])),
        lambda x: jnp.sum(jnp.asarray(x).at[np.array([0, 9, 2])].multiply(3.0)),
        lambda x: jnp.sum(jnp.asarray(x).at[x > 1.0].set(0.5) ** 2),
        lambda x: jnp.sum(jnp.asarray(x).at[np.array([1, 7])].get(mode="fill", fill_value=2.0)
                          * x[:2]),
        lambda x: jnp.sum(jnp.ldexp(x, np.arange(6)) * jnp.i0(x)),
        lambda x: jnp.sum(jnp.select([x < 1, x > 1.5], [x ** 2, jnp.sin(x)], x)),
        lambda x: jnp.sum(jnp.vander(x[:3]) ** 2),
    ]
    for i, f in enumerate(fns):
        try:
            # jit keeps it to one compile per function (grad of jit is grad of the body)
            check_grads(funcgrad.jit(f), (x,), order=1, modes=("rev",))
        except AssertionError as e:
            raise AssertionError(f"function {i}: {e}") from None


def test_vmap_of_breadth_functions(rng):
    xs = rng.standard_normal((4, 7)).astype(np.float32)
    ys = rng.standard_normal((4, 7)).astype(np.float32)
    fns = [
        lambda x, y: jnp.isclose(x, y, atol=0.5),
        lambda x, y: jnp.interp(x, jnp.asarray(np.linspace(-2, 2, 7).astype(np.float32)), y),
        lambda x, y: jnp.nansum(jnp.where(x > 1, jnp.nan, x * y)),
        lambda x, y: jnp.diff(x * y),
        lambda x, y: x.at[np.array([0, 9, 3])].set(y[:3]),
        lambda x, y: x.at[y > 0].add(1.0),
        lambda x, y: jnp.convolve(x, y[:3]),
        lambda x, y: jnp.digitize(x, jnp.asarray(np.array([-1.0, 0.0, 1.0], np.float32))),
        lambda x, y: jnp.cumulative_sum(x, include_initial=True),
    ]
    for i, f in enumerate(fns):
        batched = funcgrad.vmap(f)(xs, ys)
        jf = funcgrad.jit(f)  # one compile for the loop
        looped = np.stack([np.asarray(jf(a, b)) for a, b in zip(xs, ys)])
        np.testing.assert_allclose(np.asarray(batched), looped, rtol=1e-5, atol=1e-6,
                                   err_msg=f"function {i}")


def test_jit_matches_eager(rng):
    x = rng.standard_normal(8).astype(np.float32)
    fns = [
        lambda x: jnp.frexp(x)[1], lambda x: jnp.modf(x)[0], lambda x: jnp.nanargmax(x),
        lambda x: jnp.histogram(x, 4)[0], lambda x: jnp.bincount(jnp.abs(x * 3).astype(
            jnp.int32), length=6), lambda x: jnp.unravel_index(jnp.argmax(x), (2, 4))[1],
        lambda x: jnp.setdiff1d(x, x[:3], size=5, fill_value=0.0),
    ]
    for i, f in enumerate(fns):
        np.testing.assert_allclose(funcgrad.jit(f)(x), f(jnp.asarray(x)), rtol=1e-6,
                                   err_msg=f"function {i}")
