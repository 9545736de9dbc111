"""``kubectl openrl``: ``snapshot`` and ``explain`` as a kubectl plugin.

Rules:

* Installed as the ``kubectl-openrl`` command: kubectl runs any
  ``kubectl-<name>`` it finds on PATH for ``kubectl <name>``, with the
  arguments that follow the name (kubectl's own flags go after ``openrl``:
  placed before it they are kubectl's, and it looks for no plugin).
* The commands are ``openrl-place snapshot|explain`` -- the same output and
  exit statuses -- naming the cluster with kubectl's flags (``-n``,
  ``--context``, ``--kubeconfig``; ``cli.live.KUBECTL``). As with kubectl,
  those flags may also come before the command (``kubectl openrl -n team
  explain w``): they are moved after it before the command line is read.
* Without the ``controller`` extra (the Kubernetes client) a command exits 2
  saying which extra to install.
"""

from __future__ import annotations

from typing import ClassVar

import click

from cli.main import Commands

__all__ = ["main", "plugin"]


class _Plugin(Commands):
    prog: ClassVar[str] = "kubectl openrl"
    lazy: ClassVar[dict[str, str]] = {"snapshot": "cli.snapshot:kubectl_command",
                                      "explain": "cli.explain:kubectl_command"}
    extra: ClassVar[dict[str, tuple[str, ...]]] = {"snapshot": ("kubernetes",),
                                                   "explain": ("kubernetes",)}
    extra_name: ClassVar[dict[str, str]] = {"snapshot": "controller", "explain": "controller"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.lazy)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        moved = _command_first(args)
        if moved is None:
            raise click.UsageError(f"{' '.join(args)}: which command are these flags for? "
                                   f"({', '.join(sorted(self.lazy))})", ctx)
        return super().parse_args(ctx, moved)


_VALUED = ("--namespace", "--context", "--kubeconfig")


def _command_first(args: list[str]) -> list[str] | None:
    """``args`` with the kubectl flags that precede a command moved after it; None if
    they are all there is."""
    at = 0
    while at < len(args):
        arg = args[at]
        if arg in ("-n", *_VALUED):
            at += 2  # the flag and its value
        elif arg.startswith(tuple(f"{flag}=" for flag in _VALUED)) or (
                arg.startswith("-n") and not arg.startswith("--")):
            at += 1  # --namespace=team, -nteam
        else:
            break
    if at and at >= len(args):
        return None
    if at and args[at] in ("-h", "--help", "--version"):
        return args[at:]  # the group's own answer, whatever the flags
    # What follows is the command, or what click then refuses by its name.
    return [args[at], *args[:at], *args[at + 1:]] if at else args


@click.group(cls=_Plugin, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="openrl-place", prog_name="kubectl openrl")
def plugin() -> None:
    """openrl-place's read-only looks at the live fleet, from kubectl: the fleet as a
    scenario for openrl-place simulate, and why a worker waits."""


def main() -> None:
    """The ``kubectl-openrl`` command."""
    plugin(prog_name="kubectl openrl")
