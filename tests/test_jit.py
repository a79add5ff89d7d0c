"""funcgrad.jit: caching, static and donated arguments, pytrees, nesting, lowering, errors."""
import dataclasses

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp


def _host_pointer(array):
    """Address of an Array's CPU buffer (its host view shares memory; no jax import)."""
    return np.asarray(array).ctypes.data



def test_cache_hits_and_misses():
    @funcgrad.jit
    def f(x, y):
        return x * y + 1.0

    x = jnp.ones((2, 3))
    np.testing.assert_allclose(np.asarray(f(x, x)), np.full((2, 3), 2.0))
    assert f.trace_count == 1
    f(x, x)
    f(jnp.zeros((2, 3)), x)                     # same avals: no retrace
    f(np.ones((2, 3), np.float32), x)          # NumPy leaf with the same aval: no retrace
    assert f.trace_count == 1
    f(jnp.ones((3, 3)), jnp.ones((3, 3)))      # new shape
    assert f.trace_count == 2
    f(jnp.ones((2, 3), "int32"), jnp.ones((2, 3), "int32"))   # new dtype
    assert f.trace_count == 3
    f(jnp.ones((2, 3), "int32"), jnp.ones((2, 3), "int32"))
    assert f.trace_count == 3


def test_cache_on_pytree_structure_and_kwargs():
    @funcgrad.jit
    def f(tree):
        return sum(jnp.sum(v) for v in funcgrad.tree_util.tree_leaves(tree))

    a = jnp.ones(2)
    assert float(f({"a": a, "b": a})) == 4.0
    f({"a": a * 2, "b": a})
    assert f.trace_count == 1
    assert float(f({"a": a, "c": a})) == 4.0   # different keys: new structure
    assert f.trace_count == 2
    assert float(f([a, a, a])) == 6.0
    assert f.trace_count == 3

    @funcgrad.jit
    def g(x, *, scale):
        return x * scale
    np.testing.assert_allclose(np.asarray(g(a, scale=3.0)), [3.0, 3.0])
    g(a, scale=4.0)
    assert g.trace_count == 1                  # a keyword array argument is traced, not static


def test_python_scalars_are_weak_and_cached_by_type():
    @funcgrad.jit
    def f(x, s):
        return x * s

    x16 = jnp.ones(3, "float16")
    assert f(x16, 2.0).dtype == np.float16
    assert f(x16, 3.0).dtype == np.float16
    assert f.trace_count == 1
    assert f(x16, 2).dtype == np.float16       # a Python int: new (weak int) signature
    assert f.trace_count == 2
    out = funcgrad.jit(lambda a, b: a + b)(1.0, 2)
    assert out.dtype == np.float32 and out.weak_type and float(out) == 3.0


def test_static_argnums_and_argnames():
    @funcgrad.jit
    def plain(x):
        return x
    calls = []

    def f(x, n, mode="add"):
        calls.append(1)
        return x + n if mode == "add" else x * n

    g = funcgrad.jit(f, static_argnums=1, static_argnames="mode")
    x = jnp.arange(3.0)
    np.testing.assert_allclose(np.asarray(g(x, 2)), [2, 3, 4])
    np.testing.assert_allclose(np.asarray(g(x, 2, mode="mul")), [0, 2, 4])
    np.testing.assert_allclose(np.asarray(g(x, 2, mode="add")), [2, 3, 4])
    g(x, 2, mode="add")
    # as in JAX, an explicit keyword is part of the signature even when it equals the default
    assert g.trace_count == 3
    g.clear_cache()
    g(x, 2)
    np.testing.assert_allclose(np.asarray(g(x, 3)), [3, 4, 5])
    assert g.trace_count == 5
    # a static positional argument passed by keyword is still static
    np.testing.assert_allclose(np.asarray(g(x, n=3)), [3, 4, 5])

    h = funcgrad.jit(lambda x, shape: jnp.zeros(shape) + x, static_argnames=("shape",))
    assert h(1.0, shape=(2, 2)).shape == (2, 2)
    with pytest.raises(TypeError, match=r"static argument.*hashable.*list"):
        h(1.0, shape=[2, 2])
    k = funcgrad.jit(lambda x, shape: jnp.zeros(shape) + x, static_argnums=(1,))
    with pytest.raises(TypeError, match=r"jit\(<lambda>\): static argument 1 must be hashable"):
        k(1.0, [2])


def test_static_argnums_allow_non_array_values():
    @funcgrad.jit(static_argnums=(1,))
    def f(x, fn):
        return fn(x)
    np.testing.assert_allclose(np.asarray(f(jnp.ones(2), jnp.exp)), np.exp(np.ones(2)), rtol=1e-6)
    with pytest.raises(TypeError, match=r"jit\(g\).*static_argnums"):
        @funcgrad.jit
        def g(x, fn):
            return fn(x)
        g(jnp.ones(2), "not an array")


def test_closed_over_arrays_and_constants():
    w = jnp.arange(4.0)
    b = np.float32(0.5)

    @funcgrad.jit
    def f(x):
        return x * w + b + jnp.asarray(np.ones(4, np.float32))

    np.testing.assert_allclose(np.asarray(f(jnp.ones(4))), np.arange(4.0) + 1.5)
    jaxpr = funcgrad.make_jaxpr(f._fun)(jnp.ones(4))
    assert len(jaxpr.consts) >= 1


def test_nested_jit_and_pytrees_out():
    @funcgrad.jit
    def inner(x):
        return {"s": jnp.sin(x), "c": jnp.cos(x)}

    @funcgrad.jit
    def outer(x, pair):
        a, b = pair
        d = inner(x * a)
        return d["s"] + b, (d["c"], None, [x])

    x = jnp.linspace(0.0, 1.0, 5)
    s, (c, none, (xx,)) = outer(x, (2.0, jnp.ones(5)))
    np.testing.assert_allclose(np.asarray(s), np.sin(2 * np.linspace(0, 1, 5)) + 1, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(c), np.cos(2 * np.linspace(0, 1, 5)), rtol=1e-6)
    assert none is None and xx.shape == (5,)
    text = str(funcgrad.make_jaxpr(outer._fun)(x, (2.0, jnp.ones(5))))
    assert "jit" in text and "sin" in text
    # the inner function is traced once and reused from the outer trace's cache
    assert inner.trace_count == 1


def test_dataclass_pytree_arguments():
    @funcgrad.tree_util.register_dataclass
    @dataclasses.dataclass
    class Lin:
        w: object
        b: object

    @funcgrad.jit
    def apply(p, x):
        return Lin(p.w * 2, x @ p.w + p.b)

    p = Lin(jnp.eye(2), jnp.ones(2))
    out = apply(p, jnp.ones(2))
    assert isinstance(out, Lin)
    np.testing.assert_allclose(np.asarray(out.b), [2.0, 2.0])


def test_outputs_numpy_constants_and_inputs_returned():
    f = funcgrad.jit(lambda x: (x, 3.0, np.arange(2)))
    a = jnp.ones(2)
    x, three, r = f(a)
    np.testing.assert_allclose(np.asarray(x), [1, 1])
    assert isinstance(three, funcgrad.Array) and float(three) == 3.0
    assert isinstance(r, funcgrad.Array) and r.dtype == np.int32
    assert funcgrad.jit(lambda: jnp.ones(3) * 2)().shape == (3,)


def test_lower_as_text_compile_cost_analysis():
    def f(x, y):
        return jnp.tanh(x @ y)

    x = jnp.ones((8, 16))
    y = jnp.ones((16, 4))
    lowered = funcgrad.jit(f).lower(x, y)
    text = lowered.as_text()
    assert text.startswith("module @") and "stablehlo.dot_general" in text
    assert "tensor<8x16xf32>" in text and "stablehlo.tanh" in text
    compiled = lowered.compile()
    cost = compiled.cost_analysis()
    assert cost["flops"] >= 2 * 8 * 16 * 4
    assert "HloModule" in compiled.as_text()
    np.testing.assert_allclose(np.asarray(compiled(x, y)), np.tanh(np.full((8, 4), 16.0)))


def test_donate_argnums(on_cpu):
    @funcgrad.jit
    def nothing(x):
        return x

    f = funcgrad.jit(lambda x, y: (x + y, y * 2), donate_argnums=0)
    x, y = jnp.ones(1000), jnp.ones(1000)
    text = f.lower(x, y).as_text()
    assert "jax.buffer_donor = true" in text.split("\n")[1].split("%arg1")[0]
    ptr = _host_pointer(x)
    s, d = f(x, y)
    assert x.is_deleted() and not y.is_deleted()
    assert _host_pointer(s) == ptr       # XLA reused the donated buffer
    np.testing.assert_allclose(np.asarray(s), 2.0)
    with pytest.raises(RuntimeError, match="deleted"):
        np.asarray(x)
    with pytest.raises(RuntimeError, match=r"deleted.*donated"):
        f(x, y)
    with pytest.raises(RuntimeError, match=r"deleted.*donated"):
        x + 1
    # donating a pytree argument donates every leaf
    g = funcgrad.jit(lambda p: {k: v + 1 for k, v in p.items()}, donate_argnums=(0,))
    p = {"a": jnp.ones(10), "b": jnp.zeros(10)}
    out = g(p)
    assert p["a"].is_deleted() and p["b"].is_deleted()
    np.testing.assert_allclose(np.asarray(out["b"]), 1.0)


def test_control_flow_on_tracer_error():
    @funcgrad.jit
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(TypeError) as info:
        f(jnp.ones(()))
    err = info.value
    assert isinstance(err, funcgrad.ConcretizationTypeError)
    msg = str(err)
    assert "tracing f" in msg and "test_jit.py" in msg and "static_argnums" in msg
    assert "lax.cond" in msg
    line = f.__wrapped__.__code__.co_firstlineno + 2
    assert f"test_jit.py:{line}" in msg

    @funcgrad.jit
    def g(n):
        return jnp.zeros(int(n))
    with pytest.raises(funcgrad.ConcretizationTypeError, match=r"int\(\).*tracing g"):
        g(3)
    with pytest.raises(funcgrad.TracerArrayConversionError):
        funcgrad.jit(lambda x: np.asarray(x))(jnp.ones(2))


def test_escaped_tracer_error():
    saved = []

    @funcgrad.jit
    def leak(x):
        saved.append(x)
        return x * 2

    leak(jnp.ones(3))
    with pytest.raises(funcgrad.UnexpectedTracerError, match=r"add.*f32\[3\].*escaped"):
        saved[0] + 1
    with pytest.raises(funcgrad.UnexpectedTracerError, match=r"tracing leak"):
        funcgrad.jit(lambda y: y + saved[0])(jnp.ones(3))


def test_jit_errors_name_function():
    @funcgrad.jit
    def bad(x, y):
        return x @ y
    with pytest.raises((TypeError, ValueError), match=r"matmul|dot_general"):
        bad(jnp.ones((2, 3)), jnp.ones((2, 3)))
    with pytest.raises(TypeError, match=r"jit\(bad\).*leaves must be arrays"):
        bad("a", jnp.ones(2))


def test_method_and_decorator_forms():
    class M:
        def __init__(self, k):
            self.k = k

        @funcgrad.jit(static_argnums=0)
        def __call__(self, x):
            return x * self.k

    m = M(2)
    assert float(m(jnp.ones(()))) == 2.0
    m(jnp.zeros(()))
    assert M.__call__.trace_count == 1
    f = funcgrad.jit(static_argnums=(1,))(lambda x, n: x ** n)
    assert float(f(jnp.asarray(2.0), 3)) == 8.0
    assert "jit(" in repr(f)


def test_make_jaxpr_printer_and_checker():
    jaxpr = funcgrad.make_jaxpr(lambda x, y: jnp.sin(x) * y + 1.0)(1.0, jnp.ones(3))
    text = str(jaxpr)
    assert "sin" in text and "mul" in text and "f32[3]" in text
    from funcgrad.core.jaxpr import check_jaxpr
    check_jaxpr(jaxpr.jaxpr)
    j2 = funcgrad.make_jaxpr(lambda x, n: x * n, static_argnums=1)(jnp.ones(2), 3)
    assert len(j2.jaxpr.invars) == 1


def test_jit_clear_cache():
    f = funcgrad.jit(lambda x: x + 1)
    f(jnp.ones(2))
    f.clear_cache()
    f(jnp.ones(2))
    assert f.trace_count == 2


def test_x64_switch_retraces():
    f = funcgrad.jit(lambda x: x + jnp.arange(3))
    x = jnp.ones(3, "int32")
    assert f(x).dtype == np.int32
    funcgrad.config.update("enable_x64", True)
    try:
        assert f(x).dtype == np.int64          # the old trace is not reused
    finally:
        funcgrad.config.update("enable_x64", False)
    assert f(x).dtype == np.int32


def test_fast_path_matches_general_path():
    f = funcgrad.jit(lambda a, b: (a * b, a - b))
    g = funcgrad.jit(lambda a: a.sum())
    x, y = jnp.arange(4.0), jnp.ones(4)
    for _ in range(3):                          # first call traces, later ones take the fast path
        p, m = f(x, y)
        np.testing.assert_allclose(np.asarray(p), np.arange(4.0))
        np.testing.assert_allclose(np.asarray(m), np.arange(4.0) - 1)
        assert float(g(x)) == 6.0
    assert f.trace_count == 1 and g.trace_count == 1
    assert f(x, jnp.ones(4, "int32"))[0].dtype == np.float32     # new avals: general path
    assert f.trace_count == 2
    # closed-over constants ride along on the fast path too
    w = jnp.asarray(np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    h = funcgrad.jit(lambda a: a * w)
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(h(x)), np.arange(4.0) * [1, 2, 3, 4])


def test_deleted_input_errors_name_the_function():
    g = funcgrad.jit(lambda a: a + 1)
    x = jnp.ones(3)
    g(x)
    g(x)
    x.delete()
    with pytest.raises(RuntimeError, match=r"jit\(<lambda>\).*deleted"):
        g(x)
    with pytest.raises(RuntimeError, match=r"add.*deleted"):
        x + x


def test_pytree_arguments_repeat_calls_match_first_and_numpy():
    # lists/dicts/modules of Arrays take a cached path after the first call: every call must
    # still see its own leaves, write module state back, and fall back for non-Array leaves
    f = funcgrad.jit(lambda p, x: {"y": p["w"] @ x + p["b"], "s": jnp.sum(p["w"])})
    rng = np.random.default_rng(1)
    for _ in range(3):
        w, b, x = rng.standard_normal((3, 4)), rng.standard_normal(3), rng.standard_normal(4)
        w, b, x = (np.asarray(a, np.float32) for a in (w, b, x))
        out = f({"w": jnp.asarray(w), "b": jnp.asarray(b)}, jnp.asarray(x))
        np.testing.assert_allclose(np.asarray(out["y"]), w @ x + b, rtol=1e-5)
        np.testing.assert_allclose(float(out["s"]), w.sum(), rtol=1e-5)
    assert f.trace_count == 1
    assert f._fast_tree        # the repeat calls above went through the cached pytree path
    out = f({"w": jnp.asarray(w), "b": 1.5}, jnp.asarray(x))     # a Python scalar leaf
    np.testing.assert_allclose(np.asarray(out["y"]), w @ x + 1.5, rtol=1e-5)
    out = f({"w": jnp.asarray(w[:2]), "b": jnp.asarray(b[:2])}, jnp.asarray(x))  # new shapes
    np.testing.assert_allclose(np.asarray(out["y"]), w[:2] @ x + b[:2], rtol=1e-5)

    import funcgrad.nn as nn
    funcgrad.manual_seed(0)
    eager, jitted = nn.BatchNorm1d(4), nn.BatchNorm1d(4)
    step = funcgrad.jit(lambda m, x: m(x))
    for k in range(3):
        xb = jnp.asarray(rng.standard_normal((5, 4)).astype(np.float32) + k)
        np.testing.assert_allclose(np.asarray(step(jitted, xb)), np.asarray(eager(xb)),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(jitted.running_mean),   # GPU reductions: 1e-6
                                   np.asarray(eager.running_mean), rtol=1e-5, atol=1e-8)
        assert int(jitted.num_batches_tracked) == k + 1
    assert step.trace_count == 1 and step._fast_tree


def test_pytree_call_with_python_scalar_leaves_uses_current_values():
    # A (params, hyperparameters) pytree with Python scalars, as an optimizer passes its
    # learning rate: later calls take the cached path, and a changed value is used, not a
    # stale device copy of the earlier one.
    calls = []

    @funcgrad.jit
    def step(tree, x):
        calls.append(1)
        p, h = tree
        return p["w"] * h["lr"] + x * h["n"] + jnp.where(h["flag"], 1.0, 0.0)

    p = {"w": jnp.asarray(np.arange(3.0, dtype=np.float32))}
    x = jnp.ones(3)
    for lr, n, flag in [(0.5, 2, True), (0.25, 3, False), (-0.0, 1, True), (0.0, 1, True),
                        (0.5, 2, True)]:
        got = step((p, {"lr": lr, "n": n, "flag": flag}), x)
        want = np.arange(3.0) * lr + n + (1.0 if flag else 0.0)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    assert len(calls) == 1 and step.trace_count == 1
    # -0.0 and 0.0 are different arguments: the sign reaches the computation
    sign = funcgrad.jit(lambda t: jnp.copysign(1.0, t[1]) + t[0])
    one = jnp.asarray(0.0)
    assert float(sign((one, 0.0))) == 1.0 and float(sign((one, -0.0))) == -1.0


def test_cpu_compile_options_respect_xla_flags_and_unknown_options(monkeypatch, on_cpu):
    from funcgrad.lowering import cpu, executable
    device = funcgrad.devices()[0]
    key = "xla_cpu_experimental_ynn_fusion_type"
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert dict(executable._option_overrides(device))[key] == cpu.CPU_COMPILE_OPTIONS[key]
    # a user's XLA_FLAGS setting of the same option wins
    monkeypatch.setenv("XLA_FLAGS", f"--{key}=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT")
    assert key not in dict(executable._option_overrides(device))
    monkeypatch.delenv("XLA_FLAGS")
    # an option this jaxlib does not know is dropped, and the program still compiles and runs
    monkeypatch.setitem(cpu.CPU_COMPILE_OPTIONS, "xla_cpu_no_such_option_here", "1")
    monkeypatch.setattr(executable, "_rejected_options", set())
    out = funcgrad.jit(lambda x: x * 3.0 + 1.0)(jnp.arange(3.0))
    np.testing.assert_allclose(np.asarray(out), [1.0, 4.0, 7.0])
    assert "xla_cpu_no_such_option_here" in executable._rejected_options


def test_disable_jit_runs_the_python_function_eagerly():
    seen = []

    @funcgrad.jit
    def f(x, scale):
        seen.append(float(x.sum()))            # needs a concrete value: fails when traced
        return x * scale if seen[-1] > 0 else -x

    x = jnp.arange(3.0)
    with pytest.raises(funcgrad.ConcretizationTypeError):
        f(x, 2.0)
    with funcgrad.disable_jit():
        np.testing.assert_allclose(np.asarray(f(x, 2.0)), [0.0, 2.0, 4.0])
        with funcgrad.disable_jit(False):       # nested: still eager
            np.testing.assert_allclose(np.asarray(f(-x, 2.0)), [0.0, 1.0, 2.0])
        g = funcgrad.grad(lambda v: f(v, 3.0).sum())(x)   # transformations still apply
        np.testing.assert_allclose(np.asarray(g), [3.0, 3.0, 3.0])
    assert seen[:2] == [3.0, -3.0]
    assert f.trace_count == 1 and float(funcgrad.jit(lambda v: v + 1)(x)[0]) == 1.0
