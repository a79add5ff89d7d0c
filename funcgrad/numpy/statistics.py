"""Statistics and counting: cov, corrcoef, bincount, digitize, histogram (+ bin edges, 2-D and
N-D).

Result shapes must be static: ``bincount`` takes ``length=`` under jit (eagerly it defaults to
``max(x) + 1``), histograms with an integer ``bins`` and no ``range`` read the data's min and
max as traced values, so they work under jit too.
"""
import builtins

import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.interpreters import Tracer
from funcgrad.core.values import aval_of
from funcgrad.numpy import reductions as red
from funcgrad.numpy import ufuncs as uf
from funcgrad.numpy._util import check_arraylike, promote_dtypes, shape_of, to_inexact


def _asarray(x):
    from funcgrad.numpy.creation import asarray
    return asarray(x)


def _searchsorted(a, v, side="left"):
    """Positions that keep the sorted 1-D ``a`` sorted if ``v`` is inserted (via the sorting
    module when it exists, else a broadcast comparison)."""
    try:
        from funcgrad.numpy.sorting import searchsorted
        return searchsorted(a, v, side=side)
    except ImportError:
        pass
    a, v = promote_dtypes(a, v)
    ve = lax.expand_dims(v, (aval_of(v).ndim,))
    cmp = uf.less_equal(a, ve) if side == "right" else uf.less(a, ve)
    return red.sum(cmp, axis=-1, dtype=dtypes.default_int())


# --- covariance -------------------------------------------------------------------------
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None):
    """Covariance matrix of the variables in the rows (``rowvar=True``) or columns of ``m``.

    Example:
        >>> jnp.cov(jnp.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
        Array([[ 1., -1.],
               [-1.,  1.]], dtype=float32)
    """
    from funcgrad.numpy.products import matmul
    from funcgrad.numpy.shape_ops import atleast_2d, concatenate
    check_arraylike("cov", m)
    X = to_inexact(promote_dtypes(_asarray(m))[0])
    if aval_of(X).ndim > 2:
        raise ValueError(f"funcgrad.numpy.cov: m has more than 2 dimensions "
                         f"({aval_of(X).str_short()})")
    X = atleast_2d(X)
    if not rowvar and aval_of(X).shape[0] != 1:
        X = X.T
    if y is not None:
        Y = atleast_2d(to_inexact(promote_dtypes(_asarray(y))[0]))
        if not rowvar and aval_of(Y).shape[0] != 1:
            Y = Y.T
        X, Y = promote_dtypes(X, Y)
        X = concatenate([X, Y], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    dt = aval_of(X).dtype
    n = aval_of(X).shape[1]
    w = None
    if fweights is not None:
        w = lax.convert_element_type(_asarray(fweights), dtypes.real_dtype(dt))
    if aweights is not None:
        aw = lax.convert_element_type(_asarray(aweights), dtypes.real_dtype(dt))
        w = aw if w is None else uf.multiply(w, aw)
    if w is None:
        avg = red.mean(X, axis=1, keepdims=True)
        fact = np.asarray(n - ddof, dtypes.real_dtype(dt))
    else:
        w_sum = red.sum(w)
        avg = uf.divide(red.sum(uf.multiply(X, w), axis=1, keepdims=True), w_sum)
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = uf.subtract(w_sum, ddof)
        else:
            fact = uf.subtract(w_sum, uf.divide(uf.multiply(ddof, red.sum(uf.multiply(w, aw))),
                                                w_sum))
    Xc = uf.subtract(X, avg)
    Xw = Xc if w is None else uf.multiply(Xc, w)
    c = matmul(Xw, uf.conjugate(Xc).T)
    c = uf.divide(c, fact)
    return lax.reshape(c, ()) if aval_of(c).shape == (1, 1) else c


def corrcoef(x, y=None, rowvar=True):
    """Pearson correlation coefficients (values clipped to [-1, 1]).

    Example:
        >>> jnp.corrcoef(jnp.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.5]])).round(4)
        Array([[ 1.   , -0.982],
               [-0.982,  1.   ]], dtype=float32)
    """
    c = cov(x, y, rowvar)
    if aval_of(c).ndim == 0:
        return uf.divide(c, c)
    from funcgrad.numpy.creation import diagonal
    d = diagonal(c)
    sd = uf.sqrt(uf.real(d))
    c = uf.divide(uf.divide(c, sd[:, None]), sd[None, :])
    if dtypes.is_complex(aval_of(c).dtype):
        return lax.complex(uf.clip(uf.real(c), -1, 1), uf.clip(uf.imag(c), -1, 1))
    return uf.clip(c, -1, 1)


# --- counting ----------------------------------------------------------------------------
def bincount(x, weights=None, minlength=0, *, length=None):
    """Count (or sum ``weights`` of) each non-negative integer in ``x``; ``length`` (static)
    fixes the output size under jit (values beyond it are dropped).

    Example:
        >>> jnp.bincount(jnp.array([0, 1, 1, 3]))
        Array([1, 2, 0, 1], dtype=int32)
    """
    check_arraylike("bincount", x)
    x = promote_dtypes(_asarray(x))[0]
    if not dtypes.is_integer(aval_of(x).dtype) and aval_of(x).dtype != dtypes.bool_:
        raise TypeError(f"funcgrad.numpy.bincount: input must be integers, got "
                        f"{aval_of(x).str_short()}")
    if aval_of(x).ndim != 1:
        raise ValueError(f"funcgrad.numpy.bincount: input must be 1-D, got "
                         f"{aval_of(x).str_short()}")
    if length is None:
        if isinstance(x, Tracer) and not hasattr(x, "_value"):
            raise TypeError("funcgrad.numpy.bincount: the output length depends on max(x); "
                            "pass length=N inside jit")
        host = np.asarray(x)
        if host.size and host.min() < 0:
            raise ValueError("funcgrad.numpy.bincount: input must be non-negative")
        length = builtins.max(int(host.max()) + 1 if host.size else 0, minlength)
    length = int(length)
    if weights is None:
        vals = lax.full(shape_of(x), 1, dtypes.default_int())
        out = lax.full((length,), 0, dtypes.default_int())
    else:
        vals = _asarray(weights)
        vals = promote_dtypes(vals)[0]
        if dtypes.is_integer(aval_of(vals).dtype) or aval_of(vals).dtype == dtypes.bool_:
            vals = lax.convert_element_type(vals, dtypes.default_float())
        out = lax.full((length,), 0, aval_of(vals).dtype)
    xi = lax.convert_element_type(x, dtypes.int32)
    xi = uf.where(uf.less(xi, 0), np.int32(length), xi)
    return out.at[xi].add(vals, mode="drop")


def digitize(x, bins, right=False):
    """Index of the bin of each ``x`` (``bins`` increasing or decreasing), as ``np.digitize``.

    Example:
        >>> jnp.digitize(jnp.array([0.5, 1.5, 3.0]), jnp.array([0.0, 1.0, 2.0]))
        Array([1, 2, 3], dtype=int32)
    """
    check_arraylike("digitize", x, bins)
    x, bins = promote_dtypes(_asarray(x), _asarray(bins))
    if aval_of(bins).ndim != 1:
        raise ValueError(f"funcgrad.numpy.digitize: bins must be 1-D, got "
                         f"{aval_of(bins).str_short()}")
    n = aval_of(bins).shape[0]
    side = "left" if right else "right"
    if n < 2:
        return _searchsorted(bins, x, side=side)
    first, last = bins[0], bins[n - 1]
    inc = _searchsorted(bins, x, side=side)
    dec = uf.subtract(n, _searchsorted(lax.rev(bins, (0,)), x, side=side))
    return uf.where(uf.less_equal(first, last), inc, dec)


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The bin edges ``histogram`` would use. Example: ``jnp.histogram_bin_edges(x, 5)``."""
    from funcgrad.numpy.creation import linspace
    from funcgrad.numpy.shape_ops import ravel
    a = to_inexact(promote_dtypes(ravel(_asarray(a)))[0])
    if not isinstance(bins, int):
        b = to_inexact(promote_dtypes(_asarray(bins))[0])
        if aval_of(b).ndim != 1:
            raise ValueError("funcgrad.numpy.histogram_bin_edges: bins must be an int or 1-D")
        return b
    if bins < 1:
        raise ValueError(f"funcgrad.numpy.histogram_bin_edges: bins must be positive, got {bins}")
    dt = aval_of(a).dtype
    if range is None:
        lo, hi = (red.min(a), red.max(a)) if aval_of(a).size else (np.asarray(0.0, dt),
                                                                    np.asarray(1.0, dt))
    else:
        lo, hi = np.asarray(range[0], dt), np.asarray(range[1], dt)
    same = uf.equal(lo, hi)
    lo = uf.where(same, uf.subtract(lo, 0.5), lo)
    hi = uf.where(same, uf.add(hi, 0.5), hi)
    return linspace(lo, hi, bins + 1, dtype=dt)


def _bin_index(a, edges):
    """Bin of each value (right edge of the last bin included), or ``nbins`` when outside."""
    nb = aval_of(edges).shape[0] - 1
    idx = uf.subtract(_searchsorted(edges, a, side="right"), 1)
    idx = uf.where(uf.equal(a, edges[nb]), nb - 1, idx)
    outside = uf.logical_or(uf.less(idx, 0), uf.greater_equal(idx, nb))
    outside = uf.logical_or(outside, uf.isnan(a))
    return uf.where(outside, nb, idx)


def histogram(a, bins=10, range=None, weights=None, density=None):
    """Counts (or summed ``weights``) per bin and the bin edges, as ``np.histogram``.

    Example:
        >>> counts, edges = jnp.histogram(jnp.array([0.0, 0.5, 1.0, 2.0]), bins=2)
    """
    from funcgrad.numpy.shape_ops import ravel
    check_arraylike("histogram", a)
    a = to_inexact(promote_dtypes(ravel(_asarray(a)))[0])
    edges = histogram_bin_edges(a, bins, range)
    a, edges = promote_dtypes(a, edges)
    nb = aval_of(edges).shape[0] - 1
    idx = _bin_index(a, edges)
    w = ravel(_asarray(weights)) if weights is not None else None
    counts = bincount(idx, w, length=nb)
    if density:
        counts = to_inexact(counts)
        widths = uf.subtract(edges[1:], edges[:-1])
        counts = uf.divide(uf.divide(counts, red.sum(counts)), widths)
    elif weights is None:
        counts = counts
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """N-dimensional histogram of the rows of ``sample`` (shape (N, D)).

    Example:
        >>> h, edges = jnp.histogramdd(jnp.ones((4, 2)), bins=3)
    """
    from funcgrad.numpy.shape_ops import reshape
    sample = to_inexact(promote_dtypes(_asarray(sample))[0])
    if aval_of(sample).ndim == 1:
        sample = sample[:, None]
    d = aval_of(sample).shape[1]
    bins_list = bins if isinstance(bins, (list, tuple)) else [bins] * d
    ranges = range if range is not None else [None] * d
    edges, idxs = [], []
    for k in builtins.range(d):
        col = sample[:, k]
        e = histogram_bin_edges(col, bins_list[k], ranges[k])
        col, e = promote_dtypes(col, e)
        edges.append(e)
        idxs.append(_bin_index(col, e))
    nbs = [aval_of(e).shape[0] - 1 for e in edges]
    total = int(np.prod(nbs))
    flat = None
    outside = None
    for i, nb in zip(idxs, nbs):
        o = uf.equal(i, nb)
        outside = o if outside is None else uf.logical_or(outside, o)
        flat = i if flat is None else uf.add(uf.multiply(flat, nb), i)
    flat = uf.where(outside, total, flat)
    counts = bincount(flat, weights, length=total)
    h = reshape(counts, tuple(nbs))
    if density:
        h = to_inexact(h)
        h = uf.divide(h, red.sum(h))
        for k, e in enumerate(edges):
            shp = [1] * d
            shp[k] = nbs[k]
            h = uf.divide(h, reshape(uf.subtract(e[1:], e[:-1]), tuple(shp)))
    return h, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """2-D histogram of points ``(x, y)``; returns ``(H, xedges, yedges)``.

    Example:
        >>> H, xe, ye = jnp.histogram2d(jnp.array([0.0, 1.0]), jnp.array([1.0, 0.0]), bins=2)
    """
    from funcgrad.numpy.shape_ops import stack
    x, y = promote_dtypes(_asarray(x), _asarray(y))
    h, (ex, ey) = histogramdd(stack([x, y], axis=1), bins, range, weights, density)
    return h, ex, ey
