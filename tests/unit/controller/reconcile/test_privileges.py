"""Templates are the operator's: what a template may hand its worker, and who says so."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from controller.k8s import kube
from controller.k8s.objects import Worker
from controller.reconcile import render
from controller.reconcile.privileges import TemplatePolicy, privilege_refusal, unmarked_refusal
from controller.settings import Settings, SettingsError
from tests.unit.controller.conftest import Cluster, template_cm, worker_obj

# The escalation first tried by hand: every way out of a worker pod at once.
EVIL = {
    "apiVersion": "v1", "kind": "Pod",
    "spec": {
        "serviceAccountName": "open-rl-scheduler",
        "hostNetwork": True, "hostPID": True,
        "containers": [{"name": "worker", "image": "evil:1",
                        "securityContext": {"privileged": True},
                        "volumeMounts": [{"name": "root", "mountPath": "/host"}]}],
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
    },
}


def spec(**fields: Any) -> dict[str, Any]:
    container = {"name": "worker", "image": "i:1", **fields.pop("container", {})}
    return {"containers": [container], **fields}


def refused(pod_spec: dict[str, Any], policy: TemplatePolicy | None = None,
            template: str = "t") -> tuple[str, str] | None:
    return privilege_refusal(pod_spec, "cm", template, policy or TemplatePolicy())


@pytest.mark.parametrize(("fields", "field"), [
    ({"serviceAccountName": "open-rl-scheduler"}, "cm: spec.serviceAccountName"),
    ({"serviceAccount": "open-rl-scheduler"}, "cm: spec.serviceAccount"),
    ({"serviceAccountName": "builder"}, "cm: spec.serviceAccountName"),
    ({"hostNetwork": True}, "cm: spec.hostNetwork"),
    ({"hostPID": True}, "cm: spec.hostPID"),
    ({"hostIPC": True}, "cm: spec.hostIPC"),
    ({"container": {"securityContext": {"privileged": True}}},
     "cm: spec.containers[worker].securityContext.privileged"),
    ({"container": {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}},
     "cm: spec.containers[worker].securityContext.capabilities.add"),
    ({"initContainers": [{"name": "setup", "image": "i",
                          "securityContext": {"capabilities": {"add": ["CAP_NET_ADMIN"]}}}]},
     "cm: spec.initContainers[setup].securityContext.capabilities.add"),
    ({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
     "cm: spec.volumes[root].hostPath"),
])
def test_each_privilege_is_refused_with_its_field_named(fields: dict[str, Any],
                                                        field: str) -> None:
    refusal = refused(spec(**fields))
    assert refusal is not None and refusal[0] == field


def test_what_a_worker_needs_is_not_refused() -> None:
    plain = spec(serviceAccountName="default", hostNetwork=False,
                 container={"securityContext": {
                     "privileged": False, "allowPrivilegeEscalation": False,
                     "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE", "CHOWN"]}}},
                 volumes=[{"name": "scratch", "emptyDir": {}}])
    assert refused(plain) is None


def test_the_operator_allows_per_template_never_the_scheduler_account() -> None:
    policy = TemplatePolicy(service_accounts={"builder"},
                            allow={"debug": {"hostPath", "privileged"}, "*": {"hostIPC"}})
    assert refused(spec(serviceAccountName="builder"), policy) is None
    assert refused(spec(hostIPC=True), policy, template="any") is None
    hostpath = spec(volumes=[{"name": "v", "hostPath": {"path": "/data"}}])
    assert refused(hostpath, policy, template="debug") is None
    assert refused(hostpath, policy, template="other") is not None
    refusal = refused(spec(serviceAccountName="open-rl-scheduler"), policy, template="debug")
    assert refusal is not None and "scheduler's own ServiceAccount" in refusal[1]


def test_the_reason_says_how_the_operator_allows_it() -> None:
    refusal = refused(spec(hostPID=True), template="trainer-debug")
    assert refusal is not None
    assert "--template-allow trainer-debug=hostPID" in refusal[1]


def test_a_configmap_is_a_template_only_when_marked() -> None:
    assert unmarked_refusal(template_cm(), "cm") is None
    plain = {"metadata": {"name": "notes", "labels": {"openrl.io/pod-template": "yes"}}}
    refusal = unmarked_refusal(plain, "ConfigMap openrl/notes")
    assert refusal is not None
    assert refusal[0] == "ConfigMap openrl/notes"
    assert "openrl.io/pod-template=true" in refusal[1]


def worker(**spec_fields: Any) -> Worker:
    obj = worker_obj("w", "10Gi", **spec_fields)
    obj["metadata"].update(uid="uid-w", namespace="openrl", generation=1)
    return Worker.from_obj(obj)


TEMPLATE = "spec:\n  containers: [{name: worker, image: i, env: [{name: A, value: a}]}]\n"


@pytest.mark.parametrize(("container", "field"), [
    ({"securityContext": {"privileged": True}}, "spec.container.securityContext"),
    ({"env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
     "spec.container.env[T].valueFrom"),
])
def test_the_overlay_keeps_its_narrow_shape(container: dict[str, Any], field: str) -> None:
    with pytest.raises(render.TemplateError) as caught:
        render.prepare(TEMPLATE, worker(container=container), "cm")
    assert caught.value.field == field


def test_the_overlay_still_sets_image_command_args_and_env() -> None:
    pod = render.prepare(TEMPLATE, worker(container={
        "image": "mine:2", "command": ["run"], "args": ["--x"],
        "env": [{"name": "A", "value": "b"}]}), "cm")
    c = pod["spec"]["containers"][0]
    assert (c["image"], c["command"], c["args"]) == ("mine:2", ["run"], ["--x"])
    assert c["env"] == [{"name": "A", "value": "b"}]


# ------------------------------------------------------------ the stories


def test_the_escalation_fails_the_worker_and_creates_nothing() -> None:
    c = Cluster()
    c.api.put(kube.CONFIGMAPS, template_cm(name="evil", text=yaml.safe_dump(EVIL)))
    status = c.place("w1", podTemplate={"name": "evil"})
    assert status["phase"] == "Failed"
    assert status["reason"].startswith("TemplateError: ConfigMap openrl/evil key pod.yaml: "
                                       "spec.serviceAccountName: is the scheduler's own")
    assert c.api.all(kube.PODS) == [] and c.api.all(kube.CLAIMS) == []


def test_an_unmarked_configmap_is_refused_with_how_to_mark_it() -> None:
    c = Cluster()
    plain = template_cm(name="found")
    del plain["metadata"]["labels"]
    c.api.put(kube.CONFIGMAPS, plain)
    status = c.place("w1", podTemplate={"name": "found"})
    assert status["phase"] == "Failed"
    assert status["reason"] == (
        "TemplateError: ConfigMap openrl/found: is not a pod template: the operator marks "
        "one with the label openrl.io/pod-template=true (kubectl label configmap NAME "
        "openrl.io/pod-template=true)")
    assert c.api.all(kube.PODS) == []


def test_an_allowed_template_renders_for_the_operator() -> None:
    c = Cluster(template_allow="debug=hostPath")
    text = yaml.safe_dump({"spec": spec(volumes=[{"name": "d", "hostPath": {"path": "/d"}}])})
    c.api.put(kube.CONFIGMAPS, template_cm(name="debug", text=text))
    assert c.place("w1", podTemplate={"name": "debug"})["phase"] == "Placing"
    assert c.place("w2", podTemplate={"name": "debug"})["phase"] == "Placing"
    c.api.put(kube.CONFIGMAPS, template_cm(name="other", text=text))
    assert c.place("w3", podTemplate={"name": "other"})["phase"] == "Failed"


# ------------------------------------------------------------ the settings


def test_settings_read_the_allowances() -> None:
    s = Settings(namespace="openrl", template_service_accounts="a, b",
                 template_allow="debug=hostPath,privileged; *=hostIPC")
    assert s.template_policy.service_accounts == {"a", "b"}
    assert s.template_policy.allowed("debug") == {"hostPath", "privileged", "hostIPC"}
    assert s.template_policy.allowed("x") == {"hostIPC"}
    assert Settings(namespace="openrl").template_policy == TemplatePolicy()


@pytest.mark.parametrize(("values", "message"), [
    ({"template_service_accounts": "open-rl-scheduler"}, "scheduler's own"),
    ({"service_account": "sched", "template_service_accounts": "sched"}, "scheduler's own"),
    ({"template_allow": "debug"}, "not TEMPLATE=FIELD"),
    ({"template_allow": "debug=nodeName"}, "nodeName cannot be allowed"),
    ({"template_allow": "Bad_Name=hostPID"}, "not a ConfigMap name"),
    ({"template_service_accounts": "Not_An_Account"}, "not a ServiceAccount name"),
])
def test_bad_allowances_are_settings_errors(values: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings(namespace="openrl", **values)
