"""JAX-style command-line flags (``--jax_enable_x64``, ...) read with absl, for scripts and
tests that call ``config.parse_flags_with_absl()`` or ``config.config_with_absl()`` first.

Each of JAX's option names that ``funcgrad.config`` accepts becomes an absl flag; a flag given
on the command line sets that option, one left out changes nothing.

Example:
    >>> funcgrad.config.parse_flags_with_absl(["train.py", "--jax_enable_x64", "--lr=0.1"])
    >>> funcgrad.config.enable_x64
    True
    >>> funcgrad.config.update("enable_x64", False)
"""
import itertools
import sys

# JAX's flag name -> (absl definer name, help); the values are applied with config.update.
_FLAGS = {
    "jax_enable_x64": ("DEFINE_bool", "Enable 64-bit types (funcgrad option enable_x64)."),
    "jax_debug_nans": ("DEFINE_bool", "Raise on NaNs in outputs (funcgrad option debug_nans)."),
    "jax_debug_infs": ("DEFINE_bool", "Raise on infinities in outputs (option debug_infs)."),
    "jax_log_compiles": ("DEFINE_bool", "Log every XLA compilation (option log_compiles)."),
    "jax_compilation_cache_dir": (
        "DEFINE_string", "Directory of the persistent compilation cache (off when unset)."),
    "jax_default_matmul_precision": (
        "DEFINE_string", "Default precision of float32 matrix products and convolutions."),
    "jax_platforms": ("DEFINE_string", "Comma-separated platforms in priority order; funcgrad "
                                       "uses the first."),
    "jax_platform_name": ("DEFINE_string", "The platform to run on (cpu, gpu, ...)."),
    "jax_num_cpu_devices": ("DEFINE_integer", "Number of CPU devices."),
}


def _default(config, name):
    if name in ("jax_platforms", "jax_platform_name"):
        return config.platform
    if name == "jax_default_matmul_precision":
        value = config.default_matmul_precision
        return None if value is None else str(value)
    return getattr(config, name)


def define_flags(config, flag_values=None):
    """Define the ``--jax_*`` flags in ``flag_values`` (absl's global FLAGS by default), with
    ``config``'s current values as defaults; a flag set when absl parses the command line is
    applied to ``config``. Flags already defined (by JAX, or an earlier call) are reused."""
    from absl import flags
    flag_values = flags.FLAGS if flag_values is None else flag_values
    for name, (definer, help_text) in _FLAGS.items():
        if name in flag_values:
            continue
        getattr(flags, definer)(name, _default(config, name), help_text,
                                flag_values=flag_values)
        applied = {}

        def apply(value, name=name, applied=applied):
            # absl validates every flag at each parse: apply a given flag's value once
            if flag_values[name].present and applied.get(name, apply) != value:
                applied[name] = value
                config.update(name, value)
            return True
        flags.register_validator(name, apply, flag_values=flag_values)
    return flag_values


def _flag_name(arg):
    name = arg.lstrip("-").split("=", 1)[0]
    return name[2:] if name.startswith("nojax") else name


def parse_jax_flags(config, argv=None, flag_values=None):
    """Parse the ``--jax*`` arguments of ``argv`` (``sys.argv``; those before a ``--``) into
    ``config``. Other arguments are left for the program's own parser."""
    argv = sys.argv if argv is None else argv
    own = [a for a in itertools.takewhile(lambda a: a != "--", argv[1:])
           if a.startswith("--jax") or a.startswith("--nojax")]
    flag_values = define_flags(config, flag_values)
    flag_values([argv[0] if argv else ""] + own, known_only=True)
    for name in dict.fromkeys(_flag_name(a) for a in own):
        if name in _FLAGS:
            config.update(name, flag_values[name].value)
