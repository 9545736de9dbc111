"""``openrl-turn-vllm``: the sidecar for a vLLM server in sleep mode.

vLLM must run with ``--enable-sleep-mode`` and ``VLLM_SERVER_DEV_MODE=1``,
which adds ``POST /sleep?level=1`` (weights to host memory, KV cache
dropped), ``POST /wake_up`` and ``GET /is_sleeping`` (``{"is_sleeping":
bool}``). Level 1 only: level 2 drops the weights, and waking would not bring
the model back. Every park and restore is confirmed by reading the state back.
"""

from __future__ import annotations

import sys

from timeslicer import adapters
from timeslicer.adapters import ServerError, http

__all__ = ["VllmServer", "main"]


class VllmServer:
    name = "vllm"

    def __init__(self, url: str, timeout: float = 300.0) -> None:
        self.url, self.timeout = url, timeout

    def state(self) -> bool | None:
        answer = http("GET", f"{self.url}/is_sleeping", timeout=10.0)
        sleeping = answer.get("is_sleeping") if isinstance(answer, dict) else None
        if not isinstance(sleeping, bool):
            raise ServerError(f"GET {self.url}/is_sleeping: no is_sleeping in {answer!r:.80}")
        return not sleeping

    def park(self) -> None:
        http("POST", f"{self.url}/sleep?level=1", timeout=self.timeout)
        self._confirm(False)

    def restore(self) -> None:
        http("POST", f"{self.url}/wake_up", timeout=self.timeout)
        self._confirm(True)

    def _confirm(self, resident: bool) -> None:
        if self.state() is not resident:
            raise ServerError(f"{self.url}: still {'asleep' if resident else 'awake'} after "
                              f"{'wake_up' if resident else 'sleep'}")


def main(argv: list[str] | None = None) -> int:
    return adapters.main("vllm", VllmServer, argv)


if __name__ == "__main__":
    sys.exit(main())
