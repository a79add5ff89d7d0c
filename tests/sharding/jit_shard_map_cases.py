"""A plain ``jit`` (no shardings) of a function holding ``shard_map``s, on 4 host CPU devices:
one program partitioned over the shard_maps' mesh, as JAX's ``jit`` compiles it.

Checked against NumPy and the eager shard_map; the output shardings and the errors are the
ones JAX 0.10.2 gives for the same functions (``jax.jit`` with meshes of ``AxisType.Auto``
axes: its outputs are NamedShardings on the shard_map's mesh, the shard_maps' own outputs laid
out by their out_specs; two shard_maps over meshes of other devices, or arguments on such a
mesh, raise). Run in a subprocess by ``test_shard_map.py`` (the device count is fixed when
funcgrad makes its client); its name keeps the main run from collecting it.
"""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.sharding import NamedSharding, P
# the 2x2 data x model mesh and the helpers of the shard_map cases (this directory is on the
# path of the run that collects both)
from shard_map_cases import MESH, N, close, rand, smap

pytestmark = pytest.mark.skipif(funcgrad.local_device_count() != N,
                                reason="needs FUNCGRAD_CPU_DEVICES=4 (run by test_shard_map.py)")


def shard_shapes(x):
    return sorted({tuple(s.data.shape) for s in x.addressable_shards})


def matmul():
    # x rows over data, the contraction over model: a psum over model completes each block
    return smap(lambda a, b: lax.psum(a @ b, "model"), mesh=MESH,
                in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None))


def only_mesh_entry(f):
    """The one compiled program over the mesh of ``f``'s cache: no single-device program
    (pieces) was compiled for it."""
    caches = f._caches
    assert all(e.exe is None for e in caches.cache.values())
    assert len(caches.spmd) == 1
    return next(iter(caches.spmd.values())).program


def test_one_program_over_the_mesh_with_work_around_the_shard_map():
    x, w = rand(8, 6, seed=1), rand(6, 4, seed=2)
    sm = matmul()
    f = funcgrad.jit(lambda a, b: jnp.tanh(sm(a * 2.0, b)) + 1.0)
    want = np.tanh((2 * x) @ w) + 1.0
    for args in ((x, w), (jnp.asarray(x), jnp.asarray(w))):     # host values, one device
        out = f(*args)
        close(out, want)
        close(out, jnp.tanh(sm(x * 2.0, w)) + 1.0)               # the eager shard_map
        # as JAX: the elementwise work after the region keeps its rows split over "data"
        assert out.sharding == NamedSharding(MESH, P("data"))
        assert shard_shapes(out) == [(4, 4)]
    program = only_mesh_entry(f)
    text = program.as_text()       # the partitioned module: the region, the work around it
    assert "all-reduce" in text and "tanh" in text and "f32[4,3]" in text
    compiled = f.lower(x, w).compile()
    # arguments not on a mesh are replicated over the shard_map's
    assert [s.spec for s in compiled.input_shardings] == [P(), P()]
    assert all(s.mesh == MESH for s in compiled.input_shardings)
    assert f.trace_count == 1


def test_outputs_take_the_out_specs_and_placed_arguments_keep_their_layout():
    x = rand(8, 6, seed=3)
    sm = smap(lambda a: (a * 2.0, lax.psum(a.sum(), ("data", "model"))), mesh=MESH,
              in_specs=P("data", "model"), out_specs=(P("data", "model"), P()))
    f = funcgrad.jit(lambda a: sm(a))
    doubled, total = f(x)
    close(doubled, 2 * x)
    close(total, x.sum(), 1e-4)
    assert doubled.sharding == NamedSharding(MESH, P("data", "model"))
    assert total.sharding == NamedSharding(MESH, P())
    assert shard_shapes(doubled) == [(4, 3)] and shard_shapes(total) == [()]
    # fed back: the output lies on the mesh as the shard_map wants it (a second program for
    # that layout, from the same trace; later calls take the fast table)
    again, _ = f(doubled)
    close(again, 4 * x)
    assert f.lower(doubled).compile().input_shardings[0] == doubled.sharding
    for _ in range(3):
        again, _ = f(doubled)
    assert f.trace_count == 1 and len(f._caches.spmd) == 2 and len(f._caches.spmd_fast) == 1
    # an argument on another mesh of the same devices in the same order (as JAX accepts):
    # the outputs lie on the shard_map's mesh
    ring = funcgrad.make_mesh((N,), ("i",))
    on_ring = funcgrad.device_put(x, NamedSharding(ring, P("i")))
    doubled, _ = f(on_ring)
    close(doubled, 2 * x)
    assert doubled.sharding == NamedSharding(MESH, P("data", "model"))


def test_nested_jit_and_transformations_of_the_shard_map():
    x, w = rand(8, 6, seed=4), rand(6, 4, seed=5)
    sm = matmul()
    inner = funcgrad.jit(lambda a, b: sm(a, b) + 1.0)
    f = funcgrad.jit(lambda a, b: inner(a, b) * 2.0)
    out = f(x, w)
    close(out, (x @ w + 1.0) * 2.0)
    assert out.sharding == NamedSharding(MESH, P("data"))
    only_mesh_entry(f)
    # vmap: the batch dimension is one no mesh axis splits
    xs = rand(3, 8, 6, seed=6)
    out = funcgrad.jit(funcgrad.vmap(sm, in_axes=(0, None)))(xs, w)
    close(out, xs @ w)
    assert out.sharding == NamedSharding(MESH, P(None, "data"))
    # transformations of the jit called eagerly: the jit equations they bind run over the
    # mesh too
    total = smap(lambda a: lax.psum(jnp.sum(a * a), ("data", "model")), mesh=MESH,
                 in_specs=P(("data", "model")), out_specs=P())
    g = funcgrad.jit(lambda v, c: total(v) * c)
    v = rand(8, seed=11)
    grad = funcgrad.grad(g)(v, 3.0)
    close(grad, 6.0 * v)
    assert grad.sharding == NamedSharding(MESH, P(("data", "model")))
    batched = funcgrad.vmap(g, in_axes=(0, None))(rand(3, 8, seed=12), 2.0)
    close(batched, 2.0 * (rand(3, 8, seed=12) ** 2).sum(1), 1e-4)
    assert batched.sharding.mesh == MESH
    # no arguments: the program runs over the shard_map's mesh all the same
    ids = smap(lambda: lax.axis_index(("data", "model")).reshape(1), mesh=MESH, in_specs=(),
               out_specs=P(("data", "model")))
    out = funcgrad.jit(lambda: ids() * 2)()
    np.testing.assert_array_equal(np.asarray(out), [0, 2, 4, 6])
    assert out.sharding == NamedSharding(MESH, P(("data", "model")))
    # beside a pmap the jit still runs in pieces: each shard_map and pmap a program of its own
    ring = smap(lambda a: lax.psum(a, "i"), mesh=funcgrad.make_mesh((N,), ("i",)),
                in_specs=P("i"), out_specs=P())
    pm = funcgrad.pmap(lambda a: a * 2.0)
    summed, doubled = funcgrad.jit(lambda a: (ring(a.reshape(-1)), pm(a)))(np.ones((N, 2)))
    close(summed, [4.0, 4.0])
    close(doubled, np.full((N, 2), 2.0))
    # ... where a scan body holds a shard_map too, that one is computed on one device (the
    # emulated region) inside the pieces' single-device program
    loop = funcgrad.jit(lambda a: (pm(a), lax.scan(lambda c, _: (c + ring(a.reshape(-1)), None),
                                                    jnp.zeros(2), None, length=2)[0]))
    doubled, summed = loop(np.ones((N, 2)))
    close(doubled, np.full((N, 2), 2.0))
    close(summed, [8.0, 8.0])
    assert type(summed) is funcgrad.Array and len(summed.sharding.device_set) == 1



def psum_steps(sm):
    """A scan of 3 steps whose body runs ``sm`` (the blockwise matmul) and works on the
    result; and the same computed by Python with the eager shard_map."""
    def loop(a, b):
        def step(c, _):
            y = jnp.tanh(c + sm(a, b))
            return y, y.sum()
        return lax.scan(step, jnp.zeros((8, 4)), None, length=3)

    def unrolled(a, b):
        c, sums = jnp.zeros((8, 4)), []
        for _ in range(3):
            c = jnp.tanh(c + sm(a, b))
            sums.append(np.asarray(c).sum())
        return c, np.array(sums)
    return loop, unrolled


def test_scan_with_a_shard_map_in_its_body_is_one_program_over_the_mesh():
    x, w = rand(8, 6, seed=13), rand(6, 4, seed=14)
    loop, unrolled = psum_steps(matmul())
    f = funcgrad.jit(loop)
    c = np.zeros((8, 4), np.float32)
    want = []
    for _ in range(3):
        c = np.tanh(c + x @ w)
        want.append(c.sum())
    carry, sums = f(x, w)
    close(carry, c)
    close(sums, want, 1e-4)
    ref_carry, ref_sums = unrolled(x, w)       # the eager shard_map, step by step
    close(carry, ref_carry)
    close(sums, ref_sums, 1e-4)
    # as JAX: the carry keeps the region's rows over "data", the stacked sums replicated
    assert carry.sharding == NamedSharding(MESH, P("data"))
    assert sums.sharding == NamedSharding(MESH, P())
    assert shard_shapes(carry) == [(4, 4)] and shard_shapes(sums) == [(3,)]
    text = only_mesh_entry(f).as_text()     # the manual region inside the partitioned loop
    assert "while" in text and "all-reduce" in text and "f32[4,3]" in text
    again, _ = f(x, w)                          # the fast table, no retrace
    close(again, c)
    assert f.trace_count == 1 and len(f._caches.spmd) == 1
    # the eager (not jitted) scan runs over the mesh too, as JAX's; so do its gradient's
    carry, sums = loop(x, w)
    close(carry, c)
    close(sums, want, 1e-4)
    assert carry.sharding == NamedSharding(MESH, P("data"))
    single, _ = psum_steps(lambda a, b: a @ b)
    grad = funcgrad.grad(lambda a: loop(a, w)[0].sum())(x)
    close(grad, funcgrad.grad(lambda a: single(a, w)[0].sum())(x), 1e-4)
    assert grad.sharding == NamedSharding(MESH, P("data", "model"))


def test_cond_switch_while_and_checkpoint_holding_a_shard_map():
    x, w = rand(8, 6, seed=15), rand(6, 4, seed=16)
    sm = matmul()
    branch = funcgrad.jit(lambda p, a, b: lax.cond(p > 0, lambda: sm(a, b),
                                                   lambda: (a @ b) * 2.0))
    for p, want in ((1.0, x @ w), (-1.0, 2 * (x @ w))):
        out = branch(p, x, w)
        close(out, want)
        # JAX lays out the cond's output by the region's out spec whichever branch ran
        assert out.sharding == NamedSharding(MESH, P("data"))
    only_mesh_entry(branch)
    assert branch.trace_count == 1
    switch = funcgrad.jit(lambda i, a, b: lax.switch(i, [lambda: sm(a, b), lambda: a @ b * 3.0]))
    close(switch(1, x, w), 3 * (x @ w))
    close(switch(0, x, w), x @ w)
    only_mesh_entry(switch)
    out = lax.cond(True, lambda: sm(x, w), lambda: x @ w)      # eager
    close(out, x @ w)
    assert out.sharding == NamedSharding(MESH, P("data"))
    # a while loop, a fori_loop over traced bounds (a while loop too), checkpoint
    loop = funcgrad.jit(lambda a, b: lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + sm(a, b)), (0, jnp.zeros((8, 4))))[1])
    out = loop(x, w)
    close(out, 3 * (x @ w), 1e-4)
    assert out.sharding == NamedSharding(MESH, P("data"))
    only_mesh_entry(loop)
    bounded = funcgrad.jit(lambda n, a, b: lax.fori_loop(0, n, lambda i, c: c + sm(a, b),
                                                         jnp.zeros((8, 4))))
    close(bounded(2, x, w), 2 * (x @ w), 1e-4)
    only_mesh_entry(bounded)
    remat = funcgrad.jit(funcgrad.grad(
        lambda a: funcgrad.checkpoint(lambda v: jnp.sin(sm(v, w)).sum())(a)))
    out = remat(x)
    close(out, np.cos(x @ w) @ w.T, 1e-4)
    assert out.sharding == NamedSharding(MESH, P("data", "model"))
    only_mesh_entry(remat)


def test_training_loop_of_shard_map_gradients_in_a_fori_loop():
    # the tensor x data parallel loss of the training step below; 4 SGD steps in one jitted
    # fori_loop (a scan: static bounds) equal the single-device loop's to 1e-5
    loss = _tensor_parallel_loss()

    def trainer(loss_fn):
        @funcgrad.jit
        def train(ps, x, y):
            def step(i, state):
                q, _ = state
                value, grads = funcgrad.value_and_grad(lambda r: loss_fn(r, x, y))(q)
                return tuple(p - 0.1 * g for p, g in zip(q, grads)), value
            return lax.fori_loop(0, 4, step, (ps, jnp.zeros(())))
        return train

    train = trainer(lambda q, x, y: loss(*q, x, y))
    ref = trainer(_mlp_loss)
    params, x, y = _mlp_data()
    got, value = train(params, x, y)
    want, ref_value = ref(params, x, y)
    close(value, ref_value)
    for p, r in zip(got, want):
        close(p, r)
    # JAX 0.10.2's layouts for this loop: each parameter as the shard_map's in spec
    assert [tuple(p.sharding.spec) for p in got] == [(None, "model"), ("model",), ("model",)]
    assert all(p.sharding.mesh == MESH for p in got)
    assert value.sharding == NamedSharding(MESH, P())
    only_mesh_entry(train)
    # the updated parameters fed back (now on the mesh): the same trace
    again, _ = train(got, x, y)
    want, _ = ref(want, x, y)
    for p, r in zip(again, want):
        close(p, r)
    assert train.trace_count == 1


def _mlp_data():
    rng = np.random.default_rng(7)
    params = (rng.normal(size=(6, 8)).astype(np.float32) / 3,
              np.zeros(8, np.float32),
              rng.normal(size=(8, 2)).astype(np.float32) / 3)
    return params, rng.normal(size=(8, 6)).astype(np.float32), \
        rng.normal(size=(8, 2)).astype(np.float32)


def _mlp_loss(params, x, y):
    w1, b1, w2 = params
    return jnp.mean((jnp.tanh(x @ w1 + b1) @ w2 - y) ** 2)


def _tensor_parallel_loss():
    # tensor parallel over "model" (w1's columns, w2's rows, a psum), data parallel over
    # "data" (a pmean of the blocks' losses), the gradient taken outside the shard_map
    def body(w1, b1, w2, xb, yb):
        pred = lax.psum(jnp.tanh(xb @ w1 + b1) @ w2, "model")
        return lax.pmean(jnp.mean((pred - yb) ** 2), "data")
    return smap(body, mesh=MESH, in_specs=(P(None, "model"), P("model"), P("model", None),
                                           P("data"), P("data")), out_specs=P())


def test_training_step_with_the_gradient_of_a_shard_map_loss():
    loss = _tensor_parallel_loss()

    @funcgrad.jit
    def step(ps, x, y):
        value, grads = funcgrad.value_and_grad(lambda q: loss(*q, x, y))(ps)
        return value, grads, tuple(p - 0.1 * g for p, g in zip(ps, grads))

    ref = funcgrad.jit(lambda ps, x, y: (funcgrad.value_and_grad(_mlp_loss)(ps, x, y)))
    params, x, y = _mlp_data()
    ref_params = params
    for i in range(3):
        value, grads, params = step(params, x, y)
        ref_value, ref_grads = ref(ref_params, x, y)
        ref_params = tuple(p - 0.1 * g for p, g in zip(ref_params, ref_grads))
        close(value, ref_value)
        for g, r in zip(grads, ref_grads):
            close(g, r)
        assert value.sharding == NamedSharding(MESH, P())
    # the gradients come back laid out as the parameters' specs (w1's columns over model)
    assert shard_shapes(grads[0]) == [(6, 4)] and shard_shapes(grads[2]) == [(4, 2)]
    for p, r in zip(params, ref_params):
        close(p, r)
    # the first call's host parameters and the later calls' mesh ones: one trace
    assert step.trace_count == 1


def test_donated_arguments_on_the_mesh():
    sm = smap(lambda a: a * 2.0, mesh=MESH, in_specs=P("data"), out_specs=P("data"))
    f = funcgrad.jit(lambda a, b: (sm(a) + b, b), donate_argnums=0)
    x, y = rand(8, 4, seed=8), rand(8, 4, seed=9)
    first, _ = f(x, y)
    close(first, 2 * x + y)
    second, _ = f(first, y)           # now on the mesh: its buffer is donated
    close(second, 2 * (2 * x + y) + y)
    assert first.is_deleted()
    assert second.sharding == NamedSharding(MESH, P("data"))


def test_errors_name_the_function_the_meshes_and_the_arguments():
    reversed_mesh = funcgrad.make_mesh((N,), ("r",), devices=funcgrad.local_devices()[::-1])
    forward = smap(lambda a: a * 2.0, mesh=MESH, in_specs=P("data"), out_specs=P("data"))
    backward = smap(lambda a: a + 1.0, mesh=reversed_mesh, in_specs=P("r"), out_specs=P("r"))
    x = rand(8, 4, seed=10)

    def both(a):
        return forward(a) + backward(a)
    with pytest.raises(ValueError, match=r"jit\(both\).*shard_map\(<lambda>\) runs over "
                                         r"Mesh\('data': 2, 'model': 2\) \(devices \[0, 1, 2, "
                                         r"3\]\) and shard_map\(<lambda>\) over Mesh\('r': 4\) "
                                         r"\(devices \[3, 2, 1, 0\]\)"):
        funcgrad.jit(both)(x)

    def scaled(weights):
        return forward(weights) * 3.0
    placed = funcgrad.device_put(x, NamedSharding(reversed_mesh, P("r")))
    with pytest.raises(ValueError, match=r"jit\(scaled\).*runs over Mesh\('data': 2, 'model': "
                                         r"2\).*the arguments lie on Mesh\('r': 4\) \(devices "
                                         r"\[3, 2, 1, 0\]\) \(weights\)"):
        funcgrad.jit(scaled)(placed)
    # eagerly each shard_map runs over its own mesh, as before
    close(forward(x), 2 * x)
    close(backward(x), x + 1.0)


def test_layouts_and_values_match_jax_live():
    """The same plain jits in JAX (run with XLA_FLAGS=--xla_force_host_platform_device_count=4
    and jax installed; the literal layouts above are what this compares otherwise)."""
    jax = pytest.importorskip("jax")
    if len(jax.devices()) < N:
        pytest.skip("jax sees fewer than 4 devices (set XLA_FLAGS)")
    from jax.sharding import AxisType, PartitionSpec as JP
    jmesh = jax.make_mesh((2, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2,
                          devices=jax.devices()[:N])
    x, w = rand(8, 6, seed=1), rand(6, 4, seed=2)

    def build(lib_smap, mesh, spec, np_):
        sm = lib_smap(lambda a, b: lax_of(np_).psum(a @ b, "model"), mesh=mesh,
                      in_specs=(spec("data", "model"), spec("model", None)),
                      out_specs=spec("data", None))
        both = lib_smap(lambda a: (a * 2.0, lax_of(np_).psum(a.sum(), ("data", "model"))),
                        mesh=mesh, in_specs=spec("data", "model"),
                        out_specs=(spec("data", "model"), spec()))
        lx = lax_of(np_)

        def steps(a, b):        # a shard_map in a scan body, in a cond branch, in a fori_loop
            def step(c, _):
                y = np_.tanh(c + sm(a, b))
                return y, y.sum()
            return lx.scan(step, np_.zeros((8, 4)), None, length=3)
        return [lambda a, b: np_.tanh(sm(a * 2.0, b)) + 1.0, lambda a, b: both(a), steps,
                lambda a, b: lx.cond(a.sum() > 0, lambda: sm(a, b), lambda: (a @ b) * 2.0),
                lambda a, b: lx.fori_loop(0, 3, lambda i, c: c + sm(a, b), np_.zeros((8, 4)))]

    def lax_of(np_):
        return jax.lax if np_ is jax.numpy else lax

    ours = build(smap, MESH, P, jnp)
    theirs = build(jax.shard_map, jmesh, JP, jax.numpy)
    for f, g in zip(ours, theirs):
        got = funcgrad.tree_util.tree_leaves(funcgrad.jit(f)(x, w))
        want = jax.tree_util.tree_leaves(jax.jit(g)(x, w))
        for a, b in zip(got, want):
            close(a, np.asarray(b), 1e-4)
            assert tuple(a.sharding.spec) == tuple(b.sharding.spec)
            assert shard_shapes(a) == [tuple(b.sharding.shard_shape(b.shape))]
