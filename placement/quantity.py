"""Kubernetes quantities ("10Gi", "60G", "1.5Ti", "512Mi") as whole bytes, and back.

The grammar is Kubernetes' own: an optionally signed decimal number
(``5``, ``1.5``, ``.5``, ``5.``) followed by a binary suffix (Ki Mi Gi Ti Pi
Ei, powers of 1024), a decimal suffix (n u m k M G T P E, powers of 1000), an
exponent (``e3``, ``E-2``) or nothing. Like Kubernetes, a value that is not a
whole number of bytes is rounded up.

The CLI, the controller and the hack scripts all read memory through this
one parser, so a scenario and a cluster can never disagree about what "80Gi"
means. Every step is integer (or exact fraction) arithmetic: no size is too
large to parse or to print.

Two ways back to text: ``format_quantity`` is exact and machine-readable (the
largest binary suffix that states the value, else plain bytes; what goes into
labels and CEL), ``format_gib`` is for people (GiB with up to two decimals).
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

from placement.model import PlacementError

__all__ = ["GiB", "QuantityError", "format_gib", "format_quantity", "parse_quantity"]

GiB = 1 << 30


class QuantityError(PlacementError):
    """Text that is not a Kubernetes quantity, or not one that memory can be."""


# Characters of a quantity at most: far more than any size needs (every step
# stays cheap, and the interpreter's limit on converting digits is never met).
LONGEST = 400
# Characters of a quantity a message quotes before cutting it short.
_SHOWN = 60

_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
_DECIMAL_EXPONENT = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
                     "E": 18}

# "E" alone is exa; "E" followed by digits is an exponent, hence the exponent
# alternative comes first.
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?"
    r"(?:[eE](?P<exponent>[+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?))"
)

# Suffixes people write for bytes that Kubernetes does not accept, and what
# they most likely meant. Saying so beats a bare "invalid".
_LOOKALIKES = {"b": "", "B": "", "K": "k", "KB": "k", "kB": "k", "Kb": "k", "KiB": "Ki",
               "MB": "M", "Mb": "M", "MiB": "Mi", "GB": "G", "Gb": "G", "GiB": "Gi",
               "TB": "T", "Tb": "T", "TiB": "Ti", "PB": "P", "PiB": "Pi", "EB": "E",
               "EiB": "Ei", "gi": "Gi", "mi": "Mi", "ki": "Ki", "ti": "Ti"}


def parse_quantity(text: object, *, allow_zero: bool = False) -> int:
    """Bytes in ``text``: a quantity string, or a number already in bytes.

    A number must be whole (an int, or a float with nothing after the point,
    which is how a JSON decoder may hand over a large integer). Negative values
    are always refused and zero unless ``allow_zero``: every accelerator
    estimate and device size must be positive, and only a node's host memory
    can meaningfully be nothing.
    """
    if isinstance(text, float) and text.is_integer():
        text = int(text)
    if isinstance(text, bool) or not isinstance(text, int | str):
        raise QuantityError(f"{_kind(text)} is not a Kubernetes quantity (write it as a string "
                            'such as "10Gi")')
    if isinstance(text, str) and len(text) > LONGEST:
        raise QuantityError(f"{_show(text)} is too long to be a quantity "
                            f"(at most {LONGEST} characters)")
    value = text if isinstance(text, int) else _parse_text(text)
    if value < 0:
        raise QuantityError(f"{_show(text)} is negative; memory must be positive")
    if value == 0 and not allow_zero:
        raise QuantityError(f"{_show(text)} is zero; memory must be positive")
    return value


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> int:
    # Cached: a scenario names the same few tiers thousands of times.
    match = _QUANTITY.fullmatch(text)
    if match is None or not (match["whole"] or match["fraction"]):
        raise QuantityError(_not_a_quantity(text))
    sign = -1 if match["sign"] == "-" else 1
    whole, fraction = match["whole"] or "0", match["fraction"] or ""
    suffix, exponent = match["suffix"], match["exponent"]
    if not fraction and exponent is None and (suffix in _BINARY or suffix == ""):
        # The common case stays in integer arithmetic.
        return sign * int(whole) * _BINARY.get(suffix, 1)
    number = Fraction(int(whole + fraction), 10 ** len(fraction))
    if exponent is not None:
        if abs(int(exponent)) > 100:
            raise QuantityError(f"{_show(text)}: exponent out of range")
        number *= Fraction(10) ** int(exponent)
    elif suffix in _BINARY:
        number *= _BINARY[suffix]
    else:
        number *= Fraction(10) ** _DECIMAL_EXPONENT[suffix]
    # Round away from zero, as Kubernetes does, so a fraction of a byte is a byte.
    return sign * -(-number.numerator // number.denominator)


def _not_a_quantity(text: str) -> str:
    message = f"{_show(text)} is not a Kubernetes quantity"
    stripped = text.strip()
    if stripped != text and _QUANTITY.fullmatch(stripped):
        return f"{message} (remove the surrounding spaces)"
    head = re.match(r"[+-]?[0-9]*\.?[0-9]*", stripped)
    number, unit = (head.group(), stripped[head.end():]) if head else ("", stripped)
    if number and unit in _LOOKALIKES and len(number) <= _SHOWN:
        better = _LOOKALIKES[unit]
        hint = f'"{number}{better}"'
        if better and not better.endswith("i"):
            hint += f' or "{number}{better[0].upper()}i"'
        return f"{message}; did you mean {hint}?"
    return f'{message} (examples: "10Gi", "60G", "1.5Ti", "512Mi")'


_BINARY_LARGEST_FIRST = sorted(_BINARY.items(), key=lambda item: -item[1])


def format_quantity(value: int) -> str:
    """``80Gi``, ``7680Mi``, or plain bytes when no binary suffix is exact.

    ``parse_quantity(format_quantity(n)) == n`` for every positive ``n``.
    """
    if value > 0:
        for suffix, size in _BINARY_LARGEST_FIRST:
            if value % size == 0:
                return f"{value // size}{suffix}"
    return str(value)


def format_gib(value: int) -> str:
    """``10Gi`` for whole GiB, otherwise up to two decimals (``1.5Gi``); display only.

    Rounded half to even on the exact value, so it reads like ``f"{x:.2f}"``
    of a float but never overflows one.
    """
    if value % GiB == 0:
        return f"{value // GiB}Gi"
    hundredths = round(Fraction(abs(value) * 100, GiB))
    sign = "-" if value < 0 else ""
    text = f"{sign}{hundredths // 100}.{hundredths % 100:02d}".rstrip("0").rstrip(".")
    return text + "Gi"


def _show(text: str | int) -> str:
    """The text as a message quotes it: whole when short, else its start and its length."""
    if isinstance(text, int):
        return str(text)
    if len(text) <= _SHOWN:
        return f'"{text}"'
    return f'"{text[:_SHOWN]}..." ({len(text):,} characters)'


def _kind(value: object) -> str:
    """What a value that is no quantity is, in the words of YAML and JSON rather than Python's."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if value is None:
        return "nothing"
    if isinstance(value, float):
        return str(value)
    return "a mapping" if isinstance(value, dict) else "a list" if isinstance(
        value, list | tuple) else "a value of another kind"
