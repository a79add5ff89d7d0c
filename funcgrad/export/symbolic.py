"""Symbolic dimensions of exported functions: ``symbolic_shape("b, 784")``, the constraints a
call must meet, and the module templates that make one export serve every size.

How a symbolic export works (see ``docs/export.md``): funcgrad's tracer needs concrete
shapes, so ``export`` traces the function twice, with every symbol set to a different prime
(``SENTINELS_A`` then ``SENTINELS_B``), and lowers both. Every integer in either module's text
that is a multiple of the symbols' primes (a tensor dimension, a slice limit, an element count
used by a mean) is replaced by a placeholder ``coefficient * symbol**power``; the two templates
must then be identical, which proves that the program depends on the symbols only through
those placeholders. A call solves the symbols from its arguments' shapes, checks the
constraints and renders the template at those sizes (``specialize``), which is compiled once
per size.

Example:
    >>> from funcgrad.export import symbolic_shape
    >>> symbolic_shape("b, 784")
    (b, 784)
    >>> symbolic_shape("2*b, t")
    (2*b, t)
"""
import ast
import re

import numpy as np

# The primes each symbol takes in the two traces (symbol i takes A[i], then B[i]).
SENTINELS_A = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049)
SENTINELS_B = (1051, 1061, 1063, 1069, 1087, 1091, 1093, 1097)


class ShapeError(ValueError):
    """The arguments of an exported function do not fit its (symbolic) shapes."""


class Dim:
    """A symbolic dimension: ``coeff * sym1**e1 * sym2**e2 ...`` (``b``, ``2*b``, ``b*t``).

    Example:
        >>> from funcgrad.export.symbolic import Dim
        >>> d = Dim(2, {"b": 1})
        >>> d, d.evaluate({"b": 5})
        (2*b, 10)
    """

    is_symbolic_dim = True
    __slots__ = ("coeff", "powers")

    def __init__(self, coeff, powers):
        self.coeff = int(coeff)
        self.powers = tuple(sorted((str(k), int(v)) for k, v in dict(powers).items() if v))

    @property
    def symbols(self):
        return tuple(k for k, _ in self.powers)

    def evaluate(self, env):
        value = self.coeff
        for name, power in self.powers:
            value *= int(env[name]) ** power
        return value

    def __eq__(self, other):
        return isinstance(other, Dim) and (self.coeff, self.powers) == (other.coeff, other.powers)

    def __hash__(self):
        return hash((self.coeff, self.powers))

    def __repr__(self):
        parts = [] if self.coeff == 1 else [str(self.coeff)]
        parts += [name if p == 1 else f"{name}**{p}" for name, p in self.powers]
        return "*".join(parts)

    __str__ = __repr__


def _parse_dim(text, spec):
    """One comma-separated item of a shape spec: an int, or a product of ints and symbols."""
    def bad(why):
        return ValueError(f"symbolic_shape({spec!r}): dimension {text.strip()!r} {why}; "
                          f"write an integer, a symbol ('b') or a product ('2*b', 'b*t')")
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise bad("is not an expression") from None
    coeff, powers = 1, {}

    def walk(n):
        nonlocal coeff
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            walk(n.left)
            walk(n.right)
        elif isinstance(n, ast.Constant) and type(n.value) is int and n.value >= 0:
            coeff *= n.value
        elif isinstance(n, ast.Name):
            powers[n.id] = powers.get(n.id, 0) + 1
        else:
            raise bad("is not supported (only products of integers and symbols)")
    walk(node)
    return Dim(coeff, powers) if powers else coeff


def symbolic_shape(spec):
    """A shape with symbolic dimensions, for ``ShapeDtypeStruct`` arguments of ``export``.

    ``spec`` is a comma-separated string: integers, symbols (``b``) and products (``2*b``,
    ``b*t``). A function exported with such a shape runs for every size that meets the
    constraints (every symbol is at least 1, plus those given to ``export``).

    Example:
        >>> import funcgrad, funcgrad.numpy as jnp
        >>> from funcgrad import export
        >>> x = funcgrad.ShapeDtypeStruct(export.symbolic_shape("b, 3"), jnp.float32)
        >>> exp = export.export(lambda x: x.sum(axis=1))(x)
        >>> exp.in_avals
        (ShapeDtypeStruct(shape=(b, 3), dtype=float32),)
        >>> exp.call(jnp.ones((2, 3))), exp.call(jnp.ones((4, 3))).shape
        (Array([3., 3.], dtype=float32), (4,))
    """
    if not isinstance(spec, str):
        raise TypeError(f"symbolic_shape: expected a string like 'b, 784', got "
                        f"{type(spec).__name__} {spec!r}")
    items = [s for s in spec.split(",")]
    if items and not items[-1].strip():
        items = items[:-1]          # a trailing comma, as in "b,"
    return tuple(_parse_dim(s, spec) for s in items)


def is_symbolic(d):
    return getattr(d, "is_symbolic_dim", False)


def symbols_of(shapes):
    """The symbol names used in ``shapes`` (sequences of ints and Dims), in first-use order."""
    names = []
    for shape in shapes:
        for d in shape:
            if is_symbolic(d):
                names += [s for s in d.symbols if s not in names]
    return names


def sentinel_env(names, which):
    primes = SENTINELS_A if which == "A" else SENTINELS_B
    if len(names) > len(primes):
        raise ValueError(f"export: at most {len(primes)} symbols are supported, got "
                         f"{len(names)} ({', '.join(names)})")
    return {n: primes[i] for i, n in enumerate(names)}


def concrete_shape(shape, env):
    return tuple(d.evaluate(env) if is_symbolic(d) else int(d) for d in shape)


# --- constraints ------------------------------------------------------------------------------
_CMP = {ast.GtE: ">=", ast.LtE: "<=", ast.Gt: ">", ast.Lt: "<", ast.Eq: "==", ast.NotEq: "!="}
_ARITH = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
          ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
          ast.Mod: lambda a, b: a % b}


class Constraint:
    """A condition on symbols, checked at every call: ``"b >= 2"``, ``"b % 8 == 0"``,
    ``"t <= 512"``, ``"b == 2*h"`` (integers, symbols, ``+ - * // %``, one comparison).

    Example:
        >>> from funcgrad.export.symbolic import Constraint
        >>> c = Constraint("b % 8 == 0")
        >>> c.holds({"b": 16}), c.holds({"b": 12})
        (True, False)
    """

    def __init__(self, text):
        self.text = str(text).strip()
        try:
            node = ast.parse(self.text, mode="eval").body
        except SyntaxError:
            node = None
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1
                and type(node.ops[0]) in _CMP):
            raise ValueError(f"export: constraint {self.text!r} must be one comparison "
                             f"(>=, <=, >, <, ==, !=) of integer expressions, like 'b >= 2'")
        self._node = node
        self.symbols = sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name)})
        self._check_expr(node.left)
        self._check_expr(node.comparators[0])

    def _check_expr(self, n):
        if isinstance(n, ast.BinOp) and type(n.op) in _ARITH:
            self._check_expr(n.left)
            self._check_expr(n.right)
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            self._check_expr(n.operand)
        elif not (isinstance(n, ast.Name) or (isinstance(n, ast.Constant)
                                               and type(n.value) is int)):
            raise ValueError(f"export: constraint {self.text!r}: {ast.unparse(n)!r} is not an "
                             f"integer expression of symbols")

    def _eval(self, n, env):
        if isinstance(n, ast.BinOp):
            return _ARITH[type(n.op)](self._eval(n.left, env), self._eval(n.right, env))
        if isinstance(n, ast.UnaryOp):
            return -self._eval(n.operand, env)
        if isinstance(n, ast.Name):
            return env[n.id]
        return n.value

    def holds(self, env):
        try:
            left = self._eval(self._node.left, env)
            right = self._eval(self._node.comparators[0], env)
        except ZeroDivisionError:
            return False
        op = _CMP[type(self._node.ops[0])]
        return {">=": left >= right, "<=": left <= right, ">": left > right,
                "<": left < right, "==": left == right, "!=": left != right}[op]

    def __repr__(self):
        return self.text


def solve(name, specs, shapes, constraints):
    """Symbol values from the actual ``shapes`` of the arguments whose exported shapes are
    ``specs``; raises ``ShapeError`` naming the argument, the dimension and the rule broken."""
    env = {}
    deferred = []
    for i, (spec, shape) in enumerate(zip(specs, shapes)):
        if len(spec) != len(shape):
            raise ShapeError(f"{name}: argument {i} has shape {tuple(shape)}, expected rank "
                             f"{len(spec)} (shape {_show(spec)})")
        for axis, (d, actual) in enumerate(zip(spec, shape)):
            if type(d) is int:
                if d != actual:
                    raise ShapeError(f"{_where(name, i, shape, spec)} (dimension {axis} is "
                                     f"{actual}, not {d})")
                continue
            where = _where(name, i, shape, spec)
            if len(d.powers) == 1 and d.powers[0][1] == 1 and d.powers[0][0] not in env:
                sym = d.powers[0][0]
                if d.coeff == 0 or actual % d.coeff:
                    raise ShapeError(f"{where}: dimension {axis} is {actual}, which is not a "
                                     f"multiple of {d.coeff} (it must be {d})")
                env[sym] = actual // d.coeff
            else:
                deferred.append((where, axis, d, actual))
    for where, axis, d, actual in deferred:
        missing = [s for s in d.symbols if s not in env]
        if missing:
            raise ShapeError(f"{where}: symbol {missing[0]} cannot be found from the shapes "
                             f"(it appears only inside {d})")
        if d.evaluate(env) != actual:
            values = ", ".join(f"{k}={v}" for k, v in sorted(env.items()))
            raise ShapeError(f"{where}: dimension {axis} is {actual}, but {d} = "
                             f"{d.evaluate(env)} with {values}")
    for c in constraints:
        if not c.holds(env):
            values = ", ".join(f"{k}={env[k]}" for k in c.symbols if k in env)
            raise ShapeError(f"{name}: the argument shapes {[tuple(s) for s in shapes]} give "
                             f"{values}, which breaks the constraint {c}")
    return env


def _where(name, i, shape, spec):
    return f"{name}: argument {i} has shape {tuple(shape)}, expected {_show(spec)}"


def _show(spec):
    return "(" + ", ".join(str(d) for d in spec) + ("," if len(spec) == 1 else "") + ")"


# --- module templates -------------------------------------------------------------------------
# Integers in MLIR text: tensor dimensions (``tensor<1009x784xf32>``), other integers
# (attributes, integer constants) and decimal floats (a mean's element count). SSA names
# (``%1009``), symbol names and hex floats are left alone.
_TOKEN = re.compile(r"(?P<dim>(?<=[<x])\d+(?=x))"
                    r"|(?P<float>(?<![\w.%#^@$\-])\d+\.\d*(?:[eE][-+]?\d+)?(?![\w.]))"
                    r"|(?P<int>(?<![\w.%#^@$\-])\d+(?![\w.]))")


def _factor(n, env):
    """(coeff, powers) when ``n`` is a multiple of some symbols' primes, else None."""
    powers = {}
    for name, prime in env.items():
        while n and n % prime == 0:
            n //= prime
            powers[name] = powers.get(name, 0) + 1
    return (n, tuple(sorted(powers.items()))) if powers else None


def make_template(text, env):
    """Split module ``text`` (lowered with the symbols at the primes of ``env``) into literal
    chunks and placeholders ``(kind, coeff, powers)``."""
    pieces, last = [], 0
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if m.lastgroup == "float":
            value = float(tok)
            if not value.is_integer() or abs(value) >= 2 ** 53:
                continue
            n, kind = int(value), "f"
        else:
            n, kind = int(tok), "i"
        found = _factor(n, env)
        if found is None:
            continue
        pieces.append(text[last:m.start()])
        pieces.append((kind,) + found)
        last = m.end()
    pieces.append(text[last:])
    return pieces


def compare_templates(a, b):
    """None when templates ``a`` and ``b`` agree, else a description of the first difference."""
    if a == b:
        return None
    ta, tb = _render(a, None), _render(b, None)
    for la, lb in zip(ta.splitlines(), tb.splitlines()):
        if la != lb:
            return f"{la.strip()}\n    vs\n    {lb.strip()}"
    return "the two programs differ in length"


def _render(pieces, env):
    out = []
    for p in pieces:
        if isinstance(p, str):
            out.append(p)
            continue
        kind, coeff, powers = p
        if env is None:        # for messages: the expression itself
            expr = Dim(coeff, dict(powers))
            out.append(f"{{{expr}}}")
            continue
        n = coeff
        for name, power in powers:
            n *= env[name] ** power
        out.append(f"{n}.0" if kind == "f" else str(n))
    return "".join(out)


def specialize(pieces, env):
    """The module text at symbol values ``env``."""
    return _render(pieces, env)


def shape_to_json(shape):
    return [str(d) if is_symbolic(d) else int(d) for d in shape]


def shape_from_json(items, where):
    out = []
    for d in items:
        if isinstance(d, int) and not isinstance(d, bool) and d >= 0:
            out.append(d)
        elif isinstance(d, str):
            parsed = _parse_dim(d, d)
            out.append(parsed)
        else:
            raise ValueError(f"{where}: bad dimension {d!r}")
    return tuple(out)


def dtype_name(dtype):
    return np.dtype(dtype).name
