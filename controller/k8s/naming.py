"""Names, labels and the other identifiers the controller stamps on objects.

Rules:

* Identity is ``metadata.name`` within an incarnation of a worker and
  ``metadata.uid`` across incarnations. Claim names derive from the UID, so a
  worker deleted and recreated under the same name never meets its
  predecessor's claim; the pod name derives from the name, so the predecessor's
  pod is found (and replaced) rather than duplicated.
* Label values carry *sanitized* identities (<= 63 characters, lower-case
  alphanumerics and '-', a hash of the whole appended when cut); environment
  variables and annotations carry the exact ones.
* Status words are defined here once: the worker's phases, the reason kinds
  its status and Events carry, and the pod phases the controller reads.
"""

from __future__ import annotations

import enum
import hashlib
import re
from typing import Any

from placement import Role, WaitKind

GROUP = "openrl.io"
VERSION = "v1alpha1"
KIND = "OpenRLWorker"
PLURAL = "openrlworkers"
API_VERSION = f"{GROUP}/{VERSION}"

FINALIZER = "openrl.io/placement"
CONTROLLER_NAME = "openrl.io/placement"

# Labels on everything we create.
LABEL_MANAGED = "openrl.io/managed"
LABEL_WORKER = "openrl.io/worker"
LABEL_ROLE = "openrl.io/role"
LABEL_CLAIM = "openrl.io/claim"
MANAGED_SELECTOR = f"{LABEL_MANAGED}=true"
# The pods that take a node's pod slots besides the workers (who are counted by their
# bookings): bound, not finished, not managed. The server filters; a pod leaving the
# selection (finished, say) comes as a deletion.
OTHER_PODS_LABELS = f"{LABEL_MANAGED}!=true"
OTHER_PODS_FIELDS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"

# The claim's shape, as labels an operator can select on.
LABEL_DEVICES = "openrl.io/devices"
LABEL_MEMORY_FLOOR = "openrl.io/memory-floor"
LABEL_MEMORY_CEILING = "openrl.io/memory-ceiling"
LABEL_SIZED_FOR = "openrl.io/sized-for-node"

# Exact values where a label would have to be sanitized.
ANNOTATION_SIZED_FOR = "openrl.io/sized-for-node"
ANNOTATION_WORKER = "openrl.io/worker"
ANNOTATION_OWNER = "openrl.io/owner"
ANNOTATION_MEMORY = "openrl.io/memory"
# On a claim: the UIDs of the workers that committed a seat on it, comma-separated.
ANNOTATION_BOOKED = "openrl.io/booked"
# On a claim: the device (driver/pool/device) it gives up, allocated to another claim too;
# set once the conflict is seen, so the claim goes even after the other one has.
ANNOTATION_GIVES_UP = "openrl.io/gives-up-device"

# Node policy, set by the operator.
NODE_ENABLED = "openrl.io/enabled"
NODE_ROLE_LABELS = {Role.TRAINER: "openrl.io/trainer", Role.SAMPLER: "openrl.io/sampler"}
NODE_MAX_WORKERS = "openrl.io/max-workers-per-claim"



class WorkerPhase(enum.StrEnum):
    """An OpenRLWorker's ``status.phase``."""

    PENDING = "Pending"  # no claim yet; the reason says why
    PLACING = "Placing"  # claim and pod exist; waiting for allocation and the pod to run
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"  # terminal: its pod completed
    FAILED = "Failed"  # terminal


# The phases a worker never leaves: it holds no seat, and its claim goes.
FINISHED_PHASES = frozenset({WorkerPhase.SUCCEEDED, WorkerPhase.FAILED})


class ReasonKind(enum.StrEnum):
    """The ``<Kind>`` of ``status.reason``, which is also the ``Placed`` condition's reason."""

    # Pending: placement's two answers, then the controller's own waits.
    NO_CAPACITY = WaitKind.NO_CAPACITY.value  # never, on this hardware
    WAITING_FOR_CAPACITY = WaitKind.WAITING_FOR_CAPACITY.value  # not yet
    WAITING_FOR_PREDECESSOR = "WaitingForPredecessor"
    TEMPLATE_NOT_FOUND = "TemplateNotFound"
    # Pending while placed again (moves.py): its node was lost, its node is not ready,
    # its pod was wedged, a device of its claim was given to another of our claims too;
    # or it was placed again too often lately and waits.
    NODE_LOST = "NodeLost"
    NODE_NOT_READY = "NodeNotReady"  # also on a placed worker whose pod waits for its node
    POD_WEDGED = "PodWedged"
    DEVICE_CONFLICT = "DeviceConflict"
    PLACED_TOO_OFTEN = "PlacedTooOften"
    # Placed, moving for efficiency (moving.py): its new seat is held for it while its
    # pod finishes its turn and goes; Pending between its two pods.
    MOVING = "Moving"
    # Pending under a team quota (admission.py): its Workload waits for Kueue to admit
    # it; or Kueue evicted it and its pod is stopped, its seat and quota handed back.
    QUEUED = "Queued"
    EVICTED = "Evicted"
    # Succeeded.
    COMPLETED = "Completed"
    # Placing: the condition's reason names the condition itself, as Kubernetes does.
    PLACED = "Placed"
    # Placing or Running, on a claim someone is deleting.
    CLAIM_DELETING = "ClaimDeleting"
    # Failed.
    INVALID_SPEC = "InvalidSpec"
    TEMPLATE_ERROR = "TemplateError"
    POD_CONFLICT = "PodConflict"
    POD_FAILED = "PodFailed"
    UNSATISFIABLE = "Unsatisfiable"
    UNSCHEDULABLE = "Unschedulable"


# Kinds recorded as Warning Events; every other kind is Normal.
WARNING_REASONS = frozenset({
    ReasonKind.NO_CAPACITY, ReasonKind.INVALID_SPEC, ReasonKind.TEMPLATE_ERROR,
    ReasonKind.TEMPLATE_NOT_FOUND, ReasonKind.POD_CONFLICT, ReasonKind.POD_FAILED,
    ReasonKind.UNSATISFIABLE, ReasonKind.UNSCHEDULABLE, ReasonKind.CLAIM_DELETING,
    ReasonKind.NODE_LOST, ReasonKind.NODE_NOT_READY, ReasonKind.POD_WEDGED,
    ReasonKind.DEVICE_CONFLICT,
    ReasonKind.PLACED_TOO_OFTEN,
})

CONDITION_PLACED = "Placed"  # the worker's one condition: True while Placing or Running


class PodPhase(enum.StrEnum):
    """A pod's ``status.phase``, as Kubernetes reports it."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


# The node-local time-slicer's contract.
LABEL_TIMESLICER = "accel-timeslicer"
LABEL_TS_GROUP = "timeslice.io/group"
LABEL_TS_OWNER = "timeslice.io/owner"
LABEL_TS_JOB = "timeslice.io/job-id"

# The worker's channel to the node's time-slicer: an emptyDir in every worker pod, mounted
# in every container, in which the node agent binds the pod's own socket.
TURN_VOLUME = "openrl-turn"
TURN_MOUNT_PATH = "/run/openrl-turn"
TURN_SOCKET = f"{TURN_MOUNT_PATH}/turn.sock"
ENV_TURN_SOCKET = "OPENRL_TURN_SOCKET"
# The agent's word on a worker pod's turn (compact JSON), read by explain.
ANNOTATION_TURN = "timeslice.io/turn"
# A move at a turn's boundary: the scheduler asks the node's time-slicer to drain a worker
# pod (any non-empty value); the agent answers, once the worker is parked for good (or was
# evicted for silence), with the time (RFC 3339), in the same write as its turn annotation.
ANNOTATION_DRAIN = "openrl.io/drain"
ANNOTATION_DRAINED = "openrl.io/drained"

# Team quotas through Kueue (controller.reconcile.admission): a worker carrying the queue
# label is placed only once Kueue admits the Workload written for it; the priority label
# names a WorkloadPriorityClass. Kueue's own keys, read as Kueue's jobs carry them.
LABEL_QUEUE = "kueue.x-k8s.io/queue-name"
LABEL_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
LABEL_JOB_UID = "kueue.x-k8s.io/job-uid"
# What a Workload's one pod requests: the worker's memory estimate, which its team's
# ClusterQueue covers (a quota of accelerator memory, whatever sharing makes of it).
ACCELERATOR_MEMORY = "openrl.io/accelerator-memory"

ENV_GROUP = "OPEN_RL_TIME_SLICE_GROUP"
ENV_OWNER = "OPEN_RL_TIME_SLICE_OWNER"
ENV_JOB = "OPEN_RL_TIME_SLICE_JOB_ID"
ENV_MODEL = "OPEN_RL_MODEL_ID"
STAMPED_ENV = (ENV_GROUP, ENV_OWNER, ENV_JOB, ENV_MODEL)

CLAIM_REQUEST = "gpu"  # the device request inside the claim and the pod's claim reference
WORKER_CONTAINER = "worker"
DEFAULT_TEMPLATE_KEY = "pod.yaml"

LABEL_VALUE_MAX = 63
OBJECT_NAME_MAX = 253
_HASH_LEN = 8

_NOT_LABEL_CHAR = re.compile(r"[^a-z0-9-]+")


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH_LEN]


def label_value(text: str) -> str:
    """``text`` as a label value: lower-case alphanumerics and '-', at most 63 characters.

    Characters outside the alphabet become '-'; a value that had to be cut keeps
    a hash of the whole so two long names that share a prefix stay distinct.
    """
    value = _NOT_LABEL_CHAR.sub("-", text.lower()).strip("-")
    if len(value) <= LABEL_VALUE_MAX and value:
        return value
    digest = short_hash(text)
    head = value[: LABEL_VALUE_MAX - _HASH_LEN - 1].rstrip("-")
    return f"{head}-{digest}" if head else digest


def template_name(role: str) -> str:
    """The default pod-template ConfigMap of a role."""
    return f"openrl-template-{role}"


def pod_name(worker: str) -> str:
    """``orw-<worker>``; a name over 253 characters is cut and keeps a hash of the whole."""
    name = f"orw-{worker}"
    if len(name) <= OBJECT_NAME_MAX:
        return name
    head = name[: OBJECT_NAME_MAX - _HASH_LEN - 1].rstrip("-.")
    return f"{head}-{short_hash(name)}"


def claim_name(worker: str, worker_uid: str) -> str:
    """The claim a worker incarnation cuts: ``orw-<worker>-<uid>``.

    The UID makes it this incarnation's own: a recreated worker never collides
    with, nor adopts, its predecessor's claim. The worker's name in front makes
    claims sort as the simulator's ``claim-<worker>`` do, so where the decision
    breaks a tie between claims by name, the cluster and ``simulate`` pick the
    same one. A name too long is cut; the UID is always kept whole.
    """
    tail = f"-{worker_uid}"
    return f"orw-{worker}"[: OBJECT_NAME_MAX - len(tail)].rstrip("-.") + tail


def claim_names(worker: str, worker_uid: str) -> tuple[str, str]:
    """The two claims a worker incarnation may cut: ``claim_name``, and the same with
    ``-2`` after the UID. A move holds its new seat before it gives the old one back,
    so a worker that moves off the claim cut for it (others stay on it) cuts the
    other name; at most two claims are ever cut for one incarnation at once, and
    both names are known without reading anything (the sweep spares them)."""
    return claim_name(worker, worker_uid), claim_name(worker, f"{worker_uid}-2")


def workload_name(worker: str, worker_uid: str) -> str:
    """The Kueue Workload a worker incarnation queues with: ``openrlworker-<worker>-<hash>``,
    the hash over the name and UID (a recreated worker queues afresh). Cut as a pod's is."""
    name = f"openrlworker-{worker}"[: OBJECT_NAME_MAX - 6].rstrip("-.")
    return f"{name}-{short_hash(f'{worker}/{worker_uid}')[:5]}"


def owner_reference(worker: dict[str, Any]) -> dict[str, Any]:
    meta = worker["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
