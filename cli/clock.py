"""Time in scenarios: reading an event's ``at`` and printing durations.

An event may say when it happens: a duration since the start (``90s``,
``12m``, ``1h30m``, ``2d``) or a plain number of seconds. Times never go
back; an event without ``at`` happens when the previous one did (the first
at zero). A scenario in which no event says ``at`` has no clock at all, and
then the replay counts events instead: a worker that waited three events
waited 3.
"""

from __future__ import annotations

import math
import re

__all__ = ["format_duration", "parse_duration"]

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_WHOLE = re.compile(r"(?:\d+(?:\.\d+)?[dhms])+")


def parse_duration(value: object) -> float:
    """Seconds since the start; ValueError saying what is accepted otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"must be a duration such as 90s, 12m or 1h30m, or seconds, "
                         f"got {str(value).lower()} (a boolean)")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        parts = _PART.findall(value.strip())
        units = [unit for _, unit in parts]
        if len(set(units)) != len(units) or units != sorted(units, key=list(_UNITS).index):
            raise ValueError(f'"{value}" repeats or reorders its units (write them as 1d2h3m4s)')
        seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    elif isinstance(value, str):
        try:
            seconds = float(value)
        except ValueError:
            raise ValueError(f'"{value}" is not a duration such as 90s, 12m or 1h30m, '
                             "nor a number of seconds") from None
    else:
        raise ValueError(f"must be a duration such as 90s, 12m or 1h30m, or seconds, "
                         f"got {type(value).__name__}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"must be a time since the start (zero or more), got {value}")
    return seconds


def format_duration(seconds: float, units: int = 2) -> str:
    """``1h30m``, ``12m``, ``45s``, ``1.5s``: the largest ``units`` units, for people."""
    if seconds < 60:
        return f"{seconds:.3g}s" if seconds < 10 else f"{round(seconds)}s"
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    # Two units are plenty for a reading (1d4h, 2h15m, 12m30s); a timestamp may want all.
    first = next(i for i, (count, _) in enumerate(parts) if count)
    shown = [f"{count}{unit}" for count, unit in parts[first:first + units] if count]
    return "".join(shown)
