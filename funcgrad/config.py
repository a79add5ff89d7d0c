"""Global switches: ``funcgrad.config.update("enable_x64", True)``.

64-bit types are off by default (as in JAX): Python floats and NumPy float64 inputs become
float32. Set the environment variable ``FUNCGRAD_ENABLE_X64=1`` or call
``funcgrad.config.update("enable_x64", True)`` before creating arrays to keep 64-bit types.

Example:
    >>> funcgrad.config.update("enable_x64", True)
    >>> funcgrad.numpy.ones(2).dtype
    dtype('float64')
    >>> funcgrad.config.update("enable_x64", False)
    >>> funcgrad.numpy.ones(2).dtype
    dtype('float32')
"""
import contextlib
import os

_TRUE = ("1", "true", "yes", "on")


class Config:
    """Holds the library's switches; read them as attributes (``config.enable_x64``)."""

    _defaults = {
        "enable_x64": lambda: os.environ.get("FUNCGRAD_ENABLE_X64", "0").lower() in _TRUE,
        "cpu_devices": lambda: int(os.environ.get("FUNCGRAD_CPU_DEVICES", "1")),
        "platform": lambda: os.environ.get("FUNCGRAD_PLATFORM", "").lower() or None,
        "debug_nans": lambda: os.environ.get("FUNCGRAD_DEBUG_NANS", "0").lower() in _TRUE,
        # precision of float32 matrix products and convolutions on GPU/TPU (lax/precision.py)
        "default_matmul_precision":
            lambda: os.environ.get("FUNCGRAD_DEFAULT_MATMUL_PRECISION", "") or None,
    }

    def __init__(self):
        self._values = {name: default() for name, default in self._defaults.items()}
        self._listeners = []
        self._validators = {}

    def __getattr__(self, name):
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(f"funcgrad.config has no option {name!r}; "
                                 f"options: {sorted(self._defaults)}") from None

    def update(self, name, value):
        """Set option ``name`` to ``value``.

        Example:
            >>> funcgrad.config.update("debug_nans", True)
            >>> funcgrad.config.debug_nans
            True
            >>> funcgrad.config.update("debug_nans", False)
        """
        if name not in self._defaults:
            raise ValueError(f"funcgrad.config.update: unknown option {name!r}; "
                             f"options: {sorted(self._defaults)}")
        if name in self._validators:
            self._validators[name](value)
        self._values[name] = value
        for listener in self._listeners:
            listener(name, value)

    @contextlib.contextmanager
    def override(self, name, value):
        """Set option ``name`` to ``value`` inside a ``with`` block, then restore it.

        Example:
            >>> with funcgrad.config.override("enable_x64", True):
            ...     funcgrad.numpy.ones(2).dtype
            dtype('float64')
        """
        old = getattr(self, name)
        self.update(name, value)
        try:
            yield
        finally:
            self.update(name, old)

    def validate_with(self, name, check):
        """Call ``check(value)`` before option ``name`` is set; it raises for a bad value."""
        self._validators[name] = check

    def on_change(self, listener):
        """Register ``listener(name, value)``, called after every ``update``."""
        self._listeners.append(listener)


config = Config()
