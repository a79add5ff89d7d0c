"""``Exported``: a function lowered to StableHLO for one or more platforms, with its signature,
weights and (optionally) its backward pass; and its bytes (``serialize`` / ``deserialize``).

Example:
    >>> import funcgrad, funcgrad.numpy as jnp
    >>> from funcgrad import export
    >>> exp = export.export(lambda x, y: (x * y, x + y))(jnp.ones(2), jnp.ones(2))
    >>> exp.in_avals, exp.out_tree
    ((ShapeDtypeStruct(shape=(2,), dtype=float32), ShapeDtypeStruct(shape=(2,), dtype=float32)), PyTreeDef((*, *)))
    >>> again = export.deserialize(exp.serialize())
    >>> again.call(jnp.full(2, 3.0), jnp.ones(2))
    (Array([3., 3.], dtype=float32), Array([4., 4.], dtype=float32))
"""
import functools
import threading

import numpy as np
from jaxlib import _jax

from funcgrad import tree_util
from funcgrad.core import dtypes
from funcgrad.core.avals import ShapedArray
from funcgrad.core.values import aval_of
from funcgrad.export import artifact, symbolic
from funcgrad.export.call import call_exported_p
from funcgrad.lowering import backend, mlir
from funcgrad.lowering.array import Array, device_put
from funcgrad.lowering.dispatch import JitFunction
from funcgrad.transforms.custom_derivatives import custom_vjp
from funcgrad.transforms.eval_shape import ShapeDtypeStruct


MAX_VJP_ORDER = 3


class Exported:
    """An exported function: call it with ``call``, store it with ``serialize`` or
    ``funcgrad.export.save``.

    Attributes: ``fun_name``; ``in_tree`` / ``out_tree`` (the PyTreeDefs of ``(args, kwargs)``
    and of the result); ``in_avals`` / ``out_avals`` (``ShapeDtypeStruct``\\ s, with symbolic
    dimensions where exported so); ``platforms``; ``constraints`` (on the symbols);
    ``weight_names`` and ``weights`` (the stored parameters and constants, NumPy arrays);
    ``vjp_order`` (how many levels of backward pass are stored, 0 to 3).

    Example:
        >>> from funcgrad import export
        >>> exp = export.export(jnp.cos)(jnp.zeros(3))
        >>> exp.fun_name, exp.platforms, exp.vjp_order
        ('cos', ('cpu',), 0)
        >>> exp.call(jnp.zeros(3))
        Array([1., 1., 1.], dtype=float32)
    """

    def __init__(self, *, fun_name, in_tree, out_tree, in_avals, out_avals, platforms,
                 modules, weight_names, weights, symbols, constraints, vjp=None,
                 stablehlo_version=None):
        self.fun_name = fun_name
        self.in_tree, self.out_tree = in_tree, out_tree
        self.in_avals, self.out_avals = tuple(in_avals), tuple(out_avals)
        self.platforms = tuple(platforms)
        self.weight_names = tuple(weight_names)
        self.weights = tuple(np.asarray(w) for w in weights)
        self.symbols = dict(symbols)      # symbol -> the prime it had in the stored module
        self.constraints = tuple(str(c) for c in constraints)
        self.stablehlo_version = stablehlo_version
        # every symbol is a size of at least 1, besides the exported constraints
        self._constraints = [symbolic.Constraint(f"{s} >= 1") for s in self.symbols] + [
            symbolic.Constraint(c) for c in self.constraints]
        self._modules = dict(modules)     # platform -> StableHLO portable artifact bytes
        self._vjp = vjp
        self._lock = threading.Lock()
        self._templates = {}              # platform -> module template
        self._texts = {}                  # (platform, sizes) -> module text
        self._device_weights = {}         # device -> weight Arrays
        self._differentiable = None

    # --- description ----------------------------------------------------------------------
    @property
    def vjp_order(self):
        return 0 if self._vjp is None else 1 + self._vjp.vjp_order

    def vjp(self):
        """The exported backward pass: an ``Exported`` taking (weights..., args..., output
        cotangents...) as flat arrays and returning the cotangents of the floating-point
        args (``ValueError`` when exported without ``vjp_order``)."""
        if self._vjp is None:
            raise ValueError(f"{self.describe()} was exported without its backward pass; "
                             f"export it with vjp_order=1")
        return self._vjp

    def describe(self):
        return f"exported function {self.fun_name}"

    def __repr__(self):
        ins = ", ".join(_aval_str(a) for a in self.in_avals)
        outs = ", ".join(_aval_str(a) for a in self.out_avals)
        return (f"Exported({self.fun_name}: ({ins}) -> ({outs}), platforms={self.platforms}, "
                f"{len(self.weights)} weights, vjp_order={self.vjp_order})")

    def mlir_module(self, platform=None):
        """The stored StableHLO module of ``platform`` (default: the first exported), as text.
        Symbolic dimensions appear at the prime values they were traced with (``symbols``).

        Example:
            >>> from funcgrad import export
            >>> print(export.export(jnp.sin)(jnp.zeros(2)).mlir_module())
            module @funcgrad_sin {
              func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
                %0 = stablehlo.sine %arg0 : tensor<2xf32>
                return %0 : tensor<2xf32>
              }
            }
            <BLANKLINE>
        """
        platform = self._platform_name(platform or self.platforms[0])
        if platform not in self._modules:
            raise ValueError(f"{self.describe()}: no module for platform {platform!r} (it has "
                             f"{self.platforms})")
        return _module_text(self._modules[platform])

    def _platform_name(self, platform):
        from funcgrad.lowering import platforms as _platforms
        try:
            return _platforms.get(platform).name
        except ValueError:
            return platform

    # --- what call_exported needs -----------------------------------------------------------
    def out_avals_at(self, sizes):
        return [ShapedArray(symbolic.concrete_shape(a.shape, sizes), a.dtype)
                for a in self.out_avals]

    def module_text_at(self, platform, sizes):
        """The module text for ``platform`` at symbol values ``sizes`` (None if the platform
        was not exported)."""
        if platform not in self._modules:
            return None
        key = (platform, tuple(sorted(sizes.items())))
        text = self._texts.get(key)
        if text is None:
            with self._lock:
                template = self._templates.get(platform)
                if template is None:
                    template = self._templates[platform] = symbolic.make_template(
                        _module_text(self._modules[platform]), self.symbols)
            text = symbolic.specialize(template, sizes)
            if len(self._texts) > 64:
                self._texts.clear()
            self._texts[key] = text
        return text

    # --- calling ----------------------------------------------------------------------------
    def call(self, *args, **kwargs):
        """Run the exported function on ``args`` (arrays, NumPy values or scalars, with the
        structure, dtypes and shapes it was exported for); works eagerly and under ``jit``,
        ``vmap`` and (when exported with ``vjp_order=1``) ``grad``.

        Example:
            >>> from funcgrad import export
            >>> exp = export.export(lambda x: {"y": x * 2})(jnp.zeros(2))
            >>> exp.call(jnp.arange(2.0))
            {'y': Array([0., 2.], dtype=float32)}
        """
        leaves, treedef = tree_util.tree_flatten((args, kwargs))
        name = f"{self.describe()}.call"
        if treedef != self.in_tree:
            raise TypeError(f"{name}: the arguments have structure {treedef}, but the function "
                            f"was exported for {self.in_tree}")
        leaves = [self._check_leaf(name, i, x, a)
                  for i, (x, a) in enumerate(zip(leaves, self.in_avals))]
        outs = self.call_flat(leaves)
        return self.out_tree.unflatten(outs)

    def _check_leaf(self, name, i, x, spec):
        try:
            aval = aval_of(x)
        except TypeError as e:
            raise TypeError(f"{name}: argument leaf {i}: {e}") from None
        if aval.dtype == spec.dtype:
            return x
        want = dtypes.canonicalize(spec.dtype)
        if aval.dtype != want:
            if aval.weak_type and np.ndim(x) == 0 and not hasattr(x, "aval"):
                return device_put(np.asarray(x, want))
            raise TypeError(f"{name}: argument leaf {i} has dtype {aval.dtype}, but the "
                            f"function was exported for {want} (shape {_aval_str(spec)})")
        return x

    def sizes_of(self, leaves, name=None):
        """The symbol values that the shapes of ``leaves`` give (checked against the exported
        shapes and the constraints).

        Example:
            >>> from funcgrad import export
            >>> x = funcgrad.ShapeDtypeStruct(export.symbolic_shape("2*b, 3"), jnp.float32)
            >>> export.export(lambda x: x)(x).sizes_of([jnp.zeros((8, 3))])
            {'b': 4}
        """
        shapes = [aval_of(x).shape for x in leaves]
        return symbolic.solve(name or f"{self.describe()}.call",
                              [a.shape for a in self.in_avals], shapes, self._constraints)

    def weights_on(self, device=None):
        """The weights as Arrays on ``device`` (default: the default device), copied once."""
        device = device or backend.default_device()
        arrays = self._device_weights.get(device)
        if arrays is None:
            arrays = self._device_weights[device] = [device_put(w, device) for w in self.weights]
        return arrays

    def call_flat(self, leaves):
        """Call on the flat argument leaves; returns the flat outputs."""
        if self._vjp is None:
            return self._runner(*self.weights_on(_device_of(leaves)), *leaves)
        if self._differentiable is None:
            self._differentiable = self._make_differentiable()
        return self._differentiable(*leaves)

    @functools.cached_property
    def _runner(self):
        """``call_exported`` of (weights..., args...) under ``jit``: an eager call takes jit's
        fast path (one cache lookup and the execute); the symbol values are solved, and the
        shapes checked, when a new signature is traced."""
        n_weights, target = len(self.weights), self

        def run(*flat):
            sizes = tuple(sorted(target.sizes_of(flat[n_weights:]).items()))
            return call_exported_p.bind(*flat, target=target, sizes=sizes)
        run.__name__ = self.fun_name
        return JitFunction(run)

    def _make_differentiable(self):
        inexact_in = [dtypes.is_inexact(a.dtype) for a in self.in_avals]
        inexact_out = [dtypes.is_inexact(a.dtype) for a in self.out_avals]
        target = self

        def primal(*leaves):
            return target._runner(*target.weights_on(_device_of(leaves)), *leaves)

        def fwd(*leaves):
            # the differentiable function itself, not ``primal``: under an outer derivative
            # (grad of grad) its own rule applies again
            return fn(*leaves), leaves

        def bwd(leaves, cts):
            cts = [c for c, keep in zip(cts, inexact_out) if keep]
            weights = target.weights_on(_device_of(leaves))
            grads = iter(target._vjp.call_flat(list(weights) + list(leaves) + cts))
            return tuple(next(grads) if keep else None for keep in inexact_in)

        primal.__name__ = self.fun_name
        fn = custom_vjp(primal)
        fn.defvjp(fwd, bwd)
        return fn

    # --- bytes ------------------------------------------------------------------------------
    def header(self):
        """The JSON-able header describing this function (without the section table)."""
        from funcgrad import __version__
        return {
            "kind": "funcgrad.export", "fun_name": self.fun_name,
            "funcgrad_version": __version__, "jaxlib_version": _jaxlib_version(),
            "stablehlo_version": self.stablehlo_version,
            "in_tree": artifact.tree_to_json(self.in_tree, "the arguments"),
            "out_tree": artifact.tree_to_json(self.out_tree, "the result"),
            "in_avals": [_aval_json(a) for a in self.in_avals],
            "out_avals": [_aval_json(a) for a in self.out_avals],
            "platforms": list(self.platforms),
            "symbols": self.symbols, "constraints": list(self.constraints),
            "weight_names": list(self.weight_names),
            "modules": {p: f"module.{p}" for p in self.platforms},
            "vjp": "vjp" if self._vjp is not None else None,
        }

    def serialize(self):
        """The artifact's bytes (see ``docs/export.md``); ``funcgrad.export.deserialize``
        reads them back.

        Example:
            >>> from funcgrad import export
            >>> blob = export.export(jnp.sin)(jnp.zeros(2)).serialize()
            >>> blob[:8]
            b'FGEXPORT'
        """
        sections = {f"module.{p}": self._modules[p] for p in self.platforms}
        sections["weights"] = artifact.weights_to_safetensors(self.weight_names, self.weights)
        if self._vjp is not None:
            sections["vjp"] = self._vjp.serialize()
        return artifact.pack(self.header(), sections)


def deserialize(data, where="funcgrad.export.deserialize", _depth=0):
    """The ``Exported`` that ``Exported.serialize`` wrote; ``ExportFormatError`` for corrupt or
    truncated bytes and for an artifact from a newer funcgrad.

    Example:
        >>> from funcgrad import export
        >>> exp = export.export(lambda x: x + 1)(jnp.zeros(2))
        >>> export.deserialize(exp.serialize()).call(jnp.ones(2))
        Array([2., 2.], dtype=float32)
    """
    header, sections = artifact.unpack(data, where)
    req = artifact.require
    if header.get("kind") != "funcgrad.export":
        raise artifact.ExportFormatError(f"{where}: header kind is {header.get('kind')!r}, "
                                         f"not 'funcgrad.export'")
    try:
        platforms = [str(p) for p in req(header, "platforms", list, where)]
        modules = {}
        for p in platforms:
            name = req(header, "modules", dict, where).get(p)
            if name not in sections:
                raise artifact.ExportFormatError(f"{where}: the module of platform {p!r} is "
                                                 f"missing")
            modules[p] = sections[name]
        names = [str(n) for n in req(header, "weight_names", list, where)]
        weights = artifact.weights_from_safetensors(sections.get("weights", b""), names, where)
        vjp = None
        if header.get("vjp") is not None:
            if _depth >= MAX_VJP_ORDER:
                raise artifact.ExportFormatError(f"{where}: backward passes nest deeper than "
                                                 f"vjp_order {MAX_VJP_ORDER}")
            vjp = deserialize(sections[header["vjp"]], where + " (backward pass)", _depth + 1)
        symbols = {str(k): int(v) for k, v in req(header, "symbols", dict, where).items()}
        if not set(symbols.values()) <= set(symbolic.SENTINELS_A):
            raise artifact.ExportFormatError(f"{where}: symbol values {symbols} are not the "
                                             f"primes symbolic dimensions are traced with")
        return Exported(
            fun_name=str(header.get("fun_name", "exported")),
            in_tree=artifact.tree_from_json(header.get("in_tree"), where),
            out_tree=artifact.tree_from_json(header.get("out_tree"), where),
            in_avals=[_aval_from_json(a, where) for a in req(header, "in_avals", list, where)],
            out_avals=[_aval_from_json(a, where) for a in req(header, "out_avals", list, where)],
            platforms=platforms, modules=modules, weight_names=names, weights=weights,
            symbols=symbols, constraints=req(header, "constraints", list, where), vjp=vjp,
            stablehlo_version=header.get("stablehlo_version"))
    except artifact.ExportFormatError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise artifact.ExportFormatError(f"{where}: malformed header ({e})") from None


def _device_of(leaves):
    """The device of the first Array among ``leaves`` (where the call will run), else None
    (the default device)."""
    for x in leaves:
        if type(x) is Array:
            return x.device
    return None


def _module_text(portable):
    """The text of a StableHLO portable artifact (deserialized in a fresh MLIR context)."""
    ctx = mlir.new_context()
    with ctx:
        try:
            module = _jax.mlir.deserialize_portable_artifact(portable)
        except Exception as e:
            raise artifact.ExportFormatError(
                f"funcgrad.export: the StableHLO module cannot be read by this jaxlib "
                f"({_jaxlib_version()}); it may come from a newer StableHLO version: {e}") from e
        return str(module)


def _jaxlib_version():
    import jaxlib
    return jaxlib.__version__


def _aval_str(a):
    dims = ",".join(str(d) for d in a.shape)
    return f"{np.dtype(a.dtype).name}[{dims}]"


def _aval_json(a):
    return {"shape": symbolic.shape_to_json(a.shape), "dtype": np.dtype(a.dtype).name}


def _aval_from_json(entry, where):
    import ml_dtypes
    name = entry.get("dtype") if isinstance(entry, dict) else None
    try:
        dtype = np.dtype(getattr(ml_dtypes, name, name))   # bfloat16 & co. by their names
    except (TypeError, KeyError):
        dtype = None
    if dtype is None or not isinstance(entry.get("shape"), list):
        raise artifact.ExportFormatError(f"{where}: malformed aval {entry!r}")
    return ShapeDtypeStruct(symbolic.shape_from_json(entry["shape"], where), dtype)
