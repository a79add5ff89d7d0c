"""The intermediate representation: a Jaxpr is a typed, first-order list of equations.

    { lambda a:f32[3]; b:f32[3]. let
        c:f32[3] = mul a b
        d:f32[] = reduce_sum[axes=(0,)] c
      in (d,) }

Constants captured from the environment are ``constvars`` (before the ``;``), arguments are
``invars``; higher-order primitives (cond, scan, custom_jvp_call...) carry sub-Jaxprs in
their params.
"""
import contextlib
import contextvars
import functools
import itertools

import numpy as np

from funcgrad.core import interpreters, source_info
from funcgrad.core.avals import ShapedArray
from funcgrad.core.primitive import out_avals


class Var:
    """A variable of a Jaxpr, typed by its aval."""

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"Var<{self.aval.str_short()}>"


class Literal:
    """A scalar constant written inline in a Jaxpr."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval):
        self.val = val
        self.aval = aval

    def __repr__(self):
        return f"{self.val!r}"


# --- name scopes -------------------------------------------------------------------------------
_NAME_STACK = contextvars.ContextVar("funcgrad_name_stack", default="")


def current_name_stack():
    """The names of the enclosing ``named_scope``s, joined by "/" ("" outside any)."""
    return _NAME_STACK.get()


@contextlib.contextmanager
def name_stack_as(stack):
    """Make ``stack`` the current name stack (transformations that re-stage equations use it
    to keep each equation's scope)."""
    token = _NAME_STACK.set(stack)
    try:
        yield
    finally:
        _NAME_STACK.reset(token)


class named_scope:
    """Push ``name`` on the name stack that staged equations record (``Eqn.name_stack``), as
    ``jax.named_scope``: a context manager, or a decorator. Scopes nest ("outer/inner"); they
    change no value, only the names that transformations (``funcgrad.quantize``'s
    ``QuantizeConfig(scopes=...)``) and ``closed_jaxpr.pretty_print(name_stack=True)`` see.

    Example:
        >>> with funcgrad.named_scope("encoder"):
        ...     with funcgrad.named_scope("dense"):
        ...         closed = funcgrad.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(1.0)
        >>> [e.name_stack for e in closed.eqns]
        ['encoder/dense', 'encoder/dense']
        >>> @funcgrad.named_scope("head")
        ... def head(x):
        ...     return jnp.cos(x)
        >>> x = jnp.ones(())
        >>> print(funcgrad.make_jaxpr(lambda x: head(jnp.sin(x)))(x).pretty_print(name_stack=True))
        { lambda ; a:f32[]. let
            b:f32[] = sin a
            c:f32[] = cos b    # head
          in (c,) }
    """

    def __init__(self, name):
        if not isinstance(name, str) or not name:
            raise TypeError(f"named_scope: name must be a non-empty string, got {name!r}")
        self.name = name
        self._tokens = []

    def __enter__(self):
        outer = _NAME_STACK.get()
        self._tokens.append(_NAME_STACK.set(f"{outer}/{self.name}" if outer else self.name))
        return self

    def __exit__(self, *exc):
        _NAME_STACK.reset(self._tokens.pop())

    def __call__(self, fn):
        @functools.wraps(fn)
        def scoped(*args, **kwargs):
            with named_scope(self.name):
                return fn(*args, **kwargs)
        return scoped


class Eqn:
    """``outvars = prim[params] invars``; ``source_info`` is where user code applied ``prim``
    (a ``core.source_info.SourceInfo``, or None), for error messages; ``name_stack`` holds the
    ``named_scope``s that were open when the equation was made."""

    __slots__ = ("prim", "invars", "params", "outvars", "source_info", "name_stack")

    def __init__(self, prim, invars, params, outvars, source_info=None, name_stack=None):
        self.prim, self.invars, self.params, self.outvars = prim, list(invars), dict(params), list(outvars)
        self.source_info = source_info
        self.name_stack = _NAME_STACK.get() if name_stack is None else name_stack


class Jaxpr:
    """A typed function: constvars and invars in, equations, outvars out.

    Hashing and equality are by identity, so Jaxprs can sit in primitive params and cache keys.
    """

    __slots__ = ("constvars", "invars", "eqns", "outvars", "__weakref__")

    def __init__(self, constvars, invars, eqns, outvars):
        self.constvars, self.invars = list(constvars), list(invars)
        self.eqns, self.outvars = list(eqns), list(outvars)

    @property
    def in_avals(self):
        return [v.aval for v in self.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.outvars]

    def __str__(self):
        return pretty_print(self)

    __repr__ = __str__

    def pretty_print(self, name_stack=False):
        """The printed Jaxpr; ``name_stack=True`` adds each equation's scope as a comment."""
        return pretty_print(self, name_stack=name_stack)


class ClosedJaxpr:
    """A Jaxpr together with the values of its constvars.

    Example:
        >>> w = np.array([2.0, 3.0], np.float32)
        >>> closed = funcgrad.make_jaxpr(lambda x: jnp.sin(x) * w)(jnp.ones(2))
        >>> print(closed)
        { lambda a:f32[2]; b:f32[2]. let
            c:f32[2] = sin b
            d:f32[2] = mul c a
          in (d,) }
        >>> [e.prim.name for e in closed.jaxpr.eqns], closed.consts
        (['sin', 'mul'], [array([2., 3.], dtype=float32)])
    """

    __slots__ = ("jaxpr", "consts", "__weakref__")

    def __init__(self, jaxpr, consts):
        self.jaxpr, self.consts = jaxpr, list(consts)

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)

    def __call__(self, *args):
        return eval_jaxpr(self.jaxpr, self.consts, *args)

    def __str__(self):
        return pretty_print(self.jaxpr)

    __repr__ = __str__

    def pretty_print(self, name_stack=False):
        """The printed Jaxpr; ``name_stack=True`` adds each equation's scope as a comment."""
        return pretty_print(self.jaxpr, name_stack=name_stack)


def consts_as_args(closed):
    """(ClosedJaxpr without consts taking (consts..., args...), consts).

    Higher-order primitives (jit, cond, scan...) carry sub-jaxprs this way, so that consts
    that are tracers of an enclosing transformation flow as ordinary operands.
    """
    j = closed.jaxpr
    if not j.constvars:
        return closed, []
    return ClosedJaxpr(Jaxpr([], j.constvars + j.invars, j.eqns, j.outvars), []), closed.consts


# --- higher-order equations: the Jaxprs in their params ---------------------------------------
def _map_params(value, fn):
    if isinstance(value, (ClosedJaxpr, Jaxpr)):
        return fn(value)
    if type(value) in (tuple, list):   # not named tuples: those are plain params
        mapped = [_map_params(v, fn) for v in value]
        return type(value)(mapped)
    return value


def subjaxprs(eqn):
    """The Jaxprs (as ``Jaxpr``, unwrapping ClosedJaxprs) that ``eqn``'s params carry: the bodies
    of ``jit``, ``cond``'s branches, a loop's cond and body, ``custom_jvp``'s call...

    Example:
        >>> from funcgrad.core.jaxpr import subjaxprs
        >>> closed = funcgrad.make_jaxpr(lambda x: funcgrad.jit(jnp.sin)(x))(1.0)
        >>> [len(j.eqns) for j in subjaxprs(closed.eqns[0])]
        [1]
    """
    found = []
    for value in eqn.params.values():
        _map_params(value, lambda j: found.append(j.jaxpr if isinstance(j, ClosedJaxpr) else j))
    return found


def map_subjaxprs(eqn, fn):
    """A copy of ``eqn`` whose sub-Jaxprs are replaced by ``fn(sub)``, for every param that is a
    ClosedJaxpr or a Jaxpr (or a tuple/list of them): one way to rebuild any higher-order
    equation (cond, while, scan, jit, remat, custom_jvp/vjp, and those still to come).
    ``fn`` receives what the param holds (ClosedJaxpr or Jaxpr) and returns its replacement.

    Example:
        >>> from funcgrad.core.jaxpr import map_subjaxprs
        >>> closed = funcgrad.make_jaxpr(lambda x: funcgrad.jit(jnp.sin)(x))(1.0)
        >>> seen = []
        >>> new = map_subjaxprs(closed.eqns[0], lambda j: seen.append(j) or j)
        >>> len(seen), new.prim.name
        (1, 'jit')
    """
    params = {k: _map_params(v, fn) for k, v in eqn.params.items()}
    return Eqn(eqn.prim, eqn.invars, params, eqn.outvars, eqn.source_info, eqn.name_stack)


# --- printing ----------------------------------------------------------------------------------
def _names():
    for size in itertools.count(1):
        for letters in itertools.product("abcdefghijklmnopqrstuvwxyz", repeat=size):
            yield "".join(letters)


class _Namer:
    def __init__(self):
        self.names, self.gen = {}, _names()

    def __call__(self, atom):
        if isinstance(atom, Literal):
            v = atom.val
            return repr(v.item() if isinstance(v, np.generic) else v)
        if atom not in self.names:
            self.names[atom] = next(self.gen)
        return self.names[atom]

    def typed(self, var):
        return f"{self(var)}:{var.aval.str_short()}"


def _param_str(value, namer, indent, name_stack=False):
    if isinstance(value, ClosedJaxpr):
        value = value.jaxpr
    if isinstance(value, Jaxpr):
        return "\n" + pretty_print(value, indent + 4, name_stack)
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, (tuple, list)) and any(isinstance(v, (Jaxpr, ClosedJaxpr)) for v in value):
        return "(" + ", ".join(_param_str(v, namer, indent, name_stack) for v in value) + ")"
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__
    return repr(value)


def pretty_print(jaxpr, indent=0, name_stack=False):
    """A readable, JAX-like rendering of ``jaxpr`` (``name_stack=True``: with each equation's
    ``named_scope`` as a comment)."""
    namer = _Namer()
    pad = " " * indent
    consts = " ".join(namer.typed(v) for v in jaxpr.constvars)
    args = " ".join(namer.typed(v) for v in jaxpr.invars)
    lines = [f"{pad}{{ lambda {consts}; {args}. let"]
    for eqn in jaxpr.eqns:
        outs = " ".join(namer.typed(v) for v in eqn.outvars)
        params = ""
        if eqn.params:
            params = "[" + " ".join(f"{k}={_param_str(v, namer, indent + 4, name_stack)}"
                                    for k, v in eqn.params.items()) + "]"
        ins = " ".join(namer(v) for v in eqn.invars)
        scope = f"    # {eqn.name_stack}" if name_stack and eqn.name_stack else ""
        lines.append(f"{pad}    {outs} = {eqn.prim.name}{params} {ins}{scope}")
    outs = ", ".join(namer(v) for v in jaxpr.outvars)
    lines.append(f"{pad}  in ({outs}{',' if len(jaxpr.outvars) == 1 else ''}) }}")
    return "\n".join(lines)


# --- checking ----------------------------------------------------------------------------------
class JaxprTypeError(TypeError):
    """A Jaxpr is malformed: a variable used before definition or an equation mistyped."""


def _types_match(declared, inferred):
    return declared.shape == inferred.shape and declared.dtype == inferred.dtype


def check_jaxpr(jaxpr):
    """Type-check ``jaxpr``: every variable is defined once before use, every equation's output
    types are what its primitive's abstract evaluation infers. Raises JaxprTypeError."""
    defined = set()

    def define(var, where):
        if not isinstance(var, Var):
            raise JaxprTypeError(f"{where}: expected a Var, got {var!r}")
        if var in defined:
            raise JaxprTypeError(f"{where}: variable {var} defined twice")
        defined.add(var)

    def read(atom, where):
        if isinstance(atom, Literal):
            return atom.aval
        if atom not in defined:
            raise JaxprTypeError(f"{where}: variable {atom} used before it is defined")
        return atom.aval

    for v in jaxpr.constvars:
        define(v, "constvars")
    for v in jaxpr.invars:
        define(v, "invars")
    for i, eqn in enumerate(jaxpr.eqns):
        where = f"equation {i} ({eqn.prim.name})"
        in_avals = [read(a, where) for a in eqn.invars]
        inferred = out_avals(eqn.prim, in_avals, eqn.params)
        if len(inferred) != len(eqn.outvars):
            raise JaxprTypeError(f"{where}: {len(eqn.outvars)} outputs declared, "
                                 f"{len(inferred)} inferred")
        for var, aval in zip(eqn.outvars, inferred):
            if not _types_match(var.aval, aval):
                raise JaxprTypeError(f"{where}: output declared {var.aval.str_short()} but "
                                     f"{eqn.prim.name} gives {aval.str_short()}")
            define(var, where)
    for v in jaxpr.outvars:
        read(v, "outvars")


# --- evaluation --------------------------------------------------------------------------------
def eval_jaxpr(jaxpr, consts, *args):
    """Apply ``jaxpr`` to ``args`` under the current interpreter; returns a list of outputs."""
    env = {}
    for var, val in zip(jaxpr.constvars, consts):
        env[var] = val
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"eval_jaxpr: the jaxpr takes {len(jaxpr.invars)} arguments, "
                        f"got {len(args)}")
    for var, val in zip(jaxpr.invars, args):
        env[var] = val

    def read(atom):
        return atom.val if isinstance(atom, Literal) else env[atom]

    interp = interpreters.current()
    evaluating = source_info.evaluating
    saved = evaluating[0]
    try:
        for eqn in jaxpr.eqns:
            evaluating[0] = eqn.source_info
            outs = interp.process_primitive(eqn.prim, [read(a) for a in eqn.invars], eqn.params)
            if not eqn.prim.multiple_results:
                outs = [outs]
            for var, val in zip(eqn.outvars, outs):
                env[var] = val
    finally:
        evaluating[0] = saved
    return [read(v) for v in jaxpr.outvars]


def literal(value, dtype=None):
    """A Literal for a scalar (NumPy scalar with a dtype, or a weakly typed Python scalar)."""
    from funcgrad.core import dtypes
    if isinstance(value, (bool, int, float, complex)) and dtype is None:
        dt, weak = dtypes.python_scalar_dtype(value)
        return Literal(np.array(value, dt)[()], ShapedArray((), dt, weak))
    dt = np.dtype(dtype or value.dtype)
    return Literal(np.array(value, dt)[()], ShapedArray((), dt, False))
