"""Out-of-bounds indexing calls whose results must equal JAX's (0.10.2), written against a
NumPy namespace ``xp`` so that the same table drives funcgrad (``test_out_of_bounds_indexing``)
and JAX (``make_jax_oob_refs.py``, which writes the stored references).

``STATIC[name] = f(xp, x1, x2)``: the indices are Python ints or NumPy arrays in the code
(known while tracing). ``TRACED[name] = (f(xp, x1, x2, i), i)``: the index ``i`` is an
argument, so under ``jit`` and ``vmap`` it is traced. ``x1`` is ``arange(10)`` (int32) and
``x2`` ``arange(12.).reshape(3, 4)`` (float32).
"""
import numpy as np

X1 = np.arange(10, dtype=np.int32)
X2 = np.arange(12, dtype=np.float32).reshape(3, 4)
ARR = np.array([11, -11, -12, 3, 9, 10])

STATIC = {
    # x[idx]: every index clamps into its axis (negative ones count from the end once)
    "get_past_end": lambda xp, a, b: a[11],
    "get_one_past_end": lambda xp, a, b: a[10],
    "get_negative": lambda xp, a, b: a[-11],
    "get_negative_far": lambda xp, a, b: a[-12],
    "get_array": lambda xp, a, b: a[ARR],
    "get_2d_both": lambda xp, a, b: b[5, 7],
    "get_2d_row": lambda xp, a, b: b[5],
    "get_2d_row_slice": lambda xp, a, b: b[5, 1:3],
    "get_2d_ellipsis": lambda xp, a, b: b[..., 9],
    "get_2d_newaxis": lambda xp, a, b: b[None, 4],
    "get_2d_negative": lambda xp, a, b: b[-4],
    "get_2d_mixed": lambda xp, a, b: b[np.array([5, 0, -7]), 1],
    "get_slice_past_end": lambda xp, a, b: a[5:20],
    # x.at[idx].get(mode=...)
    "at_get": lambda xp, a, b: a.at[11].get(),
    "at_get_fill": lambda xp, a, b: a.at[11].get(mode="fill"),
    "at_get_fill_value": lambda xp, a, b: b.at[ARR[:3] % 5, 1].get(mode="fill", fill_value=-1.0),
    "at_get_drop": lambda xp, a, b: b.at[7].get(mode="drop"),
    "at_get_clip": lambda xp, a, b: a.at[ARR].get(mode="clip"),
    "at_get_promise": lambda xp, a, b: a.at[np.array([0, 9, -1])].get(mode="promise_in_bounds"),
    # x.at[idx].<update>: out-of-bounds updates are dropped by default
    "set_past_end": lambda xp, a, b: a.at[11].set(100),
    "set_negative": lambda xp, a, b: a.at[-11].set(100),
    "set_array": lambda xp, a, b: a.at[ARR].set(100),
    "add_array": lambda xp, a, b: a.at[ARR].add(100),
    "subtract_array": lambda xp, a, b: b.at[ARR[:4] % 6].subtract(1.0),
    "multiply_array": lambda xp, a, b: a.at[ARR].multiply(3),
    "divide_2d": lambda xp, a, b: b.at[np.array([1, 3]), np.array([2, 9])].divide(2.0),
    "power_2d": lambda xp, a, b: b.at[1, np.array([0, 4])].power(2.0),
    "min_array": lambda xp, a, b: a.at[ARR].min(-5),
    "max_array": lambda xp, a, b: a.at[ARR].max(50),
    "set_2d_row": lambda xp, a, b: b.at[7].set(-1.0),
    "set_2d_col": lambda xp, a, b: b.at[1, 5].set(-1.0),
    "set_2d_slice": lambda xp, a, b: b.at[4, 1:3].set(-1.0),
    "set_clip": lambda xp, a, b: a.at[ARR].set(100, mode="clip"),
    "set_2d_clip": lambda xp, a, b: b.at[7].set(-1.0, mode="clip"),
    "add_fill": lambda xp, a, b: a.at[ARR].add(100, mode="fill"),
    "add_drop": lambda xp, a, b: a.at[ARR].add(100, mode="drop"),
    "set_promise": lambda xp, a, b: a.at[np.array([0, -1])].set(7, mode="promise_in_bounds"),
    # take / take_along_axis fill by default
    "take_int": lambda xp, a, b: xp.take(a, 11),
    "take_negative": lambda xp, a, b: xp.take(a, -11),
    "take_array": lambda xp, a, b: xp.take(a, ARR),
    "take_axis": lambda xp, a, b: xp.take(b, np.array([[0, 4], [-5, 2]]), axis=1),
    "take_clip": lambda xp, a, b: xp.take(a, ARR, mode="clip"),
    "take_wrap": lambda xp, a, b: xp.take(a, ARR, mode="wrap"),
    "take_fill_value": lambda xp, a, b: xp.take(b, ARR, fill_value=-3.0),
    "take_along": lambda xp, a, b: xp.take_along_axis(b, np.array([[0, 9, -1, 2]] * 3), 1),
    "take_along_clip": lambda xp, a, b: xp.take_along_axis(b, np.array([[0, 9, -5, 2]] * 3), 1,
                                                            mode="clip"),
}

I_SCALARS = np.array([11, -11, -12, 4, 10], np.int32)
I_ROWS = np.array([[11, -11, 2], [-12, 10, 0], [3, 9, 15]], np.int32)

TRACED = {
    "get_int": (lambda xp, a, b, i: a[i], I_SCALARS),
    "get_2d_row": (lambda xp, a, b, i: b[i], I_SCALARS),
    "get_2d_both": (lambda xp, a, b, i: b[i, i + 1], I_SCALARS),
    "get_rows": (lambda xp, a, b, i: a[i], I_ROWS),
    "at_get_fill": (lambda xp, a, b, i: a.at[i].get(mode="fill", fill_value=-1), I_ROWS),
    "set_int": (lambda xp, a, b, i: a.at[i].set(100), I_SCALARS),
    "set_rows": (lambda xp, a, b, i: a.at[i].set(100), I_ROWS),
    "add_rows": (lambda xp, a, b, i: a.at[i].add(1), I_ROWS),
    "set_2d_row": (lambda xp, a, b, i: b.at[i].set(-1.0), I_SCALARS),
    "set_clip": (lambda xp, a, b, i: a.at[i].set(100, mode="clip"), I_ROWS),
    "take": (lambda xp, a, b, i: xp.take(a, i), I_ROWS),
    "take_along": (lambda xp, a, b, i: xp.take_along_axis(b, xp.stack([i, i, i])[:, :3] % 7,
                                                          axis=1), I_ROWS),
}
