"""At most one arena for glibc's ``malloc``, set when topicjax is imported (before XLA starts its
threads), unless the user says otherwise.

glibc gives the threads that allocate concurrently their own arenas (up to 8 per core), and a block
freed in one arena serves only the threads of that arena.  A streamed fit allocates and frees
arrays of tens of MB for every batch in several threads (the batch read and laid out in a
background thread, the step computed by XLA's threads), so with many arenas the freed blocks pile
up in each of them: at NYTimes size ``scale.offline.fit_store``'s peak resident memory was 2.0 GiB
after two fits in a process, 1.16 GiB with one arena, at the same speed (4.4 s per iteration,
measured on 2 cores; ``experiments/results/bench_scale.md``).

The setting is the C library's own ``M_ARENA_MAX``, and it is process-wide: a program that
imports topicjax gets it for its own threads too (``docs/install.md`` says so).  It is set at
import because arenas are handed out as threads first allocate: set later, XLA's threads would
already hold theirs.  Who decides, first match wins:

* ``MALLOC_ARENA_MAX`` in the environment (glibc's variable, read by glibc itself): left to rule;
* ``TOPICJAX_MALLOC_ARENAS``: ``off`` (or ``0``, ``none``, any case) leaves glibc's default, an
  integer ``n >= 1`` allows ``n`` arenas; blank or unset: 1.  Any other value warns
  (``RuntimeWarning`` naming the variable; ``import topicjax`` never fails on a setting) and
  leaves glibc's default.

Elsewhere (macOS, musl) nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import warnings

__all__ = ["limit_arenas", "arena_setting"]

#: glibc's ``mallopt`` parameter number of ``M_ARENA_MAX`` (malloc.h)
M_ARENA_MAX = -8
#: the variable that sets or turns off the limit
VARIABLE = "TOPICJAX_MALLOC_ARENAS"
#: its values that turn the limit off
OFF = ("0", "off", "none")


def arena_setting() -> int | None:
    """The arenas ``TOPICJAX_MALLOC_ARENAS`` asks for: ``None`` for off, else an integer >= 1
    (1 when unset or blank).

    Raises:
        ValueError: a value that is neither off nor an integer >= 1, in the parameters' message
            shape (``TOPICJAX_MALLOC_ARENAS must be ..., got 'x'``).
    """
    raw = os.environ.get(VARIABLE, "").strip()
    if not raw:
        return 1
    if raw.lower() in OFF:
        return None
    if raw.isdigit() and int(raw) >= 1:
        return int(raw)
    raise ValueError(f"{VARIABLE} must be an integer >= 1 or 'off', got {raw!r}")


def limit_arenas(n: int | None = None) -> bool:
    """At most ``n`` malloc arenas from now on (default: :func:`arena_setting`), unless
    ``MALLOC_ARENA_MAX`` is set; whether the limit was set (glibc only).  A bad
    ``TOPICJAX_MALLOC_ARENAS`` warns (``RuntimeWarning``) and sets nothing.

    >>> limit_arenas() in (True, False)
    True
    """
    if os.environ.get("MALLOC_ARENA_MAX", "").strip():
        return False
    if n is None:
        try:
            n = arena_setting()
        except ValueError as e:
            warnings.warn(f"{e}; glibc's malloc arenas are left at its default", RuntimeWarning, stacklevel=2)
            return False
        if n is None:
            return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_ARENA_MAX, int(n)) == 1
