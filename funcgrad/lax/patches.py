"""Convolutions built on ``conv_general_dilated``: extracting patches, and locally connected
(unshared-weight) convolution, as ``jax.lax`` defines them. They differentiate and batch through
the convolution and ``dot_general`` they are made of.
"""
import math

import numpy as np

from funcgrad.core.values import aval_of
from funcgrad.lax import shapes
from funcgrad.lax.convolution import conv_dimension_numbers, conv_general_dilated
from funcgrad.lax.dot import dot_general

__all__ = ["conv_general_dilated_patches", "conv_general_dilated_local"]


def _argsort(perm):
    return tuple(int(i) for i in np.argsort(perm))


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """The patches a convolution with a kernel of spatial ``filter_shape`` sees: output
    features hold, for each input channel ``c`` and kernel offset ``k`` (row-major), the input
    value at that offset, at feature ``c * prod(filter_shape) + k``.

    Example:
        >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
        >>> p = lax.conv_general_dilated_patches(x, (2, 2), (2, 2), "VALID")
        >>> p.shape, p[0, :, 0, 0]
        ((1, 4, 2, 2), Array([0., 1., 4., 5.], dtype=float32))
    """
    aval = aval_of(lhs)
    filter_shape = tuple(int(k) for k in filter_shape)
    dn = conv_dimension_numbers(aval.shape, (1, 1) + filter_shape, dimension_numbers)
    channels = aval.shape[dn.lhs_spec[1]]
    taps = math.prod(filter_shape)
    # one output feature per (channel, tap): an identity kernel over taps, per channel group
    eye = np.eye(taps, dtype=aval.dtype).reshape((taps, 1) + filter_shape)
    kernel = np.tile(eye, (channels,) + (1,) * (eye.ndim - 1))   # (C * taps, 1, *filter_shape)
    kernel = np.transpose(kernel, _argsort(dn.rhs_spec))
    return conv_general_dilated(lhs, kernel, window_strides, padding, lhs_dilation, rhs_dilation,
                                dn, feature_group_count=channels, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape,
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """A locally connected convolution: like ``conv_general_dilated`` but with a different
    kernel at each output position. ``rhs`` has the kernel layout of ``dimension_numbers``
    with input features ``C * prod(filter_shape)`` (ordered as in
    ``conv_general_dilated_patches``) and one spatial entry per output position.

    Example:
        >>> x = jnp.ones((1, 2, 4, 4))
        >>> w = jnp.ones((3, 2 * 2 * 2, 3, 3))      # O, I * taps, out_h, out_w
        >>> lax.conv_general_dilated_local(x, w, (1, 1), "VALID", (2, 2)).shape
        (1, 3, 3, 3)
    """
    if isinstance(precision, (tuple, list)):
        lhs_precision, rhs_precision = precision
    else:
        lhs_precision = rhs_precision = precision
    filter_shape = tuple(int(k) for k in filter_shape)
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dimension_numbers,
                                           precision=lhs_precision)
    dn = conv_dimension_numbers(aval_of(lhs).shape, (1, 1) + filter_shape, dimension_numbers)
    out_spatial, rhs_spatial = list(dn.out_spec[2:]), list(dn.rhs_spec[2:])
    order = sorted(range(len(out_spatial)), key=lambda k: out_spatial[k])
    lhs_batch = [out_spatial[k] for k in order]
    rhs_batch = [rhs_spatial[k] for k in order]
    out = dot_general(patches, rhs, (((dn.out_spec[1],), (dn.rhs_spec[1],)),
                                     (tuple(lhs_batch), tuple(rhs_batch))),
                      precision=rhs_precision)
    # out: (spatial in sorted order..., N, O); put N and O where the output layout wants them
    nd = len(out_spatial) + 2
    src_of = {}
    for i, k in enumerate(order):
        src_of[out_spatial[k]] = i
    src_of[dn.out_spec[0]] = nd - 2
    src_of[dn.out_spec[1]] = nd - 1
    return shapes.transpose(out, tuple(src_of[j] for j in range(nd)))
