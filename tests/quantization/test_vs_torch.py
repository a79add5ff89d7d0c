"""The workflows against PyTorch's on the same weights and data: same scales and zero points
from the same observers (to 1e-6), the same integer weights, outputs within one quantization
step. Live against torch when it is installed, against the stored ``torch_reference.npz``
(made by ``torch_reference.py``) always."""
import numpy as np
import pytest

import funcgrad.numpy as jnp
from funcgrad import nn
from funcgrad import quantization as tq
from tests.quantization.torch_reference import STORED, inputs, torch_results


class Net(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv, self.relu = nn.Conv2d(1, 3, 3), nn.ReLU()
        self.fc, self.relu2 = nn.Linear(12, 6), nn.ReLU()
        self.fc2 = nn.Linear(6, 2)
        self.load_state_dict({"conv.weight": d["conv_w"], "conv.bias": d["conv_b"],
                              "fc.weight": d["fc_w"], "fc.bias": d["fc_b"],
                              "fc2.weight": d["fc2_w"], "fc2.bias": d["fc2_b"]})

    def forward(self, x):
        x = self.relu(self.conv(self.quant(x)))
        x = x.reshape(x.shape[0], -1)
        return self.dequant(self.fc2(self.relu2(self.fc(x))))


def static_model(d, qconfig):
    net = tq.fuse_modules(Net(d).eval(), [["conv", "relu"], ["fc", "relu2"]])
    p = tq.prepare(net, qconfig)
    for b in d["calib"]:
        p(jnp.asarray(b))
    return tq.convert(p)


QCONFIGS = {"minmax": tq.QConfig(activation=tq.MinMaxObserver.with_args(reduce_range=True),
                                 weight=tq.default_per_channel_weight_observer),
            "x86": tq.get_default_qconfig("x86")}


@pytest.fixture(scope="module")
def data():
    return inputs()


@pytest.fixture(scope="module", params=["stored", "live"])
def ref(request, data):
    if request.param == "live":
        pytest.importorskip("torch")
        return torch_results(data)
    return dict(np.load(STORED))


def test_dynamic_linear(ref, data):
    lin = nn.Linear(16, 8)
    lin.load_state_dict({"weight": data["lin_w"], "bias": data["lin_b"]})
    q = tq.quantize_dynamic(nn.Sequential(lin), {nn.Linear}, dtype=tq.qint8)[0]
    np.testing.assert_array_equal(np.asarray(q.weight), ref["dyn_w"])
    np.testing.assert_allclose(np.asarray(q.weight_scale).item(), ref["dyn_w_scale"], rtol=1e-6)
    y = np.asarray(q(jnp.asarray(data["lin_x"])))
    # the same integers and scales: equal up to float rounding of the rescale
    np.testing.assert_allclose(y, ref["dyn_y"], atol=1e-5)


def test_dynamic_lstm(ref, data):
    lstm = nn.LSTM(5, 6)
    lstm.load_state_dict({k[5:]: v for k, v in data.items() if k.startswith("lstm.")})
    q = tq.quantize_dynamic(nn.Sequential(lstm), {nn.LSTM})[0]
    y = np.asarray(q(jnp.asarray(data["lstm_x"]))[0])
    np.testing.assert_allclose(np.asarray(lstm(jnp.asarray(data["lstm_x"]))[0]),
                               ref["lstm_float_y"], atol=1e-5)
    np.testing.assert_allclose(y, ref["lstm_y"], atol=2e-4)


@pytest.mark.parametrize("dtype", ["float16", np.float16, tq.float16])
def test_dynamic_float16_linear_lstm_gru(ref, data, dtype):
    # float16 weights (one saturated at 65504), float32 products: PyTorch's fp16 dynamic path
    lin = nn.Linear(16, 8)
    lin.load_state_dict({"weight": data["lin16_w"], "bias": data["lin_b"]})
    q = tq.quantize_dynamic(nn.Sequential(lin), {nn.Linear}, dtype=dtype)[0]
    assert q.weight.dtype == np.float16 and float(np.asarray(q.weight)[2, 3]) == 65504.0
    np.testing.assert_allclose(np.asarray(q(jnp.asarray(data["lin_x"]))), ref["dyn16_y"],
                               rtol=1e-6, atol=1e-5)
    x = jnp.asarray(data["lstm_x"])
    for kind, cls in (("lstm", nn.LSTM), ("gru", nn.GRU)):
        rnn = cls(5, 6)
        rnn.load_state_dict({k[len(kind) + 1:]: v for k, v in data.items()
                             if k.startswith(kind + ".")})
        qr = tq.quantize_dynamic(nn.Sequential(rnn), {cls}, dtype=dtype)[0]
        assert qr.weight_hh_l0.dtype == np.float16
        np.testing.assert_allclose(np.asarray(qr(x)[0]), ref[f"{kind}16_y"], atol=1e-6)


@pytest.mark.parametrize("name, cls, kw", [("lstmcell", nn.LSTMCell, {}),
                                            ("grucell", nn.GRUCell, {}),
                                            ("rnncell", nn.RNNCell, {"nonlinearity": "relu"})])
def test_dynamic_cells(ref, data, name, cls, kw):
    cell = cls(5, 6, **kw)
    cell.load_state_dict({k.split(".")[1]: v for k, v in data.items()
                          if k.startswith(name + ".")})
    x, h = jnp.asarray(data["cell_x"]), jnp.asarray(data["cell_h"])
    hx = (h, jnp.asarray(data["cell_c"])) if name == "lstmcell" else h
    for tag, dtype in (("q8", "qint8"), ("f16", "float16")):
        q = tq.quantize_dynamic(nn.Sequential(cell), dtype=dtype)[0]   # cells by default
        assert type(q).__name__ == "DynamicQuantized" + type(cell).__name__
        y = q(x, hx)
        y = y[0] if name == "lstmcell" else y
        np.testing.assert_allclose(np.asarray(y), ref[f"{name}_{tag}_y"], atol=1e-5,
                                   err_msg=tag)
    assert repr(q) == ("DynamicQuantizedRNNCell(5, 6, nonlinearity=relu)" if name == "rnncell"
                       else f"DynamicQuantized{type(cell).__name__}(5, 6)")


@pytest.mark.parametrize("bits", [8, 4])
def test_embedding_tables(ref, data, bits):
    qc = tq.float_qparams_weight_only_qconfig if bits == 8 else \
        tq.float_qparams_weight_only_qconfig_4bit
    emb = nn.Sequential(nn.Embedding(20, 12, _weight=jnp.asarray(data["emb_w"])))
    emb[0].qconfig = qc
    q = tq.convert(tq.prepare(emb))[0]
    assert isinstance(q, tq.QuantizedEmbedding)
    # the same codes (4-bit: packed two a byte, as PyTorch's), scales and zero points
    np.testing.assert_array_equal(np.asarray(q.weight), ref[f"emb{bits}_q"].reshape(20, -1))
    np.testing.assert_allclose(np.asarray(q.weight_scale), ref[f"emb{bits}_scale"], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(q.weight_zero_point), ref[f"emb{bits}_zp"],
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(q(jnp.asarray(data["emb_ids"]))), ref[f"emb{bits}_y"],
                               rtol=1e-6, atol=1e-6)
    rows = _dequantized_rows(ref, bits)          # NumPy, from PyTorch's codes and qparams
    ids, offsets = data["bag_ids"], data["bag_offsets"]
    bags = [ids[a:b] for a, b in zip(offsets, list(offsets[1:]) + [len(ids)])]
    for mode in ("sum", "mean", "max"):
        bag = nn.Sequential(nn.EmbeddingBag(20, 12, mode=mode,
                                            _weight=jnp.asarray(data["emb_w"])))
        qb = tq.quantize_dynamic(bag, {nn.EmbeddingBag: qc})[0]
        assert isinstance(qb, tq.QuantizedEmbeddingBag)
        got = np.asarray(qb(jnp.asarray(ids), jnp.asarray(offsets)))
        got2d = np.asarray(qb(jnp.asarray(data["emb_ids"])))
        reduce = {"sum": np.sum, "mean": np.mean, "max": np.max}[mode]
        want = np.stack([reduce(rows[b], 0) if len(b) else np.zeros(12) for b in bags])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=mode)
        np.testing.assert_allclose(got2d, np.stack([reduce(rows[b], 0) for b in data["emb_ids"]]),
                                   rtol=1e-5, atol=1e-5, err_msg=mode)
        if mode == "sum":        # PyTorch 2.13's quantized EmbeddingBag sums in every mode
            np.testing.assert_allclose(got, ref[f"bag{bits}_sum_y"], rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(got2d, ref[f"bag{bits}_sum_2d_y"], rtol=1e-6, atol=1e-6)
            got = qb(jnp.asarray(ids), jnp.asarray(offsets),
                     per_sample_weights=jnp.asarray(data["bag_psw"]))
            np.testing.assert_allclose(np.asarray(got), ref[f"bag{bits}_psw_y"], rtol=1e-5,
                                       atol=1e-5)


def _dequantized_rows(ref, bits):
    """The table from PyTorch's codes: ``q * scale + offset``, ``offset = -zero_point * scale``
    (float16-rounded scale and offset for 4-bit rows, as PyTorch's 4-bit kernels)."""
    q = ref[f"emb{bits}_q"].reshape(20, -1).astype(np.int64)
    if bits == 4:
        q = np.stack([q & 15, q >> 4], -1).reshape(20, 12)
    scale = ref[f"emb{bits}_scale"].astype(np.float32)
    offset = (-ref[f"emb{bits}_zp"] * scale).astype(np.float32)
    if bits == 4:
        scale, offset = (v.astype(np.float16).astype(np.float32) for v in (scale, offset))
    return q.astype(np.float32) * scale[:, None] + offset[:, None]


@pytest.mark.parametrize("tag", ["minmax", "x86"])
def test_static(ref, data, tag):
    c = static_model(data, QCONFIGS[tag])
    np.testing.assert_allclose(np.asarray(c.quant.scale).reshape(1), ref[f"{tag}_quant_scale"],
                               rtol=1e-6)
    assert np.asarray(c.quant.zero_point).item() == int(ref[f"{tag}_quant_zp"][0])
    for name in ("conv", "fc", "fc2"):
        m = getattr(c, name)
        # the input range of a module is observed at its input: here the output of the
        # module before it (after a reshape), so the same values PyTorch's observer saw
        np.testing.assert_allclose(np.asarray(m.scale).item(), ref[f"{tag}_{name}_scale"], rtol=1e-6)
        assert np.asarray(m.zero_point).item() == int(ref[f"{tag}_{name}_zp"])
        np.testing.assert_allclose(np.asarray(m.weight_scale), ref[f"{tag}_{name}_w_scale"],
                                   rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(m.weight), ref[f"{tag}_{name}_w"])
    y = np.asarray(c(jnp.asarray(data["test_x"])))
    step = float(ref[f"{tag}_fc2_scale"])
    assert np.abs(y - ref[f"{tag}_y"]).max() <= step * 1.001


class ConvNet(nn.Module):
    def __init__(self, d, nd):
        super().__init__()
        conv = {1: nn.Conv1d, 3: nn.Conv3d}[nd]
        bn = {1: nn.BatchNorm1d, 3: nn.BatchNorm3d}[nd]
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv, self.bn, self.relu = conv(2, 4, 3, padding=1), bn(4), nn.ReLU()
        g, b, m, v = d[f"bn{nd}d"]
        self.load_state_dict({"conv.weight": d[f"conv{nd}d_w"], "conv.bias": d[f"conv{nd}d_b"],
                              "bn.weight": g, "bn.bias": b, "bn.running_mean": m,
                              "bn.running_var": v, "bn.num_batches_tracked": np.array(0)})

    def forward(self, x):
        return self.dequant(self.relu(self.bn(self.conv(self.quant(x)))))


@pytest.mark.parametrize("nd", [1, 3])
def test_static_conv1d_conv3d_with_batch_norm(ref, data, nd):
    net = tq.fuse_modules(ConvNet(data, nd).eval(), [["conv", "bn", "relu"]])
    assert type(net.conv).__name__ == f"ConvReLU{nd}d"
    p = tq.prepare(net, tq.get_default_qconfig("x86"))
    for b in data[f"calib{nd}d"]:
        p(jnp.asarray(b))
    c = tq.convert(p)
    assert type(c.conv).__name__ == f"QuantizedConvReLU{nd}d"
    np.testing.assert_array_equal(np.asarray(c.conv.weight), ref[f"conv{nd}d_w_q"])
    np.testing.assert_allclose(np.asarray(c.conv.weight_scale), ref[f"conv{nd}d_w_scale"],
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(c.conv.scale).item(), ref[f"conv{nd}d_scale"],
                               rtol=1e-6)
    assert np.asarray(c.conv.zero_point).item() == int(ref[f"conv{nd}d_zp"])
    np.testing.assert_allclose(np.asarray(c.quant.scale).reshape(1),
                               ref[f"conv{nd}d_quant_scale"], rtol=1e-6)
    y = np.asarray(c(jnp.asarray(data[f"test{nd}d"])))
    assert np.abs(y - ref[f"conv{nd}d_y"]).max() <= float(ref[f"conv{nd}d_scale"]) * 1.001


@pytest.mark.parametrize("name, make, chunks", [
    ("minmax", lambda: tq.MinMaxObserver(), 1),
    ("minmax_sym", lambda: tq.MinMaxObserver(dtype=tq.qint8, qscheme=tq.per_tensor_symmetric), 1),
    ("moving", lambda: tq.MovingAverageMinMaxObserver(averaging_constant=0.3), 2),
    ("hist", lambda: tq.HistogramObserver(), 1),
    ("hist_rr", lambda: tq.HistogramObserver(reduce_range=True), 1)])
def test_observers(ref, data, name, make, chunks):
    obs = make()
    x = data["obs_x"]
    for c in ((x[:1000], x[1000:]) if chunks == 2 else (x,)):
        obs(c)
    s, z = obs.calculate_qparams()
    np.testing.assert_allclose(s, ref[f"obs_{name}_scale"], rtol=1e-6)
    np.testing.assert_array_equal(z, ref[f"obs_{name}_zp"])


def test_per_channel_observer(ref, data):
    obs = tq.PerChannelMinMaxObserver(dtype=tq.qint8, qscheme=tq.per_channel_symmetric)
    obs(data["obs_w"])
    s, z = obs.calculate_qparams()
    np.testing.assert_allclose(s, ref["obs_perchannel_scale"], rtol=1e-6)
    np.testing.assert_array_equal(z, ref["obs_perchannel_zp"])
