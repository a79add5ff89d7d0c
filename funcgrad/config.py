"""Global switches: ``funcgrad.config.update("enable_x64", True)``.

Options: ``enable_x64``, ``cpu_devices``, ``platform``, ``debug_nans`` and ``debug_infs``
(raise ``FloatingPointError`` where a NaN / an infinity is made, ``docs/debugging.md``),
``log_compiles`` (log each XLA compilation), ``compilation_cache_dir`` and
``compilation_cache_max_size`` (the persistent compilation cache, off by default),
``default_matmul_precision``, ``threefry_partitionable`` (``funcgrad.random``'s counter
layout, as JAX's ``jax_threefry_partitionable``), ``default_device``,
``transfer_guard_host_to_device`` / ``_device_to_host`` / ``_device_to_device`` (and
``transfer_guard``, which sets the three), ``numpy_dtype_promotion`` and
``numpy_rank_promotion``; the last ones also have context managers (``funcgrad.default_device``,
``funcgrad.transfer_guard``, ``funcgrad.numpy_dtype_promotion``, ``funcgrad.numpy_rank_promotion``). Each reads an environment variable
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
        # where new arrays and computations without array operands go: a Device, a platform
        # name ('cpu', 'cuda'/'gpu'), or None (the default backend's first device)
        "default_device": lambda: None,
        # guards on host<->device and device<->device copies (lowering/transfer_guard.py):
        # 'allow', 'log', 'disallow', 'log_explicit', 'disallow_explicit'
        "transfer_guard_host_to_device": lambda: _env("TRANSFER_GUARD", "allow"),
        "transfer_guard_device_to_host": lambda: _env("TRANSFER_GUARD", "allow"),
        "transfer_guard_device_to_device": lambda: _env("TRANSFER_GUARD", "allow"),
        # funcgrad.numpy's implicit dtype promotion ('standard' or 'strict') and rank
        # promotion ('allow', 'warn' or 'raise') in binary operations
        "numpy_dtype_promotion": lambda: _env("NUMPY_DTYPE_PROMOTION", "standard"),
        "numpy_rank_promotion": lambda: _env("NUMPY_RANK_PROMOTION", "allow"),
    }

    # options that set several others at once (JAX's jax_transfer_guard)
    _groups = {"transfer_guard": ("transfer_guard_host_to_device",
                                  "transfer_guard_device_to_host",
                                  "transfer_guard_device_to_device")}

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
        group = name[4:] if name.startswith("jax_") and name[4:] in self._groups else name
        if group in self._groups:
            for member in self._groups[group]:
                self.update(member, value)
            return
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
        if name.startswith("jax_") and name[4:] in self._groups:
            name = name[4:]
        if name in self._groups:
            with contextlib.ExitStack() as stack:
                for member in self._groups[name]:
                    stack.enter_context(self.override(member, value))
                yield
            return
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
            >>> _ = flags.FLAGS(["prog", "--jax_debug_infs"], known_only=True)
            >>> funcgrad.config.debug_infs
            True
            >>> funcgrad.config.update("debug_infs", False)
        """
        from funcgrad import absl_flags
        absl_flags.define_flags(self)

    def on_change(self, listener):
        """Register ``listener(name, value)``, called after every ``update``."""
        self._listeners.append(listener)


config = Config()


def _choice_validator(name, choices):
    def check(value):
        if value not in choices:
            raise ValueError(f"funcgrad.config.update: option {name!r} must be one of "
                             f"{list(choices)}, got {value!r}")
    return check


_GUARD_LEVELS = ("allow", "log", "disallow", "log_explicit", "disallow_explicit")
for _name in Config._groups["transfer_guard"]:
    config.validate_with(_name, _choice_validator(_name, _GUARD_LEVELS))
config.validate_with("numpy_dtype_promotion",
                     _choice_validator("numpy_dtype_promotion", ("standard", "strict")))
config.validate_with("numpy_rank_promotion",
                     _choice_validator("numpy_rank_promotion", ("allow", "warn", "raise")))


def _check_default_device(value):
    if value is None or isinstance(value, str) or hasattr(value, "platform"):
        return
    raise ValueError(f"funcgrad.default_device: expected a Device (e.g. funcgrad.devices()[0]), "
                     f"a platform name such as 'cpu', or None; got {value!r}")


config.validate_with("default_device", _check_default_device)


def default_device(device):
    """Within the ``with`` block, new arrays and computations without array operands (a jitted
    function called with NumPy values or Python scalars, ``funcgrad.numpy.ones``...) go to
    ``device``: a Device, a platform name (``'cpu'``), or None for the usual default. Arrays
    already on a device keep computations there. As ``jax.default_device``; the option
    ``config.update("default_device", d)`` sets it for the whole program.

    Example:
        >>> dev = funcgrad.devices()[-1]
        >>> with funcgrad.default_device(dev):
        ...     y = funcgrad.numpy.ones(2) * 3
        >>> y.devices() == {dev}
        True
    """
    return config.override("default_device", device)


def transfer_guard(level):
    """Guard every kind of copy (host to device, device to host, device to device) inside the
    ``with`` block, as ``jax.transfer_guard``: ``"allow"``, ``"log"`` (log implicit copies),
    ``"disallow"`` (raise on implicit copies), ``"log_explicit"`` / ``"disallow_explicit"``
    (log / raise on explicit ones too). Implicit: a NumPy array or Python scalar given to a
    jitted function or an operation, ``np.asarray(x)``, ``float(x)``, printing an array.
    Explicit: ``funcgrad.device_put`` and ``funcgrad.device_get``.

    Example:
        >>> x = funcgrad.numpy.arange(3.0)
        >>> with funcgrad.transfer_guard("disallow"):
        ...     y = funcgrad.device_put(np.ones(3))       # explicit: allowed
        ...     try:
        ...         x + np.ones(3)                         # implicit host-to-device copy
        ...     except RuntimeError as e:
        ...         print(str(e).split(":")[0])
        Disallowed host-to-device transfer
    """
    return config.override("transfer_guard", level)


def transfer_guard_host_to_device(level):
    """As ``transfer_guard``, for host-to-device copies only.

    Example:
        >>> with funcgrad.transfer_guard_host_to_device("disallow"):
        ...     float(funcgrad.numpy.ones(()))          # device-to-host: still allowed
        1.0
    """
    return config.override("transfer_guard_host_to_device", level)


def transfer_guard_device_to_host(level):
    """As ``transfer_guard``, for device-to-host copies only.

    Example:
        >>> x = funcgrad.numpy.arange(3.0)
        >>> with funcgrad.transfer_guard_device_to_host("disallow"):
        ...     funcgrad.device_get(x)                  # explicit: allowed
        array([0., 1., 2.], dtype=float32)
    """
    return config.override("transfer_guard_device_to_host", level)


def transfer_guard_device_to_device(level):
    """As ``transfer_guard``, for copies between devices only.

    Example:
        >>> with funcgrad.transfer_guard_device_to_device("disallow"):
        ...     funcgrad.device_put(funcgrad.numpy.ones(2), funcgrad.devices()[0])
        Array([1., 1.], dtype=float32)
    """
    return config.override("transfer_guard_device_to_device", level)


def numpy_dtype_promotion(mode):
    """Within the ``with`` block, ``"strict"`` makes funcgrad.numpy refuse implicit promotion
    between different dtypes (``float32 + int32``, ``float32 + float16``) with a
    ``TypePromotionError`` (a TypeError) naming them; Python scalars still join arrays of their
    kind or a higher one (``float32_array + 1``). ``"standard"``: JAX's usual promotion. As
    ``jax.numpy_dtype_promotion``.

    Example:
        >>> x, i = funcgrad.numpy.ones(2), funcgrad.numpy.ones(2, dtype="int32")
        >>> with funcgrad.numpy_dtype_promotion("strict"):
        ...     print((x + 1).dtype)
        ...     try:
        ...         x + i
        ...     except TypeError as e:
        ...         print(str(e).split(" have")[0])
        float32
        Input dtypes ('float32', 'int32')
    """
    return config.override("numpy_dtype_promotion", mode)


def numpy_rank_promotion(mode):
    """Within the ``with`` block, implicit rank promotion in funcgrad.numpy's broadcasting
    operations (``(2, 3) + (3,)``: operands of different non-zero ranks) is allowed
    (``"allow"``), warned about (``"warn"``) or an error (``"raise"``). Scalars always
    broadcast. As ``jax.numpy_rank_promotion``.

    Example:
        >>> a, b = funcgrad.numpy.ones((2, 3)), funcgrad.numpy.ones(3)
        >>> with funcgrad.numpy_rank_promotion("raise"):
        ...     print((a + b[None, :]).shape, (a * 2).shape)
        ...     try:
        ...         a + b
        ...     except ValueError as e:
        ...         print(str(e).split(" would")[0])
        (2, 3) (2, 3)
        funcgrad.numpy.add: operands of shapes (2, 3) (3,)
    """
    return config.override("numpy_rank_promotion", mode)
