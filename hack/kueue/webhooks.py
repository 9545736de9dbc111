"""Kueue's own webhooks, registered at a local URL (hack/kueue.sh up).

    python hack/kueue/webhooks.py MANIFESTS BASE_URL CA_FILE NAME > webhooks.json

MANIFESTS is the module's config/components/webhook/manifests.yaml (what Kueue
serves, generated from its sources, so it matches the built version). Out of it
come two configurations named NAME, mutating and validating, holding the entries
for Kueue's own API group only, each with its Service reference turned into
BASE_URL + the path and CA_FILE as its caBundle:

| kept                      | dropped, and why                                     |
| ------------------------- | ---------------------------------------------------- |
| apiGroups kueue.x-k8s.io  | batch, apps, kubeflow.org, ...: the integrations'    |
|                           | webhooks would gate workloads of APIs the local      |
|                           | cluster does not run, or that Kueue should not touch |

Printed as one JSON List for `kubectl apply -f -`.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import yaml

__all__ = ["configurations", "main"]

GROUP = "kueue.x-k8s.io"


def _ours(webhook: dict[str, Any]) -> bool:
    return any(GROUP in rule.get("apiGroups", ()) for rule in webhook.get("rules", ()))


def _at_url(webhook: dict[str, Any], base_url: str, ca_bundle: str) -> dict[str, Any]:
    path = webhook["clientConfig"]["service"]["path"]
    return {**webhook, "clientConfig": {"url": base_url.rstrip("/") + path, "caBundle": ca_bundle}}


def configurations(manifests: str, base_url: str, ca_pem: bytes, name: str) -> dict[str, Any]:
    """The List of both configurations, Kueue's group only, served at base_url."""
    ca_bundle = base64.b64encode(ca_pem).decode()
    items = []
    for doc in yaml.safe_load_all(manifests):
        if not doc:
            continue
        webhooks = [_at_url(w, base_url, ca_bundle) for w in doc.get("webhooks", ()) if _ours(w)]
        items.append(
            {
                "apiVersion": doc["apiVersion"],
                "kind": doc["kind"],
                "metadata": {"name": name},
                "webhooks": webhooks,
            }
        )
    return {"apiVersion": "v1", "kind": "List", "items": items}


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    manifests, base_url, ca_file, name = argv
    listed = configurations(Path(manifests).read_text(), base_url, Path(ca_file).read_bytes(), name)
    json.dump(listed, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
