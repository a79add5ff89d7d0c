import numpy as np

import funcgrad
import funcgrad.nn as nn
import funcgrad.numpy as jnp
import funcgrad.optim as optim


def assert_jitted_steps_match(name, kw, p0, grads, want, rtol):
    """The optimizer ``name(**kw)`` stepped inside a jitted function (traced once), from a fresh
    optimizer on a fresh parameter ``p0``, ends at ``want``."""
    box = nn.Parameter(jnp.asarray(p0))
    opt = getattr(optim, name)([box], **kw)
    step = funcgrad.jit(lambda o, g: o.step([g]))
    for g in grads:
        step(opt, jnp.asarray(g))
    np.testing.assert_allclose(np.asarray(box.data), want, rtol=rtol)
