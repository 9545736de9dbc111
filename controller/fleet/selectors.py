"""A DeviceClass's CEL selectors, evaluated against published devices as DRA would.

Rules:

* The expressions are compiled once per class (``DeviceSelector.of``) with the
  ``common-expression-language`` runtime (the Rust ``cel`` crate): it is
  maintained, ships wheels for our Python, and evaluates a device in tens of
  microseconds where the pure-Python runtime takes several times that.
* A device is seen as DRA shows it: ``device.driver``,
  ``device.attributes[domain][name]`` and ``device.capacity[domain][name]``.
  A name without a domain belongs to the driver's domain, so an attribute
  ``type`` of driver ``gpu.nvidia.com`` is
  ``device.attributes['gpu.nvidia.com'].type``. Attribute values are their
  plain value (string, int, bool); a ``version`` attribute is a semantic version;
  every capacity is a quantity (one that is not is absent, its domain there).
* Quantities and versions are opaque values: comparable only through
  ``compareTo`` (and, for quantities, ``isGreaterThan``/``isLessThan``), never
  by ``<`` or ``==`` against a number, as in Kubernetes' CEL environment.
  ``quantity("10Gi")`` and ``semver("1.2.3")`` make them; the functions are
  written here from what the environment documents.
* A device is selected when every selector answers ``true``. A selector that
  fails to compile, fails on a device (a missing attribute, a wrong type) or
  answers anything but a boolean selects nothing, as DRA does; the failure is
  named (class, selector index, error), never raised.
* Verdicts are kept per device shape: the driver, the attributes and
  capacities the expressions can read (``cel_reads``: the names a parse of the
  expressions finds them reading, ``memory`` in
  ``device.capacity[d].memory.compareTo(...)``; a device's ``uuid`` or serial
  makes every device unique, yet no class reads it), in the device's order,
  and which domains the device has (a missing domain fails where a missing
  name in a present one answers ``has()`` false). An expression that may
  read entries it does not name (a macro, a map read whole, a name computed
  when evaluated) keys by the whole content instead. A fleet of many devices
  of a few shapes evaluates each shape once. What is read of a slice
  at one resourceVersion (``per_slice``: ``fleet_rules``' reading of its
  devices) is kept, so the cache re-reading a pool reads only the slices that
  changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs
import cel
import msgspec

from controller.fleet.cel_reads import Reads, reads_of
from controller.fleet.warning import FleetWarning, Kind, warning
from controller.k8s.objects import Obj, meta
from placement.quantity import QuantityError, parse_quantity

__all__ = ["DeviceSelector", "device_environment"]

# A quantity and a version as CEL sees them: one-key maps no device field can spell,
# so neither compares with a number or a string by accident.
_QUANTITY = "__k8s_quantity__"
_SEMVER = "__k8s_semver__"
_SEMVER_TEXT = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                          r"(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
# Kept verdicts before the memo starts afresh (a fleet has far fewer device shapes).
_MEMO_LIMIT = 100_000
_UNKNOWN = object()
_T = TypeVar("_T")


class SelectorError(ValueError):
    pass


def _quantity(text: object) -> dict[str, int]:
    try:
        return {_QUANTITY: parse_quantity(text, allow_zero=True)}
    except QuantityError as error:
        raise SelectorError(f"quantity({text!r}): {error}") from None


def _semver(text: object) -> dict[str, list[Any]]:
    found = _SEMVER_TEXT.match(str(text))
    if found is None:
        raise SelectorError(f"semver({text!r}): not a semantic version")
    pre = found.group(4)
    return {_SEMVER: [int(found.group(1)), int(found.group(2)), int(found.group(3)),
                      pre.split(".") if pre else []]}


def _prerelease_key(parts: list[str]) -> tuple[Any, ...]:
    # No pre-release sorts above any; numeric identifiers below alphanumeric ones.
    if not parts:
        return (1,)
    return (0, *[(0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts])


def _order(value: object) -> tuple[str, Any]:
    if isinstance(value, Mapping):
        if _QUANTITY in value:
            return _QUANTITY, value[_QUANTITY]
        if _SEMVER in value:
            major, minor, patch, pre = value[_SEMVER]
            return _SEMVER, (major, minor, patch, _prerelease_key(list(pre)))
    raise SelectorError(f"{value!r} is neither a quantity nor a semantic version")


def _compare_to(left: object, right: object) -> int:
    (kind_l, a), (kind_r, b) = _order(left), _order(right)
    if kind_l != kind_r:
        raise SelectorError("compareTo: a quantity and a semantic version do not compare")
    return int(a > b) - int(a < b)


def _part(index: int) -> Callable[[object], int]:
    def part(value: object) -> int:
        kind, key = _order(value)
        if kind != _SEMVER:
            raise SelectorError("major/minor/patch: not a semantic version")
        return int(key[index])
    return part


def _as_integer(value: object) -> int:
    kind, key = _order(value)
    if kind != _QUANTITY:
        raise SelectorError("asInteger: not a quantity")
    return int(key)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "semver": _semver,
    "compareTo": _compare_to,
    "isGreaterThan": lambda a, b: _compare_to(a, b) > 0,
    "isLessThan": lambda a, b: _compare_to(a, b) < 0,
    "asInteger": _as_integer,
    "major": _part(0), "minor": _part(1), "patch": _part(2),
}


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, _, local = name.rpartition("/")
    return (domain or driver), local


def _attribute(value: object) -> object:
    if not isinstance(value, Mapping):
        return value
    for kind in ("string", "int", "bool"):
        if kind in value:
            return value[kind]
    if "version" in value:
        try:
            return _semver(value["version"])
        except SelectorError:
            return value["version"]
    return dict(value)


def device_environment(driver: str, device: Obj) -> dict[str, Any]:
    """``device`` as the selectors see it (attributes and capacity by domain)."""
    basic = device.get("basic") or {}
    attributes: dict[str, dict[str, object]] = {driver: {}}
    for name, value in (device.get("attributes") or basic.get("attributes") or {}).items():
        domain, local = _split(str(name), driver)
        attributes.setdefault(domain, {})[local] = _attribute(value)
    capacity: dict[str, dict[str, object]] = {driver: {}}
    for name, value in (device.get("capacity") or basic.get("capacity") or {}).items():
        domain, local = _split(str(name), driver)
        raw = value.get("value") if isinstance(value, Mapping) else value
        # The domain exists whatever its entries' values: which domains a device has
        # is keyed by their names alone.
        entries = capacity.setdefault(domain, {})
        try:
            entries[local] = {_QUANTITY: parse_quantity(raw, allow_zero=True)}
        except QuantityError:
            continue  # unreadable: as good as absent; a selector reading it fails
    return {"driver": driver, "attributes": attributes, "capacity": capacity}


_ENCODE = msgspec.json.Encoder(order="sorted")
# What of a device's attributes or capacity a key holds, by the names it publishes:
# the entries that may be read, in its order, and its domains when any may be read.
Kept = tuple[tuple[str, ...], tuple[str, ...]]


@attrs.define
class DeviceSelector:
    """One DeviceClass's selectors, compiled; ``verdict`` says why a device is not
    selected ("" when it is)."""

    name: str
    source: tuple[object, ...]  # the selectors as the class spells them
    programs: tuple[tuple[int, Any], ...] = attrs.field(eq=False)  # (index, compiled)
    problems: tuple[str, ...] = attrs.field(eq=False)  # selectors that do not compile
    reads: Reads | None = attrs.field(default=None, eq=False)  # None: anything
    _memo: dict[tuple[object, ...], str] = attrs.field(factory=dict, repr=False, eq=False)
    _slices: dict[tuple[object, ...], Any] = attrs.field(factory=dict, repr=False, eq=False)
    # ``Kept`` by the names a device's attributes (or capacity) publish: a driver
    # publishes a few sets of names; each is filtered once.
    _kept_a: dict[tuple[str, ...], Kept] = attrs.field(factory=dict, repr=False, eq=False)
    _kept_c: dict[tuple[str, ...], Kept] = attrs.field(factory=dict, repr=False, eq=False)

    @classmethod
    def of(cls, device_class: Obj) -> DeviceSelector:
        name = str(meta(device_class).get("name") or "")
        programs: list[tuple[int, Any]] = []
        problems: list[str] = []
        source = tuple((device_class.get("spec") or {}).get("selectors") or [])
        for index, selector in enumerate(source):
            expression = ((selector or {}).get("cel") or {}).get("expression")
            if not isinstance(expression, str):
                problems.append(f"selector {index}: no CEL expression")
                continue
            try:
                programs.append((index, cel.compile(expression)))
            except Exception as error:  # the runtime's parse errors have no common type
                problems.append(f"selector {index}: does not compile: {_one_line(error)}")
        reads: Reads | None = Reads()
        for s in source:
            found = reads_of(str(((s or {}).get("cel") or {}).get("expression") or ""))
            reads = None if found is None or reads is None else reads | found
        return cls(name, tuple(repr(s) for s in source), tuple(programs), tuple(problems),
                   reads)

    @property
    def warnings(self) -> tuple[FleetWarning, ...]:
        return tuple(warning(Kind.CLASS, self.name, f"{p}; it selects no device")
                     for p in self.problems)

    def slice_verdicts(self, driver: str, item: Obj) -> list[str]:
        """``verdict`` for each of the slice's devices, in order."""
        return [self.verdict(driver, d) for d in (item.get("spec") or {}).get("devices") or []]

    def per_slice(self, driver: str, item: Obj, read: Callable[[], _T]) -> _T:
        """``read()``'s answer about this slice, kept while the slice keeps its
        resourceVersion (and this selector its class): a pool read again reads only its
        changed slices. A slice without a resourceVersion is read every time."""
        m = meta(item)
        version = m.get("resourceVersion")
        if not version:
            return read()
        key = (m.get("name"), m.get("uid"), version, driver)
        known = self._slices.get(key, _UNKNOWN)
        if known is _UNKNOWN:
            known = read()
            if len(self._slices) >= _MEMO_LIMIT:
                self._slices.clear()
            self._slices[key] = known
        return known  # type: ignore[no-any-return]

    def verdict(self, driver: str, device: Obj) -> str:
        if self.problems:
            return f"not selected by class {self.name} ({self.problems[0]})"
        basic = device.get("basic") or {}
        attributes = device.get("attributes") or basic.get("attributes") or {}
        capacity = device.get("capacity") or basic.get("capacity") or {}
        reads = self.reads
        kept_a = _keep(attributes, self._kept_a, None if reads is None else reads.attributes)
        kept_c = _keep(capacity, self._kept_c, None if reads is None else reads.capacity)
        key = (driver, kept_a, kept_c, _ENCODE.encode(
            ([attributes.get(k) for k in kept_a[0]], [capacity.get(k) for k in kept_c[0]])))
        known = self._memo.get(key)
        if known is None:
            known = self._evaluate(device_environment(driver, device))
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[key] = known
        return known

    def _evaluate(self, environment: dict[str, Any]) -> str:
        context = cel.Context(variables={"device": environment}, functions=_FUNCTIONS)
        for index, program in self.programs:
            try:
                answer = program.execute(context)
            except Exception as error:  # the runtime raises KeyError, TypeError, ...
                return (f"not selected by class {self.name} (selector {index} failed: "
                        f"{_one_line(error)})")
            if answer is not True:
                return (f"not selected by class {self.name}" if answer is False else
                        f"not selected by class {self.name} (selector {index} answered "
                        f"{answer!r}, not a boolean)")
        return ""


def _keep(entries: Mapping[str, object], known: dict[tuple[str, ...], Kept],
          read: frozenset[str] | None) -> Kept:
    """What a key holds of ``entries`` when ``read`` names the entries (their local
    names, any domain) the expressions may read (None: any)."""
    names = tuple(entries)
    kept = known.get(names)
    if kept is None:
        # In the device's order: where two entries name one (domain, name), the later
        # is the one read.
        domains = {str(k).rpartition("/")[0] for k in names} if read is None or read else ()
        kept = known[names] = (
            tuple(k for k in names if read is None or str(k).rpartition("/")[2] in read),
            tuple(sorted(domains)))
    return kept


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    if isinstance(error, KeyError):
        text = f"no such key: {text}"
    return (text or type(error).__name__)[:200]
