"""Which of the scheduler's refused requests show a missing RBAC rule.

A run with the scheduler authenticated as its own ServiceAccount doubles as
the proof that the shipped RBAC is enough. One exception must not fail it:
right after an API server (re)start, its authorizer answers 403 for a moment
while it loads the RBAC objects, and the scheduler's watches and reads retry
through that. The rule that tells the two apart:

* a refused (verb, resource) that the same scheduler was later allowed (its
  /metrics count a 2xx for the very same verb and resource, subresource
  included) was the warm-up window, and is excused;
* one never allowed during the run is a missing rule, and is reported;
* a refusal in the log whose verb and resource cannot be read, or with no
  /metrics to weigh it against, is reported.

    rbac.py METRICS LOG    prints the unexcused refusals, one a line
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

__all__ = ["denials"]

_SAMPLE = re.compile(r'^openrl_place_api_requests_total\{(.*)\} ([0-9.eE+-]+)$')
_REFUSED = re.compile(r'cannot (\w+) resource \\?"([\w./-]+)\\?"')


def _label(labels: str, name: str) -> str:
    found = re.search(rf'{name}="([^"]*)"', labels)
    return found.group(1) if found else ""


def requests(metrics: str) -> Counter[tuple[str, str, str]]:
    """(verb, resource, code) -> count, from the scheduler's /metrics text."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for line in metrics.splitlines():
        m = _SAMPLE.match(line)
        if m:
            key = (_label(m.group(1), "verb"), _label(m.group(1), "resource"),
                   _label(m.group(1), "code"))
            counts[key] += round(float(m.group(2)))
    return counts


def denials(metrics: str | None, log: str) -> list[str]:
    """The refusals that point at a missing rule, as lines to print."""
    counts = requests(metrics or "")
    allowed = {(verb, res) for (verb, res, code), n in counts.items()
               if n and code.startswith("2")}
    problems: list[str] = []
    for (verb, res, code), n in sorted(counts.items()):
        if code == "403" and n and (verb, res) not in allowed:
            problems.append(f"{verb} {res}: refused {n} time(s), never allowed")
    seen: set[str] = set()
    for line in log.splitlines():
        if "403 Forbidden" not in line and "is forbidden: " not in line:
            continue
        m = _REFUSED.search(line)
        excused = metrics is not None and m is not None and \
            (m.group(1), m.group(2)) in allowed
        if not excused:
            text = line.strip()[:300]
            if text not in seen:
                seen.add(text)
                problems.append(text)
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: rbac.py METRICS LOG", file=sys.stderr)
        return 2
    metrics_file, log_file = (Path(a) for a in argv)
    metrics = metrics_file.read_text() if metrics_file.is_file() else None
    log = log_file.read_text(errors="replace") if log_file.is_file() else ""
    for line in denials(metrics, log)[:5]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
