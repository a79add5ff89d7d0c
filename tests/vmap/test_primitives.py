"""For every primitive of the core lax families: vmap(f)(xs) equals stacking f(x) over a
Python loop, for random in_axes and out_axes (seeded per case)."""
import importlib
import zlib

import numpy as np
import pytest

import funcgrad
from funcgrad import lax
import funcgrad.numpy as jnp
from funcgrad.lax import elementwise as ew
from funcgrad.lax import indexing as lidx
from funcgrad.lax import parallel as lpar
from funcgrad.lax import reductions as lred
from funcgrad.lax import shapes as lsh
from funcgrad.core.primitive import Primitive

ldot = importlib.import_module("funcgrad.lax.dot")

B = 3
R = np.random.default_rng(0)


def f32(*shape, lo=0.1, hi=0.9):
    return R.uniform(lo, hi, shape).astype(np.float32)


def i32(*shape, lo=0, hi=5):
    return R.integers(lo, hi, shape).astype(np.int32)


def c64(*shape):
    return (f32(*shape) + 1j * f32(*shape)).astype(np.complex64)


CASES = []   # (id, primitives covered, f, example args)


def case(name, prims, f, *args):
    CASES.append((name, tuple(prims), f, args))


# --- elementwise ---------------------------------------------------------------------------
for p in (ew.neg_p, ew.sign_p, ew.floor_p, ew.ceil_p, ew.is_finite_p, ew.exp_p, ew.log_p,
          ew.log1p_p, ew.expm1_p, ew.tanh_p, ew.logistic_p, ew.sin_p, ew.cos_p, ew.tan_p,
          ew.asin_p, ew.acos_p, ew.atan_p, ew.sinh_p, ew.cosh_p, ew.asinh_p, ew.acosh_p,
          ew.atanh_p, ew.sqrt_p, ew.rsqrt_p, ew.cbrt_p, ew.abs_p):
    case(p.name, [p], (lambda p: lambda x: p.bind(x))(p), f32(2, 3))
for p in (ew.not_p, ew.population_count_p, ew.clz_p):
    case(p.name, [p], (lambda p: lambda x: p.bind(x))(p), i32(4))
for p in (ew.real_p, ew.imag_p, ew.conj_p):
    case(p.name, [p], (lambda p: lambda x: p.bind(x))(p), c64(3))
case("round", [ew.round_p], lambda x: lax.round(x * 4.0, 1), f32(2, 3))
case("integer_pow", [ew.integer_pow_p], lambda x: lax.integer_pow(x, -3), f32(4))
case("convert", [ew.convert_element_type_p], lambda x: lax.convert_element_type(x * 9, "int32"),
     f32(2, 2))
case("bitcast", [ew.bitcast_convert_type_p], lambda x: lax.bitcast_convert_type(x, "int32"),
     f32(3))
for p in (ew.add_p, ew.sub_p, ew.mul_p, ew.div_p, ew.rem_p, ew.pow_p, ew.max_p, ew.min_p,
          ew.atan2_p, ew.nextafter_p, ew.eq_p, ew.ne_p, ew.lt_p, ew.le_p, ew.gt_p, ew.ge_p,
          ew.complex_p):
    case(p.name, [p], (lambda p: lambda x, y: p.bind(x, y))(p), f32(2, 3), f32(2, 3))
case("add_scalars", [ew.add_p], lambda x, y: ew.add_p.bind(x, y), np.float32(1.5),
     np.float32(2.0))
for p in (ew.and_p, ew.or_p, ew.xor_p, ew.shift_left_p, ew.shift_right_arithmetic_p,
          ew.shift_right_logical_p):
    case(p.name, [p], (lambda p: lambda x, y: p.bind(x, y))(p), i32(4, hi=100), i32(4, hi=4))
case("select", [ew.select_n_p], lambda c, x, y: lax.select(c, x, y), f32(2, 3) > 0.5, f32(2, 3),
     f32(2, 3))
case("select_scalar_pred", [ew.select_n_p], lambda c, x, y: lax.select(c, x, y),
     np.bool_(True), f32(3), f32(3))
case("select_n_int", [ew.select_n_p], lambda c, x, y, z: lax.select_n(c, x, y, z),
     i32(4, hi=3), f32(4), f32(4), f32(4))
case("clamp", [ew.clamp_p], lambda lo, x, hi: lax.clamp(lo, x, hi), np.float32(0.3), f32(2, 3),
     np.float32(0.7))
case("clamp_arrays", [ew.clamp_p], lambda lo, x, hi: lax.clamp(lo, x, hi), f32(4, hi=0.4),
     f32(4), f32(4, lo=0.6))

# --- shapes --------------------------------------------------------------------------------
case("broadcast_in_dim", [lsh.broadcast_in_dim_p],
     lambda x: lax.broadcast_in_dim(x, (2, 4, 3), (0, 2)), f32(2, 3))
case("reshape", [lsh.reshape_p], lambda x: lax.reshape(x, (3, 2)), f32(2, 3))
case("transpose", [lsh.transpose_p], lambda x: lax.transpose(x, (2, 0, 1)), f32(2, 3, 4))
case("squeeze", [lsh.squeeze_p], lambda x: lax.squeeze(x, (1,)), f32(2, 1, 3))
case("expand_dims", [lsh.expand_dims_p], lambda x: lax.expand_dims(x, (0, 2)), f32(2, 3))
case("concatenate", [lsh.concatenate_p], lambda x, y, z: lax.concatenate([x, y, z], 1),
     f32(2, 3), f32(2, 1), f32(2, 2))
case("pad", [lsh.pad_p], lambda x, v: lax.pad(x, v, [(1, 2, 1), (-1, 0, 0)]), f32(2, 3),
     np.float32(5.0))
case("iota", [lsh.iota_p], lambda x: x + lax.broadcasted_iota("float32", (2, 3), 1), f32(2, 3))
case("slice", [lsh.slice_p], lambda x: lax.slice(x, (0, 1), (2, 5), (1, 2)), f32(2, 5))
case("split", [lsh.split_p], lambda x: (lambda a, b, c: lax.concatenate([c, a * 2.0, b], 1))(
    *lax.split(x, (1, 3, 1), 1)), f32(2, 5))
case("rev", [lsh.rev_p], lambda x: lax.rev(x, (0, 2)), f32(2, 3, 2))

# --- reductions ----------------------------------------------------------------------------
for p in (lred.reduce_sum_p, lred.reduce_prod_p, lred.reduce_max_p, lred.reduce_min_p):
    case(p.name, [p], (lambda p: lambda x: p.bind(x, axes=(0, 2)))(p), f32(2, 3, 2))
for p in (lred.reduce_and_p, lred.reduce_or_p, lred.reduce_xor_p):
    case(p.name, [p], (lambda p: lambda x: p.bind(x, axes=(1,)))(p), i32(2, 3, hi=8))
case("argmax", [lred.argmax_p], lambda x: lax.argmax(x, 1), f32(3, 4))
case("argmin", [lred.argmin_p], lambda x: lax.argmin(x, 0), f32(3, 4))
for p in (lred.cumsum_p, lred.cumprod_p, lred.cummax_p, lred.cummin_p):
    case(p.name, [p], (lambda p: lambda x: p.bind(x, axis=1, reverse=True))(p), f32(2, 4))

# --- dot_general ---------------------------------------------------------------------------
case("matvec", [ldot.dot_general_p], lambda a, x: lax.dot(a, x), f32(4, 3), f32(3))
case("matmul", [ldot.dot_general_p], lambda a, b: lax.dot(a, b), f32(2, 3), f32(3, 4))
case("dot_general_batch", [ldot.dot_general_p],
     lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (2,)))), f32(2, 4, 3),
     f32(5, 3, 2))

# --- indexing ------------------------------------------------------------------------------
case("dynamic_slice", [lidx.dynamic_slice_p],
     lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 2)), f32(4, 5), np.int32(1), np.int32(3))
case("dynamic_update_slice", [lidx.dynamic_update_slice_p],
     lambda x, u, i: lax.dynamic_update_slice(x, u, (i, np.int32(1))), f32(4, 5), f32(2, 3),
     np.int32(2))
_dn = lidx.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                  start_index_map=(0,))
case("gather", [lidx.gather_p], lambda x, i: lax.gather(x, i, _dn, (1, 3)), f32(5, 3),
     i32(4, 1, hi=5))
case("gather_fill", [lidx.gather_p],
     lambda x, i: lax.gather(x, i, _dn, (1, 3), mode="fill", fill_value=-1.0), f32(5, 3),
     i32(4, 1, lo=-1, hi=7))
_dn2 = lidx.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(1,),
                                   start_index_map=(1,), operand_batching_dims=(0,),
                                   start_indices_batching_dims=(0,))
case("gather_batching_dims", [lidx.gather_p], lambda x, i: lax.gather(x, i, _dn2, (1, 1)),
     f32(3, 4), i32(3, 1, hi=4))
_sdn = lidx.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                    scatter_dims_to_operand_dims=(0,))
for _name, _fn, _p in (("scatter", lax.scatter, lidx.scatter_p),
                       ("scatter_add", lax.scatter_add, lidx.scatter_add_p),
                       ("scatter_mul", lax.scatter_mul, lidx.scatter_mul_p),
                       ("scatter_min", lax.scatter_min, lidx.scatter_min_p),
                       ("scatter_max", lax.scatter_max, lidx.scatter_max_p)):
    case(_name, [_p], (lambda fn: lambda x, i, u: fn(x, i, u, _sdn))(_fn), f32(5, 2),
         np.array([[1], [3], [1]], np.int32), f32(3, 2))
case("numpy_getitem_at", [lidx.gather_p, lidx.scatter_add_p],
     lambda x, i: jnp.asarray(x).at[i].add(jnp.asarray(x)[i] * 2.0), f32(5, 2), i32(3, hi=5))

COVERED = {p for _, prims, _, _ in CASES for p in prims}


def _take(a, i, ax):
    return a if ax is None else np.take(np.asarray(a), i, axis=ax)


def _batched(a, ax, rng):
    """A batch of B variants of example ``a`` stacked at axis ``ax``."""
    a = np.asarray(a)
    variants = []
    for b in range(B):
        if a.dtype == np.bool_:
            v = rng.random(a.shape) > 0.5
        elif np.issubdtype(a.dtype, np.integer):
            lo, hi = (int(a.min()), int(a.max()) + 1) if a.size else (0, 1)
            v = rng.integers(min(lo, 0), max(hi, 2), a.shape).astype(a.dtype)
        elif np.issubdtype(a.dtype, np.complexfloating):
            v = (a * (1 + 0.1 * b)).astype(a.dtype)
        else:
            v = (a + rng.uniform(-0.05, 0.05, a.shape)).astype(a.dtype)
        variants.append(v)
    return np.stack(variants, axis=ax)


@pytest.mark.parametrize("name,prims,f,args", CASES, ids=[c[0] for c in CASES])
def test_vmap_matches_loop(name, prims, f, args):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    in_axes = []
    for a in args:
        nd = np.ndim(a)
        choices = [None] + list(range(-nd - 1, nd + 1))
        in_axes.append(choices[rng.integers(len(choices))])
    if all(ax is None for ax in in_axes):
        in_axes[int(rng.integers(len(args)))] = 0
    bargs = [a if ax is None else _batched(a, ax % (np.ndim(a) + 1), rng)
             for a, ax in zip(args, in_axes)]
    canon = [None if ax is None else ax % (np.ndim(a) + 1) for a, ax in zip(args, in_axes)]
    expected = [np.asarray(f(*[_take(a, i, ax) for a, ax in zip(bargs, canon)]))
                for i in range(B)]
    out_nd = expected[0].ndim
    out_axis = int(rng.integers(-out_nd - 1, out_nd + 1))
    expected = np.stack(expected, axis=out_axis)
    got = funcgrad.vmap(f, in_axes=tuple(in_axes), out_axes=out_axis)(*bargs)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=2e-6, atol=1e-6, equal_nan=True,
                               err_msg=f"in_axes={in_axes} out_axes={out_axis}")


def _family_primitives(*modules):
    return {v for m in modules for v in vars(m).values() if isinstance(v, Primitive)}


def test_every_core_primitive_has_a_loop_case():
    """The numerical test above covers every primitive of the families batched here."""
    prims = _family_primitives(ew, lsh, lred, ldot, lidx)
    missing = sorted(p.name for p in prims - COVERED)
    assert not missing, f"primitives without a vmap-vs-loop case: {missing}"


def test_collective_primitives_covered_elsewhere():
    # psum_scatter and all_to_all: tests/parallel (under vmap and pmap, against NumPy); pvary
    # (typed shard_map bodies): tests/sharding/shard_map_vma_cases.py, a vmapped body
    # (vmap_of_inner_grad) and a vmap inside one, against JAX
    assert {lpar.psum_p, lpar.pmax_p, lpar.pmin_p, lpar.all_gather_p, lpar.axis_index_p,
            lpar.ppermute_p, lpar.psum_scatter_p, lpar.all_to_all_p,
            lpar.pvary_p} == _family_primitives(lpar)
