"""Sampler calls whose outputs must be bit-identical between ``funcgrad.random`` and
``jax.random``. Each case is ``f(r, xp, key)`` with ``r`` the random module and ``xp`` its
NumPy namespace, so the same table drives funcgrad (``tests/random/test_jax_streams.py``) and
JAX (``tests/random/make_jax_streams.py``, which writes the stored reference streams)."""
import numpy as np

SEEDS = (0, 42)
COV = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 1.5]], np.float32)
P5 = np.array([0.1, 0.2, 0.3, 0.15, 0.25], np.float32)
P40 = (np.arange(1, 41) % 7 + 1).astype(np.float32) / 7.0
LOGITS = np.log(np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]], np.float32))
GAMMA_A = np.array([0.2, 0.5, 1.0, 2.5, 10.0], np.float32)
LAM = np.array([0.0, 0.5, 3.0, 9.9, 10.0, 50.0, 1000.0], np.float32)


def _f32(x):
    return x.astype("float32")


CASES = {
    "split": lambda r, xp, k: r.split(k, 3),
    "split_shape": lambda r, xp, k: r.split(k, (2, 3)),
    "fold_in": lambda r, xp, k: r.fold_in(k, 7),
    "fold_in_big": lambda r, xp, k: r.fold_in(k, 2 ** 31 + 5),
    "bits_scalar": lambda r, xp, k: r.bits(k),
    "bits_odd": lambda r, xp, k: r.bits(k, (3,)),
    "bits_2d": lambda r, xp, k: r.bits(k, (2, 5)),
    "bits_u8": lambda r, xp, k: r.bits(k, (5,), "uint8"),
    "bits_u16": lambda r, xp, k: r.bits(k, (2, 3), "uint16"),
    "uniform_7x1": lambda r, xp, k: r.uniform(k, (7, 1)),
    "uniform_range": lambda r, xp, k: r.uniform(k, (5,), minval=-2.0, maxval=3.0),
    "uniform_bcast": lambda r, xp, k: r.uniform(k, (2, 3), minval=xp.zeros(3),
                                                 maxval=xp.arange(1.0, 4.0)),
    "uniform_f16": lambda r, xp, k: _f32(r.uniform(k, (5,), "float16")),
    "uniform_bf16": lambda r, xp, k: _f32(r.uniform(k, (5,), "bfloat16")),
    "normal": lambda r, xp, k: r.normal(k, (2, 5)),
    "normal_scalar": lambda r, xp, k: r.normal(k),
    "normal_f16": lambda r, xp, k: _f32(r.normal(k, (4,), "float16")),
    "normal_complex": lambda r, xp, k: r.normal(k, (3,), "complex64"),
    "truncated_normal": lambda r, xp, k: r.truncated_normal(k, -1.0, 2.0, (6,)),
    "lognormal": lambda r, xp, k: r.lognormal(k, 0.5, (5,)),
    "multivariate_normal": lambda r, xp, k: r.multivariate_normal(
        k, xp.zeros(3), xp.asarray(COV), (4,)),
    "bernoulli": lambda r, xp, k: r.bernoulli(k, 0.3, (9,)),
    "bernoulli_high": lambda r, xp, k: r.bernoulli(k, 0.3, (9,), mode="high"),
    "randint": lambda r, xp, k: r.randint(k, (8,), 0, 10),
    "randint_wide": lambda r, xp, k: r.randint(k, (8,), -100, 1000000),
    "randint_uint8": lambda r, xp, k: r.randint(k, (8,), 0, 256, "uint8"),
    "randint_int8": lambda r, xp, k: r.randint(k, (8,), -5, 5, "int8"),
    "categorical": lambda r, xp, k: r.categorical(k, xp.asarray(LOGITS[0]), shape=(10,)),
    "categorical_batch": lambda r, xp, k: r.categorical(k, xp.asarray(LOGITS), axis=-1,
                                                         shape=(3, 2)),
    "categorical_axis0": lambda r, xp, k: r.categorical(k, xp.asarray(LOGITS.T), axis=0),
    "categorical_noreplace": lambda r, xp, k: r.categorical(k, xp.asarray(LOGITS),
                                                             shape=(3, 2), replace=False),
    "permutation": lambda r, xp, k: r.permutation(k, 10),
    "permutation_2d": lambda r, xp, k: r.permutation(k, xp.arange(12).reshape(4, 3)),
    "permutation_independent": lambda r, xp, k: r.permutation(
        k, xp.arange(12).reshape(4, 3), axis=1, independent=True),
    "choice": lambda r, xp, k: r.choice(k, 10, (4,)),
    "choice_noreplace": lambda r, xp, k: r.choice(k, 10, (4,), replace=False),
    "choice_array": lambda r, xp, k: r.choice(k, xp.arange(12).reshape(4, 3), (2,), axis=1),
    "choice_p": lambda r, xp, k: r.choice(k, 5, (6,), p=xp.asarray(P5)),
    "choice_p_noreplace": lambda r, xp, k: r.choice(k, 5, (3,), replace=False,
                                                    p=xp.asarray(P5)),
    "choice_p_40": lambda r, xp, k: r.choice(k, 40, (30,), p=xp.asarray(P40)),
    "exponential": lambda r, xp, k: r.exponential(k, (5,)),
    "laplace": lambda r, xp, k: r.laplace(k, (5,)),
    "logistic": lambda r, xp, k: r.logistic(k, (5,)),
    "gumbel": lambda r, xp, k: r.gumbel(k, (5,)),
    "gumbel_high": lambda r, xp, k: r.gumbel(k, (5,), mode="high"),
    "cauchy": lambda r, xp, k: r.cauchy(k, (5,)),
    "pareto": lambda r, xp, k: r.pareto(k, 3.0, (5,)),
    "weibull_min": lambda r, xp, k: r.weibull_min(k, 2.0, 1.5, (5,)),
    "maxwell": lambda r, xp, k: r.maxwell(k, (5,)),
    "double_sided_maxwell": lambda r, xp, k: r.double_sided_maxwell(k, 0.5, 2.0, (4,)),
    "rademacher": lambda r, xp, k: r.rademacher(k, (7,)),
    "rayleigh": lambda r, xp, k: r.rayleigh(k, 2.0, (5,)),
    "wald": lambda r, xp, k: r.wald(k, 1.5, (5,)),
    "geometric": lambda r, xp, k: r.geometric(k, 0.3, (5,)),
    "triangular": lambda r, xp, k: r.triangular(k, 0.0, 0.3, 1.0, (5,)),
    "gamma": lambda r, xp, k: r.gamma(k, xp.asarray(GAMMA_A)),
    "gamma_shape": lambda r, xp, k: r.gamma(k, 3.0, (2, 3)),
    "loggamma": lambda r, xp, k: r.loggamma(k, 0.3, (4,)),
    "beta": lambda r, xp, k: r.beta(k, 2.0, 3.0, (4,)),
    "dirichlet": lambda r, xp, k: r.dirichlet(k, xp.asarray([1.0, 2.0, 0.5]), (2,)),
    "chisquare": lambda r, xp, k: r.chisquare(k, 3.0, (4,)),
    "t": lambda r, xp, k: r.t(k, 4.0, (4,)),
    "f": lambda r, xp, k: r.f(k, 3.0, 5.0, (4,)),
    "generalized_normal": lambda r, xp, k: r.generalized_normal(k, 1.5, (4,)),
    "ball": lambda r, xp, k: r.ball(k, 3, 2, (2,)),
    "poisson": lambda r, xp, k: r.poisson(k, xp.asarray(LAM)),
    "poisson_shape": lambda r, xp, k: r.poisson(k, 4.0, (2, 3)),
    "orthogonal": lambda r, xp, k: r.orthogonal(k, 3, (2,)),
    "binomial": lambda r, xp, k: r.binomial(k, xp.asarray([5.0, 20.0, 100.0, 1000.0]),
                                            xp.asarray([0.3, 0.6, 0.05, 0.5])),
    "binomial_shape": lambda r, xp, k: r.binomial(k, 10.0, 0.3, (6,)),
}

# cases also checked under vmap over a batch of keys (random.split(key, 3))
VMAP_CASES = ("split", "fold_in", "bits_odd", "uniform_7x1", "normal", "randint",
              "bernoulli", "categorical", "permutation", "choice_p", "gamma", "poisson",
              "truncated_normal", "multivariate_normal", "beta", "dirichlet")

# with 64-bit types enabled (float64/int64/uint64 defaults)
X64_CASES = {
    "bits_u64": lambda r, xp, k: r.bits(k, (3,), "uint64"),
    "uniform_f64": lambda r, xp, k: r.uniform(k, (5,), "float64"),
    "normal_f64": lambda r, xp, k: r.normal(k, (5,)),
    "randint_i64": lambda r, xp, k: r.randint(k, (5,), -3, 2 ** 40),
    "gamma_f64": lambda r, xp, k: r.gamma(k, xp.asarray([0.5, 3.0])),
    "poisson_i64": lambda r, xp, k: r.poisson(k, 5.0, (4,)),
}
SEED_VALUES = (0, 1, -1, 2 ** 31 - 1, 2 ** 32 + 7, -(2 ** 40), 2 ** 63 - 1)

# the subset that a test with JAX installed regenerates to check the stored file
QUICK = ("split", "fold_in", "bits_odd", "uniform_7x1", "normal", "randint", "gamma",
         "poisson", "choice_p")
