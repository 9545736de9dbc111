"""What the offline commands share: reading FILE, failing in one line, exit statuses.

``simulate`` (in :mod:`cli.main`, the entry point) and ``compare`` both read a
scenario file and refuse bad input the same way; they import it from here, so
the entry point, which loads ``compare`` lazily, is imported by nobody.

Exit statuses, one meaning each:

====  =================================================================
0     every expectation held
1     at least one expectation failed
2     the input cannot run: the file, an option or the scenario is bad
3     the scenario did not fit in memory (it is larger than this machine
      can read; JSON takes much less than YAML)
====  =================================================================
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import BinaryIO, NoReturn

import click

from cli.show import printable
from placement.quantity import parse_quantity

__all__ = [
    "DEFAULT_MAX_SIZE",
    "EXIT_BAD_SCENARIO",
    "EXIT_EXPECTATION_FAILED",
    "EXIT_OK",
    "EXIT_OUT_OF_MEMORY",
    "count",
    "fail",
    "file_kind",
    "install_hint",
    "read_file",
    "report_suffix",
]

EXIT_OK = 0
EXIT_EXPECTATION_FAILED = 1
EXIT_BAD_SCENARIO = 2
EXIT_OUT_OF_MEMORY = 3

# Larger than any scenario written by hand or generated for a benchmark, small
# enough that a mistaken path (a device, a log) is refused before it is read.
DEFAULT_MAX_SIZE = "100Mi"
# An error message is one line of at most this many characters.
LONGEST_MESSAGE = 1000


def install_hint(extra: str) -> str:
    """How to add ``extra``, for an installed wheel and for a clone (the two differ)."""
    return (f"pip install 'openrl-place[{extra}]' "
            f"(in a clone of the repository: pip install '.[{extra}]')")


class _ReportPath(click.Path):
    """A path whose name ends in one of ``suffixes``."""

    def __init__(self, suffixes: tuple[str, ...]) -> None:
        super().__init__(dir_okay=False, path_type=Path)
        self.suffixes = suffixes

    def convert(self, value: str | os.PathLike[str], param: click.Parameter | None,
                ctx: click.Context | None) -> str | bytes | os.PathLike[str]:
        path = super().convert(value, param, ctx)
        if Path(os.fsdecode(path)).suffix.lower() not in self.suffixes:
            *others, last = self.suffixes
            named = f"{', '.join(others)} or {last}" if others else last
            self.fail(f"{printable(os.fsdecode(value))}: the name must end in {named} (what "
                      "is written is chosen by its suffix)", param, ctx)
        return path


def report_suffix(*suffixes: str) -> click.Path:
    """A ``--report`` path whose name ends in one of ``suffixes``: the page written is
    chosen by the suffix, so any other would get a file its name misdescribes."""
    return _ReportPath(suffixes)


def read_file(file: Path, max_size: str = DEFAULT_MAX_SIZE) -> tuple[str, str]:
    """The name to show in messages and the text of FILE (``-``: stdin); exit 2 if unreadable.

    Never reads more than ``max_size`` (a quantity of bytes) and one byte, so
    a device or a runaway pipe is refused instead of filling memory.
    """
    try:
        limit = parse_quantity(max_size)
    except ValueError as error:
        raise click.BadParameter(printable(str(error)), param_hint="--max-size") from None
    name = printable("<stdin>" if str(file) == "-" else str(file))
    try:
        if str(file) == "-":
            data = _read_upto(sys.stdin.buffer, limit + 1)
        else:
            with file.open("rb") as stream:
                data = _read_upto(stream, limit + 1)
    except OSError as error:
        fail(f"{name}: cannot read: {error.strerror or error}")
    except MemoryError:
        fail(f"{name}: out of memory reading it", EXIT_OUT_OF_MEMORY)
    if len(data) > limit:
        fail(f"{name}: larger than {printable(max_size)}, the most simulate reads; "
             "raise it with --max-size if the scenario really is that large")
    try:
        return name, data.decode("utf-8")
    except UnicodeDecodeError as error:
        fail(f"{name}: not UTF-8 text (byte {error.start:,} cannot be decoded)")


def _read_upto(stream: BinaryIO, most: int) -> bytes:
    """At most ``most`` bytes of ``stream``, a megabyte at a time: one ``read(most)`` would
    reserve all of ``most`` at once, however small the file."""
    parts = []
    left = most
    while left > 0:
        part = stream.read(min(left, 1 << 20))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def file_kind(file: Path) -> str:
    """``json`` or ``yaml`` when the file's name says which, else empty (either)."""
    return {".json": "json", ".yaml": "yaml", ".yml": "yaml"}.get(file.suffix.lower(), "")


def fail(message: str, status: int = EXIT_BAD_SCENARIO) -> NoReturn:
    """Say what cannot be done and exit (with the bad-input status unless told otherwise).

    The messages echo values from the scenario already escaped and cut; this
    is the last guard that whatever is printed is one short line.
    """
    message = printable(message)
    if len(message) > LONGEST_MESSAGE:
        message = message[:LONGEST_MESSAGE] + "..."
    click.echo(message, err=True)
    sys.exit(status)


def count(number: int, noun: str) -> str:
    """``1 node``, ``2 nodes``: the noun agrees with the number."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
