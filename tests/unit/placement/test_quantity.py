"""Kubernetes quantities: the memory figures every edge accepts, and how they print."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement.quantity import QuantityError, format_gib, format_quantity, parse_quantity

GI = 1 << 30


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10Gi", 10 * GI),
        ("1Ki", 1024),
        ("1Mi", 1 << 20),
        ("1Ti", 1 << 40),
        ("1Pi", 1 << 50),
        ("1Ei", 1 << 60),
        ("60G", 60 * 10**9),
        ("1k", 1000),
        ("1M", 10**6),
        ("1T", 10**12),
        ("1P", 10**15),
        ("1E", 10**18),  # "E" alone is exa, not an exponent
        ("1.5Ti", 3 << 39),
        ("0.5Gi", GI // 2),
        (".5Ki", 512),
        ("5.", 5),
        ("+1Ki", 1024),
        ("1024", 1024),
        ("1e3", 1000),
        ("1E3", 1000),
        ("2.5e2", 250),
        ("1e+3", 1000),
        (1024, 1024),
        ("0010Gi", 10 * GI),
    ],
)
def test_accepts_kubernetes_quantities(text: str | int, expected: int) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.5", 1),  # half a byte is a byte
        ("1500m", 2),
        ("1.0000001Ki", 1025),
        ("1e-3", 1),
        ("100n", 1),
        ("3u", 1),
    ],
)
def test_rounds_fractional_bytes_up(text: str, expected: int) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("10Gb", 'did you mean "10G" or "10Gi"?'),
        ("10GB", 'did you mean "10G" or "10Gi"?'),
        ("10GiB", 'did you mean "10Gi"?'),
        ("10gi", 'did you mean "10Gi"?'),
        ("1K", 'did you mean "1k" or "1Ki"?'),
        ("-5Gi", "negative"),
        ("-1", "negative"),
        ("0", "zero"),
        ("0Gi", "zero"),
        ("0.0", "zero"),
        ("", "not a Kubernetes quantity"),
        ("Gi", "not a Kubernetes quantity"),
        (".", "not a Kubernetes quantity"),
        ("1 Gi", "not a Kubernetes quantity"),
        (" 1Gi", "remove the surrounding spaces"),
        ("1.2.3", "not a Kubernetes quantity"),
        ("1e", "not a Kubernetes quantity"),
        ("1e1.5", "not a Kubernetes quantity"),
        ("ten", "not a Kubernetes quantity"),
        ("0x10", "not a Kubernetes quantity"),
        ("1e400", "out of range"),
    ],
)
def test_refuses_with_a_clear_message(text: str, fragment: str) -> None:
    with pytest.raises(QuantityError, match=None) as raised:
        parse_quantity(text)
    assert fragment in str(raised.value)
    assert f'"{text}"' in str(raised.value) or text == ""


def test_a_whole_float_is_a_number_of_bytes() -> None:
    # A JSON decoder may hand a large integer over as a float.
    assert parse_quantity(8.0) == 8
    assert parse_quantity(1e12) == 10**12


@pytest.mark.parametrize("value", [1.5, True, None, [1], {"a": 1}, float("inf"), float("nan")])
def test_refuses_values_that_are_not_strings_or_ints(value: object) -> None:
    with pytest.raises(QuantityError, match="not a Kubernetes quantity"):
        parse_quantity(value)


def test_zero_allowed_only_when_asked() -> None:
    assert parse_quantity("0", allow_zero=True) == 0
    assert parse_quantity(0, allow_zero=True) == 0
    with pytest.raises(QuantityError, match="zero"):
        parse_quantity(0)
    with pytest.raises(QuantityError, match="negative"):
        parse_quantity("-1Gi", allow_zero=True)


def test_error_is_a_value_error() -> None:
    # Callers (the controller, the scenario loader) catch ValueError.
    assert issubclass(QuantityError, ValueError)


def test_error_is_the_librarys_error() -> None:
    from placement import PlacementError

    assert issubclass(QuantityError, PlacementError)


def test_format_gib_for_people() -> None:
    assert format_gib(10 * GI) == "10Gi"
    assert format_gib(3 * GI // 2) == "1.5Gi"
    assert format_gib(GI + GI // 3) == "1.33Gi"
    assert format_gib(GI // 200) == "0Gi"  # rounds like "%.2f": half to even
    assert format_gib(0) == "0Gi"


def test_format_quantity_is_exact() -> None:
    assert format_quantity(80 * GI) == "80Gi"
    assert format_quantity(7680 << 20) == "7680Mi"
    assert format_quantity(1000) == "1000"
    assert format_quantity(0) == "0"


def test_any_size_parses_and_prints() -> None:
    # Exact arithmetic all the way: no float in between to overflow.
    huge = parse_quantity("1e100")
    assert huge == 10**100
    assert parse_quantity(format_quantity(huge)) == huge
    assert format_gib(huge).endswith("Gi")
    assert format_gib(huge * GI) == f"{huge}Gi"
    assert parse_quantity(f"{huge}Ei") == huge << 60


@given(st.integers(min_value=1, max_value=1 << 200))
def test_format_quantity_round_trips(value: int) -> None:
    assert parse_quantity(format_quantity(value)) == value


@given(st.integers(min_value=0, max_value=1 << 50))
def test_format_gib_reads_like_two_decimals_of_a_float(value: int) -> None:
    # Where a float is exact, the result is what "%.2f" of it would print.
    expected = f"{value / GI:.2f}".rstrip("0").rstrip(".") + "Gi"
    assert format_gib(value) == (f"{value // GI}Gi" if value % GI == 0 else expected)
