"""``openrl-place timeslicer``: the node agent's options, and a call into it.

``--local`` runs on the plain install: the Kubernetes client and
prometheus_client (the ``controller`` extra) are imported only by the cluster
mode and by /metrics, and their absence in the cluster mode is one clear error.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

from controller.k8s import logs
from placement.turns import TurnSettings
from timeslicer.agent import Options, run

__all__ = ["command"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _seconds(ctx: click.Context, param: click.Parameter, value: str) -> float:
    for unit in sorted(_UNITS, key=len, reverse=True):
        if value.endswith(unit):
            number = value[:-len(unit)]
            break
    else:
        number, unit = value, "s"
    try:
        return float(number) * _UNITS[unit]
    except ValueError:
        raise click.BadParameter(f"{value!r} is no duration (like 30s, 2m, 500ms)") from None


def _address(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, int] | None:
    if value in ("", "off"):
        return None
    host, _, port = value.rpartition(":")
    if not port.isdigit():
        raise click.BadParameter(f"{value!r} is no [host]:port")
    return host, int(port)


@click.command("timeslicer")
@click.option("--node", envvar="NODE_NAME", default="", help="This node's name (env NODE_NAME).")
@click.option("--kubelet-root", envvar="KUBELET_ROOT", default="/var/lib/kubelet",
              type=click.Path(path_type=Path), show_default=True)
@click.option("--quantum", envvar="TIMESLICER_QUANTUM", default="2m", callback=_seconds,
              show_default=True, help="Longest turn while others wait.")
@click.option("--min-resident", envvar="TIMESLICER_MIN_RESIDENT", default="10s",
              callback=_seconds, show_default=True, help="Shortest turn.")
@click.option("--yield-grace", envvar="TIMESLICER_YIELD_GRACE", default="30s",
              callback=_seconds, show_default=True, help="Time to park once asked.")
@click.option("--metrics-address", envvar="TIMESLICER_METRICS_ADDRESS", default=":9478",
              callback=_address, show_default=True, help="/metrics /healthz /readyz ('off').")
@click.option("--local", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="No Kubernetes: DIR/<group>/<member>/turn.sock, owner from .../owner; "
                   "a drain file there asks a drain, answered by drained.")
@click.option("--nvml", type=click.Choice(["auto", "off"]), default="auto", show_default=True,
              help="The device-memory check (auto: on where NVML loads).")
@click.option("--log-format", envvar="TIMESLICER_LOG_FORMAT", type=click.Choice(["json", "text"]),
              default="json", show_default=True, help="One JSON object per line, or text.")
@click.option("--log-level", envvar="TIMESLICER_LOG_LEVEL",
              type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True, help="Grants, yields, parks, evictions and restarts are info.")
@click.option("--kubeconfig", envvar="KUBECONFIG", default=None, hidden=True)
def command(node: str, kubelet_root: Path, quantum: float, min_resident: float,
            yield_grace: float, metrics_address: tuple[str, int] | None, local: Path | None,
            nvml: str, log_format: str, log_level: str, kubeconfig: str | None) -> None:
    """The node agent: one resident worker per shared claim on this node."""
    try:
        settings = TurnSettings(quantum, min_resident, yield_grace)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if local is None and not node:
        raise click.UsageError("--node (or NODE_NAME) is needed unless --local is given")
    if local is not None and not local.is_dir():
        raise click.UsageError(f"--local {local}: not a directory")
    if local is None:
        try:
            import kubernetes  # noqa: F401 - the cluster mode's client, imported only for it
        except ModuleNotFoundError:
            raise click.UsageError("the cluster mode needs the controller extra (kubernetes "
                                   "not installed): pip install 'openrl-place[controller]', "
                                   "or run --local DIR") from None
    logs.configure(log_format, getattr(logging, log_level.upper()))
    run(Options(settings, node=node, kubelet_root=kubelet_root, local=local,
                metrics_address=metrics_address, nvml=nvml == "auto",
                kubeconfig=kubeconfig.split(":")[0] if kubeconfig else None))
