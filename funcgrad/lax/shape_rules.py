"""Static shape arithmetic of ``jax.lax``: output shapes of convolutions and windowed
reductions, padding types, layout permutations and broadcasting, on plain Python ints.

Example:
    >>> lax.conv_general_shape_tuple((1, 28, 28, 3), (5, 5, 3, 8), (2, 2), "SAME",
    ...                              ("NHWC", "HWIO", "NHWC"))
    (1, 14, 14, 8)
"""
from funcgrad.lax.convolution import conv_dimension_numbers, padtype_to_pads

__all__ = ["padtype_to_pads", "conv_shape_tuple", "conv_general_shape_tuple",
           "conv_transpose_shape_tuple", "conv_general_permutations",
           "reduce_window_shape_tuple", "broadcast_shapes"]


def _ints(seq, what, where):
    try:
        return tuple(int(v) for v in seq)
    except TypeError:
        raise TypeError(f"lax.{where}: {what} must be a sequence of ints, got {seq!r}") from None


def _out_size(padded, window, stride, where):
    if stride < 1:
        raise ValueError(f"lax.{where}: strides must be positive, got {stride}")
    return max(0, (padded - window) // stride + 1)


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """The output shape of a convolution in NC... / OI... layout with explicit ``pads``.

    Example:
        >>> lax.conv_shape_tuple((2, 3, 10, 10), (8, 3, 3, 3), (1, 2), [(1, 1), (0, 0)])
        (2, 8, 10, 4)
    """
    lhs, rhs = _ints(lhs_shape, "lhs_shape", "conv_shape_tuple"), _ints(rhs_shape, "rhs_shape",
                                                                        "conv_shape_tuple")
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs[2:], rhs[2:], strides, pads)
    if len(pads) != len(lhs) - 2 or len(strides) != len(lhs) - 2:
        raise ValueError(f"lax.conv_shape_tuple: need one stride and one (low, high) pad per "
                         f"spatial axis of {lhs}, got strides {tuple(strides)} and pads "
                         f"{list(pads)}")
    spatial = tuple(_out_size(n + lo + hi, k, int(s), "conv_shape_tuple")
                    for n, k, s, (lo, hi) in zip(lhs[2:], rhs[2:], strides, pads))
    if lhs[0] % batch_group_count:
        raise ValueError(f"lax.conv_shape_tuple: batch size {lhs[0]} is not a multiple of "
                         f"batch_group_count={batch_group_count}")
    return (lhs[0] // batch_group_count, rhs[0]) + spatial


def conv_general_permutations(dimension_numbers):
    """The axis permutations that bring lhs, rhs and output to NC..., OI..., NC... layout, the
    spatial axes in the kernel's order (``ConvDimensionNumbers`` of layout strings).

    Example:
        >>> lax.conv_general_permutations(("NHWC", "HWIO", "NHWC"))
        ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    """
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    if not all(isinstance(s, str) for s in (lhs_spec, rhs_spec, out_spec)):
        raise TypeError(f"lax.conv_general_permutations: expected three layout strings such as "
                        f"('NCHW', 'OIHW', 'NCHW'), got {dimension_numbers!r}")
    for spec, pair in ((lhs_spec, "NC"), (rhs_spec, "OI"), (out_spec, "NC")):
        if len(set(spec)) != len(spec) or any(c not in spec for c in pair):
            raise ValueError(f"lax.conv_general_permutations: layout {spec!r} must name "
                             f"{pair[0]!r} and {pair[1]!r} once each")
    if not len(lhs_spec) == len(rhs_spec) == len(out_spec):
        raise ValueError(f"lax.conv_general_permutations: layouts of different ranks "
                         f"{dimension_numbers!r}")
    rhs_spatial = [c for c in rhs_spec if c not in "OI"]

    def perm(spec, pair):
        spatial = [i for i, c in enumerate(spec) if c not in pair]
        if spec is not rhs_spec:
            if sorted(spec[i] for i in spatial) != sorted(rhs_spatial):
                raise ValueError(f"lax.conv_general_permutations: spatial axes of {spec!r} and "
                                 f"{rhs_spec!r} differ")
            spatial.sort(key=lambda i: rhs_spatial.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spatial)

    return perm(lhs_spec, "NC"), perm(rhs_spec, "OI"), perm(out_spec, "NC")


def _layout_perms(lhs_shape, rhs_shape, dimension_numbers):
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    return dn.lhs_spec, dn.rhs_spec, dn.out_spec


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """The output shape of ``conv_general_dilated`` (no dilation) for any layout.

    Example:
        >>> lax.conv_general_shape_tuple((1, 3, 9, 9), (4, 3, 3, 3), (2, 2), "VALID", None)
        (1, 4, 4, 4)
    """
    lhs_shape, rhs_shape = tuple(lhs_shape), tuple(rhs_shape)
    lp, rp, op = _layout_perms(lhs_shape, rhs_shape, dimension_numbers)
    lhs = tuple(lhs_shape[i] for i in lp)
    rhs = tuple(rhs_shape[i] for i in rp)
    out = conv_shape_tuple(lhs, rhs, window_strides,
                           padtype_to_pads(lhs[2:], rhs[2:], window_strides, padding))
    inv = _inverse(op)
    return tuple(out[inv[i]] for i in range(len(out)))


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """The output shape of ``conv_transpose`` with this padding (pairs, "SAME" or "VALID").

    Example:
        >>> lax.conv_transpose_shape_tuple((1, 5, 5, 2), (3, 3, 2, 4), (2, 2), "SAME",
        ...                                ("NHWC", "HWIO", "NHWC"))
        (1, 10, 10, 4)
    """
    lhs_shape, rhs_shape = tuple(lhs_shape), tuple(rhs_shape)
    lp, rp, op = _layout_perms(lhs_shape, rhs_shape, dimension_numbers)
    lhs = tuple(lhs_shape[i] for i in lp)
    rhs = tuple(rhs_shape[i] for i in rp)
    if isinstance(padding, str):
        mode = padding.upper()
        if mode not in ("SAME", "VALID"):
            raise TypeError(f"lax.conv_transpose_shape_tuple: padding must be 'SAME', 'VALID' "
                            f"or pairs, got {padding!r}")
        # the dilated input is padded by k + s - 2 in all (SAME: output = input * stride),
        # plus k - s more when the kernel is wider than the stride (VALID)
        totals = [k + int(s) - 2 + (max(k - int(s), 0) if mode == "VALID" else 0)
                  for k, s in zip(rhs[2:], window_strides)]
    else:
        totals = [int(lo) + int(hi) for lo, hi in padding]
    spatial = tuple((n - 1) * int(s) - k + 2 + t
                    for n, k, s, t in zip(lhs[2:], rhs[2:], window_strides, totals))
    out = (lhs[0], rhs[0]) + spatial
    inv = _inverse(op)
    return tuple(out[inv[i]] for i in range(len(out)))


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    """The output shape of ``reduce_window`` with explicit (low, high) padding and dilations.

    Example:
        >>> lax.reduce_window_shape_tuple((10, 7), (3, 2), (2, 1), [(1, 1), (0, 0)])
        (5, 6)
    """
    where = "reduce_window_shape_tuple"
    shape = _ints(operand_shape, "operand_shape", where)
    window = _ints(window_dimensions, "window_dimensions", where)
    n = len(shape)
    base = _ints(base_dilation or (1,) * n, "base_dilation", where)
    wdil = _ints(window_dilation or (1,) * n, "window_dilation", where)
    if not len(window) == len(window_strides) == len(padding) == len(base) == len(wdil) == n:
        raise ValueError(f"lax.{where}: window_dimensions, window_strides, padding and "
                         f"dilations need one entry per axis of {shape}")
    out = []
    for d, k, s, (lo, hi), b, w in zip(shape, window, window_strides, padding, base, wdil):
        dilated = 0 if d == 0 else (d - 1) * b + 1
        out.append(_out_size(dilated + lo + hi, (k - 1) * w + 1, int(s), where))
    return tuple(out)


def broadcast_shapes(*shapes):
    """The shape that NumPy broadcasting gives arrays of these shapes.

    Example:
        >>> lax.broadcast_shapes((3, 1), (4,), (1, 1, 1))
        (1, 3, 4)
    """
    shapes = [_ints(s, "each shape", "broadcast_shapes") for s in shapes]
    if not shapes:
        return ()
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        sizes = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"lax.broadcast_shapes: incompatible shapes for broadcasting: "
                             f"{', '.join(map(str, shapes))}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)
