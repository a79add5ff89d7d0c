"""Cases for Adafactor, Muon and LBFGS, run by PyTorch (make_matrix_optim_refs.py, stored in
data/matrix_optim_ref.npz) and by funcgrad (test_lbfgs_adafactor_muon.py)."""
import numpy as np

_rng = np.random.default_rng(21)
SHAPES = {"matrix": (5, 3), "wide": (3, 5), "vector": (4,), "cube": (2, 3, 4)}
INIT = {k: _rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
GRADS = {k: [_rng.standard_normal(s).astype(np.float32) for _ in range(3)]
         for k, s in SHAPES.items()}

# (optimizer, parameters, keyword arguments)
STEP_CASES = {
    "adafactor": ("Adafactor", ["matrix", "vector", "cube"], dict(lr=0.05)),
    "adafactor_wd_max": ("Adafactor", ["matrix", "vector"],
                         dict(lr=0.02, weight_decay=0.1, maximize=True, d=1.5,
                              beta2_decay=-0.5, eps=(1e-20, 1e-2))),
    "muon": ("Muon", ["matrix", "wide"], dict(lr=0.05)),
    "muon_plain_adamw_rms": ("Muon", ["matrix", "wide"],
                             dict(lr=0.02, nesterov=False, momentum=0.8, weight_decay=0.0,
                                  adjust_lr_fn="match_rms_adamw", ns_steps=3)),
}

# LBFGS on a least-squares + quartic problem: x (8, 3) @ w + b fitted to y
X = _rng.standard_normal((8, 3)).astype(np.float32)
Y = (X @ np.array([1.5, -2.0, 0.5], np.float32) + 0.3).astype(np.float32)
W0 = np.zeros(3, np.float32)
B0 = np.zeros((), np.float32)
LBFGS_CASES = {
    "lbfgs_fixed": dict(lr=0.5, max_iter=6, history_size=3),
    "lbfgs_wolfe": dict(lr=1.0, max_iter=8, line_search_fn="strong_wolfe"),
}
LBFGS_STEPS = 3


def lbfgs_loss(xp, w, b):
    r = X @ w + b - Y if xp is np else xp.asarray(X) @ w + b - xp.asarray(Y)
    return (r * r).mean() + 0.01 * (w ** 4).sum()
