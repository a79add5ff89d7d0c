"""The docstring examples of lax's generated functions (elementwise, reductions, cumulative
reductions, scatters), by primitive name: {name: (source lines, printed result)}.
"""

EXAMPLES = {
    "neg": ("lax.neg(jnp.array([1.0, -2.0]))", "Array([-1.,  2.], dtype=float32)"),
    "sign": ("lax.sign(jnp.array([-3.0, 0.0, 2.0]))", "Array([-1.,  0.,  1.], dtype=float32)"),
    "floor": ("lax.floor(jnp.array([-1.5, 1.5]))", "Array([-2.,  1.], dtype=float32)"),
    "ceil": ("lax.ceil(jnp.array([-1.5, 1.5]))", "Array([-1.,  2.], dtype=float32)"),
    "is_finite": ("lax.is_finite(jnp.array([1.0, jnp.inf, jnp.nan]))",
        "Array([ True, False, False], dtype=bool)"),
    "exp": ("lax.exp(jnp.array([0.0, 1.0]))", "Array([1.       , 2.718281...], dtype=float32)"),
    "log": ("lax.log(jnp.array([1.0, jnp.e]))", "Array([0., 1.], dtype=float32)"),
    "log1p": ("lax.log1p(jnp.array([0.0, 1e-8]))", "Array([0.e+00, 1.e-08], dtype=float32)"),
    "expm1": ("lax.expm1(jnp.array([0.0, 1e-8]))", "Array([0.e+00, 1.e-08], dtype=float32)"),
    "tanh": ("lax.tanh(jnp.array([0.0, 1.0]))", "Array([0.       , 0.761594...], dtype=float32)"),
    "logistic": ("lax.logistic(jnp.array([0.0, 2.0]))",
        "Array([0.5     , 0.88079...], dtype=float32)"),
    "sin": ("lax.sin(jnp.array([0.0, jnp.pi / 2]))", "Array([0., 1.], dtype=float32)"),
    "cos": ("lax.cos(jnp.array([0.0, jnp.pi]))", "Array([ 1., -1.], dtype=float32)"),
    "tan": ("lax.tan(jnp.array([0.0, jnp.pi / 4]))", "Array([0., 1.], dtype=float32)"),
    "asin": ("lax.asin(jnp.array([0.0, 1.0]))", "Array([0.       , 1.570796...], dtype=float32)"),
    "acos": ("lax.acos(jnp.array([1.0, 0.0]))", "Array([0.       , 1.570796...], dtype=float32)"),
    "atan": ("lax.atan(jnp.array([0.0, 1.0]))", "Array([0.       , 0.785398...], dtype=float32)"),
    "sinh": ("lax.sinh(jnp.array([0.0, 1.0]))", "Array([0.       , 1.175201...], dtype=float32)"),
    "cosh": ("lax.cosh(jnp.array([0.0, 1.0]))", "Array([1.       , 1.543080...], dtype=float32)"),
    "asinh": ("lax.asinh(jnp.array([0.0, 1.0]))", "Array([0.        , 0.881373...], dtype=float32)"),
    "acosh": ("lax.acosh(jnp.array([1.0, 2.0]))", "Array([0.      , 1.31695...], dtype=float32)"),
    "atanh": ("lax.atanh(jnp.array([0.0, 0.5]))", "Array([0.        , 0.549306...], dtype=float32)"),
    "sqrt": ("lax.sqrt(jnp.array([4.0, 2.0]))", "Array([2.       , 1.4142135], dtype=float32)"),
    "rsqrt": ("lax.rsqrt(jnp.array([4.0, 0.25]))", "Array([0.5, 2. ], dtype=float32)"),
    "cbrt": ("lax.cbrt(jnp.array([8.0, -27.0]))", "Array([ 2., -3.], dtype=float32)"),
    "not": ("lax.bitwise_not(jnp.array([0, 5]))", "Array([-1, -6], dtype=int32)"),
    "population_count": ("lax.population_count(jnp.array([7, 8]))", "Array([3, 1], dtype=int32)"),
    "clz": ("lax.clz(jnp.array([1, 256]))", "Array([31, 23], dtype=int32)"),
    "real": ("lax.real(jnp.array([1 + 2j, 3 - 4j]))", "Array([1., 3.], dtype=float32)"),
    "imag": ("lax.imag(jnp.array([1 + 2j, 3 - 4j]))", "Array([ 2., -4.], dtype=float32)"),
    "conj": ("lax.conj(jnp.array([1 + 2j, 3 - 4j]))", "Array([1.-2.j, 3.+4.j], dtype=complex64)"),
    "abs": ("lax.abs(jnp.array([-1.5, 2.0]))", "Array([1.5, 2. ], dtype=float32)"),
    "add": ("lax.add(jnp.array([1, 2]), 10)", "Array([11, 12], dtype=int32)"),
    "sub": ("lax.sub(jnp.array([1.0, 2.0]), 0.5)", "Array([0.5, 1.5], dtype=float32)"),
    "mul": ("lax.mul(jnp.array([1.5, 2.0]), 2.0)", "Array([3., 4.], dtype=float32)"),
    "div": ("lax.div(jnp.array([7, -7]), 2)", "Array([ 3, -3], dtype=int32)"),
    "rem": ("lax.rem(jnp.array([7, -7]), 3)", "Array([ 1, -1], dtype=int32)"),
    "pow": ("lax.pow(jnp.array([2.0, 3.0]), 2.0)", "Array([4., 9.], dtype=float32)"),
    "max": ("lax.max(jnp.array([1.0, jnp.nan, 3.0]), 2.0)",
        "Array([ 2., nan,  3.], dtype=float32)"),
    "min": ("lax.min(jnp.array([1.0, jnp.nan, 3.0]), 2.0)",
        "Array([ 1., nan,  2.], dtype=float32)"),
    "atan2": ("lax.atan2(jnp.array([1.0, -1.0]), jnp.array([-1.0, -1.0]))",
        "Array([ 2.356194..., -2.356194...], dtype=float32)"),
    "nextafter": ("lax.nextafter(jnp.array([1.0]), jnp.array([2.0]))",
        "Array([1.0000001], dtype=float32)"),
    "and": ("lax.bitwise_and(jnp.array([12]), 10)", "Array([8], dtype=int32)"),
    "or": ("lax.bitwise_or(jnp.array([12]), 10)", "Array([14], dtype=int32)"),
    "xor": ("lax.bitwise_xor(jnp.array([12]), 10)", "Array([6], dtype=int32)"),
    "shift_left": ("lax.shift_left(jnp.array([1, 3]), 2)", "Array([ 4, 12], dtype=int32)"),
    "shift_right_arithmetic": ("lax.shift_right_arithmetic(jnp.array([-8, 8]), 2)",
        "Array([-2,  2], dtype=int32)"),
    "shift_right_logical": ("lax.shift_right_logical(jnp.array([-8, 8]), 2)",
        "Array([1073741822,          2], dtype=int32)"),
    "complex": ("lax.complex(jnp.array([1.0, 2.0]), jnp.array([3.0, -1.0]))",
        "Array([1.+3.j, 2.-1.j], dtype=complex64)"),
    "eq": ("lax.eq(jnp.array([1, 2, 3]), 2)", "Array([False,  True, False], dtype=bool)"),
    "ne": ("lax.ne(jnp.array([1, 2, 3]), 2)", "Array([ True, False,  True], dtype=bool)"),
    "lt": ("lax.lt(jnp.array([1, 2, 3]), 2)", "Array([ True, False, False], dtype=bool)"),
    "le": ("lax.le(jnp.array([1, 2, 3]), 2)", "Array([ True,  True, False], dtype=bool)"),
    "gt": ("lax.gt(jnp.array([1, 2, 3]), 2)", "Array([False, False,  True], dtype=bool)"),
    "ge": ("lax.ge(jnp.array([1, 2, 3]), 2)", "Array([False,  True,  True], dtype=bool)"),
    # reductions.py
    "reduce_sum": ("lax.reduce_sum(jnp.array([[1.0, 5.0], [4.0, 2.0]]), (0,))",
        "Array([5., 7.], dtype=float32)"),
    "reduce_prod": ("lax.reduce_prod(jnp.array([[1.0, 5.0], [4.0, 2.0]]), (1,))",
        "Array([5., 8.], dtype=float32)"),
    "reduce_max": ("lax.reduce_max(jnp.array([[1.0, 5.0], [4.0, 2.0]]), (0, 1))",
        "Array(5., dtype=float32)"),
    "reduce_min": ("lax.reduce_min(jnp.array([[1.0, 5.0], [4.0, 2.0]]), (0,))",
        "Array([1., 2.], dtype=float32)"),
    "reduce_and": ("lax.reduce_and(jnp.array([[True, False], [True, True]]), (0,))",
        "Array([ True, False], dtype=bool)"),
    "reduce_or": ("lax.reduce_or(jnp.array([[True, False], [False, False]]), (1,))",
        "Array([ True, False], dtype=bool)"),
    "reduce_xor": ("lax.reduce_xor(jnp.array([[True, False], [True, True]]), (0,))",
        "Array([False,  True], dtype=bool)"),
    "cumsum": (
        "lax.cumsum(jnp.array([1, 2, 3, 4])), lax.cumsum(jnp.array([1, 2, 3, 4]), reverse=True)",
        "(Array([ 1,  3,  6, 10], dtype=int32), Array([10,  9,  7,  4], dtype=int32))"),
    "cumprod": ("lax.cumprod(jnp.array([1, 2, 3, 4]))", "Array([ 1,  2,  6, 24], dtype=int32)"),
    "cummax": ("lax.cummax(jnp.array([1, 3, 2, 5]))", "Array([1, 3, 3, 5], dtype=int32)"),
    "cummin": ("lax.cummin(jnp.array([4, 2, 3, 1]))", "Array([4, 2, 2, 1], dtype=int32)"),
    # indexing.py: the scatters share one setup
    **{name: ("x, idx = jnp.full((4,), 3.0), jnp.array([0, 2])\n"
              "dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),\n"
              "...     scatter_dims_to_operand_dims=(0,))\n"
              f"lax.{name}(x, idx[:, None], jnp.array([10.0, 1.0]), dn)", result)
       for name, result in (
           ("scatter", "Array([10.,  3.,  1.,  3.], dtype=float32)"),
           ("scatter_add", "Array([13.,  3.,  4.,  3.], dtype=float32)"),
           ("scatter_mul", "Array([30.,  3.,  3.,  3.], dtype=float32)"),
           ("scatter_min", "Array([3., 3., 1., 3.], dtype=float32)"),
           ("scatter_max", "Array([10.,  3.,  3.,  3.], dtype=float32)"))},
}


def example_section(name):
    """The ``Example:`` section of the docstring of the lax function binding primitive ``name``."""
    source, result = EXAMPLES[name]
    lines = [line if line.startswith("... ") else ">>> " + line for line in source.split("\n")]
    return "Example:\n" + "".join(f"    {line}\n" for line in lines) + f"    {result}\n"
