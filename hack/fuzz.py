#!/usr/bin/env python3
"""Every OpenRLWorker gets an answer: hostile workers through the real API server.

Installs manifests/base in a fresh namespace (hack/lib/install.py), runs the
controller as its ServiceAccount in a child process, and sends seeded hostile
workers (hack/lib/worker_fuzz.py) as the gateway would, with the gateway's
token, a few at a time. Each one ends as one of:

* refused by the API server -- its message must name a field the case changed;
* answered -- the controller gave it a status (a phase, and a reason unless
  placed); it is then deleted, so placed ones give their seats back;
* stuck -- admitted, and no status within --answer-timeout.

Meanwhile plain workers keep arriving one after another, each of which must
be placed (Placing or Running) within --placed-timeout while the hostile ones
pass through. The controller's resident memory is sampled throughout.

Prints the counts, by outcome and by what each case changed, and ends with
``fuzz: PASS`` (nothing stuck, every refusal names a field, every plain
worker placed, peak memory under --max-rss-mb) or ``fuzz: FAIL``. Usage:

  KUBECONFIG=.cluster/admin.kubeconfig .venv/bin/python -m hack.fuzz \\
      [--count 300] [--seed 1] [--concurrency 6] [--json]

(from the repository root, as ``make fuzz`` runs it)

FUZZ_COUNT and FUZZ_SEED are the defaults of --count and --seed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hack.lib.install import ROOT, Install
from hack.lib.kube import WORKERS, KubeError
from hack.lib.names import API_VERSION, GATEWAY, GROUP, KIND, PLURAL, VERSION
from hack.lib.worker_fuzz import Case, generate

PLACED = ("Placing", "Running")


def names_a_field(message: str, fields: tuple[str, ...]) -> bool:
    """The refusal names one of the fields the case changed (or one inside it)."""
    for field in fields:
        if field in message:
            return True
        if field == "spec" and "spec." in message:
            return True  # a missing required field or an unknown one is named under spec
    return False


class Run:
    def __init__(self, inst: Install, args: argparse.Namespace) -> None:
        self.inst = inst
        self.args = args
        self.gateway = inst.api(GATEWAY)
        self.lock = threading.Lock()
        self.outcomes: Counter[str] = Counter()
        self.answers: Counter[str] = Counter()
        self.by_change: Counter[tuple[str, str]] = Counter()
        self.unnamed: list[str] = []
        self.stuck: list[str] = []
        self.errors: list[str] = []
        self.rss: list[tuple[int, float]] = []
        self.done = 0
        self.steady_waits: list[float] = []
        self.steady_late: list[str] = []
        self.stop = threading.Event()

    def count(self, outcome: str, case: Case | None = None, answer: str = "") -> None:
        with self.lock:
            self.outcomes[outcome] += 1
            if answer:
                self.answers[answer] += 1
            for what in (case.what if case else ()) or ("(unchanged)",):
                self.by_change[(what, outcome)] += 1
            self.done += 1

    def status(self, name: str) -> dict[str, Any]:
        gw = self.gateway
        got = gw.raw(gw.custom.get_namespaced_custom_object_status,
                     GROUP, VERSION, self.inst.namespace, PLURAL, name)
        return got.get("status") or {}

    def delete(self, name: str) -> None:
        self.gateway.delete(WORKERS, name)

    def one(self, case: Case) -> None:
        gw = self.gateway
        try:
            # The typed call, not ``create``: an AlreadyExists is a refusal to count here.
            gw.call(gw.custom.create_namespaced_custom_object,
                    GROUP, VERSION, self.inst.namespace, PLURAL, case.body)
        except KubeError as e:
            if 400 <= e.status < 500:
                message = e.message
                if names_a_field(message, case.fields):
                    self.count("refused by the API server", case)
                else:
                    self.count("refused by the API server", case)
                    with self.lock:
                        self.unnamed.append(f"{case.what}: {e.status} {message[:300]}")
                return
            with self.lock:
                self.errors.append(f"{case.name[:60]!r}: {e.status} {e.message[:200]}")
            self.count("error")
            return
        deadline = time.monotonic() + self.args.answer_timeout
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            status = self.status(case.name)
            if status.get("phase") and (status["phase"] in PLACED or status.get("reason")):
                break
            time.sleep(0.3)
        else:
            with self.lock:
                self.stuck.append(f"{case.name[:60]!r} {case.what} status={status}")
            self.count("stuck", case)
            self.delete(case.name)
            return
        kind = str(status.get("reason", "")).split(":", 1)[0]
        self.count("answered", case, f"{status['phase']}{' ' + kind if kind else ''}")
        self.delete(case.name)

    def steady(self) -> None:
        """Plain workers, one after another: each must be placed while the fuzz runs."""
        i = 0
        while not self.stop.is_set():
            name = f"steady-{i}"
            i += 1
            start = time.monotonic()
            self.gateway.create(WORKERS, {
                "apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name},
                "spec": {"role": "trainer", "modelId": "steady", "memory": "10Gi"}})
            phase = ""
            while time.monotonic() - start < self.args.placed_timeout:
                phase = self.status(name).get("phase", "")
                if phase in PLACED:
                    break
                time.sleep(0.3)
            waited = time.monotonic() - start
            with self.lock:
                if phase in PLACED:
                    self.steady_waits.append(waited)
                else:
                    self.steady_late.append(f"{name}: {self.status(name)}")
            self.delete(name)
            self.stop.wait(1.0)

    def sample_memory(self) -> None:
        while not self.stop.wait(1.0):
            try:
                self.rss.append((self.done, self.inst.controller_rss()[0]))
            except OSError:
                return

    def go(self) -> None:
        threads = [threading.Thread(target=self.steady, daemon=True),
                   threading.Thread(target=self.sample_memory, daemon=True)]
        for t in threads:
            t.start()
        # Cases are made as slots free up (a few hundred kB each at worst), and an
        # interrupted run stops at once rather than working through a queue.
        slots = threading.BoundedSemaphore(self.args.concurrency)
        pool = ThreadPoolExecutor(self.args.concurrency)
        failures: list[BaseException] = []

        def finished(future: Future[None]) -> None:
            slots.release()
            if future.exception() is not None:
                failures.append(future.exception())  # type: ignore[arg-type]

        try:
            for case in generate(self.args.seed, self.args.count):
                slots.acquire()
                if failures:
                    raise failures[0]
                pool.submit(self.one, case).add_done_callback(finished)
            pool.shutdown(wait=True)
            if failures:
                raise failures[0]
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            self.stop.set()
            for t in threads:
                t.join(self.args.placed_timeout + 10)


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt  # a TERM cleans up as an interrupt does


def quarters(samples: list[tuple[int, float]], count: int) -> list[float]:
    """The resident memory once a quarter, a half, ... of the cases were done."""
    out = []
    for q in (1, 2, 3, 4):
        seen = [rss for done, rss in samples if done <= count * q // 4]
        out.append(seen[-1] if seen else 0.0)
    return out


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=int(os.environ.get("FUZZ_COUNT", "300")))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED", "1")))
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--answer-timeout", type=float, default=60.0)
    parser.add_argument("--placed-timeout", type=float, default=60.0)
    parser.add_argument("--max-rss-mb", type=float, default=400.0)
    parser.add_argument("--driver", default=os.environ.get("FAKE_GPU_DRIVER", "gpu.example.com"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    kubeconfig = os.environ.get("KUBECONFIG") or str(ROOT / ".cluster" / "admin.kubeconfig")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="openrl-fuzz-"))
    inst = Install(kubeconfig, f"fuzz-{uuid.uuid4().hex[:6]}", workdir, driver=args.driver)
    started = time.monotonic()
    try:
        inst.create()
        inst.enable_nodes()
        inst.start_controller()
        run = Run(inst, args)
        run.go()
        rss_now, rss_peak = inst.controller_rss()
    finally:
        inst.close()
    elapsed = time.monotonic() - started
    figures = {
        "seed": args.seed, "tried": args.count,
        "refused_by_api_server": run.outcomes["refused by the API server"],
        "refusals_not_naming_a_field": len(run.unnamed),
        "answered": run.outcomes["answered"], "stuck": run.outcomes["stuck"],
        "errors": run.outcomes["error"], "answers": dict(run.answers.most_common()),
        "steady_placed": len(run.steady_waits), "steady_late": len(run.steady_late),
        "steady_longest_wait_s": round(max(run.steady_waits, default=0.0), 1),
        "controller_rss_mb": {"first": run.rss[0][1] if run.rss else None,
                              "by_quarter": quarters(run.rss, args.count),
                              "last": rss_now, "peak": rss_peak},
        "seconds": round(elapsed, 1),
    }
    print(f"fuzz: seed {args.seed}, {args.count} workers tried in {elapsed:.0f}s")
    print(f"  refused by the API server  {figures['refused_by_api_server']:>6}"
          f"  (not naming a field: {len(run.unnamed)})")
    print(f"  answered by the scheduler  {figures['answered']:>6}")
    for answer, n in run.answers.most_common():
        print(f"      {answer:<28} {n:>6}")
    print(f"  stuck                      {figures['stuck']:>6}")
    print(f"  errors                     {figures['errors']:>6}")
    print(f"  plain workers placed meanwhile: {len(run.steady_waits)} (late: "
          f"{len(run.steady_late)}), longest wait {figures['steady_longest_wait_s']}s")
    print(f"  controller RSS: first sample {figures['controller_rss_mb']['first']} MiB; "
          f"after each quarter {figures['controller_rss_mb']['by_quarter']} MiB; "
          f"peak {rss_peak} MiB")
    print("  by change:")
    for (what, outcome), n in sorted(run.by_change.items()):
        print(f"      {what[:50]:<50} {outcome:<26} {n:>5}")
    for line in run.unnamed[:10] + run.stuck[:10] + run.errors[:10] + run.steady_late[:5]:
        print(f"  ! {line}")
    ok = (not run.unnamed and not run.stuck and not run.errors and not run.steady_late
          and run.steady_waits and rss_peak <= args.max_rss_mb)
    if args.json:
        print(json.dumps(figures, indent=1))
    print(f"fuzz: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
