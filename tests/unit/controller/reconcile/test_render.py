import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.k8s import naming
from controller.k8s.objects import Worker
from controller.reconcile import render
from tests.unit.controller.conftest import TEMPLATE, worker_obj


def make_worker(**spec: object) -> Worker:
    obj = worker_obj("lora-1", "10Gi", **spec)
    obj["metadata"].update(uid="uid-1", namespace="openrl", generation=1)
    return Worker.from_obj(obj)


def render_pod(text: str = TEMPLATE, claim: str = "orw-claim", node: str = "gpu-a",
               **spec: object) -> dict:
    worker = make_worker(**spec)
    return render.stamp(render.prepare(text, worker, "cm"), worker, claim, "openrl", node)


def worker_container(pod: dict) -> dict:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "worker")


def env(pod: dict) -> dict:
    return {e["name"]: e.get("value") for e in worker_container(pod).get("env", [])}


def test_stamps_claim_reference_and_consumption() -> None:
    pod = render_pod()
    assert pod["metadata"]["name"] == "orw-lora-1"
    assert pod["metadata"]["namespace"] == "openrl"
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "orw-claim"}]
    assert worker_container(pod)["resources"]["claims"] == [{"name": "gpu"}]
    assert pod["metadata"]["ownerReferences"] == [{
        "apiVersion": "openrl.io/v1alpha1", "kind": "OpenRLWorker", "name": "lora-1",
        "uid": "uid-1", "controller": True, "blockOwnerDeletion": True}]


def test_labels_are_sanitized_and_env_exact() -> None:
    pod = render_pod(ownerId="Team/Alpha", claim="orw-claim")
    labels = pod["metadata"]["labels"]
    assert labels["app"] == "worker"  # the template's own labels survive
    assert labels[naming.LABEL_MANAGED] == "true"
    assert labels[naming.LABEL_WORKER] == "lora-1"
    assert labels[naming.LABEL_ROLE] == "trainer"
    assert labels[naming.LABEL_CLAIM] == "orw-claim"
    assert labels["accel-timeslicer"] == "true"
    assert labels["timeslice.io/group"] == "orw-claim"
    assert labels["timeslice.io/owner"] == "team-alpha"
    assert labels["timeslice.io/job-id"] == "lora-1"
    assert env(pod) == {"LOG_LEVEL": "info", "OPEN_RL_TIME_SLICE_GROUP": "orw-claim",
                        "OPEN_RL_TIME_SLICE_OWNER": "Team/Alpha",
                        "OPEN_RL_TIME_SLICE_JOB_ID": "lora-1", "OPEN_RL_MODEL_ID": "qwen-8b",
                        "OPENRL_TURN_SOCKET": "/run/openrl-turn/turn.sock"}
    assert pod["metadata"]["annotations"][naming.ANNOTATION_MEMORY] == str(10 << 30)


def test_owner_defaults_to_worker_name() -> None:
    pod = render_pod()
    assert env(pod)["OPEN_RL_TIME_SLICE_OWNER"] == "lora-1"
    assert pod["metadata"]["labels"]["timeslice.io/owner"] == "lora-1"


def node_terms(pod: dict) -> list[dict]:
    terms: list[dict] = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return terms


def test_node_affinity_is_two_ored_terms_each_pinned_to_the_chosen_node() -> None:
    terms = node_terms(render_pod(role="sampler", node="gpu-b"))
    enabled = {"key": "openrl.io/enabled", "operator": "In", "values": ["true"]}
    pin = [{"key": "metadata.name", "operator": "In", "values": ["gpu-b"]}]
    assert terms == [
        {"matchExpressions": [enabled, {"key": "openrl.io/sampler", "operator": "In",
                                        "values": ["true"]}],
         "matchFields": pin},
        {"matchExpressions": [enabled, {"key": "openrl.io/trainer", "operator": "DoesNotExist"},
                              {"key": "openrl.io/sampler", "operator": "DoesNotExist"}],
         "matchFields": pin},
    ]


def test_a_claim_that_never_named_its_node_pins_nothing() -> None:
    assert all("matchFields" not in term for term in node_terms(render_pod(node="")))


def test_overlay_image_command_replace_args_append_env_merges() -> None:
    pod = render_pod(container={
        "image": "custom:2", "command": ["python", "-m", "w"], "args": ["--lora"],
        "env": [{"name": "LOG_LEVEL", "value": "debug"}, {"name": "EXTRA", "value": "1"}],
    })
    container = worker_container(pod)
    assert container["image"] == "custom:2"
    assert container["command"] == ["python", "-m", "w"]
    assert container["args"] == ["--role=trainer", "--lora"]
    assert env(pod)["LOG_LEVEL"] == "debug" and env(pod)["EXTRA"] == "1"
    assert [e["name"] for e in container["env"]][:2] == ["LOG_LEVEL", "EXTRA"]


def test_bare_pod_spec_and_single_unnamed_container() -> None:
    text = "containers:\n  - name: main\n    image: img:1\n"
    pod = render_pod(text)
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
    assert pod["kind"] == "Pod"


def test_template_metadata_other_than_labels_is_dropped() -> None:
    text = ("metadata:\n  name: evil\n  namespace: other\n  ownerReferences: [{uid: x}]\n"
            "spec:\n  containers: [{name: worker, image: i}]\n")
    pod = render_pod(text)
    assert pod["metadata"]["name"] == "orw-lora-1"
    assert pod["metadata"]["namespace"] == "openrl"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


BASE = "spec:\n  containers:\n    - name: worker\n      image: i\n"


@pytest.mark.parametrize(("extra", "field"), [
    ("  nodeName: n1\n", "spec.nodeName"),
    ("  nodeSelector: {a: b}\n", "spec.nodeSelector"),
    ("  affinity: {}\n", None),  # empty: nothing to collide with
    ("  affinity: {nodeAffinity: {x: 1}}\n", "spec.affinity"),
    ("  affinity: {podAntiAffinity: {x: 1}}\n", "spec.affinity"),
    ("  resourceClaims: [{name: gpu}]\n", "spec.resourceClaims"),
])
def test_pod_level_placement_fields_are_refused(extra: str, field: str | None) -> None:
    worker = make_worker()
    if field is None:
        render.prepare(BASE + extra, worker, "cm")
        return
    with pytest.raises(render.TemplateError) as info:
        render.prepare(BASE + extra, worker, "cm")
    assert info.value.field == f"cm: {field}"
    assert field in str(info.value)


@pytest.mark.parametrize(("container", "field"), [
    ("resources: {claims: [{name: gpu}]}", "spec.containers[worker].resources.claims"),
    ("resources: {limits: {nvidia.com/gpu: 1}}",
     "spec.containers[worker].resources.limits[nvidia.com/gpu]"),
    ("resources: {requests: {example.com/foo: 1}}",
     "spec.containers[worker].resources.requests[example.com/foo]"),
    ("env: [{name: OPEN_RL_TIME_SLICE_GROUP, value: x}]",
     "spec.containers[worker].env[OPEN_RL_TIME_SLICE_GROUP]"),
])
def test_container_placement_fields_are_refused(container: str, field: str) -> None:
    text = f"spec:\n  containers:\n    - name: worker\n      image: i\n      {container}\n"
    with pytest.raises(render.TemplateError) as info:
        render.prepare(text, make_worker(), "cm")
    assert info.value.field == f"cm: {field}"


def test_sidecar_extended_resources_are_refused_too() -> None:
    text = BASE + "    - name: side\n      image: s\n      resources: {limits: {a.io/b: 1}}\n"
    with pytest.raises(render.TemplateError, match=r"containers\[side\]"):
        render.prepare(text, make_worker(), "cm")


def test_overlay_may_not_set_the_group_env() -> None:
    with pytest.raises(render.TemplateError) as info:
        render.prepare(TEMPLATE, make_worker(container={"env": [
            {"name": "OPEN_RL_TIME_SLICE_GROUP", "value": "x"}]}), "cm")
    assert info.value.field == "spec.container.env[OPEN_RL_TIME_SLICE_GROUP]"


def test_template_env_for_other_stamped_vars_is_overwritten() -> None:
    text = BASE + "      env: [{name: OPEN_RL_MODEL_ID, value: wrong}]\n"
    assert env(render_pod(text))["OPEN_RL_MODEL_ID"] == "qwen-8b"


@pytest.mark.parametrize(("text", "match"), [
    ("spec: [", "not valid YAML"),
    ("- a\n- b\n", "mapping"),
    ("kind: Deployment\nspec: {containers: [{name: worker, image: i}]}\n", "kind"),
    ("spec: {containers: []}\n", "spec.containers"),
    ("spec:\n  containers: [{name: a, image: i}, {name: b, image: i}]\n", "worker"),
    ("spec:\n  containers: [{name: worker}]\n", "image"),
])
def test_unusable_templates(text: str, match: str) -> None:
    with pytest.raises(render.TemplateError, match=match):
        render.prepare(text, make_worker(), "cm")


def test_missing_image_is_fine_when_overlay_sets_it() -> None:
    text = "spec:\n  containers: [{name: worker}]\n"
    pod = render_pod(text, container={"image": "mine:1"})
    assert worker_container(pod)["image"] == "mine:1"


def merge_env_plainly(env: list[dict], entries: list[dict]) -> list[dict]:
    """The rule as first written: each entry replaces the first of its name, or is appended."""
    merged = [dict(e) for e in env]
    for entry in entries:
        for i, existing in enumerate(merged):
            if existing.get("name") == entry["name"]:
                merged[i] = dict(entry)
                break
        else:
            merged.append(dict(entry))
    return merged


ENV = st.lists(st.fixed_dictionaries({"name": st.sampled_from("ABCDE"),
                                      "value": st.text("xy", max_size=2)}), max_size=8)


@given(ENV, ENV)
def test_env_merges_in_one_pass_as_it_did_entry_by_entry(env: list[dict],
                                                        entries: list[dict]) -> None:
    assert render.merge_env(env, entries) == merge_env_plainly(env, entries)


def test_thousands_of_env_entries_merge_in_one_pass() -> None:
    entries = [{"name": f"V{i}", "value": str(i)} for i in range(20_000)]
    pod = render.prepare(TEMPLATE, make_worker(container={"env": entries}), "cm")
    env = worker_container(pod)["env"]
    assert len(env) == 20_001 and env[-1] == {"name": "V19999", "value": "19999"}


SIDECAR_TEMPLATE = """
spec:
  initContainers:
    - {name: fetch, image: busybox}
  containers:
    - name: worker
      image: trainer:1
      volumeMounts: [{name: cache, mountPath: /cache}]
    - {name: adapter, image: adapter:1}
  volumes:
    - {name: cache, emptyDir: {}}
"""


def test_every_container_reaches_the_time_slicer_through_its_own_empty_dir() -> None:
    pod = render_pod(SIDECAR_TEMPLATE)
    spec = pod["spec"]
    assert spec["volumes"] == [{"name": "cache", "emptyDir": {}},
                               {"name": "openrl-turn", "emptyDir": {}}]
    for container in [*spec["initContainers"], *spec["containers"]]:
        assert {"name": "openrl-turn", "mountPath": "/run/openrl-turn"} in container["volumeMounts"]
        assert {"name": "OPENRL_TURN_SOCKET", "value": "/run/openrl-turn/turn.sock"} \
            in container["env"]
    assert worker_container(pod)["volumeMounts"][0] == {"name": "cache", "mountPath": "/cache"}


@pytest.mark.parametrize(("template", "field"), [
    ("spec: {containers: [{name: worker, image: x}], volumes: [{name: openrl-turn, emptyDir: {}}]}",
     "spec.volumes[openrl-turn]"),
    ("spec: {containers: [{name: worker, image: x,"
     " volumeMounts: [{name: scratch, mountPath: /run/openrl-turn/}]}]}",
     "spec.containers[worker].volumeMounts[scratch]"),
    ("spec: {containers: [{name: worker, image: x}], initContainers: [{name: init, image: x,"
     " volumeMounts: [{name: openrl-turn, mountPath: /elsewhere}]}]}",
     "spec.initContainers[init].volumeMounts[openrl-turn]"),
    ("spec: {containers: [{name: worker, image: x,"
     " env: [{name: OPENRL_TURN_SOCKET, value: /tmp/s}]}]}",
     "spec.containers[worker].env[OPENRL_TURN_SOCKET]"),
])
def test_a_template_using_the_time_slicer_channel_is_refused(template: str, field: str) -> None:
    with pytest.raises(render.TemplateError) as caught:
        render_pod(template)
    assert caught.value.field == f"cm: {field}"
    assert "time-slicer" in caught.value.message


def test_an_overlay_cannot_point_the_worker_at_another_socket() -> None:
    with pytest.raises(render.TemplateError, match="OPENRL_TURN_SOCKET"):
        render_pod(container={"env": [{"name": "OPENRL_TURN_SOCKET", "value": "/tmp/s"}]})
