"""XLA's own random number operations: ``rng_bit_generator`` (a stateless generator from an
explicit key: the same key gives the same bits, as in JAX on the same backend) and
``rng_uniform`` (XLA's stateful uniform sampler; not reproducible, as in JAX).

``funcgrad.random`` is the reproducible, splittable PRNG to use in programs; these exist for
code written against ``jax.lax``.
"""
import numpy as np
from jaxlib.mlir.dialects import stablehlo

from funcgrad.core import dtypes
from funcgrad.core.ad_util import defjvp_zero
from funcgrad.core.avals import ShapedArray
from funcgrad.core.batching_util import bdim_at, not_mapped
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo, shapes
from funcgrad.lax import elementwise as ew
from funcgrad.lax.control_flow import scans
from funcgrad.lax.enums import RandomAlgorithm

__all__ = ["rng_bit_generator", "rng_bit_generator_p", "rng_uniform", "rng_uniform_p"]

_BITS_DTYPES = ("uint8", "uint16", "uint32", "uint64")

rng_bit_generator_p = Primitive("rng_bit_generator", multiple_results=True)


@rng_bit_generator_p.def_abstract_eval
def _rbg_abstract(key, shape, dtype, algorithm):
    return [ShapedArray(key.shape, key.dtype), ShapedArray(shape, dtype)]


@rng_bit_generator_p.def_lowering
def _rbg_lowering(ctx, key, shape, dtype, algorithm):
    # XLA's state is u64[2]: the u32[4] key is reinterpreted as two 64-bit words (as JAX does,
    # so the same key gives JAX's bits) and the new state reinterpreted back.
    key_aval, out_aval = ctx.avals_out
    u32, u64 = np.dtype(np.uint32), np.dtype(np.uint64)
    state = stablehlo.bitcast_convert(_hlo.tensor_type((2,), u64),
                                      stablehlo.reshape(_hlo.tensor_type((2, 2), u32), key))
    name = {0: "DEFAULT", 1: "THREE_FRY", 2: "PHILOX"}[algorithm]
    op = stablehlo.RngBitGeneratorOp(_hlo.tensor_type((2,), u64), _hlo.ir_type(out_aval),
                                     stablehlo.RngAlgorithmAttr.get(name), state)
    new_key = stablehlo.reshape(_hlo.ir_type(key_aval), stablehlo.bitcast_convert(
        _hlo.tensor_type((2, 2), u32), op.results[0]))
    return [new_key, op.results[1]]


defjvp_zero(rng_bit_generator_p)


@rng_bit_generator_p.def_batch
def _rbg_batch(args, dims, **params):
    (key,), (d,) = args, dims
    keys = bdim_at(key, d, 0)
    new_keys, bits = scans.map(lambda k: tuple(rng_bit_generator_p.bind(k, **params)), keys)
    return [new_keys, bits], [0, 0]


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT, *,
                      out_sharding=None):
    """``(new_key, bits)``: random bits of ``shape`` and integer ``dtype`` from XLA's
    generator ``algorithm`` keyed by a uint32[4] ``key``. The same key gives the same bits
    (JAX's, on the same backend); pass ``new_key`` on for more.

    Example:
        >>> key = jnp.array([1, 2, 3, 4], jnp.uint32)
        >>> new_key, bits = lax.rng_bit_generator(key, (2, 3))
        >>> bits.shape, bits.dtype, bool((lax.rng_bit_generator(key, (2, 3))[1] == bits).all())
        ((2, 3), dtype('uint32'), True)
    """
    kaval = aval_of(key)
    dt = np.dtype(dtype)
    if kaval.dtype != np.uint32 or kaval.shape != (4,):
        raise TypeError(f"lax.rng_bit_generator: key must be a uint32[4] array, got "
                        f"{kaval.str_short()}")
    if dt.name not in _BITS_DTYPES:
        raise TypeError(f"lax.rng_bit_generator: dtype must be an unsigned integer type "
                        f"{_BITS_DTYPES}, got {dt}")
    algorithm = RandomAlgorithm(int(algorithm))
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    return tuple(rng_bit_generator_p.bind(key, shape=shape, dtype=dt,
                                          algorithm=int(algorithm)))


rng_uniform_p = Primitive("rng_uniform")
rng_uniform_p.effectful = True     # a new draw each time: never merged or cached away


@rng_uniform_p.def_abstract_eval
def _ru_abstract(a, b, shape):
    return ShapedArray(shape, a.dtype)


@rng_uniform_p.def_lowering
def _ru_lowering(ctx, a, b, shape):
    dims = _hlo.constant(np.asarray(shape, np.int64), np.dtype(np.int64))
    return stablehlo.RngOp(a, b, dims, stablehlo.RngDistributionAttr.get("UNIFORM"),
                           results=[_hlo.ir_type(ctx.avals_out[0])]).result


defjvp_zero(rng_uniform_p)


@rng_uniform_p.def_batch
def _ru_batch(args, dims, shape):
    (a, b), (da, db) = args, dims
    size = (a if da is not not_mapped else b).shape[da if da is not not_mapped else db]
    dt = aval_of(a).dtype
    full = (size,) + tuple(shape)
    lo = bdim_at(a, da, 0, size) if da is not not_mapped else shapes.broadcast(a, (size,))
    hi = bdim_at(b, db, 0, size) if db is not not_mapped else shapes.broadcast(b, (size,))
    lo = shapes.broadcast_in_dim(lo, full, (0,))
    hi = shapes.broadcast_in_dim(hi, full, (0,))
    if dtypes.is_float(dt):
        u = rng_uniform_p.bind(np.zeros((), dt), np.ones((), dt), shape=full)
        return ew.add(lo, ew.mul(ew.sub(hi, lo), u)), 0
    raise TypeError("vmap of lax.rng_uniform: only floating-point bounds can vary across the "
                    "batch")


def rng_uniform(a, b, shape):
    """Values drawn uniformly from ``[a, b)`` by XLA's stateful sampler (scalar bounds of one
    dtype). Not reproducible: use ``funcgrad.random.uniform`` for seeded numbers.

    Example:
        >>> u = lax.rng_uniform(jnp.float32(2.0), jnp.float32(3.0), (1000,))
        >>> bool(((u >= 2.0) & (u < 3.0)).all())
        True
    """
    a, b = ew.binary_operands(a, b)
    aa, ab = aval_of(a), aval_of(b)
    if aa.shape or ab.shape or aa.dtype != ab.dtype:
        raise TypeError(f"lax.rng_uniform: a and b must be scalars of one dtype, got "
                        f"{aa.str_short()} and {ab.str_short()}")
    return rng_uniform_p.bind(a, b, shape=tuple(int(s) for s in shape))

