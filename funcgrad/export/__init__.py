"""``funcgrad.export``: functions and models as versioned StableHLO artifacts that load and run
without their Python source (as ``jax.export``, or PyTorch's ``torch.export`` + save/load).

``export(f)(*args)`` traces ``f`` (a function, a jitted function or an ``nn.Module``) at the
shapes of ``args`` and lowers it for one or more platforms; the ``Exported`` it returns runs
with ``call``, serializes to bytes (``serialize`` / ``deserialize``) and to one file (``save``
/ ``load``): a JSON header, the StableHLO portable artifacts and the weights as safetensors,
never pickled. ``symbolic_shape("b, 784")`` exports once for every batch size;
``vjp_order=1`` stores the backward pass for ``grad``. ``docs/export.md`` describes the file
byte by byte; ``examples/run_exported.py`` runs an artifact with jaxlib and NumPy alone.

Example:
    >>> import funcgrad, funcgrad.numpy as jnp
    >>> from funcgrad import export
    >>> model = funcgrad.nn.Linear(4, 2)
    >>> x = funcgrad.ShapeDtypeStruct(export.symbolic_shape("b, 4"), jnp.float32)
    >>> export.save(export.export(model)(x), "linear.fgx")
    >>> loaded = export.load("linear.fgx")
    >>> loaded.call(jnp.ones((3, 4))).shape
    (3, 2)
"""
import os

from funcgrad.export.artifact import FORMAT_VERSION, ExportFormatError
from funcgrad.export.exported import Exported, deserialize
from funcgrad.export.exporting import export
from funcgrad.export.symbolic import Constraint, ShapeError, symbolic_shape
from funcgrad.transforms.eval_shape import ShapeDtypeStruct

__all__ = ["export", "Exported", "deserialize", "save", "load", "symbolic_shape",
           "ShapeDtypeStruct", "ShapeError", "ExportFormatError", "Constraint",
           "FORMAT_VERSION"]


def save(exported, path):
    """Write ``exported`` to ``path`` as one file, atomically: the bytes go to a temporary file
    in the same directory which then replaces ``path``, so a failed save leaves any previous
    file intact.

    Example:
        >>> from funcgrad import export
        >>> export.save(export.export(jnp.sin)(jnp.zeros(2)), "sin.fgx")
        >>> export.load("sin.fgx").call(jnp.zeros(2))
        Array([0., 0.], dtype=float32)
    """
    from funcgrad.serialization import _open_for_writing
    if not isinstance(exported, Exported):
        raise TypeError(f"funcgrad.export.save: expected an Exported, got "
                        f"{type(exported).__name__}")
    data = exported.serialize()
    path = os.fspath(path)
    fd, tmp = _open_for_writing(path)
    try:
        os.chmod(tmp, _file_mode(path))       # mkstemp makes it owner-only
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _file_mode(path):
    """The permissions of the file replacing ``path``: those of the old file, else what the
    umask gives a new file."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def load(path):
    """The ``Exported`` stored in file ``path`` by ``save``; ``ExportFormatError`` naming the
    file for a corrupt or truncated file or one written by a newer funcgrad.

    Example:
        >>> from funcgrad import export
        >>> export.save(export.export(lambda x: x * 3)(jnp.zeros(2)), "triple.fgx")
        >>> export.load("triple.fgx").call(jnp.ones(2))
        Array([3., 3.], dtype=float32)
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    return deserialize(data, where=f"funcgrad.export.load({path!r})")
