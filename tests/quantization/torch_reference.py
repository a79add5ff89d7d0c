"""PyTorch's results for the workflows that tests/quantization compares with: the same
weights and data (made here with NumPy), run through ``torch.ao.quantization``. Used live
when torch is installed; ``python tests/quantization/torch_reference.py`` (with torch) stores
them in ``torch_reference.npz`` for runs without torch."""
import os
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
STORED = os.path.join(HERE, "torch_reference.npz")


def inputs():
    """Weights and data, by name (float32 NumPy arrays)."""
    rng = np.random.default_rng(22)
    f = lambda *s: rng.normal(size=s).astype(np.float32)   # noqa: E731
    d = {"lin_w": f(8, 16) / 4, "lin_b": f(8) / 10, "lin_x": f(5, 16),
         "conv_w": f(3, 1, 3, 3) / 2, "conv_b": f(3) / 10, "fc_w": f(6, 12) / 3,
         "fc_b": f(6) / 10, "fc2_w": f(2, 6) / 2, "fc2_b": f(2) / 10,
         "calib": f(4, 4, 1, 4, 4), "test_x": f(6, 1, 4, 4),
         "obs_x": np.concatenate([f(3000), [9.0, -4.0]]).astype(np.float32),
         "obs_w": f(4, 6), "lstm_x": f(7, 3, 5)}
    lstm = {f"lstm.{k}": f(*s) / 3 for k, s in (("weight_ih_l0", (24, 5)),
                                                ("weight_hh_l0", (24, 6)),
                                                ("bias_ih_l0", (24,)), ("bias_hh_l0", (24,)))}
    d.update(lstm)
    d.update({f"gru.{k}": f(*s) / 3 for k, s in (("weight_ih_l0", (18, 5)),
                                                 ("weight_hh_l0", (18, 6)),
                                                 ("bias_ih_l0", (18,)), ("bias_hh_l0", (18,)))})
    d["lin16_w"] = d["lin_w"].copy()
    d["lin16_w"][2, 3] = 1e5              # beyond float16's range: saturated to 65504
    d["emb_w"] = f(20, 12)
    d["emb_w"][3] = 0.0                   # a constant row: scale 1
    d["emb_ids"] = rng.integers(0, 20, (3, 5)).astype(np.int64)
    d["bag_ids"] = rng.integers(0, 20, 11).astype(np.int64)
    d["bag_offsets"] = np.array([0, 4, 4, 9], np.int64)          # one empty bag
    d["bag_psw"] = f(11)
    for nd, spatial in ((1, (9,)), (3, (4, 4, 4))):     # Conv1d / Conv3d + BatchNorm + ReLU
        d[f"conv{nd}d_w"] = f(4, 2, *(3,) * nd) / 2
        d[f"conv{nd}d_b"] = f(4) / 10
        d[f"bn{nd}d"] = np.stack([1 + f(4) / 5, f(4) / 5, f(4) / 5, 1 + np.abs(f(4))])
        d[f"calib{nd}d"] = f(4, 3, 2, *spatial)
        d[f"test{nd}d"] = f(2, 2, *spatial)
    for name, gates in (("lstmcell", 4), ("grucell", 3), ("rnncell", 1)):
        d.update({f"{name}.weight_ih": f(gates * 6, 5) / 3, f"{name}.weight_hh": f(gates * 6, 6) / 3,
                  f"{name}.bias_ih": f(gates * 6) / 3, f"{name}.bias_hh": f(gates * 6) / 3})
    d["cell_x"], d["cell_h"], d["cell_c"] = f(3, 5), f(3, 6), f(3, 6)
    return d


def torch_results(d):
    """{name: array} of PyTorch's scales, zero points, integer weights and outputs."""
    import torch
    import torch.ao.quantization as tq
    warnings.simplefilter("ignore")
    torch.backends.quantized.engine = "x86"
    t = {k: torch.from_numpy(v) for k, v in d.items()}
    out = {}
    # dynamic Linear
    lin = torch.nn.Linear(16, 8)
    lin.load_state_dict({"weight": t["lin_w"], "bias": t["lin_b"]})
    q = tq.quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear}, dtype=torch.qint8)
    w = q[0].weight()
    out.update(dyn_w=w.int_repr().numpy(), dyn_w_scale=np.float32(w.q_scale()),
               dyn_y=q(t["lin_x"]).detach().numpy())
    # dynamic LSTM
    lstm = torch.nn.LSTM(5, 6)
    lstm.load_state_dict({k[5:]: t[k] for k in d if k.startswith("lstm.")})
    ql = tq.quantize_dynamic(torch.nn.Sequential(lstm), {torch.nn.LSTM}, dtype=torch.qint8)
    out["lstm_y"] = ql[0](t["lstm_x"])[0].detach().numpy()
    out["lstm_float_y"] = lstm(t["lstm_x"])[0].detach().numpy()
    # float16 dynamic: Linear, LSTM, GRU
    lin16 = torch.nn.Linear(16, 8)
    lin16.load_state_dict({"weight": t["lin16_w"], "bias": t["lin_b"]})
    half = dict(dtype=torch.float16)
    out["dyn16_y"] = tq.quantize_dynamic(torch.nn.Sequential(lin16), {torch.nn.Linear},
                                         **half)(t["lin_x"]).detach().numpy()
    out["lstm16_y"] = tq.quantize_dynamic(torch.nn.Sequential(lstm), {torch.nn.LSTM},
                                          **half)[0](t["lstm_x"])[0].detach().numpy()
    gru = torch.nn.GRU(5, 6)
    gru.load_state_dict({k[4:]: t[k] for k in d if k.startswith("gru.")})
    out["gru16_y"] = tq.quantize_dynamic(torch.nn.Sequential(gru), {torch.nn.GRU},
                                         **half)[0](t["lstm_x"])[0].detach().numpy()
    # dynamically quantized cells (qint8 and float16 weights); the RNNCell with relu
    for name, cls, kw in (("lstmcell", torch.nn.LSTMCell, {}), ("grucell", torch.nn.GRUCell, {}),
                          ("rnncell", torch.nn.RNNCell, {"nonlinearity": "relu"})):
        cell = cls(5, 6, **kw)
        cell.load_state_dict({k.split(".")[1]: t[k] for k in d if k.startswith(name + ".")})
        for tag, dt in (("q8", torch.qint8), ("f16", torch.float16)):
            q = tq.quantize_dynamic(torch.nn.Sequential(cell), dtype=dt)[0]
            hx = (t["cell_h"], t["cell_c"]) if name == "lstmcell" else t["cell_h"]
            y = q(t["cell_x"], hx)
            out[f"{name}_{tag}_y"] = (y[0] if name == "lstmcell" else y).detach().numpy()
    # embedding tables, 8-bit and 4-bit per-row float qparams (prepare / convert)
    for bits, qc in ((8, tq.float_qparams_weight_only_qconfig),
                     (4, tq.float_qparams_weight_only_qconfig_4bit)):
        emb = torch.nn.Sequential(torch.nn.Embedding(20, 12))
        emb[0].weight.data.copy_(t["emb_w"])
        emb[0].qconfig = qc
        qemb = tq.convert(tq.prepare(emb))[0]
        w = qemb.weight()
        out[f"emb{bits}_q"] = w.int_repr().numpy()
        out[f"emb{bits}_scale"] = w.q_per_channel_scales().numpy().astype(np.float32)
        out[f"emb{bits}_zp"] = w.q_per_channel_zero_points().numpy().astype(np.float32)
        if bits == 8:
            out["emb8_y"] = qemb(t["emb_ids"]).numpy()
        for mode in ("sum", "mean", "max"):
            bag = torch.nn.Sequential(torch.nn.EmbeddingBag(20, 12, mode=mode))
            bag[0].weight.data.copy_(t["emb_w"])
            bag[0].qconfig = qc
            qbag = tq.convert(tq.prepare(bag))[0]
            out[f"bag{bits}_{mode}_y"] = qbag(t["bag_ids"], t["bag_offsets"]).numpy()
            out[f"bag{bits}_{mode}_2d_y"] = qbag(t["emb_ids"]).numpy()
            if mode == "sum":
                out[f"bag{bits}_psw_y"] = qbag(t["bag_ids"], t["bag_offsets"],
                                               per_sample_weights=t["bag_psw"]).numpy()
                if bits == 4:
                    # PyTorch 2.13's 4-bit Embedding returns rows of width 2 (a bug): its rows
                    # come from the 4-bit EmbeddingBag kernel, one id per bag
                    out["emb4_y"] = qbag(t["emb_ids"].reshape(-1, 1)).numpy().reshape(3, 5, 12)
    # static Conv1d / Conv3d with folded batch norm and ReLU, x86 qconfig
    for nd in (1, 3):
        net = TorchConvNet(torch, t, nd).eval()
        net = tq.fuse_modules(net, [["conv", "bn", "relu"]])
        net.qconfig = tq.get_default_qconfig("x86")
        p = tq.prepare(net)
        for b in t[f"calib{nd}d"]:
            p(b)
        c = tq.convert(p)
        wq = c.conv.weight()
        out.update({f"conv{nd}d_w_q": wq.int_repr().numpy(),
                    f"conv{nd}d_w_scale": wq.q_per_channel_scales().numpy().astype(np.float32),
                    f"conv{nd}d_scale": np.float32(c.conv.scale),
                    f"conv{nd}d_zp": np.int32(c.conv.zero_point),
                    f"conv{nd}d_quant_scale": c.quant.scale.numpy(),
                    f"conv{nd}d_y": c(t[f"test{nd}d"]).detach().numpy()})
    # static: QuantStub, Conv+ReLU, Linear+ReLU, Linear, DeQuantStub
    for tag, qconfig in (("minmax", tq.QConfig(
            activation=tq.MinMaxObserver.with_args(reduce_range=True),
            weight=tq.default_per_channel_weight_observer)),
            ("x86", tq.get_default_qconfig("x86"))):
        net = TorchNet(torch, t).eval()
        net = tq.fuse_modules(net, [["conv", "relu"], ["fc", "relu2"]])
        net.qconfig = qconfig
        p = tq.prepare(net)
        for b in t["calib"]:
            p(b)
        c = tq.convert(p)
        out[f"{tag}_quant_scale"] = c.quant.scale.numpy()
        out[f"{tag}_quant_zp"] = c.quant.zero_point.numpy()
        for name in ("conv", "fc", "fc2"):
            m = getattr(c, name)
            out[f"{tag}_{name}_scale"] = np.float32(m.scale)
            out[f"{tag}_{name}_zp"] = np.int32(m.zero_point)
            wq = m.weight()
            out[f"{tag}_{name}_w"] = wq.int_repr().numpy()
            out[f"{tag}_{name}_w_scale"] = wq.q_per_channel_scales().numpy().astype(np.float32)
        out[f"{tag}_y"] = c(t["test_x"]).detach().numpy()
    # observers
    x = t["obs_x"]
    for name, obs in (("minmax", tq.MinMaxObserver()),
                      ("minmax_sym", tq.MinMaxObserver(dtype=torch.qint8,
                                                       qscheme=torch.per_tensor_symmetric)),
                      ("moving", tq.MovingAverageMinMaxObserver(averaging_constant=0.3)),
                      ("hist", tq.HistogramObserver()),
                      ("hist_rr", tq.HistogramObserver(reduce_range=True))):
        for chunk in (x[:1000], x[1000:]) if name == "moving" else (x,):
            obs(chunk)
        s, z = obs.calculate_qparams()
        out[f"obs_{name}_scale"] = s.numpy().astype(np.float32).reshape(-1)
        out[f"obs_{name}_zp"] = z.numpy().astype(np.int32).reshape(-1)
    pc = tq.PerChannelMinMaxObserver(dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
    pc(t["obs_w"])
    s, z = pc.calculate_qparams()
    out["obs_perchannel_scale"], out["obs_perchannel_zp"] = s.numpy(), z.numpy()
    return out


def TorchConvNet(torch, t, nd):
    import torch.ao.quantization as tq
    conv_cls = {1: torch.nn.Conv1d, 3: torch.nn.Conv3d}[nd]
    bn_cls = {1: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm3d}[nd]

    class ConvNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
            self.conv, self.bn, self.relu = conv_cls(2, 4, 3, padding=1), bn_cls(4), \
                torch.nn.ReLU()

        def forward(self, x):
            return self.dequant(self.relu(self.bn(self.conv(self.quant(x)))))
    net = ConvNet()
    g, b, m, v = t[f"bn{nd}d"]
    net.load_state_dict({"conv.weight": t[f"conv{nd}d_w"], "conv.bias": t[f"conv{nd}d_b"],
                         "bn.weight": g, "bn.bias": b, "bn.running_mean": m,
                         "bn.running_var": v, "bn.num_batches_tracked": torch.tensor(0)})
    return net


def TorchNet(torch, t):
    import torch.ao.quantization as tq

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
            self.conv, self.relu = torch.nn.Conv2d(1, 3, 3), torch.nn.ReLU()
            self.fc, self.relu2 = torch.nn.Linear(12, 6), torch.nn.ReLU()
            self.fc2 = torch.nn.Linear(6, 2)

        def forward(self, x):
            x = self.relu(self.conv(self.quant(x)))
            x = x.reshape(x.shape[0], -1)
            return self.dequant(self.fc2(self.relu2(self.fc(x))))
    net = Net()
    net.load_state_dict({"conv.weight": t["conv_w"], "conv.bias": t["conv_b"],
                         "fc.weight": t["fc_w"], "fc.bias": t["fc_b"],
                         "fc2.weight": t["fc2_w"], "fc2.bias": t["fc2_b"]})
    return net


if __name__ == "__main__":
    np.savez_compressed(STORED, **torch_results(inputs()))
    print("wrote", STORED)
