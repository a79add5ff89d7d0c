"""Where user code applied a primitive: the first stack frame outside the funcgrad package.

Staged equations record it (``Eqn.source_info``), so an error found later (a NaN that a compiled
function produced, see ``lowering/nan_checks.py``) can name the user's ``file:line``.

Example:
    >>> from funcgrad.core import source_info
    >>> info = source_info.user_frame()
    >>> info.function, source_info.describe(None)
    ('<module>', 'an unknown location')
"""
import os
import sys
from collections import namedtuple

SourceInfo = namedtuple("SourceInfo", "filename lineno function")

# the source of the equation that ``core.jaxpr.eval_jaxpr`` is evaluating (None outside): what
# its rules stage or run is attributed to that user line, not to funcgrad's evaluator
evaluating = [None]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_frame(skip=1):
    """The ``SourceInfo`` of the innermost frame (above ``skip`` frames) whose code is not in
    the funcgrad package, or None when every frame is funcgrad's."""
    frame = sys._getframe(skip)
    package = _PACKAGE_DIR
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(package):
            return SourceInfo(code.co_filename, frame.f_lineno, code.co_name)
        frame = frame.f_back
    return None


def here(skip=1):
    """The source of the equation being evaluated, else ``user_frame(skip + 1)``."""
    info = evaluating[0]
    return info if info is not None else user_frame(skip + 1)


def describe(info):
    """``file:line (function)`` for a ``SourceInfo``; a placeholder for None."""
    if info is None:
        return "an unknown location"
    return f"{info.filename}:{info.lineno} ({info.function})"
