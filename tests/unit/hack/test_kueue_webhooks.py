"""hack/kueue/webhooks.py: Kueue's own webhooks at a local URL, the integrations' left out."""

from __future__ import annotations

import base64

from hack.kueue import webhooks

MANIFESTS = """\
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- name: mjob.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-batch-v1-job}}
  rules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}]
- name: mworkload.kb.io
  failurePolicy: Fail
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-wl}}
  rules: [{apiGroups: [kueue.x-k8s.io], apiVersions: [v1beta2], operations: [CREATE],
           resources: [workloads]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- name: vworkload.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /validate-wl}}
  rules: [{apiGroups: [kueue.x-k8s.io], apiVersions: [v1beta2], operations: [CREATE, UPDATE],
           resources: [workloads]}]
"""


def test_only_kueues_group_kept_and_served_at_the_url_with_the_ca() -> None:
    listed = webhooks.configurations(MANIFESTS, "https://127.0.0.1:19443/", b"PEM", "openrl-kueue")
    items = listed["items"]
    assert [(i["kind"], i["metadata"]) for i in items] == [
        ("MutatingWebhookConfiguration", {"name": "openrl-kueue"}),
        ("ValidatingWebhookConfiguration", {"name": "openrl-kueue"}),
    ]
    mutating, validating = (i["webhooks"] for i in items)
    assert [w["name"] for w in mutating] == ["mworkload.kb.io"]
    assert mutating[0]["failurePolicy"] == "Fail"  # the rest of an entry as Kueue wrote it
    ca = base64.b64encode(b"PEM").decode()
    assert [w["clientConfig"] for w in validating] == [
        {"url": "https://127.0.0.1:19443/validate-wl", "caBundle": ca}
    ]


def test_usage_without_its_four_arguments() -> None:
    assert webhooks.main(["only-one"]) == 2
