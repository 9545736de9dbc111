"""Fixtures for end-to-end tests against the local control plane.

``cluster`` (session): a running Kubernetes control plane with fake GPU nodes.
If ``KUBECONFIG`` names a reachable cluster, that one is used as it is and left
running. Otherwise ``hack/cluster.sh up`` starts ours (building it on first
use), unless it is already running; a cluster this fixture started is stopped
with ``hack/cluster.sh down`` at the end of the session.

``namespace`` (function): a fresh namespace whose ``default`` ServiceAccount
exists (pods can be created in it at once); deleted after the test.

Every test under tests/e2e is marked ``e2e``: ``pytest -m "not e2e"`` skips
them and never starts the cluster.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests import lanes

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO / "hack" / "cluster.sh"
KUBE_BIN = REPO / "hack" / "bin" / "kube"
# This lane's control plane (tests/lanes.py): .cluster unless the lane has its own.
LOCAL_KUBECONFIG = Path(os.environ.get("CLUSTER_DIR", REPO / ".cluster")) / "admin.kubeconfig"
# A cold build of the control plane (empty Go caches) takes about 20 minutes.
UP_TIMEOUT = float(os.environ.get("E2E_CLUSTER_UP_TIMEOUT", "2700"))

T = TypeVar("T")


@dataclasses.dataclass
class Cluster:
    """A reachable cluster. ``api`` is a configured ``kubernetes.client.ApiClient``."""

    kubeconfig: str
    api: client.ApiClient
    started_here: bool
    # The fake DRA driver's name (also the DeviceClass name) and node profile.
    driver: str = dataclasses.field(
        default_factory=lambda: os.environ.get("FAKE_GPU_DRIVER", "gpu.example.com")
    )

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl (built into hack/bin/kube) against this cluster."""
        if not KUBE_BIN.exists():
            raise RuntimeError(f"{KUBE_BIN} is missing: run hack/cluster.sh build")
        cmd = [str(KUBE_BIN), "kubectl", f"--kubeconfig={self.kubeconfig}", *args]
        proc = subprocess.run(
            cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
            )
        return proc

    @property
    def is_local(self) -> bool:
        """Whether this is the control plane ``hack/cluster.sh`` runs for this checkout."""
        return os.path.abspath(self.kubeconfig) == os.path.abspath(LOCAL_KUBECONFIG)

    def run_hack(self, script: str, *, timeout: float, **env: str) -> str:
        """Run ``hack/<script>`` against this cluster; its output, asserting it passed.

        The tails of its error stream and then of its output are printed, so ``-rA`` or
        a failure shows what the script saw, its verdict last: noise on the error
        stream (a watch reconnecting through an API server restart) never hides it.
        """
        proc = subprocess.run(
            [str(REPO / "hack" / script)], cwd=REPO, stdin=subprocess.DEVNULL,
            env=dict(os.environ, KUBECONFIG=self.kubeconfig, **env),
            capture_output=True, text=True, timeout=timeout, check=False,
        )
        output = proc.stdout + proc.stderr
        seen = f"{proc.stderr[-3000:]}\n{proc.stdout[-8000:]}"
        print(seen)
        assert proc.returncode == 0, f"{script} failed ({proc.returncode}):\n{seen}"
        return output

    @staticmethod
    def wait_for(
        probe: Callable[[], T | None],
        *,
        timeout: float = 60,
        interval: float = 0.5,
        what: str = "condition",
    ) -> T:
        """Poll ``probe`` until it returns something truthy; return that value.

        ApiExceptions count as "not yet". On timeout the last value or error
        is part of the failure message.
        """
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                value = probe()
                if value:
                    return value
                last = value
            except ApiException as e:
                last = f"ApiException {e.status}: {e.reason}"
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last}")
            time.sleep(interval)


def _reachable(kubeconfig: str) -> client.ApiClient | None:
    try:
        api = config.new_client_from_config(config_file=kubeconfig)
        client.VersionApi(api).get_code(_request_timeout=5)
        return api
    except Exception:
        return None


def _cluster_sh(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(CLUSTER_SH), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    env_kubeconfig = os.environ.get("KUBECONFIG")
    if env_kubeconfig and (api := _reachable(env_kubeconfig)):
        yield Cluster(kubeconfig=env_kubeconfig, api=api, started_here=False)
        return

    already = _cluster_sh("status", timeout=30).returncode == 0
    if not already:
        proc = _cluster_sh("up", timeout=UP_TIMEOUT)
        if proc.returncode != 0:
            _cluster_sh("down", timeout=120)
            pytest.fail(
                f"hack/cluster.sh up failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}",
                pytrace=False,
            )
    api = _reachable(str(LOCAL_KUBECONFIG))
    if api is None:
        if not already:
            _cluster_sh("down", timeout=120)
        pytest.fail(f"the local cluster is not reachable through {LOCAL_KUBECONFIG}")
    try:
        yield Cluster(kubeconfig=str(LOCAL_KUBECONFIG), api=api, started_here=not already)
    finally:
        if not already:
            down = _cluster_sh("down", timeout=120)
            if down.returncode != 0:
                print(f"hack/cluster.sh down failed:\n{down.stdout}\n{down.stderr}")


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    core = cluster.core
    core.create_namespace({"metadata": {"name": name, "labels": {"openrl-place/e2e": "true"}}})
    # Pod admission needs the namespace's default ServiceAccount, which
    # kube-controller-manager creates a moment after the namespace.
    cluster.wait_for(
        lambda: core.read_namespaced_service_account("default", name),
        timeout=60,
        what=f"ServiceAccount {name}/default",
    )
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except ApiException as e:
            if e.status != 404:
                raise


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test here is e2e; the e2e units (a module, or a group of tests/lanes.py) come
    first, the longest first (tests/lanes.py's ORDER), and the rest after them."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.e2e)
    items.sort(key=lambda item: lanes.rank(item.path.name, here in item.path.parents))
