"""funcgrad.scipy: SciPy's API on funcgrad arrays (as ``jax.scipy``): ``special``, ``stats``,
``linalg``, ``signal``, ``optimize``, ``ndimage``, ``integrate``, ``fft`` and ``interpolate``.

Everything is funcgrad.numpy / funcgrad.lax code, so it works eagerly and under ``jit``,
``vmap`` and ``grad``.

Example:
    >>> import funcgrad.scipy as jsp
    >>> jsp.special.logsumexp(jnp.array([0.0, 0.0]))
    Array(0.6931472, dtype=float32)
"""
from funcgrad.scipy import (fft, integrate, interpolate, linalg, ndimage,  # noqa: F401
                            optimize, signal, special, stats)
