"""funcgrad: composable transformations of numerical Python functions on jaxlib's XLA runtime.

Example:
    >>> import funcgrad
    >>> import funcgrad.numpy as jnp
    >>> f = funcgrad.jit(lambda x: jnp.sum(jnp.tanh(x) ** 2))
    >>> f(jnp.ones(3))
    Array(1.74..., dtype=float32)
    >>> funcgrad.grad(lambda x: jnp.sum(x ** 2))(jnp.array([1.0, 2.0]))
    Array([2., 4.], dtype=float32)
"""
import os as _os

_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from funcgrad.config import config  # noqa: E402
from funcgrad.lowering import eager as _eager  # noqa: E402,F401  (installs the root interpreter)
from funcgrad.lowering.array import Array, device_put, from_dlpack  # noqa: E402
from funcgrad.lowering.backend import (default_backend, device_count, devices,  # noqa: E402
                                       local_devices)
from funcgrad import tree_util  # noqa: E402
from funcgrad import lax  # noqa: E402
from funcgrad.lax.precision import (check_default_precision as _check_precision,  # noqa: E402
                                    default_matmul_precision)
config.validate_with("default_matmul_precision", _check_precision)
from funcgrad import numpy  # noqa: E402
from funcgrad.transforms.jit import clear_caches, disable_jit, jit, make_jaxpr  # noqa: E402
from funcgrad.transforms.eval_shape import ShapeDtypeStruct, eval_shape  # noqa: E402
from funcgrad import tree  # noqa: E402,F401
from funcgrad.lax.callbacks import pure_callback  # noqa: E402
from funcgrad import debug  # noqa: E402,F401
from funcgrad.transforms.ad import (grad, hessian, jacfwd, jacrev, jvp,  # noqa: E402
                                    linearize, value_and_grad, vjp)
from funcgrad.transforms.custom_derivatives import custom_jvp, custom_vjp  # noqa: E402
from funcgrad.transforms.remat import checkpoint, remat  # noqa: E402
from funcgrad.transforms.batching import vmap  # noqa: E402
from funcgrad import quantize  # noqa: E402,F401  (a callable module: funcgrad.quantize(f, cfg))
from funcgrad.core.jaxpr import named_scope  # noqa: E402
from funcgrad import amp  # noqa: E402
from funcgrad.amp import autocast  # noqa: E402
from funcgrad.transforms.pmap import (local_device_count, pmap, process_count,  # noqa: E402
                                      process_index)
from funcgrad.lowering.sharding import (device_put_replicated,  # noqa: E402
                                        device_put_sharded)
from funcgrad import sharding  # noqa: E402,F401  (Mesh, PartitionSpec, NamedSharding)
from funcgrad.sharding import make_mesh  # noqa: E402
from funcgrad.transforms.shard_map import shard_map  # noqa: E402
from funcgrad import random  # noqa: E402
from funcgrad.core.errors import (ConcretizationTypeError,  # noqa: E402
                                  TracerArrayConversionError, UnexpectedTracerError)

__version__ = "0.1.0"


def block_until_ready(x):
    """Wait for every array in ``x`` (a pytree); returns ``x``.

    Example:
        >>> funcgrad.block_until_ready({"y": jnp.ones(2) * 3})
        {'y': Array([3., 3.], dtype=float32)}
    """
    for leaf in tree_util.tree_leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x


def device_get(x):
    """Copy every array in ``x`` (a pytree) to NumPy.

    Example:
        >>> funcgrad.device_get({"w": jnp.arange(3), "n": 1})
        {'n': 1, 'w': array([0, 1, 2], dtype=int32)}
    """
    from funcgrad.lowering.array import fetch
    return tree_util.tree_map(lambda a: fetch(a) if isinstance(a, Array) else a, x)


from funcgrad.serialization import CheckpointError, load, save  # noqa: E402
from funcgrad import export  # noqa: E402,F401  (funcgrad.export.export, .save, .load)
from funcgrad.environment import print_environment_info  # noqa: E402
from funcgrad.nn.init import manual_seed  # noqa: E402
from funcgrad import nn, optim  # noqa: E402,F401
from funcgrad import profiler  # noqa: E402,F401  (profiler traces: docs/debugging.md)
from funcgrad import quantization  # noqa: E402,F401  (PyTorch's quantization workflows)
from funcgrad import distributed  # noqa: E402,F401  (many processes: docs/parallel.md)
from funcgrad.lowering.global_arrays import (  # noqa: E402  (global Arrays, JAX's names)
    make_array_from_callback, make_array_from_process_local_data,
    make_array_from_single_device_arrays)

# --- JAX's remaining top-level names and small modules (jax.dtypes, jax.errors, jax.dlpack,
# jax.custom_batching)
from funcgrad.transforms.jax_api import (  # noqa: E402
    closure_convert, custom_gradient, enable_x64, jacobian, linear_transpose, live_arrays,
    named_call, typeof)
from funcgrad.core.dtypes import float0  # noqa: E402
from funcgrad import custom_batching, dlpack, dtypes, errors, image  # noqa: E402,F401

# --- JAX's context managers and policies (jax.default_device, jax.transfer_guard, ...)
from funcgrad.config import (default_device, numpy_dtype_promotion,  # noqa: E402
                             numpy_rank_promotion, transfer_guard,
                             transfer_guard_device_to_device, transfer_guard_device_to_host,
                             transfer_guard_host_to_device)
from funcgrad.core.interpreters import ensure_compile_time_eval  # noqa: E402
from funcgrad.transforms import checkpoint_policies  # noqa: E402
from funcgrad import ad_checkpoint  # noqa: E402,F401
