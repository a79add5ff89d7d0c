"""JAX's config names as aliases, and the warning when a requested 64-bit dtype is narrowed
(issue 23)."""
import warnings

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as fnp
from funcgrad import random


@pytest.fixture
def x64_off():
    with funcgrad.config.override("enable_x64", False):
        yield


@pytest.mark.parametrize("call, name", [
    (lambda: fnp.zeros(2, dtype=fnp.float64), "zeros"),
    (lambda: fnp.ones(2, dtype="float64"), "ones"),
    (lambda: fnp.array([1.0, 2.0], dtype=np.float64), "array"),
    (lambda: fnp.asarray(np.arange(3), dtype=np.int64), "asarray"),
    (lambda: fnp.arange(3, dtype=fnp.int64), "arange"),
    (lambda: fnp.full((2,), 3, dtype=np.uint64), "full"),
    (lambda: fnp.ones(3).astype(fnp.float64), "astype"),
    (lambda: fnp.astype(fnp.ones(3), np.complex128), "astype"),
    (lambda: fnp.sum(fnp.ones(3), dtype=np.float64), "sum"),
])
def test_narrowed_dtype_warns(x64_off, call, name):
    with pytest.warns(UserWarning, match=rf"{name}: dtype \w+(64|128) was requested but 64-bit types "
                                         r"are off.*enable_x64"):
        out = call()
    assert out.dtype.itemsize == np.dtype(out.dtype).itemsize and out.dtype in (
        np.float32, np.int32, np.uint32, np.complex64)


@pytest.mark.parametrize("call", [
    lambda: fnp.zeros(2, dtype=float), lambda: fnp.arange(3, dtype=int),
    lambda: fnp.asarray(np.ones(3)), lambda: fnp.ones(2).astype(float),
    lambda: fnp.asarray([1.0], dtype=complex), lambda: fnp.zeros(2, dtype=np.float32),
])
def test_default_types_do_not_warn(x64_off, call):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        call()


def test_no_warning_with_x64_on():
    with funcgrad.config.override("enable_x64", True), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fnp.zeros(2, dtype=fnp.float64).dtype == np.float64


def test_warning_matches_jax(x64_off):
    jax = pytest.importorskip("jax")
    if jax.config.jax_enable_x64:
        pytest.skip("JAX runs with x64 on in this process")
    with pytest.warns(UserWarning, match="requested"):
        jax.numpy.zeros(2, dtype=np.float64)
    with pytest.warns(UserWarning, match="requested"):
        fnp.zeros(2, dtype=np.float64)


@pytest.mark.parametrize("jax_name, ours, value, expected", [
    ("jax_enable_x64", "enable_x64", True, True),
    ("jax_debug_nans", "debug_nans", True, True),
    ("jax_default_matmul_precision", "default_matmul_precision", "highest", "highest"),
    ("jax_platforms", "platform", "cpu", "cpu"),
    ("jax_platforms", "platform", "CPU,cuda", "cpu"),
    ("jax_platform_name", "platform", "cpu", "cpu"),
])
def test_jax_option_names_are_aliases(jax_name, ours, value, expected):
    old = getattr(funcgrad.config, ours)
    try:
        funcgrad.config.update(jax_name, value)
        assert getattr(funcgrad.config, ours) == expected
        assert getattr(funcgrad.config, jax_name) == expected
    finally:
        funcgrad.config.update(ours, old)
    assert getattr(funcgrad.config, ours) == old


def test_jax_enable_x64_alias_changes_dtypes():
    with funcgrad.config.override("jax_enable_x64", True):
        assert funcgrad.config.x64_enabled
        assert fnp.asarray(np.ones(2)).dtype == np.float64
        assert random.normal(random.key(0), (2,), dtype=np.float64).dtype == np.float64
    assert fnp.asarray(np.ones(2)).dtype == np.dtype(
        np.float64 if funcgrad.config.enable_x64 else np.float32)


def test_unknown_options_name_the_choices():
    with pytest.raises(ValueError, match="JAX option 'jax_traceback_filtering' has no "
                                         "funcgrad counterpart.*jax_enable_x64"):
        funcgrad.config.update("jax_traceback_filtering", "off")
    with pytest.raises(ValueError, match="unknown option 'enable_x65'.*enable_x64"):
        funcgrad.config.update("enable_x65", True)
    with pytest.raises(AttributeError, match="no option 'jax_nothing'"):
        funcgrad.config.jax_nothing


@pytest.mark.parametrize("call, name", [
    (lambda k: random.normal(k, (2,), dtype=np.float64), "normal"),
    (lambda k: random.uniform(k, (2,), dtype=np.float64), "uniform"),
    (lambda k: random.randint(k, (2,), 0, 5, dtype=np.int64), "randint"),
    (lambda k: random.bits(k, (2,), np.uint64), "bits"),
])
def test_random_dtype_narrowing_warns(x64_off, call, name):
    with pytest.warns(UserWarning, match=rf"random.{name}: dtype \w+64 was requested"):
        out = call(random.key(0))
    assert out.dtype.itemsize == 4
