"""One arena for glibc's ``malloc``, set when topicjax is imported (before XLA starts its threads).

glibc gives the threads that allocate concurrently their own arenas (up to 8 per core), and a block
freed in one arena serves only the threads of that arena.  A streamed fit allocates and frees
arrays of tens of MB for every batch in several threads (the batch read and laid out in a
background thread, the step computed by XLA's threads), so with many arenas the freed blocks pile
up in each of them: at NYTimes size ``scale.offline.fit_store``'s peak resident memory was 2.0 GiB
after two fits in a process, 1.16 GiB with one arena, at the same speed (4.4 s per iteration,
measured on 2 cores; ``experiments/results/bench_scale.md``).  The process-wide setting is the
C library's own ``M_ARENA_MAX``; a ``MALLOC_ARENA_MAX`` in the environment (glibc's variable, read
by glibc itself) is left to rule, so a user who wants other arenas sets it.  Elsewhere (macOS,
musl) nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["limit_arenas"]

#: glibc's ``mallopt`` parameter number of ``M_ARENA_MAX`` (malloc.h)
M_ARENA_MAX = -8


def limit_arenas(n: int = 1) -> bool:
    """At most ``n`` malloc arenas from now on, unless ``MALLOC_ARENA_MAX`` is set; whether the
    limit was set (glibc only).

    >>> limit_arenas() in (True, False)
    True
    """
    if os.environ.get("MALLOC_ARENA_MAX", "").strip():
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_ARENA_MAX, int(n)) == 1
