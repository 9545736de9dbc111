"""``openrl-place``: the command group and its ``simulate`` command.

The imperative shell: read the file, hand the text to the pure core
(:func:`cli.scenario.load_scenario`, :func:`cli.replay.replay`), print a
renderer's output, choose the exit status (:mod:`cli.options`: 0 every
expectation held, 1 one failed, 2 the scenario cannot run, one message naming
the file, the event index and the field, never a traceback; 3 it did not fit
in memory).

Listing the commands (``openrl-place``, ``--help``) imports none of the
lazily loaded ones: their one-line summaries are kept here, so the listing
works on a plain install, without the extras those commands need, and as
fast as ``simulate --help``. A command whose extra is missing still answers
``--help``, saying which extra to install; run, it exits 2 saying the same.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import click

from cli.options import (
    DEFAULT_MAX_SIZE,
    EXIT_EXPECTATION_FAILED,
    EXIT_OK,
    EXIT_OUT_OF_MEMORY,
    count,
    fail,
    file_kind,
    install_hint,
    read_file,
    report_suffix,
)
from cli.render_json import render_json
from cli.render_table import render_table
from cli.replay import Report, replay
from cli.scenario import AddNode, Arrive, Scenario, ScenarioError, load_scenario

__all__ = ["Commands", "main"]

# A memory written without a unit is bytes; below this it is most likely a unit left off.
SMALLEST_LIKELY_MEMORY = 1 << 20


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
    # Each lazy command's one line in the listing: its own short help (a test holds them
    # equal), kept here so that listing imports nothing.
    summaries: ClassVar[dict[str, str]] = {
        "compare": "Replay one scenario under several node policies, side by side.",
        "controller": "Run the GPU claim scheduler: OpenRLWorkers to ResourceClaims and "
                      "worker pods.",
        "explain": "Why WORKER waits: each enabled node's verdict, and the smallest change "
                   "that would seat it.",
        "snapshot": "Print the live fleet and its workers as a scenario for openrl-place "
                    "simulate.",
        "timeslicer": "The node agent: one resident worker per shared claim on this node.",
    }
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

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            # The bare command is a question, not a mistake: the help, on stdout, status 0.
            click.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(0)
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing, from the summaries: no lazy command is imported for it."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)  # one line each
        rows = []
        for name in names:
            summary = self.summaries.get(name) if name in self.lazy else None
            if summary is None:
                command = self.get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                summary = command.get_short_help_str(limit)
            elif len(summary) > limit:
                summary = summary[:limit - 3].rsplit(" ", 1)[0] + "..."
            rows.append((name, summary))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            module, attribute = self.lazy[name].split(":")
            try:
                loaded = importlib.import_module(module)
            except ModuleNotFoundError:
                missing = [m for m in self.extra.get(name, ()) if not _installed(m)]
                if not missing:
                    raise
                return self._stand_in(name, missing)
            command: click.Command = getattr(loaded, attribute)
            return command
        return super().get_command(ctx, name)

    def _stand_in(self, name: str, missing: list[str]) -> click.Command:
        """``name`` without its extra: ``--help`` says what it is and what to install;
        run with anything else, it exits 2 saying the same."""
        extra = self.extra_name.get(name, name)
        needs = (f"{self.prog} {name} needs the {extra} extra ({', '.join(missing)} "
                 f"not installed): {install_hint(extra)}")

        def refuse(args: tuple[str, ...]) -> None:
            raise click.UsageError(needs)

        summary = self.summaries.get(name, "")
        return click.Command(
            name, callback=refuse, help=f"{summary}\n\n{needs}", short_help=summary,
            params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="openrl-place", prog_name="openrl-place")
def main() -> None:
    """GPU claim scheduler for Kubernetes: spread RL workers onto free GPUs, share
    DRA claims only under contention."""


@main.command(short_help="Replay a scenario of arrivals and departures offline.")
@click.argument("file", type=click.Path(allow_dash=True, path_type=Path))
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default=None,
              help="table for people (the default without --report), json for scripts")
@click.option("--report", "report_path", type=report_suffix(".html", ".htm", ".svg"),
              help="also write one self-contained HTML page with pictures (.html, .htm; a "
                   "path ending in .svg gets the over-time figure alone)")
@click.option("--max-size", default=DEFAULT_MAX_SIZE, show_default=True, metavar="SIZE",
              help="refuse a larger FILE (a quantity of bytes, e.g. 500Mi)")
def simulate(file: Path, output: str | None, report_path: Path | None, max_size: str) -> None:
    """Replay the arrivals and departures in FILE (YAML or JSON; - reads stdin)
    through the placement decision, with DRA played by the simulator.

    Exit status: 0 every expectation held, 1 one failed, 2 the scenario cannot
    run, 3 it did not fit in memory.
    """
    if output is None and report_path is None:
        output = "table"
    name, text = read_file(file, max_size)
    with _collector_at_ease(), _memory_guard(name, len(text)):
        try:
            scenario = load_scenario(text, kind=file_kind(file))
            del text  # tens of megabytes for a large file, and not read again
            report = replay(scenario)
        except ScenarioError as error:
            fail(f"{name}: {error}")
        for warning in _small_memories(scenario):
            click.echo(f"warning: {name}: {warning}", err=True)
        if report_path is not None:
            _write_report(report_path, name, scenario, report)
        if output == "json":
            _write(render_json(report))
        elif output == "table":
            title = (f"{name}: {count(len(report.nodes), 'node')}, "
                     f"{count(len(scenario.events), 'event')}, dra: {report.dra}")
            click.echo("\n".join(render_table(report, title)))
    sys.exit(EXIT_EXPECTATION_FAILED if report.failures else EXIT_OK)


def _small_memories(scenario: Scenario, most: int = 3) -> list[str]:
    """A warning for each memory under 1Mi (the first ``most``, then how many more):
    a size without a unit is bytes, so ``memory: 10`` is 10 bytes, not 10Gi."""
    found = [f"nodes[{i}].{key}" for i, node in enumerate(scenario.nodes)
             for key, size in (("deviceMemory", node.device_memory),
                               ("hostMemory", node.host_memory))
             if size and size < SMALLEST_LIKELY_MEMORY]
    for index, event in enumerate(scenario.events):
        if type(event) is Arrive and event.memory < SMALLEST_LIKELY_MEMORY:
            found.append(f"events[{index}].arrive.memory")
        elif type(event) is AddNode and event.node.device_memory < SMALLEST_LIKELY_MEMORY:
            found.append(f"events[{index}].addNode.deviceMemory")
    more = f" (and {len(found) - most} more)" if len(found) > most else ""
    return [f"{path} is under 1Mi: a size without a unit is bytes; did you mean Gi?"
            f"{more if i == most - 1 else ''}" for i, path in enumerate(found[:most])]


@contextlib.contextmanager
def _memory_guard(name: str, size: int) -> Iterator[None]:
    """Running out of memory is one line and its own exit status, not a traceback."""
    out_of_memory = False
    try:
        yield
    except MemoryError:
        out_of_memory = True  # said below, once the exception has let go of what it held
    if out_of_memory:
        fail(f"{name}: out of memory replaying {size / (1 << 20):,.0f} MiB of scenario "
             "(YAML takes several times the memory of JSON: write large scenarios as JSON, "
             "or run where there is more memory)", EXIT_OUT_OF_MEMORY)


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


def _write_report(path: Path, name: str, scenario: Scenario, report: Report) -> None:
    # Imported here: matplotlib would slow every plain ``simulate`` down.
    try:
        from cli.report import write_report
    except ImportError as error:
        fail(f"--report needs matplotlib ({error}); install it with: "
             f"{install_hint('report')}")
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
