"""More elementwise math and array comparisons: frexp/ldexp/modf, spacing, i0, logaddexp2,
isclose/allclose/array_equal, the complex predicates, differences (diff, ediff1d, gradient,
trapezoid), convolve/correlate, interp, unwrap, cross, kron, trace.
"""
import builtins
import math

import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.interpreters import Tracer
from funcgrad.core.values import aval_of
from funcgrad.numpy import ufuncs as uf
from funcgrad.numpy._util import (broadcast_to_shape, canonicalize_axis, check_arraylike,
                                  promote_and_broadcast, promote_dtypes, shape_of, to_inexact)


def _asarray(x):
    from funcgrad.numpy.creation import asarray
    return asarray(x)


def _c(value, dt):
    return np.asarray(value, dt)


def _float_int_dtype(dt):
    return np.dtype(f"int{dt.itemsize * 8}") if dt != dtypes.bfloat16 else np.dtype(np.int16)


def _float_layout(dt):
    """(mantissa bits, exponent bias, exponent-field mask) of a float dtype."""
    info = dtypes.finfo(dt)
    nmant = int(info.nmant)
    nexp = dt.itemsize * 8 - 1 - nmant
    return nmant, (1 << (nexp - 1)) - 1, (1 << nexp) - 1


# --- float decomposition ---------------------------------------------------------------------
def frexp(x, /):
    """Mantissa in [0.5, 1) and integer exponent with ``x == m * 2**e`` (0, inf and NaN give
    ``(x, 0)``).

    Example:
        >>> m, e = jnp.frexp(jnp.array([8.0, 0.3]))
    """
    check_arraylike("frexp", x)
    x = to_inexact(promote_dtypes(x)[0])
    dt = aval_of(x).dtype
    if dtypes.is_complex(dt):
        raise TypeError(f"funcgrad.numpy.frexp: complex input {aval_of(x).str_short()} is not "
                        f"supported")
    # Integer arithmetic on the bits: XLA on CPU flushes subnormal floats to zero, so float
    # comparisons and products cannot be used to normalise subnormal inputs.
    idt = _float_int_dtype(dt)
    nbits = dt.itemsize * 8
    nmant, bias, emask = _float_layout(dt)
    shape = aval_of(x).shape
    bits = lax.bitcast_convert_type(x, idt)
    mmask = _c((1 << nmant) - 1, idt)
    sign_bit = np.asarray(1 << (nbits - 1), np.uint64).astype(idt.str.replace("i", "u"))
    sign = lax.bitwise_and(bits, _c(sign_bit.view(idt), idt))
    efield = lax.bitwise_and(lax.shift_right_logical(bits, _c(nmant, idt)), _c(emask, idt))
    mant = lax.bitwise_and(bits, mmask)
    zero = _c(0, idt)
    is_sub = uf.logical_and(lax.eq(efield, zero), lax.ne(mant, zero))
    # highest set bit of a subnormal mantissa, then shift it up to the implicit-one position
    top = lax.sub(_c(nbits - 1, idt), lax.clz(mant))
    shift = lax.select(is_sub, lax.sub(_c(nmant, idt), top), lax.full(shape, 0, idt))
    norm_mant = lax.bitwise_and(lax.shift_left(mant, shift), mmask)
    e = lax.select(is_sub, lax.add(top, _c(2 - bias - nmant, idt)),
                   lax.sub(efield, _c(bias - 1, idt)))
    mbits = lax.bitwise_or(lax.bitwise_or(sign, _c((bias - 1) << nmant, idt)), norm_mant)
    m = lax.bitcast_convert_type(mbits, dt)
    special = uf.logical_or(lax.eq(efield, _c(emask, idt)),
                            uf.logical_and(lax.eq(efield, zero), lax.eq(mant, zero)))
    m = lax.select(special, x, m)
    e = lax.select(special, lax.full(shape, 0, idt), e)
    return m, lax.convert_element_type(e, dtypes.int32)


def _exp2_exact(k, dt):
    """2**k for integer k in the normal exponent range of ``dt``, built from bits (exact)."""
    idt = _float_int_dtype(dt)
    nmant, bias, _ = _float_layout(dt)
    k = lax.convert_element_type(k, idt)
    return lax.bitcast_convert_type(lax.shift_left(lax.add(k, _c(bias, idt)), _c(nmant, idt)),
                                    dt)


def ldexp(x1, x2, /):
    """``x1 * 2**x2`` computed exactly (x2 integer), as NumPy.

    Example:
        >>> jnp.ldexp(jnp.array([0.5, 1.0]), jnp.array([3, -1]))
        Array([4. , 0.5], dtype=float32)
    """
    check_arraylike("ldexp", x1, x2)
    x2d = aval_of(x2).dtype
    if not (dtypes.is_integer(x2d) or x2d == dtypes.bool_):
        raise TypeError(f"funcgrad.numpy.ldexp: the exponent must be an integer array, got "
                        f"{aval_of(x2).str_short()}")
    x = to_inexact(promote_dtypes(x1)[0])
    dt = aval_of(x).dtype
    shape = broadcast_shapes2("ldexp", shape_of(x), shape_of(x2))
    x = broadcast_to_shape(x, shape)
    k = broadcast_to_shape(lax.convert_element_type(promote_dtypes(x2)[0], dtypes.int32),
                           shape)
    _, bias, _ = _float_layout(dt)
    lo, hi = 1 - bias, bias
    # Apply the factor in three exact steps so results that are subnormal or overflow round once.
    k = lax.clamp(_c(3 * lo, np.int32), k, _c(3 * hi, np.int32))
    out = x
    for _ in range(3):
        step = lax.clamp(_c(lo, np.int32), k, _c(hi, np.int32))
        out = lax.mul(out, _exp2_exact(step, dt))
        k = lax.sub(k, step)
    return out


def broadcast_shapes2(fname, *shapes):
    from funcgrad.numpy._util import broadcast_shapes
    return broadcast_shapes(fname, *shapes)


def modf(x, /):
    """Fractional and integral parts, both with the sign of ``x`` (``modf(inf) == (0, inf)``).

    Example:
        >>> jnp.modf(jnp.array([-2.5, 3.25]))
        (Array([-0.5 ,  0.25], dtype=float32), Array([-2.,  3.], dtype=float32))
    """
    check_arraylike("modf", x)
    x = to_inexact(promote_dtypes(x)[0])
    whole = uf.trunc(x)
    frac = uf.copysign(lax.sub(x, whole), x)
    frac = lax.select(uf.isinf(x), uf.copysign(lax.full(aval_of(x).shape, 0, aval_of(x).dtype),
                                               x), frac)
    return frac, whole


def spacing(x, /):
    """Distance from ``x`` to the next float away from zero (negative for negative ``x``).

    Example:
        >>> jnp.spacing(jnp.array(1.0)) == jnp.finfo(jnp.float32).eps
        Array(True, dtype=bool)
    """
    check_arraylike("spacing", x)
    x = to_inexact(promote_dtypes(x)[0])
    dt = aval_of(x).dtype
    away = uf.copysign(lax.full(aval_of(x).shape, np.inf, dt), x)
    return lax.sub(lax.nextafter(x, away), x)


def logaddexp2(x1, x2, /):
    """``log2(2**x1 + 2**x2)`` computed stably. Example: ``jnp.logaddexp2(x, y)``."""
    check_arraylike("logaddexp2", x1, x2)
    a, b = promote_and_broadcast("logaddexp2", x1, x2)
    a, b = to_inexact(a), to_inexact(b)
    dt = aval_of(a).dtype
    ln2 = _c(np.log(2), dt)
    return lax.div(uf.logaddexp(lax.mul(a, ln2), lax.mul(b, ln2)), ln2)


def fabs(x, /):
    """Absolute value of real input, as a float. Example: ``jnp.fabs(-2)``."""
    check_arraylike("fabs", x)
    x = to_inexact(promote_dtypes(x)[0])
    if dtypes.is_complex(aval_of(x).dtype):
        raise TypeError("funcgrad.numpy.fabs: complex input is not supported; use jnp.abs")
    return lax.abs(x)


def bitwise_count(x, /):
    """Number of 1 bits in ``|x|`` (as ``np.bitwise_count``), as uint8.

    Example:
        >>> jnp.bitwise_count(jnp.array([7, -1]))
        Array([3, 1], dtype=uint8)
    """
    check_arraylike("bitwise_count", x)
    x = promote_dtypes(x)[0]
    dt = aval_of(x).dtype
    if dt == dtypes.bool_:
        x = lax.convert_element_type(x, np.uint8)
    elif not dtypes.is_integer(dt):
        raise TypeError(f"funcgrad.numpy.bitwise_count: integer input needed, got "
                        f"{aval_of(x).str_short()}")
    elif dtypes.is_signed(dt):
        x = uf.abs(x)
    return lax.convert_element_type(lax.population_count(x), np.uint8)


def _i0_series_coeffs(n):
    return [1.0 / math.factorial(k) ** 2 for k in range(n)]


def i0(x, /):
    """Modified Bessel function of the first kind, order 0.

    A power series in ``(x/2)**2`` for ``|x| <= 20`` (15 in float32) and the asymptotic
    series beyond.

    Example:
        >>> jnp.i0(jnp.array([0.0, 1.0]))
        Array([1.       , 1.2660658], dtype=float32)
    """
    check_arraylike("i0", x)
    x = to_inexact(promote_dtypes(x)[0])
    dt = aval_of(x).dtype
    if dtypes.is_complex(dt):
        raise TypeError("funcgrad.numpy.i0: complex input is not supported")
    cdt = dt if dt.itemsize >= 4 else np.dtype(np.float32)
    ax = lax.abs(lax.convert_element_type(x, cdt))
    f64 = cdt == np.float64
    limit = 20.0 if f64 else 15.0
    small = lax.le(ax, _c(limit, cdt))
    xs = lax.select(small, ax, lax.full(aval_of(ax).shape, 1.0, cdt))
    t = lax.mul(lax.mul(xs, xs), _c(0.25, cdt))
    nterms = 48 if f64 else 30
    acc = lax.full(aval_of(t).shape, 0.0, cdt)
    for c in reversed(_i0_series_coeffs(nterms)):
        acc = lax.add(lax.mul(acc, t), _c(c, cdt))
    xl = lax.select(small, lax.full(aval_of(ax).shape, limit + 1.0, cdt), ax)
    inv = lax.div(_c(1.0, cdt), lax.mul(xl, _c(8.0, cdt)))
    # sum_k ((2k-1)!!)^2 / (k! (8x)^k)
    coeffs, c = [1.0], 1.0
    for k in range(1, 20 if f64 else 10):
        c = c * (2 * k - 1) ** 2 / k
        coeffs.append(c)
    asym = lax.full(aval_of(ax).shape, 0.0, cdt)
    for c in reversed(coeffs):
        asym = lax.add(lax.mul(asym, inv), _c(c, cdt))
    # e^x / sqrt(2 pi x) without overflowing early: exp(x/2)^2
    half = lax.exp(lax.mul(xl, _c(0.5, cdt)))
    large = lax.mul(lax.mul(half, lax.div(asym, lax.sqrt(lax.mul(xl, _c(2 * np.pi, cdt))))),
                    half)
    out = lax.select(small, acc, large)
    return lax.convert_element_type(out, dt)


# --- complex predicates ----------------------------------------------------------------------
def iscomplexobj(x):
    """Whether ``x`` has a complex dtype. Example: ``jnp.iscomplexobj(1j)``."""
    try:
        return dtypes.is_complex(aval_of(x).dtype)
    except TypeError:
        return dtypes.is_complex(np.asarray(x).dtype)


def isrealobj(x):
    """Whether ``x`` has a non-complex dtype. Example: ``jnp.isrealobj(1.0)``."""
    return not iscomplexobj(x)


def iscomplex(x, /):
    """Elementwise: True where the imaginary part is nonzero. Example: ``jnp.iscomplex(z)``."""
    x = promote_dtypes(x)[0]
    if not dtypes.is_complex(aval_of(x).dtype):
        return lax.full(aval_of(x).shape, False, dtypes.bool_)
    return lax.ne(lax.imag(x), _c(0, dtypes.real_dtype(aval_of(x).dtype)))


def isreal(x, /):
    """Elementwise: True where the imaginary part is zero. Example: ``jnp.isreal(z)``."""
    return uf.logical_not(iscomplex(x))


def real_if_close(a, tol=100):
    """``a.real`` if every imaginary part is within ``tol`` machine epsilons of 0 (needs a
    concrete array), else ``a``.

    Example:
        >>> jnp.real_if_close(jnp.array([1 + 1e-10j]))
        Array([1.], dtype=float32)
    """
    a = _asarray(a)
    dt = aval_of(a).dtype
    if not dtypes.is_complex(dt):
        return a
    if tol > 1:
        tol = dtypes.finfo(dtypes.real_dtype(dt)).eps * tol
    imag_part = lax.imag(a)
    if isinstance(a, Tracer) and not hasattr(a, "_value"):
        raise TypeError("funcgrad.numpy.real_if_close: the result dtype depends on the values; "
                        "it needs a concrete array (not a tracer)")
    if bool(np.all(np.abs(np.asarray(imag_part)) < tol)):
        return lax.real(a)
    return a


# --- comparisons of whole arrays ---------------------------------------------------------------
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|a - b| <= atol + rtol * |b|`` (infinities must match exactly).

    Example:
        >>> jnp.isclose(jnp.array([1.0, jnp.nan]), jnp.array([1.0 + 1e-7, jnp.nan]),
        ...             equal_nan=True)
        Array([ True,  True], dtype=bool)
    """
    check_arraylike("isclose", a, b)
    a, b = promote_and_broadcast("isclose", a, b)
    dt = aval_of(a).dtype
    if not dtypes.is_inexact(dt):
        if dt == dtypes.bool_:
            return lax.eq(a, b)
        a, b = to_inexact(a), to_inexact(b)
        dt = aval_of(a).dtype
    rdt = dtypes.real_dtype(dt)
    diff = uf.abs(lax.sub(a, b))
    tol = lax.add(_c(atol, rdt), lax.mul(_c(rtol, rdt), uf.abs(b)))
    finite = uf.logical_and(uf.isfinite(a), uf.isfinite(b))
    close = uf.logical_and(finite, lax.le(diff, tol))
    # infinities: close only if equal
    both_inf = uf.logical_and(uf.logical_not(finite), lax.eq(a, b))
    out = uf.logical_or(close, both_inf)
    if equal_nan:
        out = uf.logical_or(out, uf.logical_and(uf.isnan(a), uf.isnan(b)))
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether all elements are close (see isclose). Example: ``jnp.allclose(x, y)``."""
    from funcgrad.numpy.reductions import all as _all
    return _all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan=False):
    """Whether the arrays have the same shape and elements. Example: ``jnp.array_equal(x, y)``."""
    from funcgrad.numpy.reductions import all as _all
    try:
        a1, a2 = _asarray(a1), _asarray(a2)
    except Exception:  # noqa: BLE001  (NumPy returns False for inputs it cannot compare)
        return False
    if shape_of(a1) != shape_of(a2):
        return _asarray(False)
    eq = uf.equal(a1, a2)
    if equal_nan:
        eq = uf.logical_or(eq, uf.logical_and(uf.isnan(a1), uf.isnan(a2)))
    return _all(eq)


def array_equiv(a1, a2):
    """Whether the arrays are equal after broadcasting. Example: ``jnp.array_equiv(x, 1)``."""
    from funcgrad.numpy.reductions import all as _all
    a1, a2 = _asarray(a1), _asarray(a2)
    try:
        np.broadcast_shapes(shape_of(a1), shape_of(a2))
    except ValueError:
        return _asarray(False)
    return _all(uf.equal(a1, a2))


# --- differences and integrals ---------------------------------------------------------------
def _slice_axis(x, axis, start, stop):
    av = aval_of(x)
    starts = [0] * av.ndim
    limits = list(av.shape)
    starts[axis], limits[axis] = start, stop
    return lax.slice(x, starts, limits)


def diff(a, n=1, axis=-1, prepend=None, append=None):
    """``n``-th discrete difference along ``axis`` (bool input: ``!=``).

    Example:
        >>> jnp.diff(jnp.array([1, 4, 9, 16]))
        Array([3, 5, 7], dtype=int32)
    """
    check_arraylike("diff", a)
    a = promote_dtypes(a)[0]
    av = aval_of(a)
    if av.ndim == 0:
        raise ValueError("funcgrad.numpy.diff: diff requires input that is at least one "
                         "dimensional")
    axis = canonicalize_axis("diff", axis, av.ndim)
    if n < 0:
        raise ValueError(f"funcgrad.numpy.diff: order must be non-negative, got n={n}")
    parts = []
    for extra in (prepend, None, append):
        if extra is None:
            continue
        e = _asarray(extra)
        if aval_of(e).ndim == 0:
            shp = list(av.shape)
            shp[axis] = 1
            e = broadcast_to_shape(e, tuple(shp))
        parts.append(e)
    if prepend is not None or append is not None:
        from funcgrad.numpy.shape_ops import concatenate
        seq = ([parts[0]] if prepend is not None else []) + [a] + \
            ([parts[-1]] if append is not None else [])
        a = concatenate(seq, axis=axis)
    for _ in range(n):
        length = aval_of(a).shape[axis]
        if length == 0:
            break
        hi, lo = _slice_axis(a, axis, 1, length), _slice_axis(a, axis, 0, length - 1)
        a = lax.ne(hi, lo) if aval_of(a).dtype == dtypes.bool_ else lax.sub(hi, lo)
    return a


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of the flattened array, with optional values before and after.

    Example:
        >>> jnp.ediff1d(jnp.array([1, 2, 4]), to_begin=0)
        Array([0, 1, 2], dtype=int32)
    """
    from funcgrad.numpy.shape_ops import concatenate, ravel
    a = ravel(_asarray(ary))
    d = diff(a)
    dt = aval_of(d).dtype
    seq = []
    if to_begin is not None:
        seq.append(lax.convert_element_type(ravel(_asarray(to_begin)), dt))
    seq.append(d)
    if to_end is not None:
        seq.append(lax.convert_element_type(ravel(_asarray(to_end)), dt))
    return concatenate(seq) if len(seq) > 1 else d


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """Integral of ``y`` along ``axis`` by the trapezoidal rule (samples at ``x`` or spacing
    ``dx``).

    Example:
        >>> jnp.trapezoid(jnp.array([1.0, 2.0, 3.0]))
        Array(4., dtype=float32)
    """
    from funcgrad.numpy.reductions import sum as _sum
    check_arraylike("trapezoid", y)
    y = to_inexact(promote_dtypes(y)[0])
    av = aval_of(y)
    axis = canonicalize_axis("trapezoid", axis, av.ndim)
    n = av.shape[axis]
    avg = lax.mul(lax.add(_slice_axis(y, axis, 1, n), _slice_axis(y, axis, 0, n - 1)),
                  _c(0.5, av.dtype))
    if x is None:
        return uf.multiply(_sum(avg, axis=axis), dx)
    x = _asarray(x)
    if aval_of(x).ndim == 1:
        d = diff(x)
        shp = [1] * av.ndim
        shp[axis] = aval_of(d).shape[0]
        d = lax.reshape(d, shp)
    else:
        d = diff(x, axis=axis)
    return _sum(uf.multiply(avg, d), axis=axis)


def gradient(f, *varargs, axis=None, edge_order=1):
    """Gradient by second-order central differences inside and one-sided differences of order
    ``edge_order`` (1 or 2) at the edges; spacings are scalars or coordinate arrays.

    Example:
        >>> jnp.gradient(jnp.array([1.0, 2.0, 4.0, 7.0]))
        Array([1. , 1.5, 2.5, 3. ], dtype=float32)
    """
    check_arraylike("gradient", f)
    f = to_inexact(promote_dtypes(f)[0])
    av = aval_of(f)
    if axis is None:
        axes = tuple(range(av.ndim))
    elif isinstance(axis, (tuple, list)):
        axes = tuple(canonicalize_axis("gradient", a, av.ndim) for a in axis)
    else:
        axes = (canonicalize_axis("gradient", axis, av.ndim),)
    if len(varargs) == 0:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and aval_of(varargs[0]).ndim == 0:
        spacings = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError(f"funcgrad.numpy.gradient: got {len(varargs)} spacings for "
                        f"{len(axes)} axes")
    if edge_order not in (1, 2):
        raise ValueError("funcgrad.numpy.gradient: edge_order must be 1 or 2")
    outs = []
    for ax, h in zip(axes, spacings):
        outs.append(_gradient_axis(f, ax, h, edge_order))
    return outs[0] if len(outs) == 1 else outs


def _gradient_axis(f, ax, h, edge_order):
    from funcgrad.numpy.shape_ops import concatenate
    av = aval_of(f)
    n = av.shape[ax]
    if n < edge_order + 1:
        raise ValueError(f"funcgrad.numpy.gradient: shape {av.shape} is too small along axis "
                         f"{ax} for edge_order={edge_order} (needs at least {edge_order + 1})")
    dt = av.dtype
    s = lambda a, b: _slice_axis(f, ax, a, b)  # noqa: E731

    def along(v):
        shp = [1] * av.ndim
        shp[ax] = aval_of(v).shape[0]
        return lax.reshape(lax.convert_element_type(v, dt), shp)

    uniform = aval_of(h).ndim == 0
    if uniform:
        h = _asarray(h)
        h = lax.convert_element_type(h, dt)
        inner = uf.divide(lax.sub(s(2, n), s(0, n - 2)), lax.mul(h, _c(2, dt)))
        if edge_order == 1:
            first = uf.divide(lax.sub(s(1, 2), s(0, 1)), h)
            last = uf.divide(lax.sub(s(n - 1, n), s(n - 2, n - 1)), h)
        else:
            first = uf.divide(lax.add(lax.add(lax.mul(s(0, 1), _c(-1.5, dt)),
                                              lax.mul(s(1, 2), _c(2.0, dt))),
                                      lax.mul(s(2, 3), _c(-0.5, dt))), h)
            last = uf.divide(lax.add(lax.add(lax.mul(s(n - 3, n - 2), _c(0.5, dt)),
                                             lax.mul(s(n - 2, n - 1), _c(-2.0, dt))),
                                     lax.mul(s(n - 1, n), _c(1.5, dt))), h)
        return concatenate([first, inner, last], axis=ax)
    x = lax.convert_element_type(_asarray(h), dt)
    dx = diff(x)
    h1, h2 = along(_slice1(dx, 0, n - 2)), along(_slice1(dx, 1, n - 1))
    a = uf.negative(uf.divide(h2, uf.multiply(h1, uf.add(h1, h2))))
    b = uf.divide(uf.subtract(h2, h1), uf.multiply(h1, h2))
    c = uf.divide(h1, uf.multiply(h2, uf.add(h1, h2)))
    inner = uf.add(uf.add(uf.multiply(a, s(0, n - 2)), uf.multiply(b, s(1, n - 1))),
                    uf.multiply(c, s(2, n)))
    d0, dl = along(_slice1(dx, 0, 1)), along(_slice1(dx, n - 2, n - 1))
    if edge_order == 1:
        first = uf.divide(uf.subtract(s(1, 2), s(0, 1)), d0)
        last = uf.divide(uf.subtract(s(n - 1, n), s(n - 2, n - 1)), dl)
    else:
        g1, g2 = d0, along(_slice1(dx, 1, 2))
        a0 = uf.negative(uf.divide(uf.add(uf.multiply(g1, _c(2, dt)), g2), uf.multiply(g1, uf.add(g1, g2))))
        b0 = uf.divide(uf.add(g1, g2), uf.multiply(g1, g2))
        c0 = uf.negative(uf.divide(g1, uf.multiply(g2, uf.add(g1, g2))))
        first = uf.add(uf.add(uf.multiply(a0, s(0, 1)), uf.multiply(b0, s(1, 2))), uf.multiply(c0, s(2, 3)))
        g1, g2 = along(_slice1(dx, n - 3, n - 2)), dl
        al = uf.divide(g2, uf.multiply(g1, uf.add(g1, g2)))
        bl = uf.negative(uf.divide(uf.add(g2, g1), uf.multiply(g1, g2)))
        cl = uf.divide(uf.add(uf.multiply(g2, _c(2, dt)), g1), uf.multiply(g2, uf.add(g1, g2)))
        last = uf.add(uf.add(uf.multiply(al, s(n - 3, n - 2)), uf.multiply(bl, s(n - 2, n - 1))),
                       uf.multiply(cl, s(n - 1, n)))
    return concatenate([first, inner, last], axis=ax)


def _slice1(v, a, b):
    return lax.slice(v, [a], [b])


# --- convolution and correlation (1-D) ---------------------------------------------------------
def _correlate_full(a, v, precision):
    """out[k] = sum_j apad[k + j] * v[j] for the 'full' mode (length n + m - 1)."""
    from funcgrad.numpy.products import matmul
    n, m = aval_of(a).shape[0], aval_of(v).shape[0]
    apad = lax.pad(a, _c(0, aval_of(a).dtype), [(m - 1, m - 1, 0)])
    k = n + m - 1
    idx = np.arange(k)[:, None] + np.arange(m)[None, :]
    from funcgrad.numpy.indexing import take
    windows = take(apad, idx.astype(np.int32), axis=0, mode="clip")
    return matmul(windows, v, precision=precision)


def _mode_slice(out, n, m, mode):
    if mode == "full":
        return out
    total = n + m - 1
    if mode == "same":
        length = builtins.max(n, m)
        start = (total - length) // 2
    elif mode == "valid":
        length = builtins.max(n, m) - builtins.min(n, m) + 1
        start = builtins.min(n, m) - 1
    else:
        raise ValueError(f"funcgrad.numpy.convolve: mode must be 'full', 'same' or 'valid', "
                         f"got {mode!r}")
    return lax.slice(out, [start], [start + length])


def _check_1d(fname, a, v):
    a, v = promote_dtypes(_asarray(a), _asarray(v))
    if aval_of(a).ndim != 1 or aval_of(v).ndim != 1:
        raise ValueError(f"funcgrad.numpy.{fname}: inputs must be 1-D, got "
                         f"{aval_of(a).str_short()} and {aval_of(v).str_short()}")
    if aval_of(a).shape[0] == 0 or aval_of(v).shape[0] == 0:
        raise ValueError(f"funcgrad.numpy.{fname}: inputs cannot be empty")
    if aval_of(a).dtype == dtypes.bool_:
        a, v = (lax.convert_element_type(t, dtypes.default_int()) for t in (a, v))
    return a, v


def convolve(a, v, mode="full", *, precision=None):
    """Discrete linear convolution of two 1-D arrays (``mode``: full, same, valid).

    Example:
        >>> jnp.convolve(jnp.array([1.0, 2.0, 3.0]), jnp.array([0.0, 1.0, 0.5]))
        Array([0. , 1. , 2.5, 4. , 1.5], dtype=float32)
    """
    a, v = _check_1d("convolve", a, v)
    n, m = aval_of(a).shape[0], aval_of(v).shape[0]
    out = _correlate_full(a, lax.rev(v, (0,)), precision)
    return _mode_slice(out, n, m, mode)


def correlate(a, v, mode="valid", *, precision=None):
    """Cross-correlation of two 1-D arrays: ``c[k] = sum_n a[n + k] * conj(v[n])``.

    Example:
        >>> jnp.correlate(jnp.array([1.0, 2.0, 3.0]), jnp.array([0.0, 1.0, 0.5]), "full")
        Array([0.5, 2. , 3.5, 3. , 0. ], dtype=float32)
    """
    a, v = _check_1d("correlate", a, v)
    n, m = aval_of(a).shape[0], aval_of(v).shape[0]
    if dtypes.is_complex(aval_of(v).dtype):
        v = lax.conj(v)
    return _mode_slice(_correlate_full(a, v, precision), n, m, mode)


# --- interpolation -------------------------------------------------------------------------
def _searchsorted_right(sorted_1d, x):
    """Number of elements of sorted_1d <= each x (a broadcast comparison: O(len * size))."""
    from funcgrad.numpy.reductions import sum as _sum
    xe = lax.expand_dims(x, (aval_of(x).ndim,))
    cmp = uf.less_equal(sorted_1d, xe)
    return lax.convert_element_type(_sum(cmp, axis=-1), dtypes.int32)


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of points ``(xp, fp)`` (xp increasing) at ``x``.

    Example:
        >>> jnp.interp(jnp.array([0.5, 2.5]), jnp.array([0.0, 1.0, 3.0]),
        ...            jnp.array([0.0, 10.0, 30.0]))
        Array([ 5., 25.], dtype=float32)
    """
    check_arraylike("interp", x, xp, fp)
    x, xp = promote_dtypes(x, xp)
    x, xp = to_inexact(x), to_inexact(xp)
    fp = to_inexact(promote_dtypes(fp)[0])
    if aval_of(xp).ndim != 1 or aval_of(fp).ndim != 1 or \
            aval_of(xp).shape != aval_of(fp).shape:
        raise ValueError(f"funcgrad.numpy.interp: xp and fp must be 1-D of the same length, got "
                         f"{aval_of(xp).str_short()} and {aval_of(fp).str_short()}")
    dt = aval_of(x).dtype
    if period is not None:
        from funcgrad.lax.sorting import argsort
        period = uf.abs(_asarray(period).astype(dt))
        x = uf.remainder(x, period)
        xp = uf.remainder(xp, period)
        order = argsort(xp)
        from funcgrad.numpy.indexing import take
        xp, fp = take(xp, order, mode="clip"), take(fp, order, mode="clip")
        from funcgrad.numpy.shape_ops import concatenate
        xp = concatenate([lax.sub(lax.slice(xp, [aval_of(xp).shape[0] - 1],
                                            [aval_of(xp).shape[0]]), period), xp,
                          lax.add(lax.slice(xp, [0], [1]), period)])
        fp = concatenate([lax.slice(fp, [aval_of(fp).shape[0] - 1], [aval_of(fp).shape[0]]),
                          fp, lax.slice(fp, [0], [1])])
        left = right = None
    n = aval_of(xp).shape[0]
    from funcgrad.numpy.indexing import take
    i = lax.clamp(_c(1, np.int32), _searchsorted_right(xp, x), _c(n - 1, np.int32)) \
        if n > 1 else lax.full(aval_of(x).shape, 0, np.int32)
    if n == 1:
        out = broadcast_to_shape(lax.reshape(fp, ()), aval_of(x).shape)
    else:
        x0, x1 = take(xp, lax.sub(i, _c(1, np.int32)), mode="clip"), take(xp, i, mode="clip")
        f0, f1 = take(fp, lax.sub(i, _c(1, np.int32)), mode="clip"), take(fp, i, mode="clip")
        dx = lax.sub(x1, x0)
        t = uf.divide(lax.sub(x, x0), dx)
        out = uf.add(f0, uf.multiply(t, uf.subtract(f1, f0)))
        # where neighbouring xp are equal, take the right value (as NumPy)
        out = uf.where(lax.eq(dx, _c(0, dt)), f1, out)
    fdt = aval_of(out).dtype
    first = lax.reshape(lax.slice(xp, [0], [1]), ())
    last = lax.reshape(lax.slice(xp, [n - 1], [n]), ())
    lval = lax.reshape(lax.slice(fp, [0], [1]), ()) if left is None else _c(left, fdt)
    rval = lax.reshape(lax.slice(fp, [n - 1], [n]), ()) if right is None else _c(right, fdt)
    out = uf.where(uf.less(x, first), lval, out)
    out = uf.where(uf.greater(x, last), rval, out)
    return out


def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    """Unwrap phase jumps larger than ``discont`` (default ``period / 2``) along ``axis``.

    Example:
        >>> jnp.unwrap(jnp.array([0.0, 3.0, 6.5]))
        Array([0.      , 3.      , 0.216815], dtype=float32)
    """
    from funcgrad.numpy.reductions import cumsum
    from funcgrad.numpy.shape_ops import concatenate
    check_arraylike("unwrap", p)
    p = to_inexact(promote_dtypes(p)[0])
    av = aval_of(p)
    axis = canonicalize_axis("unwrap", axis, av.ndim)
    dt = av.dtype
    if discont is None:
        discont = period / 2
    dd = diff(p, axis=axis)
    half = period / 2
    ddmod = uf.subtract(uf.remainder(uf.add(dd, half), period), half)
    ddmod = uf.where(uf.logical_and(lax.eq(ddmod, _c(-half, dt)), lax.gt(dd, _c(0, dt))),
                     _c(half, dt), ddmod)
    correction = uf.subtract(ddmod, dd)
    correction = uf.where(uf.less(uf.abs(dd), discont), _c(0, dt), correction)
    shp = list(av.shape)
    shp[axis] = 1
    csum = concatenate([lax.full(tuple(shp), 0, dt), cumsum(correction, axis=axis)], axis=axis)
    return uf.add(p, csum)


# --- products ----------------------------------------------------------------------------
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross product of 3-vectors (or 2-vectors, giving the z component) along the given axes.

    Example:
        >>> jnp.cross(jnp.array([1.0, 0, 0]), jnp.array([0.0, 1, 0]))
        Array([0., 0., 1.], dtype=float32)
    """
    from funcgrad.numpy.shape_ops import moveaxis, stack
    check_arraylike("cross", a, b)
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = promote_dtypes(a, b)
    a = moveaxis(a, axisa, -1)
    b = moveaxis(b, axisb, -1)
    na, nb = aval_of(a).shape[-1], aval_of(b).shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError(f"funcgrad.numpy.cross: incompatible dimensions for cross product "
                         f"(dimension must be 2 or 3), got {na} and {nb}")

    def comp(x, i, n):
        if i >= n:
            return None
        return x[..., i]
    a0, a1, a2 = (comp(a, i, na) for i in range(3))
    b0, b1, b2 = (comp(b, i, nb) for i in range(3))
    if na == 2 and nb == 2:
        return uf.subtract(uf.multiply(a0, b1), uf.multiply(a1, b0))
    z = lambda t: 0 if t is None else t  # noqa: E731
    a2, b2 = z(a2), z(b2)
    c0 = uf.subtract(uf.multiply(a1, b2), uf.multiply(a2, b1))
    c1 = uf.subtract(uf.multiply(a2, b0), uf.multiply(a0, b2))
    c2 = uf.subtract(uf.multiply(a0, b1), uf.multiply(a1, b0))
    c0, c1, c2 = promote_and_broadcast("cross", c0, c1, c2)
    out = stack([c0, c1, c2], axis=-1)
    return moveaxis(out, -1, axisc)


def kron(a, b):
    """Kronecker product. Example: ``jnp.kron(jnp.eye(2), jnp.ones((2, 2)))``."""
    check_arraylike("kron", a, b)
    a, b = promote_dtypes(a, b)
    na, nb = aval_of(a).ndim, aval_of(b).ndim
    nd = builtins.max(na, nb)
    a = lax.reshape(a, (1,) * (nd - na) + aval_of(a).shape)
    b = lax.reshape(b, (1,) * (nd - nb) + aval_of(b).shape)
    sa, sb = aval_of(a).shape, aval_of(b).shape
    a_ex = lax.reshape(a, tuple(d for s in sa for d in (s, 1)))
    b_ex = lax.reshape(b, tuple(d for s in sb for d in (1, s)))
    out = uf.multiply(a_ex, b_ex)
    return lax.reshape(out, tuple(x * y for x, y in zip(sa, sb)))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum along a diagonal. Example: ``jnp.trace(jnp.eye(3))``."""
    from funcgrad.numpy.creation import diagonal
    from funcgrad.numpy.reductions import sum as _sum
    check_arraylike("trace", a)
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)
