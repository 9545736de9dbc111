"""One attempt made as a caller, and what the API server answered.

Shared by hack/privilege.py and hack/privilege_agent.py, whose rows are all
of this one shape. The rules:

* an attempt has three expected outcomes: ``allowed``; ``refused`` (a 403 from
  the authorizer, RBAC); ``refused by admission`` (a 403 whose message names
  Pod Security admission or a ValidatingAdmissionPolicy). Any other answer is
  ``error <status>`` and never matches an expectation, so it fails the row;
* a row is good only when what the API server answered is what was expected;
  the server's message is kept with it to show why a row failed;
* the plain pod keeps to Pod Security's restricted level unless it is asked
  to be privileged, so an admission refusal of it is about privilege alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from hack.lib import kube
from hack.lib.names import API_VERSION, KIND

__all__ = ["ADMISSION", "ALLOWED", "RBAC", "Row", "attempt", "plain_pod", "row", "worker_body"]

ALLOWED, RBAC, ADMISSION = "allowed", "refused", "refused by admission"


@dataclasses.dataclass
class Row:
    who: str
    what: str
    expected: str
    got: str = ""
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.got == self.expected


def attempt(call: Callable[[], Any]) -> tuple[str, str]:
    """What the API server said to ``call``: allowed, refused (RBAC), refused by admission."""
    e = kube.refusal(call)
    if e is None:
        return ALLOWED, ""
    if e.status == 403 and ("PodSecurity" in e.message
                            or "ValidatingAdmissionPolicy" in e.message):
        return ADMISSION, e.message
    if e.status == 403:
        return RBAC, e.message
    return f"error {e.status}", e.message


def row(who: str, what: str, expected: str, call: Callable[[], Any]) -> Row:
    got, detail = attempt(call)
    return Row(who, what, expected, got, detail)


def worker_body(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": name},
            "spec": {"role": "trainer", "modelId": "probe", "memory": "10Gi", **spec}}


def plain_pod(name: str, privileged: bool = False) -> dict[str, Any]:
    context: dict[str, Any] = {"privileged": True} if privileged else {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never",
                     "securityContext": {"runAsNonRoot": True,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "c", "image": "registry.example/probe:1",
                                     "securityContext": context}]}}
