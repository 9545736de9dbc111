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
  - anything the Pod Security level the operator holds templates to
    (``baseline`` unless told ``restricted``) forbids, control by control
    (``controller.reconcile.pod_security``: host namespaces, privileged containers,
    added capabilities, hostPath, host ports, AppArmor, SELinux, ``/proc``
    mounts, seccomp, sysctls, Windows host processes; and restricted's own).
  This check is the scheduler's: it holds whether or not the namespace has
  Pod Security labels.
* An operator who needs one of these for a worker image allows it by the
  scheduler's settings (``TemplatePolicy``), per template name or ``*`` for
  all, by the control's name (``ALLOWABLE``): nothing in a worker, and
  nothing a template says about itself, widens what is allowed.
* Answers are values: ``None`` when allowed, else ``(field, message)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from controller.reconcile import pod_security

__all__ = [
    "ALLOWABLE", "DEFAULT_CAPABILITIES", "LABEL_POD_TEMPLATE", "LEVELS", "Refusal",
    "TemplatePolicy", "privilege_refusal", "unmarked_refusal",
]

Obj = dict[str, Any]
Refusal = tuple[str, str]

LABEL_POD_TEMPLATE = "openrl.io/pod-template"
LEVELS = pod_security.LEVELS
# What an operator may allow a template: the name of each Pod Security control.
ALLOWABLE = frozenset(control.name for control in pod_security.CONTROLS)
DEFAULT_CAPABILITIES = pod_security.BASELINE_CAPABILITIES
DEFAULT_ACCOUNT = "default"


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
    level: str = attrs.field(default="baseline", validator=attrs.validators.in_(LEVELS))

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


def privilege_refusal(spec: Obj, source: str, template: str, policy: TemplatePolicy,
                      metadata: Obj | None = None) -> Refusal | None:
    """The first field of a pod (``spec``, and ``metadata``'s annotations) that hands its
    worker more than the operator allows."""
    for field in ("serviceAccountName", "serviceAccount"):
        refusal = _account_refusal(spec.get(field), f"{source}: spec.{field}", policy)
        if refusal is not None:
            return refusal
    found = pod_security.violations(metadata or {}, spec, policy.level,
                                    policy.allowed(template))
    for control, (field, message) in found:
        return (f"{source}: {field}",
                f"{message}{_level(control.level)}{_how(template, control.name)}")
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


def _level(level: str) -> str:
    return "" if level == "baseline" else f" ({level} Pod Security)"


def _how(template: str, field: str) -> str:
    return (f" (an operator who needs it allows it with the scheduler's "
            f"--template-allow {template or '*'}={field})")
