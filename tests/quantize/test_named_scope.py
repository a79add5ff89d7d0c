"""funcgrad.named_scope (names on staged equations, as jax.named_scope) and selection of the
products that funcgrad.quantize rewrites by scope."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.quantize import QuantizeConfig

W = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)


def model(x):
    with funcgrad.named_scope("encoder"):
        with funcgrad.named_scope("dense"):
            x = jnp.tanh(x @ W)
    with funcgrad.named_scope("head"):
        return x @ W


def int_products(closed):
    text = str(closed)
    return text.count("preferred_element_type=int32")


def test_scopes_recorded_nested_and_as_decorator():
    closed = funcgrad.make_jaxpr(model)(jnp.ones((2, 4)))
    stacks = [e.name_stack for e in closed.eqns]
    assert stacks == ["encoder/dense", "encoder/dense", "head"]
    assert funcgrad.make_jaxpr(funcgrad.named_scope("f")(jnp.sin))(1.0).eqns[0].name_stack == "f"
    printed = closed.pretty_print(name_stack=True)
    assert "# encoder/dense" in printed and "# head" in printed
    assert "#" not in str(closed)                    # the default print is unchanged
    with pytest.raises(TypeError, match="non-empty string"):
        funcgrad.named_scope("")


def test_scopes_inside_jit_and_scan_bodies():
    inner = funcgrad.jit(lambda x: x @ W)

    def f(x):
        with funcgrad.named_scope("outer"):
            y = inner(x)

            def body(c, _):
                with funcgrad.named_scope("step"):
                    return jnp.tanh(c @ W), None
            return funcgrad.lax.scan(body, y, None, length=3)[0]
    x = jnp.ones((2, 4))
    only_step = funcgrad.quantize(f, QuantizeConfig(scopes="step"))
    assert int_products(funcgrad.make_jaxpr(only_step)(x)) == 1
    assert int_products(funcgrad.make_jaxpr(funcgrad.quantize(f, QuantizeConfig(
        scopes="outer")))(x)) == 2


def test_quantize_selects_by_scope():
    x = jnp.asarray(np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32))
    for scopes, n in ((("head",), 1), (("dense",), 1), (("encoder",), 1), (("encoder", "head"), 2),
                      (("ense",), 0), ((), 2)):
        qf = funcgrad.quantize(model, QuantizeConfig(scopes=scopes))
        closed = funcgrad.make_jaxpr(qf)(x)
        assert int_products(closed) == n, scopes
    # the head alone quantized: the encoder's product is the float one
    qf = funcgrad.quantize(model, QuantizeConfig(scopes="head"))
    h = np.tanh(np.asarray(x) @ W)
    xs = np.abs(h).max(1, keepdims=True) / 127
    ws = np.abs(W).max(0, keepdims=True) / 127
    ref = (np.round(h / xs) @ np.round(W / ws)) * xs * ws
    np.testing.assert_allclose(np.asarray(qf(x)), ref, rtol=1e-4, atol=1e-5)
