"""Plain ``jit`` of mesh-placed arrays and ``funcgrad.nn.parallel`` training on 4 host CPU
devices (run by test_sharded_training.py in a subprocess with FUNCGRAD_CPU_DEVICES=4). Every
sharded result is compared with the same computation on one device."""
import os
import warnings

import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp
import funcgrad.optim as optim
from funcgrad.lowering.sharding import ShardedArray
from funcgrad.nn.parallel import (ColwiseParallel, PrepareModuleInput, Replicate,
                                  RowwiseParallel, SequenceParallel, Shard, fully_shard,
                                  parallelize_module)
from funcgrad.sharding import Mesh, NamedSharding, P

TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def mesh():
    assert funcgrad.local_device_count() == 4, "run with FUNCGRAD_CPU_DEVICES=4"
    return funcgrad.make_mesh((2, 2), ("data", "model"))


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _put(x, mesh, *spec):
    return funcgrad.device_put(x, NamedSharding(mesh, P(*spec)))


def _check_blocks(x, expected):
    """Each device's block of ``x`` is the slice of ``expected`` its sharding names."""
    index = x.sharding.devices_indices_map(x.shape)
    shard_shape = x.sharding.shard_shape(x.shape)
    for s in x.addressable_shards:
        assert s.data.shape == shard_shape
        np.testing.assert_allclose(np.asarray(s.data), expected[index[s.device]], **TOL)


# --- plain jit of sharded arrays -------------------------------------------------------------
def test_plain_jit_runs_over_the_mesh(mesh):
    a, b = _rand(8, 4), _rand(4, 6, seed=1)

    @funcgrad.jit
    def f(x, w, c):
        return jnp.tanh(x @ w) * c, jnp.sum(x)

    y, s = f(_put(a, mesh, "data"), _put(b, mesh, None, "model"), 2.0)
    want = np.tanh(a @ b) * 2.0
    assert isinstance(y, ShardedArray) and y.sharding.mesh == mesh
    assert y.sharding.spec == P("data", "model")           # XLA's propagated layout
    assert y.sharding.shard_shape(y.shape) == (4, 3)
    _check_blocks(y, want)
    np.testing.assert_allclose(np.asarray(y), want, **TOL)
    assert s.sharding.is_fully_replicated() and abs(float(s) - a.sum()) < 1e-4
    # the same function on one device gives the same values, compiled from the same trace
    # (as JAX's jit, which traces once per shapes and dtypes)
    np.testing.assert_allclose(np.asarray(f(jnp.asarray(a), jnp.asarray(b), 2.0)[0]), want,
                               **TOL)
    assert f.trace_count == 1
    f(_put(a, mesh, "data"), _put(b, mesh, None, "model"), 2.0)
    assert f.trace_count == 1                                # cached per layout


def test_unplaced_leaves_are_replicated_and_kwargs_work(mesh):
    a, b = _rand(8, 4), _rand(8, 4, seed=2)

    @funcgrad.jit
    def f(x, *, y, scale):
        return {"sum": x + y * scale, "prod": x * y}

    out = f(_put(a, mesh, ("data", "model")), y=b, scale=3.0)
    assert out["sum"].sharding.mesh == mesh
    np.testing.assert_allclose(np.asarray(out["sum"]), a + 3.0 * b, **TOL)
    np.testing.assert_allclose(np.asarray(out["prod"]), a * b, **TOL)


def test_static_and_donated_arguments(mesh):
    a = _rand(8, 4)

    def f(x, n, *, mode):
        return (x * n if mode == "mul" else x + n), jnp.max(x)

    g = funcgrad.jit(f, static_argnums=1, static_argnames="mode")
    x = _put(a, mesh, "data", "model")
    np.testing.assert_allclose(np.asarray(g(x, 3, mode="mul")[0]), a * 3, **TOL)
    np.testing.assert_allclose(np.asarray(g(x, 3, mode="add")[0]), a + 3, **TOL)
    assert g.trace_count == 2
    d = funcgrad.jit(lambda x, y: (x + 1.0, y * 2.0), donate_argnums=0)
    x, y = _put(a, mesh, "data"), _put(a, mesh, "data")
    out, out2 = d(x, y)
    np.testing.assert_allclose(np.asarray(out), a + 1, **TOL)
    assert x.is_deleted() and not y.is_deleted()
    assert out.sharding == NamedSharding(mesh, P("data"))
    with pytest.raises(RuntimeError, match="deleted"):
        d(x, y)


def test_out_shardings_with_static_arguments_and_a_jitted_module(mesh):
    a = _rand(8, 4)
    row = NamedSharding(mesh, P(("data", "model")))
    g = funcgrad.jit(lambda x, k: x * k, static_argnums=1, out_shardings=row)
    out = g(a, 2.0)
    assert out.sharding == row and out.sharding.shard_shape(out.shape) == (2, 4)
    np.testing.assert_allclose(np.asarray(out), a * 2, **TOL)
    funcgrad.manual_seed(0)
    lin = nn.Linear(4, 6)
    want = np.asarray(lin(jnp.asarray(a)))
    jl = funcgrad.jit(lin, in_shardings=(NamedSharding(mesh, P("data")),),
                      out_shardings=NamedSharding(mesh, P("data", "model")))
    out = jl(a)
    assert out.sharding.spec == P("data", "model")
    np.testing.assert_allclose(np.asarray(out), want, **TOL)


def test_module_state_written_back(mesh):
    funcgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))
    funcgrad.manual_seed(0)
    ref = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))
    fully_shard(model, mesh)
    step = funcgrad.jit(lambda m, x: m(x))
    for i in range(2):
        x = _rand(8, 4, seed=i)
        np.testing.assert_allclose(np.asarray(step(model, _put(x, mesh, "data"))),
                                   np.asarray(step(ref, jnp.asarray(x))), **TOL)
    for key in ("1.running_mean", "1.running_var"):
        got, want = model.state_dict()[key], ref.state_dict()[key]
        assert got.sharding.mesh == mesh
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), **TOL)
    assert int(model.state_dict()["1.num_batches_tracked"]) == 2


def test_errors_name_the_arguments(mesh):
    other = Mesh(mesh.devices.T, ("data", "model"))
    f = funcgrad.jit(lambda params, x: params["w"] * x)
    w = _put(_rand(8, 4), mesh, "data")
    x = _put(_rand(8, 4), other, "data")
    with pytest.raises(ValueError, match=r"one mesh.*argument params\['w'\] \(its own sharding\) "
                                         r"of shape \(8, 4\) lies on Mesh.*argument x \(its own "
                                         r"sharding\) of shape \(8, 4\) lies on Mesh"):
        f({"w": w}, x)
    g = funcgrad.jit(lambda x, n: x * n, static_argnums=1,
                     in_shardings=(NamedSharding(mesh, P("data", "model")),))
    with pytest.raises(ValueError, match=r"argument x of shape \(8, 3\) \(float32\): dimension 1 "
                                         r"of shape \(8, 3\).*not divisible"):
        g(np.ones((8, 3), np.float32), 2)
    with pytest.raises(ValueError, match="one entry per non-static positional argument"):
        funcgrad.jit(lambda x, n: x, static_argnums=1,
                     in_shardings=(None, None))(np.ones(4), 1)


# --- nn.parallel -------------------------------------------------------------------------------
def _mlp(seed=0):
    funcgrad.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(),
                         nn.Linear(8, 4))


def _training_step():
    """A plain jitted training step: loss, gradients and the optimizer's update, written back."""
    @funcgrad.jit
    def step(model, opt, x, y):
        loss, grads = funcgrad.value_and_grad(lambda m: F.mse_loss(m(x), y))(model)
        opt.step(grads)
        return loss
    return step


def _train(model, opt, batches, mesh=None):
    step = _training_step()
    losses = []
    for x, y in batches:
        if mesh is not None:
            x, y = _put(x, mesh, "data"), _put(y, mesh, "data")
        losses.append(float(step(model, opt, x, y)))
    assert step.trace_count == 1
    return losses


def _batches(n=4, d_in=8, d_out=4):
    return [(_rand(8, d_in, seed=2 * i), _rand(8, d_out, seed=2 * i + 1)) for i in range(n)]


def _compare_training(mesh, place, make_opt, make=_mlp):
    ref = make()
    ref_losses = _train(ref, make_opt(ref), _batches())
    model = place(make())
    opt = make_opt(model)
    losses = _train(model, opt, _batches(), mesh)
    np.testing.assert_allclose(losses, ref_losses, **TOL)
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        assert p.sharding.mesh == mesh, name
        np.testing.assert_allclose(np.asarray(p), np.asarray(q), **TOL)
        _check_blocks(p.data, np.asarray(q))
    return model, opt


def test_colwise_rowwise_mlp_trains_like_one_device(mesh):
    plan = {"0": ColwiseParallel(), "2": RowwiseParallel(), "4": ColwiseParallel(
        output_layouts=Replicate())}
    model, opt = _compare_training(
        mesh, lambda m: parallelize_module(m, mesh, plan, axis="model"),
        lambda m: optim.SGD(m.parameters(), lr=0.05, momentum=0.9))
    specs = {n: p.sharding.spec for n, p in model.named_parameters()}
    assert specs == {"0.weight": P("model"), "0.bias": P("model"), "2.weight": P(None, "model"),
                     "2.bias": P(), "4.weight": P("model"), "4.bias": P("model")}
    assert model[0].weight.sharding.shard_shape((16, 8)) == (8, 8)
    # momentum buffers lie like their parameters
    for p in opt._all_params():
        assert opt.state[p]["momentum_buffer"].sharding == p.data.sharding


def test_fully_shard_trains_like_one_device_with_sharded_adam_state(mesh):
    model, opt = _compare_training(mesh, lambda m: fully_shard(m, mesh),
                                   lambda m: optim.Adam(m.parameters(), lr=0.01))
    specs = {n: p.sharding.spec for n, p in model.named_parameters()}
    assert specs["0.weight"] == P("data") and specs["2.weight"] == P(None, "data")
    assert specs["4.bias"] == P("data")
    for p in opt._all_params():
        st = opt.state[p]
        assert st["exp_avg"].sharding == p.data.sharding
        assert st["exp_avg_sq"].sharding == p.data.sharding
        assert st["step"].sharding.is_fully_replicated() and float(st["step"]) == 4.0


def test_fully_shard_on_top_of_tensor_parallel(mesh):
    def place(m):
        parallelize_module(m, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()},
                           axis="model")
        return fully_shard(m, mesh, axis="data")
    model, _ = _compare_training(mesh, place,
                                 lambda m: optim.AdamW(m.parameters(), lr=0.01))
    assert model[0].weight.sharding.spec == P(("model", "data"))
    assert model[2].weight.sharding.spec == P("data", "model")
    assert model[0].weight.sharding.shard_shape((16, 8)) == (4, 8)


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.up = nn.Linear(8, 16)
        self.down = nn.Linear(16, 8)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def test_sequence_parallel_norm_and_prepare_input(mesh):
    def make():
        funcgrad.manual_seed(3)
        return nn.Sequential(_Block(), nn.Linear(8, 4))

    plan = {"0.norm": SequenceParallel(), "0.up": ColwiseParallel(),
            "0.down": RowwiseParallel(output_layouts=Shard(1)),
            "1": PrepareModuleInput(input_layouts=Shard(1), desired_input_layouts=Replicate())}
    ref = make()
    model = parallelize_module(make(), mesh, plan, axis="model")
    assert model[0].norm.weight.sharding.is_fully_replicated()
    assert model[1].weight.sharding.is_fully_replicated()   # not in the plan: replicated
    step = funcgrad.jit(lambda m, x: funcgrad.value_and_grad(lambda mm: jnp.mean(mm(x) ** 2))(m))
    x = np.random.default_rng(5).standard_normal((4, 6, 8)).astype(np.float32)
    loss, grads = step(model, _put(x, mesh, "data"))
    ref_loss, ref_grads = step(ref, jnp.asarray(x))
    np.testing.assert_allclose(float(loss), float(ref_loss), **TOL)
    for (n, g), (_, h) in zip(grads.named_parameters(), ref_grads.named_parameters()):
        np.testing.assert_allclose(np.asarray(g), np.asarray(h), **TOL, err_msg=n)


def test_eager_optimizer_step_keeps_the_layout(mesh):
    funcgrad.manual_seed(0)
    ref = nn.Linear(8, 4)
    funcgrad.manual_seed(0)
    model = fully_shard(nn.Linear(8, 4), mesh)
    x, y = _rand(8, 8), _rand(8, 4, seed=1)
    for m in (model, ref):
        opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
        for _ in range(2):
            opt.step(funcgrad.grad(lambda mm: F.mse_loss(mm(jnp.asarray(x)), jnp.asarray(y)))(m))
    assert model.weight.sharding.spec == P(None, "data")
    np.testing.assert_allclose(np.asarray(model.weight), np.asarray(ref.weight), **TOL)


def test_state_dict_save_and_load(mesh, tmp_path):
    model = fully_shard(_mlp(), mesh)
    sd = model.state_dict()
    assert all(v.sharding.mesh == mesh for v in sd.values())
    path = os.environ.get("SHARDED_SAVE_PATH") or str(tmp_path / "mlp.safetensors")
    funcgrad.save(model, path)
    loaded = funcgrad.load(path)
    for k, v in sd.items():
        np.testing.assert_array_equal(np.asarray(loaded[k]), np.asarray(v))
    # loading into a placed model keeps each parameter's layout
    other = fully_shard(_mlp(seed=7), mesh)
    other.load_state_dict(loaded)
    for (n, p), (_, q) in zip(other.named_parameters(), model.named_parameters()):
        assert p.sharding == q.sharding, n
        np.testing.assert_array_equal(np.asarray(p), np.asarray(q))
    # an optimizer's state dict holds its sharded state; loading it places it like the params
    opt = optim.Adam(model.parameters(), lr=0.1)
    _train(model, opt, _batches(1), mesh)
    state = opt.state_dict()
    opt2 = optim.Adam(other.parameters(), lr=0.1)
    opt2.load_state_dict(state)
    for p, q in zip(opt._all_params(), opt2._all_params()):
        for k in ("exp_avg", "exp_avg_sq"):
            assert opt.state[p][k].sharding == p.data.sharding
            assert opt2.state[q][k].sharding == q.data.sharding
            np.testing.assert_array_equal(np.asarray(opt2.state[q][k]),
                                          np.asarray(opt.state[p][k]))


def test_nn_parallel_errors(mesh):
    with pytest.raises(ValueError, match=r"several axes \('data', 'model'\).*axis="):
        parallelize_module(nn.Linear(4, 4), mesh, ColwiseParallel())
    with pytest.raises(TypeError, match=r"ColwiseParallel applies to nn.Linear and "
                                        r"nn.Embedding, got Conv1d"):
        parallelize_module(nn.Conv1d(2, 4, 3), mesh, ColwiseParallel(), axis="model")
    with pytest.raises(ValueError, match=r"parameter 'weight' of Linear \(shape \(3, 4\)\).*"
                                         r"not divisible"):
        parallelize_module(nn.Linear(4, 3), mesh, ColwiseParallel(), axis="model")
    with pytest.raises(ValueError, match="axis 'tp' is not an axis of"):
        fully_shard(nn.Linear(4, 4), mesh, axis="tp")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        parallelize_module(_mlp(), mesh, {"fc*": ColwiseParallel()}, axis="model")
    assert any("matches no submodule" in str(x.message) for x in w)
    with pytest.raises(TypeError, match="layouts must be Shard"):
        RowwiseParallel(output_layouts="replicate")
    # a parameter no dimension of which divides stays replicated under fully_shard
    odd = fully_shard(nn.Linear(3, 3), mesh)
    assert odd.weight.sharding.is_fully_replicated()


def test_plan_keys_are_fnmatch_patterns_per_path_component(mesh):
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([_mlp(), _mlp(seed=1)])

    model = parallelize_module(Two(), mesh, {"layers.*.[02]": ColwiseParallel(),
                                             "layers.1.4": RowwiseParallel()}, axis="model")
    col, row = NamedSharding(mesh, P("model")), NamedSharding(mesh, P(None, "model"))
    for i in (0, 1):
        assert model.layers[i][0].weight.sharding == col    # P("model", None): equal
        assert model.layers[i][2].weight.sharding == col
    assert model.layers[0][4].weight.sharding.is_fully_replicated()
    assert model.layers[1][4].weight.sharding == row


def test_prepare_module_output_and_keyword_inputs(mesh):
    from funcgrad.nn.parallel import PrepareModuleOutput

    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 8)

        def forward(self, x, *, bias):
            y = self.lin(x)
            return y, y + bias

    funcgrad.manual_seed(0)
    ref = Pair()
    funcgrad.manual_seed(0)
    model = parallelize_module(Pair(), mesh, {
        "": PrepareModuleInput(desired_input_kwarg_layouts={"bias": Shard(1)}),
        "lin": PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Shard(1)),
    }, axis="model")
    x, b = _rand(8, 4), _rand(8, 8, seed=1)
    f = funcgrad.jit(lambda m, x, b: m(x, bias=b))
    y, z = f(model, _put(x, mesh, "data"), b)
    # the constraints reach the outputs: features split over "model", the batch over "data"
    assert y.sharding == NamedSharding(mesh, P("data", "model"))
    y_ref, z_ref = f(ref, jnp.asarray(x), jnp.asarray(b))
    np.testing.assert_allclose(np.asarray(y), np.asarray(y_ref), **TOL)
    np.testing.assert_allclose(np.asarray(z), np.asarray(z_ref), **TOL)
    # jit(model) itself takes the module's placed parameters
    out = funcgrad.jit(model)(_put(x, mesh, "data"), bias=b)
    np.testing.assert_allclose(np.asarray(out[1]), np.asarray(z_ref), **TOL)


def test_layouts_read_back_from_xla_become_partition_specs(mesh):
    from jaxlib import xla_client as xc

    from funcgrad.lowering.mesh import named_sharding_from_hlo, spec_hlo_sharding
    specs = [P(), P("data"), P("model"), P(None, "data"), P(None, "model"), P("data", "model"),
             P("model", "data"), P(("data", "model")), P(("model", "data")),
             P(None, ("model", "data"))]
    for spec in specs:
        got = named_sharding_from_hlo(mesh, spec_hlo_sharding(mesh, spec, 2), 2)
        assert got == NamedSharding(mesh, spec), spec
    # a device order no spec over this mesh gives
    op = xc.OpSharding()
    op.type = xc.OpSharding.Type.OTHER
    op.tile_assignment_dimensions = [4, 1]
    op.tile_assignment_devices = [0, 3, 1, 2]
    assert named_sharding_from_hlo(mesh, xc.HloSharding.from_proto(op), 2) is None


def test_distribute_tensor_and_fully_shard_options(mesh):
    from funcgrad.nn.parallel import distribute_tensor
    a = _rand(8, 4)
    x = distribute_tensor(a, mesh, [Shard(0), Shard(1)])
    assert x.sharding == NamedSharding(mesh, P("data", "model"))
    _check_blocks(x, a)
    y = distribute_tensor(a, mesh, [Shard(0), Shard(0)])      # mesh order: "data" major
    assert y.sharding == NamedSharding(mesh, P(("data", "model")))
    _check_blocks(y, a)
    assert distribute_tensor(a, mesh).sharding.is_fully_replicated()
    with pytest.raises(ValueError, match="give one placement per axis"):
        distribute_tensor(a, mesh, [Shard(0)])
    with pytest.raises(ValueError, match=r"Shard\(dim=2\) for a tensor of shape \(8, 4\)"):
        distribute_tensor(a, mesh, [Shard(2), Replicate()])
    # PyTorch's default placement (dim 0) through shard_placement_fn; ignored parameters
    model = _mlp()
    keep = dict(model.named_parameters())["4.weight"]             # the Parameter box
    fully_shard(model, mesh, shard_placement_fn=lambda p: Shard(0), ignored_params=[keep])
    assert model[2].weight.sharding == NamedSharding(mesh, P("data"))   # (8, 16): dim 0
    assert model[4].weight.sharding.is_fully_replicated()               # ignored
    assert model[4].bias.sharding == NamedSharding(mesh, P("data"))
    with pytest.raises(ValueError, match=r"gave Shard\(dim=3\) for parameter 'weight'"):
        fully_shard(_mlp(), mesh, shard_placement_fn=lambda p: Shard(3))


def test_embedding_styles(mesh):
    ids = np.random.default_rng(0).integers(0, 16, (4, 6)).astype(np.int32)
    f = funcgrad.jit(lambda m, t: funcgrad.value_and_grad(lambda mm: jnp.sum(mm(t) ** 2))(m))
    for style, spec in ((ColwiseParallel(), P(None, "model")), (RowwiseParallel(), P("model"))):
        funcgrad.manual_seed(0)
        ref = nn.Embedding(16, 8)
        funcgrad.manual_seed(0)
        emb = parallelize_module(nn.Embedding(16, 8), mesh, style, axis="model")
        assert emb.weight.sharding == NamedSharding(mesh, spec)
        (v, g), (v_ref, g_ref) = f(emb, _put(ids, mesh, "data")), f(ref, jnp.asarray(ids))
        np.testing.assert_allclose(float(v), float(v_ref), **TOL)
        np.testing.assert_allclose(np.asarray(g.weight), np.asarray(g_ref.weight), **TOL)


def test_lower_and_compile_show_the_partitioned_program(mesh):
    a, b = _rand(8, 4), _rand(4, 6, seed=1)
    f = funcgrad.jit(lambda x, w: jnp.sum(x @ w, axis=0))
    x, w = _put(a, mesh, "data"), _put(b, mesh, None, "model")
    lowered = f.lower(x, w)
    text = lowered.as_text()     # Shardy's annotations: the mesh and each argument's axes
    assert "sdy.mesh @mesh" in text and '[{"data"}, {}]' in text and '[{}, {"model"}]' in text
    compiled = lowered.compile()
    text = compiled.as_text()
    assert "f32[4,4]" in text and "all-reduce" in text     # per-device blocks, the batch sum
    assert [s.spec for s in compiled.input_shardings] == [P("data"), P(None, "model")]
    assert compiled.output_shardings[0] == NamedSharding(mesh, P("model"))
    np.testing.assert_allclose(np.asarray(compiled(x, w)), (a @ b).sum(0), **TOL)
    assert f.trace_count == 1                 # lower compiled what the call then used


def test_one_call_path_fast_table_for_module_steps_and_explicit_shardings(mesh, monkeypatch):
    # a plain jitted module training step over mesh-placed parameters: after the first call
    # every call is the fast table's (no sharding resolution, no compile), state written back
    from funcgrad.lowering import spmd_dispatch
    model = parallelize_module(_mlp(), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()},
                               axis="model")
    ref = _mlp()
    opt, ref_opt = optim.SGD(model.parameters(), lr=0.1), optim.SGD(ref.parameters(), lr=0.1)
    step = _training_step()
    resolved = []
    entry_for = spmd_dispatch._entry_for
    monkeypatch.setattr(spmd_dispatch, "_entry_for",
                        lambda *a: resolved.append(1) or entry_for(*a))
    rows = NamedSharding(mesh, P("data"))       # batches placed by one sharding object
    for x, y in _batches():
        got = float(step(model, opt, funcgrad.device_put(x, rows), funcgrad.device_put(y, rows)))
        want = float(step(ref, ref_opt, jnp.asarray(x), jnp.asarray(y)))
        np.testing.assert_allclose(got, want, **TOL)
    # first call: resolved and compiled; second: the written-back parameters carry the
    # program's own output sharding objects (one more resolution, no trace); then fast
    assert len(resolved) == 2 and step.trace_count == 2      # (one of them on one device)
    assert len(step._caches.spmd_fast) == 2 and len(step._caches.spmd) == 1
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(np.asarray(p), np.asarray(q), err_msg=name, **TOL)
    # the same path with shardings given, a pytree prefix for the dict argument, a static
    # argument, donation, out_shardings None (XLA chooses) and the same errors
    g = funcgrad.jit(lambda p, x, k: ({"w": p["w"] * k}, (x @ p["w"]).sum()),
                     static_argnums=2, donate_argnums=0,
                     in_shardings=({"w": NamedSharding(mesh, P(None, "model"))}, rows),
                     out_shardings=({"w": NamedSharding(mesh, P(None, "model"))}, None))
    w, xs = _rand(4, 6), _rand(8, 4, seed=3)
    p = {"w": _put(w, mesh, None, "model")}
    x = _put(xs, mesh, "data")
    for k in (2.0, 2.0, 3.0):
        old = p["w"]
        p, total = g(p, x, k)
        assert old.is_deleted() and p["w"].sharding.spec == P(None, "model")
        assert total.sharding.is_fully_replicated()
    np.testing.assert_allclose(np.asarray(p["w"]), w * 12.0, **TOL)
    np.testing.assert_allclose(float(total), (xs @ (w * 4.0)).sum(), rtol=1e-4)   # before k=3
    assert g.trace_count == 2              # one per static value
    with pytest.raises(RuntimeError, match="deleted"):
        g({"w": old}, x, 2.0)
    with pytest.raises(ValueError, match="pass the arguments by position"):
        g(p, x=x, k=2.0)
    # a buffer donated to one function, given to another whose fast table knows its layout
    twice = funcgrad.jit(lambda q: q * 2.0)
    live = _put(w, mesh, None, "model")
    twice(live), twice(live)
    g({"w": live}, x, 2.0)
    with pytest.raises(RuntimeError, match=r"argument leaf 0 \(f32\[4,6\]\) was deleted"):
        twice(live)
    # under grad the shardings are kept: the gradient comes back laid out as its argument
    h = funcgrad.jit(lambda a, b: jnp.tanh(a @ b).sum(), in_shardings=(rows, NamedSharding(
        mesh, P(None, "model"))))
    ga = funcgrad.grad(h)(xs, w)
    assert ga.sharding == rows
    np.testing.assert_allclose(np.asarray(ga), np.asarray(funcgrad.grad(
        lambda a, b: jnp.tanh(a @ b).sum())(jnp.asarray(xs), jnp.asarray(w))), **TOL)


def test_hyper_parameters_changed_between_fast_calls(mesh):
    # the fast path keeps an optimizer group's flatten plan and its scalars' device copies while
    # the group holds the very same objects: a new learning rate (a new float) and new static
    # flags (nesterov: traced anew) take effect at the next call. The reference is NumPy's SGD
    # (PyTorch's formula) on gradients taken on one device.
    model = parallelize_module(_mlp(), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()},
                               axis="model")
    ref = _mlp()
    opt = optim.SGD(model.parameters(), lr=0.1)
    step = _training_step()
    hyper = dict(lr=0.1, momentum=0.0, nesterov=False)
    velocity = {}
    changes = [{}, {}, {"lr": 0.05}, {}, {"momentum": 0.5, "nesterov": True}, {}, {"lr": 0.2}]
    for i, change in enumerate(changes):
        opt.param_groups[0].update(change)
        hyper.update(change)
        x, y = _rand(8, 8, seed=40 + i), _rand(8, 4, seed=60 + i)
        want, grads = funcgrad.value_and_grad(lambda m: F.mse_loss(m(x), y))(ref)
        got = step(model, opt, _put(x, mesh, "data"), _put(y, mesh, "data"))
        np.testing.assert_allclose(float(got), float(want), err_msg=f"step {i}", **TOL)
        for (name, p), (_, g) in zip(ref.named_parameters(), grads.named_parameters()):
            g = np.asarray(g)
            if hyper["momentum"]:
                v = velocity[name] = hyper["momentum"] * velocity[name] + g \
                    if name in velocity else g
                g = g + hyper["momentum"] * v if hyper["nesterov"] else v
            ref.get_parameter(name).data = jnp.asarray(np.asarray(p) - hyper["lr"] * g)
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(np.asarray(p), np.asarray(q), err_msg=name, **TOL)
    # traced anew for nesterov, then for the momentum buffers its first step creates
    assert step.trace_count == 3
