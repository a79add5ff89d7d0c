"""index_tricks: index construction, functional writes, selection, apply/vectorize, editing."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp

from tests.numpy._helpers import J


def test_triangle_and_diag_indices():
    for got, want in [(jnp.tril_indices(4, -1), np.tril_indices(4, -1)),
                      (jnp.triu_indices(3, 1, 5), np.triu_indices(3, 1, 5)),
                      (jnp.diag_indices(3, 3), np.diag_indices(3, 3)),
                      (jnp.tril_indices_from(np.ones((3, 4))), np.tril_indices_from(np.ones((3, 4)))),
                      (jnp.triu_indices_from(np.ones((4, 4)), 2),
                       np.triu_indices_from(np.ones((4, 4)), 2)),
                      (jnp.diag_indices_from(np.ones((2, 2))), np.diag_indices_from(np.ones((2, 2)))),
                      (jnp.mask_indices(3, jnp.triu, 1), np.mask_indices(3, np.triu, 1))]:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    x = np.arange(16.0).reshape(4, 4)
    np.testing.assert_array_equal(jnp.asarray(x)[jnp.tril_indices(4)], x[np.tril_indices(4)])


def test_indices_ix_grids():
    np.testing.assert_array_equal(jnp.indices((2, 3)), np.indices((2, 3)))
    for g, w in zip(jnp.indices((2, 3), sparse=True), np.indices((2, 3), sparse=True)):
        np.testing.assert_array_equal(g, w)
    x = np.arange(20).reshape(4, 5)
    ix = jnp.ix_(jnp.array([0, 2]), jnp.array([1, 3, 4]))
    np.testing.assert_array_equal(jnp.asarray(x)[ix], x[np.ix_([0, 2], [1, 3, 4])])
    ixb = jnp.ix_(np.array([True, False, True, False]), np.array([4, 0]))
    np.testing.assert_array_equal(jnp.asarray(x)[ixb],
                                  x[np.ix_([True, False, True, False], [4, 0])])
    np.testing.assert_array_equal(jnp.mgrid[0:3, 0:4:2], np.mgrid[0:3, 0:4:2])
    np.testing.assert_allclose(jnp.mgrid[0:1:5j], np.mgrid[0:1:5j], rtol=1e-6)
    for g, w in zip(jnp.ogrid[0:2, 0:3], np.ogrid[0:2, 0:3]):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(jnp.fromfunction(lambda i, j: i * 10 + j, (2, 3),
                                                   dtype=jnp.int32),
                                  np.fromfunction(lambda i, j: i * 10 + j, (2, 3), dtype=int))


def test_unravel_ravel_multi_index():
    idx = np.array([0, 5, 11, 7])
    for g, w in zip(J(jnp.unravel_index, (3, 4))(idx), np.unravel_index(idx, (3, 4))):
        np.testing.assert_array_equal(g, w)
    coords = (np.array([1, 2, 0]), np.array([3, 0, 2]))
    np.testing.assert_array_equal(jnp.ravel_multi_index(coords, (3, 4)),
                                  np.ravel_multi_index(coords, (3, 4)))
    np.testing.assert_array_equal(jnp.ravel_multi_index(coords, (3, 4), order="F"),
                                  np.ravel_multi_index(coords, (3, 4), order="F"))
    bad = (np.array([1, 5]), np.array([3, -1]))
    np.testing.assert_array_equal(
        J(lambda a, b: jnp.ravel_multi_index((a, b), (3, 4), mode="clip"))(*bad),
        np.ravel_multi_index(bad, (3, 4), mode="clip"))
    np.testing.assert_array_equal(jnp.ravel_multi_index(bad, (3, 4), mode="wrap"),
                                  np.ravel_multi_index(bad, (3, 4), mode="wrap"))
    with pytest.raises(ValueError, match="invalid entry"):
        jnp.ravel_multi_index(bad, (3, 4))


def test_put_place_putmask_fill_diagonal():
    a = np.arange(6.0)
    e = a.copy()
    np.put(e, [0, 4], [-1.0, -2.0])
    np.testing.assert_array_equal(jnp.put(a, np.array([0, 4]), np.array([-1.0, -2.0])), e)
    e = a.copy()
    np.put(e, [1, 8], [7.0], mode="wrap")
    np.testing.assert_array_equal(jnp.put(a, np.array([1, 8]), 7.0, mode="wrap"), e)
    e = a.copy()
    np.place(e, a > 2, [10.0, 20.0])
    np.testing.assert_array_equal(jnp.place(a, a > 2, np.array([10.0, 20.0])), e)
    e = a.copy()
    np.putmask(e, a % 2 == 0, np.array([-1.0, -2.0]))
    np.testing.assert_array_equal(jnp.putmask(a, a % 2 == 0, np.array([-1.0, -2.0])), e)
    for shape, wrap in [((3, 3), False), ((5, 3), True), ((5, 3), False), ((3, 3, 3), False)]:
        e = np.zeros(shape)
        np.fill_diagonal(e, [1.0, 2.0], wrap=wrap)
        np.testing.assert_array_equal(jnp.fill_diagonal(jnp.zeros(shape), jnp.array([1.0, 2.0]),
                                                        wrap=wrap), e)
    with pytest.raises(ValueError, match="immutable"):
        jnp.fill_diagonal(jnp.zeros((2, 2)), 1.0, inplace=True)


def test_put_along_axis():
    x = np.arange(12.0).reshape(3, 4)
    idx = np.array([[1], [3], [0]])
    e = x.copy()
    np.put_along_axis(e, idx, -1.0, axis=1)
    np.testing.assert_array_equal(J(jnp.put_along_axis, -1.0, 1, inplace=False)(x, idx), e)
    idx0 = np.array([[2, 0, 1, 2]])
    e = x.copy()
    np.put_along_axis(e, idx0, np.array([[9.0, 8.0, 7.0, 6.0]]), axis=0)
    np.testing.assert_array_equal(
        jnp.put_along_axis(x, idx0, np.array([[9.0, 8.0, 7.0, 6.0]]), axis=0, inplace=False), e)


def test_select_piecewise_choose():
    x = np.arange(-3, 5)
    got = J(lambda x: jnp.select([x < -1, x > 2], [x, x * 10], -7))(x)
    np.testing.assert_array_equal(got, np.select([x < -1, x > 2], [x, x * 10], -7))
    xf = np.linspace(-2, 2, 9).astype(np.float32)
    f = J(lambda v: jnp.piecewise(v, [v < 0, v > 1], [lambda t: -t, lambda t: t ** 2, 0.5]))
    np.testing.assert_allclose(f(xf), np.piecewise(xf, [xf < 0, xf > 1],
                                                   [lambda t: -t, lambda t: t ** 2, 0.5]))
    choices = [np.array([1, 2, 3]), np.array([10, 20, 30]), np.array([100, 200, 300])]
    a = np.array([2, 0, 1])
    np.testing.assert_array_equal(jnp.choose(a, choices), np.choose(a, choices))
    np.testing.assert_array_equal(J(lambda a: jnp.choose(a, choices, mode="wrap"))(a + 3),
                                  np.choose(a + 3, choices, mode="wrap"))
    np.testing.assert_array_equal(jnp.choose(a + 5, choices, mode="clip"),
                                  np.choose(a + 5, choices, mode="clip"))


def test_compress_extract():
    x = np.arange(12).reshape(3, 4)
    c = np.array([True, False, True])
    np.testing.assert_array_equal(jnp.compress(c, x, axis=0), np.compress(c, x, axis=0))
    np.testing.assert_array_equal(jnp.compress(np.array([False, True]), x, axis=1),
                                  np.compress([False, True], x, axis=1))
    np.testing.assert_array_equal(jnp.compress(c, x), np.compress(c, x))
    np.testing.assert_array_equal(jnp.extract(x % 3 == 0, x), np.extract(x % 3 == 0, x))
    got = funcgrad.jit(lambda x: jnp.extract(x % 3 == 0, x, size=6, fill_value=-1))(x)
    np.testing.assert_array_equal(got, [0, 3, 6, 9, -1, -1])
    with pytest.raises(TypeError, match="size="):
        funcgrad.jit(lambda x: jnp.extract(x > 3, x))(x)


def test_apply_along_over_axes_vectorize():
    x = np.arange(24.0).reshape(2, 3, 4)
    for axis in (0, 1, 2):
        np.testing.assert_allclose(jnp.apply_along_axis(jnp.sum, axis, x),
                                   np.apply_along_axis(np.sum, axis, x))
    got = jnp.apply_along_axis(lambda v: v[::-1] * 2, 1, x)
    np.testing.assert_allclose(got, np.apply_along_axis(lambda v: v[::-1] * 2, 1, x))
    got = jnp.apply_along_axis(lambda v: jnp.outer(v, v), 1, x[0])
    np.testing.assert_allclose(got, np.apply_along_axis(lambda v: np.outer(v, v), 1, x[0]))
    np.testing.assert_allclose(jnp.apply_over_axes(jnp.sum, x, [0, 2]),
                               np.apply_over_axes(np.sum, x, [0, 2]))
    f = jnp.vectorize(lambda a, b: a * b + 1)
    np.testing.assert_array_equal(f(np.arange(6).reshape(2, 3), np.arange(3)),
                                  np.arange(6).reshape(2, 3) * np.arange(3) + 1)
    dot = jnp.vectorize(jnp.dot, signature="(n),(n)->()")
    a, b = np.arange(12.0).reshape(4, 3), np.arange(3.0)
    np.testing.assert_allclose(dot(a, b), a @ b)


def test_resize_append_insert_delete():
    a = np.array([[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(jnp.resize(a, (3, 4)), np.resize(a, (3, 4)))
    np.testing.assert_array_equal(jnp.resize(a, 4), np.resize(a, 4))
    np.testing.assert_array_equal(jnp.append(a, np.array([7, 8])), np.append(a, [7, 8]))
    np.testing.assert_array_equal(jnp.append(a, a, axis=0), np.append(a, a, axis=0))
    for obj, axis in [(1, None), (np.array([0, 2]), 1), (slice(0, 2), 1), (-1, 0),
                      (np.array([True, False, True]), 1)]:
        np.testing.assert_array_equal(jnp.delete(a, obj, axis), np.delete(a, obj, axis),
                                      err_msg=f"delete {obj} {axis}")
    for obj, values, axis in [(1, 9, None), (1, 9, 0), (np.array([0, 2, 3]), 0, 1),
                              (2, np.array([7, 8, 9]), 0), (1, np.array([[7], [8]]), 1),
                              (np.array([1, 1]), np.array([7, 8]), None)]:
        np.testing.assert_array_equal(jnp.insert(a, obj, values, axis),
                                      np.insert(a, obj, values, axis),
                                      err_msg=f"insert {obj} {values} {axis}")
    z = np.array([0, 0, 1, 2, 0, 3, 0])
    for trim in ("fb", "f", "b"):
        np.testing.assert_array_equal(jnp.trim_zeros(z, trim), np.trim_zeros(z, trim))


def test_diagflat_vander():
    np.testing.assert_array_equal(jnp.diagflat(np.array([[1, 2], [3, 4]]), 1),
                                  np.diagflat([[1, 2], [3, 4]], 1))
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(jnp.vander(x), np.vander(x))
    np.testing.assert_array_equal(jnp.vander(x, 2, increasing=True), np.vander(x, 2, True))


def test_misc_helpers():
    a = np.array([[1, 0, 1, 1, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0, 1, 0]])
    for axis in (None, 1, 0):
        for order in ("big", "little"):
            np.testing.assert_array_equal(jnp.packbits(a, axis, order),
                                          np.packbits(a, axis, bitorder=order))
    p = np.packbits(a, 1)
    for count in (None, 5, -3, 20):
        np.testing.assert_array_equal(jnp.unpackbits(p, 1, count), np.unpackbits(p, 1, count))
    blocks = [[np.eye(2), np.zeros((2, 1))], [np.ones((1, 3))]]
    np.testing.assert_array_equal(jnp.block(blocks), np.block(blocks))
    np.testing.assert_array_equal(jnp.block([np.ones(2), np.zeros(3)]),
                                  np.block([np.ones(2), np.zeros(3)]))
    m, v = np.arange(24.0).reshape(2, 3, 4), np.arange(4.0)
    np.testing.assert_allclose(jnp.matvec(m, v), m @ v)
    np.testing.assert_allclose(jnp.vecmat(np.arange(3.0), m[0]), np.arange(3.0) @ m[0])
    path, _ = jnp.einsum_path("ij,jk,kl->il", np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5)))
    assert len(path) == 2
    assert [s.shape for s in jnp.dsplit(np.ones((2, 2, 4)), 2)] == [(2, 2, 2)] * 2
    assert jnp.iterable([1]) and not jnp.iterable(jnp.asarray(1.0))
    x = jnp.arange(3)
    np.testing.assert_array_equal(jnp.copy(x), [0, 1, 2])
    assert jnp.ascontiguousarray(x, jnp.float32).dtype == np.float32
