"""The regularized incomplete beta function ``I_x(a, b)``: ``lax.betainc``, the primitive
``regularized_incomplete_beta`` (``lax.regularized_incomplete_beta_p``).

A continued fraction (modified Lentz) of a fixed number of terms, evaluated where it converges
(``x < (a + 1) / (a + b + 2)``, else through ``I_x(a, b) = 1 - I_{1-x}(b, a)``). The primitive's
rules follow from that decomposition, so it differentiates in ``a``, ``b`` and ``x`` and batches.
"""
import numpy as np

from funcgrad.core import dtypes
from funcgrad.core.values import aval_of
from funcgrad.lax import elementwise as ew
from funcgrad.lax import special
from funcgrad.lax.control_flow import loops
from funcgrad.lax.decomposed import decomposed_primitive

__all__ = ["betainc", "regularized_incomplete_beta_p"]


def _continued_fraction(a, b, x, n_terms):
    dt = aval_of(x).dtype
    def c(v):
        return ew.full_like_scalar(x, v)
    tiny = c(np.finfo(dt).tiny * 1e4 if dt != np.float16 else 1e-30)

    def guard(v):
        return ew.select(ew.lt(ew.abs(v), tiny), tiny, v)

    one = c(1.0)
    d = ew.div(one, guard(ew.sub(one, ew.div(ew.mul(ew.add(a, b), x), ew.add(a, one)))))

    def step(m, state):
        cc, d, h = state
        m = ew.convert_element_type(m, dt)
        m2 = ew.add(m, m)
        num = ew.div(ew.mul(ew.mul(m, ew.sub(b, m)), x),
                     ew.mul(ew.sub(ew.add(a, m2), one), ew.add(a, m2)))
        d = ew.div(one, guard(ew.add(one, ew.mul(num, d))))
        cc = guard(ew.add(one, ew.div(num, cc)))
        h = ew.mul(h, ew.mul(d, cc))
        num = ew.neg(ew.div(ew.mul(ew.mul(ew.add(a, m), ew.add(ew.add(a, b), m)), x),
                            ew.mul(ew.add(a, m2), ew.add(ew.add(a, m2), one))))
        d = ew.div(one, guard(ew.add(one, ew.mul(num, d))))
        cc = guard(ew.add(one, ew.div(num, cc)))
        return cc, d, ew.mul(h, ew.mul(d, cc))

    _, _, h = loops.fori_loop(1, n_terms + 1, step, (one, d, d))
    log_front = ew.sub(ew.add(ew.mul(a, ew.log(x)), ew.mul(b, ew.log1p(ew.neg(x)))),
                       ew.sub(ew.add(special.lgamma(a), special.lgamma(b)),
                              special.lgamma(ew.add(a, b))))
    return ew.mul(ew.div(ew.exp(log_front), a), h)


def _betainc(a, b, x):
    dt = aval_of(x).dtype
    def c(v):
        return ew.full_like_scalar(x, v)
    n_terms = 300 if dt == np.float64 else 100
    inside = ew.bitwise_and(ew.gt(x, c(0.0)), ew.lt(x, c(1.0)))
    safe_x = ew.select(inside, x, c(0.5))
    flip = ew.gt(safe_x, ew.div(ew.add(a, c(1.0)), ew.add(ew.add(a, b), c(2.0))))
    xa = ew.select(flip, ew.sub(c(1.0), safe_x), safe_x)
    cf = _continued_fraction(ew.select(flip, b, a), ew.select(flip, a, b), xa, n_terms)
    val = ew.select(flip, ew.sub(c(1.0), cf), cf)
    val = ew.select(ew.le(x, c(0.0)), c(0.0), ew.select(ew.ge(x, c(1.0)), c(1.0), val))
    bad = ew.bitwise_or(ew.bitwise_or(ew.le(a, c(0.0)), ew.le(b, c(0.0))),
                        ew.bitwise_or(ew.bitwise_or(ew.lt(x, c(0.0)), ew.gt(x, c(1.0))),
                                      ew.ne(x, x)))
    return ew.select(bad, c(np.nan), val)


regularized_incomplete_beta_p = decomposed_primitive("regularized_incomplete_beta", _betainc)


def betainc(a, b, x):
    """The regularized incomplete beta function ``I_x(a, b)`` (NaN outside ``a, b > 0``,
    ``0 <= x <= 1``), for float operands of one shape (scalars broadcast).

    Example:
        >>> lax.betainc(jnp.float32(2.0), jnp.float32(3.0), jnp.float32(0.4))
        Array(0.5247992, dtype=float32)
    """
    x, a = ew.binary_operands(x, a)
    x, b = ew.binary_operands(x, b)
    a, _ = ew.binary_operands(a, x)
    avals = [aval_of(v) for v in (a, b, x)]
    if any(not dtypes.is_float(v.dtype) for v in avals) or len({(v.shape, v.dtype)
                                                                for v in avals}) != 1:
        raise TypeError(f"lax.betainc: expected float operands of one shape and dtype, got "
                        f"{', '.join(v.str_short() for v in avals)}")
    return regularized_incomplete_beta_p.bind(a, b, x)
