"""cond/switch, while_loop, fori_loop, scan and map: against Python loops, under jit, grad
(finite differences through check_grads), jvp and vmap (against a loop over the batch)."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.test_util import check_grads
from funcgrad.transforms.ad import grad, jvp
from funcgrad.transforms.batching import vmap


def _close(a, b, **kw):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=kw.get("rtol", 1e-5),
                               atol=kw.get("atol", 1e-6))


# --- cond / switch -----------------------------------------------------------------------------
@pytest.mark.parametrize("pred", [True, False])
def test_cond_eager_and_jit(pred):
    x = np.arange(4.0, dtype=np.float32)
    f = lambda p, v: lax.cond(p, lambda a: a * 2.0, lambda a: -a, v)  # noqa: E731
    want = x * 2 if pred else -x
    _close(f(pred, x), want)
    _close(funcgrad.jit(f)(pred, x), want)
    _close(f(jnp.asarray(pred), x), want)


def test_cond_pytree_and_int_predicate():
    out = lax.cond(3, lambda d: {"a": d["a"] + 1, "b": d["b"]}, lambda d: d,
                   {"a": jnp.ones(2), "b": np.int32(7)})
    _close(out["a"], [2.0, 2.0])
    assert int(out["b"]) == 7
    assert out["b"].dtype == np.int32


def test_cond_closure_consts_under_jit():
    w = jnp.asarray([1.0, 2.0])

    @funcgrad.jit
    def f(p, x):
        return lax.cond(p, lambda v: v * w, lambda v: v + w, x)

    _close(f(True, jnp.ones(2)), [1.0, 2.0])
    _close(f(False, jnp.ones(2)), [2.0, 3.0])


def test_cond_branch_mismatch_error_names_both_types():
    with pytest.raises(TypeError, match=r"f32\[2\].*f32\[3\]|f32\[3\].*f32\[2\]"):
        lax.cond(True, lambda v: v, lambda v: jnp.ones(3), jnp.ones(2))
    with pytest.raises(TypeError, match="scalar"):
        lax.cond(jnp.ones(2) > 0, lambda v: v, lambda v: v, 1.0)


@pytest.mark.parametrize("i", [-3, 0, 1, 2, 7])
def test_switch_clamps_index(i):
    branches = [lambda v: v, lambda v: v * 2.0, lambda v: v * 3.0]
    x = jnp.asarray([1.0, 2.0])
    k = min(max(i, 0), 2)
    _close(lax.switch(i, branches, x), np.array([1.0, 2.0]) * (k + 1))
    _close(funcgrad.jit(lambda j, v: lax.switch(j, branches, v))(i, x),
           np.array([1.0, 2.0]) * (k + 1))


def test_cond_grad_and_jvp():
    f = lambda x: lax.cond(x > 0, lambda v: jnp.sin(v) * v, lambda v: v ** 3, x)  # noqa: E731
    check_grads(f, (0.7,), order=2)
    check_grads(f, (-0.4,), order=1)
    _close(grad(f)(0.7), np.cos(0.7) * 0.7 + np.sin(0.7))
    p, t = jvp(f, (-0.5,), (1.0,))
    _close(t, 3 * 0.25)


def test_switch_grad_multiple_operands():
    def f(x, y):
        return lax.switch(1, [lambda a, b: a * b, lambda a, b: a * jnp.exp(b),
                              lambda a, b: a - b], x, y)
    check_grads(f, (np.array([0.3, -1.2]), np.array([0.5, 0.1])), order=1)


def test_cond_vmap_batched_predicate():
    xs = np.linspace(-1, 1, 6).astype(np.float32)
    f = lambda x: lax.cond(x > 0, lambda v: jnp.sin(v), lambda v: v * v, x)  # noqa: E731
    _close(vmap(f)(xs), np.stack([np.asarray(f(x)) for x in xs]))
    s = lambda i, x: lax.switch(i, [lambda v: v, lambda v: 2 * v, lambda v: 3 * v], x)  # noqa
    _close(vmap(s)(jnp.asarray([0, 2, 1, 5]), jnp.ones(4)), [1.0, 3.0, 2.0, 3.0])


def test_cond_vmap_unbatched_predicate():
    xs = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    f = lambda x: lax.cond(True, lambda v: v * 2.0, lambda v: v, x)  # noqa: E731
    _close(vmap(f)(xs), xs * 2)


# --- while / fori --------------------------------------------------------------------------------
def test_while_loop_eager_and_jit():
    body = lambda c: (c[0] + 1, c[1] * 2.0)  # noqa: E731
    cond_fn = lambda c: c[0] < 10  # noqa: E731
    i, v = lax.while_loop(cond_fn, body, (0, 1.0))
    assert int(i) == 10 and float(v) == 1024.0
    i2, v2 = funcgrad.jit(lambda c: lax.while_loop(cond_fn, body, c))((0, 1.0))
    assert int(i2) == 10 and float(v2) == 1024.0


def test_while_loop_errors():
    with pytest.raises(TypeError, match="boolean scalar"):
        lax.while_loop(lambda c: c, lambda c: c, 1.0)
    with pytest.raises(TypeError, match=r"f32\[\].*f32\[2\]"):
        lax.while_loop(lambda c: c < 1.0, lambda c: jnp.ones(2), 0.0)


def test_while_loop_jvp_and_grad_error():
    def f(x):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * x), (0, 1.0))[1]
    p, t = jvp(f, (2.0,), (1.0,))
    _close(p, 8.0)
    _close(t, 12.0)
    check_grads(f, (1.3,), order=1, modes=("fwd",))
    with pytest.raises(TypeError, match="while_loop.*reverse-mode"):
        grad(f)(2.0)


def test_while_loop_vmap_batched_predicate():
    n = jnp.asarray([1, 3, 5, 0])
    f = lambda k: lax.while_loop(lambda c: c[0] < k, lambda c: (c[0] + 1, c[1] * 2.0),  # noqa
                                 (0, 1.0))
    i, v = vmap(f)(n)
    np.testing.assert_array_equal(np.asarray(i), [1, 3, 5, 0])
    _close(v, [2.0, 8.0, 32.0, 1.0])


def test_fori_loop_static_and_traced_bounds():
    assert int(lax.fori_loop(0, 5, lambda i, s: s + i, 0)) == 10
    assert int(lax.fori_loop(3, 1, lambda i, s: s + i, 0)) == 0
    f = funcgrad.jit(lambda n, x: lax.fori_loop(0, n, lambda i, s: s + x, 0.0))
    _close(f(3, 2.0), 6.0)
    jaxpr = funcgrad.make_jaxpr(lambda x: lax.fori_loop(0, 4, lambda i, c: c * x, 1.0))(2.0)
    assert "scan" in str(jaxpr)
    jaxpr = funcgrad.make_jaxpr(lambda n: lax.fori_loop(0, n, lambda i, c: c + i, 0))(3)
    assert "while" in str(jaxpr)


def test_fori_loop_grad_reverse_mode():
    def f(x):
        return lax.fori_loop(0, 4, lambda i, c: jnp.sin(c) * x + i, 0.5)
    check_grads(f, (0.8,), order=1)
    check_grads(f, (0.8,), order=2, modes=("fwd",))


# --- scan ----------------------------------------------------------------------------------------
def _scan_ref(f, init, xs, reverse=False):
    c, ys = init, []
    order = range(len(xs))[::-1] if reverse else range(len(xs))
    for t in order:
        c, y = f(c, xs[t])
        ys.append(y)
    if reverse:
        ys = ys[::-1]
    return c, np.stack([np.asarray(y) for y in ys])


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("unroll", [1, 2, 5])
def test_scan_matches_loop(reverse, unroll):
    xs = np.arange(1.0, 6.0, dtype=np.float32)
    step = lambda c, x: (c * 0.5 + x, c * x)  # noqa: E731
    c, ys = lax.scan(step, 1.0, xs, reverse=reverse, unroll=unroll)
    c_ref, ys_ref = _scan_ref(lambda c, x: (c * 0.5 + x, c * x), np.float32(1.0), xs, reverse)
    _close(c, c_ref)
    _close(ys, ys_ref)
    cj, ysj = funcgrad.jit(lambda xs: lax.scan(step, 1.0, xs, reverse=reverse,
                                               unroll=unroll))(xs)
    _close(cj, c_ref)
    _close(ysj, ys_ref)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("unroll", [1, 2, 3])
@pytest.mark.parametrize("length", [0, 1, 2, 6])
def test_scan_several_same_shaped_outputs_match_loop(reverse, unroll, length):
    # several ys of one shape and dtype take the lowering path that runs the first step
    # before the loop; ys of other shapes ride along
    xs = np.arange(length * 3, dtype=np.float32).reshape(length, 3) / 7.0
    step = lambda c, x: (c * 0.5 + x, (c * x, c + x, jnp.sum(x), c - 1.0))  # noqa: E731
    c0 = np.ones(3, np.float32)
    c_ref = c0
    order = range(length - 1, -1, -1) if reverse else range(length)
    out = [None] * length
    for t in order:
        c_ref, out[t] = step(c_ref, xs[t])
    cj, ysj = funcgrad.jit(lambda c, xs: lax.scan(step, c, xs, reverse=reverse,
                                                  unroll=unroll))(c0, xs)
    _close(cj, c_ref)
    for k in range(4):
        want = np.stack([np.asarray(o[k]) for o in out]) if length else \
            np.zeros((0,) + np.shape(ysj[k])[1:], np.float32)
        _close(ysj[k], want)


def test_scan_pytrees_length_only_and_empty():
    xs = {"a": np.ones((3, 2), np.float32), "b": np.arange(3, dtype=np.int32)}
    (c1, c2), ys = lax.scan(lambda c, x: ((c[0] + x["a"], c[1] + x["b"]), x["b"] * 2),
                            (np.zeros(2, np.float32), 0), xs)
    _close(c1, [3.0, 3.0])
    assert int(c2) == 3
    np.testing.assert_array_equal(np.asarray(ys), [0, 2, 4])
    c, ys = lax.scan(lambda c, _: (c * 2.0, c), 1.0, None, length=4)
    _close(c, 16.0)
    _close(ys, [1.0, 2.0, 4.0, 8.0])
    c, ys = lax.scan(lambda c, x: (c + x, x), 0.0, np.zeros((0,), np.float32))
    assert ys.shape == (0,) and float(c) == 0.0


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("length", [1, 2, 5])
def test_scan_grad_reads_previous_carries(reverse, length, x64, rng):
    # the backward pass reads each step's incoming carries (h, c) and a swapped pair (a, b):
    # under grad, the incoming h comes from the stacked outputs shifted by one step; it must
    # match differentiating the same loop unrolled in Python
    w = rng.standard_normal((3, 3)) * 0.5
    xs = rng.standard_normal((length, 3))
    init = (rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3),
            rng.standard_normal(3))

    def step(w, carry, x):
        h, c, a, b = carry
        h2 = jnp.tanh(h @ w + x * c)
        c2 = c * jnp.sin(h) + x
        return (h2, c2, b * h, a), h2 * c

    def scanned(w, init, xs):
        carry, ys = lax.scan(lambda cr, x: step(w, cr, x), init, xs, reverse=reverse)
        return jnp.sum(ys ** 2) + sum(jnp.sum(jnp.sin(v)) for v in carry)

    def unrolled(w, init, xs):
        carry, ys = init, [None] * length
        order = range(length - 1, -1, -1) if reverse else range(length)
        for t in order:
            carry, ys[t] = step(w, carry, xs[t])
        return jnp.sum(jnp.stack(ys) ** 2) + sum(jnp.sum(jnp.sin(v)) for v in carry)

    got = funcgrad.jit(funcgrad.grad(scanned, argnums=(0, 1, 2)))(w, init, xs)
    want = funcgrad.grad(unrolled, argnums=(0, 1, 2))(w, init, xs)
    for g, r in zip(funcgrad.tree_util.tree_leaves(got), funcgrad.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-10, atol=1e-12)
    check_grads(lambda w: scanned(w, init, xs), (w,), 1)


def test_scan_body_products_with_transposed_constants(x64, rng):
    # x @ w.T with w a loop constant reads w transposed once before the loop; the same w also
    # used directly, a product with batch dims and a 3-d constant are left as they are
    w = rng.standard_normal((4, 3))
    v = rng.standard_normal((2, 3, 3))
    xs = rng.standard_normal((5, 3))

    def step(w, v, h, x):
        a = h @ w.T                                 # rewritten: (3,) x (4, 3)^T
        b = lax.dot_general(v, jnp.stack([h, x]), (((2,), (1,)), ((0,), (0,))))
        h2 = jnp.tanh(a[:3] + jnp.sum(w, 0) + b[0] * b[1])
        return h2, jnp.sum(a ** 2)

    def scanned(w, v, h0, xs):
        h, ys = lax.scan(lambda h, x: step(w, v, h, x), h0, xs)
        return jnp.sum(h) + jnp.sum(ys)

    def unrolled(w, v, h0, xs):
        h, total = h0, 0.0
        for t in range(xs.shape[0]):
            h, y = step(w, v, h, xs[t])
            total = total + y
        return jnp.sum(h) + total

    h0 = rng.standard_normal(3)
    np.testing.assert_allclose(float(funcgrad.jit(scanned)(w, v, h0, xs)),
                               float(unrolled(w, v, h0, xs)), rtol=1e-12)
    got = funcgrad.jit(funcgrad.grad(scanned, argnums=(0, 1, 2)))(w, v, h0, xs)
    want = funcgrad.grad(unrolled, argnums=(0, 1, 2))(w, v, h0, xs)
    for g, r in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-10, atol=1e-12)
    from funcgrad.lax.control_flow import scan_lowering
    closed = funcgrad.make_jaxpr(lambda w, h0, xs: lax.scan(
        lambda h, x: step(w, v, h, x), h0, xs))(w, h0, xs)
    scan_eqn = [e for e in closed.jaxpr.eqns if e.prim.name == "scan"][0]
    n = scan_eqn.params["num_consts"]
    placeholders = [np.zeros(a.aval.shape, a.aval.dtype) for a in scan_eqn.invars[:n]]
    body, consts = scan_lowering._pretranspose_invariant_dot_operands(
        scan_eqn.params["jaxpr"].jaxpr, n, placeholders)
    assert len(consts) == n + 1          # exactly one constant (w) gained a transposed copy
    assert [e.prim.name for e in body.eqns].count("transpose") == 0


def test_scan_errors():
    with pytest.raises(TypeError, match=r"carry.*f32\[\].*f32\[2\]"):
        lax.scan(lambda c, x: (jnp.ones(2), x), 0.0, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="length"):
        lax.scan(lambda c, x: (c, x), 0.0, None)
    with pytest.raises(ValueError, match="leading sizes"):
        lax.scan(lambda c, x: (c, x), 0.0, (np.ones(3), np.ones(4)))


def test_scan_grad_matches_unrolled_python():
    xs = np.linspace(0.1, 1.0, 5)

    def f(x):
        c, ys = lax.scan(lambda c, xi: (c * xi + jnp.sin(c), c * xi), 0.5, x)
        return c + jnp.sum(ys ** 2)

    def f_py(x):
        c, acc = 0.5, 0.0
        for i in range(5):
            acc = acc + (c * x[i]) ** 2
            c = c * x[i] + jnp.sin(c)
        return c + acc

    _close(grad(f)(xs.astype(np.float32)), grad(f_py)(xs.astype(np.float32)), rtol=1e-4)
    check_grads(f, (xs,), order=1)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_grad_consts_and_carry(reverse):
    w = np.array([0.3, -0.2])

    def f(w, c0, xs):
        def step(c, x):
            c = jnp.tanh(c * w + x)
            return c, jnp.sum(c * w)
        c, ys = lax.scan(step, c0, xs, reverse=reverse, unroll=2)
        return jnp.sum(c) + jnp.sum(ys * ys)

    check_grads(f, (w, np.array([0.1, 0.4]), np.linspace(-1, 1, 6).reshape(3, 2)), order=1)
    check_grads(f, (w, np.array([0.1, 0.4]), np.linspace(-1, 1, 6).reshape(3, 2)), order=2,
                modes=("fwd",))


def test_scan_second_order_reverse():
    def f(x):
        return lax.scan(lambda c, xi: (c * jnp.sin(xi), None), 1.0, x)[0]
    check_grads(f, (np.array([0.3, 0.9, 1.4]),), order=2)


def test_scan_vmap_matches_loop():
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(3, 5)).astype(np.float32)
    f = lambda x: lax.scan(lambda c, xi: (c * 0.9 + xi, c * xi), 0.0, x)  # noqa: E731
    c, ys = vmap(f)(xs)
    for b in range(3):
        cb, yb = f(xs[b])
        _close(c[b], cb)
        _close(ys[b], yb)
    # batched along axis 1, unbatched init that becomes batched, and grad of vmap
    c, ys = vmap(f, in_axes=1)(xs.T)
    _close(c, [float(f(xs[b])[0]) for b in range(3)])
    g = grad(lambda xs: jnp.sum(vmap(lambda x: f(x)[0])(xs)))(xs)
    for b in range(3):
        _close(g[b], grad(lambda x: f(x)[0])(xs[b]))


def test_map_and_batch_size():
    xs = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    _close(lax.map(lambda r: jnp.sum(r * r), xs), (xs ** 2).sum(1))
    _close(lax.map(lambda r: r * 2.0, xs, batch_size=3), xs * 2)
    _close(funcgrad.jit(lambda x: lax.map(jnp.sin, x))(xs), np.sin(xs))


def test_eager_control_flow_reuses_compiled_executable():
    from funcgrad.lowering import eager
    x = jnp.ones(3)
    lax.scan(lambda c, v: (c + v, v), 0.0, x)
    n = len(eager._op_cache)
    for _ in range(3):
        lax.scan(lambda c, v: (c + v, v), 0.0, x)   # a fresh lambda each time
    assert len(eager._op_cache) == n


@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool", "float16", "bfloat16",
                                   "complex64"])
def test_scan_and_cond_carry_dtypes(dtype):
    from funcgrad.core import dtypes
    dt = dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    xs = np.array([1, 0, 1], dtype=np.float32).astype(dt)
    if dt == np.bool_:
        step = lambda c, x: (c ^ x, c)  # noqa: E731
    else:
        step = lambda c, x: (c + x, c)  # noqa: E731
    wide = np.complex128 if dtype == "complex64" else np.float64
    c, ys = lax.scan(step, xs[0], xs)
    c_ref, ys_ref = _scan_ref(step, xs[0], xs)
    assert c.dtype == dt and ys.dtype == dt
    np.testing.assert_array_equal(np.asarray(c).astype(wide),
                                  np.asarray(c_ref).astype(wide))
    np.testing.assert_array_equal(np.asarray(ys).astype(wide),
                                  np.asarray(ys_ref).astype(wide))
    out = lax.cond(False, lambda v: v, lambda v: v[::-1], xs)
    assert out.dtype == dt
    np.testing.assert_array_equal(np.asarray(out).astype(wide),
                                  xs[::-1].astype(wide))


def test_control_flow_x64(x64):
    c, ys = lax.scan(lambda c, x: (c + x, c * x), 0.0, np.arange(4.0))
    assert c.dtype == np.float64 and ys.dtype == np.float64
    assert int(lax.fori_loop(0, 4, lambda i, s: s + i, 0)) == 6
    i, v = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 1.5), (0, 1.0))
    assert float(v) == 1.5 ** 3 and v.dtype == np.float64


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_associative_scan_matches_accumulate(n, rng):
    x = rng.normal(size=(2, n)).astype(np.float32)
    _close(lax.associative_scan(lax.add, x, axis=1), np.cumsum(x, axis=1))
    _close(lax.associative_scan(lax.max, x, axis=1, reverse=True),
           np.maximum.accumulate(x[:, ::-1], axis=1)[:, ::-1])


def test_associative_scan_pytree_grad_vmap(rng):
    a = rng.uniform(0.2, 0.9, size=6)
    b = rng.normal(size=6)

    def affine(l, r):
        return l[0] * r[0], r[0] * l[1] + r[1]

    def h(a, b):
        return lax.associative_scan(affine, (a, b))[1]

    def h_ref(a, b):
        out, hh = [], 0.0
        for i in range(6):
            hh = a[i] * hh + b[i]
            out.append(hh)
        return np.array(out)

    _close(h(a.astype(np.float32), b.astype(np.float32)), h_ref(a, b), rtol=1e-5)
    check_grads(lambda a, b: jnp.sum(h(a, b) ** 2), (a, b), order=1)
    xs = rng.normal(size=(3, 4)).astype(np.float32)
    _close(vmap(lambda v: lax.associative_scan(lax.add, v))(xs), np.cumsum(xs, 1))
    _close(funcgrad.jit(lambda v: lax.associative_scan(lax.add, v))(xs[0]), np.cumsum(xs[0]))


def test_nested_control_flow_under_jit_grad_vmap(rng):
    xs = rng.normal(size=(3, 4)).astype(np.float32)

    def h(x):
        return lax.cond(jnp.sum(x) > 0,
                        lambda v: lax.scan(lambda c, a: (c + a * jnp.sin(c), c), 0.0, v)[0],
                        lambda v: jnp.sum(v * v), x)

    g = funcgrad.jit(grad(h))
    batched = vmap(g)(xs)
    for b in range(3):
        _close(batched[b], grad(h)(xs[b]))
    check_grads(h, (xs[0].astype(np.float64),), order=1)
    f = funcgrad.jit(lambda x: lax.scan(lambda c, a: (c * jnp.cos(a) + 1.0, c), 0.5, x)[0])
    _close(vmap(f)(xs), [float(f(x)) for x in xs])
    _close(vmap(grad(f))(xs)[1], grad(f)(xs[1]))


def test_eager_interning_keeps_closed_over_values_apart():
    outs = []
    for k in range(3):
        w = jnp.full((2,), float(k))
        outs.append(lax.cond(True, lambda v: v * w, lambda v: v, jnp.ones(2)))
        outs.append(lax.scan(lambda c, x: (c + x * w, None), jnp.zeros(2), jnp.ones((2, 2)))[0])
    for k in range(3):
        _close(outs[2 * k], [k, k])
        _close(outs[2 * k + 1], [2 * k, 2 * k])
