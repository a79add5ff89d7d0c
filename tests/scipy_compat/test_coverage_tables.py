"""The JAX name lists stored in tools/api_coverage.py match an installed jax (checked in a
subprocess: jax and funcgrad share jaxlib's process state), and docs/api_coverage.md's scipy
section is current."""
import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import api_coverage  # noqa: E402


def test_docs_scipy_section_is_current():
    doc = api_coverage.OUT.read_text()
    section = api_coverage.render_against_jax(api_coverage.collect_against_jax())
    assert section in doc, "docs/api_coverage.md is stale: run python tools/api_coverage.py"


def test_tables_count_present_names():
    rows = {r[0]: r for r in api_coverage.collect_against_jax()}
    title, names, present, missing = rows["nn.initializers"]
    assert missing == [] and len(present) == len(names) == 20
    for sub in ("optimize", "ndimage", "integrate", "fft", "interpolate"):
        assert rows[f"scipy.{sub}"][3] == [], sub
    assert "logsumexp" in rows["scipy.special"][2] and "sqrtm" in rows["scipy.linalg"][2]


def test_stored_jax_names_match_installed_jax():
    pytest.importorskip("jax")
    script = textwrap.dedent("""
        import importlib, json
        import jax
        subs = %r
        dists = %r
        pub = lambda m: sorted(n for n in dir(m) if not n.startswith("_"))
        out = {"version": jax.__version__,
               "scipy": {s: pub(importlib.import_module("jax.scipy." + s)) for s in subs},
               "stats": {d: pub(getattr(importlib.import_module("jax.scipy.stats"), d))
                         for d in dists},
               "init": pub(importlib.import_module("jax.nn.initializers"))}
        print(json.dumps(out))
    """) % (list(api_coverage.JAX_SCIPY), list(api_coverage.JAX_STATS))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    ref = json.loads(res.stdout.strip().splitlines()[-1])
    if ref["version"] != api_coverage.JAX_VERSION:
        pytest.skip(f"the stored lists are of jax {api_coverage.JAX_VERSION}, installed is "
                    f"{ref['version']}")
    for sub, names in api_coverage.JAX_SCIPY.items():
        assert sorted(names.split()) == ref["scipy"][sub], sub
    for dist, names in api_coverage.JAX_STATS.items():
        assert sorted(names.split()) == ref["stats"][dist], dist
    assert sorted(api_coverage.JAX_NN_INITIALIZERS.split()) == ref["init"]
