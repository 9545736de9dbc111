"""Binding a worker pod's socket inside that pod's own directory on the node.

* The path a Unix socket is bound at may be at most 107 bytes, and a pod's
  directory under the kubelet's root is longer than that already
  (``/var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~empty-dir/openrl-turn``
  is 103 bytes before the socket's name). So the directory is opened, and the
  socket bound through ``/proc/self/fd/<fd>/<name>``: short whatever the
  kubelet's root, and always the directory that was opened.
* The directory is opened without following a final symbolic link, so a pod
  cannot point the agent's socket at another pod's directory or anywhere on
  the node.
* Whatever the pod left at the socket's name is removed first, relative to the
  opened directory, and never followed.
* The socket is created with mode 0666 (through the umask, at bind): any user
  of the pod may connect; the directory, not the mode, is what confines it.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

__all__ = ["bind_in"]


def bind_in(directory: Path, name: str) -> socket.socket:
    """A stream socket bound at ``directory/name``; ``OSError`` if it cannot be."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            os.unlink(name, dir_fd=fd)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        previous = os.umask(0o111)
        try:
            sock.bind(f"/proc/self/fd/{fd}/{name}")
        except OSError:
            sock.close()
            raise
        finally:
            os.umask(previous)
        return sock
    finally:
        os.close(fd)
