"""Controller settings: validated once at start, read everywhere else.

Rules:

* Every duration accepts ``30s``, ``2m``, ``1h``, compounds such as ``1m30s``,
  ``500ms``, or plain seconds (``45``, ``0.5``).
* The namespace defaults to the controller pod's own namespace when it runs in
  a cluster, else ``openrl``. Workers, pods, claims and template ConfigMaps all
  live there.
* The device driver (the domain of the ``memory`` capacity in ResourceSlices
  and in the claim's CEL selector) defaults to the device class name.
* The lease namespace defaults to the namespace.
* What templates may hand their workers is the operator's setting, here and
  nowhere else (``controller.reconcile.privileges``): ``service_account`` is the
  scheduler's own (never a worker's), ``template_service_accounts`` the others
  a template may name, and ``template_allow`` the privileged fields a template
  may set, as ``NAME=FIELD,FIELD`` entries separated by ``;`` or spaces (``*``
  for every template). Allowing the scheduler's own account, or a field that
  is not one of the refused ones, is a settings error. ``template_pod_security``
  is the Pod Security level every template is held to (``baseline`` or
  ``restricted``), checked by the scheduler whatever the namespace's labels.
* ``wedge_grace``, ``move_limit`` and ``move_window`` are the re-placement
  rules' (``controller.reconcile.moves``): how long a placed pod may stay unschedulable,
  and how many times a worker may be placed again within the window.
* ``rebalance_after`` is how long devices must stay free (``spread``), or a
  node emptiable (``binpack``), before a movable worker (``spec.movable``) is
  moved to use them; 0 turns moves for efficiency off. Read by the move rule
  alone; lost nodes and wedged pods move any worker whatever it says.
  ``drain_timeout`` bounds how long a moving worker's old pod is kept for its
  node's time-slicer to say the worker parked (a node without one never says).
* ``strategy`` is the placement policy's, one for the whole scheduler
  (``placement.policy``): ``spread`` (the default) or ``binpack``. Owner
  affinity is always on here; only the offline commands switch it off, to
  compare.
* ``autoscaling`` (off by default) makes a worker that must wait keep a
  standing claim and pod a node autoscaler can act on (``controller.reconcile.standing``);
  ``autoscale_pools`` are the node pools the operator says it can add, as
  ``COUNTxMEMORY[:ROLE[+ROLE]]`` entries (``controller.fleet.pools``): with autoscaling
  on, NoCapacity is judged against those alone (and the nodes present).
* ``kueue`` (off by default) takes admission for queue-labelled workers from
  Kueue (``controller.reconcile.admission``); off, Kueue's objects are neither
  watched nor written, and the label means nothing.
"""

from __future__ import annotations

import re
import socket
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

from controller.fleet.pools import DeclaredPool, PoolError, parse_pools
from controller.reconcile.privileges import ALLOWABLE, LEVELS, TemplatePolicy
from placement import Policy, Strategy

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
FALLBACK_NAMESPACE = "openrl"

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class SettingsError(ValueError):
    """A flag or environment value the controller cannot run with."""


def parse_duration(text: str | float | int) -> float:
    """Seconds in ``text``: ``30s``, ``2m``, ``1h``, ``1m30s``, ``500ms`` or plain seconds."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    raw = str(text).strip()
    try:
        return float(raw)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(raw):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(raw) or not raw:
        raise SettingsError(f"{text!r} is not a duration (examples: 30s, 2m, 1h, 1m30s, 45)")
    return total


def default_namespace() -> str:
    try:
        found = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    except OSError:
        found = ""
    return found or FALLBACK_NAMESPACE


def default_identity() -> str:
    """Leader-election holder identity: the pod's hostname plus a per-process suffix."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _positive(_instance: object, attribute: attrs.Attribute, value: float) -> None:  # type: ignore[type-arg]
    if value <= 0:
        raise SettingsError(f"{attribute.name.replace('_', '-')} must be greater than zero")


def _dns_label(_instance: object, attribute: attrs.Attribute, value: str) -> None:  # type: ignore[type-arg]
    if not _DNS_LABEL.match(value) or len(value) > 63:
        raise SettingsError(f"{attribute.name.replace('_', '-')} {value!r} is not a DNS label")


def _dns_subdomain(_instance: object, attribute: attrs.Attribute, value: str) -> None:  # type: ignore[type-arg]
    if not _DNS_SUBDOMAIN.match(value) or len(value) > 253:
        raise SettingsError(f"{attribute.name.replace('_', '-')} {value!r} is not a DNS name")


def parse_http_address(text: str) -> tuple[str, int] | None:
    """``host:port`` (``:8080`` = every interface); empty = no HTTP server."""
    if not text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise SettingsError(f"http-address {text!r} is not host:port (e.g. :8080)")
    return host.strip("[]") or "0.0.0.0", int(port)


def parse_names(value: str | Iterable[str]) -> frozenset[str]:
    """Comma- or space-separated names (or an iterable of them)."""
    items = re.split(r"[,\s]+", value) if isinstance(value, str) else list(value)
    return frozenset(str(i).strip() for i in items if str(i).strip())


def parse_template_allow(value: str | Mapping[str, Iterable[str]]
                         ) -> Mapping[str, frozenset[str]]:
    """``NAME=FIELD,FIELD;NAME=FIELD`` (``*`` for every template) as a mapping."""
    if not isinstance(value, str):
        return {str(k): parse_names(v) for k, v in value.items()}
    allow: dict[str, frozenset[str]] = {}
    for entry in re.split(r"[;\s]+", value.strip()):
        if not entry:
            continue
        name, sep, fields = entry.partition("=")
        if not sep or not name or not fields:
            raise SettingsError(f"template-allow entry {entry!r} is not TEMPLATE=FIELD[,FIELD]")
        allow[name] = allow.get(name, frozenset()) | parse_names(fields)
    return allow


def _template_allow(_instance: object, _attribute: attrs.Attribute,  # type: ignore[type-arg]
                    value: Mapping[str, frozenset[str]]) -> None:
    for name, fields in value.items():
        if name != "*" and not (_DNS_SUBDOMAIN.match(name) and len(name) <= 253):
            raise SettingsError(f"template-allow: {name!r} is not a ConfigMap name (or *)")
        unknown = sorted(fields - ALLOWABLE)
        if unknown:
            raise SettingsError(f"template-allow {name}: {', '.join(unknown)} cannot be "
                                f"allowed (only {', '.join(sorted(ALLOWABLE))})")


def _level(_instance: object, _attribute: attrs.Attribute, value: str) -> None:  # type: ignore[type-arg]
    if value not in LEVELS:
        raise SettingsError(f"template-pod-security {value!r} is not one of "
                            f"{', '.join(LEVELS)}")


def _not_negative(_instance: object, attribute: attrs.Attribute, value: float) -> None:  # type: ignore[type-arg]
    if value < 0:
        raise SettingsError(f"{attribute.name.replace('_', '-')} must be 0 (off) or more")


def _strategy(_instance: object, _attribute: attrs.Attribute, value: str) -> None:  # type: ignore[type-arg]
    if value not in STRATEGIES:
        raise SettingsError(f"strategy {value!r} is not one of {', '.join(STRATEGIES)}")


STRATEGIES = tuple(strategy.value for strategy in Strategy)


def _pools(value: str | tuple[DeclaredPool, ...]) -> tuple[DeclaredPool, ...]:
    try:
        return parse_pools(value)
    except PoolError as exc:
        raise SettingsError(str(exc)) from None


def _http_address(_instance: object, _attribute: attrs.Attribute, value: str) -> None:  # type: ignore[type-arg]
    parse_http_address(value)


@attrs.frozen(kw_only=True)
class Settings:
    namespace: str = attrs.field(factory=default_namespace, validator=_dns_label)
    device_class: str = attrs.field(default="gpu.example.com", validator=_dns_subdomain)
    # None = the device class; resolved in __attrs_post_init__.
    device_driver: str = attrs.field(default="")
    retry_interval: float = attrs.field(default=30.0, converter=parse_duration,
                                        validator=_positive)
    placement_timeout: float = attrs.field(default=600.0, converter=parse_duration,
                                           validator=_positive)
    reclaim_interval: float = attrs.field(default=60.0, converter=parse_duration,
                                          validator=_positive)
    reclaim_grace: float = attrs.field(default=120.0, converter=parse_duration,
                                       validator=attrs.validators.ge(0.0))
    # A placed worker's pod that stays unschedulable this long is wedged: placed again.
    wedge_grace: float = attrs.field(default=120.0, converter=parse_duration,
                                     validator=_positive)
    # Placed again more than move_limit times within move_window: the worker waits.
    move_limit: int = attrs.field(default=3, converter=int,
                                  validator=attrs.validators.ge(1))
    move_window: float = attrs.field(default=1800.0, converter=parse_duration,
                                     validator=_positive)
    # A movable worker is moved once what it would move to has stayed so this long; 0: never.
    rebalance_after: float = attrs.field(default=300.0, converter=parse_duration,
                                         validator=_not_negative)
    # A worker moving waits this long at most for its node's time-slicer to say it parked.
    drain_timeout: float = attrs.field(default=300.0, converter=parse_duration,
                                       validator=_positive)
    # An assumption no answer resolved (and no plan in flight will) is forgotten after this.
    assume_timeout: float = attrs.field(default=30.0, converter=parse_duration,
                                        validator=_positive)
    http_address: str = attrs.field(default=":8080", validator=_http_address)
    leader_elect: bool = True
    lease_name: str = attrs.field(default="open-rl-scheduler", validator=_dns_subdomain)
    lease_namespace: str = attrs.field(default="")
    kubeconfig: str | None = None
    log_format: str = attrs.field(default="json",
                                  validator=attrs.validators.in_(("json", "text")))
    identity: str = attrs.field(factory=default_identity)
    service_account: str = attrs.field(default="open-rl-scheduler", validator=_dns_subdomain)
    template_service_accounts: frozenset[str] = attrs.field(default=frozenset(),
                                                            converter=parse_names)
    template_allow: Mapping[str, frozenset[str]] = attrs.field(
        factory=dict, converter=parse_template_allow, validator=_template_allow)
    template_pod_security: str = attrs.field(default="baseline", validator=_level)
    strategy: str = attrs.field(default=Strategy.SPREAD.value, validator=_strategy)
    autoscaling: bool = False
    autoscale_pools: tuple[DeclaredPool, ...] = attrs.field(default=(), converter=_pools)
    kueue: bool = False
    # Built from the four above once they are checked.
    template_policy: TemplatePolicy = attrs.field(init=False, factory=TemplatePolicy)
    # Lease timings (client-go's defaults): a leader that cannot renew within
    # the deadline steps down; a standby takes over once the lease expires.
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    @property
    def policy(self) -> Policy:
        """The placement policy every decision is made under."""
        return Policy(Strategy(self.strategy))

    def __attrs_post_init__(self) -> None:
        if not self.device_driver:
            object.__setattr__(self, "device_driver", self.device_class)
        _dns_subdomain(self, attrs.fields(Settings).device_driver, self.device_driver)
        if not self.lease_namespace:
            object.__setattr__(self, "lease_namespace", self.namespace)
        _dns_label(self, attrs.fields(Settings).lease_namespace, self.lease_namespace)
        if self.renew_deadline >= self.lease_duration:
            raise SettingsError("renew deadline must be shorter than the lease duration")
        if self.service_account in self.template_service_accounts:
            raise SettingsError(
                f"template-service-accounts: {self.service_account!r} is the scheduler's own "
                "ServiceAccount; a worker never runs as it")
        for name in self.template_service_accounts:
            if not _DNS_SUBDOMAIN.match(name):
                raise SettingsError(f"template-service-accounts: {name!r} is not a "
                                    "ServiceAccount name")
        object.__setattr__(self, "template_policy", TemplatePolicy(
            scheduler_account=self.service_account,
            service_accounts=self.template_service_accounts, allow=self.template_allow,
            level=self.template_pod_security))

