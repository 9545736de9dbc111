"""What a pod template may hand its worker beyond running an image.

Rules:

* Templates are the operator's. A ConfigMap is a pod template only when it
  carries the label ``openrl.io/pod-template=true``; a worker naming any other
  ConfigMap is refused. Whoever creates a worker picks which template it
  names, never what a template holds.
* The scheduler creates every worker pod with its own rights, so a template
  could otherwise lend a caller those rights or the node's. A template is
  refused, with the field named, for:
  - ``serviceAccountName`` (or its old alias ``serviceAccount``) naming the
    scheduler's own ServiceAccount -- always, whatever is allowed -- or any
    ServiceAccount other than ``default`` that the operator has not allowed;
  - host namespaces: ``hostNetwork``, ``hostPID``, ``hostIPC``;
  - ``privileged`` containers, and ``capabilities`` added beyond the set a
    container runtime grants by default;
  - ``hostPath`` volumes.
* An operator who needs one of these for a worker image allows it by the
  scheduler's settings (``TemplatePolicy``), per template name or ``*`` for
  all: nothing in a worker, and nothing a template says about itself, widens
  what is allowed.
* Answers are values: ``None`` when allowed, else ``(field, message)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

__all__ = [
    "ALLOWABLE", "DEFAULT_CAPABILITIES", "LABEL_POD_TEMPLATE", "Refusal", "TemplatePolicy",
    "privilege_refusal", "unmarked_refusal",
]

Obj = dict[str, Any]
Refusal = tuple[str, str]

LABEL_POD_TEMPLATE = "openrl.io/pod-template"
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
# What an operator may allow a template, by these names.
ALLOWABLE = frozenset({*HOST_NAMESPACES, "privileged", "capabilities", "hostPath"})
# The capabilities container runtimes grant when a container asks for none (and which
# the baseline Pod Security level lets a container add back after dropping them).
DEFAULT_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
})
DEFAULT_ACCOUNT = "default"
_CONTAINER_GROUPS = ("initContainers", "containers", "ephemeralContainers")


def _freeze(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


def _freeze_allow(value: Mapping[str, Any]) -> Mapping[str, frozenset[str]]:
    return {str(k): frozenset(v) for k, v in value.items()}


@attrs.frozen(kw_only=True)
class TemplatePolicy:
    """The operator's allowances: ServiceAccounts templates may name, fields per template."""

    scheduler_account: str = "open-rl-scheduler"
    service_accounts: frozenset[str] = attrs.field(default=frozenset(), converter=_freeze)
    allow: Mapping[str, frozenset[str]] = attrs.field(factory=dict, converter=_freeze_allow)

    def allowed(self, template: str) -> frozenset[str]:
        """The fields ``template`` may set (its own entry and the ``*`` entry)."""
        return self.allow.get(template, frozenset()) | self.allow.get("*", frozenset())


def unmarked_refusal(config_map: Obj, source: str) -> Refusal | None:
    """Why ``config_map`` is not a pod template, or None when the operator marked it."""
    labels = (config_map.get("metadata") or {}).get("labels") or {}
    if labels.get(LABEL_POD_TEMPLATE) == "true":
        return None
    return (source, f"is not a pod template: the operator marks one with the label "
                    f"{LABEL_POD_TEMPLATE}=true (kubectl label configmap NAME "
                    f"{LABEL_POD_TEMPLATE}=true)")


def privilege_refusal(spec: Obj, source: str, template: str,
                      policy: TemplatePolicy) -> Refusal | None:
    """The first field of a pod ``spec`` that hands its worker more than allowed."""
    allowed = policy.allowed(template)
    for field in ("serviceAccountName", "serviceAccount"):
        refusal = _account_refusal(spec.get(field), f"{source}: spec.{field}", policy)
        if refusal is not None:
            return refusal
    for field in HOST_NAMESPACES:
        if spec.get(field) and field not in allowed:
            return (f"{source}: spec.{field}",
                    "shares the node's namespace with the worker; remove it"
                    + _how(template, field))
    for where, container in _containers(spec, source):
        context = container.get("securityContext") or {}
        if not isinstance(context, dict):
            continue
        if context.get("privileged") and "privileged" not in allowed:
            return (f"{where}.securityContext.privileged",
                    "a privileged container owns the node; remove it"
                    + _how(template, "privileged"))
        added = (context.get("capabilities") or {}).get("add") or []
        extra = sorted({str(c).upper().removeprefix("CAP_") for c in added}
                       - DEFAULT_CAPABILITIES)
        if extra and "capabilities" not in allowed:
            return (f"{where}.securityContext.capabilities.add",
                    f"adds {', '.join(extra)} beyond the runtime's defaults; remove them"
                    + _how(template, "capabilities"))
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict) and volume.get("hostPath") and "hostPath" not in allowed:
            return (f"{source}: spec.volumes[{volume.get('name', '?')}].hostPath",
                    "mounts the node's filesystem; use another volume type"
                    + _how(template, "hostPath"))
    return None


def _account_refusal(name: Any, where: str, policy: TemplatePolicy) -> Refusal | None:
    if not name or name == DEFAULT_ACCOUNT:
        return None
    if name == policy.scheduler_account:
        return (where, f"is the scheduler's own ServiceAccount {name!r}, whose rights create "
                       "pods and claims; a worker never runs as it")
    if name in policy.service_accounts:
        return None
    return (where, f"ServiceAccount {name!r} is not one the operator allows for workers "
                   "(the scheduler's --template-service-accounts)")


def _containers(spec: Obj, source: str) -> Iterator[tuple[str, Obj]]:
    for group in _CONTAINER_GROUPS:
        for container in spec.get(group) or []:
            if isinstance(container, dict):
                yield f"{source}: spec.{group}[{container.get('name', '?')}]", container


def _how(template: str, field: str) -> str:
    return (f" (an operator who needs it allows it with the scheduler's "
            f"--template-allow {template or '*'}={field})")
