"""Read-only views over the API objects the controller handles as plain dicts.

Rules:

* Objects stay the JSON dicts the API server sent; these helpers only read.
* A worker's spec is checked here once (role, modelId, memory, exclusive, devices,
  movable); a spec the controller cannot act on becomes ``spec_error`` (reported
  as InvalidSpec), never an exception.
* A pod is "alive" until its phase is Succeeded or Failed: until then its
  process may hold a device.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs

from controller.k8s import naming
from placement import Request, Role
from placement.quantity import QuantityError, parse_quantity

Obj = dict[str, Any]

TERMINAL_POD_PHASES = (naming.PodPhase.SUCCEEDED, naming.PodPhase.FAILED)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ROLES = {role.value: role for role in Role}


def parse_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def format_time(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def name_of(obj: Obj) -> str:
    return str(meta(obj).get("name", ""))


def uid_of(obj: Obj) -> str:
    return str(meta(obj).get("uid", ""))


def version_of(obj: Obj) -> str:
    """The object's resourceVersion as read ('' when it has none): a delete's precondition."""
    return str(meta(obj).get("resourceVersion") or "")


def labels_of(obj: Obj) -> dict[str, str]:
    return meta(obj).get("labels") or {}


def annotations_of(obj: Obj) -> dict[str, str]:
    return meta(obj).get("annotations") or {}


def created_at(obj: Obj) -> dt.datetime:
    return parse_time(meta(obj).get("creationTimestamp")) or EPOCH


def is_deleting(obj: Obj) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def age_order(obj: Obj) -> tuple[str, str]:
    """Oldest arrival first: creation time, then name (the tie-break)."""
    return format_micro_time(created_at(obj)), name_of(obj)


@attrs.frozen
class Worker:
    """An OpenRLWorker, with its spec checked once."""

    obj: Obj
    name: str
    uid: str
    generation: int
    role: Role  # a placeholder when spec_error says the spec's role is not one
    model_id: str
    owner: str
    memory: int
    estimator_version: str
    template_name: str
    template_key: str
    overlay: Obj
    spec_error: str | None
    exclusive: bool = False  # runs alone: never joins a claim, and no one joins its claim
    # spec.devices: exactly this many devices, each holding memory / devices; None: as
    # many as its memory needs. Never joins a claim.
    devices: int | None = None
    # spec.movable: it may be stopped and started again elsewhere (moved for efficiency).
    movable: bool = False

    @classmethod
    def from_obj(cls, obj: Obj) -> Worker:
        spec = obj.get("spec") or {}
        name = name_of(obj)
        errors: list[str] = []
        role = _ROLES.get(spec.get("role"))  # type: ignore[arg-type]  # any JSON value
        if role is None:
            errors.append(f"spec.role {spec.get('role')!r} is not trainer or sampler")
        model_id = spec.get("modelId")
        if not isinstance(model_id, str) or not model_id:
            errors.append("spec.modelId must be a non-empty string")
            model_id = ""
        try:
            memory = parse_quantity(spec.get("memory"))
        except QuantityError as exc:
            errors.append(f"spec.memory: {exc}")
            memory = 0
        template = spec.get("podTemplate") or {}
        overlay = spec.get("container") or {}
        if not isinstance(template, dict):
            errors.append("spec.podTemplate must be an object")
            template = {}
        if not isinstance(overlay, dict):
            errors.append("spec.container must be an object")
            overlay = {}
        exclusive = _flag(spec, "exclusive", errors)
        movable = _flag(spec, "movable", errors)
        devices = spec.get("devices")
        if devices is not None and (type(devices) is not int or devices < 1):
            # The CRD's schema refuses these; a spec written before it, or an API server
            # that skipped it, still gets a clear status rather than a guess.
            errors.append(f"spec.devices {devices!r} is not a whole number of at least 1")
            devices = None
        return cls(
            obj=obj,
            name=name,
            uid=uid_of(obj),
            generation=int(meta(obj).get("generation") or 0),
            role=role or Role.TRAINER,
            model_id=model_id,
            owner=str(spec.get("ownerId") or "") or name,
            memory=memory,
            estimator_version=str(spec.get("estimatorVersion") or ""),
            template_name=str(template.get("name") or naming.template_name(role or Role.TRAINER)),
            template_key=str(template.get("key") or naming.DEFAULT_TEMPLATE_KEY),
            overlay=overlay,
            spec_error="; ".join(errors) or None,
            exclusive=exclusive,
            devices=devices,
            movable=movable,
        )

    @property
    def request(self) -> Request:
        """The worker as placement asks about it."""
        return Request(self.name, self.role, self.memory, self.owner, self.exclusive,
                       self.devices, self.movable)

    @property
    def status(self) -> Obj:
        return self.obj.get("status") or {}

    @property
    def phase(self) -> str:
        return str(self.status.get("phase") or "")

    @property
    def claim(self) -> str:
        return str(self.status.get("claimName") or "")

    @property
    def deleting(self) -> bool:
        return is_deleting(self.obj)

    @property
    def finalizers(self) -> list[str]:
        return list(meta(self.obj).get("finalizers") or [])

    @property
    def created(self) -> dt.datetime:
        return created_at(self.obj)

    @property
    def pod_name(self) -> str:
        return naming.pod_name(self.name)

    @property
    def own_claim(self) -> str:
        return naming.claim_name(self.name, self.uid)

    @property
    def own_claims(self) -> tuple[str, str]:
        """Both names a claim cut for this worker may bear (``naming.claim_names``)."""
        return naming.claim_names(self.name, self.uid)


def _flag(spec: Obj, key: str, errors: list[str]) -> bool:
    """A boolean field of a worker's spec (absent: false); anything else is a spec error."""
    value = spec.get(key, False)
    if isinstance(value, bool):
        return value
    errors.append(f"spec.{key} {value!r} is not true or false")
    return False


def controller_owner(obj: Obj) -> Obj | None:
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def worker_owner_uid(pod: Obj) -> str:
    """UID of the OpenRLWorker controlling ``pod``, or ''."""
    ref = controller_owner(pod)
    if ref and ref.get("kind") == naming.KIND and str(ref.get("apiVersion", "")).startswith(
        naming.GROUP + "/"
    ):
        return str(ref.get("uid", ""))
    return ""


def pod_claim(pod: Obj) -> str:
    """The claim the pod consumes through its ``gpu`` claim reference ('' if none)."""
    for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
        if ref.get("name") == naming.CLAIM_REQUEST and ref.get("resourceClaimName"):
            return str(ref["resourceClaimName"])
    return ""


def pod_claims(pod: Obj) -> set[str]:
    """Every claim a pod names, whatever the reference is called."""
    return {
        str(ref["resourceClaimName"])
        for ref in (pod.get("spec") or {}).get("resourceClaims") or []
        if ref.get("resourceClaimName")
    }


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or naming.PodPhase.PENDING)


def pod_alive(pod: Obj) -> bool:
    return pod_phase(pod) not in TERMINAL_POD_PHASES


def pod_node(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def pod_condition(pod: Obj, kind: str) -> Obj | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def pod_failure(pod: Obj) -> str:
    """Why a terminated pod ended, from its status and its containers' states."""
    status = pod.get("status") or {}
    parts = [f"pod {name_of(pod)} {pod_phase(pod)}"]
    if status.get("reason") or status.get("message"):
        parts.append(": ".join(p for p in (status.get("reason"), status.get("message")) if p))
    for container in status.get("containerStatuses") or []:
        term = (container.get("state") or {}).get("terminated")
        if term:
            detail = f"container {container.get('name')} exited {term.get('exitCode')}"
            if term.get("reason"):
                detail += f" ({term['reason']})"
            parts.append(detail)
    return "; ".join(parts)
