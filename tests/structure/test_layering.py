"""The layers of funcgrad hold: no module imports a module of a higher layer.

Both top-level and function-local imports count (an import inside a function is still a
dependency, only a later one). The layers, lowest first:

    core      avals, dtypes, Primitive, interpreters (eval, staging, jvp, batch), Jaxpr, pytrees
    lax       primitives and their rules
    lowering  Jaxpr -> StableHLO, backends (one file per platform), Array, dispatch
    numpy     the NumPy / array-API surface
    api       the transformations' user API (transforms/), random numbers, debugging, files,
              mixed precision (amp/), quantization (quantize/),
              exported artifacts (export/), multi-process runs (distributed/), meshes and
              shardings (sharding)
    nn, data  PyTorch-style modules and data loading
    optim     optimizers (over nn's parameters)
    top       the demo and test helpers

A module may import its own layer and the ones below it.
"""
import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "funcgrad"

LAYERS = [
    {"core", "config", "absl_flags", "tree_util", "tree"},
    {"lax"},
    {"lowering"},
    {"numpy"},
    {"transforms", "random", "debug", "serialization", "checkpoint_header", "environment",
     "amp", "quantize", "export", "profiler", "distributed", "custom_batching", "dlpack",
     "dtypes", "errors", "image", "sharding", "ad_checkpoint"},
    {"nn", "data", "scipy", "quantization"},
    {"optim"},
    {"demo", "demo_train", "test_util", "__init__"},
]
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _unit(dotted):
    """The layer unit of module ``funcgrad.<unit>...`` (None for non-funcgrad modules)."""
    parts = dotted.split(".")
    if parts[0] != "funcgrad":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path):
    """(imported module, line) for every import statement in ``path``, relative ones resolved."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    module = ".".join(rel.parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    if path.name == "__init__.py":
        package = module.rsplit(".", 1)[0] if module.endswith(".__init__") else module
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[:len(up) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            if base == "funcgrad":
                for alias in node.names:
                    yield f"funcgrad.{alias.name}", node.lineno
            else:
                yield base, node.lineno


def upward_imports():
    """Every import that points from a lower layer to a higher one, as readable lines."""
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        src = _unit(".".join(rel.parts).replace(".__init__", "") or "funcgrad")
        if rel.parts == ("funcgrad", "__init__"):
            src = "__init__"
        for target, line in _imports(path):
            dst = _unit(target)
            if dst is None or dst == src:
                continue
            if dst not in LEVEL:
                continue   # a name imported from funcgrad's own __init__ (e.g. a function)
            if LEVEL[dst] > LEVEL[src]:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {src} (layer "
                           f"{LEVEL[src]}) imports {target} (layer {LEVEL[dst]})")
    return bad


def test_every_module_belongs_to_a_layer():
    units = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.is_file() and p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").exists())}
    missing = sorted(units - set(LEVEL))
    assert not missing, f"modules with no layer in LAYERS: {missing}"


def test_no_import_points_up_a_layer():
    bad = upward_imports()
    assert not bad, "imports that point up a layer:\n" + "\n".join(bad)


if __name__ == "__main__":
    print("\n".join(upward_imports()) or "no upward imports")
