"""Every Pod Security control, case by case: one template breaking it, one keeping it.

The cases start from the shipped trainer template (which meets restricted) and
change one thing each. ``CASES`` is shared with tests/e2e/test_pod_security.py,
which asks the API server's own admission about the same pods.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.reconcile.pod_security import CONTROLS, LEVELS
from controller.reconcile.privileges import ALLOWABLE, TemplatePolicy, privilege_refusal
from controller.settings import Settings, SettingsError

ROOT = Path(__file__).resolve().parents[4]
Obj = dict[str, Any]


def base_templates() -> dict[str, Obj]:
    """The shipped templates' pods, by ConfigMap name."""
    docs = yaml.safe_load_all((ROOT / "manifests/base/pod-templates.yaml").read_text())
    return {d["metadata"]["name"]: yaml.safe_load(d["data"]["pod.yaml"]) for d in docs}


BASE = base_templates()["openrl-template-trainer"]


@dataclasses.dataclass(frozen=True)
class Case:
    """``refused`` breaks ``control`` (refused from ``level`` up); ``allowed`` keeps it."""

    name: str
    control: str
    level: str
    refused: Callable[[Obj], None] | None
    allowed: Callable[[Obj], None]
    field: str = ""  # the field the refusal names, below ``cm: ``
    needs: frozenset[str] = frozenset()  # what else the refused form breaks, by necessity

    def pod(self, form: str) -> Obj:
        pod = copy.deepcopy(BASE)
        change = self.refused if form == "refused" else self.allowed
        if change is not None:
            change(pod)
        return pod


def _spec(**fields: Any) -> Callable[[Obj], None]:
    return lambda pod: pod["spec"].update(fields)


def _pod_context(**fields: Any) -> Callable[[Obj], None]:
    return lambda pod: pod["spec"]["securityContext"].update(fields)


def _context(**fields: Any) -> Callable[[Obj], None]:
    return lambda pod: pod["spec"]["containers"][0]["securityContext"].update(fields)


def _container(**fields: Any) -> Callable[[Obj], None]:
    return lambda pod: pod["spec"]["containers"][0].update(fields)


def _annotate(key: str, value: str) -> Callable[[Obj], None]:
    return lambda pod: pod["metadata"].setdefault("annotations", {}).update({key: value})


def _drop(key: str) -> Callable[[Obj], None]:
    return lambda pod: pod["spec"]["securityContext"].pop(key)


def _volume(**source: Any) -> Callable[[Obj], None]:
    def change(pod: Obj) -> None:
        pod["spec"]["volumes"] = [{"name": "data", **source}]
        pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return change


def _both(first: Callable[[Obj], None], then: Callable[[Obj], None]) -> Callable[[Obj], None]:
    return lambda pod: (first(pod), then(pod))[1]


def _nothing(_pod: Obj) -> None:
    pass


W = "spec.containers[worker]"
CASES = (
    Case("host network", "hostNetwork", "baseline", _spec(hostNetwork=True),
         _spec(hostNetwork=False), "spec.hostNetwork"),
    Case("host PID", "hostPID", "baseline", _spec(hostPID=True), _spec(hostPID=False),
         "spec.hostPID"),
    Case("host IPC", "hostIPC", "baseline", _spec(hostIPC=True), _spec(hostIPC=False),
         "spec.hostIPC"),
    Case("Windows host process", "hostProcess", "baseline",
         _both(_spec(hostNetwork=True), _pod_context(windowsOptions={"hostProcess": True})),
         _pod_context(windowsOptions={"hostProcess": False}),
         "spec.securityContext.windowsOptions.hostProcess", frozenset({"hostNetwork"})),
    # The API server itself refuses a privileged container that forbids escalation.
    Case("privileged", "privileged", "baseline",
         _context(privileged=True, allowPrivilegeEscalation=True),
         _context(privileged=False), f"{W}.securityContext.privileged",
         frozenset({"allowPrivilegeEscalation"})),
    Case("capability SYS_ADMIN", "capabilities", "baseline",
         _context(capabilities={"drop": ["ALL"], "add": ["SYS_ADMIN"]}),
         _context(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}),
         f"{W}.securityContext.capabilities.add"),
    Case("capability spelt chown", "capabilities", "baseline",
         _context(capabilities={"drop": ["ALL"], "add": ["chown"]}),
         _context(capabilities={"drop": ["ALL"]}), f"{W}.securityContext.capabilities.add"),
    Case("hostPath volume", "hostPath", "baseline", _volume(hostPath={"path": "/"}),
         _volume(emptyDir={}), "spec.volumes[data].hostPath"),
    Case("host port", "hostPorts", "baseline",
         _container(ports=[{"name": "http", "containerPort": 8080, "hostPort": 8080}]),
         _container(ports=[{"name": "http", "containerPort": 8080}]),
         f"{W}.ports[http].hostPort"),
    Case("AppArmor annotation unconfined", "appArmor", "baseline",
         _annotate("container.apparmor.security.beta.kubernetes.io/worker", "unconfined"),
         _annotate("container.apparmor.security.beta.kubernetes.io/worker", "runtime/default"),
         "metadata.annotations[container.apparmor.security.beta.kubernetes.io/worker]"),
    Case("AppArmor pod profile Unconfined", "appArmor", "baseline",
         _pod_context(appArmorProfile={"type": "Unconfined"}),
         _pod_context(appArmorProfile={"type": "RuntimeDefault"}),
         "spec.securityContext.appArmorProfile.type"),
    Case("AppArmor container profile Unconfined", "appArmor", "baseline",
         _context(appArmorProfile={"type": "Unconfined"}),
         _context(appArmorProfile={"type": "RuntimeDefault"}),
         f"{W}.securityContext.appArmorProfile.type"),
    Case("SELinux type spc_t", "seLinux", "baseline",
         _context(seLinuxOptions={"type": "spc_t"}),
         _context(seLinuxOptions={"type": "container_t", "level": "s0:c1,c2"}),
         f"{W}.securityContext.seLinuxOptions.type"),
    Case("SELinux user", "seLinux", "baseline",
         _pod_context(seLinuxOptions={"user": "system_u"}),
         _pod_context(seLinuxOptions={"level": "s0:c1,c2"}),
         "spec.securityContext.seLinuxOptions.user"),
    Case("/proc mount Unmasked", "procMount", "baseline", _context(procMount="Unmasked"),
         _context(procMount="Default"), f"{W}.securityContext.procMount"),
    Case("/proc mount Unmasked, own user namespace", "procMount", "restricted",
         _both(_spec(hostUsers=False), _context(procMount="Unmasked")),
         _both(_spec(hostUsers=False), _context(procMount="Default")),
         f"{W}.securityContext.procMount"),
    Case("seccomp pod Unconfined", "seccomp", "baseline",
         _pod_context(seccompProfile={"type": "Unconfined"}),
         _pod_context(seccompProfile={"type": "RuntimeDefault"}),
         "spec.securityContext.seccompProfile.type"),
    Case("seccomp container Unconfined", "seccomp", "baseline",
         _context(seccompProfile={"type": "Unconfined"}),
         _context(seccompProfile={"type": "RuntimeDefault"}),
         f"{W}.securityContext.seccompProfile.type"),
    Case("sysctl kernel.msgmax", "sysctls", "baseline",
         _pod_context(sysctls=[{"name": "kernel.msgmax", "value": "65536"}]),
         _pod_context(sysctls=[{"name": "net.ipv4.ip_unprivileged_port_start", "value": "80"},
                               {"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"}]),
         "spec.securityContext.sysctls[kernel.msgmax]"),
    Case("emptyDir (the turn volume)", "volumeTypes", "restricted", None,
         _volume(emptyDir={"medium": "Memory", "sizeLimit": "1Mi"})),
    Case("nfs volume", "volumeTypes", "restricted",
         _volume(nfs={"server": "nfs.example", "path": "/export"}),
         _volume(persistentVolumeClaim={"claimName": "data"}), "spec.volumes[data].nfs"),
    Case("privilege escalation", "allowPrivilegeEscalation", "restricted",
         _context(allowPrivilegeEscalation=True), _nothing,
         f"{W}.securityContext.allowPrivilegeEscalation"),
    Case("root allowed", "runAsNonRoot", "restricted", _context(runAsNonRoot=False),
         _context(runAsNonRoot=True), f"{W}.securityContext.runAsNonRoot"),
    Case("user 0", "runAsUser", "restricted", _context(runAsUser=0),
         _context(runAsUser=1000), f"{W}.securityContext.runAsUser"),
    Case("no seccomp profile", "seccomp", "restricted", _drop("seccompProfile"),
         _both(_drop("seccompProfile"), _context(seccompProfile={"type": "RuntimeDefault"})),
         f"{W}.securityContext.seccompProfile.type"),
    Case("capabilities kept", "capabilities", "restricted", _context(capabilities={}),
         _context(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}),
         f"{W}.securityContext.capabilities.drop"),
    Case("capability CHOWN added", "capabilities", "restricted",
         _context(capabilities={"drop": ["ALL"], "add": ["CHOWN"]}), _nothing,
         f"{W}.securityContext.capabilities.add"),
)
REFUSED = [c for c in CASES if c.refused is not None]


def answer(pod: Obj, level: str, allow: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    policy = TemplatePolicy(level=level, allow={"t": allow})
    return privilege_refusal(pod["spec"], "cm", "t", policy, metadata=pod.get("metadata"))


def above(level: str) -> list[str]:
    return list(LEVELS[LEVELS.index(level):])


def test_every_control_has_a_case_and_every_case_a_control() -> None:
    assert {c.control for c in CASES} == {c.name for c in CONTROLS} == ALLOWABLE


@pytest.mark.parametrize("name", sorted(base_templates()))
def test_the_shipped_templates_meet_restricted(name: str) -> None:
    pod = base_templates()[name]
    assert answer(pod, "restricted") is None


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.name)
def test_each_broken_control_is_refused_with_its_field_and_the_allowance(case: Case) -> None:
    for level in above(case.level):
        refusal = answer(case.pod("refused"), level)
        assert refusal is not None, level
        assert refusal[0] == f"cm: {case.field}"
        assert f"--template-allow t={case.control})" in refusal[1]
        assert answer(case.pod("refused"), level, case.needs | {case.control}) is None


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_kept_control_is_allowed_at_every_level(case: Case) -> None:
    for level in LEVELS:
        assert answer(case.pod("allowed"), level) is None, level


@pytest.mark.parametrize("case", [c for c in REFUSED if c.level == "restricted"],
                         ids=lambda c: c.name)
def test_what_only_restricted_forbids_passes_baseline(case: Case) -> None:
    assert answer(case.pod("refused"), "baseline") is None
    refusal = answer(case.pod("refused"), "restricted")
    assert refusal is not None and "(restricted Pod Security)" in refusal[1]


@pytest.mark.parametrize("group", ["initContainers", "ephemeralContainers"])
def test_every_container_kind_is_checked(group: str) -> None:
    pod = copy.deepcopy(BASE)
    pod["spec"][group] = [{"name": "side", "image": "i:1",
                           "securityContext": {"seLinuxOptions": {"type": "spc_t"}}}]
    refusal = answer(pod, "baseline")
    assert refusal is not None
    assert refusal[0] == f"cm: spec.{group}[side].securityContext.seLinuxOptions.type"


def test_a_lowercase_capability_says_how_to_spell_it() -> None:
    refusal = answer(REFUSED[6].pod("refused"), "baseline")
    assert refusal is not None and "upper case without CAP_" in refusal[1]


def test_the_settings_choose_the_level() -> None:
    assert Settings(namespace="openrl").template_policy.level == "baseline"
    strict = Settings(namespace="openrl", template_pod_security="restricted",
                      template_allow="t=runAsUser,sysctls")
    assert strict.template_policy.level == "restricted"
    assert strict.template_policy.allowed("t") == {"runAsUser", "sysctls"}
    with pytest.raises(SettingsError, match="template-pod-security 'privileged'"):
        Settings(namespace="openrl", template_pod_security="privileged")
