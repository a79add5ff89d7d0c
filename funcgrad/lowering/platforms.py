"""The platforms funcgrad runs on, and their registry: one file per platform.

A platform (``lowering/cpu.py``, ``lowering/cuda.py``) says how to make its PJRT client, which
XLA compile options it wants, how to register custom-call handlers with it, and, on import,
registers the lowering rules it needs for particular primitives (``prim.def_lowering(rule,
platform=name)``) and the kernels of its linear algebra (``lax.linalg.KERNELS``). Adding a
platform is one new file that subclasses ``Platform`` (a PJRT plugin: ``PluginPlatform`` of
``lowering/pjrt_plugin.py``, as ``cuda.py``, ``rocm.py`` and ``tpu.py`` do), calls
``register`` and is imported by ``lowering/backend.py``. A name no file registers is handed to
the finders (``add_finder``): a PJRT plugin found by that name becomes a platform on the spot.

Example:
    >>> from funcgrad.lowering import platforms
    >>> platforms.get("cpu").name, platforms.get("gpu").name
    ('cpu', 'cuda')
"""


class Platform:
    """What funcgrad needs to know of one PJRT platform; subclass it, one file per platform.

    ``name``: the lowering platform name ('cpu', 'cuda'); ``aliases``: other names users or PJRT
    devices give it ('gpu'); ``priority``: the default backend is the installed platform of
    highest priority; ``compile_options``: XLA options set on every compilation unless
    ``XLA_FLAGS`` names them.
    """

    name = None
    aliases = ()
    priority = 0
    compile_options = {}

    def is_installed(self):
        """Whether the platform's runtime is present (a client may still fail to start)."""
        return True

    def make_client(self, config):
        """A new PJRT client for this platform."""
        raise TypeError(f"platform {self.name!r} defines no make_client")

    def register_custom_call(self, target, handler, api_version=1):
        """Make XLA FFI ``handler`` (a PyCapsule, or a dict of stage -> capsule) known as
        custom-call ``target`` before code that calls it is compiled."""
        raise TypeError(f"platform {self.name!r} cannot register custom calls")


_platforms = {}     # name and aliases -> Platform
_finders = []       # name -> Platform or None, asked for names no file registered


def add_finder(finder):
    """Ask ``finder(name)`` for a Platform when ``get`` meets a name not registered."""
    _finders.append(finder)


def register(platform):
    """Add ``platform`` (an instance of a ``Platform`` subclass) under its name and aliases."""
    for key in (platform.name,) + tuple(platform.aliases):
        _platforms[key] = platform
    return platform


def get(name):
    """The platform called ``name`` (or one of its aliases); ValueError naming the known ones.

    Example:
        >>> from funcgrad.lowering.platforms import get
        >>> get("cpu").priority
        0
    """
    try:
        return _platforms[name]
    except KeyError:
        pass
    for finder in _finders:
        found = finder(name)
        if found is not None:
            return register(found)
    known = sorted({p.name for p in _platforms.values()})
    raise ValueError(f"funcgrad: unknown platform {name!r} (known: "
                     f"{', '.join(repr(k) for k in known)}; a PJRT plugin of another name is "
                     "found through PJRT_NAMES_AND_LIBRARY_PATHS='name:/path/to/plugin.so' or "
                     "a 'jax_plugins' entry point)")


def by_priority():
    """Every registered platform, the preferred default first."""
    unique = {p.name: p for p in _platforms.values()}
    return sorted(unique.values(), key=lambda p: -p.priority)


def name_of_device(device):
    """The lowering platform name of a PJRT ``device`` ('gpu' devices are 'cuda')."""
    return get(device.platform).name
