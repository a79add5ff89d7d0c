"""Transfer guards: log or refuse copies between the host and devices (``funcgrad.transfer_guard``).

The levels live in ``funcgrad.config`` (``transfer_guard_host_to_device`` and its two
siblings). This module mirrors them in ``active``, a flag the copy points in
``lowering/array.py`` and ``lowering/eager.py`` read before calling ``check``: while every
guard is ``"allow"`` a copy costs one global read more.

Example:
    >>> from funcgrad.lowering import transfer_guard
    >>> with funcgrad.transfer_guard("log"):
    ...     transfer_guard.active[0]
    True
    >>> transfer_guard.active[0]
    False
"""
import logging

from funcgrad.config import config

logger = logging.getLogger("funcgrad")

_KINDS = {"host_to_device": "host-to-device", "device_to_host": "device-to-host",
          "device_to_device": "device-to-device"}
_levels = {kind: "allow" for kind in _KINDS}
active = [False]      # any guard other than "allow"


def _sync(name=None, value=None):
    for kind in _KINDS:
        _levels[kind] = getattr(config, f"transfer_guard_{kind}")
    active[0] = any(level != "allow" for level in _levels.values())


config.on_change(lambda name, value: _sync() if name.startswith("transfer_guard_") else None)
_sync()


def check(kind, explicit, what):
    """Apply the ``kind`` guard ('host_to_device', 'device_to_host' or 'device_to_device')
    to one copy, described by ``what`` (its shape and dtype, its destination)."""
    level = _levels[kind]
    if level == "allow" or (explicit and level in ("log", "disallow")):
        return
    manner = "explicit" if explicit else "implicit"
    if level.startswith("log"):
        logger.warning("%s %s transfer: %s", manner.capitalize(), _KINDS[kind], what)
        return
    hint = ("" if explicit else " Use funcgrad.device_put / funcgrad.device_get for a "
            "deliberate copy, or transfer_guard('allow').")
    raise RuntimeError(f"Disallowed {_KINDS[kind]} transfer: {what} ({manner} copy under "
                       f"transfer_guard_{kind}={level!r}).{hint}")
