"""What a DeviceClass's CEL expression can read of a device, from a parse of its text.

The selectors' verdict memo (``selectors.DeviceSelector``) keys a device by what
its class's expressions can read; this module says what that is. It parses the
expression (CEL's literals, operators, member selection, indexing, calls and
method calls) and looks at every use of the variable ``device``:

=====================================================  ===============================
a use of ``device``                                    what it reads
=====================================================  ===============================
``device.driver`` (and anything after it)              the driver (every key holds it)
``device.attributes[D].N``, ``...[D]['N']``            the attribute whose name is N,
(N spelled out; D any expression; anything after it,   in whichever domain (which
such as ``.compareTo(...)``, works on N's value)       domains exist is keyed apart)
the same with ``device.capacity``                      the capacity whose name is N
any other use: ``device`` alone, a domain's map        unknown
whole (``size(...)``, ``in``, a method on it), a name
computed when evaluated, another field
=====================================================  ===============================

It answers unknown too -- the memo then keys by the whole device -- for any macro
that binds a variable (``all``, ``exists``, ``exists_one``, ``map``,
``filter``, ``bind`` and the like: a bound variable may shadow ``device`` or
range over a map's names), any call whose first of several arguments is a bare
name (a binding this table does not know), and any text the parser does not
recognise (optional selection, message literals, an escape in a spelled name,
nesting deeper than Python's recursion allows).
Unknown is always safe: a wrong read set is a wrong placement, a whole-device key
only a slower one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

import attrs

__all__ = ["Reads", "reads_of"]

# Macros and extension functions that bind a variable (their first argument).
_BINDING = frozenset({"all", "exists", "exists_one", "existsOne", "map", "filter", "bind",
                      "transformList", "transformMap", "transformMapEntry", "sortBy",
                      "optMap", "optFlatMap", "block", "index"})
_MAPS = ("attributes", "capacity")
_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>(?P<prefix>[rRbB]{0,2})
        (?P<body>'''(?:[^\\]|\\.)*?'''|\"\"\"(?:[^\\]|\\.)*?\"\"\"
                |'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"))
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+
                (?:[eE][+-]?\d+)?|\d+[uU]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>==|!=|<=|>=|&&|\|\||[-+*/%!<>?:.,\[\](){}])
""", re.VERBOSE | re.DOTALL)
_BINARY = (("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"),
           ("*", "/", "%"))


@attrs.frozen
class Reads:
    """The attribute and capacity names (local part, domain aside) an expression reads."""

    attributes: frozenset[str] = frozenset()
    capacity: frozenset[str] = frozenset()

    def __or__(self, other: Reads) -> Reads:
        return Reads(self.attributes | other.attributes, self.capacity | other.capacity)


class _Unknown(Exception):
    """The expression may read more than its spelled names."""


class Lit(NamedTuple):
    value: str | None  # a string's value when spelled plainly; None for any other


class Ident(NamedTuple):
    name: str


class Select(NamedTuple):
    operand: Node
    field: str


class Index(NamedTuple):
    operand: Node
    key: Node


class Call(NamedTuple):
    target: Node | None  # None: a function, not a method
    name: str
    arguments: tuple[Node, ...]


class Group(NamedTuple):
    """Everything else (operators, lists, maps): its reads are its children's."""

    children: tuple[Node, ...]


Node = Lit | Ident | Select | Index | Call | Group


def reads_of(expression: str) -> Reads | None:
    """What ``expression`` can read of a device; None when that cannot be known."""
    try:
        tree = _Parser(list(_tokens(expression))).parse()
        found: dict[str, set[str]] = {m: set() for m in _MAPS}
        _collect(tree, found)
    except (_Unknown, RecursionError):  # nested deeper than this parser recurses
        return None
    return Reads(frozenset(found["attributes"]), frozenset(found["capacity"]))


Token = tuple[str, str | None]  # (kind, text); a string's text is its value, or None


def _tokens(text: str) -> Iterator[Token]:
    at = 0
    while at < len(text):
        found = _TOKEN.match(text, at)
        if found is None:
            raise _Unknown(f"unrecognised text at {at}")
        at = found.end()
        if found.group("space") is not None:
            continue
        if found.group("string") is not None:
            yield "string", _string_value(found.group("prefix"), found.group("body"))
        else:
            yield str(found.lastgroup), found.group(0)


def _string_value(prefix: str, body: str) -> str | None:
    # Only a plain string's value is needed (a spelled name); bytes, and escapes this
    # module does not decode, are values it does not know.
    quote = 3 if body[:3] in ("'''", '"""') else 1
    inner = body[quote:-quote]
    if "b" in prefix.lower() or ("\\" in inner and "r" not in prefix.lower()):
        return None
    return inner


class _Parser:
    """Precedence climbing over CEL's grammar: conditional, or, and, relations,
    sums, products, unary, then member chains (selection, index, method call)."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.at = 0

    def parse(self) -> Node:
        tree = self.expression()
        if self.at != len(self.tokens):
            raise _Unknown("text after the expression")
        return tree

    def sees(self, *texts: str) -> bool:
        """The next token is one of these operators, brackets or keywords."""
        if self.at >= len(self.tokens):
            return False
        kind, text = self.tokens[self.at]
        return kind in ("punct", "ident") and text in texts

    def take(self, expected: str | None = None) -> Token:
        if self.at >= len(self.tokens):
            raise _Unknown("the expression ends early")
        if expected is not None and not self.sees(expected):
            raise _Unknown(f"{expected!r} expected")
        self.at += 1
        return self.tokens[self.at - 1]

    def expression(self) -> Node:
        condition = self.binary(0)
        if not self.sees("?"):
            return condition
        self.take("?")
        then = self.binary(0)
        self.take(":")
        return Group((condition, then, self.expression()))

    def binary(self, level: int) -> Node:
        if level == len(_BINARY):
            return self.unary()
        left = self.binary(level + 1)
        while self.sees(*_BINARY[level]):
            self.take()
            left = Group((left, self.binary(level + 1)))
        return left

    def unary(self) -> Node:
        if self.sees("!", "-"):
            self.take()
            return Group((self.unary(),))
        return self.member(self.primary())

    def member(self, node: Node) -> Node:
        while True:
            if self.sees("."):
                self.take()
                kind, name = self.take()
                if kind != "ident" or name is None:
                    raise _Unknown("a name expected after '.'")
                node = (Call(node, name, self.arguments(")")) if self.sees("(") else
                        Select(node, name))
            elif self.sees("["):
                self.take()
                index = self.expression()
                self.take("]")
                node = Index(node, index)
            else:
                return node

    def arguments(self, close: str) -> tuple[Node, ...]:
        self.take()  # the opening bracket
        items: list[Node] = []
        while not self.sees(close):
            items.append(self.expression())
            if not self.sees(close):
                self.take(",")
        self.take(close)
        return tuple(items)

    def primary(self) -> Node:
        kind, text = self.take()
        if kind == "string":
            return Lit(text)
        if kind == "number" or text in ("true", "false", "null"):
            return Lit(None)
        if kind == "ident" and text is not None and text != "in":
            if self.sees("("):
                return Call(None, text, self.arguments(")"))
            if self.sees("{"):
                raise _Unknown("a message literal")
            return Ident(text)
        if text == "(":
            inner = self.expression()
            self.take(")")
            return Group((inner,))
        if text == "[":
            self.at -= 1
            return Group(self.arguments("]"))
        if text == "{":
            return Group(self.entries())
        raise _Unknown(f"unexpected {text!r}")

    def entries(self) -> tuple[Node, ...]:
        items: list[Node] = []
        while not self.sees("}"):
            items.append(self.expression())
            self.take(":")
            items.append(self.expression())
            if not self.sees("}"):
                self.take(",")
        self.take("}")
        return tuple(items)


def _collect(node: Node, found: dict[str, set[str]]) -> None:
    if isinstance(node, (Select, Index)):
        _collect_chain(node, found)
    elif isinstance(node, Ident):
        if node.name == "device":
            raise _Unknown("device read whole")
    elif isinstance(node, Call):
        arguments = node.arguments
        if node.name in _BINDING or (len(arguments) >= 2 and isinstance(arguments[0], Ident)):
            raise _Unknown(f"{node.name} may bind a variable")
        for child in (node.target, *arguments) if node.target is not None else arguments:
            _collect(child, found)
    elif isinstance(node, Group):
        for child in node.children:
            _collect(child, found)


def _collect_chain(node: Select | Index, found: dict[str, set[str]]) -> None:
    # The whole chain of selections and indexes, from what it starts from.
    steps: list[Select | Index] = []
    start: Node = node
    while isinstance(start, (Select, Index)):
        steps.append(start)
        start = start.operand
    steps.reverse()
    for step in steps:
        if isinstance(step, Index):
            _collect(step.key, found)
    if not (isinstance(start, Ident) and start.name == "device"):
        _collect(start, found)
        return
    field = _spelled(steps[0])
    if field == "driver":
        return
    name = _spelled(steps[2]) if len(steps) >= 3 else None
    if field not in _MAPS or name is None:
        raise _Unknown("a read of device this table does not know")
    found[field].add(name)


def _spelled(step: Select | Index) -> str | None:
    """The name a selection or an index spells out; None when computed."""
    if isinstance(step, Select):
        return step.field
    return step.key.value if isinstance(step.key, Lit) else None
