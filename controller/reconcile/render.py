"""The worker pod: template + overlay, then the stamps placement owns.

Rules:

* A template is a Pod manifest (``metadata`` + ``spec``) or a bare pod spec.
  Only its labels and annotations survive from its metadata; the name,
  namespace and owner are ours.
* The worker container is the one named ``worker``, or the only container.
* A template (or overlay) that sets a placement-owned field is refused with a
  ``TemplateError`` naming the field: ``spec.nodeName``,
  ``spec.nodeSelector``, ``spec.affinity``, ``spec.resourceClaims``,
  ``resources.claims`` of any container (or the pod), extended-resource
  requests or limits (a name with a domain, such as ``nvidia.com/gpu``), and
  the ``OPEN_RL_TIME_SLICE_GROUP`` env var. Placement decides where the pod
  runs and what it holds; a template that also decides would collide with it.
* A template is also refused for what would hand its worker more than running
  an image needs (``controller.reconcile.privileges``: the scheduler's ServiceAccount,
  and every control of the Pod Security level the operator holds templates
  to, the template's annotations included), unless the operator's policy
  allows that control for that template.
* Overlay: ``image`` replaces, ``command`` replaces, ``args`` append, ``env``
  merges by name (an overlay entry replaces the template's entry of that name).
  That is all an overlay can say: an env entry is a name and a literal value
  (never a reference to a Secret or a field), and any other key is refused --
  the worker is the caller's, and the caller sets nothing that changes what
  the pod may reach.
* Stamps: the ``gpu`` claim reference and its consumption by the worker
  container, a controller owner reference to the worker, node affinity as two
  ORed terms each also requiring the node placement chose, sanitized identity
  labels, exact identity env vars and annotations.
* The time-slicer's channel: every worker pod gets the ``openrl-turn`` emptyDir,
  mounted at ``/run/openrl-turn`` in every container (init containers too), and
  ``OPENRL_TURN_SOCKET`` naming the socket in it; the node agent binds that
  socket from the node's side, so whoever connects is the pod. A template that
  already has a volume of that name, a mount at that path (or under it) or that
  env var is refused: a second meaning for either would break the channel.
* The pod is pinned to the chosen node: kube-scheduler and DRA carry the
  decision out rather than re-make it, so the claim is allocated where its
  devices and host memory were counted.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import yaml

from controller.k8s import naming
from controller.k8s.objects import Obj, Worker
from controller.reconcile.privileges import TemplatePolicy, privilege_refusal
from placement import Role

POD_FIELDS_OWNED = ("nodeName", "nodeSelector", "affinity", "resourceClaims")
OVERLAY_FIELDS = ("image", "command", "args", "env")
OVERLAY_ENV_FIELDS = ("name", "value")
DEFAULT_POLICY = TemplatePolicy()


class TemplateError(ValueError):
    """A template the controller refuses; ``field`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@functools.lru_cache(maxsize=32)
def _load(text: str) -> Any:
    """A template's YAML, read once per text: every decision renders a pod from its
    role's template, and reading the YAML again cost more than the rest of a decision.
    Callers copy what they keep (``parse_template`` does)."""
    return yaml.safe_load(text)


def parse_template(text: str, source: str) -> Obj:
    """The pod skeleton (``metadata`` + ``spec``) in a template's YAML text."""
    try:
        doc = _load(text)
    except yaml.YAMLError as exc:
        raise TemplateError(source, f"not valid YAML ({_first_line(exc)})") from exc
    if not isinstance(doc, dict):
        raise TemplateError(source, "must be a Pod manifest or a pod spec (a mapping)")
    if "spec" in doc:
        kind = doc.get("kind")
        if kind not in (None, "Pod"):
            raise TemplateError(f"{source}: kind", f"must be Pod, not {kind!r}")
        metadata, spec = doc.get("metadata") or {}, doc.get("spec")
    else:
        metadata, spec = {}, doc
    if not isinstance(spec, dict) or not isinstance(metadata, dict):
        raise TemplateError(f"{source}: spec", "must be a mapping")
    if not isinstance(spec.get("containers"), list) or not spec["containers"]:
        raise TemplateError(f"{source}: spec.containers", "must list at least one container")
    return {
        "metadata": {
            "labels": dict(metadata.get("labels") or {}),
            "annotations": dict(metadata.get("annotations") or {}),
        },
        "spec": copy.deepcopy(spec),
    }


def worker_container_index(spec: Obj, source: str) -> int:
    containers = spec.get("containers") or []
    names = [c.get("name") if isinstance(c, dict) else None for c in containers]
    if naming.WORKER_CONTAINER in names:
        return names.index(naming.WORKER_CONTAINER)
    if len(containers) == 1 and isinstance(containers[0], dict):
        return 0
    raise TemplateError(
        f"{source}: spec.containers",
        f"name one container {naming.WORKER_CONTAINER!r} (found {names})",
    )


def validate_template(pod: Obj, source: str) -> None:
    """Refuse a template that sets a field placement owns; the error names the field."""
    spec = pod["spec"]
    for field in POD_FIELDS_OWNED:
        if spec.get(field):
            raise TemplateError(f"{source}: spec.{field}", "is set by placement; remove it")
    if (spec.get("resources") or {}).get("claims"):
        raise TemplateError(f"{source}: spec.resources.claims", "is set by placement; remove it")
    for group in ("initContainers", "containers", "ephemeralContainers"):
        containers = spec.get(group) or []
        if not isinstance(containers, list):
            raise TemplateError(f"{source}: spec.{group}", "must be a list")
        for container in containers:
            if not isinstance(container, dict):
                raise TemplateError(f"{source}: spec.{group}", "entries must be mappings")
            where = f"{source}: spec.{group}[{container.get('name', '?')}]"
            _validate_container(container, where)
    _validate_turn_channel(spec, source)


def _validate_turn_channel(spec: Obj, source: str) -> None:
    """Refuse a template that already uses the time-slicer channel's volume, path or env."""
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict) and volume.get("name") == naming.TURN_VOLUME:
            raise TemplateError(f"{source}: spec.volumes[{naming.TURN_VOLUME}]",
                                "is the time-slicer's channel, set by placement; rename it")
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(group) or []:
            where = f"{source}: spec.{group}[{container.get('name', '?')}]"
            for mount in container.get("volumeMounts") or []:
                if not isinstance(mount, dict):
                    continue
                path = str(mount.get("mountPath", "")).rstrip("/")
                if (path == naming.TURN_MOUNT_PATH
                        or path.startswith(naming.TURN_MOUNT_PATH + "/")
                        or mount.get("name") == naming.TURN_VOLUME):
                    raise TemplateError(
                        f"{where}.volumeMounts[{mount.get('name', '?')}]",
                        f"{naming.TURN_MOUNT_PATH} and the volume {naming.TURN_VOLUME!r} are "
                        "the time-slicer's channel, set by placement; mount elsewhere")
            for entry in container.get("env") or []:
                if isinstance(entry, dict) and entry.get("name") == naming.ENV_TURN_SOCKET:
                    raise TemplateError(f"{where}.env[{naming.ENV_TURN_SOCKET}]",
                                        "is set by placement (the time-slicer's socket); remove it")


def _validate_container(container: Obj, where: str) -> None:
    resources = container.get("resources") or {}
    if resources.get("claims"):
        raise TemplateError(f"{where}.resources.claims", "is set by placement; remove it")
    for kind in ("requests", "limits"):
        for resource in resources.get(kind) or {}:
            if "/" in str(resource):
                raise TemplateError(
                    f"{where}.resources.{kind}[{resource}]",
                    "extended resources collide with the DRA claim placement cuts; remove it",
                )
    for entry in container.get("env") or []:
        if isinstance(entry, dict) and entry.get("name") == naming.ENV_GROUP:
            raise TemplateError(f"{where}.env[{naming.ENV_GROUP}]",
                                "is set by placement (the worker's claim); remove it")


def apply_overlay(pod: Obj, overlay: Obj, source: str) -> Obj:
    """The worker's ``spec.container`` onto the worker container (a new dict)."""
    for key in overlay:
        if key not in OVERLAY_FIELDS:
            raise TemplateError(f"spec.container.{key}",
                                f"is not an overlay field (only {', '.join(OVERLAY_FIELDS)})")
    pod = copy.deepcopy(pod)
    containers = pod["spec"]["containers"]
    index = worker_container_index(pod["spec"], source)
    container = containers[index]
    if overlay.get("image"):
        container["image"] = overlay["image"]
    if overlay.get("command"):
        container["command"] = list(overlay["command"])
    if overlay.get("args"):
        container["args"] = list(container.get("args") or []) + list(overlay["args"])
    entries = overlay.get("env") or []
    for entry in entries:
        if not isinstance(entry, dict) or not entry.get("name"):
            raise TemplateError("spec.container.env", "every entry needs a name")
        for key in entry:
            if key not in OVERLAY_ENV_FIELDS:
                raise TemplateError(f"spec.container.env[{entry['name']}].{key}",
                                    "an overlay env entry is a name and a literal value")
        if entry["name"] == naming.ENV_GROUP:
            raise TemplateError(f"spec.container.env[{naming.ENV_GROUP}]",
                                "is set by placement (the worker's claim); remove it")
        if entry["name"] == naming.ENV_TURN_SOCKET:
            raise TemplateError(f"spec.container.env[{naming.ENV_TURN_SOCKET}]",
                                "is set by placement (the time-slicer's socket); remove it")
    if entries:
        container["env"] = merge_env(container.get("env") or [], entries)
    if not container.get("image"):
        raise TemplateError(
            f"{source}: spec.containers[{container.get('name', '?')}].image",
            "is empty and the worker's spec.container.image does not set it",
        )
    return pod


def merge_env(env: list[Obj], entries: list[Obj]) -> list[Obj]:
    """``entries`` merged into ``env`` by name, in one pass: an entry replaces the one of
    its name where it stands, a new name is appended, the last of repeated names wins.
    (An overlay may carry thousands of entries; a pass per entry would stall the loop.)"""
    merged = [dict(e) for e in env]
    where: dict[Any, int] = {}
    for i, e in enumerate(merged):
        where.setdefault(e.get("name"), i)
    for entry in entries:
        index = where.get(entry["name"])
        if index is None:
            where[entry["name"]] = len(merged)
            merged.append(dict(entry))
        else:
            merged[index] = dict(entry)
    return merged


def prepare(text: str, worker: Worker, source: str,
            policy: TemplatePolicy = DEFAULT_POLICY) -> Obj:
    """Parse, validate and overlay a template: everything checkable before placement.

    ``policy`` is the operator's: what templates may hand their workers.
    """
    pod = parse_template(text, source)
    worker_container_index(pod["spec"], source)
    validate_template(pod, source)
    refusal = privilege_refusal(pod["spec"], source, worker.template_name, policy,
                                metadata=pod.get("metadata"))
    if refusal is not None:
        raise TemplateError(*refusal)
    return apply_overlay(pod, worker.overlay, source)


def node_affinity(role: Role, node: str) -> Obj:
    """Two ORed terms: enabled AND this role's label; or enabled AND neither role label.

    A node selector cannot say "labelled for this role, or not labelled at
    all", and a node naming no role accepts both: without the second term the
    documented default would be unschedulable. Each term also requires
    ``node`` by name (terms are ORed, so a pin in only one would not pin);
    an empty ``node`` (a claim that never said where it was sized) pins
    nothing.
    """
    enabled = {"key": naming.NODE_ENABLED, "operator": "In", "values": ["true"]}
    pin = ({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
           if node else {})
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [
                        enabled,
                        {"key": naming.NODE_ROLE_LABELS[role], "operator": "In",
                         "values": ["true"]},
                    ], **pin},
                    {"matchExpressions": [
                        enabled,
                        *({"key": label, "operator": "DoesNotExist"}
                          for label in naming.NODE_ROLE_LABELS.values()),
                    ], **pin},
                ]
            }
        }
    }


def identity_labels(worker: Worker, claim: str) -> dict[str, str]:
    return {
        naming.LABEL_MANAGED: "true",
        naming.LABEL_WORKER: naming.label_value(worker.name),
        naming.LABEL_ROLE: worker.role.value,
        naming.LABEL_CLAIM: naming.label_value(claim),
        naming.LABEL_TIMESLICER: "true",
        naming.LABEL_TS_GROUP: naming.label_value(claim),
        naming.LABEL_TS_OWNER: naming.label_value(worker.owner),
        naming.LABEL_TS_JOB: naming.label_value(worker.name),
    }


def identity_env(worker: Worker, claim: str) -> list[Obj]:
    return [
        {"name": naming.ENV_GROUP, "value": claim},
        {"name": naming.ENV_OWNER, "value": worker.owner},
        {"name": naming.ENV_JOB, "value": worker.name},
        {"name": naming.ENV_MODEL, "value": worker.model_id},
    ]


def stamp(prepared: Obj, worker: Worker, claim: str, namespace: str, node: str) -> Obj:
    """The pod to create: a prepared template with every placement-owned field set.

    ``node`` is the node placement chose for the claim (where it is allocated,
    or the node it was sized for); the pod may run nowhere else.
    """
    pod: dict[str, Any] = copy.deepcopy(prepared)
    labels = {**prepared["metadata"].get("labels", {}), **identity_labels(worker, claim)}
    annotations = {
        **prepared["metadata"].get("annotations", {}),
        naming.ANNOTATION_WORKER: worker.name,
        naming.ANNOTATION_OWNER: worker.owner,
        naming.ANNOTATION_MEMORY: str(worker.memory),
    }
    pod["apiVersion"] = "v1"
    pod["kind"] = "Pod"
    pod["metadata"] = {
        "name": worker.pod_name,
        "namespace": namespace,
        "labels": labels,
        "annotations": annotations,
        "ownerReferences": [naming.owner_reference(worker.obj)],
    }
    spec = pod["spec"]
    spec["resourceClaims"] = [{"name": naming.CLAIM_REQUEST, "resourceClaimName": claim}]
    spec["affinity"] = node_affinity(worker.role, node)
    container = spec["containers"][worker_container_index(spec, "template")]
    resources = container.setdefault("resources", {})
    resources["claims"] = [{"name": naming.CLAIM_REQUEST}]
    env = [e for e in container.get("env") or [] if e.get("name") not in naming.STAMPED_ENV]
    container["env"] = env + identity_env(worker, claim)
    stamp_turn_channel(spec)
    return pod


def stamp_turn_channel(spec: Obj) -> None:
    """The time-slicer's emptyDir, its mount in every container and the socket's env var."""
    spec["volumes"] = [*(spec.get("volumes") or []),
                       {"name": naming.TURN_VOLUME, "emptyDir": {}}]
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            container["volumeMounts"] = [
                *(container.get("volumeMounts") or []),
                {"name": naming.TURN_VOLUME, "mountPath": naming.TURN_MOUNT_PATH}]
            container["env"] = [*(container.get("env") or []),
                                {"name": naming.ENV_TURN_SOCKET, "value": naming.TURN_SOCKET}]


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
