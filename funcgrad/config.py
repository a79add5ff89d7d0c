"""Global switches: ``funcgrad.config.update("enable_x64", True)``.

Options: ``enable_x64``, ``cpu_devices``, ``platform``, ``debug_nans``,
``default_matmul_precision`` and ``threefry_partitionable`` (``funcgrad.random``'s counter
layout, as JAX's ``jax_threefry_partitionable``). JAX's names with the ``jax_`` prefix are
accepted too (``update("jax_enable_x64", True)``).

64-bit types are off by default (as in JAX): Python floats and NumPy float64 inputs become
float32. Set the environment variable ``FUNCGRAD_ENABLE_X64=1`` or call
``funcgrad.config.update("enable_x64", True)`` before creating arrays to keep 64-bit types.

Example:
    >>> import funcgrad
    >>> funcgrad.config.update("enable_x64", True)
    >>> funcgrad.numpy.ones(2).dtype
    dtype('float64')
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
        # counter layout of funcgrad.random's Threefry generator (random/prng.py); JAX 0.10's
        # default, True, gives the same numbers as jax.random under its default
        "threefry_partitionable":
            lambda: os.environ.get("FUNCGRAD_THREEFRY_PARTITIONABLE", "1").lower() in _TRUE,
    }

    def __init__(self):
        self._values = {name: default() for name, default in self._defaults.items()}
        self._listeners = []
        self._validators = {}

    @classmethod
    def _resolve(cls, name):
        # JAX spells every option with a ``jax_`` prefix; accept it for funcgrad's own options
        if name not in cls._defaults and name.startswith("jax_") and \
                name[4:] in cls._defaults:
            return name[4:]
        return name

    def __getattr__(self, name):
        try:
            return self.__dict__["_values"][self._resolve(name)]
        except KeyError:
            raise AttributeError(f"funcgrad.config has no option {name!r}; "
                                 f"options: {sorted(self._defaults)}") from None

    def update(self, name, value):
        """Set option ``name`` to ``value``.

        Example:
            >>> funcgrad.config.update("enable_x64", True)
            >>> funcgrad.config.update("jax_threefry_partitionable", False)  # JAX's name
        """
        name = self._resolve(name)
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
        name = self._resolve(name)
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
