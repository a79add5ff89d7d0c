"""Every NumPy index form in ``x[idx]`` and ``x.at[idx]`` against NumPy, out-of-bounds modes,
boolean masks eagerly and under jit."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp

X = np.arange(60, dtype=np.float32).reshape(3, 4, 5)

INDEXES = [
    1, -1, (0, 2), (slice(None), 3), (Ellipsis, 2), (1, Ellipsis), (None, 1), (Ellipsis, None),
    (slice(None, None, -1),), (slice(3, 0, -2), slice(None), slice(None, None, -2)),
    (slice(-2, None),), (slice(10, 20),), (slice(None, None, 2), None, 1),
    np.array([2, 0, -2]), (np.array([0, 2]), np.array([1, 3])),
    (np.array([[0], [2]]), slice(None), np.array([1, 4])),  # non-adjacent advanced
    (slice(None), np.array([0, 3]), np.array([[1], [2]])),  # adjacent, broadcast
    (1, np.array([0, 3])), (np.array([1, 0]), Ellipsis, 2), (None, np.array([0, 1]), None, 0),
    [0, 2], (X[:, :, 0] > 20,), (Ellipsis, np.array([True, False, True, False, True])),
    (np.array([True, False, True]), 1), (slice(None), np.array([[True, False, True, False, True]] * 4)),
]


def _ids(idx):
    return repr(idx).replace("\n", "")[:40]


@pytest.mark.parametrize("idx", INDEXES, ids=[_ids(i) for i in INDEXES])
def test_getitem_matches_numpy(idx):
    np.testing.assert_array_equal(jnp.asarray(X)[idx], X[idx])


@pytest.mark.parametrize("idx", INDEXES, ids=[_ids(i) for i in INDEXES])
def test_at_updates_match_numpy(idx):
    x = jnp.asarray(X)
    shape = X[idx].shape
    vals = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 100
    expected = X.copy()
    expected[idx] = vals
    np.testing.assert_array_equal(x.at[idx].set(vals), expected)
    expected = X.copy()
    expected[idx] += 1.5  # numpy += on unique positions
    np.testing.assert_array_equal(x.at[idx].add(1.5), expected)
    np.testing.assert_array_equal(x.at[idx].get(), X[idx])


def test_at_ops_match_numpy():
    x = jnp.asarray(X)
    idx = (slice(None), np.array([0, 2]), slice(1, 4))
    for method, op in [("multiply", np.multiply), ("divide", np.divide),
                       ("power", np.power), ("min", np.minimum), ("max", np.maximum),
                       ("subtract", np.subtract)]:
        expected = X.copy()
        expected[idx] = op(expected[idx], 7.0)
        np.testing.assert_allclose(getattr(x.at[idx], method)(7.0), expected, rtol=1e-6,
                                   err_msg=method)
    expected = X.copy()
    expected[1:, 0] = np.sqrt(expected[1:, 0])
    np.testing.assert_allclose(x.at[1:, 0].apply(jnp.sqrt), expected, rtol=1e-6)


def test_at_repeated_indices_accumulate():
    x = jnp.zeros(4)
    idx = np.array([0, 1, 1, 3, 3, 3])
    expected = np.zeros(4, np.float32)
    np.add.at(expected, idx, 1.0)
    np.testing.assert_array_equal(x.at[idx].add(1.0), expected)
    np.testing.assert_array_equal(jnp.ones(4).at[idx].multiply(2.0), [2, 4, 1, 8])


def test_update_modes_out_of_bounds():
    x = jnp.arange(5.0)
    idx = np.array([0, 7, -1, -9])
    # drop (default): 7 and -9 are skipped; -1 wraps to 4
    np.testing.assert_array_equal(x.at[idx].set(-1.0), [-1, 1, 2, 3, -1])
    np.testing.assert_array_equal(x.at[idx].set(-1.0, mode="drop"), [-1, 1, 2, 3, -1])
    np.testing.assert_array_equal(x.at[idx].add(10.0, mode="fill"), [10, 1, 2, 3, 14])
    # clip: 7 -> 4, -9 -> (-9 + 5 = -4) -> 0
    np.testing.assert_array_equal(x.at[idx].add(10.0, mode="clip"), [20, 1, 2, 3, 24])
    np.testing.assert_array_equal(x.at[9].set(1.0), np.arange(5.0))
    np.testing.assert_array_equal(x.at[9].set(-1.0, mode="clip"), [0, 1, 2, 3, -1])
    np.testing.assert_array_equal(x.at[2:].set(7.0, mode="promise_in_bounds"), [0, 1, 7, 7, 7])


def test_get_modes_out_of_bounds():
    x = jnp.arange(5.0)
    idx = np.array([0, 7, -1, -9])
    np.testing.assert_array_equal(x.at[idx].get(mode="clip"), [0, 4, 4, 0])
    np.testing.assert_array_equal(x.at[idx].get(), [0, 4, 4, 0])  # array indices clamp
    out = np.asarray(x.at[idx].get(mode="fill"))
    np.testing.assert_array_equal(out[[0, 2]], [0, 4])
    assert np.isnan(out[[1, 3]]).all()
    np.testing.assert_array_equal(x.at[idx].get(mode="fill", fill_value=-5.0), [0, -5, 4, -5])
    np.testing.assert_array_equal(jnp.arange(5).at[np.array([1, 8])].get(mode="fill"),
                                  [1, np.iinfo(np.int32).min])
    np.testing.assert_array_equal(jnp.arange(5, dtype=jnp.uint8).at[np.array([8])].get(
        mode="fill"), [255])
    assert float(x.at[6].get(mode="fill", fill_value=3.0)) == 3.0
    assert float(x.at[6].get(mode="clip")) == 4.0
    assert float(x[6]) == 4.0                  # a static int clamps too, as in JAX
    with funcgrad.config.override("debug_checks", True):
        with pytest.raises(IndexError, match="index 6 is out of bounds.*debug_checks is on"):
            x[6]


def test_modes_2d_mixed_index():
    x = jnp.asarray(X[0])  # (4, 5)
    out = x.at[np.array([1, 9]), 1:3].set(0.0)
    expected = X[0].copy()
    expected[1, 1:3] = 0
    np.testing.assert_array_equal(out, expected)
    g = np.asarray(x.at[np.array([1, 9]), ::-1].get(mode="fill", fill_value=-1.0))
    np.testing.assert_array_equal(g[0], X[0][1, ::-1])
    np.testing.assert_array_equal(g[1], -1.0)


def test_bad_mode():
    with pytest.raises(ValueError, match="mode must be"):
        jnp.zeros(3).at[0].set(1.0, mode="wrap")


def test_traced_indices_and_modes_under_jit():
    @funcgrad.jit
    def f(x, i):
        return (x[i], x.at[i].set(-1.0), x.at[i].get(mode="fill", fill_value=9.0),
                x.at[i, 1:].add(1.0, mode="clip"))
    x = jnp.asarray(X[0])
    i = jnp.array([0, -1, 7])
    r0, r1, r2, r3 = f(x, i)
    np.testing.assert_array_equal(r0, X[0][[0, 3, 3]])
    e1 = X[0].copy()
    e1[[0, 3]] = -1
    np.testing.assert_array_equal(r1, e1)
    np.testing.assert_array_equal(r2[:2], X[0][[0, 3]])
    np.testing.assert_array_equal(r2[2], 9.0)
    e3 = X[0].copy()
    e3[0, 1:] += 1
    e3[3, 1:] += 2
    np.testing.assert_array_equal(r3, e3)


def test_boolean_mask_under_jit():
    x = jnp.asarray(X)
    f = funcgrad.jit(lambda x: (x.at[x > 30].set(0.0), x.at[x[:, :, 0] > 20].add(
        jnp.arange(5.0)), jnp.where(x > 30, x, -x), x.at[x > 30].apply(jnp.negative)))
    a, b, c, d = f(x)
    e = X.copy()
    e[X > 30] = 0
    np.testing.assert_array_equal(a, e)
    e = X.copy()
    e[X[:, :, 0] > 20] += np.arange(5.0)
    np.testing.assert_array_equal(b, e)
    np.testing.assert_array_equal(c, np.where(X > 30, X, -X))
    np.testing.assert_array_equal(d, np.where(X > 30, -X, X))


def test_boolean_mask_getitem_under_jit_is_a_clear_error():
    with pytest.raises(IndexError, match="boolean mask index needs a concrete value"):
        funcgrad.jit(lambda x: x[x > 2])(jnp.arange(5.0))
    with pytest.raises(IndexError, match="traced boolean mask"):
        funcgrad.jit(lambda x: x.at[x > 2].set(jnp.arange(2.0)))(jnp.arange(5.0))


def test_boolean_mask_eager_values_per_element():
    x = jnp.arange(6.0)
    m = np.array([True, False, True, False, False, True])
    e = np.arange(6.0)
    e[m] = [10, 20, 30]
    np.testing.assert_array_equal(x.at[m].set(jnp.array([10.0, 20.0, 30.0])), e)
    np.testing.assert_array_equal(x[jnp.asarray(m)], np.arange(6.0)[m])


def test_immutable_setitem_error():
    with pytest.raises(TypeError, match="immutable"):
        x = jnp.zeros(3)
        x[0] = 1.0


# --- random index expressions (hypothesis) ------------------------------------------------
from hypothesis import given, settings, strategies as st  # noqa: E402


def _entry(n):
    return st.one_of(
        st.integers(-n, n - 1),
        st.builds(slice, st.one_of(st.none(), st.integers(-n - 1, n + 1)),
                  st.one_of(st.none(), st.integers(-n - 1, n + 1)),
                  st.one_of(st.none(), st.sampled_from([-2, -1, 1, 2]))),
        st.lists(st.integers(-n, n - 1), min_size=1, max_size=3).map(np.array))


@st.composite
def _index(draw):
    entries = [draw(_entry(n)) for n in X.shape[:draw(st.integers(1, 3))]]
    for _ in range(draw(st.integers(0, 2))):  # new axes do not consume a dimension
        entries.insert(draw(st.integers(0, len(entries))), None)
    if draw(st.booleans()):
        entries.insert(draw(st.integers(0, len(entries))), Ellipsis)
    arrays = [e for e in entries if isinstance(e, np.ndarray)]
    if len({a.shape for a in arrays}) > 1:  # keep advanced indices broadcastable
        entries = [e[:1] if isinstance(e, np.ndarray) else e for e in entries]
    return tuple(entries)


@settings(max_examples=20, deadline=None)
@given(_index())
def test_random_index_expressions(idx):
    x = jnp.asarray(X)
    expected = X[idx]
    np.testing.assert_array_equal(x[idx], expected)
    vals = np.arange(expected.size, dtype=np.float32).reshape(expected.shape) - 7
    e = X.copy()
    e[idx] = vals
    positions = np.arange(X.size).reshape(X.shape)[idx].ravel()
    if len(np.unique(positions)) == positions.size:  # NumPy's last-write-wins otherwise
        np.testing.assert_array_equal(x.at[idx].set(vals), e)
