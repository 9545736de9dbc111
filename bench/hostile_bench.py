"""How ``openrl-place simulate`` holds up against adversarial shapes and very large files.

Two measurements, each end to end (``openrl-place simulate`` as a
subprocess, output to /dev/null):

* Adversarial shapes (bench/adversarial.py) at 10,000 and 100,000 events:
  events/s, and the growth of the cost per event from the smaller to the
  larger (1.0x = flat; a path that scans every pending worker or class per
  event grows ~10x). Target: >= 20,000 events/s at 100,000 events and at
  most 2x growth per 10x.
* A ~50 MB generated scenario (bench/generate.py, about 880,000 events) as
  JSON and as its YAML twin, in both output modes: wall time and peak memory
  (the child's maximum resident set), per event.

``many-claims`` (bench/adversarial.py) is left out unless named: its cost
grows with the claims on one node, which the node's devices bound (a real
node has a handful), so it is outside the target.

``--baseline REV`` measures a git revision in the same run, side by side, from
a temporary worktree, so the two are compared on the same machine and load.
A run that passes ``--timeout`` is reported as such, not waited out.

    .venv/bin/python bench/hostile_bench.py [--events 10000 100000] [--baseline main]
    .venv/bin/python bench/hostile_bench.py --skip-memory --shapes distinct-sizes
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.adversarial import OUTSIDE_TARGET, SHAPES  # noqa: E402

OUT = ROOT / "bench" / "out"
TARGET_EVENTS_PER_SECOND = 20_000
TARGET_GROWTH = 2.0
# Events of the large scenario: about 50 MB of JSON with the generator's names.
LARGE_EVENTS = 880_000
LARGE_NODES = 10_000


@dataclass(frozen=True)
class Run:
    seconds: float | None  # None: stopped at the timeout
    peak_bytes: int
    status: int


@dataclass(frozen=True)
class Tree:
    """A source tree to run the command from: this checkout, or a baseline revision."""

    label: str
    root: Path

    def command(self) -> list[str]:
        return [sys.executable, "-c",
                f"import sys; sys.path.insert(0, {str(self.root)!r}); "
                "from cli.main import main; main()"]


def run(tree: Tree, path: Path, output: str, timeout: float) -> Run:
    """One end-to-end run; the child's peak memory from the kernel's own accounting."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        child = subprocess.Popen([*tree.command(), "simulate", "--output", output,
                                  "--max-size", "1Gi", str(path)] if _has_max_size(tree) else
                                 [*tree.command(), "simulate", "--output", output, str(path)],
                                 stdout=sink, stderr=subprocess.PIPE, cwd=tree.root)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                child.kill()
                _, status, usage = os.wait4(child.pid, 0)
                child.returncode = -9
                return Run(None, usage.ru_maxrss * 1024, -9)
            time.sleep(0.01)
    elapsed = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    child.returncode = code
    if code not in (0, 1):
        stderr = child.stderr.read().decode() if child.stderr else ""
        raise SystemExit(f"{tree.label}: simulate failed on {path} ({code}): {stderr[:500]}")
    return Run(elapsed, usage.ru_maxrss * 1024, code)


def _has_max_size(tree: Tree) -> bool:
    return "max-size" in (tree.root / "cli" / "main.py").read_text()


@contextlib.contextmanager
def trees(baseline: str | None) -> Iterator[list[Tree]]:
    found = [Tree("this tree", ROOT)]
    if baseline is None:
        yield found
        return
    with tempfile.TemporaryDirectory(prefix="hostile-bench-") as folder:
        where = Path(folder) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(where),
                        baseline], check=True)
        try:
            found.append(Tree(f"baseline {baseline}", where))
            for tree in found:
                compile_tree(tree)
            yield found
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(where)], check=False)


def compile_tree(tree: Tree) -> None:
    # As pip install would: PYTHONDONTWRITEBYTECODE is set on these machines.
    for package in ("placement", "cli"):
        compileall.compile_dir(tree.root / package, quiet=1)


def shape_file(shape: str, events: int) -> Path:
    OUT.mkdir(exist_ok=True)
    path = OUT / f"adversarial-{shape}-{events}.json"
    if not path.exists():
        _in_child(f"from bench.adversarial import SHAPES; import json, pathlib; "
                  f"pathlib.Path({str(path)!r}).write_text(json.dumps(SHAPES[{shape!r}]({events})))")
    return path


def large_files() -> tuple[Path, Path]:
    """The ~50 MB generated scenario as JSON, and the same document as YAML."""
    OUT.mkdir(exist_ok=True)
    json_path = OUT / f"large-{LARGE_NODES}n-{LARGE_EVENTS}e.json"
    yaml_path = json_path.with_suffix(".yaml")
    if not json_path.exists():
        _in_child(f"from bench.generate import generate; import json, pathlib; "
                  f"pathlib.Path({str(json_path)!r}).write_text(json.dumps("
                  f"generate({LARGE_NODES}, {LARGE_EVENTS}, seed=1)))")
    if not yaml_path.exists():
        # Flow style per event, one event a line: what a person or a YAML tool would write.
        _in_child(f"import json, yaml; document = json.load(open({str(json_path)!r})); "
                  f"yaml.dump(document, open({str(yaml_path)!r}, 'w'), "
                  "Dumper=getattr(yaml, 'CSafeDumper', yaml.SafeDumper), "
                  "default_flow_style=None, width=200, sort_keys=False)")
    return json_path, yaml_path


def _in_child(code: str) -> None:
    """Run ``code`` in a fresh interpreter.

    A child's peak memory, as the kernel reports it, starts from its parent's
    size at the fork: this process must stay small for the figures to be the
    child's own, so the large documents are built elsewhere.
    """
    subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                    + code], check=True)


def _seconds(result: Run, timeout: float) -> str:
    return f"> {timeout:.0f}s" if result.seconds is None else f"{result.seconds:.2f}s"


def shapes_table(found: list[Tree], shapes: list[str], sizes: list[int], repeat: int,
                 timeout: float) -> list[str]:
    missed: list[str] = []
    small, large = min(sizes), max(sizes)
    header = f"{'shape':<18} {'tree':<22}" + "".join(
        f" {f'{size:,} ev':>10} {'events/s':>9}" for size in sizes) + f" {'growth/10x':>10}"
    print(header)
    for shape in shapes:
        for tree in found:
            cells = []
            rates: dict[int, float | None] = {}
            for size in sizes:
                path = shape_file(shape, size)
                best: Run | None = None
                for _ in range(repeat):
                    result = run(tree, path, "json", timeout)
                    if best is None or (result.seconds or 1e9) < (best.seconds or 1e9):
                        best = result
                    if result.seconds is None:
                        break
                assert best is not None
                rates[size] = size / best.seconds if best.seconds else None
                rate = f"{rates[size]:,.0f}" if rates[size] else "-"
                cells.append(f" {_seconds(best, timeout):>10} {rate:>9}")
            growth = "-"
            low, high = rates.get(small), rates.get(large)
            if low and high and large > small:
                per_10x = (low / high) ** (1 / math.log10(large / small))
                growth = f"{per_10x:.2f}x"
                if tree is found[0] and per_10x > TARGET_GROWTH:
                    missed.append(f"{shape}: growth {per_10x:.2f}x")
            if tree is found[0] and (rates.get(large) or 0) < TARGET_EVENTS_PER_SECOND:
                missed.append(f"{shape}: {rates.get(large) or 0:,.0f} events/s at {large:,}")
            print(f"{shape:<18} {tree.label:<22}" + "".join(cells) + f" {growth:>10}")
    return missed


def memory_table(found: list[Tree], timeout: float, kinds: list[str]) -> None:
    json_path, yaml_path = large_files()
    events = LARGE_EVENTS
    print(f"\n{'file':<28} {'output':<6} {'tree':<22} {'wall':>9} {'peak':>9} {'per event':>10}")
    for path in (json_path, yaml_path):
        if path.suffix[1:] not in kinds:
            continue
        size = f"{path.suffix[1:].upper()} {path.stat().st_size / 1e6:,.0f} MB"
        for output in ("json", "table"):
            for tree in found:
                result = run(tree, path, output, timeout)
                per_event = result.peak_bytes / events
                print(f"{size:<28} {output:<6} {tree.label:<22} {_seconds(result, timeout):>9} "
                      f"{result.peak_bytes / 2**20:>7,.0f}MB {per_event:>8,.0f} B")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--shapes", nargs="+", choices=sorted(SHAPES),
                        default=[shape for shape in SHAPES if shape not in OUTSIDE_TARGET])
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell; best is kept")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    parser.add_argument("--baseline", metavar="REV", help="also measure this git revision")
    parser.add_argument("--skip-memory", action="store_true", help="no 50 MB scenario runs")
    parser.add_argument("--skip-shapes", action="store_true", help="no adversarial shapes")
    parser.add_argument("--large", nargs="+", choices=["json", "yaml"], default=["json", "yaml"],
                        help="which of the large scenario's two files to measure")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    missed: list[str] = []
    with trees(args.baseline) as found:
        compile_tree(found[0])
        if not args.skip_shapes:
            print(f"adversarial shapes: openrl-place simulate --output json, end to end, "
                  f"best of {args.repeat} (target >= {TARGET_EVENTS_PER_SECOND:,} events/s at "
                  f"{max(args.events):,} events, cost per event growing <= {TARGET_GROWTH}x "
                  "per 10x)")
            missed = shapes_table(found, args.shapes, args.events, args.repeat, args.timeout)
            print("targets: " + ("all met" if not missed else "MISSED " + "; ".join(missed)))
        if not args.skip_memory:
            memory_table(found, args.timeout * 10, args.large)
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
