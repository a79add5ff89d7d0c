"""funcgrad.default_device, transfer_guard*, ensure_compile_time_eval, numpy_dtype_promotion,
numpy_rank_promotion, checkpoint_policies (issue 21), against JAX when importable."""
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- default_device ------------------------------------------------------------------------
def test_default_device_on_four_cpu_devices():
    script = textwrap.dedent("""
        import numpy as np, funcgrad, funcgrad.numpy as jnp
        d = funcgrad.devices()[2]
        other = funcgrad.devices()[1]
        with funcgrad.default_device(d):
            made = [jnp.ones(2), jnp.arange(3), funcgrad.device_put(1.0), jnp.sin(np.ones(2)),
                    funcgrad.jit(lambda x: x * 2)(np.ones(2))]
            x = funcgrad.device_put(np.ones(2), other)   # placed explicitly: stays there
            kept = [x * 2, funcgrad.jit(lambda v: v + 1)(x)]
        after = jnp.ones(2)
        funcgrad.config.update("default_device", funcgrad.devices()[3])
        global_ = jnp.ones(2)
        funcgrad.config.update("default_device", None)
        print([a.devices() == {d} for a in made], [a.devices() == {other} for a in kept],
              after.devices() == {funcgrad.devices()[0]},
              global_.devices() == {funcgrad.devices()[3]},
              float(jnp.sum(made[-1])))
    """)
    env = dict(os.environ, FUNCGRAD_CPU_DEVICES="4")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[True,", "True,", "True,", "True,", "True]", "[True,",
                                  "True]", "True", "True", "4.0"]


def test_default_device_accepts_platform_name_and_rejects_junk():
    with funcgrad.default_device("cpu"):
        assert jnp.ones(2).devices() == {funcgrad.devices("cpu")[0]}
    with pytest.raises(ValueError, match="default_device"):
        with funcgrad.default_device(3.5):
            pass
    assert funcgrad.config.default_device is None


# --- transfer_guard ------------------------------------------------------------------------
X = None


def _x():
    global X
    if X is None:
        X = jnp.arange(3.0)
    return X


IMPLICIT_H2D = {
    "array+numpy": lambda: _x() + np.ones(3),
    "array+python_scalar": lambda: _x() + 1.5,
    "jit(numpy)": lambda: funcgrad.jit(lambda a: a * 2)(np.ones(3)),
    "jit(scalar)": lambda: funcgrad.jit(lambda a: a * 2)(2.0),
    "sin(numpy)": lambda: jnp.sin(np.ones(3)),
}
IMPLICIT_D2H = {
    "np.asarray": lambda: np.asarray(_x()),
    "float": lambda: float(_x()[0]),
    "str": lambda: str(_x()),
    "item": lambda: _x()[1].item(),
    "tolist": lambda: _x().tolist(),
}


@pytest.mark.parametrize("name", sorted(IMPLICIT_H2D))
def test_transfer_guard_disallows_implicit_host_to_device(name):
    _x()
    with funcgrad.transfer_guard("disallow"):
        with pytest.raises(RuntimeError, match="Disallowed host-to-device transfer"):
            IMPLICIT_H2D[name]()
    IMPLICIT_H2D[name]()          # allowed again after the block


@pytest.mark.parametrize("name", sorted(IMPLICIT_D2H))
def test_transfer_guard_disallows_implicit_device_to_host(name):
    _x()
    with funcgrad.transfer_guard_device_to_host("disallow"):
        with pytest.raises(RuntimeError, match="Disallowed device-to-host transfer"):
            IMPLICIT_D2H[name]()
        assert repr(_x()) == "Array([0., 1., 2.], dtype=float32)"   # repr stays readable


def test_transfer_guard_explicit_copies():
    x = _x()
    with funcgrad.transfer_guard("disallow"):
        np.testing.assert_array_equal(funcgrad.device_get(funcgrad.device_put(np.ones(3)) + x),
                                      [1.0, 2.0, 3.0])
    with funcgrad.transfer_guard("disallow_explicit"):
        with pytest.raises(RuntimeError, match="explicit copy"):
            funcgrad.device_put(np.ones(3))
        with pytest.raises(RuntimeError, match="device-to-host"):
            funcgrad.device_get(x)
    # one direction only
    with funcgrad.transfer_guard_host_to_device("disallow"):
        assert float(x[2]) == 2.0
        with pytest.raises(RuntimeError):
            x + np.ones(3)


def test_transfer_guard_log(caplog):
    x = _x()
    with caplog.at_level(logging.WARNING, logger="funcgrad"):
        with funcgrad.transfer_guard("log"):
            y = x + np.ones(3)
            funcgrad.device_put(np.ones(3))                  # explicit: not logged
        with funcgrad.transfer_guard("log_explicit"):
            funcgrad.device_put(np.ones(3))
    np.testing.assert_array_equal(np.asarray(y), [1.0, 2.0, 3.0])
    messages = [r.getMessage() for r in caplog.records]
    assert sum("Implicit host-to-device" in m for m in messages) == 1
    assert sum("Explicit host-to-device" in m for m in messages) == 1


def test_transfer_guard_config_and_levels():
    funcgrad.config.update("jax_transfer_guard", "disallow")
    try:
        assert funcgrad.config.transfer_guard_device_to_device == "disallow"
        with pytest.raises(RuntimeError):
            np.asarray(_x())
    finally:
        funcgrad.config.update("transfer_guard", "allow")
    with pytest.raises(ValueError, match="must be one of"):
        funcgrad.config.update("transfer_guard_host_to_device", "forbid")
    np.asarray(_x())


def test_transfer_guard_device_to_device_subprocess():
    script = textwrap.dedent("""
        import numpy as np, funcgrad
        a = funcgrad.device_put(np.ones(2), funcgrad.devices()[0])
        b = funcgrad.device_put(np.ones(2), funcgrad.devices()[1])
        with funcgrad.transfer_guard_device_to_device("disallow"):
            moved = funcgrad.device_put(a, funcgrad.devices()[2])     # explicit
            try:
                a + b                     # b is copied to a's device: implicit
                print("no error")
            except RuntimeError as e:
                print(str(e).split(":")[0])
        print(moved.devices() == {funcgrad.devices()[2]})
    """)
    env = dict(os.environ, FUNCGRAD_CPU_DEVICES="4")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["Disallowed device-to-device transfer", "True"]


def test_transfer_guard_matches_jax_host_to_device():
    jax = pytest.importorskip("jax")
    jx = jax.numpy.arange(3.0)
    for level in ("disallow", "allow"):
        with jax.transfer_guard(level):
            try:
                jx + np.ones(3)
                jax_raised = False
            except Exception:
                jax_raised = True
        with funcgrad.transfer_guard(level):
            try:
                _x() + np.ones(3)
                ours_raised = False
            except RuntimeError:
                ours_raised = True
        assert jax_raised == ours_raised == (level == "disallow")


# --- ensure_compile_time_eval ----------------------------------------------------------------
def _compile_time_program(api, np_):
    """The same program in funcgrad and JAX: a Python branch on a value computed at trace
    time, next to a staged operation on the traced argument."""
    seen = []

    @api.jit
    def f(x):
        with api.ensure_compile_time_eval():
            n = np_.sum(np_.arange(4.0))
            seen.append(float(n))                  # concrete: no ConcretizationTypeError
            y = np_.sin(x) * 2                     # traced: staged
            big = bool(n > 5)
        return y + n if big else y - n
    return f, seen


def test_ensure_compile_time_eval_under_jit():
    f, seen = _compile_time_program(funcgrad, jnp)
    np.testing.assert_allclose(np.asarray(f(0.5)), 2 * np.sin(0.5) + 6, rtol=1e-6)
    assert seen == [6.0]
    jaxpr = funcgrad.make_jaxpr(f)(0.5)
    text = str(jaxpr)
    assert "sin" in text and "arange" not in text and "iota" not in text
    # without the block the same branch is an error
    with pytest.raises(funcgrad.ConcretizationTypeError):
        funcgrad.jit(lambda x: x if jnp.sum(jnp.arange(4.0)) > 5 else -x)(1.0)


def test_ensure_compile_time_eval_under_grad_vmap_and_eagerly():
    def g(x):
        with funcgrad.ensure_compile_time_eval():
            c = jnp.cos(2.0)
            assert isinstance(c, funcgrad.Array)
            return c * x ** 2
    np.testing.assert_allclose(float(funcgrad.grad(g)(3.0)), 6 * np.cos(2.0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(funcgrad.vmap(g)(jnp.arange(3.0))),
                               np.cos(2.0) * np.arange(3.0) ** 2, rtol=1e-6)
    eqns = funcgrad.make_jaxpr(g)(1.0).jaxpr.eqns
    assert [e.prim.name for e in eqns] == ["integer_pow", "mul"]     # cos ran at trace time
    with funcgrad.ensure_compile_time_eval():      # eagerly: no change
        assert float(jnp.ones(()) * 2) == 2.0


def test_ensure_compile_time_eval_matches_jax():
    jax = pytest.importorskip("jax")
    f, seen = _compile_time_program(funcgrad, jnp)
    jf, jseen = _compile_time_program(jax, jax.numpy)
    np.testing.assert_allclose(np.asarray(f(0.25)), np.asarray(jf(0.25)), rtol=1e-6)
    assert seen == jseen


# --- numpy_dtype_promotion -------------------------------------------------------------------
# (case, raises under "strict"): JAX 0.10.2's answers, checked live below when JAX is installed
STRICT_CASES = {
    "f32+int_scalar": (lambda np_: np_.ones(2) + 1, False),
    "f32+float_scalar": (lambda np_: np_.ones(2) + 1.5, False),
    "i32+int_scalar": (lambda np_: np_.ones(2, "int32") + 1, False),
    "i32+float_scalar": (lambda np_: np_.ones(2, "int32") + 1.5, True),
    "f32+i32": (lambda np_: np_.ones(2) + np_.ones(2, "int32"), True),
    "f32+f16": (lambda np_: np_.ones(2) * np_.ones(2, "float16"), True),
    "f32+complex_scalar": (lambda np_: np_.ones(2) + 1j, True),
    "bool+int_scalar": (lambda np_: np_.ones(2, bool) + 1, True),
    "f32+bool": (lambda np_: np_.ones(2) + np_.ones(2, bool), True),
    "where": (lambda np_: np_.where(np_.ones(2, bool), np_.ones(2), np_.ones(2, "int32")),
              True),
    "concatenate": (lambda np_: np_.concatenate([np_.ones(2), np_.ones(2, "int32")]), True),
    "f32+numpy_f64": (lambda np_: np_.ones(2) + np.ones(2), False),   # float64 is narrowed
    "mean_of_ints": (lambda np_: np_.mean(np_.ones(3, "int32")), False),
}


def _strict_outcome(np_, promotion, fn):
    with promotion("strict"):
        try:
            out = fn(np_)
        except TypeError as e:
            return "raise", str(e)
    return str(out.dtype), None


@pytest.mark.parametrize("case", sorted(STRICT_CASES))
def test_numpy_dtype_promotion_strict(case):
    fn, raises = STRICT_CASES[case]
    outcome, message = _strict_outcome(jnp, funcgrad.numpy_dtype_promotion, fn)
    assert (outcome == "raise") == raises
    if raises:
        assert "numpy_dtype_promotion='strict'" in message
    standard = fn(jnp)                                # allowed again outside the block
    assert standard.dtype in (np.float32, np.int32, np.complex64)


def test_numpy_dtype_promotion_message_and_grad():
    x, i = jnp.ones(2), jnp.ones(2, "int32")
    with funcgrad.numpy_dtype_promotion("strict"):
        with pytest.raises(funcgrad.core.dtypes.TypePromotionError,
                           match=r"\('float32', 'int32'\)"):
            x + i
        g = funcgrad.grad(lambda v: jnp.sum(jnp.tanh(v) ** 2 / 2.0))(x)
    np.testing.assert_allclose(np.asarray(g), np.tanh(1.0) * (1 - np.tanh(1.0) ** 2),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="must be one of"):
        funcgrad.config.update("numpy_dtype_promotion", "loose")


def test_numpy_dtype_promotion_matches_jax():
    jax = pytest.importorskip("jax")
    for case, (fn, _) in STRICT_CASES.items():
        ours, _ = _strict_outcome(jnp, funcgrad.numpy_dtype_promotion, fn)
        try:
            theirs, _ = _strict_outcome(jax.numpy, jax.numpy_dtype_promotion, fn)
        except ValueError:           # JAX's TypePromotionError is a ValueError
            theirs = "raise"
        assert ours == theirs, case


# --- numpy_rank_promotion --------------------------------------------------------------------
def test_numpy_rank_promotion_raise_warn_allow():
    a, b = jnp.ones((2, 3)), jnp.arange(3.0)
    with funcgrad.numpy_rank_promotion("raise"):
        with pytest.raises(ValueError, match=r"add: operands of shapes \(2, 3\) \(3,\)"):
            a + b
        with pytest.raises(ValueError, match="rank promotion"):
            jnp.maximum(b, a)
        # same ranks, size-1 broadcasting, and scalars are not rank promotion
        np.testing.assert_array_equal(np.asarray(a + b[None, :]), np.ones((2, 3)) + np.arange(3))
        np.testing.assert_array_equal(np.asarray(a * 2 + jnp.ones((1, 3))), np.full((2, 3), 3))
        np.testing.assert_array_equal(np.asarray(a + jnp.float32(1)), np.full((2, 3), 2))
    with funcgrad.numpy_rank_promotion("warn"):
        with pytest.warns(UserWarning, match=r"rank promotion on shapes \(2, 3\) \(3,\)"):
            out = a + b
    np.testing.assert_array_equal(np.asarray(out), np.ones((2, 3)) + np.arange(3))
    np.testing.assert_array_equal(np.asarray(a + b), np.asarray(out))     # "allow" again


def test_numpy_rank_promotion_matches_jax():
    jax = pytest.importorskip("jax")
    shapes = [((2, 3), (3,)), ((2, 3), ()), ((2, 1), (1, 3)), ((4, 1, 3), (2, 3))]
    for sa, sb in shapes:
        results = []
        for api, np_ in ((funcgrad, jnp), (jax, jax.numpy)):
            with api.numpy_rank_promotion("raise"):
                try:
                    np_.ones(sa) + np_.ones(sb)
                    results.append("ok")
                except ValueError:
                    results.append("raise")
        assert results[0] == results[1], (sa, sb)


# --- checkpoint_policies ---------------------------------------------------------------------
from funcgrad import checkpoint_policies as cp               # noqa: E402
from funcgrad.ad_checkpoint import checkpoint_name           # noqa: E402

_RNG = np.random.RandomState(0)
W_NP = _RNG.randn(3, 3).astype(np.float32)
X_NP = _RNG.randn(2, 3).astype(np.float32)


def _block(np_, name_fn, w):
    def block(x):
        h = name_fn(np_.sin(x), "h")            # sin #1, named
        d = np_.dot(h, w)                       # a matrix product
        return np_.sum(np_.sin(d))              # sin #2
    return block


def _loss(policy, api=funcgrad, np_=jnp, name_fn=checkpoint_name, w=None):
    w = jnp.asarray(W_NP) if w is None else w
    block = _block(np_, name_fn, w)
    if policy is not False:
        block = api.checkpoint(block, policy=policy)
    return block


def _backward_counts(policy):
    """Primitive counts inside the backward pass's recomputing region (the remat application
    the gradient's transpose makes)."""
    closed = funcgrad.make_jaxpr(funcgrad.grad(_loss(policy)))(jnp.asarray(X_NP))
    backward = [e for e in closed.jaxpr.eqns if e.prim.name == "remat"][-1]
    names = [e.prim.name for e in backward.params["jaxpr"].jaxpr.eqns]
    return {p: names.count(p) for p in ("sin", "cos", "dot_general")}


POLICIES = {
    "none": None, "nothing": cp.nothing_saveable, "dots": cp.dots_saveable,
    "dots_no_batch": cp.dots_with_no_batch_dims_saveable,
    "only_h": cp.save_only_these_names("h"), "all_but_h": cp.save_any_names_but_these("h"),
    "both": cp.save_from_both_policies(cp.save_only_these_names("h"), cp.dots_saveable),
}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_checkpoint_policy_gradient_equals_plain(name):
    x = jnp.asarray(X_NP)
    expected = funcgrad.grad(_loss(False))(x)
    got = funcgrad.grad(_loss(POLICIES[name]))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(funcgrad.jit(funcgrad.grad(_loss(POLICIES[name])))(x)),
                               np.asarray(expected), rtol=1e-6, atol=1e-6)
    # float64 finite differences of the plain function
    xd = X_NP.astype(np.float64)

    def f64(v):
        return np.sum(np.sin(np.sin(v) @ W_NP.astype(np.float64)))
    fd = np.zeros_like(xd)
    for idx in np.ndindex(xd.shape):
        e = np.zeros_like(xd)
        e[idx] = 1e-6
        fd[idx] = (f64(xd + e) - f64(xd - e)) / 2e-6
    np.testing.assert_allclose(np.asarray(got), fd, rtol=1e-4, atol=1e-4)


def test_checkpoint_policy_decides_what_the_backward_pass_recomputes():
    # The gradient (with respect to x only) needs cos(x), cos(d) and one transposed product.
    # Nothing saved: h = sin(x) and d = h @ w are recomputed (1 sin; 1 product + 1 transposed)
    assert _backward_counts(None) == {"sin": 1, "cos": 2, "dot_general": 2}
    assert _backward_counts(cp.nothing_saveable) == {"sin": 1, "cos": 2, "dot_general": 2}
    # the product saved: neither it nor h (only its input) is recomputed
    assert _backward_counts(cp.dots_saveable) == {"sin": 0, "cos": 2, "dot_general": 1}
    assert _backward_counts(cp.dots_with_no_batch_dims_saveable) == \
        {"sin": 0, "cos": 2, "dot_general": 1}
    # h saved by name: the product is recomputed from it, sin is not
    assert _backward_counts(cp.save_only_these_names("h")) == \
        {"sin": 0, "cos": 2, "dot_general": 2}
    assert _backward_counts(cp.save_any_names_but_these("g")) == \
        {"sin": 0, "cos": 2, "dot_general": 2}
    assert _backward_counts(cp.save_any_names_but_these("h")) == \
        {"sin": 1, "cos": 2, "dot_general": 2}
    # both: nothing left to recompute but the transposed product
    assert _backward_counts(POLICIES["both"]) == {"sin": 0, "cos": 2, "dot_general": 1}


def test_dots_with_no_batch_dims_policy():
    plain = jnp.ones((2, 3))
    batched = jnp.ones((4, 2, 3))
    jp = funcgrad.make_jaxpr(lambda a, b: (jnp.dot(a, a.T), jnp.einsum("bij,bkj->bik", b, b)))(
        plain, batched)
    dots = [e for e in jp.jaxpr.eqns if e.prim.name == "dot_general"]
    assert len(dots) == 2
    avals = [[v.aval for v in e.invars] for e in dots]
    assert cp.dots_with_no_batch_dims_saveable(dots[0].prim, *avals[0], **dots[0].params)
    assert not cp.dots_with_no_batch_dims_saveable(dots[1].prim, *avals[1], **dots[1].params)
    assert cp.dots_saveable(dots[1].prim, *avals[1], **dots[1].params)
    assert cp.checkpoint_dots is cp.dots_saveable
    assert cp.everything_saveable(dots[0].prim) and not cp.nothing_saveable(dots[0].prim)


def test_checkpoint_policy_under_vmap_and_hessian():
    x = jnp.asarray(X_NP)
    per_row = funcgrad.vmap(funcgrad.grad(_loss(cp.dots_saveable)))(x[:, None, :])
    np.testing.assert_allclose(np.asarray(per_row)[:, 0],
                               np.asarray(funcgrad.grad(_loss(False))(x)), rtol=1e-6, atol=1e-6)
    v = jnp.asarray(X_NP[0])
    h = funcgrad.hessian(_loss(cp.save_only_these_names("h")))(v)
    np.testing.assert_allclose(np.asarray(h), np.asarray(funcgrad.hessian(_loss(False))(v)),
                               rtol=1e-5, atol=1e-5)


def test_checkpoint_policy_matches_jax():
    jax = pytest.importorskip("jax")
    from jax.ad_checkpoint import checkpoint_name as jax_name
    x = X_NP
    pairs = [(cp.dots_saveable, jax.checkpoint_policies.dots_saveable),
             (cp.save_only_these_names("h"), jax.checkpoint_policies.save_only_these_names("h"))]
    for ours, theirs in pairs:
        g = funcgrad.grad(_loss(ours))(jnp.asarray(x))
        jg = jax.grad(_loss(theirs, jax, jax.numpy, jax_name, jax.numpy.asarray(W_NP)))(x)
        np.testing.assert_allclose(np.asarray(g), np.asarray(jg), rtol=1e-5, atol=1e-6)


def test_checkpoint_name_is_identity_and_checks_name():
    x = jnp.arange(3.0)
    np.testing.assert_array_equal(np.asarray(checkpoint_name(x, "a")), [0.0, 1.0, 2.0])
    np.testing.assert_allclose(float(funcgrad.grad(lambda v: checkpoint_name(v * v, "a"))(3.0)),
                               6.0)
    with pytest.raises(TypeError, match="checkpoint_name"):
        checkpoint_name(x, 3)
