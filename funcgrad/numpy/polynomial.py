"""Polynomials as coefficient arrays, highest power first (NumPy's ``poly*`` functions):
polyval, polyadd, polysub, polymul, polydiv, polyder, polyint, poly, polyfit, roots.

Example:
    >>> jnp.polyval(jnp.array([1.0, 0.0, -1.0]), jnp.array([2.0, 3.0]))
    Array([3., 8.], dtype=float32)
"""
import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.interpreters import Tracer
from funcgrad.core.values import aval_of
from funcgrad.numpy import ufuncs as uf
from funcgrad.numpy._util import check_arraylike, promote_dtypes, to_inexact


def _asarray(x):
    from funcgrad.numpy.creation import asarray
    return asarray(x)


def _coeffs(fname, p):
    check_arraylike(fname, p)
    p = promote_dtypes(_asarray(p))[0]
    if aval_of(p).ndim == 0:
        p = lax.reshape(p, (1,))
    if aval_of(p).ndim != 1:
        raise ValueError(f"funcgrad.numpy.{fname}: coefficients must be 1-D, got "
                         f"{aval_of(p).str_short()}")
    return p


def polyval(p, x, *, unroll=16):
    """Evaluate the polynomial with coefficients ``p`` at ``x`` (Horner's rule).

    Example:
        >>> jnp.polyval(jnp.array([3.0, 0.0, 1.0]), 2.0)
        Array(13., dtype=float32)
    """
    check_arraylike("polyval", p, x)
    p, x = promote_dtypes(_coeffs("polyval", p), x)
    n = aval_of(p).shape[0]
    out = uf.multiply(lax.full((), 0, aval_of(p).dtype), x)
    for i in range(n):
        out = uf.add(uf.multiply(out, x), p[i])
    return out


def _pad_front(p, n):
    k = aval_of(p).shape[0]
    if k >= n:
        return p
    return lax.pad(p, np.zeros((), aval_of(p).dtype), [(n - k, 0, 0)])


def polyadd(a1, a2):
    """Sum of two polynomials. Example: ``jnp.polyadd(jnp.array([1, 2]), jnp.array([1, 0, 0]))``."""
    a, b = promote_dtypes(_coeffs("polyadd", a1), _coeffs("polyadd", a2))
    n = max(aval_of(a).shape[0], aval_of(b).shape[0])
    return lax.add(_pad_front(a, n), _pad_front(b, n))


def polysub(a1, a2):
    """Difference of two polynomials. Example: ``jnp.polysub(p, q)``."""
    a, b = promote_dtypes(_coeffs("polysub", a1), _coeffs("polysub", a2))
    n = max(aval_of(a).shape[0], aval_of(b).shape[0])
    return lax.sub(_pad_front(a, n), _pad_front(b, n))


def polymul(a1, a2, *, trim_leading_zeros=False):
    """Product of two polynomials (a full convolution of the coefficients).

    Example:
        >>> jnp.polymul(jnp.array([1.0, 1.0]), jnp.array([1.0, -1.0]))
        Array([ 1.,  0., -1.], dtype=float32)
    """
    from funcgrad.numpy.math_extra import convolve
    a, b = promote_dtypes(_coeffs("polymul", a1), _coeffs("polymul", a2))
    return convolve(a, b)


def polydiv(u, v, *, trim_leading_zeros=False):
    """Quotient and remainder of polynomial division (a static number of steps).

    Example:
        >>> q, r = jnp.polydiv(jnp.array([1.0, 0.0, -1.0]), jnp.array([1.0, 1.0]))
    """
    u, v = promote_dtypes(_coeffs("polydiv", u), _coeffs("polydiv", v))
    u, v = to_inexact(u), to_inexact(v)
    m, n = aval_of(u).shape[0], aval_of(v).shape[0]
    dt = aval_of(u).dtype
    scale = uf.divide(np.ones((), dt), v[0])
    q = lax.full((max(m - n + 1, 1),), 0, dt)
    r = u
    for k in range(max(m - n + 1, 0)):
        d = uf.multiply(scale, r[k])
        q = q.at[k].set(d)
        r = r.at[k:k + n].add(uf.negative(uf.multiply(d, v)))
    return q, r


def polyder(p, m=1):
    """The ``m``-th derivative of a polynomial. Example: ``jnp.polyder(jnp.array([1.0, 2.0, 3.0]))``."""
    p = _coeffs("polyder", p)
    if m < 0:
        raise ValueError(f"funcgrad.numpy.polyder: order must be non-negative, got m={m}")
    for _ in range(m):
        n = aval_of(p).shape[0]
        if n <= 1:
            return lax.full((1,), 0, aval_of(p).dtype)
        powers = np.arange(n - 1, 0, -1)
        p = uf.multiply(lax.slice(p, [0], [n - 1]), _asarray(powers.astype(
            aval_of(p).dtype if not aval_of(p).dtype == dtypes.bool_ else np.int32)))
    return p


def polyint(p, m=1, k=None):
    """The ``m``-th antiderivative, with integration constants ``k`` (default 0).

    Example:
        >>> jnp.polyint(jnp.array([3.0, 2.0, 1.0]))
        Array([1., 1., 1., 0.], dtype=float32)
    """
    p = to_inexact(_coeffs("polyint", p))
    dt = aval_of(p).dtype
    ks = np.zeros(m) if k is None else np.broadcast_to(np.asarray(k), (m,))
    for i in range(m):
        n = aval_of(p).shape[0]
        p = uf.divide(p, _asarray(np.arange(n, 0, -1).astype(dt)))
        p = lax.concatenate([p, lax.convert_element_type(
            lax.reshape(_asarray(ks[i]), (1,)), dt)], 0)
    return p


def poly(seq_of_zeros):
    """Coefficients of the monic polynomial with the given roots (or of a square matrix's
    characteristic polynomial).

    Example:
        >>> jnp.poly(jnp.array([1.0, 2.0]))
        Array([ 1., -3.,  2.], dtype=float32)
    """
    z = promote_dtypes(_asarray(seq_of_zeros))[0]
    av = aval_of(z)
    if av.ndim == 2 and av.shape[0] == av.shape[1] and av.shape[0] > 0:
        from funcgrad.numpy import linalg
        z = linalg.eigvals(z)
    elif av.ndim != 1:
        raise ValueError(f"funcgrad.numpy.poly: input must be 1-D or a square 2-D array, got "
                         f"{av.str_short()}")
    z = to_inexact(z)
    dt = aval_of(z).dtype
    out = lax.full((1,), 1, dt)
    for i in range(aval_of(z).shape[0]):
        out = polymul(out, lax.concatenate([lax.full((1,), 1, dt),
                                            lax.reshape(uf.negative(z[i]), (1,))], 0))
    return out


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least-squares polynomial fit of degree ``deg`` (needs ``funcgrad.numpy.linalg.lstsq``).

    Example:
        >>> jnp.polyfit(jnp.array([0.0, 1.0, 2.0]), jnp.array([1.0, 3.0, 5.0]), 1).round(4)
        Array([2., 1.], dtype=float32)
    """
    from funcgrad.numpy import linalg
    from funcgrad.numpy.index_tricks import vander
    x, y = promote_dtypes(to_inexact(_asarray(x)), to_inexact(_asarray(y)))
    if full or cov:
        raise ValueError("funcgrad.numpy.polyfit: full=True and cov=True are not supported")
    A = vander(x, deg + 1)
    b = y
    if w is not None:
        w = _asarray(w)
        A = uf.multiply(A, w[:, None])
        b = uf.multiply(b, w if aval_of(b).ndim == 1 else w[:, None])
    # column scaling improves the conditioning, as NumPy does
    from funcgrad.numpy.reductions import sum as _sum
    scale = uf.sqrt(_sum(uf.multiply(A, A), axis=0))
    scale = uf.where(uf.equal(scale, 0), 1, scale)
    c = linalg.lstsq(uf.divide(A, scale), b, rcond=rcond)[0]
    return uf.divide(c, scale if aval_of(c).ndim == 1 else scale[:, None])


def roots(p, *, strip_zeros=True):
    """Roots of a polynomial (eigenvalues of its companion matrix; complex result). Leading and
    trailing zeros need a concrete ``p`` to strip.

    Example:
        >>> jnp.roots(jnp.array([1.0, -3.0, 2.0]))
        Array([2.+0.j, 1.+0.j], dtype=complex64)
    """
    from funcgrad.numpy import linalg
    p = to_inexact(_coeffs("roots", p))
    if strip_zeros and not (isinstance(p, Tracer) and not hasattr(p, "_value")):
        host = np.asarray(p)
        nz = np.flatnonzero(host)
        if nz.size == 0:
            return _asarray(np.zeros(0, dtypes.complex_dtype(aval_of(p).dtype)))
        trailing = host.shape[0] - nz[-1] - 1
        p = lax.slice(p, [int(nz[0])], [int(nz[-1]) + 1])
    else:
        trailing = 0
    n = aval_of(p).shape[0] - 1
    dt = aval_of(p).dtype
    cdt = dtypes.complex_dtype(dt) if not dtypes.is_complex(dt) else dt
    if n < 1:
        r = lax.full((0,), 0, cdt)
    else:
        first_row = uf.divide(uf.negative(lax.slice(p, [1], [n + 1])), p[0])
        comp = lax.concatenate([lax.reshape(first_row, (1, n)),
                                lax.full((n - 1, n), 0, dt)], 0)
        if n > 1:
            from funcgrad.numpy.creation import eye
            sub = lax.pad(eye(n - 1, dtype=dt), np.zeros((), dt), [(1, 0, 0), (0, 1, 0)])
            comp = uf.add(comp, sub)
        r = lax.convert_element_type(linalg.eigvals(comp), cdt)
    if trailing:
        r = lax.concatenate([r, lax.full((int(trailing),), 0, cdt)], 0)
    return r
