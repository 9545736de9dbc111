"""The pod's socket is bound inside its directory, however long the kubelet's path."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest

from timeslicer.agent.sockets import bind_in


def deep(tmp_path: Path) -> Path:
    # As deep as a pod's emptyDir under /var/lib/kubelet, and more.
    d = tmp_path / ("p" * 40) / "0b5e1d1c-6a4f-4f7e-9d57-3c1d2f0a9b7e" / "volumes" \
        / "kubernetes.io~empty-dir" / "openrl-turn"
    d.mkdir(parents=True)
    assert len(str(d / "turn.sock")) > 107
    return d


def test_a_socket_past_the_path_limit_is_bound_and_reachable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = deep(tmp_path)
    server = bind_in(d, "turn.sock")
    server.listen(1)
    mode = (d / "turn.sock").stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o666
    monkeypatch.chdir(d)  # the worker's own, short path to it
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect("turn.sock")
    conn, _ = server.accept()
    client.sendall(b"hi")
    assert conn.recv(2) == b"hi"
    for s in (conn, client, server):
        s.close()


def test_whatever_the_pod_left_at_the_name_is_replaced_not_followed(tmp_path: Path) -> None:
    d = deep(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("keep")
    (d / "turn.sock").symlink_to(elsewhere)
    bind_in(d, "turn.sock").close()
    assert stat.S_ISSOCK((d / "turn.sock").lstat().st_mode)
    assert elsewhere.read_text() == "keep"


def test_a_directory_swapped_for_a_link_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "other-pod"
    target.mkdir()
    link = tmp_path / "openrl-turn"
    link.symlink_to(target)
    with pytest.raises(OSError):
        bind_in(link, "turn.sock")
    assert not list(target.iterdir())
