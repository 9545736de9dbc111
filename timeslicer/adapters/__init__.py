"""Sidecars that take turns for an unmodified inference server on the pod's loopback.

Each adapter (``vllm``, ``sglang``) says how to park, restore and read one
server; the loop here is shared. Rules:

* The server is driven over loopback only: its sleep endpoints carry no
  authentication, so a URL whose host is not loopback is refused unless the
  operator passes ``--allow-remote``.
* Start: wait until the server answers, connect with its real state
  (resident unless it says it sleeps), and want the turn for as long as the
  sidecar runs.
* On the turn: restore, then say resident. Asked to yield: park, and say
  parked only once the server confirms it (when it can). A failed park is
  never reported as parked: the agent evicts the pod when the grace runs out,
  which is the safe outcome.
* The server restarting is seen by its state changing under us: awake
  without the turn, it is parked at once; asleep while we held the turn, the
  turn is given back. While the server does not answer, nothing is said.
* Every ``parked`` names the turn it is about (the client's fencing): a park
  said while waiting, for a server found awake, names the last turn the
  client acted on, so when a grant crosses it on the wire the agent frees
  nothing and the sidecar restores on the grant as it should.
* The agent restarting is the client's business: it reconnects and says
  hello again with what was last reported, and a yield asked stays asked.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import signal
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Protocol

from timeslicer.client import AgentError, AgentUnavailable, TurnClient, TurnError

__all__ = ["Server", "ServerDown", "ServerError", "Sidecar", "http", "loopback_url", "main"]

log = logging.getLogger("openrl-turn")
DEFAULT_URL = "http://127.0.0.1:8000"
# Never a proxy, whatever the environment says: the server is on this pod's loopback.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ServerError(Exception):
    """The server answered, but not as asked (an HTTP error, or the wrong state after)."""


class ServerDown(ServerError):
    """Nothing answered at the server's address."""


def loopback_url(url: str, allow_remote: bool = False) -> str:
    """``url`` without a trailing slash, refused unless it is http(s) on loopback."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--server {url!r}: must be an http:// URL with a host")
    host = parts.hostname
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not allow_remote:
        raise ValueError(f"--server {url!r}: host {host!r} is not loopback; the server's "
                         "sleep endpoints are unauthenticated, so the sidecar drives only a "
                         "server on the pod's own loopback (--allow-remote overrides)")
    return url.rstrip("/")


def http(method: str, url: str, body: Any = None, timeout: float = 30.0) -> Any:
    """One request; the JSON answer (``None`` for an empty one). ``ServerDown`` when
    nothing answers, ``ServerError`` for an error status."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with _OPENER.open(request, timeout=timeout) as answer:
            text = answer.read()
    except urllib.error.HTTPError as exc:
        raise ServerError(f"{method} {url}: HTTP {exc.code} {exc.read()[:200]!r}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ServerDown(f"{method} {url}: {getattr(exc, 'reason', exc)}") from None
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return text.decode("utf-8", "replace")


class Server(Protocol):
    """One inference server as the loop drives it."""

    name: str

    def state(self) -> bool | None:
        """True resident, False parked, None when it cannot say; ``ServerDown`` if down."""
        ...

    def park(self) -> None:
        """Free its device memory, or raise ``ServerError``."""
        ...

    def restore(self) -> None:
        """Back into device memory, or raise ``ServerError``."""
        ...


class Sidecar:
    """The loop: one ``step`` reads the server and the agent and does what is due."""

    def __init__(self, server: Server, socket: str | None, poll: float = 1.0) -> None:
        self.server, self.socket_path, self.poll = server, socket, poll
        self.resident: bool | None = None  # what the server holds, as last seen
        self.client: TurnClient | None = None
        self._was_down = True

    def start(self, stop: threading.Event) -> bool:
        """Wait for the server, then connect with its state; False if stopped first."""
        while not stop.is_set():
            seen = self._observe()
            if seen is not None:
                self.resident = seen
                self.client = TurnClient(self.socket_path, resident=seen)
                try:
                    welcome = self.client.connect(timeout=max(self.poll, 1.0))
                except AgentUnavailable as exc:
                    self.client.close()
                    log.info("waiting for the agent: %s", exc)
                    continue
                log.info("connected as %s in group %s (%s), server %s", welcome.member,
                         welcome.group, welcome.state, "resident" if seen else "parked")
                self.client.want()
                return True
            stop.wait(self.poll)
        return False

    def _observe(self) -> bool | None:
        """The server's state, None while it is down. A server that cannot say is taken as
        resident when it comes back from down (it loads at start), else as last seen."""
        try:
            state = self.server.state()
        except ServerDown:
            self._was_down = True
            return None
        except ServerError as exc:
            log.warning("%s: %s", self.server.name, exc)
            return None
        if state is None:
            state = True if self._was_down or self.resident is None else self.resident
        self._was_down = False
        return state

    def step(self) -> None:
        assert self.client is not None
        client = self.client
        seen = self._observe()
        if seen is not None and seen != self.resident:
            self.resident = seen
            if seen and not client.holds_turn:
                log.warning("%s is resident without the turn: parking it", self.server.name)
                self._park()
            elif not seen:
                log.warning("%s parked by itself: giving the turn back", self.server.name)
                client.parked()
        if self.resident:
            # Resident without the turn, the agent asks it to yield like any holder: the
            # welcome alone is no reason to park (a grant may follow it on the wire).
            asked = client.wait_for_yield(self.poll)
            if asked is not None:
                log.info("asked to yield turn %d (%.1fs grace)", asked.turn, asked.grace)
                self._park()
        elif client.wait_for_turn(self.poll):
            try:
                self.server.restore()
            except ServerError as exc:
                log.warning("restore failed, trying again: %s", exc)
                return
            self.resident = True
            client.resident()
            log.info("granted turn %d: %s restored", client.turn, self.server.name)

    def _park(self) -> None:
        assert self.client is not None
        try:
            self.server.park()
        except ServerError as exc:
            # Not parked: say nothing, try again next step; past the grace the agent evicts.
            log.warning("park failed, not reporting parked: %s", exc)
            return
        self.resident = False
        self.client.parked()
        log.info("%s parked", self.server.name)

    def run(self, stop: threading.Event) -> None:
        if not self.start(stop):
            return
        try:
            while not stop.is_set():
                try:
                    self.step()
                except AgentError as exc:  # a refusal is the agent's to act on; carry on
                    log.warning("%s", exc)
        finally:
            if self.client is not None:
                self.client.close()


def main(name: str, make: Any, argv: list[str] | None = None) -> int:
    """The command line shared by the adapters: ``make(url, timeout)`` builds the server."""
    parser = argparse.ArgumentParser(
        prog=f"openrl-turn-{name}",
        description=f"Take turns on the pod's shared claim for a {name} server on loopback.")
    parser.add_argument("--server", default=DEFAULT_URL,
                        help=f"the server's URL (default {DEFAULT_URL}; loopback only)")
    parser.add_argument("--socket", default=None,
                        help="the agent's socket (default $OPENRL_TURN_SOCKET)")
    parser.add_argument("--poll", type=float, default=1.0,
                        help="seconds between looks at the server (default 1)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds one park or restore may take (default 300)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="drive a server that is not on loopback (its endpoints are open)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        url = loopback_url(args.server, args.allow_remote)
        sidecar = Sidecar(make(url, args.timeout), args.socket, args.poll)
    except (ValueError, TurnError) as exc:
        parser.error(str(exc))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    sidecar.run(stop)
    return 0
