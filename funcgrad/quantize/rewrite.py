"""The Jaxpr-to-Jaxpr rewrite behind ``funcgrad.quantize``.

``f`` is traced to a Jaxpr (``core.staging``) and its equations are evaluated again under the
current interpreter, so the rewritten program is whatever that interpreter makes of it: a
Jaxpr under ``jit``/``make_jaxpr``, values eagerly, tangents under ``grad``, batches under
``vmap``. Selected ``dot_general``/``conv_general_dilated`` equations become integer
products (or fake-quantized float ones); every other equation is bound unchanged, and
higher-order equations (scan, cond, while, jit, remat, custom_jvp/vjp) get their bodies
rewritten the same way through ``core.jaxpr.map_subjaxprs``.

A product's operands are named by role: the *weight* (quantized per tensor, channel or block)
and the *activation* (per row dynamically, or with a calibrated static range). Scales are
kept in the operand's layout (size 1 on the reduced axes) and moved to the output's layout
for the rescale, so any ``dot_general`` dimension numbers and convolution layouts work.
"""
import functools
import itertools

import numpy as np

from funcgrad import lax, tree_util
from funcgrad import numpy as jnp
from funcgrad.core.dce import dce_closed_jaxpr
from funcgrad.core.interpreters import Tracer
from funcgrad.core.jaxpr import ClosedJaxpr, Literal, map_subjaxprs, name_stack_as, subjaxprs
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.lax.convolution import conv_general_dilated_p
from funcgrad.lax.dot import dot_general_p
from funcgrad.quantize import schemes
from funcgrad.quantize.config import ProductInfo, QuantizeConfig
from funcgrad.transforms.custom_derivatives import custom_jvp
from funcgrad.transforms.eval_shape import abstractify

PRODUCTS = (dot_general_p, conv_general_dilated_p)
FLOATS = {"float16", "bfloat16", "float32", "float64"}


def quantize(f, config=None, **changes):
    """``f`` with its matrix products and convolutions quantized as ``config`` (a
    ``QuantizeConfig``; keyword ``changes`` replace its fields) says. The result is an
    ordinary function: ``jit``, ``vmap``, ``grad`` (with ``mode="fake"``) and ``make_jaxpr``
    apply to it in any order. Its arguments must be arrays or pytrees of arrays (bind other
    arguments with ``functools.partial``).

    Example:
        >>> w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
        >>> f = lambda x: jnp.tanh(x @ w)
        >>> qf = funcgrad.quantize(f, funcgrad.quantize.QuantizeConfig())
        >>> x = jnp.ones((2, 4))
        >>> np.round(np.asarray(qf(x)), 2)
        array([[-0.62,  0.  ,  0.62],
               [-0.62,  0.  ,  0.62]], dtype=float32)
        >>> "preferred_element_type=int32" in str(funcgrad.make_jaxpr(qf)(x))
        True
        >>> "i8[2,4]" in str(funcgrad.make_jaxpr(qf)(x))
        True
    """
    if not callable(f):
        raise TypeError(f"funcgrad.quantize: expected a function, got {type(f).__name__}")
    if config is None:
        config = QuantizeConfig()
    if not isinstance(config, QuantizeConfig):
        raise TypeError(f"funcgrad.quantize: config must be a QuantizeConfig, got "
                        f"{type(config).__name__}")
    if changes:
        config = config.replace(**changes)

    @functools.wraps(f)
    def quantized(*args, **kwargs):
        closed, flags, leaves, out_tree = trace(f, args, kwargs, config.weight_argnums,
                                                "funcgrad.quantize")
        outs = Rewriter(config).run(closed.jaxpr, closed.consts, leaves, flags, ())
        return tree_util.tree_unflatten(out_tree, outs)
    return quantized


def trace(f, args, kwargs, weight_argnums, where):
    """(ClosedJaxpr of ``f``, weight flag per input leaf, input leaves, output treedef)."""
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    flags = []
    for i, a in enumerate(args):
        flags += [i in weight_argnums] * len(tree_util.tree_leaves(a))
    flags += [False] * (len(leaves) - len(flags))
    try:
        avals = [abstractify(x) for x in leaves]
    except TypeError as e:
        raise TypeError(f"{where}: the arguments of {getattr(f, '__name__', f)!r} must be "
                        f"arrays or pytrees of arrays ({e}); bind other arguments with "
                        f"functools.partial") from None
    out_tree = []

    def flat(*xs):
        a, kw = tree_util.tree_unflatten(in_tree, xs)
        outs, tree = tree_util.tree_flatten(f(*a, **kw))
        out_tree.append(tree)
        return outs
    closed, _ = trace_to_jaxpr(flat, avals, debug_name=getattr(f, "__name__", None))
    closed, _ = dce_closed_jaxpr(closed)
    return closed, flags, leaves, out_tree[0]


def quantize_jaxpr(closed, config, weight_flags=None):
    """The rewritten ClosedJaxpr of ``closed`` (same inputs and outputs); ``weight_flags``
    marks which inputs hold weights (none by default).

    Example:
        >>> from funcgrad.quantize import quantize_jaxpr, QuantizeConfig
        >>> w = np.ones((3, 2), np.float32)
        >>> closed = funcgrad.make_jaxpr(lambda x: x @ w)(jnp.ones((4, 3)))
        >>> new = quantize_jaxpr(closed, QuantizeConfig(activation="none"))
        >>> [str(v.aval.dtype) for v in new.jaxpr.constvars]
        ['int8', 'float32']
    """
    flags = list(weight_flags) if weight_flags is not None else [False] * len(closed.in_avals)
    rw = Rewriter(config)
    new, _ = trace_to_jaxpr(lambda *a: rw.run(closed.jaxpr, closed.consts, a, flags, ()),
                            closed.in_avals)
    return new


def has_products(jaxpr):
    """Whether ``jaxpr`` (or a body it carries) holds a dot_general or convolution."""
    return any(e.prim in PRODUCTS or any(has_products(j) for j in subjaxprs(e))
               for e in jaxpr.eqns)


# --- straight-through fake quantization --------------------------------------------------------
@functools.lru_cache(maxsize=None)
def fake_quant_fn(fmt_name):
    """``fq(x, scale, zero_point)``: x rounded to ``fmt``'s grid, with a straight-through
    derivative (1 where x is inside the representable range, 0 where it was clipped)."""
    fmt = schemes.get_format(fmt_name)

    @custom_jvp
    def fq(x, scale, zero_point):
        return schemes.fake_quantize(x, scale, zero_point, fmt, jnp).astype(x.dtype)

    @fq.defjvp
    def fq_jvp(primals, tangents):
        x, scale, zero_point = primals
        y = x / scale + zero_point
        inside = (y >= fmt.qmin - 0.5) & (y <= fmt.qmax + 0.5)
        t = tangents[0]
        return fq(x, scale, zero_point), jnp.where(inside, t, jnp.zeros_like(t))
    return fq


def _join_scopes(outer, inner):
    """The scope of an equation staged with ``inner`` inside a body whose equation had
    ``outer``: a body traced inside the scope already holds it."""
    if not outer or inner == outer or inner.startswith(outer + "/"):
        return inner or outer
    return f"{outer}/{inner}" if inner else outer


def _concrete(*xs):
    return not any(isinstance(x, Tracer) for x in xs)


# --- the geometry of one product: which axes scales reduce over, where they land ---------------
class Geometry:
    """Axes of a product's operands: the reduced axes of per-channel / per-row scales, and how
    a scale in an operand's layout maps to the output's layout."""

    def __init__(self, prim, params, lhs_shape, rhs_shape):
        self.prim, self.params = prim, params
        self.shapes = (tuple(lhs_shape), tuple(rhs_shape))

    @property
    def is_dot(self):
        return self.prim is dot_general_p

    def row_axes(self, side):
        """Axes a per-row (activation) or per-channel (weight) scale reduces over."""
        ndim = len(self.shapes[side])
        if self.is_dot:
            return tuple(self.params["dimension_numbers"][0][side])
        lhs_spec, rhs_spec, _ = self.params["dimension_numbers"]
        if side == 0 and self.params["batch_group_count"] != 1:
            return tuple(range(ndim))
        keep = lhs_spec[0] if side == 0 else rhs_spec[0]
        return tuple(d for d in range(ndim) if d != keep)

    def to_out(self, s, side, xp):
        """Scale ``s`` (operand layout, size 1 on reduced axes) in the output's layout."""
        ndim = len(self.shapes[side])
        s = xp.reshape(s, (1,) * ndim) if np.size(s) == 1 else s
        if self.is_dot:
            (lc, rc), (lb, rb) = self.params["dimension_numbers"]
            contract, batch = (lc, lb) if side == 0 else (rc, rb)
            other = self.shapes[1 - side]
            other_free = len(other) - len(contract) - len(batch)
            free = [d for d in range(ndim) if d not in contract and d not in batch]
            s = xp.transpose(s, tuple(batch) + tuple(free) + tuple(contract))
            b, f = s.shape[:len(batch)], s.shape[len(batch):len(batch) + len(free)]
            shape = b + f + (1,) * other_free if side == 0 else b + (1,) * other_free + f
            return xp.reshape(s, shape)
        lhs_spec, rhs_spec, out_spec = self.params["dimension_numbers"]
        axis_in, axis_out = (lhs_spec[0], out_spec[0]) if side == 0 else (rhs_spec[0],
                                                                           out_spec[1])
        shape = [1] * ndim
        shape[axis_out] = s.shape[axis_in]
        return xp.reshape(s, tuple(shape))


def _blocked(geom, block):
    """Geometry and reshapers for a dot_general whose one contracted axis is split into
    (n_blocks, block): the blocks become a leading batch axis of the product."""
    (lc, rc), (lb, rb) = geom.params["dimension_numbers"]
    if len(lc) != 1:
        raise ValueError(f"funcgrad.quantize: per_block scales need a dot_general with one "
                         f"contracted axis; this one contracts {len(lc)} "
                         f"(operands {geom.shapes[0]} and {geom.shapes[1]})")
    k = geom.shapes[0][lc[0]]
    if k % block:
        raise ValueError(f"funcgrad.quantize: block_size {block} does not divide the "
                         f"contracted size {k} of the product of {geom.shapes[0]} and "
                         f"{geom.shapes[1]}")
    cs = (lc[0], rc[0])

    def split_shape(side):
        s, c = geom.shapes[side], cs[side]
        return s[:c] + (k // block, block) + s[c + 1:]

    def shift(dims, c):
        return tuple(d + (d > c) for d in dims)
    dnums = (((cs[0] + 1,), (cs[1] + 1,)),
             ((cs[0],) + shift(lb, cs[0]), (cs[1],) + shift(rb, cs[1])))
    params = dict(geom.params, dimension_numbers=dnums)
    new = Geometry(dot_general_p, params, split_shape(0), split_shape(1))
    return new, split_shape, cs


class Rewriter:
    """Evaluates a Jaxpr under the current interpreter with its products quantized.

    ``observe(path, activation)``, when given, is called for each selected product instead of
    quantizing it (calibration) and the product stays in float."""

    def __init__(self, config, observe=None):
        self.config, self.observe = config, observe

    def run(self, jaxpr, consts, args, flags, path, scope=""):
        env, weight = {}, {}

        def read(a):
            return a.val if isinstance(a, Literal) else env[a]

        def is_weight(a):
            return True if isinstance(a, Literal) else weight[a]
        for v, c in zip(jaxpr.constvars, consts):
            env[v], weight[v] = c, True
        for v, a, fl in zip(jaxpr.invars, args, flags):
            env[v], weight[v] = a, fl
        for i, eqn in enumerate(jaxpr.eqns):
            ins = [read(a) for a in eqn.invars]
            fl = [is_weight(a) for a in eqn.invars]
            here = path + (i,)
            stack = _join_scopes(scope, eqn.name_stack)
            with name_stack_as(stack):
                info = self.select(eqn, fl, here, stack) if eqn.prim in PRODUCTS else None
                if info is not None:
                    outs = [self.product(eqn, ins, info)]
                else:
                    if eqn.prim not in PRODUCTS and any(has_products(j)
                                                        for j in subjaxprs(eqn)):
                        eqn = self.rewrite_bodies(eqn, fl, here, stack)
                    outs = eqn.prim.bind(*ins, **eqn.params)
                    if not eqn.prim.multiple_results:
                        outs = [outs]
            for v, o in zip(eqn.outvars, outs):
                env[v], weight[v] = o, all(fl)
        return [read(v) for v in jaxpr.outvars]

    def rewrite_bodies(self, eqn, flags, path, scope=""):
        count = itertools.count()

        def body(sub):
            k = next(count)
            closed = sub if isinstance(sub, ClosedJaxpr) else ClosedJaxpr(sub, [])
            if not has_products(closed.jaxpr) or (not isinstance(sub, ClosedJaxpr)
                                                  and sub.constvars):
                return sub
            n = len(closed.jaxpr.invars)
            # operands map onto a body's inputs from the end (cond's index and a while
            # loop's condition operands come first)
            sub_flags = list(flags[-n:]) if n <= len(flags) else [False] * n
            new, _ = trace_to_jaxpr(
                lambda *a: self.run(closed.jaxpr, closed.consts, a, sub_flags, path + (k,),
                                    scope),
                closed.in_avals)
            return new if isinstance(sub, ClosedJaxpr) else new.jaxpr
        return map_subjaxprs(eqn, body)

    def select(self, eqn, flags, path, stack=""):
        cfg = self.config
        if eqn.outvars[0].aval.dtype.name not in FLOATS:
            return None
        if eqn.prim is conv_general_dilated_p and not cfg.convolutions:
            return None
        lhs, rhs = (a.aval for a in eqn.invars)
        weight_index = 0 if eqn.prim is dot_general_p and flags[0] and not flags[1] else 1
        info = ProductInfo(eqn.prim.name, path, tuple(lhs.shape), tuple(rhs.shape),
                           lhs.dtype, weight_index, dict(eqn.params), stack)
        if info.weight_size < cfg.min_weight_size or not cfg.in_scopes(stack):
            return None
        if cfg.select is not None and not cfg.select(info):
            return None
        return info

    # --- one product ---------------------------------------------------------------------------
    def product(self, eqn, ins, info):
        wi = info.weight_index
        ai = 1 - wi
        if self.observe is not None:
            self.observe(info, ins[ai])
            return eqn.prim.bind(*ins, **eqn.params)
        if self.config.mode == "fake":
            return self.quantized_product(eqn, ins[ai], ins[wi], info)
        return self.int_product(eqn, ins, info)

    def int_product(self, eqn, ins, info):
        """The integer product, differentiable: its derivative is the float product's
        (straight through the rounding), so ``grad`` of an int-mode function is meaningful
        rather than silently zero."""
        wi = info.weight_index
        ai = 1 - wi

        def float_product(a, w):
            ops = [None, None]
            ops[ai], ops[wi] = a, w
            return eqn.prim.bind(*ops, **eqn.params)
        w = ins[wi]
        if _concrete(w):
            f = custom_jvp(lambda a: self.quantized_product(eqn, a, w, info))
            f.defjvp(lambda p, t: (f(*p), float_product(t[0], w)))
            return f(ins[ai])
        g = custom_jvp(lambda a, w: self.quantized_product(eqn, a, w, info))
        g.defjvp(lambda p, t: (g(*p), float_product(t[0], p[1]) + float_product(p[0], t[1])))
        return g(ins[ai], w)

    def quantized_product(self, eqn, act, w, info):
        """``eqn``'s product of activation ``act`` and weight ``w``, quantized."""
        cfg = self.config
        wi = info.weight_index
        ai = 1 - wi
        shapes = (info.lhs_shape, info.rhs_shape)
        geom = Geometry(eqn.prim, eqn.params, *shapes)
        out_dtype = eqn.outvars[0].aval.dtype
        wf = cfg.weight_format
        block = cfg.block_size if cfg.granularity == "per_block" else None
        if block is not None and eqn.prim is not dot_general_p:
            raise ValueError(f"funcgrad.quantize: per_block scales apply to dot_general only, "
                             f"not to the convolution of {info.lhs_shape} and "
                             f"{info.rhs_shape}; select it out or use per_channel")
        xp = np if _concrete(w) else jnp
        w_in = np.asarray(w) if xp is np else w
        if cfg.mode == "fake":
            w_stat = w_in if xp is np else lax.stop_gradient(w_in)
            sw, zw = weight_qparams(w_stat, geom, wi, cfg, xp)
            wq = fake_quant_fn(wf.name)(
                _blocked_weight(w_in.astype(np.float32) if xp is jnp else
                                jnp.asarray(w_in, dtype=np.float32), geom, wi, block, jnp),
                sw, jnp.asarray(zw, dtype=np.float32))
            wq = jnp.reshape(wq, geom.shapes[wi]).astype(out_dtype)
            if cfg.activation != "none":
                sa, za = self.activation_qparams(act, geom, ai, info, jnp)
                act = fake_quant_fn(cfg.activation_format.name)(
                    act, sa, jnp.asarray(za, dtype=np.float32)).astype(act.dtype)
            ops = [None, None]
            ops[wi], ops[ai] = wq, act
            return eqn.prim.bind(*ops, **eqn.params)
        sw, zw = weight_qparams(w_in, geom, wi, cfg, xp)
        qw = schemes.quantize(_blocked_weight(w_in, geom, wi, block, xp), sw, zw, wf, xp)
        return weight_product(eqn.prim, eqn.params, shapes, act, qw, sw, zw, wi, cfg, out_dtype,
                              lambda a, g, side: self.activation_qparams(a, g, side, info,
                                                                         jnp))

    def activation_qparams(self, act, geom, side, info, xp):
        """(scale, zero_point) of an activation: its rows' ranges now, or the static range."""
        cfg = self.config
        if cfg.activation == "dynamic":
            return dynamic_qparams(act, geom, side, cfg)
        ranges = cfg.static_ranges
        if ranges is None:
            raise ValueError("funcgrad.quantize: activation='static' needs static_ranges; run "
                             "funcgrad.quantize.calibrate(f, batches) and pass its result as "
                             "QuantizeConfig(static_ranges=...)")
        lo, hi = ranges.range_of(info.path, "funcgrad.quantize")
        lo, hi = np.asarray(lo, np.float32), np.asarray(hi, np.float32)
        if lo.ndim:
            ndim = len(geom.shapes[side])
            reduced = set(geom.row_axes(side))
            axis = ranges.axis_of(info.path)
            if axis in reduced or axis is None or axis >= ndim:
                raise ValueError(f"funcgrad.quantize: the static range of the product at path "
                                 f"{info.path} is per channel along axis {axis}, which the "
                                 f"product of {info.lhs_shape} and {info.rhs_shape} contracts "
                                 f"(a scale there cannot be factored out); calibrate with a "
                                 f"per-tensor observer")
            shape = [1] * ndim
            shape[axis] = lo.size
            lo, hi = lo.reshape(shape), hi.reshape(shape)
        scale, zp = schemes.qparams(lo, hi, cfg.activation_format, cfg.activation_symmetric,
                                    np, narrow=True)
        return scale, 0 if cfg.activation_symmetric else zp


# --- the pieces of a quantized product, shared with funcgrad.quantization's modules ------------
def _block_of(cfg):
    return cfg.block_size if cfg.granularity == "per_block" else None


def _blocked_weight(w, geom, wi, block, xp):
    """``w`` with its contracted axis split into (blocks, block) for per-block scales."""
    if not block:
        return w
    _, split_shape, _ = _blocked(geom, block)
    return xp.reshape(w, split_shape(wi))


def weight_qparams(w, geom, wi, cfg, xp=np):
    """(scale, zero_point) of the weight ``w`` (operand ``wi`` of the product ``geom``) under
    ``cfg``'s format, symmetry and granularity, in the weight's layout (size 1 on the reduced
    axes; split into blocks for per-block scales). A symmetric zero point is the Python 0."""
    block = _block_of(cfg)
    if block:
        pgeom, _, _ = _blocked(geom, block)
        w = _blocked_weight(w, geom, wi, block, xp)
        axes = (pgeom.params["dimension_numbers"][0][wi][0],)
    elif cfg.granularity == "per_tensor":
        axes = tuple(range(len(geom.shapes[wi])))
    else:
        axes = geom.row_axes(wi)
    lo, hi = schemes.reduced_range(w, axes, xp)
    sw, zw = schemes.qparams(lo, hi, cfg.weight_format, cfg.symmetric, xp, narrow=True)
    return sw, (0 if cfg.symmetric else zw)


def dynamic_qparams(act, geom, side, cfg):
    """(scale, zero_point) of an activation from its values now: per row (reduced over the
    product's contracted axes) or per tensor, as ``cfg.activation_granularity`` says."""
    axes = (geom.row_axes(side) if cfg.activation_granularity == "per_row"
            else tuple(range(len(geom.shapes[side]))))
    lo, hi = schemes.reduced_range(lax.stop_gradient(act), axes, jnp)
    scale, zp = schemes.qparams(lo, hi, cfg.activation_format, cfg.activation_symmetric, jnp,
                                narrow=cfg.activation_narrow)
    return scale, 0 if cfg.activation_symmetric else zp


def _as_int8(q, zp, fmt):
    """An unsigned format's values and zero point moved into int8's range (both minus 128):
    the differences ``q - zp`` the product needs are unchanged, and int8 x int8 products are
    what the backends have."""
    if fmt.qmin >= 0 and not fmt.is_float:
        q = (q.astype(np.int32) - 128).astype(np.int8)
        zp = (jnp.asarray(zp, dtype=np.int32) if isinstance(zp, Tracer) or
              not isinstance(zp, np.ndarray) else zp.astype(np.int32)) - 128
    return q, zp


def _rows_first(prim, params, shapes, qw, sw, zw, wi):
    """A concrete 2-d weight on the right of ``x @ W.T`` (contracted on its last axis, no
    batch axes) transposed once, now, to (in, out) with its scales: XLA:CPU's library
    products measured 1.3-2x faster with that layout (``x @ W``) at small batches, and the
    transposition of a constant is not repeated per call. Other products are returned as
    they are."""
    if prim is not dot_general_p or wi != 1 or len(shapes[1]) != 2:
        return params, shapes, qw, sw, zw
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    if tuple(rc) != (1,) or lb or rb:
        return params, shapes, qw, sw, zw

    def t(a):
        return a if np.ndim(a) < 2 else np.ascontiguousarray(np.swapaxes(a, 0, 1))
    params = dict(params, dimension_numbers=((tuple(lc), (0,)), ((), ())))
    return params, (shapes[0], shapes[1][::-1]), t(qw), t(sw), t(zw)


def weight_product(prim, params, shapes, act, qw, sw, zw, wi, cfg, out_dtype,
                   act_qparams=None, float_accumulation=False):
    """The product ``prim`` (dot_general or conv_general_dilated with ``params``, operand
    shapes ``shapes``) of the float activation ``act`` and an already quantized weight: ``qw``
    stored integers (or fp8) with scale ``sw`` and zero point ``zw`` in the weight's layout
    (split into blocks for per-block configs), operand ``wi`` of the product.

    ``cfg`` (a ``QuantizeConfig``) says how the activation is treated: weight-only (the
    weight is dequantized into a float product), or quantized with ``act_qparams(act, geom,
    side)`` (default: the dynamic ranges ``cfg`` asks for) and multiplied as integers. Zero
    points enter by linearity, so the integer product is exact for affine schemes too.
    ``float_accumulation=True`` multiplies the integer values as float32 operands instead
    (zero points subtracted first; the same integers, exactly, while every partial sum stays
    below 2**24: the caller checks); XLA:CPU's float convolutions are several times faster
    than its int8 ones.

    Example:
        >>> from funcgrad.quantize import QuantizeConfig
        >>> from funcgrad.quantize.rewrite import weight_product
        >>> from funcgrad.lax.dot import dot_general_p
        >>> qw = np.array([[10, -20], [30, 40]], np.int8)        # (in, out), scales per column
        >>> y = weight_product(dot_general_p, dict(dimension_numbers=(((1,), (0,)), ((), ())),
        ...                    precision=None, preferred_element_type=None), ((1, 2), (2, 2)),
        ...                    jnp.array([[1.0, 2.0]]), qw, np.array([[0.1, 0.05]], np.float32), 0,
        ...                    1, QuantizeConfig(), np.dtype("float32"))
        >>> np.round(np.asarray(y), 3)
        array([[7.008, 2.992]], dtype=float32)
    """
    ai = 1 - wi
    block = _block_of(cfg)
    if not block and _concrete(qw, sw, zw):
        params, shapes, qw, sw, zw = _rows_first(prim, params, shapes, qw, sw, zw, wi)
    geom = Geometry(prim, params, *shapes)
    pgeom, split_shape, _ = _blocked(geom, block) if block else (geom, None, None)
    wf = cfg.weight_format
    xp = np if _concrete(qw, sw, zw) else jnp
    if cfg.activation == "none":
        wd = schemes.dequantize(jnp.asarray(qw), sw, zw, jnp)
        ops = [None, None]
        ops[wi], ops[ai] = jnp.reshape(wd, geom.shapes[wi]).astype(act.dtype), act
        return prim.bind(*ops, **params)
    af = cfg.activation_format
    act_in = jnp.reshape(act, split_shape(ai)) if block else act
    if act_qparams is None:
        sa, za = dynamic_qparams(act_in, pgeom, ai, cfg)
    else:
        sa, za = act_qparams(act_in, pgeom, ai)
    fused = float_accumulation and not wf.is_float and af.storage.itemsize < 4
    qa = None if fused else schemes.quantize(act_in, sa, za, af, jnp)
    acc = np.float32 if wf.is_float or float_accumulation else np.int32
    iparams = dict(pgeom.params, preferred_element_type=np.dtype(acc), precision=None)

    def prod(a_op, w_op):
        ops = [None, None]
        ops[ai], ops[wi] = a_op, w_op
        return prim.bind(*ops, **iparams)
    if float_accumulation and not wf.is_float:
        # the zero points subtracted in float (exact: small integers), one product
        if fused:
            a_f = schemes.shifted_values(act_in, sa, za, af, jnp)
        else:
            a_f = qa.astype(np.float32)
            if not schemes._is_zero(za):
                a_f = a_f - jnp.asarray(za, dtype=np.float32)
        w_f = qw.astype(np.float32)
        if not schemes._is_zero(zw):
            w_f = w_f - xp.asarray(zw, dtype=np.float32)
        out = prod(a_f, w_f)
        res = out * pgeom.to_out(sa, ai, jnp) * pgeom.to_out(sw, wi, xp)
        return (jnp.sum(res, axis=0) if block else res).astype(out_dtype)
    if not wf.is_float:
        qa, za = _as_int8(qa, za, af)
        qw, zw = _as_int8(qw, zw, wf)
    out = prod(qa, qw)
    if not wf.is_float:
        a_affine, w_affine = not schemes._is_zero(za), not schemes._is_zero(zw)
        w_sum = None
        if a_affine:
            if prim is dot_general_p:
                # za is constant along the contracted axes: P(za, qw) = za * (sum of qw there)
                axes = pgeom.row_axes(wi)
                w_sum = (xp.sum(qw.astype(np.int32), axis=axes, keepdims=True) if xp is np
                         else jnp.sum(qw.astype(np.int32), axis=axes, keepdims=True))
                out = out - pgeom.to_out(jnp.asarray(za, dtype=np.int32), ai, jnp) * \
                    pgeom.to_out(w_sum, wi, xp)
            else:
                # za is constant over all but the batch axis: the product of a one-example
                # block of ones, scaled per example, is P(za, qw) (padding included)
                batch_axis = pgeom.params["dimension_numbers"][0][0]
                shape = list(qa.shape)
                shape[batch_axis] = 1
                ones = jnp.ones(shape, qa.dtype)
                out = out - jnp.asarray(za, dtype=out.dtype) * prod(ones, qw).astype(out.dtype)
        if w_affine:
            zw_full = (np.broadcast_to(zw, qw.shape) if xp is np else
                       jnp.broadcast_to(zw, qw.shape)).astype(qw.dtype)
            out = out - prod(qa, zw_full)
            if a_affine:
                out = out + prod(jnp.broadcast_to(za, qa.shape).astype(qa.dtype), zw_full)
    res = out.astype(np.float32) * pgeom.to_out(sa, ai, jnp) * pgeom.to_out(sw, wi, xp)
    if block:
        res = jnp.sum(res, axis=0)
    return res.astype(out_dtype)
