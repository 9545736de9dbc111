"""The worker side loads nothing but the standard library and itself, in a fresh interpreter."""

from __future__ import annotations

import json
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
