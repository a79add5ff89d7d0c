"""Keep docs/install.md's supported-versions table true.

Checks the table against pyproject.toml (classifiers, the jaxlib range, the pins of the cuda13/
cuda12/tpu extras) and, with ``--running``, that the interpreter running this script and its
jaxlib are the table's row for that Python (.ci/run calls it in each environment it builds, so a
newer jaxlib on the index makes CI say which row to update).

    python tools/check_versions.py [--running]
"""
import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
COLUMNS = ("python", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "libtpu", "ci")
_ROW = re.compile(r"^\| (3\.\d+) \| ([\w.*]+) \| ([\w.*]+) \| ([\w.*]+) \| ([\w.*]+) \| (.+?) \|$",
                  re.M)


def _vt(text):
    return tuple(int(p) for p in re.match(r"[\d.]*\d", text).group().split("."))


def table_rows(root=ROOT):
    """The rows of docs/install.md's table, as dicts keyed by COLUMNS."""
    return [dict(zip(COLUMNS, row)) for row in _ROW.findall((root / "docs/install.md").read_text())]


def _marker_for(python):
    return "python_version < '3.12'" if _vt(python) < (3, 12) else "python_version >= '3.12'"


def check_pyproject(root=ROOT):
    """Disagreements between the table and pyproject.toml (an empty list when none)."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    rows = table_rows(root)
    if not rows:
        return ["docs/install.md has no supported-versions table"]
    problems = []
    classified = [c.rsplit(" ", 1)[1] for c in project.get("classifiers", [])
                  if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    if classified != [r["python"] for r in rows]:
        problems.append(f"pyproject classifiers list Python {classified}, the table "
                        f"{[r['python'] for r in rows]}")
    [jaxlib_req] = [d for d in project["dependencies"] if d.startswith("jaxlib")]
    low, high = re.fullmatch(r"jaxlib>=([\d.]+),<([\d.]+)", jaxlib_req).groups()
    extras = project["optional-dependencies"]
    for row in rows:
        if not _vt(low) <= _vt(row["jaxlib"]) < _vt(high):
            problems.append(f"Python {row['python']}: jaxlib {row['jaxlib']} is outside "
                            f"pyproject's {jaxlib_req}")
        marker = _marker_for(row["python"])
        wanted = {"cuda13": [f"jaxlib=={row['jaxlib']}",
                             f"jax-cuda13-plugin[with-cuda]=={row['jax-cuda13-plugin']}"],
                  "cuda12": [f"jaxlib=={row['jaxlib']}",
                             f"jax-cuda12-plugin[with-cuda]=={row['jax-cuda12-plugin']}"],
                  "tpu": [f"jaxlib=={row['jaxlib']}", f"libtpu=={row['libtpu']}"]}
        for extra, reqs in wanted.items():
            pinned = [r.split(";")[0].strip() for r in extras.get(extra, [])
                      if r.split(";")[-1].strip() == marker]
            if pinned != reqs:
                problems.append(f"Python {row['python']}: extra [{extra}] pins {pinned}, the "
                                f"table says {reqs}")
        for plugin in ("jax-cuda13-plugin", "jax-cuda12-plugin"):
            if row[plugin] != row["jaxlib"]:
                problems.append(f"Python {row['python']}: {plugin} {row[plugin]} is not at "
                                f"jaxlib's version {row['jaxlib']}")
    return problems


def check_running(root=ROOT, python=None, jaxlib=None):
    """Whether this interpreter's Python and jaxlib are the table's row for that Python."""
    if python is None:
        python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if jaxlib is None:
        from jaxlib import version
        jaxlib = version.__version__
    row = next((r for r in table_rows(root) if r["python"] == python), None)
    if row is None:
        return [f"docs/install.md has no row for Python {python}"]
    if row["jaxlib"] != jaxlib:
        return [f"Python {python} runs jaxlib {jaxlib} (the newest pip offers within "
                f"pyproject's range), but docs/install.md's row says {row['jaxlib']}: update "
                f"the table and the extras' pins in pyproject.toml"]
    return []


def main(argv):
    problems = check_pyproject()
    if "--running" in argv:
        problems += check_running()
    for problem in problems:
        print(f"check_versions: {problem}")
    if not problems:
        print("check_versions: docs/install.md's table agrees"
              + (" (and with this Python and jaxlib)" if "--running" in argv else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
