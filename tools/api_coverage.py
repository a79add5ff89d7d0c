"""Write docs/api_coverage.md: the public callables of funcgrad.numpy (and its linalg/fft
submodules when present), grouped by the module that defines them, with the Python array API
standard (2024.12) names marked; then present/missing tables of funcgrad.scipy,
funcgrad.nn.initializers and funcgrad.lax against the names of jax.scipy, jax.nn.initializers
and jax.lax (the jax.lax list is stored in tools/data/jax_lax_names.txt); then funcgrad.nn and
funcgrad.nn.functional against torch.nn and torch.nn.functional (tools/torch_coverage.py); then
the kept array-API test-suite section.

Usage:
    python tools/api_coverage.py            # rewrite docs/api_coverage.md
    python tools/api_coverage.py --check    # exit 1 if the file is out of date
"""
import argparse
import importlib
import inspect
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "docs" / "api_coverage.md"
sys.path.insert(0, str(ROOT / "tools"))
import torch_coverage  # noqa: E402  (the torch.nn / torch.nn.functional part)
from coverage_table import render_coverage  # noqa: E402

# The array API standard 2024.12: functions of the main namespace.
ARRAY_API_FUNCTIONS = """
abs acos acosh add all any arange argmax argmin argsort asarray asin asinh astype atan atan2
atanh bitwise_and bitwise_invert bitwise_left_shift bitwise_or bitwise_right_shift bitwise_xor
broadcast_arrays broadcast_to can_cast ceil clip concat conj copysign cos cosh count_nonzero
cumulative_prod cumulative_sum diff divide empty empty_like equal exp expand_dims expm1 eye finfo flip floor floor_divide
from_dlpack full full_like greater greater_equal hypot iinfo imag isdtype isfinite isinf isnan
less less_equal linspace log log10 log1p log2 logaddexp logical_and logical_not logical_or
logical_xor matmul matrix_transpose max maximum mean meshgrid min minimum moveaxis multiply
negative nextafter nonzero not_equal ones ones_like permute_dims positive pow prod real
reciprocal remainder repeat reshape result_type roll round searchsorted sign signbit sin sinh
sort sqrt square squeeze stack std subtract sum take take_along_axis tan tanh tensordot tile
tril triu trunc unique_all unique_counts
unique_inverse unique_values unstack var vecdot where zeros zeros_like
__array_namespace_info__
""".split()
ARRAY_API_LINALG = """
cholesky cross det diagonal eigh eigvalsh inv matmul matrix_norm matrix_power matrix_rank
matrix_transpose outer pinv qr slogdet solve svd svdvals tensordot trace vecdot vector_norm
""".split()
ARRAY_API_FFT = """
fft ifft fftn ifftn rfft irfft rfftn irfftn hfft ihfft fftfreq rfftfreq fftshift ifftshift
""".split()

# Public names of JAX 0.10.2's jax.scipy submodules, its jax.scipy.stats distributions and
# jax.nn.initializers (sorted(dir(module)) without private names), stored so that this tool
# runs without jax; tests/scipy_compat/test_coverage_tables.py checks them against an installed
# jax.
JAX_VERSION = "0.10.2"
JAX_SCIPY = {
    "special": """bernoulli bessel_jn beta betainc betaln boxcox boxcox1p comb dawsn digamma entr
        erf erfc erfcx erfinv exp1 expi expit expn factorial fresnel gamma gammainc gammaincc
        gammaln gammasgn hyp1f1 hyp2f1 i0 i0e i1 i1e kl_div log_ndtr log_softmax loggamma logit
        logsumexp multigammaln ndtr ndtri owens_t poch polygamma rel_entr sici softmax spence
        sph_harm_y wofz xlog1py xlogy zeta""",
    "linalg": """block_diag cho_factor cho_solve cholesky circulant companion convolution_matrix
        det dft eigh eigh_tridiagonal expm expm_frechet fiedler fiedler_companion funm hadamard
        hankel helmert hessenberg hilbert inv invhilbert invpascal leslie lu lu_factor lu_solve
        pascal polar qr qr_multiply rsf2csf schur solve solve_sylvester solve_triangular sqrtm
        svd toeplitz""",
    "signal": "convolve convolve2d correlate correlate2d csd detrend fftconvolve istft stft welch",
    "optimize": "OptimizeResults minimize",
    "ndimage": "map_coordinates",
    "integrate": "trapezoid",
    "fft": "dct dctn idct idctn",
    "interpolate": "RegularGridInterpolator",
    "stats": """bernoulli beta betabinom binom cauchy chi2 dirichlet expon gamma gaussian_kde
        gennorm geom gumbel_l gumbel_r laplace logistic mode multinomial multivariate_normal
        nbinom norm pareto poisson rankdata sem t truncnorm uniform vonmises wrapcauchy""",
    "cluster.vq": "vq",
    "sparse.linalg": "bicgstab cg gmres",
}
JAX_STATS = {
    "bernoulli": "cdf logpmf pmf ppf",
    "beta": "cdf logcdf logpdf logsf pdf sf",
    "binom": "logpmf pmf",
    "cauchy": "cdf isf logcdf logpdf logsf pdf ppf sf",
    "chi2": "cdf logcdf logpdf logsf pdf sf",
    "expon": "cdf logcdf logpdf logsf pdf ppf sf",
    "geom": "logpmf pmf",
    "gumbel_l": "cdf logcdf logpdf logsf pdf ppf sf",
    "gumbel_r": "cdf logcdf logpdf logsf pdf ppf sf",
    "laplace": "cdf logpdf pdf",
    "logistic": "cdf isf logpdf pdf ppf sf",
    "uniform": "cdf logpdf pdf ppf",
    "dirichlet": "logpdf pdf",
    "gamma": "cdf logcdf logpdf logsf pdf sf",
    "multivariate_normal": "logpdf pdf",
    "nbinom": "logpmf pmf",
    "norm": "cdf isf logcdf logpdf logsf pdf ppf sf",
    "pareto": "cdf logcdf logpdf logsf pdf ppf sf",
    "poisson": "cdf entropy logpmf pmf",
    "t": "logpdf pdf",
}
JAX_NN_INITIALIZERS = """Initializer constant delta_orthogonal glorot_normal glorot_uniform
    he_normal he_uniform kaiming_normal kaiming_uniform lecun_normal lecun_uniform normal ones
    orthogonal truncated_normal uniform variance_scaling xavier_normal xavier_uniform zeros"""

# Public names of jax.lax, one per line (sorted(dir(jax.lax)) without private names);
# tests/lax/test_jax_names.py checks the file against an installed jax.
JAX_LAX_NAMES_FILE = ROOT / "tools" / "data" / "jax_lax_names.txt"


def jax_lax_names():
    """The stored public names of jax.lax."""
    lines = JAX_LAX_NAMES_FILE.read_text().splitlines()
    return [n.strip() for n in lines if n.strip() and not n.startswith("#")]


AREAS = {
    "funcgrad.numpy.creation": "Array creation",
    "funcgrad.numpy.ufuncs": "Elementwise functions",
    "funcgrad.numpy.math_extra": "More math, comparisons, differences, convolution",
    "funcgrad.numpy.array_api": "Array API names, dtype functions, inspection",
    "funcgrad.numpy.reductions": "Reductions and statistics",
    "funcgrad.numpy.nan_functions": "NaN-ignoring reductions",
    "funcgrad.numpy.statistics": "Covariance, counting, histograms",
    "funcgrad.numpy.shape_ops": "Shape manipulation",
    "funcgrad.numpy.index_tricks": "Index construction and functional writes",
    "funcgrad.numpy.indexing": "Indexing",
    "funcgrad.numpy.searching": "Searching",
    "funcgrad.numpy.sorting": "Sorting, searching sorted arrays, quantiles",
    "funcgrad.numpy.set_ops": "Set operations",
    "funcgrad.numpy.products": "Products and contractions",
    "funcgrad.numpy.polynomial": "Polynomials",
    "funcgrad.numpy.misc": "Miscellaneous helpers",
    "funcgrad.numpy": "Dtypes and helpers",
}


def _area(obj):
    mod = getattr(obj, "__module__", None) or ""
    if mod in AREAS:
        return AREAS[mod]
    if mod.startswith("funcgrad.numpy."):
        return mod[len("funcgrad.numpy."):].replace("_", " ").capitalize()
    return AREAS["funcgrad.numpy"]


def _public(module):
    names = []
    for name in dir(module):
        if name.startswith("_") and name != "__array_namespace_info__":
            continue
        obj = getattr(module, name)
        if inspect.ismodule(obj) or not callable(obj):
            continue
        names.append(name)
    return sorted(names)


def collect():
    """{area: [(name, is_array_api)]} for funcgrad.numpy and its linalg/fft submodules."""
    jnp = importlib.import_module("funcgrad.numpy")
    groups = {}
    for name in _public(jnp):
        groups.setdefault(_area(getattr(jnp, name)), []).append(
            (name, name in ARRAY_API_FUNCTIONS))
    for sub, std in (("linalg", ARRAY_API_LINALG), ("fft", ARRAY_API_FFT)):
        try:
            mod = importlib.import_module(f"funcgrad.numpy.{sub}")
        except ImportError:
            continue
        title = {"linalg": "Linear algebra (funcgrad.numpy.linalg)",
                 "fft": "FFT (funcgrad.numpy.fft)"}[sub]
        for name in _public(mod):
            if getattr(getattr(mod, name), "__module__", "").startswith("funcgrad"):
                groups.setdefault(title, []).append((f"{sub}.{name}", name in std))
    return groups


def _module_or_none(name):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def collect_against_jax():
    """[(namespace, jax names, present, missing)] for funcgrad.scipy's submodules, the
    distributions of funcgrad.scipy.stats, funcgrad.nn.initializers and funcgrad.lax."""
    rows = []

    def row(title, module_name, names):
        names = sorted(names.split())
        mod = _module_or_none(module_name)
        present = [n for n in names if mod is not None and hasattr(mod, n)]
        rows.append((title, names, present, [n for n in names if n not in present]))

    for sub, names in JAX_SCIPY.items():
        row(f"scipy.{sub}", f"funcgrad.scipy.{sub}", names)
    for dist, names in JAX_STATS.items():
        row(f"scipy.stats.{dist}", f"funcgrad.scipy.stats.{dist}", names)
    row("nn.initializers", "funcgrad.nn.initializers", JAX_NN_INITIALIZERS)
    row("lax", "funcgrad.lax", " ".join(jax_lax_names()))
    return rows


def render_against_jax(rows):
    return render_coverage(
        f"# funcgrad.scipy, funcgrad.nn.initializers and funcgrad.lax against JAX {JAX_VERSION}",
        "Public names of `jax.scipy.*`, of each `jax.scipy.stats` distribution that funcgrad "
        "has, of `jax.nn.initializers` and of `jax.lax`: **{have} of {total}** present.",
        "JAX", rows)


def render(groups):
    total = sum(len(v) for v in groups.values())
    main = [n for v in groups.values() for n, _ in v if "." not in n]
    std_present = sorted(n for n in ARRAY_API_FUNCTIONS if n in main)
    lines = [
        "# funcgrad.numpy API coverage",
        "",
        "Generated by `python tools/api_coverage.py`; `tests/numpy_breadth/test_api_coverage.py`",
        "checks that every name below exists and is callable. Names marked **[array API]** are in",
        "the Python array API standard 2024.12.",
        "",
        f"- public callables: **{total}** ({len(main)} in `funcgrad.numpy`, "
        f"{total - len(main)} in its `linalg`/`fft` submodules)",
        f"- array API 2024.12 main-namespace functions present: {len(std_present)} of "
        f"{len(ARRAY_API_FUNCTIONS)}",
        "",
    ]
    missing = sorted(set(ARRAY_API_FUNCTIONS) - set(main))
    if missing:
        lines += [f"- array API functions still missing: {', '.join(missing)}", ""]
    for area in sorted(groups):
        entries = sorted(groups[area])
        lines += [f"## {area} ({len(entries)})", ""]
        for name, std in entries:
            lines.append(f"- `{name}`" + (" **[array API]**" if std else ""))
        lines.append("")
    return "\n".join(lines)


# docs/api_coverage.md ends with a hand-written section on the official array API test suite
# (the command, the counts, what fails and why); regenerating keeps it.
SUITE_HEADING = "# The official array API test suite"


def kept_suite_section():
    """The array API test suite section of the current docs/api_coverage.md ("" if none)."""
    text = OUT.read_text() if OUT.exists() else ""
    i = text.find(SUITE_HEADING)
    return text[i:] if i >= 0 else ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if docs/api_coverage.md is stale")
    args = ap.parse_args(argv)
    text = render(collect()) + "\n" + render_against_jax(collect_against_jax())
    text += "\n" + torch_coverage.render_against_torch(torch_coverage.collect_against_torch())
    suite = kept_suite_section()
    if suite:
        text += "\n" + suite
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print("docs/api_coverage.md is out of date; run python tools/api_coverage.py")
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
