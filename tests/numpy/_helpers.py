"""Test helpers: run a funcgrad.numpy function under jit (one XLA compile per call instead of
one per primitive, which keeps these tests fast) with Python arguments held static."""
import funcgrad


def J(fn, *static_args, **static_kwargs):
    """``fn`` jitted over its array arguments; ``static_*`` are appended/bound as constants."""
    return funcgrad.jit(lambda *arrays: fn(*arrays, *static_args, **static_kwargs))
