"""Write the artifact that tests/export/test_format.py loads forever after: a small MLP
exported by this release (format version 1) with a symbolic batch dimension, its backward pass
and modules for the CPU and CUDA, plus the values it must reproduce.

Run from the repository root: ``python -m tests.export.make_v1_artifact``. Rerun it only to add
a new artifact for a new format version (keep the old files: they are the compatibility test).
"""
import pathlib

import numpy as np

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import export, nn

HERE = pathlib.Path(__file__).resolve().parent / "data"


class TinyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return jnp.mean(self.fc2(jnp.tanh(self.fc1(x))), axis=0) + self.fc2(x @ self.fc1.weight.T)


def main():
    rng = np.random.default_rng(19)
    model = TinyMLP()
    model.load_state_dict({k: jnp.asarray(rng.standard_normal(v.shape).astype(np.float32) * 0.5)
                           for k, v in model.state_dict().items()})
    spec = funcgrad.ShapeDtypeStruct(export.symbolic_shape("b, 4"), jnp.float32)
    # full float32 products, so that the CUDA module matches the stored values too (a GPU's
    # default precision rounds float32 products to TensorFloat-32)
    with funcgrad.config.override("default_matmul_precision", "highest"):
        exp = export.export(model, platforms=("cpu", "cuda"), vjp_order=1)(spec)
    HERE.mkdir(exist_ok=True)
    export.save(exp, HERE / "v1_mlp.fgx")
    values = {}
    for b in (1, 5):
        x = rng.standard_normal((b, 4)).astype(np.float32)
        values[f"x{b}"] = x
        values[f"y{b}"] = np.asarray(model(x))
        values[f"g{b}"] = np.asarray(funcgrad.grad(lambda x: jnp.sum(model(x) ** 2))(x))
    np.savez(HERE / "v1_mlp_expected.npz", **values)
    print(exp)


if __name__ == "__main__":
    main()
