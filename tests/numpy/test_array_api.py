"""Array API standard (2023.12 names; the version declared is 2024.12): dtype functions,
inspection API, renamed functions, promotion."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp


def test_version_and_namespace():
    assert jnp.__array_api_version__ == "2024.12"
    x = jnp.ones(3)
    assert x.__array_namespace__() is jnp


def test_inspection_api():
    info = jnp.__array_namespace_info__()
    caps = info.capabilities()
    assert caps == {"boolean indexing": False, "data-dependent shapes": False,
                    "max dimensions": 32}
    assert info.default_device() == funcgrad.devices()[0]
    assert list(info.devices()) == list(funcgrad.devices())
    d = info.default_dtypes()
    assert d["real floating"] == np.float32 and d["integral"] == np.int32
    assert d["complex floating"] == np.complex64 and d["indexing"] == np.int32
    ints = info.dtypes(kind="integral")
    assert set(ints) == {"int8", "int16", "int32", "uint8", "uint16", "uint32"}
    assert set(info.dtypes(kind=("bool", "complex floating"))) == {"bool", "complex64"}
    assert "float32" in info.dtypes() and "float64" not in info.dtypes()


def test_inspection_api_x64(x64):
    info = jnp.__array_namespace_info__()
    assert info.default_dtypes()["real floating"] == np.float64
    assert {"float64", "int64", "uint64", "complex128"} <= set(info.dtypes())


@pytest.mark.parametrize("dtype,kind,expected", [
    (jnp.float32, "real floating", True), (jnp.float32, "integral", False),
    (jnp.int8, "signed integer", True), (jnp.uint8, "signed integer", False),
    (jnp.uint16, "unsigned integer", True), (jnp.bool, "bool", True),
    (jnp.bool, "numeric", False), (jnp.complex64, "numeric", True),
    (jnp.complex64, "complex floating", True), (jnp.int32, ("bool", "integral"), True),
    (jnp.float16, jnp.float16, True), (jnp.float16, jnp.float32, False),
    (jnp.bfloat16, "real floating", True),
])
def test_isdtype(dtype, kind, expected):
    assert jnp.isdtype(dtype, kind) is expected


def test_isdtype_bad_kind():
    with pytest.raises(ValueError, match="unknown kind"):
        jnp.isdtype(jnp.float32, "floaty")


@pytest.mark.parametrize("src,dst", [(np.int8, np.float32), (np.float32, np.int32),
                                     (np.uint8, np.int16), (np.int32, np.int16),
                                     (np.bool_, np.int8), (np.float32, np.complex64)])
def test_can_cast(src, dst):
    assert jnp.can_cast(src, dst) == np.can_cast(src, dst)
    assert jnp.can_cast(jnp.zeros(2, src), dst) == np.can_cast(src, dst)


@pytest.mark.parametrize("src,dst", [(np.float32, np.int32), (np.int32, np.float32),
                                     (np.float32, np.bool_), (np.int32, np.uint8),
                                     (np.complex64, np.float32), (np.bool_, np.float32)])
def test_astype(src, dst):
    host = np.array([1.7, -2.2, 0.0, 3.5], np.float64)
    if src == np.complex64:
        host = host + 1j
    host = host.astype(src)
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = host.astype(dst) if not (src == np.int32 and dst == np.uint8) else \
                host.astype(dst)
    out = jnp.astype(jnp.asarray(host), dst)
    assert out.dtype == dst
    np.testing.assert_array_equal(np.asarray(out), expected)


@pytest.mark.parametrize("name,npname", [
    ("acos", "arccos"), ("acosh", "arccosh"), ("asin", "arcsin"), ("asinh", "arcsinh"),
    ("atan", "arctan"), ("atanh", "arctanh")])
def test_renamed_unary(name, npname):
    x = np.array([0.1, 0.5, 0.9], np.float32) + (1.0 if name == "acosh" else 0.0)
    np.testing.assert_allclose(np.asarray(getattr(jnp, name)(x)), getattr(np, npname)(x),
                               rtol=2e-6)


def test_renamed_binary_and_bitwise():
    np.testing.assert_allclose(jnp.atan2(jnp.array([1.0, -1.0]), jnp.array([-1.0, -1.0])),
                               np.arctan2([1.0, -1.0], [-1.0, -1.0]), rtol=1e-6)
    a = np.array([1, 2, -8], np.int32)
    np.testing.assert_array_equal(jnp.bitwise_left_shift(a, 2), a << 2)
    np.testing.assert_array_equal(jnp.bitwise_right_shift(a, 1), a >> 1)
    np.testing.assert_array_equal(jnp.bitwise_invert(a), ~a)


def test_unstack():
    x = np.arange(24).reshape(2, 3, 4)
    for axis in (0, 1, -1):
        parts = jnp.unstack(jnp.asarray(x), axis=axis)
        expected = [np.take(x, i, axis=axis) for i in range(x.shape[axis])]
        assert len(parts) == len(expected)
        for p, e in zip(parts, expected):
            np.testing.assert_array_equal(p, e)


def test_cumulative_sum_include_initial():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int8)
    out = jnp.cumulative_sum(x, axis=1, include_initial=True)
    np.testing.assert_array_equal(out, np.concatenate([np.zeros((2, 1)), np.cumsum(x, 1)], 1))
    assert out.dtype == np.int32
    out = jnp.cumulative_sum(jnp.array([1.0, 2.0]), include_initial=True)
    np.testing.assert_array_equal(out, [0.0, 1.0, 3.0])
    np.testing.assert_array_equal(jnp.cumulative_prod(jnp.array([2, 3]), include_initial=True),
                                  [1, 2, 6])
    with pytest.raises(ValueError, match="axis must be given"):
        jnp.cumulative_sum(jnp.ones((2, 2)))
    assert jnp.cumulative_sum(jnp.array([1, 2], jnp.uint8)).dtype == np.uint32


def test_unique_family_eager():
    x = np.array([[3, 1, 3], [2, 1, 7]], np.int32)
    v, i, inv, c = jnp.unique_all(x)
    ev, ei, einv, ec = np.unique(x.ravel(), return_index=True, return_inverse=True,
                                 return_counts=True)
    np.testing.assert_array_equal(v, ev)
    np.testing.assert_array_equal(i, ei)
    np.testing.assert_array_equal(inv, einv.reshape(x.shape))
    np.testing.assert_array_equal(c, ec)
    r = jnp.unique_counts(x)
    np.testing.assert_array_equal(r.values, ev)
    np.testing.assert_array_equal(r.counts, ec)
    r = jnp.unique_inverse(x)
    np.testing.assert_array_equal(np.asarray(r.values)[np.asarray(r.inverse_indices)], x)
    np.testing.assert_array_equal(jnp.unique_values(x), ev)


def test_unique_under_jit_needs_size():
    with pytest.raises(TypeError, match="size=N"):
        funcgrad.jit(jnp.unique_values)(jnp.array([1, 2, 2]))


@pytest.mark.parametrize("a,b", [
    (np.int8, np.uint8), (np.int8, np.int16), (np.uint8, np.int32), (np.int32, np.float32),
    (np.float16, np.float32), (np.bool_, np.int8), (np.float32, np.complex64),
    (np.uint16, np.int16), (np.uint32, np.int8)])
def test_promotion_of_binary_ops(a, b):
    x, y = jnp.ones(2, a), jnp.ones(2, b)
    expected = jnp.result_type(a, b)
    for f in (jnp.add, jnp.multiply, jnp.maximum):
        assert f(x, y).dtype == expected
    # within a kind, the array API's table agrees with NumPy's
    if np.dtype(a).kind == np.dtype(b).kind:
        assert expected == np.result_type(a, b)


def test_python_scalars_are_weak():
    x = jnp.ones(2, jnp.int8)
    assert (x + 1).dtype == np.int8
    assert (x * 2.5).dtype == jnp.result_type(np.int8, 2.5)
    assert (jnp.ones(2, jnp.float16) + 1.0).dtype == np.float16
    assert (jnp.ones(2, jnp.uint8) + 3).dtype == np.uint8


def test_finfo_iinfo():
    assert jnp.finfo(jnp.float32).eps == np.finfo(np.float32).eps
    assert jnp.finfo(jnp.bfloat16).bits == 16
    assert jnp.iinfo(jnp.int16).max == 32767
    assert jnp.iinfo(jnp.uint8).min == 0


def test_from_dlpack_roundtrip():
    x = jnp.arange(4.0)
    y = jnp.from_dlpack(x)
    np.testing.assert_array_equal(y, np.arange(4.0))


def test_unique_family_with_size_under_jit():
    x = np.array([[3, 1, 3], [2, 1, 7]], np.int32)
    r = funcgrad.jit(lambda x: jnp.unique_all(x, size=5, fill_value=0))(x)
    ev, ei, einv, ec = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(r.values, np.concatenate([ev, [0]]))
    np.testing.assert_array_equal(r.indices[:4], ei)
    np.testing.assert_array_equal(r.inverse_indices, einv.reshape(x.shape))
    np.testing.assert_array_equal(r.counts, np.concatenate([ec, [0]]))
    v = funcgrad.jit(lambda x: jnp.unique_values(x, size=3))(x)
    np.testing.assert_array_equal(v, ev[:3])


@pytest.mark.parametrize("name", [
    "floor", "ceil", "trunc", "rint", "round", "fix", "real", "conj", "positive", "abs",
    "clip", "nan_to_num", "ravel", "squeeze", "transpose", "astype", "nansum", "isreal",
    "atleast_1d", "copy"])
def test_numpy_input_gives_funcgrad_arrays(name):
    # identity paths (floor of ints, squeeze without size-1 axes...) must not hand back NumPy
    fn = getattr(jnp, name)
    for x in (np.array([1, 2, 3], np.int64), np.array([1.5, -2.0]), np.array([1, 2], np.uint8)):
        out = fn(x, x.dtype) if name == "astype" else fn(x)
        assert isinstance(out, funcgrad.Array), (name, x.dtype, type(out))
        assert out.dtype == jnp.result_type(x.dtype) or name in ("nansum", "isreal")


# The array API standard's required promotions (mixed kinds are left to implementations).
STANDARD_PROMOTIONS = [
    ("int8", "uint8", "int16"), ("int8", "uint16", "int32"), ("int8", "uint32", "int64"),
    ("int16", "uint8", "int16"), ("int32", "uint16", "int32"), ("int64", "uint32", "int64"),
    ("uint8", "uint16", "uint16"), ("uint16", "uint64", "uint64"), ("int8", "int64", "int64"),
    ("int16", "int32", "int32"), ("float32", "float64", "float64"),
    ("complex64", "float64", "complex128"), ("complex64", "complex128", "complex128"),
    ("float32", "complex64", "complex64"), ("bool", "bool", "bool"),
]


@pytest.mark.parametrize("a,b,expected", STANDARD_PROMOTIONS)
def test_standard_promotion_table(a, b, expected, x64):
    assert jnp.result_type(a, b) == np.dtype(expected)
    assert jnp.result_type(b, a) == np.dtype(expected)
    out = jnp.add(jnp.zeros(2, a), jnp.zeros(2, b)) if expected != "bool" else \
        jnp.logical_and(jnp.zeros(2, a), jnp.zeros(2, b))
    assert out.dtype == np.dtype(expected)


def test_array_object_api():
    x = jnp.ones((2, 3))
    assert x.__array_namespace__(api_version="2023.12") is jnp
    with pytest.raises(ValueError, match="api_version"):
        x.__array_namespace__(api_version="1999.01")
    y = x.to_device(funcgrad.devices()[0])
    np.testing.assert_array_equal(y, np.ones((2, 3)))
    assert y.device == funcgrad.devices()[0]
    assert x.mT.shape == (3, 2) and x.ndim == 2 and x.size == 6
    z = x
    z += 1  # in-place operators rebind (arrays are immutable)
    np.testing.assert_array_equal(x, np.ones((2, 3)))
    np.testing.assert_array_equal(z, np.full((2, 3), 2.0))
