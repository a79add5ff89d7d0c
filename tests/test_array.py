"""funcgrad.Array: attributes, operators, indexing, conversions, DLPack, repr and devices."""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp


def _host_pointer(array):
    """Address of an Array's CPU buffer (its host view shares memory; no jax import)."""
    return np.asarray(array).ctypes.data



def test_attributes():
    x = jnp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert isinstance(x, funcgrad.Array)
    assert x.shape == (2, 3) and x.ndim == 2 and x.size == 6 and x.dtype == np.float32
    assert x.T.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(x.T), np.arange(6).reshape(2, 3).T)
    assert x.nbytes == 24
    assert len(x) == 2
    with pytest.raises(TypeError, match="0-d|unsized"):
        len(jnp.ones(()))


BINOPS = ["__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__pow__",
          "__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__lt__", "__le__", "__gt__",
          "__ge__", "__eq__", "__ne__"]


@pytest.mark.parametrize("op", BINOPS)
def test_operators_broadcasting(op, rng):
    a = (rng.random((3, 1, 4)) + 0.5).astype(np.float32)
    b = (rng.random((2, 1)) + 0.5).astype(np.float32)
    want = getattr(a, op)(b)
    got = getattr(jnp.asarray(a), op)(jnp.asarray(b))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    assert got.dtype == want.dtype
    # with a NumPy array and a Python scalar on the other side
    got2 = getattr(jnp.asarray(a), op)(b)
    np.testing.assert_allclose(np.asarray(got2), want, rtol=1e-5)
    got3 = getattr(jnp.asarray(a), op)(2.0)
    np.testing.assert_allclose(np.asarray(got3), getattr(a, op)(np.float32(2.0)), rtol=1e-5)


def test_int_operators_and_unary():
    a = np.array([[7, -7, 3], [2, -9, 0]], np.int32)
    b = np.array([2, 3, -4], np.int32)
    x, y = jnp.asarray(a), jnp.asarray(b)
    for op in ("__floordiv__", "__mod__", "__and__", "__or__", "__xor__", "__lshift__"):
        np.testing.assert_array_equal(np.asarray(getattr(x, op)(abs(y))), getattr(a, op)(abs(b)))
    np.testing.assert_array_equal(np.asarray(x >> 1), a >> 1)
    np.testing.assert_array_equal(np.asarray(-x), -a)
    np.testing.assert_array_equal(np.asarray(abs(x)), abs(a))
    np.testing.assert_array_equal(np.asarray(~x), ~a)
    np.testing.assert_allclose(np.asarray(x / y), a / b, rtol=1e-6)
    assert (x / y).dtype == np.float32
    np.testing.assert_array_equal(np.asarray(x ** 2), a ** 2)
    q, r = divmod(x, y)
    np.testing.assert_array_equal(np.asarray(q), a // b)
    np.testing.assert_array_equal(np.asarray(r), a % b)


def test_matmul_operator(rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(jnp.asarray(a) @ jnp.asarray(b)), a @ b, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(a @ jnp.asarray(b)), a @ b, rtol=1e-5)
    v = rng.standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(np.asarray(jnp.asarray(a) @ v), a @ v, rtol=1e-5)


def test_numpy_on_left_defers_to_array():
    a = np.ones(3, np.float32)
    out = a + jnp.ones(3)
    assert isinstance(out, funcgrad.Array)
    out = np.float32(2) * jnp.ones(3)
    assert isinstance(out, funcgrad.Array)


_X = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
INDICES = [
    0, -1, (1, 2), (-1, -2, -3, -4), slice(None), slice(1, None), slice(None, None, -1),
    (slice(None), slice(2, 0, -1)), (Ellipsis, 1), (0, Ellipsis, slice(1, 4, 2)),
    None, (None, 0, None), (Ellipsis, None), (slice(None), None, 1),
    np.array([1, 0, 1]), np.array([[0, 1], [1, 0]]), (slice(None), np.array([2, 0])),
    (np.array([0, 1]), np.array([2, 1])),                        # adjacent advanced
    (np.array([0, 1]), slice(None), np.array([3, 1])),           # non-adjacent advanced
    (0, slice(None), np.array([1, 3])),                          # int + array, separated
    (slice(None), 1, np.array([0, 2])),                          # int + array, adjacent
    (np.array([-1, 0]), Ellipsis, np.array([4, -5])),           # arrays around an Ellipsis
    (Ellipsis, np.array([[0], [3]]), np.array([1, 2])),           # broadcasting index arrays
    np.array([True, False]), (slice(None), np.array([True, False, True])),
    (1, slice(None, None, -2), None, np.array([0, 0, 3])),
    (slice(-2, None), slice(None, 1)), (slice(10, 20),), (slice(-10, 1),),
    np.int32(1), (np.int64(1), np.uint8(2)),
]


@pytest.mark.parametrize("index", INDICES, ids=[str(i).replace("\n", "") for i in INDICES])
def test_getitem_matches_numpy(index):
    x = jnp.asarray(_X)
    want = _X[index]
    got = x[index]
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), want)


def test_getitem_with_array_indices_and_under_jit():
    x = jnp.asarray(_X)
    i = jnp.asarray(np.array([1, 0, 2]))
    np.testing.assert_array_equal(np.asarray(x[:, i]), _X[:, [1, 0, 2]])
    f = funcgrad.jit(lambda a, k: a[k, ..., ::-1])
    np.testing.assert_array_equal(np.asarray(f(x, 1)), _X[1, ..., ::-1])
    np.testing.assert_array_equal(np.asarray(f(x, jnp.asarray(1))), _X[1, ..., ::-1])
    g = funcgrad.jit(lambda a, k: a[:, k])
    np.testing.assert_array_equal(np.asarray(g(x, i)), _X[:, [1, 0, 2]])
    # out-of-bounds traced indices clamp (as JAX), negative ones wrap
    np.testing.assert_array_equal(np.asarray(g(x, jnp.asarray(np.array([-1, 7])))),
                                  _X[:, [2, 2]])


def test_out_of_bounds_int_index_clamps_and_raises_with_debug_checks():
    # as JAX: a static int index clamps into its axis; the checking switch makes it raise
    np.testing.assert_array_equal(np.asarray(jnp.asarray(_X)[5]), _X[-1])
    with funcgrad.config.override("debug_checks", True):
        with pytest.raises(IndexError, match=r"index 5 is out of bounds for axis 0 with size 2"):
            jnp.asarray(_X)[5]


def test_iteration_and_conversions():
    x = jnp.asarray(np.array([[1.5, 2.0], [3.0, 4.0]], np.float32))
    rows = list(x)
    assert len(rows) == 2 and rows[1].shape == (2,)
    np.testing.assert_array_equal(np.asarray(rows[1]), [3.0, 4.0])
    assert x.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert x[0, 0].item() == 1.5 and x.item(1) == 2.0
    s = jnp.asarray(np.float32(2.5))
    assert float(s) == 2.5 and int(s) == 2 and bool(s) and complex(s) == 2.5
    assert isinstance(int(jnp.asarray(3)), int)
    assert [10, 20, 30][jnp.asarray(1)] == 20      # __index__
    with pytest.raises(ValueError, match="ambiguous"):
        bool(jnp.ones(2))
    with pytest.raises(TypeError, match="index"):
        [1, 2][jnp.asarray(1.0)]
    assert f"{s:.2f}" == "2.50"
    with pytest.raises(TypeError, match="immutable.*at"):
        x[0] = 1.0
    with pytest.raises(TypeError, match="unhashable"):
        hash(x)


def test_array_protocol_and_dtypes():
    a = np.arange(4, dtype=np.int32)
    x = jnp.asarray(a)
    np.testing.assert_array_equal(np.asarray(x), a)
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    np.testing.assert_array_equal(np.array(x, copy=True), a)
    assert np.add(x, 1).tolist() == [1, 2, 3, 4]
    for dt in (ml_dtypes.bfloat16, np.float16, np.uint8, np.bool_, np.complex64):
        v = np.asarray(jnp.ones(3, dt))
        assert v.dtype == np.dtype(dt) and v.tolist() == np.ones(3, dt).tolist()


def test_repr_like_numpy():
    assert repr(jnp.asarray(np.array([1.0, 2.0], np.float32))) == \
        "Array([1., 2.], dtype=float32)"
    assert repr(jnp.asarray(np.array([1, 2], np.int32))) == "Array([1, 2], dtype=int32)"
    assert repr(jnp.asarray(np.float32(3.0))) == "Array(3., dtype=float32)"
    r = repr(jnp.ones((2, 2), "bfloat16"))
    assert r == "Array([[1, 1],\n       [1, 1]], dtype=bfloat16)", r
    assert repr(jnp.asarray(np.array([True]))) == "Array([ True], dtype=bool)"
    assert str(jnp.asarray(np.array([1.0, 2.0], np.float32))) == "[1. 2.]"
    assert repr(jnp.ones((0, 2))) == "Array([], shape=(0, 2), dtype=float32)"
    assert repr(jnp.ones((0,), "int32")) == "Array([], dtype=int32)"
    assert "weak_type=True" in repr(funcgrad.lax.convert_element_type(1.0, "float32", True))


def test_dlpack_zero_copy_with_numpy(on_cpu):
    x = jnp.arange(6.0).reshape(2, 3)
    n = np.from_dlpack(x)
    np.testing.assert_array_equal(n, np.arange(6.0).reshape(2, 3))
    assert n.ctypes.data == _host_pointer(x)          # shared memory
    # XLA's CPU client shares host memory that is 64-byte aligned (and copies otherwise)
    raw = np.empty(8 * 4 + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    a = raw[off:off + 32].view(np.float32)
    a[:] = np.arange(8)
    y = funcgrad.from_dlpack(a)
    assert y.dtype == np.float32 and y.shape == (8,)
    np.testing.assert_array_equal(np.asarray(y), np.arange(8))
    assert _host_pointer(y) == a.ctypes.data          # shared memory
    a[0] = 42.0
    assert float(y[0]) == 42.0
    u = funcgrad.from_dlpack(raw[off + 4:off + 36].view(np.float32))  # misaligned: copied
    np.testing.assert_array_equal(np.asarray(u), raw[off + 4:off + 36].view(np.float32))
    z = funcgrad.from_dlpack(np.arange(4, dtype=np.int32).reshape(2, 2))
    assert (z * 2).tolist() == [[0, 2], [4, 6]]
    assert x.__dlpack_device__() == (1, 0)


def test_dlpack_non_contiguous_and_64bit():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    y = funcgrad.from_dlpack(np.ascontiguousarray(a))
    np.testing.assert_array_equal(np.asarray(y), a)
    d = funcgrad.from_dlpack(np.arange(3.0))                         # float64 narrows without x64
    assert d.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(d), [0.0, 1.0, 2.0])


def test_block_until_ready_device_backend(on_cpu):
    x = jnp.ones(3) * 2
    assert x.block_until_ready() is x
    assert x.is_ready()
    assert funcgrad.block_until_ready({"a": x})["a"] is x
    assert x.device == funcgrad.devices()[0]
    assert x.device.platform == "cpu"
    assert funcgrad.default_backend() == "cpu"
    assert funcgrad.device_count() >= 1
    y = funcgrad.device_put(np.arange(3), funcgrad.devices()[0])
    assert y.dtype == np.int32 and y.tolist() == [0, 1, 2]
    tree = funcgrad.device_put({"a": np.ones(2), "b": 3.0})
    assert isinstance(tree["a"], funcgrad.Array) and tree["b"].weak_type
    assert funcgrad.device_get({"a": x})["a"].tolist() == [2.0, 2.0, 2.0]
    import copy
    import pickle
    assert copy.deepcopy(x) is x
    np.testing.assert_array_equal(np.asarray(pickle.loads(pickle.dumps(x))), [2, 2, 2])


_TWO_DEVICES = r"""
import numpy as np, funcgrad, funcgrad.numpy as jnp
d0, d1 = funcgrad.devices()
x = funcgrad.device_put(np.arange(4.0), d1)
assert x.device == d1, x.device
y = x * 2 + 1                       # eager ops run where their operands live
assert y.device == d1
f = funcgrad.jit(lambda a: a.sum())
assert f(x).device == d1 and float(f(x)) == 6.0
assert f(jnp.ones(4)).device == d0
z = funcgrad.device_put(y, d0)
assert z.device == d0 and z.tolist() == [1.0, 3.0, 5.0, 7.0]
print("ok")
"""


def test_two_cpu_devices_subprocess():
    env = dict(os.environ, FUNCGRAD_CPU_DEVICES="2", FUNCGRAD_PLATFORM="cpu")
    out = subprocess.run([sys.executable, "-c", _TWO_DEVICES], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


def test_errors_name_function_and_shapes():
    with pytest.raises(ValueError, match=r"funcgrad\.numpy\.add.*\(2, 3\).*\(4,\)"):
        jnp.ones((2, 3)) + jnp.ones(4)
    with pytest.raises((TypeError, ValueError), match=r"matmul.*\(2, 3\).*\(2, 3\)"):
        jnp.ones((2, 3)) @ jnp.ones((2, 3))
    with pytest.raises((TypeError, ValueError), match=r"reshape.*\(2, 3\).*\(4,\)|6.*4"):
        jnp.ones((2, 3)).reshape(4)
    with pytest.raises(TypeError, match=r"funcgrad\.numpy\.add.*list"):
        jnp.add([1, 2], jnp.ones(2))
    with pytest.raises(TypeError, match=r"device_put.*object"):
        funcgrad.device_put(np.array([object()]))


def test_empty_ellipsis_still_separates_advanced_indices():
    # NumPy moves the broadcast index axes to the front when advanced indices are separated by
    # an Ellipsis, even one that stands for no axes (found by the hypothesis index test).
    a = np.arange(24).reshape(2, 3, 4)
    for idx in [(None, 0, Ellipsis, 0, np.array([0, 0])), (0, Ellipsis, 1, np.array([2, 3]))]:
        got = jnp.asarray(a)[idx]
        np.testing.assert_array_equal(np.asarray(got), a[idx])
        expected = a.copy()
        expected[idx] = -1
        np.testing.assert_array_equal(np.asarray(jnp.asarray(a).at[idx].set(-1)), expected)


SCALARS = [-3, 2.5, True, float("nan")]
SCALAR_OPS = [jnp.subtract, jnp.divide, jnp.maximum, jnp.greater, jnp.bitwise_or, jnp.remainder,
              jnp.power, jnp.logical_and]


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint8", "bool"])
def test_eager_scalar_and_broadcast_operands_match_traced(dtype):
    """Eagerly, a binary function whose operands need promotion or broadcasting runs as one
    compiled call: values, dtypes and weak types are those of the traced function (with the
    scalar a constant of the trace; power keeps its static integer exponent path)."""
    x = jnp.asarray(np.arange(-3, 3).reshape(2, 3).astype(dtype))
    row = jnp.asarray(np.arange(3).astype(dtype))
    # XLA:GPU turns a division by a trace constant into a product by its reciprocal: 1 ulp
    exact = funcgrad.default_backend() == "cpu" or not np.issubdtype(np.dtype(dtype), np.floating)
    for op in SCALAR_OPS:
        for s in SCALARS + [row]:
            for args in ((x, s), (s, x)):
                try:
                    want = funcgrad.jit(lambda a: op(*[a if v is x else v for v in args]))(x)
                except TypeError:
                    with pytest.raises(TypeError):
                        op(*args)
                    continue
                got = op(*args)
                assert type(got) is type(x)
                assert got.aval == want.aval, (op, s, got.aval, want.aval)
                if exact:
                    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
                else:
                    np.testing.assert_allclose(np.asarray(got), np.asarray(want),
                                               rtol=np.finfo(dtype).eps)


def test_eager_scalar_operation_is_one_dispatch():
    from funcgrad.lowering import eager
    x, b = jnp.ones((3, 17)), jnp.ones((17,))
    before = set(eager._op_cache)
    y = jnp.where(x * 2.0 > 1, x + b, 0) % 1.5
    np.testing.assert_array_equal(np.asarray(y), np.full((3, 17), 0.5, np.float32))
    # no per-primitive executables (scalar transfer, broadcast, multiply, compare, select)
    assert set(eager._op_cache) == before
    # a Python int outside int32 is left to the general path, with its own error
    with pytest.raises(OverflowError):
        jnp.arange(3) + 2 ** 40


def test_single_device_array_has_one_shard_and_is_fully_replicated():
    x = jnp.arange(6.0).reshape(2, 3)
    (shard,) = x.addressable_shards
    assert shard.device == x.device and shard.index == (slice(None), slice(None))
    np.testing.assert_array_equal(np.asarray(shard.data), np.arange(6.0).reshape(2, 3))
    assert x.is_fully_replicated
