"""Error types raised while tracing, and the helper that finds the user's source line."""
import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_frame():
    """The innermost stack frame that lies outside the funcgrad package, as 'file:line (function)'."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR) or "/tests/" in filename:
            return f"{filename}:{frame.f_lineno} (in {frame.f_code.co_name})"
        frame = frame.f_back
    return "<unknown location>"


class ConcretizationTypeError(TypeError):
    """A traced value was used where Python needs a concrete one (``if``, ``int()``, shapes...)."""


class TracerArrayConversionError(TypeError):
    """A traced value was converted to a NumPy array inside a transformation."""


class UnexpectedTracerError(RuntimeError):
    """A traced value escaped the transformation that created it (kept in a global, say)."""


def concretization_error(tracer, operation):
    where = user_frame()
    fn = getattr(tracer._interp, "debug_name", None) or "the traced function"
    return ConcretizationTypeError(
        f"{operation} needs a concrete value, but got a traced {tracer.aval.str_short()} while "
        f"tracing {fn} at {where}. Python control flow cannot depend on traced values: mark the "
        f"argument static (jit(..., static_argnums=... or static_argnames=...)), or use "
        f"funcgrad.lax.cond / funcgrad.lax.while_loop / funcgrad.numpy.where instead.")


class AxisError(ValueError, TypeError):
    """An axis number out of bounds for an array's rank (or repeated where it must not be).
    A ValueError, as NumPy's, and a TypeError, as JAX's lax raises for the same mistake."""


class MissingRuleError(TypeError):
    """A primitive lacks the rule a transformation needs (jvp, transpose, batch, abstract eval),
    or a backend lacks a kernel for it; the message names the primitive and its operands."""
