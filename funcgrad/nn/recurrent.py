"""Recurrent layers: ``RNN``, ``LSTM``, ``GRU`` (and the single-step ``*Cell``s).

Weights use PyTorch's names and layouts: ``weight_ih_l{k}[_reverse]`` (gates*H, in),
``weight_hh_l{k}[_reverse]`` (gates*H, H), ``bias_ih_l{k}``, ``bias_hh_l{k}``; LSTM gates are
stacked in the order i, f, g, o and GRU gates r, z, n. The input projection of all time steps
is one matmul; the recurrence runs in ``funcgrad.lax.scan``, so a jitted model compiles one
loop body (not one copy per time step).
"""
import math

import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.nn import functional as F
from funcgrad.nn import init
from funcgrad.nn.jax_functions import sigmoid
from funcgrad.nn.module import Module, Parameter, host_zeros

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _per_gate(xw, gates):
    """The input projection as one array per gate (what the step functions take)."""
    return tuple(jnp.split(xw, gates, axis=-1))


def _lstm_step(w_hh, b_hh, carry, xw, w_hr=None):
    h, c = carry
    hw = jnp.matmul(h, w_hh.T)
    if b_hh is not None:
        hw = hw + b_hh
    i, f, g, o = (x + y for x, y in zip(xw, jnp.split(hw, 4, axis=-1)))
    c = sigmoid(f) * c + sigmoid(i) * jnp.tanh(g)
    h = sigmoid(o) * jnp.tanh(c)
    if w_hr is not None:                       # LSTM with projections: h = W_hr (o * tanh(c))
        h = jnp.matmul(h, w_hr.T)
    return (h, c), h


def _gru_step(w_hh, b_hh, h, xw):
    hw = jnp.matmul(h, w_hh.T)
    if b_hh is not None:
        hw = hw + b_hh
    xr, xz, xn = xw
    hr, hz, hn = jnp.split(hw, 3, axis=-1)
    r = sigmoid(xr + hr)
    z = sigmoid(xz + hz)
    n = jnp.tanh(xn + r * hn)
    h = (1 - z) * n + z * h
    return h, h


def _rnn_step(act, w_hh, b_hh, h, xw):
    z = xw[0] + jnp.matmul(h, w_hh.T)
    if b_hh is not None:
        z = z + b_hh
    h = act(z)
    return h, h


class RNNBase(Module):
    """Shared machinery of RNN, LSTM and GRU (see the module docstring)."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None,
                 proj_size=0):
        super().__init__()
        proj_size = int(proj_size)
        if proj_size < 0 or (proj_size and proj_size >= hidden_size):
            raise ValueError(f"{mode}: proj_size must be 0 or in [1, hidden_size), got "
                             f"proj_size={proj_size}, hidden_size={hidden_size}")
        self.proj_size = proj_size
        self.mode = mode
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers, self.bias = int(num_layers), bool(bias)
        self.batch_first, self.dropout = bool(batch_first), float(dropout)
        self.bidirectional = bool(bidirectional)
        dirs = 2 if bidirectional else 1
        g = _GATES[mode] * hidden_size
        out_size = proj_size or hidden_size       # size of h (and of each direction's output)
        dt = dtype or "float32"
        for layer in range(num_layers):
            in_size = input_size if layer == 0 else out_size * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                setattr(self, "weight_ih" + sfx, Parameter(host_zeros((g, in_size), dt)))
                setattr(self, "weight_hh" + sfx, Parameter(host_zeros((g, out_size), dt)))
                if bias:
                    setattr(self, "bias_ih" + sfx, Parameter(host_zeros((g,), dt)))
                    setattr(self, "bias_hh" + sfx, Parameter(host_zeros((g,), dt)))
                if proj_size:
                    setattr(self, "weight_hr" + sfx,
                            Parameter(host_zeros((proj_size, hidden_size), dt)))
        if self.dropout > 0 and num_layers > 1:
            from funcgrad.nn import init as _init
            start = float(_init.generator().integers(0, 1 << 23))
            self.register_buffer("rng_counter", jnp.asarray(start, "float32"),
                                 persistent=False)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def _step_fn(self, w_hh, b_hh, w_hr=None):
        if self.mode == "LSTM":
            return lambda carry, xw: _lstm_step(w_hh, b_hh, carry, xw, w_hr)
        if self.mode == "GRU":
            return lambda carry, xw: _gru_step(w_hh, b_hh, carry, xw)
        act = jnp.tanh if self.mode == "RNN_TANH" else F.relu
        return lambda carry, xw: _rnn_step(act, w_hh, b_hh, carry, xw)

    def forward(self, x, hx=None):
        x = jnp.asarray(x)
        unbatched = x.ndim == 2
        if unbatched:
            x = x[:, None] if not self.batch_first else x[None]
        if x.ndim != 3:
            raise ValueError(f"{type(self).__name__}: expected a 2-d or 3-d input, got shape "
                             f"{tuple(x.shape)}")
        if self.batch_first:
            x = jnp.swapaxes(x, 0, 1)            # (L, N, in)
        if x.shape[-1] != self.input_size:
            raise ValueError(f"{type(self).__name__}: input size {x.shape[-1]} != "
                             f"input_size {self.input_size}")
        N = x.shape[1]
        dirs = 2 if self.bidirectional else 1
        H = self.hidden_size
        lstm = self.mode == "LSTM"
        if hx is None:
            h0 = jnp.zeros((self.num_layers * dirs, N, self.proj_size or H), x.dtype)
            c0 = jnp.zeros((self.num_layers * dirs, N, H), x.dtype) if lstm else None
        else:
            if lstm:
                h0, c0 = hx
            else:
                h0, c0 = hx, None
            if unbatched:
                h0 = h0[:, None]
                c0 = c0[:, None] if c0 is not None else None
        hs, cs = [], []
        layer_in = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                w_ih = getattr(self, "weight_ih" + sfx)
                w_hh = getattr(self, "weight_hh" + sfx)
                b_ih = getattr(self, "bias_ih" + sfx) if self.bias else None
                b_hh = getattr(self, "bias_hh" + sfx) if self.bias else None
                w_hr = getattr(self, "weight_hr" + sfx) if self.proj_size else None
                xw = F.linear(layer_in, w_ih, b_ih)              # (L, N, G*H) in one matmul
                if b_hh is not None and self.mode != "GRU":
                    # outside the loop (one fused add), so both biases' gradients are one
                    # reduction of the same values; GRU's n gate needs b_hn inside r * (...)
                    xw = xw + b_hh
                    b_hh = None
                # one scanned array per gate: XLA's CPU loop fusions are slow when they read
                # one dynamically sliced array at several offsets
                xw = _per_gate(xw, _GATES[self.mode])
                k = layer * dirs + d
                carry = (h0[k], c0[k]) if lstm else h0[k]
                step = self._step_fn(w_hh, b_hh, w_hr)
                carry, ys = lax.scan(step, carry, xw, reverse=bool(d))
                if lstm:
                    hs.append(carry[0])
                    cs.append(carry[1])
                else:
                    hs.append(carry)
                outs.append(ys)
            layer_in = outs[0] if dirs == 1 else jnp.concatenate(outs, axis=-1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                counter = self.rng_counter
                self.update_buffer("rng_counter", counter + 1.0)
                layer_in = F.dropout(layer_in, self.dropout, True, key=counter)
        out = layer_in
        h_n = jnp.stack(hs, 0)
        if self.batch_first:
            out = jnp.swapaxes(out, 0, 1)
        if unbatched:
            out = out[:, 0] if not self.batch_first else out[0]
            h_n = h_n[:, 0]
        if lstm:
            c_n = jnp.stack(cs, 0)
            if unbatched:
                c_n = c_n[:, 0]
            return out, (h_n, c_n)
        return out, h_n

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        return s


class RNN(RNNBase):
    """Elman RNN, h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (or relu).

    Example:
        >>> out, h = nn.RNN(4, 8, num_layers=2)(jnp.ones((5, 3, 4)))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device, dtype)

    def __setattr__(self, name, value):
        if name == "nonlinearity" and "_parameters" not in self.__dict__:
            object.__setattr__(self, name, value)
            return
        super().__setattr__(name, value)


class LSTM(RNNBase):
    """Long short-term memory with PyTorch's gate order (i, f, g, o) and weight names.

    Example:
        >>> lstm = nn.LSTM(10, 20, num_layers=2, batch_first=True)
        >>> out, (h, c) = lstm(jnp.ones((3, 7, 10)))
        >>> out.shape, h.shape
        ((3, 7, 20), (2, 3, 20))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device, dtype, proj_size=proj_size)


class GRU(RNNBase):
    """Gated recurrent unit with PyTorch's gate order (r, z, n). Example: ``nn.GRU(4, 8)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device, dtype)


class _CellBase(Module):
    def __init__(self, input_size, hidden_size, bias, gates, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        dt = dtype or "float32"
        self.weight_ih = Parameter(host_zeros((gates * hidden_size, input_size), dt))
        self.weight_hh = Parameter(host_zeros((gates * hidden_size, hidden_size), dt))
        if bias:
            self.bias_ih = Parameter(host_zeros((gates * hidden_size,), dt))
            self.bias_hh = Parameter(host_zeros((gates * hidden_size,), dt))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        stdv = 1.0 / math.sqrt(hidden_size)
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}, bias={self.bias}"


RNNCellBase = _CellBase     # PyTorch's name of the cells' base class


class LSTMCell(_CellBase):
    """One LSTM step: ``h, c = cell(x, (h, c))``. Example: ``nn.LSTMCell(4, 8)``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, dtype)

    def forward(self, x, hx=None):
        if hx is None:
            z = jnp.zeros(tuple(x.shape[:-1]) + (self.hidden_size,), x.dtype)
            hx = (z, z)
        (h, c), _ = _lstm_step(self.weight_hh, self.bias_hh, hx,
                               _per_gate(F.linear(x, self.weight_ih, self.bias_ih), 4))
        return h, c


class GRUCell(_CellBase):
    """One GRU step. Example: ``h = nn.GRUCell(4, 8)(x, h)``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, dtype)

    def forward(self, x, hx=None):
        if hx is None:
            hx = jnp.zeros(tuple(x.shape[:-1]) + (self.hidden_size,), x.dtype)
        h, _ = _gru_step(self.weight_hh, self.bias_hh, hx,
                         _per_gate(F.linear(x, self.weight_ih, self.bias_ih), 3))
        return h


class RNNCell(_CellBase):
    """One Elman RNN step. Example: ``h = nn.RNNCell(4, 8)(x, h)``."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, x, hx=None):
        if hx is None:
            hx = jnp.zeros(tuple(x.shape[:-1]) + (self.hidden_size,), x.dtype)
        act = jnp.tanh if self.nonlinearity == "tanh" else F.relu
        h, _ = _rnn_step(act, self.weight_hh, self.bias_hh, hx,
                         _per_gate(F.linear(x, self.weight_ih, self.bias_ih), 1))
        return h
