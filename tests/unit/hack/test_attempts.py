"""The privilege checks' verdict on one attempt, without a cluster."""

from __future__ import annotations

from typing import Any

import pytest

from hack.lib.attempts import ADMISSION, ALLOWED, RBAC, attempt, plain_pod, row
from hack.lib.kube import KubeError


def refused(status: int, message: str) -> Any:
    def call() -> None:
        raise KubeError(status, "Forbidden", message)
    return call


@pytest.mark.parametrize(("message", "verdict"), [
    ('pods is forbidden: User "x" cannot create resource "pods"', RBAC),
    ('pods "p" is forbidden: violates PodSecurity "baseline:latest": privileged', ADMISSION),
    ("pods \"p\" is forbidden: ValidatingAdmissionPolicy 'own-node' denied request", ADMISSION),
])
def test_a_403_is_told_apart_by_who_refused_it(message: str, verdict: str) -> None:
    assert attempt(refused(403, message)) == (verdict, message)


def test_an_answer_that_is_no_refusal_fails_every_expectation() -> None:
    result = row("agent", "get a pod", RBAC, refused(404, "not found"))
    assert (result.got, result.ok) == ("error 404", False)
    assert row("agent", "get a pod", ALLOWED, lambda: None).ok


def container_context(pod: dict[str, Any]) -> Any:
    return pod["spec"]["containers"][0]["securityContext"]


def test_the_plain_pod_is_privileged_only_when_asked() -> None:
    assert container_context(plain_pod("p")) == {"allowPrivilegeEscalation": False,
                                                 "capabilities": {"drop": ["ALL"]}}
    assert container_context(plain_pod("p", privileged=True)) == {"privileged": True}
