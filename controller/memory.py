"""Giving the operating system back what the start-up list left free.

Rules:

* Listing a large fleet builds and drops many times what the cache keeps
  (page bodies, decoded objects, stripped mappings). Once every watch has
  listed, the collector runs and the C allocator is asked to hand its free
  pages back (glibc's ``malloc_trim``), so the process's resident size is
  what it holds, not what it once passed through.
* Only an optimization: where the C library has no ``malloc_trim`` (musl,
  macOS) or cannot be loaded, it does nothing; it never raises.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable

__all__ = ["give_back"]


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
