"""``openrl-turn-sglang``: the sidecar for an SGLang server with its memory saver.

SGLang must run with ``--enable-memory-saver``, which makes
``POST /release_memory_occupation`` and ``POST /resume_memory_occupation``
(JSON body ``{}``: every region, weights and KV cache) free and take back
its device memory. It has no endpoint saying which it is in, so the sidecar
keeps that itself: a server just started (or back from down) holds memory.
``GET /get_model_info`` says whether it is up (its ``/health`` runs a
generation, which a released server cannot). Release the memory only while
the server is idle: on a busy engine it may fail or stop the server.
"""

from __future__ import annotations

import sys

from timeslicer import adapters
from timeslicer.adapters import http

__all__ = ["SglangServer", "main"]


class SglangServer:
    name = "sglang"

    def __init__(self, url: str, timeout: float = 300.0) -> None:
        self.url, self.timeout = url, timeout

    def state(self) -> bool | None:
        http("GET", f"{self.url}/get_model_info", timeout=10.0)
        return None

    def park(self) -> None:
        http("POST", f"{self.url}/release_memory_occupation", {}, timeout=self.timeout)

    def restore(self) -> None:
        http("POST", f"{self.url}/resume_memory_occupation", {}, timeout=self.timeout)


def main(argv: list[str] | None = None) -> int:
    return adapters.main("sglang", SglangServer, argv)


if __name__ == "__main__":
    sys.exit(main())
