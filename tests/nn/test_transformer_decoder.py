"""``nn.TransformerDecoderLayer``, ``nn.TransformerDecoder`` and ``nn.Transformer`` against
PyTorch: the funcgrad modules load PyTorch's ``state_dict`` and must reproduce its outputs
(with causal, float and key-padding masks, in training mode with dropout 0 and in eval mode)
and the gradients of a loss with respect to every parameter.

References: tests/nn/data/transformer_ref.npz (made with PyTorch by running this file as a
script) always, and PyTorch live when it is importable. Without PyTorch the structural
properties are checked too: causality, ignored padded memory, ``tgt_is_causal``, unbatched
inputs, jit against eager, independent layer copies.
"""
import os

import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp

pytestmark = pytest.mark.filterwarnings(
    "ignore:Support for mismatched:UserWarning",
    "ignore:enable_nested_tensor is True:UserWarning")

DATA = os.path.join(os.path.dirname(__file__), "data", "transformer_ref.npz")
E, H, FF, T, S, N = 8, 2, 16, 5, 6, 3

# name -> (kind, constructor kwargs, mask names used in forward)
CONFIGS = {
    "decoder_post_relu": ("decoder", dict(norm_first=False, activation="relu"),
                          ("tgt_causal_bool", "memory_float", "tgt_kpm", "memory_kpm")),
    "decoder_pre_gelu_bf_nobias": ("decoder", dict(norm_first=True, activation="gelu",
                                                   batch_first=True, bias=False),
                                   ("tgt_causal_float", "memory_kpm")),
    "transformer_bf": ("transformer", dict(batch_first=True),
                       ("src_float", "tgt_causal_float", "src_kpm", "tgt_kpm", "memory_kpm")),
}


def _inputs(name, seed=0):
    """Inputs and masks (NumPy, float64) for a configuration, and the forward kwargs."""
    kind, ctor, masks = CONFIGS[name]
    rng = np.random.default_rng(seed)
    bf = ctor.get("batch_first", False)
    tgt = rng.normal(size=(N, T, E) if bf else (T, N, E))
    mem = rng.normal(size=(N, S, E) if bf else (S, N, E))
    kpm_t = np.zeros((N, T), bool)
    kpm_t[1, 3:] = True
    kpm_m = np.zeros((N, S), bool)
    kpm_m[0, 4:] = True
    kpm_m[2, 1] = True
    all_masks = {
        "tgt_causal_bool": ("tgt_mask", np.triu(np.ones((T, T), bool), 1)),
        "tgt_causal_float": ("tgt_mask", np.where(np.triu(np.ones((T, T), bool), 1),
                                                  -np.inf, 0.0)),
        "memory_float": ("memory_mask", rng.normal(size=(T, S))),
        "src_float": ("src_mask", rng.normal(size=(S, S))),
        "tgt_kpm": ("tgt_key_padding_mask", kpm_t),
        "memory_kpm": ("memory_key_padding_mask", kpm_m),
        "src_kpm": ("src_key_padding_mask", kpm_m),
    }
    kw = dict(all_masks[m] for m in masks)
    if kind == "transformer":
        return (mem, tgt), kw        # src, tgt
    return (tgt, mem), kw


def _build(lib, name):
    kind, ctor, _ = CONFIGS[name]
    if kind == "decoder":
        layer = lib.TransformerDecoderLayer(E, H, dim_feedforward=FF, dropout=0.0, **ctor)
        norm = lib.LayerNorm(E, bias=ctor.get("bias", True))
        return lib.TransformerDecoder(layer, 2, norm=norm)
    return lib.Transformer(E, H, 2, 2, dim_feedforward=FF, dropout=0.0, **ctor)


def _torch_reference(torch, name, seed=0):
    """PyTorch's state dict, output (train mode, dropout 0) and parameter gradients of
    sum(out * r), and its eval-mode output, in float64."""
    torch.manual_seed(seed)
    m = _build(torch.nn, name).double()
    args, kw = _inputs(name)
    targs = [torch.tensor(a) for a in args]
    tkw = {k: torch.tensor(v) for k, v in kw.items()}
    out = m(*targs, **tkw)
    r = np.random.default_rng(seed + 1).normal(size=tuple(out.shape))
    torch.sum(out * torch.tensor(r)).backward()
    ref = {"out": out.detach().numpy(), "r": r}
    for k, v in m.state_dict().items():
        ref[f"sd/{k}"] = v.numpy().copy()
    for k, p in m.named_parameters():
        ref[f"grad/{k}"] = p.grad.numpy().copy()
    m.eval()
    ref["eval_out"] = m(*targs, **tkw).detach().numpy()
    return ref


def _stored(name):
    with np.load(DATA) as z:
        return {k[len(name) + 1:]: z[k] for k in z.files if k.startswith(name + "/")}


def _fg_module(name, ref, dtype="float64"):
    m = _build(nn, name)
    if dtype == "float64":
        m.double()
    m.load_state_dict({k[3:]: v.astype(dtype) for k, v in ref.items() if k.startswith("sd/")})
    return m


def _close(got, want, rtol, atol, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def _check_against(ref, name, rtol=1e-9, atol=1e-11):
    m = _fg_module(name, ref)
    args, kw = _inputs(name)
    r = ref["r"]

    def loss(mod):
        out = mod(*args, **kw)
        return jnp.sum(out * r), out
    gm, out = funcgrad.grad(loss, has_aux=True)(m)
    _close(out, ref["out"], rtol, atol, f"{name}: output (training mode, dropout 0)")
    grads = gm.state_dict()
    names = [k[5:] for k in ref if k.startswith("grad/")]
    assert sorted(names) == sorted(grads)
    for k in names:
        _close(grads[k], ref[f"grad/{k}"], rtol, atol, f"{name}: gradient of {k}")
    m.eval()
    _close(m(*args, **kw), ref["eval_out"], rtol, atol, f"{name}: eval-mode output")


@pytest.mark.parametrize("name", list(CONFIGS))
def test_matches_stored_torch_reference(name, x64):
    _check_against(_stored(name), name)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_matches_live_torch_float64(name, x64):
    torch = pytest.importorskip("torch")
    _check_against(_torch_reference(torch, name, seed=3), name)


def test_matches_live_torch_float32_and_callable_activation():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tl = torch.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0,
                                          activation=torch.nn.functional.silu)
    fl = nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, activation=F.silu)
    fl.load_state_dict(tl.state_dict())
    args, kw = _inputs("decoder_post_relu", seed=4)
    args = [a.astype(np.float32) for a in args]
    kw = {k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in kw.items()}
    want = tl(*map(torch.tensor, args), **{k: torch.tensor(v) for k, v in kw.items()})
    got = fl(*map(jnp.asarray, args), **kw)
    assert got.dtype == jnp.float32
    _close(got, want.detach().numpy(), 1e-5, 1e-5, "float32 decoder layer with silu")


def test_state_dict_keys_are_pytorchs():
    keys = list(nn.TransformerDecoderLayer(E, H, FF).state_dict())
    attn = ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    assert keys == ([f"self_attn.{k}" for k in attn] + [f"multihead_attn.{k}" for k in attn]
                    + ["linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"]
                    + [f"norm{i}.{p}" for i in (1, 2, 3) for p in ("weight", "bias")])
    t = nn.Transformer(E, H, 1, 2, FF)
    sd = t.state_dict()
    assert "decoder.layers.1.multihead_attn.in_proj_weight" in sd and "encoder.norm.bias" in sd
    assert len(sd) == 1 * 12 + 2 * 18 + 2 * 2          # layers and the two final LayerNorms
    # Transformer re-draws every matrix xavier-uniform, so its layer copies differ
    w0, w1 = (np.asarray(t.decoder.layers[i].linear1.weight) for i in (0, 1))
    assert np.abs(w0).max() <= np.sqrt(6 / (E + FF)) and not np.array_equal(w0, w1)


def test_stacked_layers_are_independent_copies():
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF), 2)
    p0, p1 = (dec.layers[i].linear1.get_parameter("weight") for i in (0, 1))
    assert p0 is not p1
    np.testing.assert_array_equal(np.asarray(p0.data), np.asarray(p1.data))
    p0.data = p0.data * 2.0
    assert not np.array_equal(np.asarray(p0.data), np.asarray(p1.data))
    assert len(list(dec.parameters())) == 2 * 18


def test_generate_square_subsequent_mask():
    m = np.asarray(nn.Transformer.generate_square_subsequent_mask(4))
    assert m.dtype == np.float32
    np.testing.assert_array_equal(m, np.where(np.triu(np.ones((4, 4)), 1) > 0, -np.inf, 0.0))


def _fixed_decoder(name="decoder_post_relu"):
    ref = _stored(name)
    return _fg_module(name, ref)


def test_causal_mask_makes_positions_ignore_the_future(x64):
    m = _fixed_decoder()
    (tgt, mem), kw = _inputs("decoder_post_relu")
    out = np.asarray(m(tgt, mem, **kw))
    for i in range(T - 1):
        changed = tgt.copy()
        changed[i + 1:] += 10.0
        out2 = np.asarray(m(changed, mem, **kw))
        np.testing.assert_allclose(out2[:i + 1], out[:i + 1], rtol=1e-12, atol=1e-12)
        assert np.abs(out2[i + 1:] - out[i + 1:]).max() > 1e-3
    # padded memory positions are never read
    mem2 = mem.copy()
    mem2[4:, 0] += 5.0
    mem2[1, 2] -= 5.0
    np.testing.assert_allclose(np.asarray(m(tgt, mem2, **kw)), out, rtol=1e-12, atol=1e-12)


def test_tgt_is_causal_builds_the_mask_and_unbatched_inputs(x64):
    m = _fixed_decoder()
    (tgt, mem), kw = _inputs("decoder_post_relu")
    plain = {k: v for k, v in kw.items() if k == "memory_mask"}
    with_mask = m(tgt, mem, tgt_mask=kw["tgt_mask"], **plain)
    _close(m(tgt, mem, tgt_is_causal=True, **plain), with_mask, 1e-14, 1e-14, "tgt_is_causal")
    one = m(tgt[:, 1], mem[:, 1], tgt_mask=kw["tgt_mask"], **plain)
    _close(one, np.asarray(with_mask)[:, 1], 1e-12, 1e-12, "unbatched")


def test_jit_matches_eager_with_traced_masks(x64):
    name = "transformer_bf"
    m = _fg_module(name, _stored(name))
    (src, tgt), kw = _inputs(name)
    eager = m(src, tgt, **kw)
    f = funcgrad.jit(lambda mod, s, t, masks: mod(s, t, **masks))
    _close(f(m, src, tgt, kw), eager, 1e-12, 1e-12, "jit vs eager")
    # value_and_grad under jit
    r = _stored(name)["r"]
    g_eager = funcgrad.grad(lambda mod: jnp.sum(mod(src, tgt, **kw) * r))(m).state_dict()
    g_jit = funcgrad.jit(funcgrad.grad(lambda mod, masks: jnp.sum(mod(src, tgt, **masks) * r)))(
        m, kw).state_dict()
    for k in g_eager:
        _close(g_jit[k], g_eager[k], 1e-10, 1e-12, f"jit gradient of {k}")


def test_dropout_in_training_mode_only():
    layer = nn.TransformerDecoderLayer(E, H, FF, dropout=0.5)
    tgt, mem = jnp.ones((T, N, E)), jnp.asarray(np.random.default_rng(0).normal(size=(S, N, E)))
    a, b = layer(tgt, mem), layer(tgt, mem)
    assert np.abs(np.asarray(a) - np.asarray(b)).max() > 1e-3      # a new mask each call
    layer.eval()
    np.testing.assert_array_equal(np.asarray(layer(tgt, mem)), np.asarray(layer(tgt, mem)))


def test_errors():
    with pytest.raises(ValueError, match="TransformerDecoderLayer: activation must be 'relu', "
                                         "'gelu' or a callable, got 'tanh'"):
        nn.TransformerDecoderLayer(E, H, activation="tanh")
    t = nn.Transformer(E, H, 1, 1, FF, batch_first=True)
    with pytest.raises(RuntimeError, match=r"batch number of src and tgt must be equal, got src "
                                           r"\(2, 5, 8\) and tgt \(3, 4, 8\)"):
        t(jnp.ones((2, 5, E)), jnp.ones((3, 4, E)))
    with pytest.raises(RuntimeError, match=r"equal to d_model=8, got src \(2, 5, 6\)"):
        t(jnp.ones((2, 5, 6)), jnp.ones((2, 4, 6)))


if __name__ == "__main__":           # regenerate the stored reference (needs PyTorch)
    import torch
    out = {}
    for cname in CONFIGS:
        for k, v in _torch_reference(torch, cname).items():
            out[f"{cname}/{k}"] = v
    np.savez_compressed(DATA, **out)
    print(f"wrote {DATA}: {len(out)} arrays")
