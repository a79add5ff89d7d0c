"""funcgrad.random: key-based, splittable, reproducible random numbers, bit-identical to
``jax.random``.

A key is a ``uint32[2]`` array (``random.key(seed)``; ``PRNGKey`` is the same function).
Every sampler is a pure function of its key: the same key gives the same numbers eagerly, under
``jit``, under ``vmap`` over keys and on any backend, and the same numbers as ``jax.random``
for the same seed, shape and dtype under either setting of ``jax_threefry_partitionable``
(``funcgrad.config.update("threefry_partitionable", False)`` selects JAX's original layout).
``split``/``fold_in`` derive independent keys; there is no global state.

Layout: ``prng`` (the Threefry cipher, seeding, split, fold_in, raw bits), ``keys`` (the public
key functions), ``samplers`` (uniforms, normals, discrete draws, shuffles), ``gamma`` (samplers
with rejection loops: the gamma family, poisson and binomial).

Example:
    >>> import funcgrad.random as random
    >>> key = random.key(0)
    >>> k1, k2 = random.split(key)
    >>> x = random.normal(k1, (3,))
    >>> random.uniform(k2, (2, 2), minval=-1.0, maxval=1.0)
    Array([[-0.98541236, -0.9582176 ],
           [ 0.162853  , -0.27632403]], dtype=float32)
"""
from funcgrad.random import gamma as _gamma_mod
from funcgrad.random import keys as _keys
from funcgrad.random import samplers as _samplers
from funcgrad.random.prng import threefry2x32
from funcgrad.lowering.eager_jit import jit_when_eager

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "split", "fold_in", "clone", "bits",
    "uniform", "normal", "truncated_normal", "bernoulli", "categorical", "randint",
    "permutation", "choice", "gamma", "loggamma", "beta", "dirichlet", "multivariate_normal",
    "exponential", "laplace", "logistic", "gumbel", "poisson", "cauchy", "rademacher",
    "lognormal", "chisquare", "t", "f", "pareto", "weibull_min", "maxwell",
    "double_sided_maxwell", "rayleigh", "wald", "geometric", "triangular", "ball",
    "generalized_normal", "orthogonal", "binomial", "threefry2x32",
]

# A sampler is dozens of small integer/float ops; run eagerly op by op, each would compile its
# own executable. Called eagerly (the root interpreter is current), each public function below
# runs as one cached jit executable per (shapes, dtypes, static options) instead; under any
# transformation it traces inline.
_SD = ("shape", "dtype")


def _eager(module, name, static=_SD):
    return jit_when_eager(getattr(module, name), static)


key, PRNGKey, key_data, wrap_key_data, clone = (
    _keys.key, _keys.PRNGKey, _keys.key_data, _keys.wrap_key_data, _keys.clone)
split = _eager(_keys, "split", ("num",))
_keys._fold_in = _eager(_keys, "_fold_in", ())
fold_in = _keys.fold_in

bits, uniform, normal, truncated_normal, lognormal = (
    _eager(_samplers, n) for n in ("bits", "uniform", "normal", "truncated_normal", "lognormal"))
multivariate_normal = _eager(_samplers, "multivariate_normal", ("shape", "dtype", "method"))
bernoulli = _eager(_samplers, "bernoulli", ("shape", "mode"))
randint, rademacher, geometric = (_eager(_samplers, n) for n in ("randint", "rademacher",
                                                                  "geometric"))
categorical = _eager(_samplers, "categorical", ("axis", "shape", "replace", "mode"))
permutation = _eager(_samplers, "permutation", ("x", "axis", "independent"))
choice = _eager(_samplers, "choice", ("a", "shape", "replace", "axis", "mode"))
gumbel = _eager(_samplers, "gumbel", ("shape", "dtype", "mode"))
(exponential, laplace, logistic, cauchy, pareto, weibull_min, maxwell, double_sided_maxwell,
 rayleigh, wald, triangular) = (
    _eager(_samplers, n) for n in ("exponential", "laplace", "logistic", "cauchy", "pareto",
                                   "weibull_min", "maxwell", "double_sided_maxwell",
                                   "rayleigh", "wald", "triangular"))
orthogonal = _eager(_samplers, "orthogonal", ("n", "shape", "dtype", "m"))
(gamma, loggamma, beta, dirichlet, chisquare, t, f, poisson, generalized_normal) = (
    _eager(_gamma_mod, n) for n in ("gamma", "loggamma", "beta", "dirichlet", "chisquare", "t",
                                    "f", "poisson", "generalized_normal"))
ball = _eager(_gamma_mod, "ball", ("d", "shape", "dtype"))
binomial = _eager(_gamma_mod, "binomial")
