"""debug_nans / debug_infs: the error names the primitive that made the bad value and the line
of this file that applied it, eagerly and under jit, grad, vmap, scan, while and cond."""
import pathlib

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import config, lax
from funcgrad.lowering import dispatch

HERE = pathlib.Path(__file__)
LINES = HERE.read_text().splitlines()


def line_of(marker):
    """The line number of this file that carries ``# <marker>``."""
    found = [i + 1 for i, text in enumerate(LINES) if text.rstrip().endswith(f"# {marker}")]
    assert len(found) == 1, marker
    return found[0]


def expect(fn, prim, marker, kind="nan"):
    with pytest.raises(FloatingPointError) as info:
        fn()
    message = str(info.value)
    head = "invalid value (nan)" if kind == "nan" else "divide by zero or overflow (inf)"
    assert message.splitlines()[0] == f"{head} encountered in {prim}", message
    assert f"{HERE}:{line_of(marker)} " in message, message
    return message


@pytest.fixture
def nans():
    with config.override("debug_nans", True):
        yield


def log_of_double(x):
    y = x * 2.0
    z = jnp.log(y)  # log-site
    return z + 1.0


X = np.array([-1.0, 2.0], np.float32)


def test_eager_operation(nans):
    message = expect(lambda: log_of_double(jnp.asarray(X)), "log", "log-site")
    assert "funcgrad.config.debug_nans is on" in message


def test_jit_reruns_op_by_op(nans):
    expect(lambda: funcgrad.jit(log_of_double)(jnp.asarray(X)), "log", "log-site")


def test_jit_of_jit_steps_into_the_inner_call(nans):
    outer = funcgrad.jit(lambda x: funcgrad.jit(log_of_double)(x * 1.0) * 3.0)
    expect(lambda: outer(jnp.asarray(X)), "log", "log-site")


@pytest.mark.parametrize("jitted", [False, True])
def test_grad(nans, jitted):
    loss = lambda x: log_of_double(x).sum()   # noqa: E731
    loss = funcgrad.jit(loss) if jitted else loss
    expect(lambda: funcgrad.grad(loss)(jnp.asarray(X)), "log", "log-site")


def sqrt_times_zero(x):
    return jnp.sqrt(x) * 0.0  # sqrt-site


def test_nan_made_in_the_backward_pass(nans):
    # forward: sqrt(0) * 0 = 0; backward: 0 * 0.5 / sqrt(0) = 0 * inf = nan
    assert float(sqrt_times_zero(jnp.asarray(0.0))) == 0.0
    # the transposed jvp of sqrt divides 0 by 2 * sqrt(0): the line is sqrt's
    expect(lambda: funcgrad.grad(sqrt_times_zero)(jnp.asarray(0.0)), "div", "sqrt-site")


@pytest.mark.parametrize("jitted", [False, True])
def test_vmap(nans, jitted):
    f = funcgrad.vmap(log_of_double)
    f = funcgrad.jit(f) if jitted else f
    expect(lambda: f(jnp.asarray(X)), "log", "log-site")


def scan_body(carry, x):
    return carry + x, jnp.sqrt(carry - 3.0)  # scan-site


@pytest.mark.parametrize("jitted", [False, True])
def test_scan_body(nans, jitted):
    def run(xs):
        return lax.scan(scan_body, 10.0, xs)
    run = funcgrad.jit(run) if jitted else run
    # carries 10, 10, 7, 1: the fourth step takes sqrt(-2)
    expect(lambda: run(-3.0 * jnp.arange(5.0)), "sqrt", "scan-site")


def test_grad_of_scan(nans):
    loss = lambda xs: lax.scan(scan_body, 10.0, xs)[1].sum()   # noqa: E731
    expect(lambda: funcgrad.grad(loss)(-3.0 * jnp.arange(5.0)), "sqrt", "scan-site")


def test_fori_loop_and_cond(nans):
    def body(i, x):
        return lax.cond(i == 3, lambda v: jnp.arcsin(v + 2.0), lambda v: v, x)  # cond-site
    f = funcgrad.jit(lambda x: lax.fori_loop(0, 5, body, x))
    expect(lambda: f(jnp.asarray(0.5)), "asin", "cond-site")


def test_clean_values_pass_and_match_unchecked(nans):
    x = jnp.asarray([1.0, 2.0])
    checked = funcgrad.jit(log_of_double)(x)
    with config.override("debug_nans", False):
        plain = funcgrad.jit(log_of_double)(x)
    np.testing.assert_allclose(np.asarray(checked), np.log(2 * np.array([1.0, 2.0])) + 1.0,
                               rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(checked), np.asarray(plain))


def test_infs_only_with_debug_infs():
    f = funcgrad.jit(lambda x: 1.0 / x)  # inf-site
    x = jnp.asarray([0.0, 1.0])
    with config.override("debug_nans", True):
        assert np.isinf(np.asarray(f(x))[0])          # an inf is not a NaN
    with config.override("debug_infs", True):
        expect(lambda: f(x), "div", "inf-site", kind="inf")


def test_off_lets_nans_through_and_restores_the_fast_path():
    f = funcgrad.jit(log_of_double)
    x = jnp.asarray(X)
    with config.override("debug_nans", True):
        assert dispatch._slow_only[0]
        with pytest.raises(FloatingPointError):
            f(x)
        assert not f._caches.fast and not f._caches.fast_sole   # every call is checked
    assert not dispatch._slow_only[0]
    assert funcgrad.core.interpreters.root() is funcgrad.lowering.eager.eager_interpreter
    out = np.asarray(f(x))
    out = np.asarray(f(x))          # second call: fast table filled again
    assert np.isnan(out[0]) and (f._caches.fast_sole or f._caches.fast)
    assert out[1] == pytest.approx(np.log(4.0) + 1.0)


def test_a_nan_argument_is_reported_where_it_is_first_used(nans):
    f = funcgrad.jit(lambda x: x + 0.0)  # argument-site
    expect(lambda: f(np.float32(np.nan)), "add", "argument-site")


def test_a_nan_returned_untouched_blames_the_call(nans):
    def ident(x):
        return x
    with pytest.raises(FloatingPointError, match=r"encountered in jit\(ident\)\n  at "
                                                 rf"{HERE}:\d+ "):
        funcgrad.jit(ident)(jnp.asarray([np.nan]))


def test_donated_arguments_cannot_be_rerun(nans, on_cpu):
    f = funcgrad.jit(lambda x: jnp.log(x) * 2.0, donate_argnums=0)
    with pytest.raises(FloatingPointError, match=r"(?s)encountered in jit\(<lambda>\).*donated "
                                                 r"arguments are gone"):
        f(jnp.asarray(X))
