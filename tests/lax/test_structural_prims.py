"""Shape, reduction, indexing and dot primitives: eager == jit == NumPy."""
import numpy as np
import pytest

import funcgrad
from funcgrad import lax

from tests.lax.helpers import check, rand

DTYPES = ["float32", "int32", "bool", "bfloat16"]


# --- shapes ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_in_dim(dtype, rng):
    x = rand(rng, (3, 1), dtype)
    check(lambda a: lax.broadcast_in_dim(a, (2, 3, 4), (1, 2)),
          lambda a: np.broadcast_to(a[None], (2, 3, 4)), [x])
    s = rand(rng, (), dtype)
    check(lambda a: lax.broadcast_in_dim(a, (2, 2), ()), lambda a: np.broadcast_to(a, (2, 2)), [s])
    v = rand(rng, (3,), dtype)
    check(lambda a: lax.broadcast_in_dim(a, (3, 2), (0,)),
          lambda a: np.broadcast_to(a[:, None], (3, 2)), [v])
    check(lambda a: lax.broadcast(a, (2,)), lambda a: np.broadcast_to(a, (2, 3)), [v])


def test_reshape_transpose_squeeze_expand(rng):
    x = rand(rng, (2, 3, 4), "float32")
    check(lambda a: lax.reshape(a, (6, 4)), lambda a: a.reshape(6, 4), [x])
    check(lambda a: lax.reshape(a, (4, 3, 2), dimensions=(2, 1, 0)),
          lambda a: a.transpose(2, 1, 0).reshape(4, 3, 2), [x])
    for perm in [(0, 1, 2), (2, 0, 1), (1, 2, 0)]:
        check(lambda a, p=perm: lax.transpose(a, p), lambda a, p=perm: a.transpose(p), [x])
    y = rand(rng, (1, 3, 1, 2), "int32")
    check(lambda a: lax.squeeze(a, (0, 2)), lambda a: a.reshape(3, 2), [y])
    check(lambda a: lax.squeeze(a, (-2,)), lambda a: a.reshape(1, 3, 2), [y])
    check(lambda a: lax.expand_dims(a, (0, 3)), lambda a: a[None, :, :, None, :], [x])
    check(lambda a: lax.rev(a, (0, 2)), lambda a: a[::-1, :, ::-1], [x])


def test_concatenate(rng):
    a, b, c = rand(rng, (2, 3), "float32"), rand(rng, (4, 3), "float32"), rand(rng, (1, 3), "float32")
    check(lambda *xs: lax.concatenate(xs, 0), lambda *xs: np.concatenate(xs, 0), [a, b, c])
    d, e = rand(rng, (2, 1), "int32"), rand(rng, (2, 5), "int32")
    check(lambda *xs: lax.concatenate(xs, 1), lambda *xs: np.concatenate(xs, 1), [d, e])


def test_split(rng):
    x = rand(rng, (3, 7, 2), "float32")
    i = rand(rng, (4, 2), "int32")
    for arr, sizes, axis, want in ((x, (2, 0, 5), 1, np.split(x, [2, 2], 1)),
                                   (x, (3,), 0, [x]), (i, (1, 3), -2, np.split(i, [1], 0))):
        for fn in (lax.split, funcgrad.jit(lax.split, static_argnums=(1, 2))):
            got = fn(arr, sizes, axis)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_array_equal(np.asarray(g), w)
    # under vmap each example is split; the batch axis stays in front
    got = funcgrad.vmap(lambda r: lax.split(r, (3, 4), 0))(x)
    for g, w in zip(got, np.split(x, [3], 1)):
        np.testing.assert_array_equal(np.asarray(g), w)
    with pytest.raises(TypeError, match="sum to the size 7"):
        lax.split(x, (2, 2), 1)
    with pytest.raises(TypeError, match="out of range"):
        lax.split(x, (3,), 5)


def _np_pad(x, value, config):
    for axis, (lo, hi, interior) in enumerate(config):
        n = x.shape[axis]
        size = max(n + max(n - 1, 0) * interior, 0)
        shape = list(x.shape)
        shape[axis] = size + max(lo, 0) + max(hi, 0)
        out = np.full(shape, value, x.dtype)
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(max(lo, 0), max(lo, 0) + size, interior + 1)
        out[tuple(idx)] = x
        crop = [slice(None)] * x.ndim
        crop[axis] = slice(-min(lo, 0), shape[axis] + min(hi, 0))
        x = out[tuple(crop)]
    return x


@pytest.mark.parametrize("config", [[(1, 2, 0), (0, 0, 0)], [(0, 0, 1), (2, 0, 2)],
                                    [(-1, 0, 0), (1, -2, 0)], [(-2, -1, 1), (0, 0, 3)]])
def test_pad(config, rng):
    x = rand(rng, (3, 4), "float32")
    check(lambda a: lax.pad(a, -7.0, config), lambda a: _np_pad(a, -7.0, config), [x])


def test_pad_int_and_value_array(rng):
    x = rand(rng, (5,), "int32")
    check(lambda a, v: lax.pad(a, v, [(1, 1, 1)]), lambda a, v: _np_pad(a, v, [(1, 1, 1)]),
          [x, np.int32(9)])


def test_iota():
    check(lambda: lax.iota("int32", 5), lambda: np.arange(5, dtype=np.int32), [])
    check(lambda: lax.iota("float32", 4), lambda: np.arange(4, dtype=np.float32), [])
    check(lambda: lax.broadcasted_iota("int32", (2, 3), 1),
          lambda: np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3)), [])
    check(lambda: lax.broadcasted_iota("uint8", (3, 2), 0),
          lambda: np.broadcast_to(np.arange(3, dtype=np.uint8)[:, None], (3, 2)), [])


@pytest.mark.parametrize("start,limit,strides", [((0, 1), (3, 4), None), ((1, 0), (3, 4), (2, 3)),
                                                 ((2, 2), (2, 4), (1, 1))])
def test_slice(start, limit, strides, rng):
    x = rand(rng, (3, 4), "float32")
    st = strides or (1, 1)
    check(lambda a: lax.slice(a, start, limit, strides),
          lambda a: a[start[0]:limit[0]:st[0], start[1]:limit[1]:st[1]], [x])


@pytest.mark.parametrize("starts", [(0, 0), (1, 2), (5, -3), (-1, 9)])
def test_dynamic_slice_clamps(starts, rng):
    x = rand(rng, (4, 5), "float32")
    sizes = (2, 3)

    def ref(a, i, j):
        i = min(max(int(i), 0), 4 - 2)
        j = min(max(int(j), 0), 5 - 3)
        return a[i:i + 2, j:j + 3]
    check(lambda a, i, j: lax.dynamic_slice(a, (i, j), sizes), ref,
          [x, np.int32(starts[0]), np.int32(starts[1])])


def test_dynamic_slice_mixed_index_types(rng):
    x = rand(rng, (4, 5), "int32")
    out = funcgrad.jit(lambda a, i: lax.dynamic_slice(a, (i, np.uint8(1)), (2, 2)))(x, np.int32(1))
    np.testing.assert_array_equal(np.asarray(out), x[1:3, 1:3])


@pytest.mark.parametrize("starts", [(0, 0), (2, 1), (9, -4)])
def test_dynamic_update_slice(starts, rng):
    x = rand(rng, (4, 5), "float32")
    u = rand(rng, (2, 3), "float32")

    def ref(a, b, i, j):
        i = min(max(int(i), 0), 2)
        j = min(max(int(j), 0), 2)
        a = a.copy()
        a[i:i + 2, j:j + 3] = b
        return a
    check(lambda a, b, i, j: lax.dynamic_update_slice(a, b, (i, j)), ref,
          [x, u, np.int32(starts[0]), np.int32(starts[1])])


# --- gather / scatter -----------------------------------------------------------------------
ROWS = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                  start_index_map=(0,))
POINTS = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0, 1),
                                    start_index_map=(0, 1))


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_gather_rows_clip(dtype, rng):
    x = rand(rng, (5, 3), dtype)
    idx = np.array([[0], [4], [2], [7], [-3]], np.int32)
    check(lambda a, i: lax.gather(a, i, ROWS, (1, 3)),
          lambda a, i: a[np.clip(i[:, 0], 0, 4)], [x, idx])


def test_gather_points_and_windows(rng):
    x = rand(rng, (4, 5), "float32")
    idx = np.array([[0, 0], [3, 4], [1, 2]], np.int32)
    check(lambda a, i: lax.gather(a, i, POINTS, (1, 1)), lambda a, i: a[i[:, 0], i[:, 1]],
          [x, idx])
    # 2x2 windows, keeping both window axes
    win = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                     start_index_map=(0, 1))
    check(lambda a, i: lax.gather(a, i, win, (2, 2)),
          lambda a, i: np.stack([a[r:r + 2, c:c + 2] for r, c in np.minimum(i, [2, 3])]),
          [x, idx])


def test_gather_fill(rng):
    x = rand(rng, (5, 3), "float32")
    idx = np.array([[0], [4], [5], [-1]], np.int32)

    def ref(a, i, fill):
        out = np.full((4, 3), fill, a.dtype)
        for k, r in enumerate(i[:, 0]):
            if 0 <= r < 5:
                out[k] = a[r]
        return out
    check(lambda a, i: lax.gather(a, i, ROWS, (1, 3), mode="fill", fill_value=-1.0),
          lambda a, i: ref(a, i, -1.0), [x, idx])
    check(lambda a, i: lax.gather(a, i, ROWS, (1, 3), mode="fill"),
          lambda a, i: ref(a, i, np.nan), [x, idx])
    xi = rand(rng, (5, 3), "int32")
    check(lambda a, i: lax.gather(a, i, ROWS, (1, 3), mode="fill"),
          lambda a, i: ref(a, i, np.iinfo(np.int32).min), [xi, idx])


SCAT = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                   scatter_dims_to_operand_dims=(0,))


def _np_scatter(kind, a, idx, upd, clip):
    a = a.copy()
    for k, r in enumerate(idx[:, 0]):
        if clip:
            r = min(max(r, 0), a.shape[0] - 1)
        elif not 0 <= r < a.shape[0]:
            continue
        if kind == "set":
            a[r] = upd[k]
        elif kind == "add":
            a[r] = a[r] + upd[k]
        elif kind == "mul":
            a[r] = a[r] * upd[k]
        elif kind == "min":
            a[r] = np.minimum(a[r], upd[k])
        else:
            a[r] = np.maximum(a[r], upd[k])
    return a


@pytest.mark.parametrize("kind", ["add", "mul", "min", "max", "set"])
@pytest.mark.parametrize("mode", ["drop", "clip"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_scatter_family(kind, mode, dtype, rng):
    x = rand(rng, (5, 3), dtype)
    # duplicates (combined for add/mul/min/max) and out-of-bounds rows; "set" avoids duplicates
    # whose winner is unspecified.
    rows = [0, 2, 2, 7, -1] if kind != "set" else [0, 2, 7, -1]
    if kind == "set" and mode == "clip":
        rows = [0, 2, 7]
    idx = np.array(rows, np.int32)[:, None]
    upd = rand(rng, (len(rows), 3), dtype)
    fn = {"set": lax.scatter, "add": lax.scatter_add, "mul": lax.scatter_mul,
          "min": lax.scatter_min, "max": lax.scatter_max}[kind]
    check(lambda a, i, u: fn(a, i, u, SCAT, mode=mode),
          lambda a, i, u: _np_scatter(kind, a, i, u, mode == "clip"), [x, idx, upd], rtol=1e-5)


def test_scatter_points(rng):
    x = rand(rng, (3, 4), "float32")
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0, 1),
                                     scatter_dims_to_operand_dims=(0, 1))
    idx = np.array([[0, 1], [2, 3], [0, 1]], np.int32)
    upd = np.array([1.0, 2.0, 3.0], np.float32)

    def ref(a, i, u):
        a = a.copy()
        np.add.at(a, (i[:, 0], i[:, 1]), u)
        return a
    check(lambda a, i, u: lax.scatter_add(a, i, u, dn), ref, [x, idx, upd])


# --- reductions -------------------------------------------------------------------------------
RED = [("sum", lax.reduce_sum, np.sum, "float32"), ("max", lax.reduce_max, np.max, "float32"),
       ("min", lax.reduce_min, np.min, "int32"), ("prod", lax.reduce_prod, np.prod, "float32"),
       ("and", lax.reduce_and, np.all, "bool"), ("or", lax.reduce_or, np.any, "bool"),
       ("sumi", lax.reduce_sum, np.sum, "int32"), ("maxu", lax.reduce_max, np.max, "uint8")]


@pytest.mark.parametrize("name,fn,ref,dtype", RED, ids=[r[0] for r in RED])
@pytest.mark.parametrize("axes", [(0,), (1, 2), (0, 1, 2), ()])
def test_reductions(name, fn, ref, dtype, axes, rng):
    x = rand(rng, (2, 3, 4), dtype)
    if name == "prod":
        x = (np.abs(x) * 0.5 + 0.5).astype(dtype)
    check(lambda a: fn(a, axes), lambda a: ref(a, axis=axes).astype(a.dtype), [x], rtol=1e-5)


def test_reduce_max_nan_and_empty():
    x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]], np.float32)
    check(lambda a: lax.reduce_max(a, (1,)), lambda a: np.max(a, 1), [x])
    check(lambda a: lax.reduce_min(a, (1,)), lambda a: np.min(a, 1), [x])
    e = np.zeros((0, 3), np.float32)
    check(lambda a: lax.reduce_sum(a, (0,)), lambda a: np.sum(a, 0), [e])
    check(lambda a: lax.reduce_max(a, (0,)), lambda a: np.full(3, -np.inf, np.float32), [e])


@pytest.mark.parametrize("kind", ["max", "min"])
def test_argmax_argmin_ties_and_nan(kind):
    fn, ref = (lax.argmax, np.argmax) if kind == "max" else (lax.argmin, np.argmin)
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, np.nan, 5.0, np.nan], [-1.0, -1.0, -1.0, -1.0],
                  [np.inf, 0.0, -np.inf, 7.0]], np.float32)
    for axis in (0, 1):
        check(lambda a, ax=axis: fn(a, ax), lambda a, ax=axis: ref(a, ax).astype(np.int32), [x])
    xi = np.array([[4, 4, 1], [0, 9, 9]], np.int32)
    check(lambda a: fn(a, 1), lambda a: ref(a, 1).astype(np.int32), [xi])
    xb = np.array([[False, True, True], [False, False, False]])
    check(lambda a: fn(a, 1), lambda a: ref(a, 1).astype(np.int32), [xb])


def test_argmax_errors():
    with pytest.raises(ValueError, match=r"argmax.*empty.*f32\[0,3\]"):
        lax.argmax(np.zeros((0, 3), np.float32), 0)


def _rev(fn):
    return lambda a, axis: np.flip(fn(np.flip(a, axis), axis=axis), axis)


CUM = [("cumsum", lax.cumsum, np.cumsum), ("cumprod", lax.cumprod, np.cumprod),
       ("cummax", lax.cummax, np.maximum.accumulate), ("cummin", lax.cummin,
                                                       np.minimum.accumulate)]


@pytest.mark.parametrize("name,fn,ref", CUM, ids=[c[0] for c in CUM])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_cumulative(name, fn, ref, reverse, dtype, rng):
    x = rand(rng, (3, 5), dtype)
    if name == "cumprod":
        x = (np.sign(x) + (x == 0)).astype(dtype) * (2 if dtype == "int32" else 1.5)
    for axis in (0, 1):
        r = _rev(ref) if reverse else (lambda a, axis, ref=ref: ref(a, axis=axis))
        check(lambda a, ax=axis: fn(a, axis=ax, reverse=reverse),
              lambda a, ax=axis: r(a, ax).astype(a.dtype), [x], rtol=1e-5)


# --- dot_general ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "int32", "bfloat16"])
def test_dot_general(dtype, rng):
    tol = 2e-2 if dtype == "bfloat16" else 1e-5
    a, b = rand(rng, (3, 4), dtype), rand(rng, (4, 5), dtype)
    check(lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ()))),
          lambda x, y: (x.astype(np.float32) @ y.astype(np.float32)).astype(dtype),
          [a, b], rtol=tol, atol=tol)
    # batch dims in the middle of lhs and first in rhs, contracting two axes
    x, y = rand(rng, (2, 3, 4, 5), dtype), rand(rng, (3, 5, 2, 6), dtype)
    check(lambda p, q: lax.dot_general(p, q, (((0, 3), (2, 1)), ((1,), (0,)))),
          lambda p, q: np.einsum("aibc,icaj->ibj", p.astype(np.float32),
                                 q.astype(np.float32)).astype(dtype), [x, y], rtol=tol, atol=tol)


def test_dot_and_preferred_type(rng):
    a, b = rand(rng, (3,), "float32"), rand(rng, (3, 2), "float32")
    check(lax.dot, lambda x, y: x @ y, [a, b], rtol=1e-5)
    ai, bi = rand(rng, (2, 3), "int8"), rand(rng, (3, 2), "int8")
    check(lambda x, y: lax.dot(x, y, preferred_element_type=np.int32),
          lambda x, y: x.astype(np.int32) @ y.astype(np.int32), [ai, bi])


def test_structural_errors():
    f = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match=r"lax\.reshape.*f32\[2,3\]"):
        lax.reshape(f, (4, 2))
    with pytest.raises(TypeError, match=r"lax\.transpose"):
        lax.transpose(f, (0, 0))
    with pytest.raises(TypeError, match=r"lax\.concatenate.*f32\[2,3\].*f32\[2,2\]"):
        lax.concatenate([f, np.ones((2, 2), np.float32)], 0)
    with pytest.raises(TypeError, match=r"lax\.dot_general.*f32\[2,3\].*f32\[2,3\]"):
        lax.dot_general(f, f, (((1,), (0,)), ((), ())))
    with pytest.raises(TypeError, match=r"lax\.broadcast_in_dim.*f32\[2,3\]"):
        lax.broadcast_in_dim(f, (3, 3), (0, 1))
    with pytest.raises(TypeError, match=r"lax\.squeeze.*f32\[2,3\]"):
        lax.squeeze(f, (0,))
    with pytest.raises(TypeError, match=r"lax\.slice"):
        lax.slice(f, (0, 0), (3, 3))
    with pytest.raises(TypeError, match=r"lax\.dynamic_slice.*f32\[2,3\]"):
        lax.dynamic_slice(f, (0,), (1,))
    with pytest.raises(TypeError, match=r"lax\.pad.*padding_value"):
        lax.pad(f, np.int32(0), [(0, 0, 0), (0, 0, 0)])
    with pytest.raises(TypeError, match=r"lax\.gather.*indices"):
        lax.gather(f, np.zeros((2, 1), np.float32), ROWS, (1, 3))
    with pytest.raises(TypeError, match=r"lax\.scatter.*updates"):
        lax.scatter_add(f, np.zeros((2, 1), np.int32), np.ones((2, 3), np.int32), SCAT)
    with pytest.raises(TypeError, match=r"lax\.cumsum.*axis 5"):
        lax.cumsum(f, axis=5)


@pytest.mark.parametrize("k, widened", [(3, True), (5, True), (4, False), (32, False)])
def test_int8_products_with_a_wider_accumulator_on_gpu(k, widened):
    # XLA:GPU doubled an int8 (2, 3) @ (3, 2) -> int32 product; off the CPU, operands of a
    # product whose contracted size is not a multiple of 4 are widened first
    from funcgrad.lowering import mlir
    a, b = np.ones((2, k), np.int8), np.ones((k, 2), np.int8)
    f = lambda x, y: lax.dot(x, y, preferred_element_type=np.int32)
    closed = funcgrad.make_jaxpr(f)(a, b)
    for platform, want in (("cuda", widened), ("cpu", False)):
        module, ctx = mlir.lower_closed_jaxpr(closed, platform=platform)
        with ctx:
            text = str(module)
        dot = next(ln for ln in text.splitlines() if "stablehlo.dot_general" in ln)
        assert ("tensor<2x%dxi32>" % k in dot) is want, (platform, dot)
    np.testing.assert_array_equal(np.asarray(funcgrad.jit(f)(a, b)), np.full((2, 2), k))
