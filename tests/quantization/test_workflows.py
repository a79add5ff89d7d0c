"""funcgrad.quantization's workflows on their own: save/load, jit/vmap/grad of quantized
modules, QAT convergence, partial quantization, torchao configs against the transform and
NumPy, fusion, and the errors."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import nn
from funcgrad import quantization as tq
from funcgrad.quantize import QuantizeConfig

RNG = np.random.default_rng(5)


def arr(*shape, scale=1.0):
    return jnp.asarray((RNG.normal(size=shape) * scale).astype(np.float32))


def mlp():
    funcgrad.manual_seed(3)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def calibrated(model, qconfig=tq.default_qconfig, **kw):
    p = tq.prepare(model, qconfig, **kw)
    for i in range(4):
        p(arr(32, 8))
    return tq.convert(p)


def test_static_close_to_float_and_state_dict_is_integer():
    model = mlp().eval()
    q = calibrated(model)
    x = arr(64, 8)
    err = np.abs(np.asarray(q(x)) - np.asarray(model(x))).max()
    assert err < 0.05 * np.abs(np.asarray(model(x))).max()
    sd = q.state_dict()
    assert sd["0.weight"].dtype == np.int8 and sd["2.weight"].dtype == np.int8
    assert sd["0.weight_scale"].shape == (1,) and sd["0.scale"].dtype == np.float32
    assert "QuantizedLinear(in_features=16, out_features=4, scale=" in repr(q)


@pytest.mark.slow
def test_save_load_dynamic_and_static(tmp_path):
    lstm = nn.Sequential(nn.LSTM(6, 64))
    q = tq.quantize_dynamic(lstm, {nn.LSTM})
    path = str(tmp_path / "lstm.safetensors")
    funcgrad.save(q, path)
    fresh = tq.quantize_dynamic(nn.Sequential(nn.LSTM(6, 64)), {nn.LSTM})
    fresh.load_state_dict(funcgrad.load(path))
    x = arr(5, 2, 6)
    np.testing.assert_array_equal(np.asarray(fresh(x)[0]), np.asarray(q(x)[0]))
    assert fresh.state_dict()["0.weight_ih_l0"].dtype == np.int8
    # the file holds int8 weights: about a quarter of the float model's
    fpath = str(tmp_path / "float.safetensors")
    funcgrad.save(lstm, fpath)
    import os
    assert os.path.getsize(path) < 0.4 * os.path.getsize(fpath)
    s = calibrated(mlp().eval())
    funcgrad.save(s, str(tmp_path / "s.safetensors"))
    s2 = calibrated(mlp().eval())
    s2.load_state_dict(funcgrad.load(str(tmp_path / "s.safetensors")))
    x = arr(3, 8)
    np.testing.assert_array_equal(np.asarray(s2(x)), np.asarray(s(x)))


@pytest.mark.slow
def test_quantized_modules_under_jit_vmap_grad():
    model = mlp().eval()
    q = calibrated(model)
    d = tq.quantize_dynamic(model)
    x = arr(6, 8)
    for m in (q, d):
        np.testing.assert_allclose(np.asarray(funcgrad.jit(lambda m, x: m(x))(m, x)),
                                   np.asarray(m(x)), atol=1e-6)
    # vmap over examples: each example alone (per-tensor dynamic ranges are per example)
    v = np.asarray(funcgrad.vmap(d)(x[:, None]))[:, 0]
    one = np.stack([np.asarray(d(x[i:i + 1]))[0] for i in range(6)])
    np.testing.assert_allclose(v, one, atol=1e-6)
    # grad: straight through the rounding, the float gradient at the dequantized weights
    lin = nn.Linear(8, 3)
    ql = tq.quantize_dynamic(nn.Sequential(lin))[0]
    g = np.asarray(funcgrad.grad(lambda x: jnp.sum(ql(x)))(x))
    w = np.asarray(ql.weight, np.float32) * np.asarray(ql.weight_scale).item()
    np.testing.assert_allclose(g, np.broadcast_to(w.sum(0), g.shape), rtol=1e-5)
    gb = funcgrad.jit(funcgrad.grad(lambda m, x: jnp.sum(m(x)), allow_int=True))(ql, x)
    np.testing.assert_allclose(np.asarray(gb.bias), np.full(3, 6.0))


@pytest.mark.slow
def test_qat_converges_and_converts():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8)).astype(np.float32)
    w_true = rng.normal(size=(8, 3)).astype(np.float32)
    y = np.argmax(x @ w_true, 1)
    xs, ys = jnp.asarray(x), jnp.asarray(y)
    funcgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    model = tq.fuse_modules(model.eval(), [["0", "1"]]).train()
    qat = tq.prepare_qat(model, tq.get_default_qat_qconfig("x86"))
    opt = funcgrad.optim.SGD(qat.parameters(), lr=0.2)

    def loss_fn(m, x, y):
        return nn.functional.cross_entropy(m(x), y)

    @funcgrad.jit
    def step(m, opt, x, y):
        loss, g = funcgrad.value_and_grad(loss_fn)(m, x, y)
        opt.step(g)
        return loss
    losses = [float(step(qat, opt, xs, ys)) for _ in range(60)]
    assert losses[-1] < 0.5 * losses[0]
    # the FakeQuantize ranges were carried out of the jitted step
    assert np.isfinite(np.asarray(qat[0].activation_post_process.min_val))
    q = tq.convert(qat.eval())
    assert type(q[0]).__name__ == "QuantizedLinearReLU"
    acc_q = float(np.mean(np.argmax(np.asarray(q(xs)), 1) == y))
    acc_f = float(np.mean(np.argmax(np.asarray(qat(xs)), 1) == y))
    assert acc_q > 0.85 and abs(acc_q - acc_f) <= 0.03


def test_partial_quantization():
    model = mlp().eval()
    model[2].qconfig = None
    q = calibrated(model)
    assert [type(m).__name__ for m in q] == ["QuantizedLinear", "ReLU", "Linear"]
    q2 = calibrated(mlp().eval(), qconfig_dict={"2": None})
    assert type(q2[2]).__name__ == "Linear"
    q3 = calibrated(mlp().eval(), None, qconfig_dict={"2": tq.default_qconfig})
    assert [type(m).__name__ for m in q3] == ["Linear", "ReLU", "QuantizedLinear"]
    d = tq.quantize_dynamic(mlp(), {"0": tq.default_dynamic_qconfig})
    assert [type(m).__name__ for m in d] == ["DynamicQuantizedLinear", "ReLU", "Linear"]


def test_fuse_conv_bn_relu_matches_float():
    funcgrad.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
    x = arr(3, 2, 6, 6)
    model.train()
    model(x)                                           # running statistics move
    model.eval()
    fused = tq.fuse_modules(model, [["0", "1", "2"]])
    np.testing.assert_allclose(np.asarray(fused(x)), np.asarray(model(x)), atol=1e-5)
    q = calibrated_conv(fused, x)
    assert type(q[0]).__name__ == "QuantizedConvReLU2d"
    step = np.asarray(q[0].scale).item()
    assert np.abs(np.asarray(q(x)) - np.asarray(model(x))).max() < 4 * step


def calibrated_conv(model, x):
    p = tq.prepare(model, tq.get_default_qconfig("x86"))
    p(x)
    return tq.convert(p)


def test_torchao_configs_match_the_transform():
    funcgrad.manual_seed(2)
    lin = nn.Linear(64, 16)
    x = arr(4, 64)
    w, b = np.asarray(lin.weight), np.asarray(lin.bias)
    for config, qcfg in ((tq.Int8DynamicActivationInt8WeightConfig(), QuantizeConfig()),
                         (tq.Int8WeightOnlyConfig(), QuantizeConfig(activation="none")),
                         (tq.Int4WeightOnlyConfig(group_size=16),
                          QuantizeConfig(activation="none", weight_dtype="int4",
                                         granularity="per_block", block_size=16)),
                         (tq.Float8DynamicActivationFloat8WeightConfig(),
                          QuantizeConfig(weight_dtype="fp8_e4m3", activation_dtype="fp8_e4m3"))):
        m = nn.Sequential(nn.Linear(64, 16))
        m[0].load_state_dict(lin.state_dict())
        tq.quantize_(m, config)
        ref = funcgrad.quantize(lambda x: x @ w.T + b, qcfg)(x)
        np.testing.assert_allclose(np.asarray(m(x)), np.asarray(ref), rtol=1e-5, atol=1e-5)
    # int4 per group against NumPy
    m = nn.Sequential(nn.Linear(64, 16))
    m[0].load_state_dict(lin.state_dict())
    tq.quantize_(m, tq.Int4WeightOnlyConfig(group_size=16))
    g = w.reshape(16, 4, 16)
    s = np.maximum(np.abs(g).max(-1, keepdims=True) / 7, np.finfo(np.float32).eps)
    wq = (np.clip(np.round(g / s), -8, 7) * s).reshape(16, 64)
    np.testing.assert_allclose(np.asarray(m(x)), np.asarray(x) @ wq.T + b, atol=1e-4)
    assert np.asarray(m[0].weight).min() >= -8 and np.asarray(m[0].weight).max() <= 7


def test_float16_dynamic_modules_print_save_load_and_jit(tmp_path):
    funcgrad.manual_seed(3)
    model = nn.Sequential(nn.Linear(6, 32), nn.LSTM(32, 48))
    q = tq.quantize_dynamic(model, {nn.Linear, nn.LSTM}, dtype="float16")
    assert repr(q[0]) == ("DynamicQuantizedLinear(in_features=6, out_features=32, "
                          "dtype=torch.float16)")
    assert repr(q[1]) == "DynamicQuantizedLSTM(32, 48)"
    sd = q.state_dict()
    assert sd["0.weight"].dtype == np.float16 and sd["0.bias"].dtype == np.float32
    assert sd["1.weight_hh_l0"].dtype == np.float16 and "1.weight_hh_l0_scale" not in sd
    # the weights are the float model's rounded to float16; the output is the float model's
    # up to that rounding
    np.testing.assert_array_equal(np.asarray(sd["0.weight"]),
                                  np.asarray(model[0].weight).astype(np.float16))
    x = arr(4, 3, 6)
    want = np.asarray(model[1](model[0](x))[0])
    got = np.asarray(q[1](q[0](x))[0])
    np.testing.assert_allclose(got, want, atol=2e-3)
    jitted = funcgrad.jit(lambda m, v: m[1](m[0](v))[0])
    np.testing.assert_allclose(np.asarray(jitted(q, x)), got, rtol=1e-6, atol=1e-6)
    path, fpath = str(tmp_path / "q16.safetensors"), str(tmp_path / "f32.safetensors")
    funcgrad.save(q, path)
    funcgrad.save(model, fpath)
    fresh = tq.quantize_dynamic(nn.Sequential(nn.Linear(6, 32), nn.LSTM(32, 48)),
                                {nn.Linear, nn.LSTM}, dtype=np.float16)
    fresh.load_state_dict(funcgrad.load(path))
    np.testing.assert_array_equal(np.asarray(fresh[1](fresh[0](x))[0]), got)
    import os
    assert os.path.getsize(path) < 0.55 * os.path.getsize(fpath)     # half the weight bytes


def test_embedding_tables_in_the_workflows_save_load_and_size(tmp_path):
    funcgrad.manual_seed(5)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.bag = nn.Embedding(300, 64), nn.EmbeddingBag(300, 64, mode="mean")
            self.quant, self.fc, self.dequant = tq.QuantStub(), nn.Linear(64, 4), tq.DeQuantStub()

        def forward(self, ids):
            x = self.emb(ids).mean(1) + self.bag(ids)
            return self.dequant(self.fc(self.quant(x)))
    net = Net().eval()
    net.qconfig = tq.get_default_qconfig("x86")
    net.emb.qconfig = tq.float_qparams_weight_only_qconfig
    net.bag.qconfig = tq.float_qparams_weight_only_qconfig_4bit
    ids = jnp.asarray(np.random.default_rng(0).integers(0, 300, (8, 5)))
    prepared = tq.prepare(net)
    assert not hasattr(prepared.emb, "activation_post_process")    # nothing observed
    prepared(ids)
    q = tq.convert(prepared)
    assert repr(q.emb) == ("QuantizedEmbedding(num_embeddings=300, embedding_dim=64, "
                           "dtype=torch.quint8, qscheme=torch.per_channel_affine_float_qparams)")
    assert "dtype=torch.quint4x2" in repr(q.bag) and type(q.fc).__name__ == "QuantizedLinear"
    sd = q.state_dict()
    assert sd["emb.weight"].dtype == np.uint8 and sd["emb.weight"].shape == (300, 64)
    assert sd["bag.weight"].shape == (300, 32)                     # two 4-bit codes a byte
    # each row within half a step of its float values
    step = np.asarray(q.emb.weight_scale)[:, None]
    table = np.asarray(net.emb.weight)
    assert np.all(np.abs(np.asarray(q.emb.dequantize()) - table) <= step / 2 + 1e-6)
    np.testing.assert_allclose(np.asarray(q(ids)), np.asarray(net(ids)), atol=0.1)
    jitted = funcgrad.jit(lambda m, i: m(i))
    np.testing.assert_allclose(np.asarray(jitted(q, ids)), np.asarray(q(ids)), rtol=1e-6,
                               atol=1e-6)
    path, fpath = str(tmp_path / "q.safetensors"), str(tmp_path / "f.safetensors")
    funcgrad.save(q, path)
    funcgrad.save(net, fpath)
    import os
    assert os.path.getsize(path) < 0.25 * os.path.getsize(fpath)
    fresh = Net().eval()
    fresh.qconfig = tq.get_default_qconfig("x86")
    fresh.emb.qconfig = tq.float_qparams_weight_only_qconfig
    fresh.bag.qconfig = tq.float_qparams_weight_only_qconfig_4bit
    p2 = tq.prepare(fresh)
    p2(ids)
    q2 = tq.convert(p2)
    q2.load_state_dict(funcgrad.load(path))
    np.testing.assert_array_equal(np.asarray(q2(ids)), np.asarray(q(ids)))


def test_qat_conv1d_and_conv3d_convert_to_their_quantized_modules():
    funcgrad.manual_seed(2)
    for nd, conv, shape in ((1, nn.Conv1d, (3, 2, 10)), (3, nn.Conv3d, (2, 2, 4, 4, 4))):
        model = tq.fuse_modules(nn.Sequential(conv(2, 4, 3, padding=1), nn.ReLU()).train(),
                                ["0", "1"])
        q = tq.prepare_qat(model, tq.get_default_qat_qconfig("x86"))
        assert type(q[0]).__name__ == f"QATConv{nd}d" and q[0].relu
        x = arr(*shape)
        float_y = np.asarray(model(x))
        np.testing.assert_allclose(np.asarray(q(x)), float_y, atol=0.05)   # fake-quantized
        c = tq.convert(q.eval())
        assert type(c[0]).__name__ == f"QuantizedConvReLU{nd}d"
        np.testing.assert_allclose(np.asarray(c(x)), float_y, atol=0.05)
    with pytest.raises(ValueError, match=r"cannot fold batch norm '1' \(BatchNorm1d\) into a "
                                         r"Conv2d"):
        tq.fuse_modules(nn.Sequential(nn.Conv2d(1, 2, 1), nn.BatchNorm1d(2)).eval(),
                        ["0", "1"])


def test_embedding_quantization_errors():
    with pytest.raises(ValueError, match=r"Embedding '0': embedding quantization is only "
                                         r"supported with float_qparams_weight_only_qconfig"):
        tq.quantize_dynamic(nn.Sequential(nn.Embedding(4, 2)), {nn.Embedding})
    m = nn.Sequential(nn.EmbeddingBag(4, 2))
    m.qconfig = tq.default_qconfig
    with pytest.raises(ValueError, match="prepare: EmbeddingBag '0'"):
        tq.prepare(m)
    with pytest.raises(ValueError, match="embedding_dim must be even, got 3"):
        tq.quantize_dynamic(nn.Sequential(nn.Embedding(4, 3)),
                            {nn.Embedding: tq.float_qparams_weight_only_qconfig_4bit})
    q = tq.quantize_dynamic(nn.Sequential(nn.EmbeddingBag(4, 2)),
                            {nn.EmbeddingBag: tq.float_qparams_weight_only_qconfig})[0]
    with pytest.raises(ValueError, match="compressed_indices_mapping"):
        q(jnp.array([[0]]), compressed_indices_mapping=jnp.array([0]))
    q.mode = "min"
    with pytest.raises(ValueError, match="QuantizedEmbeddingBag: mode must be 'sum', 'mean'"):
        q(jnp.array([[0]]))
    with pytest.raises(TypeError, match="QuantizedEmbedding"):
        tq.quantize_dynamic(nn.Sequential(nn.Embedding(4, 2)),
                            {nn.Embedding: tq.float_qparams_weight_only_qconfig})[0](
            jnp.array([0.5]))


def test_errors():
    with pytest.raises(ValueError, match="saw no data"):
        tq.convert(tq.prepare(mlp().eval(), tq.default_qconfig))
    p = tq.prepare(mlp().eval(), tq.default_qconfig)
    p(jnp.full((2, 8), np.nan))
    with pytest.raises(ValueError, match="NaN or infinite"):
        tq.convert(p)
    with pytest.raises(ValueError, match="has a qconfig"):
        tq.prepare(mlp().eval())
    with pytest.raises(ValueError, match="needs eval mode"):
        tq.fuse_modules(nn.Sequential(nn.Conv2d(1, 1, 1), nn.BatchNorm2d(1)), ["0", "1"])
    with pytest.raises(ValueError, match="cannot fuse"):
        tq.fuse_modules(nn.Sequential(nn.ReLU(), nn.Linear(1, 1)), ["0", "1"])
    with pytest.raises(ValueError, match="dtype 'quint4x2' is not supported; use qint8"):
        tq.quantize_dynamic(mlp(), dtype="quint4x2")
    with pytest.raises(ValueError, match="float16 placeholder has no scale"):
        tq.PlaceholderObserver(dtype="float16").calculate_qparams()
    with pytest.raises(TypeError, match="not FakeQuantize"):
        tq.prepare_qat(mlp(), tq.default_qconfig)
    with pytest.raises(TypeError, match="config must be one of"):
        tq.quantize_(mlp(), QuantizeConfig())
    with pytest.raises(ValueError, match="group_size 48 does not divide"):
        tq.quantize_(mlp(), tq.Int4WeightOnlyConfig(group_size=48))
    with pytest.raises(ValueError, match="not instances"):
        tq.QConfig(activation=tq.MinMaxObserver(), weight=tq.MinMaxObserver)
    with pytest.raises(ValueError, match="not finite"):
        tq.FakeQuantize().calculate_qparams()


@pytest.mark.parametrize("make", [lambda: nn.GRU(5, 8, batch_first=True),
                                  lambda: nn.LSTM(5, 8, num_layers=2, bidirectional=True,
                                                  batch_first=True)])
def test_dynamic_recurrent_layers_close_to_float(make):
    funcgrad.manual_seed(4)
    rnn = make()
    q = tq.quantize_dynamic(nn.Sequential(rnn), {nn.GRU, nn.LSTM})[0]
    assert type(q).__name__ in ("DynamicQuantizedGRU", "DynamicQuantizedLSTM")
    x = arr(3, 6, 5)
    fwd = funcgrad.jit(lambda m, x: m(x))
    out_f, h_f = fwd(rnn, x)
    out_q, h_q = fwd(q, x)
    assert out_q.shape == out_f.shape
    assert np.abs(np.asarray(out_q) - np.asarray(out_f)).max() < 0.03
    hq = h_q[0] if isinstance(h_q, tuple) else h_q
    hf = h_f[0] if isinstance(h_f, tuple) else h_f
    assert np.abs(np.asarray(hq) - np.asarray(hf)).max() < 0.03
