"""The cases shared by the autocast / GradScaler tests and ``make_references.py``: inputs made
by NumPy from fixed seeds, and each case written once per library (``lib`` is the functional
module, ``torch.nn.functional`` or ``funcgrad.nn.functional``, with ``xp`` its array module)."""
import numpy as np

STEPS = 60                     # the training curve
SCALER_STEPS = 12
SCALER_BAD_STEPS = (2, 3, 7)   # steps whose gradients get an inf
SCALER_KW = dict(init_scale=2.0 ** 10, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=3)


def op_inputs():
    rng = np.random.default_rng(0)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)   # noqa: E731
    return dict(x=f(4, 8), w=f(3, 8), b=f(3), img=f(2, 3, 8, 8), cw=f(4, 3, 3, 3), cb=f(4),
                y=rng.integers(0, 3, 4).astype(np.int64), t=rng.random((4, 3)).astype(np.float32),
                q=f(1, 2, 5, 8))


def ops(F, xp, a):
    """name -> thunk of one operation under autocast; ``a``: op_inputs() as the library's
    arrays. PyTorch's CPU and CUDA lists agree on all of these."""
    h = lambda: F.linear(a["x"], a["w"], a["b"])   # noqa: E731
    return {
        "linear": h,
        "matmul": lambda: a["x"] @ a["w"].T,
        "conv2d": lambda: F.conv2d(a["img"], a["cw"], a["cb"], padding=1),
        "bmm": lambda: xp.matmul(a["x"][None], a["w"].T[None]),
        "einsum": lambda: xp.einsum("ij,kj->ik", a["x"], a["w"]),
        "sdpa": lambda: F.scaled_dot_product_attention(a["q"], a["q"], a["q"]),
        "cross_entropy": lambda: F.cross_entropy(h(), a["y"]),
        "nll_loss": lambda: F.nll_loss(F.log_softmax(a["x"][:, :3], -1), a["y"]),
        "mse_loss": lambda: F.mse_loss(h(), a["t"]),
        "l1_loss": lambda: F.l1_loss(h(), a["t"]),
        "kl_div": lambda: F.kl_div(F.log_softmax(h(), -1), a["t"], reduction="batchmean"),
        "binary_cross_entropy": lambda: F.binary_cross_entropy(F.sigmoid(h()), a["t"]),
        "binary_cross_entropy_with_logits":
            lambda: F.binary_cross_entropy_with_logits(h(), a["t"]),
        "relu": lambda: F.relu(h()),
        "tanh": lambda: xp.tanh(h()),
        "bias_after_linear": lambda: h() + a["b"],   # plain promotion: float32
    }


#: Where PyTorch's CPU list (what the live test can run) and its CUDA list differ, funcgrad
#: follows the CUDA list on every device (docs/amp.md): these run in float32.
CUDA_LIST_FLOAT32 = ("softmax", "log_softmax", "layer_norm", "sum", "exp", "log", "pow",
                     "cumsum")


def cuda_list_ops(F, xp, a):
    h = lambda: F.linear(a["x"], a["w"], a["b"])   # noqa: E731
    return {
        "softmax": lambda: F.softmax(h(), -1),
        "log_softmax": lambda: F.log_softmax(h(), -1),
        "layer_norm": lambda: F.layer_norm(h(), (3,)),
        "sum": lambda: h().sum(),
        "exp": lambda: xp.exp(h()),
        "log": lambda: xp.log(xp.abs(h())),
        "pow": lambda: h() ** 2,
        "cumsum": lambda: xp.cumsum(h(), 0),
    }


def train_data():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, 32).astype(np.int64)
    return x, y


def net_forward(F, xp, p, x):
    """A small convolutional classifier in functional form over a dict of parameters."""
    h = F.relu(F.conv2d(x, p["conv.weight"], p["conv.bias"], padding=1))
    h = F.max_pool2d(h, 2)
    h = xp.reshape(h, (h.shape[0], -1))
    h = F.relu(F.linear(h, p["fc1.weight"], p["fc1.bias"]))
    return F.linear(h, p["fc2.weight"], p["fc2.bias"])


def net_init():
    rng = np.random.default_rng(2)
    u = lambda fan_in, *s: (rng.uniform(-1, 1, s) / np.sqrt(fan_in)).astype(np.float32)  # noqa
    return {"conv.weight": u(9, 4, 1, 3, 3), "conv.bias": u(9, 4),
            "fc1.weight": u(64, 32, 64), "fc1.bias": u(64, 32),
            "fc2.weight": u(32, 10, 32), "fc2.bias": u(32, 10)}
