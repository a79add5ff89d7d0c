"""The places where jaxlib's internal Python API differs between the versions funcgrad supports.

funcgrad allows every jaxlib from 0.10.2 to the newest 0.12.x (``docs/install.md`` has the
tested table). jaxlib's Python surface is what JAX's internals call, so it changes without
notice; each difference is settled here once, by looking at what the installed jaxlib offers,
and the rest of the code calls these helpers instead of testing versions itself.

Example:
    >>> from funcgrad.lowering import jaxlib_compat
    >>> jaxlib_compat.version_tuple(jaxlib_compat.JAXLIB_VERSION) >= (0, 10, 2)
    True
"""
from jaxlib import _jax
from jaxlib import version as _jaxlib_version

JAXLIB_VERSION = _jaxlib_version.__version__


def version_tuple(text):
    """The leading integers of a version string: ``'0.12.0.1'`` -> ``(0, 12, 0, 1)``,
    ``'0.11.2.dev20250101'`` -> ``(0, 11, 2)``.

    Example:
        >>> from funcgrad.lowering import jaxlib_compat
        >>> jaxlib_compat.version_tuple("0.10.2")
        (0, 10, 2)
    """
    parts = []
    for piece in str(text).split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


# jaxlib 0.10 re-checks every output buffer in Python unless told ``_skip_checks=True`` (and the
# check calls a method only JAX's shardings have); from 0.11 the keyword is gone and nothing is
# re-checked. nanobind writes the signature into the docstring, which tells the two apart.
_HANDLER_TAKES_SKIP_CHECKS = "_skip_checks" in (_jax.array_result_handler.__doc__ or "")


def array_result_handler(aval, sharding, committed=True):
    """A result handler wrapping an output buffer of ``aval`` on ``sharding`` as an ArrayImpl,
    without per-call checks, on any supported jaxlib.

    Example:
        >>> from funcgrad.lowering import jaxlib_compat
        >>> from funcgrad.lowering.array import _BufferAval, sharding_for
        >>> x = funcgrad.numpy.ones(3)
        >>> h = jaxlib_compat.array_result_handler(_BufferAval(x.aval), sharding_for(x.device))
        >>> type(h).__name__     # passed to consume_with_handlers after execute_sharded
        'ResultHandler'
    """
    if _HANDLER_TAKES_SKIP_CHECKS:
        return _jax.array_result_handler(aval, sharding, committed, _skip_checks=True)
    return _jax.array_result_handler(aval, sharding, committed)
