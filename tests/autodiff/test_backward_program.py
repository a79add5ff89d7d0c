"""Eager reverse mode runs a recurring tape's backward pass as one compiled program
(``transforms/backward_program.py``): the gradients must equal the equation-by-equation
backward pass and NumPy's, a tape seen once must not compile anything, value-dependent
Python control flow must keep working (each branch its own tape), and the paths that need
per-equation execution (NaN checks, transformations around the grad) must keep it."""
import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp
from funcgrad.core.ad import linearize_flat
from funcgrad.transforms import backward_program as bp


@pytest.fixture(autouse=True)
def _fresh():
    bp.clear()
    yield
    bp.clear()


def _mlp_loss(w1, b1, w2, x, y):
    h = F.relu(F.linear(x, w1, b1))
    return F.mse_loss(h @ w2, y)


def _np_mlp_grads(w1, b1, w2, x, y):
    z = x @ w1.T + b1
    h = np.maximum(z, 0)
    out = h @ w2
    d_out = 2 * (out - y) / out.size
    d_w2 = h.T @ d_out
    d_z = (d_out @ w2.T) * (z > 0)
    return d_z.T @ x, d_z.sum(0), d_w2


def _data(rng):
    f = np.float32
    return (rng.standard_normal((5, 3)).astype(f), rng.standard_normal(5).astype(f),
            rng.standard_normal((5, 2)).astype(f), rng.standard_normal((4, 3)).astype(f),
            rng.standard_normal((4, 2)).astype(f))


def test_recurring_tape_runs_fused_and_matches_numpy(rng):
    grad = funcgrad.grad(_mlp_loss, argnums=(0, 1, 2))
    for step in range(4):
        args = _data(rng)
        got = grad(*map(jnp.asarray, args))
        want = _np_mlp_grads(*[a.astype(np.float64) for a in args])
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=2e-5, atol=1e-6)
    s = bp.stats()
    assert s["compiled"] == 1 and s["fused_runs"] == 3   # step 0 op by op, then one program


def test_fused_equals_equation_by_equation_transpose(rng):
    args = [jnp.asarray(a) for a in _data(rng)]
    _, lin = linearize_flat(lambda *a: [_mlp_loss(*a)], args)
    cts = [jnp.asarray(np.float32(1.5))]
    want = lin.transpose(cts)
    bp.transpose(lin, cts)                 # first sighting
    got = bp.transpose(lin, cts)           # compiled
    assert bp.stats()["fused_runs"] == 1
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-7)


def test_one_off_tapes_compile_nothing(rng):
    for n in range(2, 6):                 # a new shape each time: a new structure each time
        funcgrad.grad(lambda x: jnp.sum(jnp.sin(x) ** 2))(jnp.ones(n))
    assert bp.stats()["compiled"] == 0 and bp.stats()["tapes"] == 4


def test_value_dependent_control_flow_keeps_each_branch_right():
    def loss(x):
        if float(jnp.sum(x)) > 0:          # a Python branch on a value, as eager code does
            return jnp.sum(x ** 3)
        return jnp.sum(jnp.cos(x))
    for sign in (1, -1, 1, -1, 1, -1):
        x = np.array([0.5, 1.5], np.float32) * sign
        g = funcgrad.grad(loss)(jnp.asarray(x))
        want = 3 * x ** 2 if sign > 0 else -np.sin(x)
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-6)
    assert bp.stats()["compiled"] == 2 and bp.stats()["fused_runs"] == 4


def test_module_training_step_gradients_unchanged(rng):
    funcgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    x = jnp.asarray(rng.standard_normal((6, 3)).astype(np.float32))
    y = jnp.asarray(rng.integers(0, 2, 6).astype(np.int32))

    def loss(m):
        return F.cross_entropy(m(x), y)
    first = funcgrad.grad(loss)(model)
    second = funcgrad.grad(loss)(model)     # fused: identical values
    for (n, a), (_, b) in zip(first.named_parameters(), second.named_parameters()):
        np.testing.assert_allclose(np.asarray(a.data), np.asarray(b.data), rtol=1e-6,
                                   atol=1e-7, err_msg=n)
    assert bp.stats()["fused_runs"] == 1


def test_unused_input_gets_zero_gradient():
    f = funcgrad.grad(lambda a, b: jnp.sum(a * 2.0), argnums=(0, 1))
    for _ in range(3):
        ga, gb = f(jnp.ones(2), jnp.ones(3))
    np.testing.assert_array_equal(np.asarray(ga), [2.0, 2.0])
    np.testing.assert_array_equal(np.asarray(gb), np.zeros(3))
    assert bp.stats()["fused_runs"] == 2


def test_nan_checks_and_outer_transformations_keep_the_op_by_op_path():
    f = funcgrad.grad(lambda x: jnp.sum(jnp.exp(x)))
    with funcgrad.config.override("debug_nans", True):
        for _ in range(3):
            f(jnp.ones(2))
    assert bp.stats()["fused_runs"] == 0
    # grad of grad: the inner backward pass runs under the outer JVP, not eagerly
    for _ in range(3):
        h = funcgrad.grad(lambda x: jnp.sum(funcgrad.grad(lambda z: jnp.sum(z ** 3))(x)))(
            jnp.array([1.0, 2.0]))
    np.testing.assert_allclose(np.asarray(h), [6.0, 12.0])
    # under jit nothing is eager: the jitted step's trace holds the backward pass
    g = funcgrad.jit(funcgrad.grad(lambda x: jnp.sum(jnp.tanh(x))))
    np.testing.assert_allclose(np.asarray(g(jnp.zeros(2))), [1.0, 1.0])
