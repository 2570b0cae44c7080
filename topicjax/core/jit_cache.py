"""JAX's persistent compilation cache, on for topicjax's users unless they chose their own.

Every new interpreter compiles a fit's programs again: a PLSA fit of KOS (T = 50, 60 iterations)
compiles 22 programs, 2.2-3.6 s of compilation on 2 loaded cores, more than its 60 iterations.
JAX can keep compiled programs on disk and load them in a later process (its persistent
compilation cache, ``jax_compilation_cache_dir``), but only when given a folder.  :func:`enable`
gives it one when topicjax's engine loads (importing :mod:`topicjax.core.compiled` calls it):

* **The folder**: :func:`topicjax.core.environment.cache_folder` -- ``$TOPICJAX_CACHE`` (``0``,
  ``off`` or ``none``: no cache), else ``$XDG_CACHE_HOME/topicjax/jax``, else
  ``~/.cache/topicjax/jax``; created with mode 0o700 (JAX runs what it finds there: whoever can
  write to the folder can run code in the user's processes).
* **The user's own settings rule**: nothing is changed when JAX's cache folder is set already
  (``JAX_COMPILATION_CACHE_DIR``, or ``jax.config.update("jax_compilation_cache_dir", ...)``
  before the engine loads) or JAX's cache is turned off (``jax_enable_compilation_cache``); each
  threshold below is set only where the user left it at JAX's default and did not set its
  ``JAX_...`` variable.
* **When**: with jax 0.10.2, setting the folder after JAX has started and compiled works: JAX
  opens its cache at the first compilation that finds a folder set (until then it looks again at
  every compilation), and stores only what it compiles from then on.  Set at the first
  compilation of :func:`topicjax.core.compiled.jit`, the folder missed 7 of a KOS fit's 22
  programs (device transfers, the random key's seed, a ``stack``: compiled before the fit's
  first ``jit`` program; the second process compiled those 7 again); set when the engine loads,
  before any of them, the first process writes all 22 and the second loads all 22 and compiles
  none (``tests/core/test_cache.py`` checks the same on a tiny corpus).  Once JAX has opened a
  folder it keeps it for the rest of the process.
* **Thresholds**: ``jax_persistent_cache_min_compile_time_secs`` = 0, since JAX's default of 1 s
  stores 1 of a KOS fit's 22 programs (compiled in 0.005-2.5 s, 20 of them under 0.1 s; loaded in
  about 1 ms each); the 22 entries take 172 KB (2-54 KB each).
  ``jax_persistent_cache_min_entry_size_bytes`` = -1: every size, and no override by JAX.
  Programs with host callbacks (``jax.debug.print``) are never stored (JAX's rule).
* **Bounded size**, by our own trim, not by JAX's ``jax_compilation_cache_max_size``: with that
  limit JAX (0.10.2) takes a file lock around every read and write, writes an access-time file
  beside an entry at every read, and lists the folder and reads every access-time file at every
  write, a cost that grows with the folder (the test suite, with thousands of entries, was half
  done after 14 minutes against 10 for all of it without); and it needs the ``filelock``
  package, which topicjax does not install (without it JAX warns and runs without any cache).
  Measured on 2 loaded cores with 8 KB entries, JAX's ``LRUCache`` with a 2 GiB limit
  (``filelock`` installed in a scratch folder for the measurement) against none: a write 0.40 ms
  against 0.04 into an empty folder, 96 ms against 0.12 into a folder of 5,000 entries (2.1 s
  more for a first KOS fit's 22 writes, as much as their compilation), a read 0.17-0.19 ms against
  0.01-0.02.  Instead, at most once every :data:`TRIM_EVERY` seconds (a stamp file's time),
  :func:`enable` lists the folder and removes the least recently used entries (by the later of a
  file's access and modification times: at the ``relatime`` resolution of most file systems, a
  day) until they take at most :data:`MAX_BYTES`; the listing of 5,000 entries takes 16-18 ms.
* **Several processes**: JAX names an entry by a hash of the program, its compile options and
  the versions of JAX, jaxlib and the device, writes it once and never rewrites it; a process
  that reads an entry while another is writing it cannot decompress it (a truncated stream), and
  JAX then warns and compiles the program itself.  A trim that removes an entry another process
  is about to read has the same effect.  A folder shared by machines with different processors
  (a network home folder) should be set per machine with ``TOPICJAX_CACHE``: JAX's key names the
  CPU backend, not the processor.
* **A folder that cannot be written** (read-only, or a file in its place) warns once
  (``RuntimeWarning``) and the process compiles without the persistent cache.

Clearing the cache is removing its folder (``docs/install.md``).
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
import warnings
from pathlib import Path

import jax

from topicjax.core import environment

__all__ = ["MAX_BYTES", "TRIM_EVERY", "enable", "trim"]

#: Bytes the cache folder may hold after a trim (2 GiB: a KOS fit's programs take 172 KB).
MAX_BYTES = 2 << 30
#: Seconds between two trims of the cache folder (a day).
TRIM_EVERY = 24 * 3600

#: JAX's cache entries: ``<key>-cache``; with its own size limit also ``<key>-atime``
_ENTRY, _ATIME = "-cache", "-atime"
#: the file whose modification time is the last trim
_STAMP = "topicjax-trimmed"

_lock = threading.Lock()
_settled: list = []  # [the folder in use or None] once enable() has run


def _jax_default(name: str, default) -> bool:
    """Whether the user left JAX setting ``name`` alone: no ``NAME`` variable and the default value."""
    return os.environ.get(name.upper()) is None and getattr(jax.config, name) == default


def _unusable(folder: Path) -> str | None:
    """Why ``folder`` cannot hold the cache (made if missing, a file written and removed), or None."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return f"{type(e).__name__}: {e}"
    return None


def trim(folder: Path, max_bytes: int | None = None) -> int:
    """Remove the least recently used cache entries of ``folder`` (by the later of each file's
    access and modification times) until the entries take at most ``max_bytes`` (default
    :data:`MAX_BYTES`); returns the bytes removed.  Only JAX's entries (``*-cache`` and their
    ``*-atime`` companions) are removed; entries that another process removed meanwhile are
    skipped.

    Raises ``OSError`` when ``folder`` cannot be listed.
    """
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    entries, total = [], 0
    with os.scandir(folder) as listing:
        for entry in listing:
            if not entry.name.endswith(_ENTRY) or not entry.is_file(follow_symlinks=False):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            entries.append((max(st.st_atime, st.st_mtime), entry.path, st.st_size))
            total += st.st_size
    removed = 0
    for _, path, size in sorted(entries):
        if total <= max_bytes:
            break
        for name in (path, path[: -len(_ENTRY)] + _ATIME):
            try:
                os.unlink(name)
            except FileNotFoundError:
                pass
        total -= size
        removed += size
    return removed


def _trim_now_and_then(folder: Path) -> None:
    """:func:`trim` when the last one is :data:`TRIM_EVERY` seconds old or more; never raises (a
    cache that cannot be trimmed still serves)."""
    stamp = folder / _STAMP
    try:
        if stamp.exists() and time.time() - stamp.stat().st_mtime < TRIM_EVERY:
            return
        stamp.touch()  # first, so that processes started together do not all trim
        trim(folder)
    except OSError:
        pass


def enable() -> Path | None:
    """Turn on JAX's persistent compilation cache in topicjax's folder (see the module docstring),
    once per process; returns the folder in use, or ``None`` when topicjax did not set one: the
    user's own JAX cache rules, ``TOPICJAX_CACHE`` turns it off, or the folder cannot be written
    (then a ``RuntimeWarning``, once)."""
    with _lock:
        if _settled:
            return _settled[0]
        folder = None
        if jax.config.jax_compilation_cache_dir is None and jax.config.jax_enable_compilation_cache:
            folder = environment.cache_folder()
        if folder is not None:
            why = _unusable(folder)
            if why is not None:
                warnings.warn(f"topicjax's compilation cache folder {str(folder)!r} cannot be written ({why}); "
                              f"compiling without the persistent cache (set TOPICJAX_CACHE to another folder, or to "
                              f"'off')", RuntimeWarning, stacklevel=4)
                folder = None
        if folder is not None:
            _trim_now_and_then(folder)
            if _jax_default("jax_persistent_cache_min_compile_time_secs", 1.0):
                jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            if _jax_default("jax_persistent_cache_min_entry_size_bytes", 0):
                jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
            jax.config.update("jax_compilation_cache_dir", str(folder))
        _settled.append(folder)
        return folder
