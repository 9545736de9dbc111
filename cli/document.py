"""Scenario text to plain data: JSON when it is JSON, YAML otherwise.

Generated scenarios are large and written as JSON (JSON text is YAML too), so
JSON is tried first: the standard library's C decoder reads tens of
thousands of events in a few hundredths of a second, where even the libyaml
parser takes seconds. PyYAML is only imported when the text is not JSON. A
file named ``*.json`` is JSON only, and its errors are JSON's own (line and
column); a document that fails both and looks like JSON gets both answers.

What the readers refuse or read differently from their defaults, and why:

* Duplicate keys. YAML and JSON would silently keep the last one, and in a
  scenario that hides a mistake (two ``name`` keys in one node). A YAML merge
  key (``<<: *base``) is not a duplicate: the keys written beside it override
  the merged ones, and among merged mappings the first wins, as YAML says.
  Merged keys are deduplicated as they are merged, so chains of merges stay
  as small as the keys they name.
* Base-60 numbers. YAML 1.1 reads ``12:30`` as 750; here it stays the text it
  was written as (as in YAML 1.2), so a count or quantity written that way is
  refused with the text in the message rather than read as a surprise.
* Numbers of thousands of digits. Converting them is quadratic and Python
  refuses past a limit; they are kept as :class:`~cli.show.LongNumber`, which
  every field refuses as out of range.
* ``NaN`` and ``Infinity``, which Python's decoder accepts but JSON has not.
* A tab where YAML wants spaces: the error names the tab, with its line and
  column, since an editor shows it as blanks.
* Nesting deeper than the readers can follow: one message, no traceback.
* A UTF-8 byte-order mark at the very start, which JSON lets a reader ignore
  (and editors on some systems write), is skipped by both readers rather than
  refused; the text is not copied to drop it.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any, ClassVar

from cli.show import LongNumber, excerpt

__all__ = ["ScenarioError", "parse_document"]

# Digits past which a number is kept as a LongNumber, in both readers (so the
# two agree); well under the interpreter's own limit of 4300.
MAX_DIGITS = 1000
BOM = "\ufeff"
_JSON_SPACE = re.compile(r"[ \t\n\r]*")


class ScenarioError(ValueError):
    """A scenario the tool cannot run; ``where`` is the field's path, e.g. ``events[3].leave``."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.message = message


class _DuplicateKey(ValueError):
    pass


class _NotJson(ValueError):
    pass


def parse_document(text: str, *, kind: str = "") -> object:
    """The document in ``text``; ``kind`` is ``json``, ``yaml`` or empty (either)."""
    try:
        return _parse_json(text)
    except _DuplicateKey as duplicate:
        raise ScenarioError("", f"duplicate key {excerpt(duplicate.args[0])}") from None
    except (json.JSONDecodeError, _NotJson) as error:
        if kind == "json":
            raise _json_error(error) from None
        not_json = error
    try:
        return _parse_yaml(text)
    except ScenarioError as yaml_error:
        if kind != "yaml" and text.lstrip()[:1] in ("{", "["):
            # It looks like JSON: what JSON makes of it is likely the useful half.
            json_error = _json_error(not_json)
            raise ScenarioError(json_error.where, f"{json_error.message} (nor valid YAML: "
                                f"{_yaml_problem(yaml_error)})") from None
        raise


def _parse_json(text: str) -> object:
    hooks: dict[str, Any] = {"object_pairs_hook": _unique_pairs, "parse_constant": _no_constant}
    try:
        return _decode_json(text, hooks)
    except RecursionError:
        raise _NotJson("nested too deeply") from None
    except (json.JSONDecodeError, _DuplicateKey, _NotJson):
        raise
    except ValueError:
        # An integer too long for int(): read again keeping long ones as LongNumber
        # (only then, so the usual document stays on the decoder's fast path).
        return _decode_json(text, {**hooks, "parse_int": _json_int})


def _decode_json(text: str, hooks: dict[str, Any]) -> object:
    """``json.loads``, but past a leading byte-order mark (which it refuses)."""
    start = 1 if text.startswith(BOM) else 0
    try:
        value, end = json.JSONDecoder(**hooks).raw_decode(text, _skip_space(text, start))
        end = _skip_space(text, end)
        if end != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
    except json.JSONDecodeError as error:
        if start and error.lineno == 1:
            error.colno -= 1  # columns as an editor shows them, the mark unseen
        raise
    return value


def _skip_space(text: str, pos: int) -> int:
    match = _JSON_SPACE.match(text, pos)
    return match.end() if match else pos


def _json_int(digits: str) -> int | LongNumber:
    length = len(digits.lstrip("-"))
    return LongNumber(length) if length > MAX_DIGITS else int(digits)


def _no_constant(name: str) -> object:
    raise _NotJson(f"{name} is not a JSON value")


def _json_error(error: ValueError) -> ScenarioError:
    if isinstance(error, json.JSONDecodeError):
        return ScenarioError(f"line {error.lineno}, column {error.colno}",
                             f"not valid JSON: {error.msg}")
    return ScenarioError("", f"not valid JSON: {error}")


def _yaml_problem(error: ScenarioError) -> str:
    detail = error.message.removeprefix("not valid YAML: ")
    return f"{detail} at {error.where}" if error.where else detail


def _unique_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return result


def _parse_yaml(text: str) -> object:
    import yaml  # only here: most large scenarios never need it

    try:
        return yaml.load(text, Loader=_strict_loader())  # a safe loader, see _strict_loader
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = error.problem or error.context or "invalid"
        if mark and _tab_at(text, mark.line, mark.column):
            problem = f"a tab character; YAML indents with spaces only ({problem})"
        raise ScenarioError(where, f"not valid YAML: {problem}") from None
    except yaml.YAMLError as error:
        raise ScenarioError("", f"not valid YAML: {error}") from None
    except RecursionError:
        raise ScenarioError("", "not valid YAML: nested too deeply") from None


def _tab_at(text: str, line: int, column: int) -> bool:
    """Whether a tab is at (or just before: the readers differ) that place of ``text``.

    Editors show a tab as spaces, so a YAML error at one reads as nonsense
    unless the tab is named.
    """
    start = 0
    for _ in range(line):
        start = text.find("\n", start) + 1
        if start == 0:
            return False
    return "\t" in text[start + max(column - 1, 0):start + column + 1]


class _NotBase60:
    """An implicit resolver's pattern that leaves base-60 numbers (``12:30``) as text."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern

    def match(self, value: str) -> re.Match[str] | None:
        return None if ":" in value else self.pattern.match(value)


@cache
def _strict_loader() -> type[Any]:
    """PyYAML's safe loader (plain data only) with the rules in the module's docstring.

    Built on the C parser when PyYAML has libyaml, the pure-Python one
    otherwise. Made on first use so that reading JSON never imports PyYAML.
    """
    import yaml
    from yaml.constructor import ConstructorError

    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    numbers = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")

    class StrictLoader(base):  # type: ignore[valid-type, misc]
        yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, Any]]]] = {
            first: [(tag, _NotBase60(pattern) if tag in numbers else pattern)
                    for tag, pattern in resolvers]
            for first, resolvers in base.yaml_implicit_resolvers.items()
        }

        def construct_yaml_int(self, node: yaml.ScalarNode) -> int | LongNumber:
            if len(node.value) > MAX_DIGITS:  # cheap first: nearly every number is short
                digits = sum(char.isdigit() for char in node.value)
                if digits > MAX_DIGITS:
                    return LongNumber(digits)
            return super().construct_yaml_int(node)  # type: ignore[no-any-return]

        def flatten_mapping(self, node: yaml.MappingNode) -> None:
            """Merge keys resolved once, in place: written keys win, then earlier merges."""
            written: list[tuple[yaml.Node, yaml.Node]] = []
            sources: list[yaml.MappingNode] = []
            for key_node, value_node in node.value:
                if key_node.tag != "tag:yaml.org,2002:merge":
                    written.append((key_node, value_node))
                    continue
                merged = (value_node.value if isinstance(value_node, yaml.SequenceNode)
                          else [value_node])
                for source in merged:
                    if not isinstance(source, yaml.MappingNode):
                        raise ConstructorError(
                            "while reading a mapping", node.start_mark,
                            f"a merge key (<<) takes a mapping or a list of mappings, "
                            f"found {source.id}", source.start_mark)
                    sources.append(source)
            seen: set[object] = set()
            for key_node, _ in written:
                key = _key_of(key_node)
                if key in seen:
                    raise ConstructorError(
                        "while reading a mapping", node.start_mark,
                        f"duplicate key {excerpt(str(key_node.value))}", key_node.start_mark)
                seen.add(key)
            if not sources:
                return
            merged_pairs: list[tuple[yaml.Node, yaml.Node]] = []
            for source in sources:
                self.flatten_mapping(source)  # a no-op once done: its merge keys are gone
                for key_node, value_node in source.value:
                    key = _key_of(key_node)
                    if key not in seen:
                        seen.add(key)
                        merged_pairs.append((key_node, value_node))
            node.value = merged_pairs + written

    StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
    return StrictLoader


def _key_of(node: Any) -> object:
    """What makes two keys the same key: a scalar's tag and text, else the node itself."""
    import yaml

    return (node.tag, node.value) if isinstance(node, yaml.ScalarNode) else id(node)
