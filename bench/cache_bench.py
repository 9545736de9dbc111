"""The controller at fleet size: start-up list, memory per worker, CPU per decision; no cluster.

For each size (500, 10,000, 50,000 and 100,000 workers by default) a fresh
process starts the controller's watches (``Controller.start_watches``, the
same threads, pages, stripping and cache a new leader runs) against
synthetic list pages shaped like the API server's (``bench/fleet_pages.py``:
workers Running with their status, their pods with the status, conditions and
managedFields a server returns, allocated claims, nodes of 8 x 80Gi and their
ResourceSlices), paged as the controller pages its lists. Then it times
``DECISIONS`` new workers through the real reconcile path (cache read,
decision, assumption, the planned writes answered at once by an in-memory
stand-in for the API server). It prints, per size:

* ``load``: the CPU seconds from the first list request until every watch
  has listed (all threads, ``time.process_time``), less the CPU the stand-in
  server spent making and encoding the pages -- what a hand-over costs before
  the first decision;
* ``decision``: the CPU time per decision (best of --repeat batches, so the
  shared machine's noise counts least);
* ``RSS``: resident memory with that fleet listed (after a garbage
  collection); ``cache``: what listing added over the started, empty
  controller (the cache, the watches' bookkeeping, the queue); ``per worker``:
  that share over the number of workers; ``peak``: the high-water mark, which
  includes the pages in flight (and the stand-in server's copy of them);
* the move rule's timed pass (``Reconciler.rebalance``): its CPU per pass on
  that fleet (best of --repeat), printed after the table.

Targets (printed, not asserted): at most 4 KB per cached worker and about
450 MB of RSS with 100,000 (the empty process included); the start-up list of
100,000 in at most 30 s of CPU; per-decision CPU at the largest size at most
1.5x that at the smallest. It exits 0 unless --strict is given and one is
missed.

``--root DIR`` measures the controller of another checkout (a worktree of an
older revision, say) with this same benchmark; ``--compare DIR`` measures both,
size by size, one after the other, and prints the two tables and their ratios.

    .venv/bin/python bench/cache_bench.py [--sizes 500 10000 50000 100000] [--decisions 200]
        [--root DIR | --compare DIR] [--json]
"""

from __future__ import annotations

import argparse
import copy
import gc
import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SIZES = [500, 10_000, 50_000, 100_000]
KB_PER_WORKER = 4.0
RSS_TARGET_MB = 450
LOAD_TARGET_S = 30.0
CPU_RATIO_TARGET = 1.5

Obj = dict[str, Any]


def _status_kb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return float(line.split()[1])
    return 0.0


def rss_mb() -> float:
    return _status_kb("VmRSS") / 1024


def one(root: Path, size: int, decisions: int, repeat: int) -> dict[str, Any]:
    """Measure one size in this process (run once per fresh process), ``root``'s controller."""
    sys.path.insert(0, str(root))
    sys.path.insert(1, str(HERE))
    import fleet_pages as pages

    from controller.k8s import kube, naming
    from controller.loop import Controller
    from controller.reconcile.reconciler import Reconciler
    from controller.reconcile.writes import Writer
    from controller.settings import Settings

    class EchoApi:
        """Answers every write at once with the body and a new resourceVersion (no I/O)."""

        namespace = pages.NAMESPACE

        def __init__(self) -> None:
            self._rv = itertools.count(10_000_000)

        def create(self, res: Any, body: Obj, **_: Any) -> Obj:
            answer = copy.deepcopy(body)
            answer["metadata"].update(resourceVersion=str(next(self._rv)),
                                      uid=f"uid-{answer['metadata']['name']}",
                                      creationTimestamp=pages.STAMP)
            return answer

        def patch(self, res: Any, name: str, body: Obj, **_: Any) -> Obj:
            return {"metadata": {"name": name, "resourceVersion": str(next(self._rv))}, **body}

    settings = Settings(namespace=pages.NAMESPACE, identity="bench",
                        device_class=pages.DRIVER)
    fleet = pages.Fleet(size, room=decisions)
    server = pages.PagedApi(fleet)
    controller = Controller(kube.Kube(server, pages.NAMESPACE), settings,  # type: ignore[arg-type]
                            concurrency=0)
    pages.pod_obj(0)  # the template rendered once, before the empty figure
    gc.collect()
    empty = rss_mb()
    stop = threading.Event()
    started = time.process_time()
    if not controller.start_watches(stop):
        raise SystemExit("the watches did not list")
    load = time.process_time() - started - server.made_cpu
    stop.set()
    server.close()
    for watcher in controller.watchers:
        watcher.join(timeout=30)
    gc.collect()
    cached = rss_mb()
    peak = _status_kb("VmHWM") / 1024
    cache = controller.cache
    # What reconcile reads of the fleet: ``view`` where the cache offers it (older
    # revisions: the fleet cache itself, which had the same ``bookings``).
    reading = getattr(cache, "view", None) or cache.fleet

    api = EchoApi()
    writer = Writer(api, cache, concurrency=0)  # type: ignore[arg-type]
    reconciler = Reconciler(api, settings, cache=cache, writer=writer)  # type: ignore[arg-type]
    best = float("inf")
    serial = itertools.count()
    versions = itertools.count(100)  # after the list: the watch's events
    placed = 0
    for _ in range(repeat):
        batch = [f"new-{next(serial):06d}" for _ in range(decisions)]
        for name in batch:
            obj = pages.worker_obj(name, finalizer=naming.FINALIZER)
            obj["metadata"]["resourceVersion"] = str(next(versions))
            cache.event(kube.WORKERS, "ADDED", obj)
        began = time.process_time()
        for name in batch:
            reconciler.reconcile(name)
        best = min(best, (time.process_time() - began) / decisions)
        placed = min(placed or decisions,
                     sum(1 for name in batch if reading.bookings.get(name)))
        # Give the devices back (the workers leave), so every batch decides on the same fleet.
        for name in batch:
            gone = str(next(versions) + 20_000_000)  # after every answer of EchoApi
            cache.event(kube.WORKERS, "DELETED", {"metadata": {
                "name": name, "resourceVersion": gone}})
            cache.event(kube.PODS, "DELETED", {"metadata": {
                "name": naming.pod_name(name), "resourceVersion": gone}})
            cache.event(kube.CLAIMS, "DELETED", {"metadata": {
                "name": naming.claim_name(name, f"uid-{name}"), "resourceVersion": gone}})
    # The move rule's timed pass (every 15 s by default, under the cache's lock): its CPU
    # on this fleet, none of whose workers is movable. Older revisions have none.
    rebalance = getattr(reconciler, "rebalance", None)
    pass_ms = None
    if rebalance is not None:
        least = float("inf")
        for _ in range(repeat):
            began = time.process_time()
            rebalance()
            least = min(least, time.process_time() - began)
        pass_ms = round(least * 1000, 3)
    share = cached - empty
    return {"workers": size, "move_pass_cpu_ms": pass_ms, "decided": placed, "pages": server.pages,
            "load_cpu_s": round(load, 2),
            "decision_cpu_ms": round(best * 1000, 3),
            "rss_mb": round(cached, 1), "cache_mb": round(share, 1),
            "kb_per_worker": round(share * 1024 / size, 2),
            "peak_mb": round(peak, 1)}


def measure(root: Path, sizes: list[int], decisions: int, repeat: int) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        proc = subprocess.run([sys.executable, __file__, "--one", str(size), "--root", str(root),
                               "--decisions", str(decisions), "--repeat", str(repeat)],
                              capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"{root} at {size} workers failed:\n{proc.stderr[-3000:]}")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return rows


def table(title: str, rows: list[dict[str, Any]]) -> str:
    lines = [title,
             f"{'workers':>8} {'load CPU':>9} {'decision':>10} {'RSS':>9} {'cache':>9} "
             f"{'per worker':>11} {'peak':>9}"]
    for r in rows:
        lines.append(f"{r['workers']:>8} {r['load_cpu_s']:>7.1f} s "
                     f"{r['decision_cpu_ms']:>7.3f} ms {r['rss_mb']:>6.1f} MB "
                     f"{r['cache_mb']:>6.1f} MB {r['kb_per_worker']:>8.2f} KB "
                     f"{r['peak_mb']:>6.1f} MB")
    small, large = rows[0], rows[-1]
    ratio = large["decision_cpu_ms"] / max(small["decision_cpu_ms"], 1e-9)
    lines.append(
        f"per-decision CPU {large['workers']} vs {small['workers']}: {ratio:.2f}x "
        f"(target <= {CPU_RATIO_TARGET}x); at {large['workers']}: {large['kb_per_worker']:.2f} "
        f"KB per worker (target <= {KB_PER_WORKER:.0f}), RSS {large['rss_mb']:.0f} MB, "
        f"load {large['load_cpu_s']:.1f} s CPU")
    passes = [f"{r['move_pass_cpu_ms']:.1f} ms at {r['workers']}" for r in rows
              if r.get("move_pass_cpu_ms") is not None]
    if passes:
        lines.append("the move rule's pass (every 15 s, no worker movable): "
                     + ", ".join(passes))
    return "\n".join(lines)


def missed(rows: list[dict[str, Any]]) -> list[str]:
    small, large = rows[0], rows[-1]
    out = []
    if large["decision_cpu_ms"] > CPU_RATIO_TARGET * small["decision_cpu_ms"]:
        out.append("per-decision CPU ratio")
    if large["kb_per_worker"] > KB_PER_WORKER:
        out.append("memory per worker")
    if large["workers"] >= 100_000 and large["load_cpu_s"] > LOAD_TARGET_S:
        out.append("start-up list CPU")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    parser.add_argument("--decisions", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--root", type=Path, default=HERE.parent,
                        help="the checkout whose controller is measured (default: this one)")
    parser.add_argument("--compare", type=Path, metavar="DIR",
                        help="also measure DIR's controller, size by size, in the same run")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--strict", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args()
    root = args.root.resolve()
    if args.one:
        print(json.dumps(one(root, args.one, args.decisions, args.repeat)))
        return 0
    runs: dict[str, list[dict[str, Any]]] = {}
    if args.compare:
        other = args.compare.resolve()
        runs = {str(other): [], str(root): []}
        for size in args.sizes:  # alternate, so both see the same machine
            runs[str(other)] += measure(other, [size], args.decisions, args.repeat)
            runs[str(root)] += measure(root, [size], args.decisions, args.repeat)
    else:
        runs[str(root)] = measure(root, args.sizes, args.decisions, args.repeat)
    if args.json:
        print(json.dumps(runs, indent=2))
    else:
        print("\n\n".join(table(name, rows) for name, rows in runs.items()))
        if args.compare:
            before, after = runs[str(args.compare.resolve())], runs[str(root)]
            print("\nafter / before:")
            for b, a in zip(before, after, strict=True):
                print(f"{a['workers']:>8}  load {a['load_cpu_s'] / max(b['load_cpu_s'], 1e-9):.2f}x"
                      f"  decision {a['decision_cpu_ms'] / max(b['decision_cpu_ms'], 1e-9):.2f}x"
                      f"  RSS {a['rss_mb'] / max(b['rss_mb'], 1e-9):.2f}x"
                      f"  per worker {a['kb_per_worker'] / max(b['kb_per_worker'], 1e-9):.2f}x")
    return 1 if args.strict and missed(runs[str(root)]) else 0


if __name__ == "__main__":
    sys.exit(main())
