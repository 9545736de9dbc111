"""Scenario text to plain data: JSON when it is JSON, YAML otherwise.

Generated scenarios are large and written as JSON (JSON text is YAML too), so
JSON is tried first: the standard library's C decoder reads tens of
thousands of events in a few hundredths of a second, where even the libyaml
parser takes seconds. PyYAML is only imported when the text is not JSON.

Both readers refuse duplicate keys. YAML and JSON would silently keep the last
one, and in a scenario that hides a mistake (two ``name`` keys in one node).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

__all__ = ["ScenarioError", "parse_document"]


class ScenarioError(ValueError):
    """A scenario the tool cannot run; ``where`` is the field's path, e.g. ``events[3].leave``."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.message = message


class _DuplicateKey(ValueError):
    pass


def parse_document(text: str) -> object:
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs)
    except _DuplicateKey as duplicate:
        raise ScenarioError("", f"duplicate key {duplicate.args[0]!r}") from None
    except ValueError:
        pass
    import yaml  # only here: most large scenarios never need it

    try:
        return yaml.load(text, Loader=_strict_loader())  # a safe loader, see _strict_loader
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = error.problem or error.context or "invalid"
        raise ScenarioError(where, f"not valid YAML: {problem}") from None
    except yaml.YAMLError as error:
        raise ScenarioError("", f"not valid YAML: {error}") from None


def _unique_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return result


@cache
def _strict_loader() -> type[Any]:
    """PyYAML's safe loader (plain data only) that refuses duplicate keys.

    Built on the C parser when PyYAML has libyaml, the pure-Python one
    otherwise. Made on first use so that reading JSON never imports PyYAML.
    """
    import yaml

    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(base):  # type: ignore[valid-type, misc]
        def construct_mapping(self, node: yaml.MappingNode,
                              deep: bool = False) -> dict[Any, Any]:
            self.flatten_mapping(node)
            seen: set[object] = set()
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    if key_node.value in seen:
                        raise yaml.constructor.ConstructorError(
                            "while reading a mapping", node.start_mark,
                            f"duplicate key {key_node.value!r}", key_node.start_mark)
                    seen.add(key_node.value)
            return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]

    return StrictLoader
