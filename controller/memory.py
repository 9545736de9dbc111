"""Giving the operating system back what the start-up list left free.

Rules:

* Listing a large fleet builds and drops many times what the cache keeps
  (page bodies, decoded objects, stripped mappings). Once every watch has
  listed, the collector runs and the C allocator is asked to hand its free
  pages back (glibc's ``malloc_trim``), so the process's resident size is
  what it holds, not what it once passed through.
* While the start-up list runs, the cyclic collector is paused
  (``collection_paused``): what a list makes is freed by reference counts
  (pages, decoded objects: no cycles), while every automatic collection would
  walk the cache built so far again -- at 100,000 workers a third of the
  list's CPU. It is paused for a bounded time only: the caller resumes it
  when the list is done, when it is stopped, or when the list is late
  (``resume``); a collection follows at once.
* Only an optimization: where the C library has no ``malloc_trim`` (musl,
  macOS) or cannot be loaded, it does nothing; it never raises.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Pause", "collection_paused", "give_back"]


def _trimmer() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _trimmer()


def give_back() -> bool:
    """Collect garbage and return the allocator's free pages; True if trimming was offered."""
    gc.collect()
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


class Pause:
    """The collector paused by ``collection_paused``; ``resume`` ends the pause early."""

    def __init__(self) -> None:
        self._was_enabled = gc.isenabled()
        self.paused = False
        if self._was_enabled:
            gc.disable()
            self.paused = True

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            gc.enable()
            gc.collect()


@contextmanager
def collection_paused() -> Iterator[Pause]:
    """No automatic cyclic collection inside (unless resumed); the collector as it was after."""
    pause = Pause()
    try:
        yield pause
    finally:
        pause.resume()
