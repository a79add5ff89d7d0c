"""Out-of-bounds indices behave as JAX's (0.10.2) throughout funcgrad.numpy: ``x[idx]`` and
``x.at[idx].get()`` clamp, ``take``/``take_along_axis`` fill, ``x.at[idx].set/add/...`` drop
the update, each ``mode=`` does what JAX's does, for static and traced indices alike, eagerly,
under ``jit`` and under ``vmap`` (issue 27). With ``config.debug_checks`` on, the default rules
raise ``IndexError`` instead (now for concrete indices, at run time for traced ones).

The references are JAX's results stored in ``jax_oob_refs.npz`` (``make_jax_oob_refs.py``);
with JAX installed, ``test_stored_refs_are_jax`` recomputes them in a subprocess.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as xp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oob_cases import STATIC, TRACED, X1, X2  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REF = dict(np.load(os.path.join(HERE, "jax_oob_refs.npz")))
A, B = xp.asarray(X1), xp.asarray(X2)


def _same(got, want, what):
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, \
        f"{what}: {got.dtype}{got.shape} vs JAX's {want.dtype}{want.shape}"
    np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("name", sorted(STATIC))
def test_static_indices_match_jax(name):
    f = STATIC[name]
    want = REF[f"static/{name}"]
    _same(f(xp, A, B), want, name)
    _same(funcgrad.jit(lambda a, b: f(xp, a, b))(A, B), want, f"jit({name})")


@pytest.mark.parametrize("name", sorted(TRACED))
def test_traced_indices_match_jax(name):
    f, idx = TRACED[name]
    g = funcgrad.jit(lambda a, b, i: f(xp, a, b, i))
    for k, i in enumerate(idx):
        want = REF[f"traced/{name}/{k}"]
        _same(g(A, B, i), want, f"jit({name})({i})")
        _same(f(xp, A, B, xp.asarray(i)), want, f"{name}({i}) eagerly")
    want = REF[f"vmap/{name}"]
    _same(funcgrad.vmap(lambda i: f(xp, A, B, i))(idx), want, f"vmap({name})")
    _same(funcgrad.jit(funcgrad.vmap(lambda i: f(xp, A, B, i)))(idx), want,
          f"jit(vmap({name}))")


def test_gradients_at_out_of_bounds_indices():
    # x[5] of a 3-vector reads x[2]; a dropped update contributes nothing
    _same(funcgrad.grad(lambda v: v[5] * 2.0)(xp.ones(3)), REF["grad/get_past_end"], "grad get")
    g = funcgrad.grad(lambda v, w: (v.at[np.array([1, 4])].set(w) ** 2).sum(), argnums=(0, 1))
    _same(g(xp.arange(3.0), xp.array([5.0, 6.0]))[1], REF["grad/set_past_end"], "grad set")


def test_stepping_one_past_the_end():
    # the pattern real programs use: read x[i + 1] at the last i and mask the result
    x = xp.arange(5.0)

    def diffs(x):
        return funcgrad.lax.fori_loop(
            0, 5, lambda i, acc: acc.at[i].set(x[i + 1] - x[i]), xp.zeros(5))

    np.testing.assert_array_equal(np.asarray(funcgrad.jit(diffs)(x)), [1, 1, 1, 1, 0])
    np.testing.assert_array_equal(np.asarray(diffs(x)), [1, 1, 1, 1, 0])


def test_empty_axis_still_raises():
    # nothing to clamp to: JAX raises too
    with pytest.raises(IndexError, match="index 0 is out of bounds for axis 0 with size 0"):
        xp.zeros(0)[0]


# --- the checking switch ------------------------------------------------------------------
@pytest.fixture
def checks():
    with funcgrad.config.override("debug_checks", True):
        yield


RAISES = {
    "x[11]": (lambda: A[11], r"Array.__getitem__: index 11 is out of bounds for axis 0 with "
                             r"size 10 \(raised because funcgrad.config.debug_checks is on; "
                             r"with it off, as in JAX, the index is clamped into bounds\)"),
    "x[-11]": (lambda: A[-11], "index -11 is out of bounds for axis 0"),
    "x[2d]": (lambda: B[1, 4], "index 4 is out of bounds for axis 1 with size 4"),
    "x[array]": (lambda: A[np.array([1, 10])], "index 10 is out of bounds"),
    "x[Array]": (lambda: A[xp.array([1, -12])], "index -12 is out of bounds"),
    "at.get": (lambda: A.at[10].get(), r"Array.at\[...\].get: index 10"),
    "at.set": (lambda: A.at[np.array([0, 10])].set(1),
               r"Array.at\[...\].set: index 10 .* the update is dropped"),
    "at.add": (lambda: B.at[3, 0].add(1.0), r"Array.at\[...\].add: index 3"),
    "take": (lambda: xp.take(A, 10), r"take: index 10 .* fill_value is returned there"),
    "take_along_axis": (lambda: xp.take_along_axis(B, np.array([[4]] * 3), 1),
                        "take_along_axis: index 4"),
    "jit x[i]": (lambda: funcgrad.jit(lambda a, i: a[i])(A, 11), "index 11 is out of bounds"),
    "jit at.set": (lambda: funcgrad.jit(lambda a, i: a.at[i].set(0))(A, xp.array([3, 10])),
                   r"Array.at\[...\].set: index 10"),
    "jit take": (lambda: funcgrad.jit(lambda a, i: xp.take(a, i))(A, xp.array([-11])),
                 "take: index -11"),
    "vmap x[i]": (lambda: funcgrad.vmap(lambda i: A[i])(xp.array([1, 12])), "index 12"),
    "grad x[i]": (lambda: funcgrad.grad(lambda v, i: v[i])(xp.ones(3), 4), "index 4"),
}


@pytest.mark.parametrize("name", sorted(RAISES))
def test_debug_checks_raise(checks, name):
    fn, message = RAISES[name]
    with pytest.raises(IndexError, match=message):
        np.asarray(fn())


def test_debug_checks_pass_in_bounds_and_explicit_modes(checks):
    # in-bounds indices and an explicit mode (the program asked for that rule) never raise
    _same(A[-10], REF["static/get_negative"], "x[-10]")
    np.testing.assert_array_equal(np.asarray(funcgrad.jit(lambda a, i: a[i])(A, 9)), 9)
    np.testing.assert_array_equal(np.asarray(funcgrad.vmap(lambda i: A[i])(xp.array([0, -1]))),
                                  [0, 9])
    for name in ("at_get_fill", "at_get_clip", "at_get_drop", "set_clip", "add_fill", "add_drop",
                 "take_clip", "take_wrap", "take_along_clip", "get_slice_past_end"):
        _same(STATIC[name](xp, A, B), REF[f"static/{name}"], name)


def test_debug_checks_switch_is_read_per_trace():
    f = funcgrad.jit(lambda a, i: a[i])
    np.testing.assert_array_equal(np.asarray(f(A, 11)), 9)
    with funcgrad.config.override("debug_checks", True):
        with pytest.raises(IndexError, match="index 11"):
            np.asarray(f(A, 11))
    np.testing.assert_array_equal(np.asarray(f(A, 11)), 9)


def test_stored_refs_are_jax():
    pytest.importorskip("jax")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "refs.npz")
        subprocess.run([sys.executable, os.path.join(HERE, "make_jax_oob_refs.py"), path],
                       check=True, timeout=600, capture_output=True)
        fresh = dict(np.load(path))
    assert sorted(fresh) == sorted(REF)
    for key, value in fresh.items():
        _same(value, REF[key], key)
