"""``nn.MultiheadAttention`` options against PyTorch: ``kdim``/``vdim`` (separate
``q/k/v_proj_weight``), ``add_bias_kv``, ``add_zero_attn``, ``bias=False``, bool and float
``attn_mask`` (2-D and 3-D) and ``key_padding_mask``, ``is_causal``, ``batch_first``,
unbatched inputs, ``need_weights``/``average_attn_weights``.

Both modules hold the same random weights (a state dict with PyTorch's keys). References:
tests/nn/data/mha_options.npz (made with PyTorch by running this file as a script) always;
PyTorch live when it is importable (outputs, weights, and gradients for one configuration).
"""
import os

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
import funcgrad.nn as nn

pytestmark = pytest.mark.filterwarnings(
    "ignore:Support for mismatched key_padding_mask and attn_mask:UserWarning")

DATA = os.path.join(os.path.dirname(__file__), "data", "mha_options.npz")
E, H = 8, 2

# (name, constructor kwargs, forward options); masks are made by _inputs from these names.
CONFIGS = [
    ("plain", dict(), dict()),
    ("kvdim_bf", dict(kdim=5, vdim=3, batch_first=True),
     dict(kpm="bool", attn_mask="float2", average_attn_weights=False)),
    ("biaskv_zero", dict(kdim=5, vdim=3, add_bias_kv=True, add_zero_attn=True),
     dict(kpm="float", attn_mask="bool3")),
    ("nobias_biaskv_unbatched", dict(bias=False, add_bias_kv=True),
     dict(unbatched=True, kpm="bool", attn_mask="float3", average_attn_weights=False)),
    ("zero_attn_bool2_bf", dict(add_zero_attn=True, batch_first=True),
     dict(attn_mask="bool2", kpm="bool")),
    ("causal", dict(kdim=6), dict(attn_mask="causal", is_causal=True)),
    ("no_weights", dict(add_bias_kv=True, vdim=4),
     dict(attn_mask="float2", kpm="bool", need_weights=False)),
]
STATE_KEYS = {
    "plain": ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"],
    "kvdim_bf": ["q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                 "out_proj.weight", "out_proj.bias"],
    "biaskv_zero": ["q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                    "bias_k", "bias_v", "out_proj.weight", "out_proj.bias"],
    "nobias_biaskv_unbatched": ["in_proj_weight", "bias_k", "bias_v", "out_proj.weight"],
}


def _inputs(ctor, opts, dtype=np.float64, seed=0):
    """Weights (PyTorch's keys), inputs and masks as NumPy arrays, plus forward kwargs."""
    rng = np.random.default_rng(seed)
    kdim, vdim = ctor.get("kdim", E), ctor.get("vdim", E)
    bias = ctor.get("bias", True)
    sd = {}
    if kdim == E and vdim == E:
        sd["in_proj_weight"] = rng.normal(0, 0.4, (3 * E, E))
    else:
        sd["q_proj_weight"] = rng.normal(0, 0.4, (E, E))
        sd["k_proj_weight"] = rng.normal(0, 0.4, (E, kdim))
        sd["v_proj_weight"] = rng.normal(0, 0.4, (E, vdim))
    if bias:
        sd["in_proj_bias"] = rng.normal(0, 0.2, (3 * E,))
    if ctor.get("add_bias_kv"):
        sd["bias_k"] = rng.normal(0, 0.4, (1, 1, E))
        sd["bias_v"] = rng.normal(0, 0.4, (1, 1, E))
    sd["out_proj.weight"] = rng.normal(0, 0.4, (E, E))
    if bias:
        sd["out_proj.bias"] = rng.normal(0, 0.2, (E,))
    sd = {k: v.astype(dtype) for k, v in sd.items()}

    L, S, N = 4, 6, 3
    unbatched = opts.get("unbatched", False)
    bf = ctor.get("batch_first", False)

    def shaped(T, d):
        if unbatched:
            return (T, d)
        return (N, T, d) if bf else (T, N, d)
    q = rng.normal(0, 1, shaped(L, E)).astype(dtype)
    k = rng.normal(0, 1, shaped(S, kdim)).astype(dtype)
    v = rng.normal(0, 1, shaped(S, vdim)).astype(dtype)
    kw = {}
    n_b = 1 if unbatched else N
    if opts.get("kpm"):
        pad = np.zeros((n_b, S), bool)
        pad[0, 4:] = True                       # first sequence has 4 valid keys
        if n_b > 1:
            pad[1, 5:] = True
        if opts["kpm"] == "float":
            pad = np.where(pad, -np.inf, rng.normal(0, 0.5, pad.shape)).astype(dtype)
        kw["key_padding_mask"] = pad[0] if unbatched else pad
    am = opts.get("attn_mask")
    lead = H if unbatched else N * H
    if am == "float2":
        kw["attn_mask"] = rng.normal(0, 1, (L, S)).astype(dtype)
    elif am == "float3":
        kw["attn_mask"] = rng.normal(0, 1, (lead, L, S)).astype(dtype)
    elif am == "bool2":
        m = rng.uniform(size=(L, S)) < 0.4
        m[:, 0] = False                         # every query keeps one key
        kw["attn_mask"] = m
    elif am == "bool3":
        m = rng.uniform(size=(lead, L, S)) < 0.4
        m[:, :, 0] = False
        kw["attn_mask"] = m
    elif am == "causal":
        kw["attn_mask"] = np.triu(np.ones((L, S), bool), 1)
    for name in ("need_weights", "average_attn_weights", "is_causal"):
        if name in opts:
            kw[name] = opts[name]
    return sd, (q, k, v), kw


def _fg_module(ctor, sd, dtype="float64"):
    m = nn.MultiheadAttention(E, H, dtype=dtype, **ctor)
    m.load_state_dict(sd)
    return m


def _torch_module(torch, ctor, sd, double=True):
    m = torch.nn.MultiheadAttention(E, H, **ctor)
    m = m.double() if double else m.float()
    m.load_state_dict({k: torch.tensor(v) for k, v in sd.items()})
    return m        # left in training mode (dropout 0): PyTorch's fused eval fast path is off


def _torch_forward(torch, m, qkv, kw):
    targs = [torch.tensor(a) for a in qkv]
    tkw = {k: (torch.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    out, w = m(*targs, **tkw)
    return out.detach().numpy(), (None if w is None else w.detach().numpy())


def _close(got, want, rtol, atol, what):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=atol, err_msg=what)


def _make_reference():
    """Outputs and weights of PyTorch for every configuration (float64)."""
    import torch
    ref = {}
    for name, ctor, opts in CONFIGS:
        sd, qkv, kw = _inputs(ctor, opts)
        out, w = _torch_forward(torch, _torch_module(torch, ctor, sd), qkv, kw)
        ref[f"{name}/out"] = out
        if w is not None:
            ref[f"{name}/weights"] = w
    return ref


# --- structure -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(STATE_KEYS))
def test_state_dict_keys_and_shapes(name):
    ctor = next(c for n, c, _ in CONFIGS if n == name)
    m = nn.MultiheadAttention(E, H, **ctor)
    assert list(m.state_dict()) == STATE_KEYS[name]
    assert [n for n, _ in m.named_parameters()] == STATE_KEYS[name]
    kdim, vdim = ctor.get("kdim", E), ctor.get("vdim", E)
    assert m._qkv_same_embed_dim == (kdim == E and vdim == E)
    assert (m.kdim, m.vdim) == (kdim, vdim)
    if not m._qkv_same_embed_dim:
        assert m.in_proj_weight is None
        assert m.k_proj_weight.shape == (E, kdim) and m.v_proj_weight.shape == (E, vdim)
    else:
        assert m.q_proj_weight is None and m.in_proj_weight.shape == (3 * E, E)
    if ctor.get("add_bias_kv"):
        assert m.bias_k.shape == m.bias_v.shape == (1, 1, E)
        assert np.asarray(m.bias_k).std() > 0          # xavier-normal, not zeros
    else:
        assert m.bias_k is None and m.bias_v is None


def test_state_dict_matches_torch():
    torch = pytest.importorskip("torch")
    for _, ctor, _ in CONFIGS:
        t = torch.nn.MultiheadAttention(E, H, **ctor)
        f = nn.MultiheadAttention(E, H, **ctor)
        assert [(k, tuple(v.shape)) for k, v in t.state_dict().items()] == \
            [(k, tuple(v.shape)) for k, v in f.state_dict().items()]
        assert [n for n, _ in t.named_parameters()] == [n for n, _ in f.named_parameters()]


# --- values ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stored():
    with np.load(DATA) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize("name,ctor,opts", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_matches_stored_torch_reference(name, ctor, opts, stored, x64):
    sd, qkv, kw = _inputs(ctor, opts)
    out, w = _fg_module(ctor, sd)(*qkv, **kw)
    _close(out, stored[f"{name}/out"], 1e-5, 1e-9, f"{name}: output")
    if kw.get("need_weights", True):
        _close(w, stored[f"{name}/weights"], 1e-5, 1e-9, f"{name}: weights")
    else:
        assert w is None and f"{name}/weights" not in stored


@pytest.mark.parametrize("name,ctor,opts", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_matches_live_torch_float64(name, ctor, opts, stored, x64):
    torch = pytest.importorskip("torch")
    sd, qkv, kw = _inputs(ctor, opts)
    want_out, want_w = _torch_forward(torch, _torch_module(torch, ctor, sd), qkv, kw)
    # the stored reference is up to date
    _close(stored[f"{name}/out"], want_out, 1e-12, 1e-14, f"{name}: stale fixture")
    out, w = _fg_module(ctor, sd)(*qkv, **kw)
    _close(out, want_out, 1e-5, 1e-9, f"{name}: output")
    if want_w is None:
        assert w is None
    else:
        assert w.shape == want_w.shape
        _close(w, want_w, 1e-5, 1e-9, f"{name}: weights")


@pytest.mark.parametrize("name", ["kvdim_bf", "biaskv_zero"])
def test_matches_live_torch_float32(name):
    torch = pytest.importorskip("torch")
    ctor, opts = next((c, o) for n, c, o in CONFIGS if n == name)
    sd, qkv, kw = _inputs(ctor, opts, dtype=np.float32)
    want_out, want_w = _torch_forward(torch, _torch_module(torch, ctor, sd, double=False),
                                      qkv, kw)
    out, w = _fg_module(ctor, sd, "float32")(*qkv, **kw)
    assert out.dtype == jnp.float32 and w.dtype == jnp.float32
    # float32 rounding of different summation orders: observed errors <= 2.4e-7 on values ~1
    _close(out, want_out, 1e-5, 1e-6, f"{name}: float32 output")
    _close(w, want_w, 1e-5, 1e-6, f"{name}: float32 weights")


def test_gradients_match_torch(x64):
    """d/d(params, q, k, v) of sum(out * r1) + sum(weights * r2) for kdim/vdim, bias_kv,
    zero attention, a 3-D bool mask and a float padding mask."""
    torch = pytest.importorskip("torch")
    name, ctor, opts = CONFIGS[2]
    sd, qkv, kw = _inputs(ctor, opts)
    rng = np.random.default_rng(9)
    tm = _torch_module(torch, ctor, sd)
    targs = [torch.tensor(a, requires_grad=True) for a in qkv]
    tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    tout, tw = tm(*targs, **tkw)
    r1, r2 = rng.normal(size=tuple(tout.shape)), rng.normal(size=tuple(tw.shape))
    (torch.sum(tout * torch.tensor(r1)) + torch.sum(tw * torch.tensor(r2))).backward()

    fm = _fg_module(ctor, sd)

    def loss(m, q, k, v):
        out, w = m(q, k, v, **kw)
        return jnp.sum(out * r1) + jnp.sum(w * r2)
    gm, gq, gk, gv = funcgrad.grad(loss, argnums=(0, 1, 2, 3))(fm, *qkv)
    got = gm.state_dict()
    for pname, p in tm.named_parameters():
        _close(got[pname], p.grad.numpy(), 1e-5, 1e-9, f"gradient of {pname}")
    for g, t, what in zip((gq, gk, gv), targs, "qkv"):
        _close(g, t.grad.numpy(), 1e-5, 1e-9, f"gradient of {what}")


def test_transformer_encoder_with_masks_matches_torch(x64):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tl = torch.nn.TransformerEncoderLayer(E, H, dim_feedforward=16, dropout=0.0,
                                          batch_first=True, norm_first=True)
    tenc = torch.nn.TransformerEncoder(tl, 2, enable_nested_tensor=False).double()
    fenc = nn.TransformerEncoder(nn.TransformerEncoderLayer(
        E, H, dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=True), 2)
    fenc.load_state_dict(tenc.state_dict())
    fenc.double()
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 5, E))
    kpm = np.zeros((3, 5), bool)
    kpm[0, 3:] = True
    causal = np.triu(np.ones((5, 5), bool), 1)
    want = tenc(torch.tensor(x), mask=torch.tensor(causal),
                src_key_padding_mask=torch.tensor(kpm), is_causal=True).detach().numpy()
    got = fenc(x, mask=causal, src_key_padding_mask=kpm, is_causal=True)
    _close(got, want, 1e-5, 1e-9, "TransformerEncoder with causal and padding masks")


# --- behaviour without PyTorch ---------------------------------------------------------------
def test_jit_matches_eager_with_traced_masks(x64):
    ctor, opts = CONFIGS[2][1], CONFIGS[2][2]
    sd, qkv, kw = _inputs(ctor, opts)
    m = _fg_module(ctor, sd)
    eager = m(*qkv, **kw)
    f = funcgrad.jit(lambda m, q, k, v, kpm, am: m(q, k, v, key_padding_mask=kpm,
                                                    attn_mask=am))
    jitted = f(m, *qkv, kw["key_padding_mask"], kw["attn_mask"])
    for a, b in zip(jitted, eager):
        _close(a, b, 1e-12, 1e-14, "jit vs eager")


def test_is_causal_without_mask_builds_the_causal_mask(x64):
    ctor = dict(kdim=6)
    sd, qkv, kw = _inputs(ctor, dict(attn_mask="causal"))
    m = _fg_module(ctor, sd)
    out_mask, w_mask = m(*qkv, **kw)
    out_flag, w_flag = m(*qkv, is_causal=True)
    _close(out_flag, out_mask, 1e-14, 1e-14, "is_causal output")
    _close(w_flag, w_mask, 1e-14, 1e-14, "is_causal weights")
    w = np.asarray(w_flag)                       # (N, L, S): no weight above the diagonal
    assert np.all(np.triu(np.ones((4, 6), bool), 1)[None] <= (w == 0))


def test_masks_and_extra_key_columns(x64):
    """Closed form (NumPy): masked keys get weight 0, rows sum to 1, the bias_k column and the
    zero-attention column (score 0) are never masked, and all weights equal a NumPy softmax."""
    ctor = dict(add_bias_kv=True, add_zero_attn=True)
    sd, qkv, kw = _inputs(ctor, dict(kpm="bool", attn_mask="bool3"))
    m = _fg_module(ctor, sd)
    _, w = m(*qkv, **kw, average_attn_weights=False)
    w = np.asarray(w)                               # (N, H, L, S + 2)
    assert w.shape == (3, H, 4, 8)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-12)
    kpm = kw["key_padding_mask"]
    am = kw["attn_mask"].reshape(3, H, 4, 6)
    masked = am | kpm[:, None, None, :]
    assert np.all(w[..., :6][masked] == 0) and np.all(w[..., :6][~masked] > 0)
    assert np.all(w[..., 6:] > 0)
    # the zero-attention column has a zero key, so its score is 0: exp(0) / sum(exp(scores))
    q = np.asarray(qkv[0], np.float64)              # (L, N, E) sequence-first
    wq, _, _ = np.split(sd["in_proj_weight"], 3)
    bq = np.split(sd["in_proj_bias"], 3)[0]
    wk = np.split(sd["in_proj_weight"], 3)[1]
    bk = np.split(sd["in_proj_bias"], 3)[1]
    qh = (q @ wq.T + bq).reshape(4, 3, H, E // H).transpose(1, 2, 0, 3) / np.sqrt(E // H)
    kb = (sd["bias_k"][0, 0]).reshape(H, E // H)
    k = np.asarray(qkv[1], np.float64)
    kh = (k @ wk.T + bk).reshape(6, 3, H, E // H).transpose(1, 2, 0, 3)
    scores = np.concatenate([qh @ kh.swapaxes(-1, -2),
                             np.einsum("nhld,hd->nhl", qh, kb)[..., None],
                             np.zeros((3, H, 4, 1))], -1)
    scores[..., :6][masked] = -np.inf
    ref = np.exp(scores - scores.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    np.testing.assert_allclose(w, ref, rtol=1e-10, atol=1e-14)


def test_unbatched_equals_batch_of_one(x64):
    ctor = dict(kdim=5, vdim=3, add_zero_attn=True)
    sd, (q, k, v), _ = _inputs(ctor, dict(unbatched=True))
    m = _fg_module(ctor, sd)
    am = np.random.default_rng(3).normal(size=(H, 4, 6))
    kpm = np.array([False, False, True, False, False, True])
    out, w = m(q, k, v, attn_mask=am, key_padding_mask=kpm, average_attn_weights=False)
    outb, wb = m(q[:, None], k[:, None], v[:, None], attn_mask=am,
                 key_padding_mask=kpm[None], average_attn_weights=False)
    assert out.shape == (4, E) and w.shape == (H, 4, 7)
    _close(out, np.asarray(outb)[:, 0], 1e-13, 1e-14, "unbatched output")
    _close(w, np.asarray(wb)[0], 1e-13, 1e-14, "unbatched weights")


def test_vmap_over_unbatched_inputs_equals_batched_call(x64):
    """vmap over (L, E) examples with per-example padding masks = one batch_first call."""
    ctor = dict(kdim=5, vdim=3, add_bias_kv=True, add_zero_attn=True, batch_first=True)
    sd, (q, k, v), kw = _inputs(ctor, dict(kpm="bool", attn_mask="float2"))
    m = _fg_module(ctor, sd)
    out, w = m(q, k, v, **kw)
    am = kw["attn_mask"]
    vout, vw = funcgrad.vmap(
        lambda q, k, v, kpm: m(q, k, v, key_padding_mask=kpm, attn_mask=am))(
            q, k, v, kw["key_padding_mask"])
    _close(vout, out, 1e-12, 1e-14, "vmap output")
    _close(vw, w, 1e-12, 1e-14, "vmap weights")


def test_attention_dropout_training_and_eval():
    m = nn.MultiheadAttention(E, H, dropout=0.5, batch_first=True)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(2, 16, E)).astype("float32"))
    _, w = m(x, x, x, average_attn_weights=False)
    w = np.asarray(w)
    assert 0.3 < (w == 0).mean() < 0.7             # dropped weights; kept ones scaled by 2
    m.eval()
    _, w = m(x, x, x, average_attn_weights=False)
    np.testing.assert_allclose(np.asarray(w).sum(-1), 1.0, rtol=1e-5)


def test_errors_name_the_shapes():
    m = nn.MultiheadAttention(E, H, kdim=5)
    q, k = jnp.ones((4, 2, E)), jnp.ones((6, 2, 5))
    with pytest.raises(ValueError, match=r"kdim=5.*\(6, 2, 8\)"):
        m(q, jnp.ones((6, 2, E)), jnp.ones((6, 2, E)))
    with pytest.raises(ValueError, match=r"attn_mask must be \(4, 6\) or \(4, 4, 6\).*\(4, 5\)"):
        m(q, k, jnp.ones((6, 2, E)), attn_mask=jnp.zeros((4, 5)))
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(2, 6\)"):
        m(q, k, jnp.ones((6, 2, E)), key_padding_mask=jnp.zeros((6, 2), bool))
    with pytest.raises(TypeError, match="bool or floating.*int32"):
        m(q, k, jnp.ones((6, 2, E)), attn_mask=jnp.zeros((4, 6), "int32"))
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(10, 3)


if __name__ == "__main__":
    ref = _make_reference()
    np.savez_compressed(DATA, **ref)
    print(f"wrote {DATA}: {len(ref)} arrays")
