"""The worker side loads nothing but the standard library and itself, in a fresh interpreter."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
WORKER_SIDE = ["timeslicer", "timeslicer.protocol", "timeslicer.client", "timeslicer.adapters",
               "timeslicer.adapters.vllm", "timeslicer.adapters.sglang"]
PROBE = """
import json, sys
before = set(sys.modules)
for name in sys.argv[1:]:
    __import__(name)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_importing_the_worker_side_loads_only_the_standard_library() -> None:
    loaded = json.loads(subprocess.run(
        [sys.executable, "-I", "-c", PROBE, *WORKER_SIDE], cwd=ROOT, capture_output=True,
        text=True, check=True).stdout)
    outside = [name for name in loaded if name.split(".")[0] not in sys.stdlib_module_names
               and not (name == "timeslicer" or name.startswith("timeslicer."))]
    assert not outside, f"the worker side loads {outside}"
    assert not [name for name in loaded if name.startswith("timeslicer.agent")]


BLOCKED = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("kubernetes", "prometheus_client"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
from cli.main import main
sys.argv = ["openrl-place", *sys.argv[1:]]
main()
"""


def test_the_agent_runs_local_on_the_plain_install(tmp_path: Path) -> None:
    """Without the controller extra (no kubernetes, no prometheus_client): --local runs,
    logs its start, and stops cleanly; the cluster mode says which extra it needs."""
    (tmp_path / "claim-a" / "m1").mkdir(parents=True)
    agent = subprocess.Popen(
        [sys.executable, "-I", "-c", BLOCKED, "timeslicer", "--local", str(tmp_path),
         "--nvml", "off", "--log-format", "text", "--log-level", "info"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert agent.stderr is not None
    seen = []
    for line in agent.stderr:
        seen.append(line)
        if "agent started" in line:
            break
    agent.send_signal(signal.SIGTERM)
    rest = agent.communicate(timeout=20)[1]
    text = "".join(seen) + rest
    assert agent.returncode == 0, text
    assert "prometheus_client is not installed" in text and "Traceback" not in text
    cluster = subprocess.run([sys.executable, "-I", "-c", BLOCKED, "timeslicer", "--node", "n1"],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert cluster.returncode == 2
    assert "needs the controller extra" in cluster.stderr, cluster.stderr
