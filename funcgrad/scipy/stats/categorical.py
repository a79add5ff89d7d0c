"""The categorical distribution over ``0 .. K-1`` with probabilities ``p`` on the last axis
(a multinomial of one trial; SciPy has no separate name for it).

Example:
    >>> from funcgrad.scipy.stats import categorical
    >>> categorical.logpmf(jnp.array(2), jnp.array([0.2, 0.3, 0.5]))
    Array(-0.6931472, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy.stats._util import promote


def logpmf(k, p):
    """``log p[..., k]`` (-inf for ``k`` outside 0 .. K-1); ``k`` broadcasts against
    ``p.shape[:-1]``.

    Example:
        >>> from funcgrad.scipy.stats import categorical
        >>> categorical.logpmf(jnp.array([0, 2]), jnp.array([0.2, 0.3, 0.5]))
        Array([-1.609438 , -0.6931472], dtype=float32)
    """
    p = promote(p)
    if p.ndim < 1:
        raise ValueError(f"scipy.stats.categorical.logpmf: p needs a last axis of categories, "
                         f"got shape {p.shape}")
    k = jnp.asarray(k)
    n = p.shape[-1]
    batch = jnp.broadcast_shapes(k.shape, p.shape[:-1])
    kb = jnp.broadcast_to(k, batch)
    ok = (kb >= 0) & (kb < n) & (kb == jnp.floor(kb))
    idx = jnp.where(ok, kb, 0).astype(jnp.int32)
    pb = jnp.broadcast_to(p, batch + (n,))
    picked = jnp.take_along_axis(pb, idx[..., None], axis=-1)[..., 0]
    return jnp.where(ok, jnp.log(picked), -jnp.inf)


def pmf(k, p):
    """``p[..., k]``. Example: ``categorical.pmf(1, jnp.array([0.2, 0.8]))``."""
    return jnp.exp(logpmf(k, p))
