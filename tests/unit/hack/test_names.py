"""The checkers spell the controller's names themselves (hack/lib/names.py says why);
here each is held against the controller's, so a rename on either side is seen."""

from __future__ import annotations

from pathlib import Path

import yaml

from controller.k8s import naming
from controller.reconcile import privileges
from controller.settings import Settings
from hack.lib import names

ROOT = Path(__file__).resolve().parents[3]


def test_the_checkers_names_are_the_controllers() -> None:
    assert (names.GROUP, names.VERSION, names.PLURAL, names.KIND) == (
        naming.GROUP, naming.VERSION, naming.PLURAL, naming.KIND)
    assert names.API_VERSION == naming.API_VERSION
    assert names.FINALIZER == naming.FINALIZER
    assert names.LABEL_MANAGED == naming.LABEL_MANAGED
    assert names.MANAGED_SELECTOR == naming.MANAGED_SELECTOR
    assert names.LABEL_WORKER == naming.LABEL_WORKER
    assert names.SIZED_FOR == naming.ANNOTATION_SIZED_FOR
    assert (names.DRAIN, names.DRAINED) == (naming.ANNOTATION_DRAIN, naming.ANNOTATION_DRAINED)
    assert names.NODE_ENABLED == naming.NODE_ENABLED
    assert names.NODE_MAX_WORKERS == naming.NODE_MAX_WORKERS
    assert names.LABEL_POD_TEMPLATE == privileges.LABEL_POD_TEMPLATE
    assert names.pod_name("w-1") == naming.pod_name("w-1")
    assert names.template_name("sampler") == naming.template_name("sampler")


def test_the_installation_names_are_the_shipped_defaults() -> None:
    defaults = Settings()
    assert names.SCHEDULER == defaults.service_account == defaults.lease_name


def test_the_installation_names_are_the_manifests() -> None:
    docs = [d for f in sorted((ROOT / "manifests" / "base").glob("*.yaml"))
            for d in yaml.safe_load_all(f.read_text()) if d]
    named = {(d["kind"], d["metadata"]["name"]) for d in docs if "metadata" in d}
    assert ("Namespace", names.NAMESPACE) in named
    assert ("ServiceAccount", names.SCHEDULER) in named
    assert ("Role", names.GATEWAY_ROLE) in named
    assert ("ConfigMap", names.template_name("trainer")) in named


def test_the_shell_scripts_names_are_the_testbeds() -> None:
    # The shell side of the testbed spells the namespace and ServiceAccount once, in
    # hack/lib/common.sh, which every run script sources.
    assigned = dict(line.split("=", 1) for line in
                    (ROOT / "hack" / "lib" / "common.sh").read_text().splitlines()
                    if line.startswith(("NS=", "SA=")))
    assert assigned == {"NS": names.NAMESPACE, "SA": names.SCHEDULER}
