"""JAX's persistent compilation cache, on for topicjax's users unless they chose their own.

:func:`enable` (called when the engine, :mod:`topicjax.core.compiled`, is imported) gives JAX's
cache a folder, :func:`topicjax.core.environment.cache_folder`: ``$TOPICJAX_CACHE`` (``0``,
``off`` or ``none``: no cache), else ``$XDG_CACHE_HOME/topicjax/jax``, else
``~/.cache/topicjax/jax``, created with mode 0o700; a later process then loads the programs an
earlier one compiled instead of compiling them again.  Every program is stored (no minimum
compile time or size), and the folder is trimmed to at most :data:`MAX_BYTES`, least recently
used first, at most once every :data:`TRIM_EVERY` seconds (:func:`trim`).  Nothing is changed
when the user set JAX's cache folder or turned JAX's cache off; a folder that cannot be written
warns once (``RuntimeWarning``) and the process compiles without the cache.  Clearing the cache
is removing its folder (``docs/install.md``).

Why it is done this way (when the folder is set, the thresholds, our trim instead of JAX's size
limit, several processes on one folder): ``docs/guides/internals.md``, "The persistent
compilation cache"; the measurements: ``experiments/results/jit_cache.md``.

>>> from topicjax.core import jit_cache
>>> jit_cache.MAX_BYTES == 2 << 30 and jit_cache.TRIM_EVERY == 24 * 3600
True
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
    """Turn on JAX's persistent compilation cache in topicjax's folder (``docs/guides/internals.md``),
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
