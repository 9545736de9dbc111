"""Join decisions against one owner on many claims: microseconds per decision by fleet size.

The join ranking reads a claim differently for a joiner whose owner is on it
(``policy.turn_round``), so a search for such a joiner leaves its owner's
claims out of the open seats' buckets. The hostile shapes: N claims of two
workers, all of owner ``big`` (one owner per claim) or of ``big`` and one
other owner each (several owners per claim), names first, and one claim of
others last by name; a sampler of ``big`` arrives (it belongs on the last,
where it gets a half of the turns rather than a third). Flat per decision as
N grows means the search reads bounds, not ``big``'s claims.

    .venv/bin/python bench/owner_shapes.py [ROOT ...]   # ROOT: a checkout (default: this)

A measurement, not a test: it prints and exits 0.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

SIZES = (1_000, 10_000, 50_000)
REPEAT = 200


def child(root: str) -> None:
    sys.path.insert(0, root)
    from placement import Booking, Claim, GiB, Node, Request, Role
    from placement.decide import find_seat
    from placement.fleet import Fleet

    for several in (False, True):
        for n in SIZES:
            nodes = [Node(f"n{i:06d}", 1, 80 * GiB, 4096 * GiB, max_workers_per_claim=4)
                     for i in range(n + 1)]
            claims = [Claim(f"c{i:06d}", f"n{i:06d}", 1, bookings=(
                Booking(f"b{i}", "big", GiB, role=Role.SAMPLER),
                Booking(f"s{i}", f"p{i}" if several else "big", GiB, role=Role.SAMPLER)))
                for i in range(n)]
            claims.append(Claim("z", f"n{n:06d}", 1, bookings=(
                Booking("z1", "other", GiB, role=Role.SAMPLER),
                Booking("z2", "other2" if several else "other", GiB, role=Role.SAMPLER))))
            fleet = Fleet(nodes, claims)
            joiner = Request("j", Role.SAMPLER, 10 * GiB, owner="big")
            seat = find_seat(joiner, fleet)
            start = time.perf_counter()
            for _ in range(REPEAT):
                find_seat(joiner, fleet)
            per = (time.perf_counter() - start) / REPEAT
            shape = "several owners" if several else "one owner"
            print(f"  {shape} per claim, {n:>6} claims of big: {per * 1e6:8.1f} us/decision, "
                  f"joins {getattr(seat, 'claim', seat)}")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        child(argv[1])
        return 0
    for root in argv or ["."]:
        print(root)
        done = subprocess.run([sys.executable, __file__, "--child", str(Path(root).resolve())],
                              capture_output=True, text=True, check=False)
        print(done.stdout + done.stderr, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
