"""Kubernetes quantities at the controller's edge: parse into bytes, format back.

Parsing is the CLI's ``parse_quantity`` (one parser for the whole product);
formatting picks the largest binary suffix that states the value exactly, so
``format_quantity(parse_quantity(q))`` reads like what an operator would write.
"""

from __future__ import annotations

from cli.quantity import parse_quantity

__all__ = ["QuantityError", "format_quantity", "memory_bytes"]

_SUFFIXES = (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30),
             ("Mi", 1 << 20), ("Ki", 1 << 10))


class QuantityError(ValueError):
    """A memory figure that is not a positive whole number of bytes."""


def memory_bytes(value: object, *, allow_zero: bool = False) -> int:
    """Bytes from an int-or-string quantity (> 0 unless ``allow_zero``)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        value = value.strip()
    try:
        return parse_quantity(value, allow_zero=allow_zero)  # type: ignore[arg-type]
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise QuantityError(str(exc)) from exc


def format_quantity(value: int) -> str:
    """``80Gi``, ``7680Mi``, or plain bytes when no binary suffix is exact."""
    if value > 0:
        for suffix, size in _SUFFIXES:
            if value % size == 0:
                return f"{value // size}{suffix}"
    return str(value)
