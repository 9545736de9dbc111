"""``openrl-place``: the command group and its ``simulate`` command.

The imperative shell: read the file, hand the text to the pure core
(:func:`cli.scenario.load_scenario`, :func:`cli.replay.replay`), print a
renderer's output, choose the exit status. Exit status: 0 when every
expectation held, 1 when one failed, 2 when the scenario cannot run (one
message naming the file, the event index and the field; never a traceback).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, NoReturn

import click

from cli.render_json import render_json
from cli.render_table import render_table
from cli.replay import Report, replay
from cli.scenario import Scenario, ScenarioError, load_scenario
from cli.show import printable
from placement.quantity import parse_quantity

__all__ = ["Commands", "fail", "file_kind", "main", "read_file"]

EXIT_OK = 0
EXIT_EXPECTATION_FAILED = 1
EXIT_BAD_SCENARIO = 2

# Larger than any scenario written by hand or generated for a benchmark, small
# enough that a mistaken path (a device, a log) is refused before it is read.
DEFAULT_MAX_SIZE = "100Mi"
# An error message is one line of at most this many characters.
LONGEST_MESSAGE = 1000


class Commands(click.Group):
    """A command group whose heavier subcommands are imported on first use.

    ``openrl-place controller`` pulls in the Kubernetes client, which takes
    longer to import than ``simulate`` takes to replay a small scenario, and
    which only the ``controller`` extra installs; ``compare`` brings process
    pools and, for its report, matplotlib.
    """

    prog: ClassVar[str] = "openrl-place"  # the group as people type it, for messages
    lazy: ClassVar[dict[str, str]] = {"controller": "controller.main:command",
                                      "compare": "cli.compare:command",
                                      "snapshot": "cli.snapshot:command",
                                      "explain": "cli.explain:command",
                                      "timeslicer": "cli.timeslicer:command"}
    # What a command's extra installs: missing, the command says which extra to add.
    extra: ClassVar[dict[str, tuple[str, ...]]] = {
        "controller": ("kubernetes", "prometheus_client"),
        "snapshot": ("kubernetes",),
        "explain": ("kubernetes",),
        "timeslicer": ("kubernetes", "prometheus_client"),
    }
    # The live read-only tools come with the controller's extra.
    extra_name: ClassVar[dict[str, str]] = {"snapshot": "controller", "explain": "controller",
                                             "timeslicer": "controller"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            module, attribute = self.lazy[name].split(":")
            try:
                loaded = importlib.import_module(module)
            except ModuleNotFoundError:
                missing = [m for m in self.extra.get(name, ()) if not _installed(m)]
                if not missing:
                    raise
                extra = self.extra_name.get(name, name)
                ctx.fail(f"{self.prog} {name} needs the {extra} extra ({', '.join(missing)} "
                         f"not installed): pip install 'openrl-place[{extra}]'")
            command: click.Command = getattr(loaded, attribute)
            return command
        return super().get_command(ctx, name)


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="openrl-place", prog_name="openrl-place")
def main() -> None:
    """GPU claim scheduler for Kubernetes: spread RL workers onto free GPUs, share
    DRA claims only under contention."""


@main.command(short_help="Replay a scenario of arrivals and departures offline.")
@click.argument("file", type=click.Path(allow_dash=True, path_type=Path))
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default=None,
              help="table for people (the default without --report), json for scripts")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
              help="also write one self-contained HTML page with pictures (a path ending "
                   "in .svg gets the over-time figure alone)")
@click.option("--max-size", default=DEFAULT_MAX_SIZE, show_default=True, metavar="SIZE",
              help="refuse a larger FILE (a quantity of bytes, e.g. 500Mi)")
def simulate(file: Path, output: str | None, report_path: Path | None, max_size: str) -> None:
    """Replay the arrivals and departures in FILE (YAML or JSON; - reads stdin)
    through the placement decision, with DRA played by the simulator.

    Exit status: 0 every expectation held, 1 one failed, 2 the scenario cannot run.
    """
    if output is None and report_path is None:
        output = "table"
    name, text = read_file(file, max_size)
    with _collector_at_ease():
        try:
            scenario = load_scenario(text, kind=file_kind(file))
            del text  # tens of megabytes for a large file, and not read again
            report = replay(scenario)
        except ScenarioError as error:
            fail(f"{name}: {error}")
        if report_path is not None:
            _write_report(report_path, name, scenario, report)
        if output == "json":
            _write(render_json(report))
        elif output == "table":
            title = (f"{name}: {_count(len(report.nodes), 'node')}, "
                     f"{_count(len(report.steps), 'event')}, dra: {report.dra}")
            click.echo("\n".join(render_table(report, title)))
    sys.exit(EXIT_EXPECTATION_FAILED if report.failures else EXIT_OK)


def _write(text: str) -> None:
    """``text`` and a newline on stdout, a megabyte at a time.

    Straight to stdout: click.echo would scan megabytes for colour codes. In
    slices: writing the whole would encode a copy of it at once (hundreds of
    megabytes for a large replay), on top of the document itself.
    """
    step = 1 << 20
    for start in range(0, len(text), step):
        sys.stdout.write(text[start:start + step])
    sys.stdout.write("\n")


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
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with file.open("rb") as stream:
                data = stream.read(limit + 1)
    except OSError as error:
        fail(f"{name}: cannot read: {error.strerror or error}")
    if len(data) > limit:
        fail(f"{name}: larger than {printable(max_size)}, the most simulate reads; "
             "raise it with --max-size if the scenario really is that large")
    try:
        return name, data.decode("utf-8")
    except UnicodeDecodeError as error:
        fail(f"{name}: not UTF-8 text (byte {error.start:,} cannot be decoded)")


def file_kind(file: Path) -> str:
    """``json`` or ``yaml`` when the file's name says which, else empty (either)."""
    return {".json": "json", ".yaml": "yaml", ".yml": "yaml"}.get(file.suffix.lower(), "")


def _write_report(path: Path, name: str, scenario: Scenario, report: Report) -> None:
    # Imported here: matplotlib would slow every plain ``simulate`` down.
    try:
        from cli.report import write_report
    except ImportError as error:
        fail(f"--report needs matplotlib ({error}); install it with: "
              "pip install 'openrl-place[report]'")
    try:
        size = write_report(path, name, scenario, report)
    except OSError as error:
        fail(f"{path}: cannot write the report: {error.strerror or error}")
    click.echo(f"report: {path} ({size / 1024:,.0f} KB)", err=True)


@contextlib.contextmanager
def _collector_at_ease() -> Iterator[None]:
    """Keep the cyclic GC out of the way while the scenario and the books grow.

    Parsing and replaying make many small objects and keep most of them, so
    the collector would walk them again and again for garbage that is not
    there: nothing a replay builds forms a reference cycle, so reference
    counting frees all of it. Measured: 3% of a 30,000-event run even with
    the collector's thresholds raised; so it is paused, then restored.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # present in sys.modules as None: import blocked
        return False


def fail(message: str) -> NoReturn:
    """Say what cannot be done and exit with the bad-input status.

    The messages echo values from the scenario already escaped and cut; this
    is the last guard that whatever is printed is one short line.
    """
    message = printable(message)
    if len(message) > LONGEST_MESSAGE:
        message = message[:LONGEST_MESSAGE] + "..."
    click.echo(message, err=True)
    sys.exit(EXIT_BAD_SCENARIO)


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
