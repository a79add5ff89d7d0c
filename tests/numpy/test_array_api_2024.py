"""Array API standard 2024.12 behaviour that the official suite (data-apis/array-api-tests)
checks: complex special values, signatures, finfo/iinfo, the 2024.12 additions. Values come
from the standard's tables or from NumPy."""
import inspect
import math

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp

INF, NAN, PI = math.inf, math.nan, math.pi


def _same(got, want):
    """Equal parts, NaN equal to NaN, and the sign of zeros and infinities compared."""
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        if math.isnan(w):
            if not math.isnan(g):
                return False
        elif g != w or (w == 0 and math.copysign(1, g) != math.copysign(1, w)):
            return False
    return True


# (function, input, result) rows of the standard's special-case tables that XLA's complex
# kernels alone get wrong.
SPECIAL = [
    ("acos", complex(0.0, NAN), complex(PI / 2, NAN)),
    ("acos", complex(-0.0, NAN), complex(PI / 2, NAN)),
    ("acos", complex(2.0, NAN), complex(NAN, NAN)),
    ("acosh", complex(0.0, NAN), complex(NAN, PI / 2)),
    ("acosh", complex(1e30, NAN), complex(NAN, NAN)),
    ("asinh", complex(1e30, NAN), complex(NAN, NAN)),
    ("asinh", complex(NAN, 2.0), complex(NAN, NAN)),
    ("asinh", complex(NAN, 0.0), complex(NAN, 0.0)),
    ("atanh", complex(0.0, NAN), complex(0.0, NAN)),
    ("atanh", complex(3.0, NAN), complex(NAN, NAN)),
    ("atanh", complex(INF, NAN), complex(0.0, NAN)),
    ("atanh", complex(NAN, 1.0), complex(NAN, NAN)),
    ("atanh", complex(NAN, NAN), complex(NAN, NAN)),
    ("cosh", complex(0.0, INF), complex(NAN, 0.0)),
    ("cosh", complex(0.0, NAN), complex(NAN, 0.0)),
    ("cosh", complex(INF, INF), complex(INF, NAN)),
    ("cosh", complex(INF, NAN), complex(INF, NAN)),
    ("sinh", complex(0.0, INF), complex(0.0, NAN)),
    ("sinh", complex(0.0, NAN), complex(0.0, NAN)),
    ("sinh", complex(INF, INF), complex(INF, NAN)),
    ("sinh", complex(INF, NAN), complex(INF, NAN)),
    ("tanh", complex(0.0, INF), complex(0.0, NAN)),
    ("tanh", complex(0.0, NAN), complex(0.0, NAN)),
    ("exp", complex(-INF, INF), complex(0.0, 0.0)),
    ("exp", complex(INF, INF), complex(INF, NAN)),
    ("exp", complex(-INF, NAN), complex(0.0, 0.0)),
    ("exp", complex(INF, NAN), complex(INF, NAN)),
    ("exp", complex(0.0, -0.0), complex(1.0, -0.0)),
    ("expm1", complex(-INF, INF), complex(-1.0, 0.0)),
    ("expm1", complex(INF, INF), complex(INF, NAN)),
    ("expm1", complex(-INF, NAN), complex(-1.0, 0.0)),
    ("expm1", complex(INF, NAN), complex(INF, NAN)),
    ("log", complex(INF, NAN), complex(INF, NAN)),
    ("log", complex(-INF, NAN), complex(INF, NAN)),
    ("log", complex(NAN, INF), complex(INF, NAN)),
    ("log1p", complex(INF, NAN), complex(INF, NAN)),
    ("log1p", complex(NAN, INF), complex(INF, NAN)),
    ("sqrt", complex(-INF, NAN), complex(NAN, INF)),
    ("sqrt", complex(INF, NAN), complex(INF, NAN)),
    ("sqrt", complex(NAN, INF), complex(INF, INF)),
    ("sqrt", complex(-4.0, -0.0), complex(0.0, -2.0)),
    ("sign", complex(0.0, 0.0), complex(0.0, 0.0)),
    ("sign", complex(-0.0, -0.0), complex(0.0, 0.0)),
    ("sign", complex(NAN, 1.0), complex(NAN, NAN)),
]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_special_values(dtype, x64):
    for name in sorted({row[0] for row in SPECIAL}):
        rows = [row for row in SPECIAL if row[0] == name]
        z = np.asarray([r[1] for r in rows], dtype)
        got = np.asarray(getattr(jnp, name)(jnp.asarray(z)))
        for (_, zi, want), g in zip(rows, got):
            want = complex(np.asarray(want, dtype))     # pi/2 rounded to the dtype
            assert _same(complex(g), want), f"{name}({zi}) = {g}, the standard says {want}"


def test_complex_ordinary_values_match_numpy(x64):
    rng = np.random.default_rng(0)
    z = rng.normal(size=64) * 3 + 1j * rng.normal(size=64) * 3
    for name, ref in [("exp", np.exp), ("expm1", np.expm1), ("sinh", np.sinh),
                      ("cosh", np.cosh), ("tanh", np.tanh), ("sqrt", np.sqrt), ("log", np.log),
                      ("log1p", np.log1p), ("acos", np.arccos), ("acosh", np.arccosh),
                      ("asinh", np.arcsinh), ("atanh", np.arctanh), ("sign", np.sign)]:
        np.testing.assert_allclose(np.asarray(getattr(jnp, name)(jnp.asarray(z))), ref(z),
                                   rtol=1e-12, atol=1e-14, err_msg=name)


def test_real_sign_of_zero_and_unsigned():
    got = np.asarray(jnp.sign(jnp.asarray([-0.0, 0.0, -2.0, 3.0, np.nan])))
    np.testing.assert_array_equal(got, [0.0, 0.0, -1.0, 1.0, np.nan])
    assert not np.signbit(got[0])
    np.testing.assert_array_equal(np.asarray(jnp.sign(jnp.asarray([0, 7], jnp.uint8))), [0, 1])
    assert jnp.sign(jnp.asarray([0, 7], jnp.uint8)).dtype == np.uint8


@pytest.mark.parametrize("name", ["arange", "asarray", "empty", "empty_like", "eye", "full",
                                  "full_like", "linspace", "ones", "ones_like", "zeros",
                                  "zeros_like", "from_dlpack"])
def test_creation_functions_take_device(name):
    assert "device" in inspect.signature(getattr(jnp, name)).parameters
    dev = jnp.__array_namespace_info__().default_device()
    args = {"arange": (3,), "asarray": ([1, 2],), "empty": ((2,),), "eye": (2,),
            "full": ((2,), 5.0), "linspace": (0.0, 1.0, 3), "ones": ((2,),), "zeros": ((2,),),
            "full_like": (jnp.ones(2), 3.0), "from_dlpack": (np.arange(3.0),)}
    out = getattr(jnp, name)(*args.get(name, (jnp.ones(2),)), device=dev)
    assert out.device == dev


def test_signature_names_of_the_standard():
    clip = inspect.signature(jnp.clip).parameters
    assert list(clip)[1:3] == ["min", "max"]
    assert "copy" in inspect.signature(jnp.reshape).parameters
    assert "copy" in inspect.signature(jnp.from_dlpack).parameters
    x = jnp.arange(6)
    np.testing.assert_array_equal(np.asarray(jnp.clip(x, 1, 3)), np.clip(np.arange(6), 1, 3))
    np.testing.assert_array_equal(np.asarray(jnp.clip(x, min=2)), np.clip(np.arange(6), 2, None))
    np.testing.assert_array_equal(np.asarray(jnp.clip(x, a_max=2)), np.clip(np.arange(6), None, 2))
    with pytest.raises(TypeError, match="both max and a_max"):
        jnp.clip(x, max=1, a_max=2)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "bfloat16"])
def test_finfo_fields_are_python_numbers(dtype):
    info = jnp.finfo(getattr(jnp, dtype))
    real = {"complex64": "float32", "complex128": "float64"}.get(dtype, dtype)
    ref = np.finfo(np.dtype(real)) if real != "bfloat16" else None
    assert info.dtype == np.dtype(getattr(jnp, real))
    for field in ("eps", "max", "min", "smallest_normal"):
        assert type(getattr(info, field)) is float
        if ref is not None:
            assert getattr(info, field) == float(getattr(ref, field))
    assert type(info.bits) is int and info.bits == {"bfloat16": 16}.get(dtype, ref and ref.bits)
    assert jnp.finfo(jnp.ones(2, jnp.float32)).eps == float(np.finfo(np.float32).eps)
    assert info.nmant == (7 if dtype == "bfloat16" else ref.nmant)    # the rest of finfo


def test_iinfo_and_bad_kinds():
    info = jnp.iinfo(jnp.uint16)
    assert (info.min, info.max, info.bits, info.dtype) == (0, 65535, 16, np.uint16)
    assert jnp.iinfo(jnp.arange(3, dtype=jnp.int8)).min == -128
    with pytest.raises(ValueError, match="finfo: int32 is not a floating"):
        jnp.finfo(jnp.int32)
    with pytest.raises(ValueError, match="iinfo: float32 is not an integer"):
        jnp.iinfo(jnp.float32)


def test_from_dlpack_copy():
    host = np.arange(4.0, dtype=np.float32)
    for copy in (None, True, False):
        out = jnp.from_dlpack(host, copy=copy)
        np.testing.assert_array_equal(np.asarray(out), host)
    same = jnp.from_dlpack(jnp.arange(3), copy=True)
    np.testing.assert_array_equal(np.asarray(same), [0, 1, 2])
    with pytest.raises(ValueError, match="copy must be"):
        jnp.from_dlpack(host, copy="yes")


def test_expand_dims_out_of_bounds_is_an_index_error():
    with pytest.raises(IndexError, match="expand_dims"):
        jnp.expand_dims(jnp.ones(()), -2)
    assert jnp.expand_dims(jnp.ones(3), -2).shape == (1, 3)


@pytest.mark.parametrize("offset", [-4, -2, -1, 0, 1, 3, 5])
def test_diagonal_matches_numpy(offset):
    a = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    for axes in ((1, 2), (2, 1), (0, 2)):
        np.testing.assert_array_equal(np.asarray(jnp.diagonal(a, offset, *axes)),
                                      np.diagonal(a, offset, *axes))
    b = np.array([[True, False], [False, True]])
    got = jnp.linalg.diagonal(jnp.asarray(b), offset=min(offset, 1))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(got), np.diagonal(b, min(offset, 1)))


def test_vecdot_dtype_and_shapes():
    u = np.array([[200, 3], [1, 2]], np.uint8)
    out = jnp.vecdot(jnp.asarray(u), jnp.asarray(u))
    assert out.dtype == np.uint8                       # no widening, wraps as uint8 does
    np.testing.assert_array_equal(np.asarray(out), (u * u).sum(-1, dtype=np.uint8))
    z = np.array([1 + 2j, 3 - 1j], np.complex64)
    np.testing.assert_allclose(np.asarray(jnp.linalg.vecdot(jnp.asarray(z), jnp.asarray(z))),
                               np.vdot(z, z))
    with pytest.raises(ValueError, match="same size along axis -1"):
        jnp.vecdot(jnp.ones(0, jnp.uint8), jnp.ones(1, jnp.uint8))


def test_boolean_masks_zero_d_empty_and_mismatched():
    a = np.arange(6).reshape(2, 3)
    x = jnp.asarray(a)
    for key in (True, False, np.bool_(True)):
        np.testing.assert_array_equal(np.asarray(x[key]), a[key])
    np.testing.assert_array_equal(np.asarray(x[jnp.asarray(False)]), a[np.asarray(False)])
    assert jnp.asarray(5)[jnp.asarray(True)].shape == (1,)
    z = np.zeros((0, 2))
    assert jnp.asarray(z)[jnp.zeros(0, bool)].shape == z[np.zeros(0, bool)].shape
    np.testing.assert_array_equal(np.asarray(x[..., jnp.asarray([True, False, True])]),
                                  a[..., [True, False, True]])
    np.testing.assert_array_equal(np.asarray(x[x > 2]), a[a > 2])
    for bad in (np.ones(3, bool), np.ones((2, 2), bool)):
        with pytest.raises(IndexError, match="boolean index of shape"):
            x[jnp.asarray(bad)]
        with pytest.raises(IndexError):
            a[bad]                                      # NumPy agrees


@pytest.mark.parametrize("n,m,k", [(0, None, 2**31), (3, 4, 2**40), (3, 2, -2**40), (3, 4, 1),
                                   (4, 3, -2)])
def test_eye_any_offset(n, m, k):
    np.testing.assert_array_equal(np.asarray(jnp.eye(n, m, k=k)), np.eye(n, m, k=k))


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "uint32", "bool"])
def test_sum_prod_widen_to_the_default_integer(dtype, x64):
    a = np.ones((2, 3), dtype)
    for name in ("sum", "prod"):
        got = getattr(jnp, name)(jnp.asarray(a))
        assert got.dtype == getattr(np, name)(a).dtype, name    # NumPy: int64/uint64
    assert jnp.cumulative_sum(jnp.asarray(a), axis=1).dtype == np.cumsum(a, 1).dtype
    assert jnp.sum(jnp.asarray(a), dtype=jnp.int16).dtype == np.int16


def test_sum_keeps_int32_without_x64():
    assert jnp.sum(jnp.ones(3, jnp.int32)).dtype == np.int32
    assert jnp.sum(jnp.ones(3, jnp.uint8)).dtype == np.uint32


@pytest.mark.parametrize("shape,repeats,axis", [
    ((0,), np.array([1]), 0), ((3,), np.array([2]), 0), ((2, 3), np.array([1, 0, 2]), 1),
    ((2, 3), np.array(2), None), ((2, 0), np.array([3, 1]), 0), ((3,), np.array([0, 0, 0]), 0),
    ((2, 2), 0, 1)])
def test_repeat_matches_numpy(shape, repeats, axis):
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    got = jnp.repeat(jnp.asarray(a), repeats if isinstance(repeats, int) else
                     jnp.asarray(repeats), axis=axis)
    np.testing.assert_array_equal(np.asarray(got), np.repeat(a, repeats, axis=axis))
    assert got.dtype == np.float32
    with pytest.raises(ValueError, match="repeats must be >= 0"):
        jnp.repeat(jnp.asarray(a), -1)


def test_eager_int_index_reads_rows():
    a = np.arange(12.0).reshape(4, 3)
    x = jnp.asarray(a)
    for i in range(-4, 4):
        np.testing.assert_array_equal(np.asarray(x[i]), a[i])
        assert float(x[i][1]) == a[i][1]
    np.testing.assert_array_equal(np.asarray(x[4]), a[3])          # clamped, as JAX
    with funcgrad.config.override("debug_checks", True):
        with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
            x[4]
    assert funcgrad.jit(lambda v: v[-1])(x).shape == (3,)          # traced: the general path
    np.testing.assert_array_equal(np.asarray(funcgrad.grad(lambda v: v[1].sum())(x)),
                                  np.eye(4)[1][:, None] * np.ones((4, 3)))


def test_take_along_axis_default_axis_and_empty_indices():
    a = np.array([[3, 1, 2], [0, 5, 4]])
    idx = np.argsort(a, axis=-1)
    np.testing.assert_array_equal(np.asarray(jnp.take_along_axis(jnp.asarray(a),
                                                                 jnp.asarray(idx))),
                                  np.take_along_axis(a, idx, axis=-1))
    got = jnp.take_along_axis(jnp.asarray([False]), jnp.asarray([], jnp.int32))
    assert got.shape == (0,) and got.dtype == np.bool_
