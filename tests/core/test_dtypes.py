"""The promotion lattice against JAX's published table, weak types and x64 switching."""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.core import dtypes

ABBREV = {"b": "bool", "u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64",
          "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64", "bf": "bfloat16",
          "f2": "float16", "f4": "float32", "f8": "float64", "c8": "complex64",
          "c16": "complex128"}

# jax.numpy.promote_types(row, column) with 64-bit types enabled (JAX's type promotion table).
TABLE = """
     b   u1  u2  u4  u8  i1  i2  i4  i8  bf  f2  f4  f8  c8  c16
b    b   u1  u2  u4  u8  i1  i2  i4  i8  bf  f2  f4  f8  c8  c16
u1   u1  u1  u2  u4  u8  i2  i2  i4  i8  bf  f2  f4  f8  c8  c16
u2   u2  u2  u2  u4  u8  i4  i4  i4  i8  bf  f2  f4  f8  c8  c16
u4   u4  u4  u4  u4  u8  i8  i8  i8  i8  bf  f2  f4  f8  c8  c16
u8   u8  u8  u8  u8  u8  f8  f8  f8  f8  bf  f2  f4  f8  c8  c16
i1   i1  i2  i4  i8  f8  i1  i2  i4  i8  bf  f2  f4  f8  c8  c16
i2   i2  i2  i4  i8  f8  i2  i2  i4  i8  bf  f2  f4  f8  c8  c16
i4   i4  i4  i4  i8  f8  i4  i4  i4  i8  bf  f2  f4  f8  c8  c16
i8   i8  i8  i8  i8  f8  i8  i8  i8  i8  bf  f2  f4  f8  c8  c16
bf   bf  bf  bf  bf  bf  bf  bf  bf  bf  bf  f4  f4  f8  c8  c16
f2   f2  f2  f2  f2  f2  f2  f2  f2  f2  f4  f2  f4  f8  c8  c16
f4   f4  f4  f4  f4  f4  f4  f4  f4  f4  f4  f4  f4  f8  c8  c16
f8   f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  c16 c16
c8   c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c16 c8  c16
c16  c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16
"""

# jax.numpy.result_type(array of row dtype, Python int / float / complex), 64-bit enabled.
WEAK = {"b": ("i8", "f8", "c16"), "u1": ("u1", "f8", "c16"), "u2": ("u2", "f8", "c16"),
        "u4": ("u4", "f8", "c16"), "u8": ("u8", "f8", "c16"), "i1": ("i1", "f8", "c16"),
        "i2": ("i2", "f8", "c16"), "i4": ("i4", "f8", "c16"), "i8": ("i8", "f8", "c16"),
        "bf": ("bf", "bf", "c8"), "f2": ("f2", "f2", "c8"), "f4": ("f4", "f4", "c8"),
        "f8": ("f8", "f8", "c16"), "c8": ("c8", "c8", "c8"), "c16": ("c16", "c16", "c16")}


def _table():
    lines = [line.split() for line in TABLE.strip().splitlines()]
    cols = lines[0]
    return [(ABBREV[row[0]], ABBREV[c], ABBREV[v]) for row in lines[1:]
            for c, v in zip(cols, row[1:])]


def test_promote_types_table_x64(x64):
    wrong = [(a, b, str(dtypes.promote_types(a, b)), want) for a, b, want in _table()
             if dtypes.promote_types(a, b) != np.dtype(getattr(ml_dtypes, want, None) or want)]
    assert not wrong, wrong
    assert jnp.promote_types("int8", "uint8") == np.int16


def test_promote_types_table_x32():
    for a, b, want in _table():
        want = dtypes.canonicalize(np.dtype(getattr(ml_dtypes, want, None) or want))
        assert dtypes.promote_types(a, b) == want, (a, b)


def test_promote_types_is_symmetric_and_lattice_join_associative(x64):
    names = list(ABBREV.values())
    for a in names:
        for b in names:
            assert dtypes.promote_types(a, b) == dtypes.promote_types(b, a)
    # The join on lattice nodes (before weak nodes become concrete dtypes) is associative.
    nodes = list(dtypes._EDGES)
    for a in nodes:
        for b in nodes:
            for c in nodes:
                assert dtypes._join(dtypes._join(a, b), c) == dtypes._join(a, dtypes._join(b, c))


def _dt(code):
    name = ABBREV[code]
    return np.dtype(getattr(ml_dtypes, name, None) or name)


@pytest.mark.parametrize("code", sorted(WEAK))
def test_weak_python_scalars_x64(code, x64):
    for scalar, want in zip((1, 1.0, 1j), WEAK[code]):
        got = dtypes.result_type(np.zeros(1, _dt(code)), scalar)
        assert got == _dt(want), (code, scalar, got)


def test_weak_python_scalars_in_operations():
    x16 = jnp.ones(3, "float16")
    assert (x16 * 2.0).dtype == np.float16
    assert (2 + x16).dtype == np.float16
    xi8 = jnp.ones(3, "int8")
    assert (xi8 + 3).dtype == np.int8
    assert (xi8 + 3.5).dtype == np.float32
    assert (xi8 + 3.5).weak_type          # int array + Python float: weakly typed float
    assert (jnp.ones(2, "bfloat16") + 1j).dtype == np.complex64
    b = jnp.array([True, False])
    assert (b + 1).dtype == np.int32 and (b + 1).weak_type
    # Scalar-only expressions stay weak, and a weak value adopts a strong operand's type.
    w = funcgrad.lax.convert_element_type(2.0, "float32", True)
    assert w.weak_type
    assert (w * x16).dtype == np.float16
    assert not (jnp.ones(3) + 1.0).weak_type


def test_python_scalar_avals():
    from funcgrad.core.values import aval_of
    assert aval_of(1).weak_type and aval_of(1).dtype == np.int32
    assert aval_of(1.0).weak_type and aval_of(1.0).dtype == np.float32
    assert aval_of(1j).dtype == np.complex64
    assert not aval_of(True).weak_type and aval_of(True).dtype == np.bool_
    assert not aval_of(np.float32(1)).weak_type


def test_x64_config_update():
    assert not funcgrad.config.enable_x64
    assert jnp.ones(2).dtype == np.float32
    assert funcgrad.device_put(np.arange(3)).dtype == np.int32
    assert funcgrad.device_put(np.ones(2)).dtype == np.float32
    funcgrad.config.update("enable_x64", True)
    try:
        assert jnp.ones(2).dtype == np.float64
        assert funcgrad.device_put(np.ones(2)).dtype == np.float64
        assert jnp.arange(3).dtype == np.int64
        x = funcgrad.jit(lambda a: a * 2.0)(np.ones(2))
        assert x.dtype == np.float64
        assert (jnp.ones(2, "float32") + 1.0).dtype == np.float32
    finally:
        funcgrad.config.update("enable_x64", False)
    assert jnp.ones(2).dtype == np.float32
    # the jit cache must not hand back the float64 executable once x64 is off again
    assert funcgrad.jit(lambda a: a * 2.0)(np.ones(2)).dtype == np.float32


def test_x64_environment_variable():
    code = ("import funcgrad, funcgrad.numpy as jnp, numpy as np;"
            "assert funcgrad.config.enable_x64;"
            "x = jnp.ones(2) + 1.0; assert x.dtype == np.float64, x.dtype;"
            "assert funcgrad.jit(lambda a: a + 1)(np.arange(3)).dtype == np.int64;"
            "print('ok')")
    env = dict(os.environ, FUNCGRAD_ENABLE_X64="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_config_errors():
    with pytest.raises(ValueError, match="unknown option 'enable_x65'"):
        funcgrad.config.update("enable_x65", True)
    with pytest.raises(AttributeError, match="no option"):
        funcgrad.config.enable_x65


def test_canonicalize_and_predicates():
    assert dtypes.canonicalize("float64") == np.float32
    assert dtypes.canonicalize("uint64") == np.uint32
    assert dtypes.canonicalize("complex128") == np.complex64
    assert dtypes.canonicalize("bfloat16") == dtypes.bfloat16
    assert dtypes.is_inexact("bfloat16") and not dtypes.is_integer("bool")
    assert dtypes.tangent_dtype("int32") == dtypes.float0
