"""Global switches: ``funcgrad.config.update("enable_x64", True)``.

Options: ``enable_x64``, ``cpu_devices``, ``platform``, ``debug_nans`` and ``debug_infs``
(raise ``FloatingPointError`` where a NaN / an infinity is made, ``docs/debugging.md``),
``log_compiles`` (log each XLA compilation), ``compilation_cache_dir`` and
``compilation_cache_max_size`` (the persistent compilation cache, off by default),
``default_matmul_precision`` and ``threefry_partitionable`` (``funcgrad.random``'s counter
layout, as JAX's ``jax_threefry_partitionable``). Each reads an environment variable
``FUNCGRAD_<OPTION>`` for its default; JAX's ``JAX_DEBUG_NANS``, ``JAX_DEBUG_INFS``,
``JAX_LOG_COMPILES`` and ``JAX_COMPILATION_CACHE_DIR`` are read when funcgrad's is unset. JAX's names with the ``jax_`` prefix are
accepted too (``update("jax_enable_x64", True)``).

64-bit types are off by default (as in JAX): Python floats and NumPy float64 inputs become
float32, and an explicitly requested 64-bit dtype (``jnp.zeros(2, dtype=jnp.float64)``) warns
that it is narrowed. Set the environment variable ``FUNCGRAD_ENABLE_X64=1`` or call
``funcgrad.config.update("enable_x64", True)`` before creating arrays to keep 64-bit types.

JAX's option names are accepted as aliases (``config.update("jax_enable_x64", True)``), so
code ported from JAX keeps its configuration lines.

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


def _env(name, default=""):
    """``FUNCGRAD_<NAME>``, else JAX's ``JAX_<NAME>``, else ``default``."""
    value = os.environ.get(f"FUNCGRAD_{name}")
    if value is None:
        value = os.environ.get(f"JAX_{name}", default)
    return value


def _env_flag(name):
    return _env(name, "0").lower() in _TRUE


class Config:
    """Holds the library's switches; read them as attributes (``config.enable_x64``)."""

    _defaults = {
        "enable_x64": lambda: os.environ.get("FUNCGRAD_ENABLE_X64", "0").lower() in _TRUE,
        "cpu_devices": lambda: int(os.environ.get("FUNCGRAD_CPU_DEVICES", "1")),
        "platform": lambda: os.environ.get("FUNCGRAD_PLATFORM", "").lower() or None,
        "debug_nans": lambda: _env_flag("DEBUG_NANS"),
        "debug_infs": lambda: _env_flag("DEBUG_INFS"),
        # log every XLA compilation (function, argument shapes, time) to the "funcgrad" logger
        "log_compiles": lambda: _env_flag("LOG_COMPILES"),
        # the persistent compilation cache (lowering/compilation_cache.py): a directory, or
        # None (off); its size bound in bytes (least recently used entries go first)
        "compilation_cache_dir": lambda: _env("COMPILATION_CACHE_DIR") or None,
        "compilation_cache_max_size":
            lambda: int(_env("COMPILATION_CACHE_MAX_SIZE", str(2 ** 30))),
        # run-time checks in compiled code (out-of-range ids in nn.Embedding, class targets)
        "debug_checks": lambda: os.environ.get("FUNCGRAD_DEBUG_CHECKS", "0").lower() in _TRUE,
        # precision of float32 matrix products and convolutions on GPU/TPU (lax/precision.py)
        "default_matmul_precision":
            lambda: os.environ.get("FUNCGRAD_DEFAULT_MATMUL_PRECISION", "") or None,
        # counter layout of funcgrad.random's Threefry generator (random/prng.py); JAX 0.10's
        # default, True, gives the same numbers as jax.random under its default
        "threefry_partitionable":
            lambda: os.environ.get("FUNCGRAD_THREEFRY_PARTITIONABLE", "1").lower() in _TRUE,
    }

    # JAX's option names and how their values translate (jax_platforms is a priority list).
    _jax_aliases = {
        "jax_enable_x64": ("enable_x64", bool),
        "jax_debug_nans": ("debug_nans", bool),
        "jax_debug_infs": ("debug_infs", bool),
        "jax_log_compiles": ("log_compiles", bool),
        "jax_compilation_cache_dir": ("compilation_cache_dir", None),
        "jax_compilation_cache_max_size": ("compilation_cache_max_size", int),
        "jax_default_matmul_precision": ("default_matmul_precision", None),
        "jax_platforms": ("platform", lambda v: (str(v).split(",")[0].strip().lower() or None)
                          if v else None),
        "jax_platform_name": ("platform", lambda v: str(v).lower() if v else None),
        "jax_num_cpu_devices": ("cpu_devices", int),
        "x64_enabled": ("enable_x64", None),     # read-only in JAX, an attribute there
    }

    def __init__(self):
        self._values = {name: default() for name, default in self._defaults.items()}
        self._listeners = []
        self._validators = {}

    def __getattr__(self, name):
        values = self.__dict__["_values"]
        if name in values:
            return values[name]
        target = self._target(name)
        if target is not None:
            return values[target]
        raise AttributeError(f"funcgrad.config has no option {name!r}; "
                             f"options: {sorted(self._defaults)}")

    def _target(self, name):
        """funcgrad's option for JAX's spelling ``name`` (an alias in the table, or
        ``jax_<option>`` for any funcgrad option), or None."""
        if name in self._jax_aliases:
            return self._jax_aliases[name][0]
        if name.startswith("jax_") and name[4:] in self._defaults:
            return name[4:]
        return None

    def _resolve(self, name, value):
        """funcgrad's option name and value for ``name`` (which may be JAX's spelling)."""
        if name in self._defaults:
            return name, value
        if name in self._jax_aliases and name != "x64_enabled":
            target, convert = self._jax_aliases[name]
            return target, (convert(value) if convert is not None and value is not None
                            else value)
        if name.startswith("jax_") and name[4:] in self._defaults:
            return name[4:], value
        accepted = sorted(k for k in self._jax_aliases if k != "x64_enabled")
        if name.startswith("jax_"):
            raise ValueError(f"funcgrad.config.update: unknown option {name!r} (JAX option "
                             f"{name!r} has no funcgrad counterpart); JAX names accepted: "
                             f"{accepted} and jax_<option> for every funcgrad option "
                             f"({sorted(self._defaults)})")
        raise ValueError(f"funcgrad.config.update: unknown option {name!r}; "
                         f"options: {sorted(self._defaults)} (or JAX's names {accepted})")

    def update(self, name, value):
        """Set option ``name`` (funcgrad's name, or JAX's: ``"jax_enable_x64"``) to ``value``.

        Example:
            >>> funcgrad.config.update("debug_nans", True)
            >>> funcgrad.config.debug_nans
            True
            >>> funcgrad.config.update("jax_debug_nans", False)   # JAX's name, the same switch
            >>> funcgrad.config.debug_nans
            False
        """
        name, value = self._resolve(name, value)
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
        name = self._target(name) or name
        old = getattr(self, name)
        self.update(name, value)
        try:
            yield
        finally:
            self.update(name, old)

    def validate_with(self, name, check):
        """Call ``check(value)`` before option ``name`` is set; it raises for a bad value."""
        self._validators[name] = check

    def parse_flags_with_absl(self, argv=None):
        """Read JAX-style ``--jax_*`` flags (``--jax_enable_x64``, ``--jax_platforms=cpu``)
        from ``argv`` (``sys.argv`` by default) with absl, as ``jax.config`` does.

        Example:
            >>> funcgrad.config.parse_flags_with_absl(["prog", "--jax_debug_nans"])
            >>> funcgrad.config.debug_nans
            True
            >>> funcgrad.config.update("debug_nans", False)
        """
        from funcgrad import absl_flags
        absl_flags.parse_jax_flags(self, argv)

    def config_with_absl(self):
        """Define the ``--jax_*`` flags in absl's FLAGS; when the program's absl parses its
        command line (``absl.app.run``), the flags given set these options.

        Example:
            >>> funcgrad.config.config_with_absl()
            >>> from absl import flags
            >>> _ = flags.FLAGS(["prog", "--jax_debug_nans"], known_only=True)
            >>> funcgrad.config.debug_nans
            True
            >>> funcgrad.config.update("debug_nans", False)
        """
        from funcgrad import absl_flags
        absl_flags.define_flags(self)

    def on_change(self, listener):
        """Register ``listener(name, value)``, called after every ``update``."""
        self._listeners.append(listener)


config = Config()
