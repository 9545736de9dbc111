"""The local control plane itself, without any of our controller.

These prove the pipeline the controller relies on: fake GPU nodes publish
devices, the real kube-scheduler allocates a ResourceClaim and binds the pod,
the fake kubelet runs and deletes it; CRD CEL rules are enforced; a
ServiceAccount token from the TokenRequest API authenticates.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

if TYPE_CHECKING:
    from conftest import Cluster

pytestmark = pytest.mark.e2e

RESOURCE = ("resource.k8s.io", "v1")


def test_fake_nodes_are_ready_and_publish_devices(cluster: Cluster) -> None:
    nodes = cluster.core.list_node(label_selector="fake-gpu-node=true").items
    assert nodes, "no fake GPU nodes registered"
    slices = cluster.custom.list_cluster_custom_object(*RESOURCE, "resourceslices")["items"]
    by_node = {
        s["spec"].get("nodeName"): s for s in slices if s["spec"]["driver"] == cluster.driver
    }
    for node in nodes:
        name = node.metadata.name
        ready = {c.type: c.status for c in node.status.conditions}["Ready"]
        assert ready == "True", f"{name} not Ready"
        assert not [t for t in node.spec.taints or [] if t.effect != "PreferNoSchedule"], (
            f"{name} is tainted: {node.spec.taints}"
        )
        assert name in by_node, f"no ResourceSlice for {name}"
        spec = by_node[name]["spec"]
        assert spec["pool"] == {"name": name, "generation": 1, "resourceSliceCount": 1}
        for device in spec["devices"]:
            assert "memory" in device["capacity"]
            assert "string" in device["attributes"]["productName"]
    cls = cluster.custom.get_cluster_custom_object(*RESOURCE, "deviceclasses", cluster.driver)
    assert (
        cls["spec"]["selectors"][0]["cel"]["expression"] == f'device.driver == "{cluster.driver}"'
    )


def _claim(driver: str, min_memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu-claim"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": driver,
                            "allocationMode": "ExactCount",
                            "count": 1,
                            "selectors": [
                                {
                                    "cel": {
                                        "expression": (
                                            f'device.capacity["{driver}"].memory'
                                            f'.compareTo(quantity("{min_memory}")) >= 0'
                                        )
                                    }
                                }
                            ],
                        },
                    }
                ]
            }
        },
    }


def _pod(claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu-pod"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            "containers": [
                {
                    "name": "worker",
                    "image": "registry.invalid/worker:latest",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def test_claim_allocated_by_scheduler_and_pod_runs(cluster: Cluster, namespace: str) -> None:
    core, custom = cluster.core, cluster.custom
    custom.create_namespaced_custom_object(
        *RESOURCE, namespace, "resourceclaims", _claim(cluster.driver, "40Gi")
    )
    core.create_namespaced_pod(namespace, _pod("gpu-claim"))

    pod = cluster.wait_for(
        lambda: (
            (p := core.read_namespaced_pod("gpu-pod", namespace)).status.phase == "Running" and p
        ),
        timeout=90,
        what="pod gpu-pod Running",
    )
    claim = custom.get_namespaced_custom_object(*RESOURCE, namespace, "resourceclaims", "gpu-claim")
    allocation = claim["status"]["allocation"]
    results = allocation["devices"]["results"]
    assert len(results) == 1
    assert results[0]["driver"] == cluster.driver
    assert results[0]["request"] == "gpu"
    assert results[0]["pool"] == pod.spec.node_name
    # The allocation pins the claim to the node the pod was bound to.
    terms = allocation["nodeSelector"]["nodeSelectorTerms"]
    fields = [f for t in terms for f in t.get("matchFields", [])]
    assert {"key": "metadata.name", "operator": "In", "values": [pod.spec.node_name]} in fields
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["gpu-pod"]
    ready = {c.type: c.status for c in pod.status.conditions}
    assert ready.get("Ready") == "True"

    # Deleting the pod: the fake kubelet finishes the deletion, then
    # kube-controller-manager's resourceclaim controller releases the claim.
    core.delete_namespaced_pod("gpu-pod", namespace)

    def pod_gone() -> bool:
        try:
            core.read_namespaced_pod("gpu-pod", namespace)
        except ApiException as e:
            return e.status == 404
        return False

    cluster.wait_for(pod_gone, timeout=60, what="pod gpu-pod deleted")
    cluster.wait_for(
        lambda: (
            not custom.get_namespaced_custom_object(
                *RESOURCE, namespace, "resourceclaims", "gpu-claim"
            )["status"].get("reservedFor")
        ),
        timeout=60,
        what="claim reservation released",
    )


def test_unsatisfiable_selector_leaves_pod_pending(cluster: Cluster, namespace: str) -> None:
    core, custom = cluster.core, cluster.custom
    custom.create_namespaced_custom_object(
        *RESOURCE, namespace, "resourceclaims", _claim(cluster.driver, "100Ti")
    )
    core.create_namespaced_pod(namespace, _pod("gpu-claim"))

    def unschedulable() -> bool:
        pod = core.read_namespaced_pod("gpu-pod", namespace)
        return any(
            c.type == "PodScheduled" and c.status == "False" for c in pod.status.conditions or []
        )

    cluster.wait_for(unschedulable, timeout=60, what="PodScheduled=False")
    pod = core.read_namespaced_pod("gpu-pod", namespace)
    assert pod.spec.node_name is None
    claim = custom.get_namespaced_custom_object(*RESOURCE, namespace, "resourceclaims", "gpu-claim")
    assert not claim.get("status", {}).get("allocation")


def test_crd_cel_rule_makes_spec_immutable(cluster: Cluster, namespace: str) -> None:
    ext = client.ApiextensionsV1Api(cluster.api)
    group = f"e2e-{uuid.uuid4().hex[:8]}.openrl.test"
    name = f"widgets.{group}"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "x-kubernetes-validations": [
                                        {"rule": "self == oldSelf", "message": "spec is immutable"}
                                    ],
                                    "properties": {"size": {"type": "integer"}},
                                },
                                "status": {
                                    "type": "object",
                                    "properties": {"phase": {"type": "string"}},
                                },
                            },
                        }
                    },
                }
            ],
        },
    }
    ext.create_custom_resource_definition(crd)
    try:
        cluster.wait_for(
            lambda: any(
                c.type == "Established" and c.status == "True"
                for c in ext.read_custom_resource_definition(name).status.conditions or []
            ),
            timeout=30,
            what=f"CRD {name} established",
        )
        custom = cluster.custom
        body = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 1},
        }
        cluster.wait_for(
            lambda: custom.create_namespaced_custom_object(group, "v1", namespace, "widgets", body),
            timeout=30,
            what="first Widget created",
        )
        with pytest.raises(ApiException) as err:
            custom.patch_namespaced_custom_object(
                group, "v1", namespace, "widgets", "w", {"spec": {"size": 2}}
            )
        assert err.value.status == 422
        assert "spec is immutable" in err.value.body
        # The status subresource stays writable.
        custom.patch_namespaced_custom_object_status(
            group, "v1", namespace, "widgets", "w", {"status": {"phase": "Done"}}
        )
        got = custom.get_namespaced_custom_object(group, "v1", namespace, "widgets", "w")
        assert got["spec"] == {"size": 1}
        assert got["status"] == {"phase": "Done"}
    finally:
        ext.delete_custom_resource_definition(name)


def test_service_account_token_authenticates(cluster: Cluster, namespace: str) -> None:
    core = cluster.core
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "robot"}})
    token = core.create_namespaced_service_account_token(
        "robot", namespace, {"spec": {"expirationSeconds": 600}}
    ).status.token
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["sub"] == f"system:serviceaccount:{namespace}:robot"

    conf = client.Configuration()
    conf.host = cluster.api.configuration.host
    conf.ssl_ca_cert = cluster.api.configuration.ssl_ca_cert
    conf.api_key = {"authorization": f"Bearer {token}"}
    robot = client.ApiClient(conf)
    review = client.AuthenticationV1Api(robot).create_self_subject_review({})
    assert review.status.user_info.username == f"system:serviceaccount:{namespace}:robot"
    # RBAC is on: the bare ServiceAccount may not list pods.
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(robot).list_namespaced_pod(namespace)
    assert err.value.status == 403
