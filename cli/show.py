"""How values from a scenario appear in messages and tables.

A scenario is untrusted text, and what it says is echoed back to a person:
names in the table, a bad value in an error message. Three rules keep that
echo safe and readable:

* Never a Python repr. A value is described in the scenario's own terms:
  ``"10Gb"``, ``true (a boolean)``, ``a list``, ``a 5000-digit number``.
* Always bounded. A value is shown as a short excerpt with its length, so an
  error about a megabyte string (or an alias that expands to gigabytes) is
  still one short line.
* Always one printable line. Control characters, terminal escape sequences,
  lone surrogates and other unprintable characters are shown as backslash
  escapes, so a name cannot forge rows of the table or drive the terminal.
"""

from __future__ import annotations

import datetime

__all__ = ["LongNumber", "describe", "excerpt", "number_digits", "printable"]

# Characters of a value shown in a message before it is cut.
EXCERPT = 60


class LongNumber:
    """A number written with too many digits to convert; it stands in for the value.

    Python refuses to turn more than a few thousand digits into an int (the
    conversion is quadratic), and no count or size needs that many, so the
    readers keep only how long the number was, for the message that refuses it.
    """

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


def printable(text: str) -> str:
    """``text`` with every unprintable character as a backslash escape (one line, no codes)."""
    if text.isprintable():  # nearly always: names are plain
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


def _escape(char: str) -> str:
    code = ord(char)
    if char == "\n":
        return "\\n"
    if char == "\t":
        return "\\t"
    if char == "\r":
        return "\\r"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def excerpt(text: str, limit: int = EXCERPT) -> str:
    """``text`` in double quotes, escaped, cut after ``limit`` characters with its length."""
    if len(text) <= limit:
        return f'"{printable(text)}"'
    return f'"{printable(text[:limit])}..." ({len(text):,} characters)'


def describe(value: object) -> str:
    """What a parsed value is, for a message saying it is not what a field takes."""
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return excerpt(value)
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int):
        digits = number_digits(value)
        return f"a {digits:,}-digit number" if digits > EXCERPT else str(value)
    if isinstance(value, LongNumber):
        return f"a {value.digits:,}-digit number"
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else (
            "a number that is not finite")
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, set | frozenset):
        return "a set"
    if isinstance(value, datetime.datetime):
        return f"a timestamp ({value.isoformat()}); quote it if it is text"
    if isinstance(value, datetime.date):
        return f"a date ({value.isoformat()}); quote it if it is text"
    if isinstance(value, bytes | bytearray):
        return "binary data"
    return "a value of an unsupported kind"


def number_digits(value: int) -> int:
    """Decimal digits of ``value`` (without its sign), for any size of int."""
    value = abs(value)
    if value.bit_length() < 3000:  # well under the interpreter's conversion limit
        return len(str(value))
    # log10(2) per bit, corrected by one comparison: exact without a conversion.
    estimate = int(value.bit_length() * 0.30102999566398120) + 1
    return estimate if value >= 10 ** (estimate - 1) else estimate - 1
