"""Structured matrices of ``scipy.linalg`` (Toeplitz, Hankel, circulant, Hadamard, Hilbert,
Helmert, companion, DFT, Leslie), built from gathers of their defining vectors so they are
differentiable in those vectors and work under ``jit``/``vmap``."""
import math

import numpy as np

import funcgrad.numpy as jnp
from funcgrad.core import dtypes


def _vector(name, v, what):
    v = jnp.asarray(v)
    if v.ndim != 1:
        v = jnp.ravel(v)
    if v.shape[0] == 0:
        raise ValueError(f"scipy.linalg.{name}: {what} must not be empty")
    return v


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column ``c`` and first row ``r`` (default ``conj(c)``;
    ``r[0]`` is ignored).

    Example:
        >>> from funcgrad.scipy import linalg
        >>> linalg.toeplitz(jnp.array([1.0, 2.0, 3.0]), jnp.array([1.0, 4.0]))
        Array([[1., 4.],
               [2., 1.],
               [3., 2.]], dtype=float32)
    """
    c = _vector("toeplitz", c, "c")
    r = jnp.conj(c) if r is None else _vector("toeplitz", r, "r")
    dt = jnp.result_type(c, r)
    vals = jnp.concatenate([c[::-1], r[1:]]).astype(dt)      # vals[m - 1 + j - i]
    m, n = c.shape[0], r.shape[0]
    idx = (m - 1) + np.arange(n)[None, :] - np.arange(m)[:, None]
    return vals[jnp.asarray(idx)]


def hankel(c, r=None):
    """The Hankel matrix with first column ``c`` and last row ``r`` (default zeros;
    ``r[0]`` is ignored).

    Example:
        >>> from funcgrad.scipy import linalg
        >>> linalg.hankel(jnp.array([1.0, 2.0, 3.0]))
        Array([[1., 2., 3.],
               [2., 3., 0.],
               [3., 0., 0.]], dtype=float32)
    """
    c = _vector("hankel", c, "c")
    r = jnp.zeros_like(c) if r is None else _vector("hankel", r, "r")
    dt = jnp.result_type(c, r)
    vals = jnp.concatenate([c, r[1:]]).astype(dt)             # vals[i + j]
    m, n = c.shape[0], r.shape[0]
    return vals[jnp.asarray(np.arange(m)[:, None] + np.arange(n)[None, :])]


def circulant(c):
    """The circulant matrix whose first column is ``c``.

    Example:
        >>> from funcgrad.scipy import linalg
        >>> linalg.circulant(jnp.array([1.0, 2.0, 3.0]))
        Array([[1., 3., 2.],
               [2., 1., 3.],
               [3., 2., 1.]], dtype=float32)
    """
    c = _vector("circulant", c, "c")
    n = c.shape[0]
    return c[jnp.asarray((np.arange(n)[:, None] - np.arange(n)[None, :]) % n)]


def hadamard(n, dtype=int):
    """The Sylvester-construction Hadamard matrix of order ``n`` (a power of 2).

    Example:
        >>> from funcgrad.scipy import linalg
        >>> linalg.hadamard(4)
        Array([[ 1,  1,  1,  1],
               [ 1, -1,  1, -1],
               [ 1,  1, -1, -1],
               [ 1, -1, -1,  1]], dtype=int32)
    """
    if n < 1 or n & (n - 1):
        raise ValueError(f"scipy.linalg.hadamard: n must be a positive power of 2, got {n}")
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return jnp.asarray(h, dtypes.canonicalize(np.dtype(dtype)))


def hilbert(n):
    """The Hilbert matrix ``1 / (i + j + 1)``.

    Example:
        >>> from funcgrad.scipy import linalg
        >>> linalg.hilbert(3)
        Array([[1.        , 0.5       , 0.33333334],
               [0.5       , 0.33333334, 0.25      ],
               [0.33333334, 0.25      , 0.2       ]], dtype=float32)
    """
    i = np.arange(n)
    return jnp.asarray(1.0 / (i[:, None] + i[None, :] + 1), dtypes.default_float())


def helmert(n, full=False):
    """The Helmert matrix of order ``n`` (without its first row unless ``full``).

    Example:
        >>> from funcgrad.scipy import linalg
        >>> linalg.helmert(4, full=True)
        Array([[ 0.5       ,  0.5       ,  0.5       ,  0.5       ],
               [ 0.70710677, -0.70710677,  0.        ,  0.        ],
               [ 0.4082483 ,  0.4082483 , -0.8164966 ,  0.        ],
               [ 0.28867513,  0.28867513,  0.28867513, -0.8660254 ]], dtype=float32)
    """
    h = np.tril(np.ones((n, n)), -1) - np.diag(np.arange(n))
    d = np.arange(n) * np.arange(1, n + 1)
    h[0] = 1
    d[0] = n
    h = h / np.sqrt(d)[:, None]
    return jnp.asarray(h if full else h[1:], dtypes.default_float())


def companion(a):
    """The companion matrix of the polynomial with coefficients ``a`` (highest degree first,
    ``a[0] != 0``).

    Example:
        >>> from funcgrad.scipy import linalg
        >>> linalg.companion(jnp.array([1.0, -10.0, 31.0, -30.0]))
        Array([[ 10., -31.,  30.],
               [  1.,   0.,   0.],
               [  0.,   1.,   0.]], dtype=float32)
    """
    a = _vector("companion", a, "a")
    if a.shape[0] < 2:
        raise ValueError(f"scipy.linalg.companion: a needs at least two coefficients, got "
                         f"{a.shape[0]}")
    n = a.shape[0] - 1
    dt = jnp.result_type(a.dtype, dtypes.default_float())
    first = (-a[1:] / a[0]).astype(dt)
    return jnp.concatenate([first[None, :], jnp.eye(n - 1, n, dtype=dt)], axis=0)


def dft(n, scale=None):
    """The ``n``-point discrete Fourier transform matrix (``scale``: None, "sqrtn" or "n").

    Example:
        >>> from funcgrad.scipy import linalg
        >>> (linalg.dft(4) @ jnp.ones(4)).round(4)
        Array([4.+0.j, 0.+0.j, 0.-0.j, 0.+0.j], dtype=complex64)
    """
    if scale not in (None, "sqrtn", "n"):
        raise ValueError(f"scipy.linalg.dft: scale must be None, 'sqrtn' or 'n', got "
                         f"{scale!r}")
    k = np.arange(n)
    m = np.exp(-2j * np.pi * np.outer(k, k) / n)
    if scale == "sqrtn":
        m = m / math.sqrt(n)
    elif scale == "n":
        m = m / n
    cdt = np.complex128 if dtypes.default_float() == np.float64 else np.complex64
    return jnp.asarray(m.astype(cdt))


def leslie(f, s):
    """The Leslie matrix of fecundities ``f`` (length n) and survival rates ``s`` (n - 1).

    Example:
        >>> from funcgrad.scipy import linalg
        >>> linalg.leslie(jnp.array([0.1, 2.0, 1.0]), jnp.array([0.2, 0.8]))
        Array([[0.1, 2. , 1. ],
               [0.2, 0. , 0. ],
               [0. , 0.8, 0. ]], dtype=float32)
    """
    f, s = _vector("leslie", f, "f"), jnp.ravel(jnp.asarray(s))
    n = f.shape[0]
    if s.shape[0] != n - 1:
        raise ValueError(f"scipy.linalg.leslie: s must have len(f) - 1 = {n - 1} entries, got "
                         f"{s.shape[0]}")
    dt = jnp.result_type(f, s)
    lower = jnp.concatenate([jnp.diag(s.astype(dt)), jnp.zeros((n - 1, 1), dt)], axis=1)
    return jnp.concatenate([f.astype(dt)[None, :], lower], axis=0)
