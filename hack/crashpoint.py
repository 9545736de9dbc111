"""The controller with one crash or pause planted in its API calls, for the fault tests.

    python -m hack.crashpoint VERB:RESOURCE:K:WHEN [controller flags ...]

runs ``openrl-place controller`` with its flags, after wrapping the one door
every request goes through (``controller.k8s.kube.Kube._send``): at the K-th
request of that verb and resource (named as RBAC names them, e.g.
``create:pods:3:before`` or ``patch:openrlworkers/status:1:after``) the process

* ``before``: kills itself (SIGKILL) just before sending it;
* ``after``: kills itself just after its answer came back; a refused request
  raises as it would, nothing is killed, and it is not counted: K counts the
  answered ones (a write refused on a conflict, say, is written again, and
  that is the write the point means);
* ``stop``: stops itself (SIGSTOP) just before sending it, as a long pause
  would, and sends it once resumed (SIGCONT).

The product knows nothing of this: only hack/chaos.py and the e2e tests start
the controller this way (``launcher``).
"""

from __future__ import annotations

import functools
import inspect
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from controller.k8s import kube

__all__ = ["CrashPoint", "launcher", "main", "plant"]

ROOT = Path(__file__).resolve().parents[1]
WHEN = ("before", "after", "stop")


@attrs.frozen
class CrashPoint:
    verb: str
    resource: str  # "pods", "openrlworkers/status"
    count: int  # the k-th such request, from 1
    when: str  # one of WHEN

    @classmethod
    def parse(cls, spec: str) -> CrashPoint:
        parts = spec.split(":")
        if (len(parts) != 4 or not all(parts) or not parts[2].isdigit() or int(parts[2]) < 1
                or parts[3] not in WHEN):
            raise ValueError(f"crash point {spec!r}: want VERB:RESOURCE:K:WHEN with K from 1 "
                             f"and WHEN one of {', '.join(WHEN)}")
        return cls(parts[0], parts[1], int(parts[2]), parts[3])


Kill = Callable[[int, int], None]


def plant(point: CrashPoint, kill: Kill = os.kill) -> Callable[[], None]:
    """Wrap ``Kube._send`` so the process meets ``point``; returns what unwraps it."""
    original = kube.Kube._send
    signature = inspect.signature(original)
    seen: Counter[tuple[str, str]] = Counter()
    lock = threading.Lock()

    @functools.wraps(original)
    def send(*args: Any, **kwargs: Any) -> Any:
        call = signature.bind(*args, **kwargs).arguments
        res: kube.Resource = call["res"]
        sub = call.get("subresource")
        key = (str(call["verb"]), f"{res.plural}/{sub}" if sub else res.plural)
        if point.when == "after":
            response = original(*args, **kwargs)  # refused: raises, and is not counted
            with lock:
                seen[key] += 1
                hit = key == (point.verb, point.resource) and seen[key] == point.count
            if hit:
                kill(os.getpid(), signal.SIGKILL)
            return response
        with lock:
            seen[key] += 1
            hit = key == (point.verb, point.resource) and seen[key] == point.count
        if hit:
            kill(os.getpid(), signal.SIGSTOP if point.when == "stop" else signal.SIGKILL)
        return original(*args, **kwargs)

    kube.Kube._send = send  # type: ignore[method-assign]

    def unplant() -> None:
        kube.Kube._send = original  # type: ignore[method-assign]

    return unplant


def launcher(spec: str) -> list[str]:
    """The command that starts the controller with ``spec`` planted (no spec: none);
    its flags follow. Run it from the repository root."""
    if not spec:
        return [str(ROOT / ".venv" / "bin" / "openrl-place"), "controller"]
    CrashPoint.parse(spec)  # a bad spec is the caller's mistake: say so here, not in the child
    return [str(ROOT / ".venv" / "bin" / "python"), "-m", "hack.crashpoint", spec]


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit("usage: python -m hack.crashpoint VERB:RESOURCE:K:WHEN [controller flags]")
    try:
        point = CrashPoint.parse(argv[0])
    except ValueError as error:
        sys.exit(str(error))
    plant(point)
    from controller.main import command

    command(args=argv[1:], prog_name="openrl-place controller")


if __name__ == "__main__":
    main(sys.argv[1:])
