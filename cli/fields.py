"""One field of a scenario, checked: the validators and parsers its models declare.

Each field names itself by its YAML spelling (kept in the attribute's
metadata), so an error points at what the author wrote, not at a Python
name. A check raises ``FieldError`` with that key, relative to what is being
built; the reader (``cli.scenario``) turns it into a ``ScenarioError`` at the
full path (``field_path``). What each kind of field takes::

    kind          takes                                        refuses, saying why
    name          non-empty text                               a number or a boolean ("quote it"),
                                                               half of a surrogate pair, the rest
    text          non-empty text (an optional field)           the rest
    count         a whole number from 1 to LARGEST_COUNT       a boolean, a float, 0, a larger one
    pods          a count, or 0 (other pods take every slot)   a negative number, as count
    floor         a count, or 0 (a group may shrink to none)   a negative number, as count
    memory        a Kubernetes quantity above 0 ("10Gi")       "10Gb"; more digits than a quantity
    host memory   a quantity, or 0 (a node that parks none)    as memory
    bandwidth     a quantity a second: 25GB/s, 32Gi/s, 25G     the rest
    duration      90s, 5m, 1h30m, or seconds                   the rest, text past an excerpt
    roles         a list of trainer and sampler                the rest
    left out      a list of {devices: N >= 1, reason: text}    the rest
    one of        one of a fixed list (a role, a phase)        the rest
    boolean       true or false                                the rest

A key that is not known is refused with the closest known one suggested
(``unknown_key_message``); a key too long to print, or not text, is
described instead (``key_text``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

import attrs

from cli.clock import parse_duration
from cli.show import EXCERPT, LongNumber, describe, excerpt, number_digits, printable
from cli.turnspec import NodeTurns, parse_node_turns
from placement import Role
from placement.quantity import LONGEST as LONGEST_QUANTITY
from placement.quantity import parse_quantity

__all__ = [
    "LARGEST_COUNT",
    "ROLES",
    "FieldError",
    "check_boolean",
    "check_count",
    "check_floor",
    "check_left_out",
    "check_name",
    "check_optional_name",
    "check_optional_text",
    "check_pods",
    "check_roles",
    "field",
    "field_path",
    "key_of",
    "key_text",
    "one_of",
    "parse_bandwidth",
    "parse_host_memory",
    "parse_memory",
    "parse_seconds",
    "parse_turns",
    "to_left_out",
    "to_roles",
    "unknown_key_message",
]

ROLES = tuple(role.value for role in Role)


class FieldError(ValueError):
    """Raised by a validator; the builder turns it into a ScenarioError at the right path."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


# ------------------------------------------------------------------ validators
# Each names the field by its YAML spelling (see the module's rules).


def key_of(attribute: attrs.Attribute[Any]) -> str:
    return str(attribute.metadata.get("key", attribute.name))


def check_name(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str):
        quote = isinstance(value, bool | int | float | LongNumber)
        raise FieldError(key_of(attribute), f"must be a name (a string), got {describe(value)}"
                         + ("; quote it" if quote else ""))
    if not value:
        raise FieldError(key_of(attribute), "must not be empty")
    _unicode(attribute, value)


def _unicode(attribute: attrs.Attribute[Any], value: str) -> None:
    # A JSON escape can spell half of a surrogate pair, which is no character
    # at all: no terminal can print it and no Kubernetes name can hold it.
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise FieldError(key_of(attribute), f"{excerpt(value)} is not valid Unicode text "
                             "(it holds half of a surrogate pair)") from None


def check_optional_name(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_name(instance, attribute, value)


def check_optional_text(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise FieldError(key_of(attribute), f"must be non-empty text, got {describe(value)}")
    if value is not None:
        _unicode(attribute, value)


def check_count(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, LongNumber) or (isinstance(value, int) and value > LARGEST_COUNT):
        raise FieldError(key_of(attribute), f"is out of range, got {describe(value)} "
                         f"(at most {LARGEST_COUNT:,})")
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(key_of(attribute), f"must be a whole number, got {describe(value)}")
    if value < 1:
        raise FieldError(key_of(attribute), f"must be at least 1, got {describe(value)}")


def check_pods(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # Zero is a real answer: a node whose pod slots other pods take all runs no worker.
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        raise FieldError(key_of(attribute), f"must be at least 0, got {describe(value)}")
    if value != 0:
        check_count(_instance, attribute, value)


# Counts are devices on a node or workers on a claim: a billion is already absurd,
# and a bound keeps every figure the table prints short.
LARGEST_COUNT = 10**9


def one_of(*choices: str) -> Callable[[object, attrs.Attribute[Any], object], None]:
    def check(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and value not in choices:
            raise FieldError(key_of(attribute), f"{describe(value)} is not one of "
                             + ", ".join(choices))
    return check


def check_boolean(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise FieldError(key_of(attribute), f"must be true or false, got {describe(value)}")


def check_roles(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple):
        raise FieldError(key_of(attribute), f"must be a list of roles, got {describe(value)}")
    for role in value:
        if role not in ROLES:
            raise FieldError(key_of(attribute),
                             f"{describe(role)} is not a role ({', '.join(ROLES)})")


def check_left_out(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple):
        raise FieldError(key_of(attribute), "must be a list of {devices, reason}, got "
                         f"{describe(value)}")
    for entry in value:
        if not isinstance(entry, tuple) or len(entry) != 2:
            raise FieldError(key_of(attribute), "each entry must be {devices: N, reason: "
                             f"text}}, got {describe(entry)}")
        count, reason = entry
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise FieldError(key_of(attribute), f"devices must be a whole number >= 1, got "
                             f"{describe(count)}")
        if not isinstance(reason, str) or not reason:
            raise FieldError(key_of(attribute), f"reason must be non-empty text, got "
                             f"{describe(reason)}")


def to_left_out(value: object) -> object:
    # Each {devices, reason} becomes a pair (hashable); anything else is left for the validator.
    if not isinstance(value, list):
        return value
    return tuple((e.get("devices"), e.get("reason")) if isinstance(e, dict)
                 and set(e) == {"devices", "reason"} else e for e in value)


def to_roles(value: object) -> object:
    # Lists become tuples so the model stays hashable; anything else is left for the validator.
    return tuple(value) if isinstance(value, list) else value


def parse_memory(value: object) -> int:
    return _size(value)


def parse_host_memory(value: object) -> int:
    # Zero is a real answer here: a node that can park nothing never shares.
    return _size(value, allow_zero=True)


def _size(value: object, *, allow_zero: bool = False) -> int:
    return parse_quantity(_quantity_text(value), allow_zero=allow_zero)


def _quantity_text(value: object) -> str | int:
    """``value`` if it can be a quantity; a ValueError saying why not otherwise.

    A size has at most as many digits as a quantity has characters: more than
    any real size needs (and such a size still prints exactly), few enough
    that every step stays cheap.
    """
    if isinstance(value, str):
        return value  # the parser bounds its length
    if isinstance(value, LongNumber) or (isinstance(value, int)
                                         and number_digits(value) > LONGEST_QUANTITY):
        raise ValueError(f"is out of range, got {describe(value)} "
                         f"(at most {LONGEST_QUANTITY} digits)")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be a Kubernetes quantity such as \"10Gi\", got "
                         f"{describe(value)}")
    return value


def parse_bandwidth(value: object) -> int:
    # Bytes per second, written as a quantity with an optional "/s": 25GB/s, 32Gi/s, 25G.
    text = _quantity_text(value)
    if isinstance(text, str):
        text = text.strip().removesuffix("/s").replace("iB", "i").replace("B", "")
    try:
        return parse_quantity(text)
    except ValueError:
        raise ValueError(f"{describe(value)} is not a bandwidth such as 25GB/s or "
                         "32Gi/s") from None


def parse_turns(value: object) -> NodeTurns:
    return parse_node_turns(value, parse_bandwidth)


def field(key: str, *validators: Any, parse: Callable[[object], object] | None = None,
          **kwargs: Any) -> Any:
    # One validator is passed bare: attrs wraps a list in a combinator that
    # costs as much again per instance, and there are tens of thousands of events.
    validator = validators[0] if len(validators) == 1 else list(validators) or None
    return attrs.field(validator=validator, metadata={"key": key, "parse": parse}, **kwargs)


def parse_seconds(value: object) -> float:
    """A duration as ``at`` reads it: ``90s``, ``5m``, ``1h30m``, or seconds."""
    if (isinstance(value, str) and len(value) > EXCERPT) or not isinstance(
            value, str | int | float):
        raise ValueError(f"must be a duration such as 90s, 5m or 1h30m, or seconds, "
                         f"got {describe(value)}")
    try:
        return parse_duration(value)
    except OverflowError:
        raise ValueError(f"is out of range, got {describe(value)}") from None


def check_floor(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # A group may shrink to nothing: zero is a floor.
    if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
        if value < 0:
            raise FieldError(key_of(attribute), f"must be at least 0, got {describe(value)}")
        return
    check_count(_instance, attribute, value)


def field_path(where: str, key: str) -> str:
    return f"{where}.{key}" if key else where


def unknown_key_message(key: object, known: tuple[str, ...], what: str) -> str:
    close = (difflib.get_close_matches(key, known, n=1)
             if isinstance(key, str) and len(key) <= EXCERPT else [])
    hint = f'; did you mean "{close[0]}"?' if close else f" (expected one of {', '.join(known)})"
    return f"unknown {what}{hint}"


def key_text(key: object) -> str:
    """A key as a path shows it: as written when it is short text, else described."""
    if isinstance(key, str) and len(key) <= EXCERPT:
        return printable(key)
    return f"<{describe(key)}>"
