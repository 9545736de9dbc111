"""The share of turns joiners are served, checkout against checkout.

For comparing two join rankings on whole days with turns played: each
scenario (``examples/day.yaml`` and ``examples/rl-day.yaml`` unless named)
is replayed by ``openrl-place simulate -o json`` with each checkout ROOT's
code, with the turn policy's defaults added (``turns: {}``) where the
scenario plays none. Of the workers that joined a claim (one the simulator
cut for another worker: not ``claim-<worker>`` nor ``claim-<worker>-N``) and
wanted the device at some point, it prints how many there are, their served
share (resident while wanting it, over wanting it) at worst, at the tenth
percentile, the median and the mean, and how many were served under 40% of
the time.

    git worktree add /tmp/base <commit>
    .venv/bin/python bench/join_share.py /tmp/base .
    .venv/bin/python bench/join_share.py /tmp/base . --scenarios examples/sharing.yaml \
        bench/out/scenario-1000n-30000e-s1-timed.json   # (JSON: the key added)

A measurement, not a test: it prints and exits 0.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("examples/day.yaml", "examples/rl-day.yaml")
LOW = 0.4  # a joiner served less than this is counted


def with_turns(path: Path, folder: Path) -> Path:
    """``path`` itself when it plays turns, else a copy that does (``turns: {}``)."""
    text = path.read_text()
    copy = folder / path.name
    if path.suffix == ".json":
        document = json.loads(text)
        if "turns" in document:
            return path
        copy.write_text(json.dumps({"turns": {}, **document}))
        return copy
    if re.search(r"^turns:", text, re.MULTILINE):
        return path
    copy.write_text(f"turns: {{}}\n{text}")
    return copy


def simulate(root: Path, path: Path) -> dict[str, object]:
    """``simulate -o json`` of ``path`` with ``root``'s code."""
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(root)!r}); "
         "from cli.main import main; main()", "simulate", "-o", "json", str(path)],
        capture_output=True, text=True, check=False)
    document: dict[str, object] = json.loads(done.stdout)
    return document


def joined(worker: str, claim: str) -> bool:
    """Whether ``claim`` was cut for another worker (the simulator names a claim for the
    worker it cut it for)."""
    return claim != f"claim-{worker}" and not re.fullmatch(
        rf"claim-{re.escape(worker)}-\d+", claim)


def joiners_served(document: dict[str, object]) -> list[float]:
    turns = document.get("turns")
    if not isinstance(turns, dict):
        return []
    return sorted(row["servedShare"] for worker, row in turns["workers"].items()
                  if joined(worker, row["claim"]) and row["servedShare"] is not None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", help="checkouts to compare")
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        for name in args.scenarios:
            path = with_turns(ROOT / name, Path(folder))
            added = "" if path == ROOT / name else " (turns: {} added)"
            print(f"{name}{added}")
            for root in args.roots:
                served = joiners_served(simulate(Path(root).resolve(), path))
                if not served:
                    print(f"  {root}: no joiner wanted the device")
                    continue
                low = sum(share < LOW for share in served)
                tenth = served[len(served) // 10]
                print(f"  {root}: {len(served)} joiners; served share worst "
                      f"{served[0]:.1%}, tenth percentile {tenth:.1%}, median "
                      f"{statistics.median(served):.1%}, mean {statistics.fmean(served):.1%}; "
                      f"{low} under {LOW:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
