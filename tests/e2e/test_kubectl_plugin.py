"""``kubectl openrl``: the real kubectl finds the plugin on PATH and runs it against the cluster.

kubectl here is the one the local control plane's build makes
(``hack/bin/kubectl``, a name for the multi-call ``hack/bin/kube``); the plugin
is the ``kubectl-openrl`` console script installed beside this Python. The
fleet: every fake node filled by one worker needing all its devices (one
worker per claim), then one more that must wait.
"""
# The fixtures come from controller_fixtures (tests/e2e/conftest.py belongs to
# the control plane); importing them makes every test parameter a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from controller_fixtures import Env, GiB, GpuNode, crd, gpu_nodes, orw  # noqa: F401

from cli.options import count

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = ROOT / "hack" / "bin" / "kubectl"
PLUGIN_DIR = Path(sys.executable).parent  # where pip put the kubectl-openrl script


def kubectl(*args: str, kubeconfig: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real kubectl, with the plugin on PATH; print the exchange for ``-rA`` and failures."""
    assert KUBECTL.exists(), f"{KUBECTL} is missing: run hack/cluster.sh build"
    assert (PLUGIN_DIR / "kubectl-openrl").exists(), "kubectl-openrl is not installed: make setup"
    env = dict(os.environ, PATH=f"{PLUGIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("KUBECONFIG", None)
    if kubeconfig is not None:
        env["KUBECONFIG"] = kubeconfig
    done = subprocess.run([str(KUBECTL), *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    print(f"$ kubectl {' '.join(args)}\n{done.stdout}{done.stderr}(exit {done.returncode})")
    return done


def fill_then_wait(orw: Env, nodes: list[GpuNode]) -> tuple[str, int]:
    """Workers needing every device of the largest node, one per node that fits, all
    Running; then ``late``, waiting for capacity. The memory and the number seated."""
    orw.start()
    largest = max(nodes, key=lambda n: (n.devices * n.device_memory, n.name))
    needed = (largest.devices - 1) * largest.device_memory + GiB
    memory = f"{needed // GiB}Gi"
    seated = sum(1 for n in nodes if n.devices * n.device_memory >= needed)
    for i in range(seated):
        orw.create_worker(f"big{i}", memory)
    for i in range(seated):
        orw.wait_phase(f"big{i}", "Running", timeout=120)
    orw.create_worker("late", memory)
    orw.cluster.wait_for(lambda: orw.status("late").get("reason", "").startswith(
        "WaitingForCapacity"), what="late to wait for capacity")
    return memory, seated


def test_kubectl_openrl_explain_and_snapshot(orw: Env, gpu_nodes: list[GpuNode]) -> None:
    memory, seated = fill_then_wait(orw, gpu_nodes)
    where = ["-n", orw.namespace, "--kubeconfig", orw.cluster.kubeconfig,
             "--device-class", orw.cluster.driver]

    listed = kubectl("plugin", "list")
    assert "kubectl-openrl" in listed.stdout, listed.stderr

    explained = kubectl("openrl", "explain", "late", *where)
    assert explained.returncode == 0, explained.stderr
    lines = explained.stdout.splitlines()
    assert lines[0] == f"worker late (trainer, {memory}, owner late): Pending"
    assert lines[1].startswith("reason: WaitingForCapacity")
    assert "nodes:" in lines
    for node in gpu_nodes:
        assert any(line.startswith(f"  {node.name} ") for line in lines), node.name
    assert any(line.startswith("would seat it: ") for line in lines)

    holder = kubectl("openrl", "explain", "big0", *where)
    assert holder.returncode == 0, holder.stderr
    assert holder.stdout.splitlines()[1].startswith("holds a seat on claim orw-big0-")

    snapshot = kubectl("openrl", "snapshot", *where)
    assert snapshot.returncode == 0, snapshot.stderr
    assert (f"snapshot: simulate reproduces the cluster's placements "
            f"({count(len(gpu_nodes), 'node')}, {count(seated, 'worker')} seated, "
            "1 waiting)") in snapshot.stderr
    document = yaml.safe_load(snapshot.stdout)
    assert [e["arrive"]["name"] for e in document["events"]] == [
        *(f"big{i}" for i in range(seated)), "late"]
    assert snapshot.stdout.startswith("# kubectl openrl snapshot: simulate reproduces")

    missing = kubectl("openrl", "explain", "nobody", *where)
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        f"kubectl openrl explain: no OpenRLWorker nobody in namespace {orw.namespace}")


def test_the_namespace_comes_from_the_context_as_in_kubectl(
        orw: Env, gpu_nodes: list[GpuNode], tmp_path: Path) -> None:
    fill_then_wait(orw, gpu_nodes)
    config = yaml.safe_load(Path(orw.cluster.kubeconfig).read_text())
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    config["contexts"].append({"name": "openrl-e2e",
                               "context": {**current["context"], "namespace": orw.namespace}})
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    device = ["--device-class", orw.cluster.driver]

    # --context picks it out of $KUBECONFIG (as kubectl's own commands would)...
    chosen = kubectl("openrl", "explain", "late", "--context", "openrl-e2e", *device,
                     kubeconfig=str(kubeconfig))
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout.startswith("worker late (trainer, ")
    # ... the current context names no namespace: the controller's default, where late is not.
    default = kubectl("openrl", "explain", "late", *device, kubeconfig=str(kubeconfig))
    assert default.returncode == 2
    assert default.stderr.strip().endswith("no OpenRLWorker late in namespace openrl")
    # -n wins over the context's.
    flag = kubectl("openrl", "explain", "late", "--context", "openrl-e2e", "-n", "openrl",
                   *device, kubeconfig=str(kubeconfig))
    assert flag.returncode == 2
    assert "no OpenRLWorker late in namespace openrl" in flag.stderr
