"""Transformations: jit (here), and jvp/grad, vmap, pmap, quantize, remat as they land."""
