"""The live commands' shell: which cluster and fleet the flags name, read once.

Rules:

* ``snapshot`` and ``explain`` read the cluster through the controller's own
  reading (``controller.inspect_fleet``) and write nothing; this module only
  turns flags into that one read.
* Two sets of flags name the cluster. ``openrl-place``'s are the controller's
  (``--namespace``, ``--device-class``, ``--device-driver``, ``--kubeconfig``,
  with the same environment fallbacks). ``kubectl openrl``'s are kubectl's own
  (``-n/--namespace``, ``--context``, ``--kubeconfig``) beside the two device
  flags; as in kubectl, the namespace defaults to the context's.
  Either way the last fallback is the controller's (this pod's namespace,
  else ``openrl``).
* A cluster that cannot be read is one line on stderr, opened by the command
  as it was typed, and exit status 2.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import attrs
import click

from controller.inspect_fleet import LiveFleet, Unreachable, connect, read_live_fleet
from controller.k8s import kube
from controller.settings import default_namespace

__all__ = ["KUBECTL", "OPENRL_PLACE", "Flags", "read", "unreachable"]

EXIT_UNREACHABLE = 2

F = TypeVar("F", bound=Callable[..., Any])

_DEVICE_OPTIONS = (
    click.option("--device-class", envvar="OPEN_RL_DEVICE_CLASS",
                 default="gpu.example.com", show_default=True,
                 help="DeviceClass the claims request."),
    click.option("--device-driver", envvar="OPEN_RL_DEVICE_DRIVER",
                 help="DRA driver publishing the devices [default: the device class]."),
)


@attrs.frozen
class Flags:
    """One way of naming the cluster and the fleet on a command line."""

    prog: str  # the command group as people type it, for messages
    options: tuple[Callable[[Any], Any], ...]
    namespace_from_context: bool  # kubectl's rule: no -n means the context's namespace

    def apply(self, command: F) -> F:
        for option in reversed(self.options):
            command = option(command)
        return command


OPENRL_PLACE = Flags("openrl-place", (
    click.option("--namespace", envvar="OPEN_RL_NAMESPACE",
                 help="Namespace of workers, pods, claims and templates "
                      "[default: this pod's namespace, else openrl]."),
    *_DEVICE_OPTIONS,
    click.option("--kubeconfig", type=click.Path(dir_okay=False),
                 help="[default: $KUBECONFIG, else in-cluster]"),
), namespace_from_context=False)

KUBECTL = Flags("kubectl openrl", (
    click.option("--namespace", "-n",
                 help="Namespace of workers, pods, claims and templates [default: the "
                      "context's namespace, else this pod's, else openrl]."),
    click.option("--context", help="The kubeconfig context to use [default: the current one]."),
    click.option("--kubeconfig", type=click.Path(dir_okay=False),
                 help="Path to the kubeconfig file [default: $KUBECONFIG, else "
                      "in-cluster, else ~/.kube/config]."),
    *_DEVICE_OPTIONS,
), namespace_from_context=True)


def read(flags: Flags, what: str, *, namespace: str | None, device_class: str,
         device_driver: str | None, kubeconfig: str | None,
         context: str | None = None) -> tuple[kube.Kube, LiveFleet]:
    """The fleet the flags name, read once; exit 2 with one line if it cannot be read."""
    if namespace is None and flags.namespace_from_context:
        namespace = kube.context_namespace(kubeconfig, context)
    try:
        api = connect(kubeconfig, namespace or default_namespace(), context)
        return api, read_live_fleet(api, device_driver or device_class, device_class)
    except Unreachable as error:
        unreachable(flags, what, str(error))


def unreachable(flags: Flags, what: str, message: str) -> NoReturn:
    click.echo(f"{flags.prog} {what}: {message}", err=True)
    sys.exit(EXIT_UNREACHABLE)
