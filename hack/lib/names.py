"""The names the testbed looks for on the cluster, declared once.

The first group repeats what the controller defines (controller/k8s/naming.py,
controller/reconcile/privileges.py, the manifests) on purpose: the books
(hack/lib/books.py), the invariants (hack/lib/invariants.py) and the chaos,
privilege and fuzz checks audit the controller, so they spell its names
themselves rather than import them -- a label renamed in the controller must
make the audit fail, not follow along unseen. tests/unit/hack/test_names.py
compares each with the controller's, so a rename on either side is caught.
Scripts that run the controller itself (hack/burst.py, hack/replay.py) import
``controller.k8s.naming`` instead.

The second group is the testbed's own.
"""

from __future__ import annotations

__all__ = [
    "API_VERSION", "DRAIN", "DRAINED", "FAKE_NODE_LABEL", "FINALIZER", "GATEWAY",
    "GATEWAY_ROLE", "GROUP", "KIND", "LABEL_MANAGED", "LABEL_POD_TEMPLATE", "LABEL_WORKER",
    "MANAGED_SELECTOR", "NAMESPACE",
    "NODE_ENABLED", "NODE_MAX_WORKERS", "PLURAL", "RUN_LABEL", "SCHEDULER", "SIZED_FOR",
    "VERSION", "pod_name", "template_name",
]

# ---- the controller's, as the checkers spell them (see above)
GROUP, VERSION, PLURAL, KIND = "openrl.io", "v1alpha1", "openrlworkers", "OpenRLWorker"
API_VERSION = f"{GROUP}/{VERSION}"
FINALIZER = "openrl.io/placement"
LABEL_MANAGED = "openrl.io/managed"
MANAGED_SELECTOR = f"{LABEL_MANAGED}=true"
LABEL_WORKER = "openrl.io/worker"
SIZED_FOR = "openrl.io/sized-for-node"  # the claim's annotation: the node it was sized for
DRAIN = "openrl.io/drain"  # the scheduler asks the node's agent to retire a pod
DRAINED = "openrl.io/drained"  # the agent says it has: parked, granted no more
NODE_ENABLED = "openrl.io/enabled"
NODE_MAX_WORKERS = "openrl.io/max-workers-per-claim"
LABEL_POD_TEMPLATE = "openrl.io/pod-template"  # marks a ConfigMap workers may name
NAMESPACE = "openrl"  # manifests/base
SCHEDULER = "open-rl-scheduler"  # its ServiceAccount (and ClusterRole, Role, Deployment)
GATEWAY_ROLE = "openrl-place-gateway"  # the Role the README binds a gateway to


def pod_name(worker: str) -> str:
    """A worker's pod (names short enough never to be cut)."""
    return f"orw-{worker}"


def template_name(role: str) -> str:
    """A role's default pod-template ConfigMap."""
    return f"openrl-template-{role}"


# ---- the testbed's own
RUN_LABEL = "e2e.openrl.io/run"  # marks the workers a hack script created
FAKE_NODE_LABEL = "fake-gpu-node"  # on every node hack/fakenodes plays
GATEWAY = "rl-gateway"  # the gateway's ServiceAccount in hack/lib/install.py
