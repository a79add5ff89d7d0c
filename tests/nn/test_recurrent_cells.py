"""RNN/LSTM/GRU cells and LSTM projections against a NumPy reference (float64), and against
PyTorch with its weights loaded when torch is installed."""
import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn
import funcgrad.numpy as jnp


def _sig(z):
    return 1.0 / (1.0 + np.exp(-z))


def ref_lstm_cell(p, x, h, c, sfx=""):
    z = x @ p["weight_ih" + sfx].T + p["bias_ih" + sfx] + h @ p["weight_hh" + sfx].T \
        + p["bias_hh" + sfx]
    i, f, g, o = np.split(z, 4, axis=-1)
    c = _sig(f) * c + _sig(i) * np.tanh(g)
    h = _sig(o) * np.tanh(c)
    if "weight_hr" + sfx in p:
        h = h @ p["weight_hr" + sfx].T
    return h, c


def ref_gru_cell(p, x, h):
    xr, xz, xn = np.split(x @ p["weight_ih"].T + p["bias_ih"], 3, axis=-1)
    hr, hz, hn = np.split(h @ p["weight_hh"].T + p["bias_hh"], 3, axis=-1)
    r, z = _sig(xr + hr), _sig(xz + hz)
    n = np.tanh(xn + r * hn)
    return (1 - z) * n + z * h


def ref_lstm(p, x, num_layers, bidirectional, proj):
    """(seq, batch, in) -> out, (h_n, c_n) like torch.nn.LSTM."""
    dirs = 2 if bidirectional else 1
    hidden = p["weight_hh_l0"].shape[1] if not proj else p["weight_hr_l0"].shape[1]
    hs, cs = [], []
    inp = x
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            n_h = p["weight_hh" + sfx].shape[1]
            h = np.zeros((x.shape[1], n_h))
            c = np.zeros((x.shape[1], hidden))
            ys = [None] * x.shape[0]
            steps = range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])
            for t in steps:
                h, c = ref_lstm_cell(p, inp[t], h, c, sfx)
                ys[t] = h
            hs.append(h)
            cs.append(c)
            outs.append(np.stack(ys))
        inp = np.concatenate(outs, -1)
    return inp, (np.stack(hs), np.stack(cs))


def _params(module):
    return {k: np.asarray(v) for k, v in module.state_dict().items()}


def test_cells_match_numpy(x64, rng):
    x = rng.standard_normal((3, 5))
    h = rng.standard_normal((3, 4))
    c = rng.standard_normal((3, 4))
    cell = nn.LSTMCell(5, 4, dtype="float64")
    got_h, got_c = cell(jnp.asarray(x), (jnp.asarray(h), jnp.asarray(c)))
    want_h, want_c = ref_lstm_cell(_params(cell), x, h, c)
    np.testing.assert_allclose(np.asarray(got_h), want_h, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(got_c), want_c, rtol=1e-12, atol=1e-14)
    gru = nn.GRUCell(5, 4, dtype="float64")
    np.testing.assert_allclose(np.asarray(gru(jnp.asarray(x), jnp.asarray(h))),
                               ref_gru_cell(_params(gru), x, h), rtol=1e-12, atol=1e-14)
    for act, fn in (("tanh", np.tanh), ("relu", lambda z: np.maximum(z, 0))):
        rnn = nn.RNNCell(5, 4, nonlinearity=act, dtype="float64")
        p = _params(rnn)
        want = fn(x @ p["weight_ih"].T + p["bias_ih"] + h @ p["weight_hh"].T + p["bias_hh"])
        np.testing.assert_allclose(np.asarray(rnn(jnp.asarray(x), jnp.asarray(h))), want,
                                   rtol=1e-12, atol=1e-14)
    # default zero state
    np.testing.assert_allclose(np.asarray(cell(jnp.asarray(x))[0]),
                               ref_lstm_cell(_params(cell), x, 0 * h, 0 * c)[0], rtol=1e-12)


@pytest.mark.parametrize("num_layers,bidirectional", [(1, False), (2, True)])
def test_lstm_projection_matches_numpy_and_grads(num_layers, bidirectional, x64, rng):
    lstm = nn.LSTM(5, 6, num_layers=num_layers, bidirectional=bidirectional, proj_size=3,
                   dtype="float64")
    p = _params(lstm)
    dirs = 2 if bidirectional else 1
    assert p["weight_hr_l0"].shape == (3, 6) and p["weight_hh_l0"].shape == (24, 3)
    if num_layers > 1:
        assert p["weight_ih_l1"].shape == (24, 3 * dirs)
    x = rng.standard_normal((4, 2, 5))
    out, (h_n, c_n) = lstm(jnp.asarray(x))
    want, (wh, wc) = ref_lstm(p, x, num_layers, bidirectional, proj=True)
    assert out.shape == (4, 2, 3 * dirs) and h_n.shape == (num_layers * dirs, 2, 3)
    assert c_n.shape == (num_layers * dirs, 2, 6)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(h_n), wh, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(c_n), wc, rtol=1e-10, atol=1e-12)
    # jit == eager, and the gradient of the projection weight against central differences
    jitted = funcgrad.jit(lambda m, x: m(x)[0])(lstm, jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(out), rtol=1e-12)

    def loss(w_hr):
        q = dict(p, weight_hr_l0=w_hr)
        return float(np.sum(np.sin(ref_lstm(q, x, num_layers, bidirectional, True)[0])))
    grads = funcgrad.grad(lambda m: jnp.sum(jnp.sin(m(jnp.asarray(x))[0])))(lstm)
    g = np.asarray(grads.weight_hr_l0)
    eps = 1e-6
    for idx in [(0, 0), (1, 4), (2, 5)]:
        d = np.zeros_like(p["weight_hr_l0"])
        d[idx] = eps
        fd = (loss(p["weight_hr_l0"] + d) - loss(p["weight_hr_l0"] - d)) / (2 * eps)
        np.testing.assert_allclose(g[idx], fd, rtol=1e-6, atol=1e-9)


def test_projection_errors_and_repr():
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(4, 3, proj_size=3)
    assert "proj_size=2" in repr(nn.LSTM(4, 3, proj_size=2))


def test_lstm_projection_and_cells_match_pytorch(x64, rng):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    t_lstm = torch.nn.LSTM(5, 6, num_layers=2, bidirectional=True, proj_size=3,
                           batch_first=True).double()
    f_lstm = nn.LSTM(5, 6, num_layers=2, bidirectional=True, proj_size=3, batch_first=True,
                     dtype="float64")
    sd = {k: v.detach().numpy() for k, v in t_lstm.state_dict().items()}
    assert list(sd) == list(f_lstm.state_dict())
    f_lstm.load_state_dict(sd)
    x = rng.standard_normal((2, 4, 5))
    t_out, (t_h, t_c) = t_lstm(torch.tensor(x))
    f_out, (f_h, f_c) = f_lstm(jnp.asarray(x))
    for a, b in ((f_out, t_out), (f_h, t_h), (f_c, t_c)):
        np.testing.assert_allclose(np.asarray(a), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    for f_cls, t_cls, state in ((nn.LSTMCell, torch.nn.LSTMCell, 2), (nn.GRUCell,
                                torch.nn.GRUCell, 1), (nn.RNNCell, torch.nn.RNNCell, 1)):
        t_cell = t_cls(5, 4).double()
        f_cell = f_cls(5, 4, dtype="float64")
        f_cell.load_state_dict({k: v.detach().numpy() for k, v in t_cell.state_dict().items()})
        xs = rng.standard_normal((3, 5))
        hs = [rng.standard_normal((3, 4)) for _ in range(state)]
        t_res = t_cell(torch.tensor(xs), tuple(map(torch.tensor, hs)) if state == 2
                       else torch.tensor(hs[0]))
        f_res = f_cell(jnp.asarray(xs), tuple(map(jnp.asarray, hs)) if state == 2
                       else jnp.asarray(hs[0]))
        t_res = t_res if isinstance(t_res, tuple) else (t_res,)
        f_res = f_res if isinstance(f_res, tuple) else (f_res,)
        for a, b in zip(f_res, t_res):
            np.testing.assert_allclose(np.asarray(a), b.detach().numpy(), rtol=1e-10,
                                       atol=1e-12)
