"""A fake worker for the time-slicer's real-node proof: run in a worker pod as
``python3 -c <this file's text>`` from the scheduler's own image.

It takes turns through ``timeslicer.client`` as a real worker would and logs,
one JSON line per event on stdout, when it may hold device memory, by the
node's monotonic clock (shared by every container on the node and by the
test, which reads the lines back through the API server). The lines are
conservative, so that the checker owes the agent nothing:

* ``start`` is logged on the grant, before restoring: from then on the worker
  counts as resident;
* ``end`` is logged after parking, before telling the agent: until then it
  counts as resident;
* the process that holds the turn is a child; its parent (the container's
  first process) logs ``died`` once it has reaped the child, whatever killed
  it. A ``start`` with no ``end`` is closed by that ``died``; with neither,
  the interval stays open and overlaps whatever follows it.

A worker whose pod's name holds ``silent`` never connects at all: a member
of the claim that never speaks, whom the others must not wait on.

A file ``/tmp/stubborn`` (the test writes it with ``kubectl exec``) makes the
worker ignore the next request to park, as a hung worker would; the agent
must then delete the pod. A recreated pod starts without the file.
``/tmp/cross`` makes it say parked over and over while it waits (as the
sidecar does for a server it finds awake), so that some of those parks cross
a grant on the wire; ``/tmp/flood`` makes it write floods of lines, most of
them malformed, to its own socket between its waits.
"""

import json
import os
import signal
import sys
import time

RESTORE = float(os.environ.get("TURN_RESTORE_SECONDS", "0.01"))
FLOOD = b'{"op":["want"]}\n{"op":"dance"}\nnot json\n{"op":"want"}\n' * 64
PARK = float(os.environ.get("TURN_PARK_SECONDS", "0.01"))


def log(event, **fields):
    line = {"ev": event, "t": time.monotonic(), "pid": os.getpid(), **fields}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def worker():
    from timeslicer.client import TurnClient, TurnError

    state = {"resident": False}

    def stop(*_):
        if state["resident"]:
            log("end", why="terminated")
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    if "silent" in os.environ.get("HOSTNAME", ""):
        log("silent")
        while True:
            time.sleep(3600)
    client = TurnClient()
    while True:
        try:
            welcome = client.connect(timeout=5)
            break
        except TurnError:
            log("waiting-for-agent")
    log("hello", group=welcome.group, member=welcome.member)
    client.want()
    while True:
        try:
            if os.path.exists("/tmp/flood") and client._sock is not None:
                client._sock.sendall(FLOOD)  # its own socket: the agent must slow only it
            # Its own memory is the truth: after the agent restarts, the client learns
            # again whether it holds the turn, but a resident worker stays resident.
            if not state["resident"]:
                crossing = os.path.exists("/tmp/cross")
                if crossing:
                    client.parked()  # holds nothing: any grant on the wire must survive this
                if client.wait_for_turn(timeout=0.02 if crossing else 1.0):
                    state["resident"] = True
                    log("start")
                    time.sleep(RESTORE)
                    client.resident()
                continue
            asked = client.wait_for_yield(timeout=1.0)
            if asked is None:
                continue
            if os.path.exists("/tmp/stubborn"):
                log("ignoring-yield")
                while True:
                    time.sleep(3600)
            time.sleep(PARK)
            log("end")
            state["resident"] = False
            client.parked()
        except (TurnError, OSError) as exc:
            log("client-error", error=str(exc)[:200])
            time.sleep(0.1)


def main():
    child = os.fork()
    if child == 0:
        try:
            worker()
        finally:
            os._exit(1)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(child, signal.SIGTERM))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            status = 0
            break
        except InterruptedError:
            continue
    log("died", child=child, status=status)
    # A child killed by a signal fails the container, which the kubelet restarts.
    sys.exit(0 if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else 1)


main()
