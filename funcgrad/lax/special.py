"""Special functions: ``erf``, ``erfc``, ``erf_inv``, ``lgamma``, ``digamma``, ``polygamma``,
``zeta``, ``bessel_i1e`` (XLA's CHLO decompositions), ``bessel_i0e`` (series / asymptotic
expansion), the regularized incomplete gamma functions ``igamma``/``igammac``, and the
log-domain helpers ``logsumexp``, ``logaddexp`` and ``cumlogsumexp``.

Example:
    >>> lax.erf(jnp.array([0.0, 1.0]))
    Array([0.      , 0.842700...], dtype=float32)
"""
import math

import numpy as np
from jaxlib.mlir.dialects import chlo, stablehlo

from funcgrad.core import batching_util as bu
from funcgrad.core import dtypes
from funcgrad.core.ad import jvp_flat
from funcgrad.core.ad_util import Zero, instantiate
from funcgrad.core.avals import ShapedArray
from funcgrad.core.batching_util import broadcast_batcher
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo, reductions, shapes
from funcgrad.lax import elementwise as ew
from funcgrad.lax.control_flow import fori_loop
from funcgrad.lax.elementwise import binary_operands


def _float_unary(name, hlo_fn):
    prim = Primitive(name)

    @prim.def_abstract_eval
    def _abstract(x):
        if not dtypes.is_float(x.dtype):
            raise TypeError(f"lax.{name}: expected a floating-point operand, got "
                            f"{x.str_short()}")
        return ShapedArray(x.shape, x.dtype, x.weak_type)

    prim.def_lowering(lambda ctx, x: hlo_fn(x))
    return prim


def _float_binary_prim(name):
    """A primitive of two floating-point operands of one shape and dtype (its abstract eval)."""
    prim = Primitive(name)

    @prim.def_abstract_eval
    def _abstract(x, y):
        if x.shape != y.shape or x.dtype != y.dtype or not dtypes.is_float(x.dtype):
            raise TypeError(f"lax.{name}: expected two floating-point operands of one shape "
                            f"and dtype, got {x.str_short()}, {y.str_short()}")
        return ShapedArray(x.shape, x.dtype, x.weak_type and y.weak_type)

    return prim


def _float_binary(name, hlo_fn):
    prim = _float_binary_prim(name)
    prim.def_lowering(lambda ctx, x, y: hlo_fn(x, y))
    return prim


def _like(x, value):
    """A constant array of ``x``'s shape and dtype (no arithmetic on x: inf * 0 would be nan)."""
    aval = aval_of(x)
    return shapes.full(aval.shape, np.asarray(value, aval.dtype), aval.dtype)


def _unary_fn(prim, doc):
    def fn(x):
        return prim.bind(x)
    fn.__name__ = prim.name
    fn.__doc__ = doc
    return fn


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _c(x, v):
    return np.asarray(v, aval_of(x).dtype)


def _defjvp_unary(prim, deriv):
    """jvp of an elementwise function: ``t * deriv(x, y)`` where y is the primal output."""
    def rule(primals, tangents):
        x, = primals
        t, = tangents
        y = prim.bind(x)
        if type(t) is Zero:
            return y, t
        return y, ew.mul(t, deriv(x, y))
    prim.def_jvp(rule)


# --- unary functions (XLA's CHLO decompositions), jvp t * f'(x) ------------------------------
erf_p = _float_unary("erf", chlo.erf)
_defjvp_unary(erf_p, lambda x, y: ew.mul(_c(x, _TWO_OVER_SQRT_PI), ew.exp(ew.neg(ew.mul(x, x)))))
erf_p.def_batch(broadcast_batcher(erf_p))
erf = _unary_fn(erf_p, "The error function. Example: ``lax.erf(x)``.")

erfc_p = _float_unary("erfc", chlo.erfc)
_defjvp_unary(erfc_p, lambda x, y: ew.mul(_c(x, -_TWO_OVER_SQRT_PI),
                                          ew.exp(ew.neg(ew.mul(x, x)))))
erfc_p.def_batch(broadcast_batcher(erfc_p))
erfc = _unary_fn(erfc_p, "``1 - erf(x)``, accurate for large x. Example: ``lax.erfc(x)``.")


def _erf_inv_hlo(ctx, x):
    # CHLO's erf_inv gives nan at +-1; the limits are +-inf.
    aval = ctx.avals_in[0]
    one = _hlo.constant(1, aval.dtype, aval.shape)
    at_one = _hlo.compare(stablehlo.abs(x), one, "EQ", aval.dtype)
    inf = stablehlo.multiply(x, _hlo.constant(np.inf, aval.dtype, aval.shape))
    return stablehlo.select(at_one, inf, chlo.erf_inv(x))


erf_inv_p = _float_unary("erf_inv", None)
erf_inv_p.def_lowering(_erf_inv_hlo)
_defjvp_unary(erf_inv_p, lambda x, y: ew.mul(_c(x, math.sqrt(math.pi) / 2),
                                             ew.exp(ew.mul(y, y))))
erf_inv_p.def_batch(broadcast_batcher(erf_inv_p))
erf_inv = _unary_fn(erf_inv_p, "The inverse of ``erf`` on (-1, 1). Example: ``lax.erf_inv(x)``.")

lgamma_p = _float_unary("lgamma", chlo.lgamma)
_defjvp_unary(lgamma_p, lambda x, y: digamma(x))
lgamma_p.def_batch(broadcast_batcher(lgamma_p))
lgamma = _unary_fn(lgamma_p, "``log|Gamma(x)|``. Example: ``lax.lgamma(x)``.")

digamma_p = _float_unary("digamma", chlo.digamma)
_defjvp_unary(digamma_p, lambda x, y: polygamma_p.bind(_like(x, 1.0), x))
digamma_p.def_batch(broadcast_batcher(digamma_p))
digamma = _unary_fn(digamma_p, "The digamma function ``d/dx lgamma(x)``. Example: "
                               "``lax.digamma(x)``.")

bessel_i1e_p = _float_unary("bessel_i1e", chlo.bessel_i1e)


def _i1e_deriv(x, y):
    # d/dx i1e(x) = i0e(x) - i1e(x) * (sign(x) + 1/x); the limit at 0 is 1/2.
    zero = ew.eq(x, _c(x, 0.0))
    safe = ew.select(zero, _like(x, 1.0), x)
    d = ew.sub(bessel_i0e(safe), ew.mul(bessel_i1e(safe),
                                        ew.add(ew.sign(safe), ew.div(_c(x, 1.0), safe))))
    return ew.select(zero, _like(x, 0.5), d)


_defjvp_unary(bessel_i1e_p, _i1e_deriv)
bessel_i1e_p.def_batch(broadcast_batcher(bessel_i1e_p))
bessel_i1e = _unary_fn(bessel_i1e_p, "Exponentially scaled modified Bessel function of order "
                                     "1: ``exp(-|x|) I1(x)``. Example: ``lax.bessel_i1e(x)``.")


# --- polygamma and zeta: differentiable in their second operand only ---------------------------
def _no_tangent(name, what, t):
    if type(t) is not Zero:
        raise TypeError(f"lax.{name}: differentiation with respect to {what} is not supported "
                        f"(only the second argument); hold it constant")


def _jvp_in_second(prim, what, derivative):
    """jvp of a primitive differentiable in its second operand only; ``derivative(a, x)`` is
    d prim(a, x) / dx."""
    def rule(primals, tangents):
        a, x = primals
        ta, tx = tangents
        _no_tangent(prim.name, what, ta)
        y = prim.bind(a, x)
        return (y, tx) if type(tx) is Zero else (y, ew.mul(tx, derivative(a, x)))
    prim.def_jvp(rule)


polygamma_p = _float_binary("polygamma", chlo.polygamma)

# d/dx polygamma(n, x) = polygamma(n + 1, x); d/dq zeta(s, q) = -s zeta(s + 1, q)
_jvp_in_second(polygamma_p, "the order n",
               lambda n, x: polygamma_p.bind(ew.add(n, _c(n, 1.0)), x))
polygamma_p.def_batch(broadcast_batcher(polygamma_p))


def polygamma(n, x):
    """The n-th derivative of digamma (``n`` a non-negative integer value, as a float array).

    Example:
        >>> lax.polygamma(1.0, jnp.array([1.0, 2.0]))       # trigamma: pi**2/6, pi**2/6 - 1
        Array([1.644934..., 0.644934...], dtype=float32)
    """
    n, x = binary_operands(n, x)
    return polygamma_p.bind(n, x)


zeta_p = _float_binary("zeta", chlo.zeta)
_jvp_in_second(zeta_p, "the exponent x",
               lambda s, q: ew.mul(ew.neg(s), zeta_p.bind(ew.add(s, _c(s, 1.0)), q)))
zeta_p.def_batch(broadcast_batcher(zeta_p))


def zeta(x, q):
    """The Hurwitz zeta function ``sum_k (k + q) ** -x``.

    Example:
        >>> lax.zeta(2.0, jnp.array(1.0))   # pi**2 / 6
        Array(1.644934..., dtype=float32)
    """
    x, q = binary_operands(x, q)
    return zeta_p.bind(x, q)


# --- bessel_i0e: composed from other primitives ----------------------------------------------
_I0E_SWITCH = 15.0


def bessel_i0e(x):
    """Exponentially scaled modified Bessel function of order 0: ``exp(-|x|) I0(x)``.

    Power series below |x| = 15, the asymptotic expansion above (accurate to float64 round-off
    on both sides); built from other primitives, so it differentiates and batches through them.

    Example:
        >>> lax.bessel_i0e(jnp.array([0.0, 1.0]))
        Array([1.        , 0.46575963], dtype=float32)
    """
    aval = aval_of(x)
    if not dtypes.is_float(aval.dtype):
        raise TypeError(f"lax.bessel_i0e: expected a floating-point operand, got "
                        f"{aval.str_short()}")
    dt = aval.dtype
    c = lambda v: np.asarray(v, dt)  # noqa: E731
    ax = ew.abs(x)
    small = ew.lt(ax, c(_I0E_SWITCH))
    # Each branch sees a safe input, so the unused one has finite values and derivatives.
    xs = ew.select(small, ax, _like(ax, 0.0))
    xl = ew.select(small, _like(ax, c(_I0E_SWITCH)), ax)
    # series: sum_k (x^2/4)^k / (k!)^2, times exp(-x)
    q = ew.mul(ew.mul(xs, xs), c(0.25))
    term = _like(q, c(1.0))
    total = term
    for k in range(1, 60):
        term = ew.mul(term, ew.mul(q, c(1.0 / (k * k))))
        total = ew.add(total, term)
    series = ew.mul(total, ew.exp(ew.neg(xs)))
    # asymptotic: (2 pi x)^-1/2 sum_k ((2k-1)!!)^2 / (k! (8x)^k)
    inv8x = ew.div(c(1.0), ew.mul(xl, c(8.0)))
    term = _like(xl, c(1.0))
    total = term
    for k in range(1, 25):
        term = ew.mul(term, ew.mul(inv8x, c((2 * k - 1) ** 2 / k)))
        total = ew.add(total, term)
    asym = ew.mul(total, ew.rsqrt(ew.mul(xl, c(2.0 * math.pi))))
    return ew.select(small, series, asym)


# --- incomplete gamma: composed, with closed-form derivative in x --------------------------
def _igamma_series(a, x, n_terms):
    """P(a, x) by its power series (good for x < a + 1), summed in a loop."""
    dt = aval_of(a).dtype
    c = lambda v: np.asarray(v, dt)  # noqa: E731
    term = ew.div(c(1.0), a)

    def step(i, state):
        term, total, ap = state
        ap = ew.add(ap, c(1.0))
        term = ew.mul(term, ew.div(x, ap))
        return term, ew.add(total, term), ap

    _, total, _ = fori_loop(0, n_terms, step, (term, term, a))
    log_pref = ew.sub(ew.sub(ew.mul(a, ew.log(x)), x), lgamma(a))
    return ew.mul(total, ew.exp(log_pref))


def _igammac_cf(a, x, n_terms):
    """Q(a, x) by Legendre's continued fraction, modified Lentz (good for x >= a + 1)."""
    dt = aval_of(a).dtype
    c = lambda v: np.asarray(v, dt)  # noqa: E731
    tiny = c(np.finfo(dt).tiny * 1e3 if dt != dtypes.bfloat16 else 1e-30)
    b = ew.sub(ew.add(x, c(1.0)), a)
    cc = _like(b, c(1.0) / tiny)
    d = ew.div(c(1.0), b)

    def step(i, state):
        b, cc, d, h = state
        fi = ew.add(ew.convert_element_type(i, dt), c(1.0))
        an = ew.mul(ew.neg(fi), ew.sub(fi, a))
        b = ew.add(b, c(2.0))
        d = ew.add(ew.mul(an, d), b)
        d = ew.select(ew.lt(ew.abs(d), tiny), _like(d, tiny), d)
        cc = ew.add(b, ew.div(an, cc))
        cc = ew.select(ew.lt(ew.abs(cc), tiny), _like(cc, tiny), cc)
        d = ew.div(c(1.0), d)
        return b, cc, d, ew.mul(h, ew.mul(d, cc))

    _, _, _, h = fori_loop(0, n_terms, step, (b, cc, d, d))
    log_pref = ew.sub(ew.sub(ew.mul(a, ew.log(x)), x), lgamma(a))
    return ew.mul(h, ew.exp(log_pref))


def _igamma_impl(a, x, upper):
    dt = aval_of(a).dtype
    c = lambda v: np.asarray(v, dt)  # noqa: E731
    n = 200 if dt == np.float64 else 80
    use_series = ew.lt(x, ew.add(a, c(1.0)))
    safe_x = ew.select(ew.gt(x, c(0.0)), x, _like(x, c(1.0)))
    xs = ew.select(use_series, safe_x, _like(x, c(0.5)))
    xc = ew.select(use_series, ew.add(a, c(1.0)), safe_x)
    p = _igamma_series(a, xs, n)
    q = _igammac_cf(a, xc, n)
    out = ew.select(use_series, ew.sub(c(1.0), p) if upper else p,
                    q if upper else ew.sub(c(1.0), q))
    zero_x = ew.eq(x, c(0.0))
    out = ew.select(zero_x, _like(x, c(1.0 if upper else 0.0)), out)
    bad = ew.bitwise_or(ew.bitwise_or(ew.lt(x, c(0.0)), ew.le(a, c(0.0))),
                        ew.bitwise_or(ew.ne(x, x), ew.ne(a, a)))
    out = ew.select(bad, _like(x, c(np.nan)), out)
    inf_x = ew.eq(x, c(np.inf))
    return ew.select(ew.bitwise_and(inf_x, ew.gt(a, c(0.0))),
                     _like(a, c(0.0 if upper else 1.0)), out)


def _igamma_prim(name, upper):
    prim = _float_binary_prim(name)

    def _lowering(ctx, a, x):
        return ctx.lower_fun(lambda a, x: [_igamma_impl(a, x, upper)], (a, x), name)[0]

    prim.def_lowering(_lowering)
    return prim


def _igamma_jvp_rule(prim, upper):
    def rule(primals, tangents):
        a, x = primals
        ta, tx = tangents
        y = prim.bind(a, x)
        t = None
        if type(tx) is not Zero:
            # dP/dx = x^(a-1) e^-x / Gamma(a)
            safe = ew.select(ew.gt(x, _c(x, 0.0)), x, _like(x, 1.0))
            d = ew.exp(ew.sub(ew.sub(ew.mul(ew.sub(a, _c(a, 1.0)), ew.log(safe)), safe),
                              lgamma(a)))
            d = ew.select(ew.gt(x, _c(x, 0.0)), d, _like(x, 0.0))
            t = ew.mul(tx, ew.neg(d) if upper else d)
        if type(ta) is not Zero:
            # d/da: forward mode through the series / continued fraction.
            _, (ta_out,) = jvp_flat(lambda a_: [_igamma_impl(a_, x, upper)], [a], [ta])
            ta_out = instantiate(ta_out)
            t = ta_out if t is None else ew.add(t, ta_out)
        if t is None:
            return y, Zero(aval_of(y).update(weak_type=False))
        return y, t
    return rule


igamma_p = _igamma_prim("igamma", upper=False)
igamma_p.def_jvp(_igamma_jvp_rule(igamma_p, False))
igamma_p.def_batch(broadcast_batcher(igamma_p))

igammac_p = _igamma_prim("igammac", upper=True)
igammac_p.def_jvp(_igamma_jvp_rule(igammac_p, True))
igammac_p.def_batch(broadcast_batcher(igammac_p))


def igamma(a, x):
    """The regularized lower incomplete gamma function ``P(a, x)``.

    Example:
        >>> lax.igamma(jnp.array(2.0), jnp.array(1.0))   # 1 - 2/e
        Array(0.264241..., dtype=float32)
    """
    a, x = binary_operands(a, x)
    return igamma_p.bind(a, x)


def igammac(a, x):
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``.

    Example:
        >>> lax.igammac(jnp.array(2.0), jnp.array(1.0))   # 2/e
        Array(0.735758..., dtype=float32)
    """
    a, x = binary_operands(a, x)
    return igammac_p.bind(a, x)


# --- log-domain helpers -------------------------------------------------------------------
def logaddexp(x, y):
    """``log(exp(x) + exp(y))`` without overflow (``-inf`` operands handled).

    Example:
        >>> lax.logaddexp(jnp.array(1000.0), jnp.array(1000.0))   # 1000 + log 2
        Array(1000.693..., dtype=float32)
    """
    x, y = binary_operands(x, y)
    m = ew.max(x, y)
    finite = ew.is_finite(m)
    m_safe = ew.select(finite, m, _like(m, 0))
    d = ew.neg(ew.abs(ew.sub(x, y)))
    d = ew.select(ew.ne(d, d), _like(m_safe, 0), d)   # inf - inf
    out = ew.add(m_safe, ew.log1p(ew.exp(d)))
    return ew.select(finite, out, m)


def logsumexp(x, axes):
    """``log(sum(exp(x), axes))`` computed stably (the max is subtracted first).

    Example:
        >>> lax.logsumexp(jnp.array([[1000.0, 0.0], [1000.0, 0.0]]), (0,))  # no overflow
        Array([1.000693...e+03, 6.931471...e-01], dtype=float32)
    """
    aval = aval_of(x)
    axes = tuple(int(a) % aval.ndim for a in axes) if aval.ndim else ()
    dt = aval.dtype
    m = reductions.reduce_max(x, axes)
    m_safe = ew.select(ew.is_finite(m), m, _like(m, 0))
    keep = tuple(i for i in range(aval.ndim) if i not in axes)
    mb = shapes.broadcast_in_dim(m_safe, aval.shape, keep)
    s = reductions.reduce_sum(ew.exp(ew.sub(x, mb)), axes)
    out = ew.add(ew.log(s), m_safe)
    # all -inf -> -inf (log 0); a +inf anywhere -> +inf
    return ew.select(ew.eq(m, np.asarray(np.inf, dt)), m, out)


cumlogsumexp_p = Primitive("cumlogsumexp")


@cumlogsumexp_p.def_abstract_eval
def _cumlogsumexp_abstract(x, axis, reverse):
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"lax.cumlogsumexp: expected a floating-point operand, got "
                        f"{x.str_short()}")
    if not 0 <= axis < x.ndim:
        raise TypeError(f"lax.cumlogsumexp: axis {axis} is out of range for {x.str_short()}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _logaddexp_hlo(a, b, dtype):
    m = stablehlo.maximum(a, b)
    mn = stablehlo.minimum(a, b)
    ninf = _hlo.constant(-np.inf, dtype)
    diff = stablehlo.subtract(mn, m)
    out = stablehlo.add(m, stablehlo.log_plus_one(stablehlo.exponential(diff)))
    # max == -inf (both -inf) or +inf: the result is max itself
    is_edge = stablehlo.or_(_hlo.compare(m, ninf, "EQ", dtype),
                            _hlo.compare(m, _hlo.constant(np.inf, dtype), "EQ", dtype))
    return stablehlo.select(is_edge, m, out)


def _cumlogsumexp_lowering(ctx, x, axis, reverse):
    aval = ctx.avals_in[0]
    return _hlo.cumulative(x, aval, axis, reverse, -np.inf,
                           lambda a, b: _logaddexp_hlo(a, b, aval.dtype))


cumlogsumexp_p.def_lowering(_cumlogsumexp_lowering)


def _cumlogsumexp_jvp(primals, tangents, axis, reverse):
    x, = primals
    t, = tangents
    y = cumlogsumexp_p.bind(x, axis=axis, reverse=reverse)
    if type(t) is Zero:
        return y, t
    # d y_i = sum_{j<=i} exp(x_j - y_i) t_j, scaled by the max along the axis for range.
    aval = aval_of(x)
    m = reductions.reduce_max(x, (axis,))
    m = ew.select(ew.is_finite(m), m, _like(m, 0.0))
    keep = tuple(i for i in range(aval.ndim) if i != axis)
    mb = shapes.broadcast_in_dim(m, aval.shape, keep)
    acc = reductions.cumsum(ew.mul(ew.exp(ew.sub(x, mb)), t), axis, reverse)
    return y, ew.mul(acc, ew.exp(ew.sub(mb, y)))


cumlogsumexp_p.def_jvp(_cumlogsumexp_jvp)


def _cumlogsumexp_batch(args, dims, axis, reverse):
    x = bu.bdim_to_front(args[0], dims[0])
    return cumlogsumexp_p.bind(x, axis=axis + 1, reverse=reverse), 0


cumlogsumexp_p.def_batch(_cumlogsumexp_batch)


def cumlogsumexp(x, axis=0, reverse=False):
    """Running ``logsumexp`` along ``axis`` (from the end if ``reverse``).

    Example:
        >>> lax.cumlogsumexp(jnp.log(jnp.arange(1.0, 4.0)))     # log([1, 3, 6])
        Array([0.      , 1.098612..., 1.791759...], dtype=float32)
    """
    aval = aval_of(x)
    return cumlogsumexp_p.bind(x, axis=int(axis) % max(aval.ndim, 1), reverse=bool(reverse))
