"""The jax.lax names funcgrad adds: values against JAX (stored by tools/lax_reference.py, and
live when jax is installed), derivatives against finite differences and direct formulas,
jit/vmap behaviour, errors, and the coverage of jax.lax's public names."""
import json
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.test_util import check_grads

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import api_coverage  # noqa: E402
import lax_reference  # noqa: E402

STORED = json.loads(lax_reference.OUT.read_text())


def _assert_tree_close(got, want, where):
    try:
        g, w = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    except ValueError:      # a tuple of differently shaped results
        assert len(got) == len(want), where
        for g, w in zip(got, want):
            _assert_tree_close(g, w, where)
        return
    assert g.shape == w.shape, f"{where}: shape {g.shape} != {w.shape}"
    np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, err_msg=where)


@pytest.fixture(scope="module")
def computed():
    return lax_reference.cases(funcgrad, images=False)


@pytest.fixture(scope="module")
def computed_images():
    return lax_reference.image_cases(funcgrad)


@pytest.mark.parametrize("name", sorted(n for n in STORED["cases"] if not n.startswith("image_")))
def test_matches_stored_jax_values(computed, name):
    _assert_tree_close(computed[name], STORED["cases"][name], name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n in STORED["cases"] if n.startswith("image_")))
def test_image_matches_stored_jax_values(computed_images, name):
    _assert_tree_close(computed_images[name], STORED["cases"][name], name)


def _run_with_jax(script):
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                         text=True, timeout=600, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_matches_live_jax(computed, computed_images):
    pytest.importorskip("jax")
    live = _run_with_jax("""
        import json, sys
        sys.path.insert(0, "tools")
        import jax, lax_reference
        jax.config.update("jax_platforms", "cpu")
        print(json.dumps(lax_reference.cases(jax)))
    """)
    for name, want in live.items():
        _assert_tree_close({**computed, **computed_images}[name], want, name)


def test_stored_jax_lax_names_match_installed_jax():
    pytest.importorskip("jax")
    ref = _run_with_jax("""
        import json, jax, jax.lax as l
        print(json.dumps([jax.__version__, sorted(n for n in dir(l) if not n.startswith("_"))]))
    """)
    if ref[0] != api_coverage.JAX_VERSION:
        pytest.skip(f"stored names are of jax {api_coverage.JAX_VERSION}, installed {ref[0]}")
    assert api_coverage.jax_lax_names() == ref[1]


def test_covers_95_percent_of_jax_lax():
    names = api_coverage.jax_lax_names()
    present = [n for n in names if hasattr(lax, n)]
    assert len(names) == 372
    assert len(present) / len(names) >= 0.95, sorted(set(names) - set(present))


def test_primitive_objects_are_funcgrads_own():
    jx = funcgrad.make_jaxpr(lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ()))) + 1.0)(
        jnp.ones((2, 3)), jnp.ones((3, 2)))
    assert [e.prim for e in jx.jaxpr.eqns][:1] == [lax.dot_general_p]
    assert jx.jaxpr.eqns[-1].prim is lax.add_p
    assert lax.linear_solve_p.name == "custom_linear_solve"
    np.testing.assert_allclose(np.asarray(lax.exp_p.bind(jnp.zeros(2))), [1.0, 1.0])


# --- derivatives and transformations of the decomposed primitives -------------------------------
@pytest.mark.parametrize("fn", [
    lambda x: lax.exp2(x),
    lambda x: lax.square(x),
    lambda x: lax.bessel_i0e(x * 3.0),
    lambda x: lax.tile(x, (2,)) * lax.stack([x, x * x], axis=1)[:, 1].sum(),
    lambda x: lax.unstack(lax.reshape(x, (2, 2)), 1)[1],
    lambda x: lax.betainc(x + 1.0, x + 2.0, x),
    lambda x: lax.approx_max_k(x, 2)[0],
    lambda x: lax.reduce(x, 1.0, lambda a, b: a * b, (0,)),
    lambda x: lax.reduce_window(x, 1.0, lambda a, b: a * b, (2,), (1,), "SAME"),
], ids=["exp2", "square", "bessel_i0e", "tile_stack", "unstack", "betainc", "approx_max_k",
        "reduce_prod_generic", "reduce_window_prod_generic"])
def test_gradients_match_finite_differences(fn):
    check_grads(fn, (np.array([0.3, 0.5, 0.7, 0.2]),), order=1)


def test_decomposed_primitives_under_jit_and_vmap():
    x = jnp.array(np.random.default_rng(1).uniform(0.1, 0.9, (3, 4)), jnp.float32)
    f = lambda v: lax.exp2(lax.tile(v, (2,))) + lax.square(lax.stack([v, v]))[0].sum()  # noqa
    eager = np.stack([np.asarray(f(r)) for r in x])
    np.testing.assert_allclose(np.asarray(funcgrad.jit(funcgrad.vmap(f))(x)), eager, rtol=1e-6)
    jx = funcgrad.make_jaxpr(f)(x[0])
    assert {"exp2", "tile", "stack", "square"} <= {e.prim.name for e in jx.jaxpr.eqns}


def test_mulhi_matches_exact_products():
    rng = np.random.default_rng(2)
    for dt in (np.int8, np.uint16, np.int32, np.uint32):
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, 64, dtype=dt, endpoint=True)
        b = rng.integers(info.min, info.max, 64, dtype=dt, endpoint=True)
        want = ((a.astype(object) * b.astype(object)) >> (8 * np.dtype(dt).itemsize)).astype(dt)
        np.testing.assert_array_equal(np.asarray(funcgrad.jit(lax.mulhi)(a, b)), want)


def test_reduce_precision_rounds_to_narrow_formats():
    x = np.random.default_rng(3).normal(size=50).astype(np.float32) * 100
    np.testing.assert_array_equal(np.asarray(lax.reduce_precision(x, 5, 10)),
                                  x.astype(np.float16).astype(np.float32))
    g = funcgrad.grad(lambda v: lax.reduce_precision(v * 3.0, 8, 7).sum())(jnp.ones(3))
    np.testing.assert_allclose(np.asarray(g), [3.0, 3.0, 3.0])


def test_optimization_barrier_is_identity_and_differentiable():
    f = funcgrad.jit(lambda x: lax.optimization_barrier((x * 2.0, x + 1))[0].sum())
    assert float(f(jnp.ones(3))) == 6.0
    np.testing.assert_allclose(np.asarray(funcgrad.grad(f)(jnp.ones(3))), [2.0, 2.0, 2.0])


def test_composite_is_one_named_equation():
    tangent = lax.composite(lambda x: lax.sin(x) / lax.cos(x), "my.tan", version=2)
    jx = funcgrad.make_jaxpr(tangent)(0.5)
    (eqn,) = jx.jaxpr.eqns
    assert eqn.prim.name == "composite" and eqn.params["name"] == "my.tan"
    assert eqn.params["version"] == 2
    np.testing.assert_allclose(float(funcgrad.grad(tangent)(0.5)), 1 / np.cos(0.5) ** 2,
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(funcgrad.vmap(tangent)(jnp.array([0.1, 0.2]))),
                               np.tan([0.1, 0.2]), rtol=1e-6)


def test_platform_dependent_picks_cpu_branch_and_default():
    f = lambda x: lax.platform_dependent(x, cpu=lambda v: v + 1.0, tpu=lambda v: v * 10.0,  # noqa
                                         default=lambda v: v - 1.0)
    g = lambda x: lax.platform_dependent(x, tpu=lambda v: v * 10.0, default=lambda v: v - 1.0)  # noqa
    assert float(f(jnp.float32(1.0))) == 2.0 and float(funcgrad.jit(f)(jnp.float32(1.0))) == 2.0
    assert float(g(jnp.float32(1.0))) == 0.0
    with pytest.raises((ValueError, TypeError), match="no function for platform 'cpu'"):
        lax.platform_dependent(jnp.float32(1.0), tpu=lambda v: v)


# --- implicit solvers --------------------------------------------------------------------------
def _cg(matvec, b, iters=60):
    """Conjugate gradients in a while_loop (not differentiable in reverse mode itself)."""
    def body(state):
        x, r, p, rs, i = state
        ap = matvec(p)
        alpha = rs / jnp.vdot(p, ap)
        x, r = x + alpha * p, r - alpha * ap
        rs_new = jnp.vdot(r, r)
        return x, r, r + (rs_new / rs) * p, rs_new, i + 1
    x0 = jnp.zeros_like(b)
    state = (x0, b, b, jnp.vdot(b, b), 0)
    return lax.while_loop(lambda s: (s[4] < iters) & (s[3] > 1e-20), body, state)[0]


@pytest.mark.slow
def test_custom_linear_solve_differentiates_an_iterative_solver():
    rng = np.random.default_rng(4)
    m = rng.normal(size=(4, 4))
    spd = jnp.asarray(m @ m.T + 4 * np.eye(4), jnp.float32)
    b = jnp.asarray(rng.normal(size=4), jnp.float32)

    def solve(a, b):
        return lax.custom_linear_solve(lambda v: a @ v, b, _cg, symmetric=True)

    def direct(a, b):
        return jnp.linalg.solve(a, b)
    np.testing.assert_allclose(np.asarray(solve(spd, b)), np.asarray(direct(spd, b)), rtol=1e-4)
    for argnum in (0, 1):
        g = funcgrad.grad(lambda *ab: (solve(*ab) ** 3).sum(), argnums=argnum)(spd, b)
        want = funcgrad.grad(lambda *ab: (direct(*ab) ** 3).sum(), argnums=argnum)(spd, b)
        np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-3, atol=1e-5)
    batched = funcgrad.jit(funcgrad.vmap(lambda bb: solve(spd, bb)))(jnp.stack([b, 2 * b]))
    np.testing.assert_allclose(np.asarray(batched[1]), 2 * np.asarray(direct(spd, b)), rtol=1e-4)


def test_custom_linear_solve_has_aux_and_pytrees():
    a = jnp.array([[2.0, 0.0], [0.0, 4.0]])

    def solve(mv, rhs):
        return {"u": rhs["u"] / 2.0, "v": rhs["v"] / 4.0}, jnp.float32(7.0)
    b = {"u": jnp.float32(1.0), "v": jnp.float32(2.0)}
    x, aux = lax.custom_linear_solve(lambda t: {"u": t["u"] * 2.0, "v": t["v"] * 4.0}, b, solve,
                                     symmetric=True, has_aux=True)
    assert float(x["u"]) == 0.5 and float(x["v"]) == 0.5 and float(aux) == 7.0
    del a


def test_custom_linear_solve_without_transpose_solve_explains_reverse_mode():
    a = jnp.array([[2.0, 1.0], [0.0, 3.0]])
    f = lambda b: lax.custom_linear_solve(lambda v: a @ v, b,  # noqa: E731
                                          lambda mv, r: jnp.linalg.solve(a, r)).sum()
    np.testing.assert_allclose(np.asarray(funcgrad.jacfwd(f)(jnp.ones(2))),
                               np.linalg.solve(np.asarray(a), np.eye(2)).sum(0), rtol=1e-6)
    with pytest.raises(TypeError, match="transpose_solve="):
        funcgrad.grad(f)(jnp.ones(2))


def test_custom_root_implicit_gradient():
    def newton(f, x):
        for _ in range(25):
            x = x - f(x) / funcgrad.grad(f)(x)
        return x

    def root(a, b):     # x with x**3 + a x - b = 0
        return lax.custom_root(lambda x: x ** 3 + a * x - b, 1.0, newton,
                               lambda g, y: y / g(1.0))
    a, b = 2.0, 5.0
    x = float(root(a, b))
    assert abs(x ** 3 + a * x - b) < 1e-4
    # implicit differentiation: dx/da = -x / (3x^2 + a), dx/db = 1 / (3x^2 + a)
    ga, gb = funcgrad.grad(root, argnums=(0, 1))(a, b)
    np.testing.assert_allclose([float(ga), float(gb)], [-x / (3 * x * x + a), 1 / (3 * x * x + a)],
                               rtol=1e-4)
    gj = funcgrad.jit(funcgrad.grad(root, argnums=1))(a, b)
    np.testing.assert_allclose(float(gj), 1 / (3 * x * x + a), rtol=1e-4)


def test_custom_root_has_aux():
    sol, aux = lax.custom_root(lambda x: x - 3.0, 0.0, lambda f, x0: (x0 - f(x0), x0 + 1.0),
                               lambda g, y: y / g(1.0), has_aux=True)
    assert float(sol) == 3.0 and float(aux) == 1.0


# --- collectives --------------------------------------------------------------------------------
def test_collectives_under_named_vmap():
    x = jnp.array([10.0, 11.0, 12.0])
    out = funcgrad.vmap(lambda v: lax.pbroadcast(v, "i", 1), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(out), [11.0, 11.0, 11.0])
    out = funcgrad.vmap(lambda v: lax.pshuffle(v, "i", [2, 0, 1]), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(out), [12.0, 10.0, 11.0])
    m = jnp.arange(9.0).reshape(3, 3)
    out = funcgrad.vmap(lambda v: lax.pswapaxes(v, "i", 0), axis_name="i")(m)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(m).T)
    g = funcgrad.grad(lambda v: funcgrad.vmap(lambda u: lax.pbroadcast(u, "i", 2) * u,
                                              axis_name="i")(v).sum())(x)
    # d/dx_j sum_i x_2 x_i = x_2 + [j == 2] * sum_i x_i
    np.testing.assert_allclose(np.asarray(g), [12.0, 12.0, 12.0 + 33.0])
    assert funcgrad.vmap(lambda v: lax.pcast(v, "i", to="varying"), axis_name="i")(x) is not None
    with pytest.raises(ValueError, match="not a permutation"):
        funcgrad.vmap(lambda v: lax.pshuffle(v, "i", [0, 0, 1]), axis_name="i")(x)


# --- XLA's random operations ----------------------------------------------------------------------
def test_rng_bit_generator_vmap_uses_each_key():
    keys = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.uint32)
    new_keys, bits = funcgrad.vmap(lambda k: lax.rng_bit_generator(k, (3,)))(keys)
    for i in range(2):
        k, b = lax.rng_bit_generator(keys[i], (3,))
        np.testing.assert_array_equal(np.asarray(bits[i]), np.asarray(b))
        np.testing.assert_array_equal(np.asarray(new_keys[i]), np.asarray(k))
    with pytest.raises(TypeError, match="uint32\\[4\\]"):
        lax.rng_bit_generator(np.zeros(2, np.uint32), (3,))


def test_rng_uniform_range_and_vmap():
    u = np.asarray(lax.rng_uniform(jnp.float32(2.0), jnp.float32(3.0), (2000,)))
    assert u.min() >= 2.0 and u.max() < 3.0 and abs(u.mean() - 2.5) < 0.05
    v = np.asarray(funcgrad.vmap(lambda a: lax.rng_uniform(a, a + 1.0, (500,)))(
        jnp.array([0.0, 10.0])))
    assert (v[0] < 1).all() and (v[1] >= 10).all()


# --- products, option types ------------------------------------------------------------------------
def test_scaled_dot_is_the_block_scaled_product():
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(3, 8)).astype(np.float32), rng.normal(size=(8, 5)).astype(np.float32)
    sa = rng.uniform(0.5, 2, (3, 2)).astype(np.float32)
    sb = rng.uniform(0.5, 2, (2, 5)).astype(np.float32)
    got = lax.scaled_dot(a, b, lhs_scale=sa, rhs_scale=sb)
    want = (a * np.repeat(sa, 4, 1)) @ (b * np.repeat(sb, 4, 0))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="scale"):
        lax.scaled_dot(a, b, lhs_scale=np.ones((3, 3), np.float32))


def test_option_types_are_accepted_where_jax_accepts_them():
    x = jnp.arange(6.0).reshape(3, 2)
    dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                    start_index_map=(0,))
    out = lax.gather(x, jnp.array([[5]]), dn, (1, 2), mode=lax.GatherScatterMode.CLIP)
    np.testing.assert_array_equal(np.asarray(out), [[4.0, 5.0]])
    out = lax.gather(x, jnp.array([[5]]), dn, (1, 2), mode=lax.GatherScatterMode.FILL_OR_DROP,
                     fill_value=-1.0)
    np.testing.assert_array_equal(np.asarray(out), [[-1.0, -1.0]])
    a = jnp.ones((2, 2))
    np.testing.assert_array_equal(
        np.asarray(lax.dot(a, a, precision=lax.DotAlgorithmPreset.F32_F32_F32)), 2 * np.ones((2, 2)))
    np.testing.assert_array_equal(
        np.asarray(lax.round(jnp.array([0.5, 2.5]), lax.RoundingMethod.TO_NEAREST_EVEN)), [0, 2])
    np.testing.assert_allclose(np.asarray(lax.fft(jnp.array([1.0, 0.0]), lax.FftType.RFFT, (2,))),
                               [1.0, 1.0])
    with pytest.raises(ValueError, match="unknown mode"):
        lax.GatherScatterMode.from_any("wrap")


def test_shape_rule_errors_name_the_function():
    with pytest.raises(ValueError, match="broadcast_shapes: incompatible"):
        lax.broadcast_shapes((2, 3), (4,))
    with pytest.raises(ValueError, match="lax.collapse"):
        lax.collapse(jnp.zeros((2, 3)), 2, 1)
    with pytest.raises(ValueError, match="lax.tile"):
        lax.tile(jnp.zeros((2, 3)), (2,))
