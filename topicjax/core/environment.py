"""The environment variables topicjax reads, each validated where it is read, never at import.

Every setting is read when it is first needed (so that ``import topicjax`` never fails on a bad
setting, and the command line reports it as one line) and refused with the message shape of the
parameters (:mod:`topicjax.core.validation`)::

    <NAME> must be <what is accepted>, got <the value given>

A variable set to an empty (or blank) string counts as unset.

==========================  =====================================================================
``TOPICJAX_THREADS``        threads of the compiled CPU kernels: an integer in [1, 4096]
                            (default: the cores this process may run on); more than those cores
                            warns once (``RuntimeWarning``) and is used anyway
``TOPICJAX_ESTEP``          E-step backend (:mod:`topicjax.core.kernels`): ``auto``, ``xla``, ``ffi``,
                            ``xla_scatter`` (the XLA E-step adding ∂L/∂Φ slot by slot, for A/B
                            checks)
``TOPICJAX_LIDA``           LIDA sweep backend (:mod:`topicjax.lida.kernel`): ``auto``, ``xla``, ``ffi``,
                            ``pallas`` (the Pallas sweep of :mod:`topicjax.lida.pallas_sweep`)
``TOPICJAX_LIDA_MEMORY``    bytes a LIDA fit may plan to hold: a number > 0, optionally with a
                            unit ``K``, ``M``, ``G``, ``T`` (powers of 1024; ``16G``, ``16GiB``)
``TOPICJAX_DATA``           folder of the shared corpora (:func:`topicjax.data.datasets.shared_data_dir`)
``TOPICJAX_CACHE``          folder of the persistent compilation cache (:mod:`topicjax.core.jit_cache`):
                            a path (``~`` expanded); ``0``, ``off`` or ``none`` (any case) turns
                            the cache off; default ``$XDG_CACHE_HOME/topicjax/jax``, else
                            ``~/.cache/topicjax/jax``; read when the engine loads
                            (:mod:`topicjax.core.compiled`), never refused (a folder that cannot be
                            written warns once)
``TOPICJAX_BUCKETS``        shapes of PLSA/ARTM/PTM/TTMM fits rounded up to buckets
                            (:func:`topicjax.core.layout.bucket_size`): ``on`` or ``1`` (default),
                            ``off`` or ``0`` (any case): every program has its corpus's exact shapes
``XLA_FLAGS``               read by the command line only: its
                            ``--xla_force_host_platform_device_count`` must be an integer >= 1
``TOPICJAX_NATIVE``         read by ``setup.py`` at build time: ``0`` or ``1``
==========================  =====================================================================

:func:`check` validates the run-time settings at once (the command line calls it first).

>>> import os
>>> os.environ["TOPICJAX_ESTEP"] = "fast"
>>> backend_setting("TOPICJAX_ESTEP")
Traceback (most recent call last):
...
ValueError: TOPICJAX_ESTEP must be one of 'auto', 'xla', 'ffi', 'xla_scatter', got 'fast'
>>> del os.environ["TOPICJAX_ESTEP"]
"""

from __future__ import annotations

import math
import os
import re
import warnings
from pathlib import Path

__all__ = ["MAX_THREADS", "BACKENDS", "ESTEP_BACKENDS", "setting", "usable_cores", "warn_threads", "threads", "backend_setting",
           "LIDA_BACKENDS", "memory_limit", "data_dir", "CACHE_OFF", "cache_folder", "host_device_count", "check"]

#: The most threads the compiled kernels' pool accepts (``csrc/estep_ffi.cc``).
MAX_THREADS = 4096
#: Values of ``TOPICJAX_ESTEP`` and ``TOPICJAX_LIDA``.
BACKENDS = ("auto", "xla", "ffi")
#: Values of ``TOPICJAX_ESTEP``: :data:`BACKENDS` and ``xla_scatter``, the XLA E-step that adds
#: ∂L/∂Φ slot by slot rather than per word piece (:func:`topicjax.core.estep.sliced_counts`).
ESTEP_BACKENDS = BACKENDS + ("xla_scatter",)
#: Values of ``TOPICJAX_LIDA``: :data:`BACKENDS` and ``pallas``, the sweep in Pallas kernels
#: (:mod:`topicjax.lida.pallas_sweep`).
LIDA_BACKENDS = BACKENDS + ("pallas",)

_WARNED: set = set()
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_DEVICE_FLAG = "--xla_force_host_platform_device_count"


def setting(name: str) -> str | None:
    """The value of the environment variable ``name`` with surrounding blanks removed; ``None``
    when it is unset or blank."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return None
    return value.strip()


def usable_cores() -> int:
    """The cores this process may run on (``os.sched_getaffinity``; ``os.cpu_count`` elsewhere)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def warn_threads(n: int, source: str) -> None:
    """Warn once per process (``RuntimeWarning``) when ``n`` threads exceed :func:`usable_cores`:
    the kernels' threads wait for each other, so a sweep runs several times slower (1000 threads
    on 2 cores: 4.3x)."""
    cores = usable_cores()
    if n > cores and "threads" not in _WARNED:
        _WARNED.add("threads")
        warnings.warn(f"{source} = {n} is more than the {cores} cores this process may run on "
                      f"(os.sched_getaffinity); the compiled kernels run slower with more threads than cores "
                      f"(using {n} anyway; {cores} is the default)", RuntimeWarning, stacklevel=3)


def threads() -> int | None:
    """``TOPICJAX_THREADS`` as an int (``None`` when unset); warns when it exceeds the cores."""
    raw = setting("TOPICJAX_THREADS")
    if raw is None:
        return None
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"TOPICJAX_THREADS must be an integer in [1, {MAX_THREADS}], got {os.environ['TOPICJAX_THREADS']!r}")
    warn_threads(n, "TOPICJAX_THREADS")
    return n


def backend_setting(name: str) -> str:
    """A backend variable (``TOPICJAX_ESTEP``, ``TOPICJAX_LIDA``): one of :data:`BACKENDS`
    (:data:`ESTEP_BACKENDS` for ``TOPICJAX_ESTEP``, :data:`LIDA_BACKENDS` for ``TOPICJAX_LIDA``), any
    case; ``"auto"`` when unset."""
    raw = setting(name)
    if raw is None:
        return "auto"
    allowed = {"TOPICJAX_ESTEP": ESTEP_BACKENDS, "TOPICJAX_LIDA": LIDA_BACKENDS}.get(name, BACKENDS)
    if raw.lower() not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(repr(b) for b in allowed)}, got {os.environ[name]!r}")
    return raw.lower()


def memory_limit() -> int | None:
    """``TOPICJAX_LIDA_MEMORY`` in bytes (``None`` when unset)."""
    raw = setting("TOPICJAX_LIDA_MEMORY")
    if raw is None:
        return None
    m = re.fullmatch(r"([0-9.eE+-]+)\s*([kKmMgGtT]?)(?:i?[bB])?", raw)
    value = math.nan
    if m:
        try:
            value = float(m.group(1)) * _UNITS[m.group(2).upper()]
        except ValueError:
            pass
    if not (math.isfinite(value) and value >= 1):
        raise ValueError(f"TOPICJAX_LIDA_MEMORY must be a number of bytes >= 1 (such as 8e9 or 16GiB), "
                         f"got {os.environ['TOPICJAX_LIDA_MEMORY']!r}")
    return int(value)


def data_dir() -> Path | None:
    """``TOPICJAX_DATA`` as a folder (``None`` when unset); a ``FileNotFoundError`` when it is not one."""
    raw = setting("TOPICJAX_DATA")
    if raw is None:
        return None
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"TOPICJAX_DATA must be an existing folder, got {os.environ['TOPICJAX_DATA']!r}")
    return path


#: Values of ``TOPICJAX_CACHE`` (any case) that turn the persistent compilation cache off.
CACHE_OFF = ("0", "off", "none")


def cache_folder() -> Path | None:
    """The folder of topicjax's persistent compilation cache: ``TOPICJAX_CACHE`` when set (``~``
    expanded, made absolute), ``None`` when it is one of :data:`CACHE_OFF`; else
    ``$XDG_CACHE_HOME/topicjax/jax`` when ``XDG_CACHE_HOME`` is an absolute path (the XDG base
    directory rule: a relative one is ignored), else ``~/.cache/topicjax/jax`` (``None`` when no
    home folder is known).  Never raises: a folder that cannot be written is found, and warned
    about, when the cache is turned on (:func:`topicjax.core.jit_cache.enable`)."""
    raw = setting("TOPICJAX_CACHE")
    if raw is not None:
        if raw.lower() in CACHE_OFF:
            return None
        return Path(raw).expanduser().absolute()
    xdg = setting("XDG_CACHE_HOME")
    if xdg is not None and Path(xdg).is_absolute():
        return Path(xdg) / "topicjax" / "jax"
    try:
        return Path.home() / ".cache" / "topicjax" / "jax"
    except (RuntimeError, KeyError):  # no HOME and no password entry: nowhere to keep a cache
        return None


def host_device_count() -> int | None:
    """The host devices that ``XLA_FLAGS`` asks for (``--xla_force_host_platform_device_count=N``,
    the last one given), ``None`` when it does not; an error unless N is an integer >= 1 (XLA
    itself aborts the process, or fails to start its CPU backend, on such a value)."""
    flags = os.environ.get("XLA_FLAGS", "")
    found = re.findall(re.escape(_DEVICE_FLAG) + r"(?:=(\S*))?(?=\s|$)", flags)
    if not found:
        return None
    raw = found[-1]
    if not re.fullmatch(r"\+?[0-9]+", raw) or int(raw) < 1:
        raise ValueError(f"XLA_FLAGS {_DEVICE_FLAG} must be an integer >= 1, got {raw!r}")
    return int(raw)


def buckets() -> bool:
    """``TOPICJAX_BUCKETS``: whether fits round their shapes up to buckets (default ``True``)."""
    raw = setting("TOPICJAX_BUCKETS")
    if raw is None or raw.lower() in ("on", "1"):
        return True
    if raw.lower() in ("off", "0"):
        return False
    raise ValueError(f"TOPICJAX_BUCKETS must be one of 'on', 'off', '1', '0', got {os.environ['TOPICJAX_BUCKETS']!r}")


def check() -> dict:
    """Validate every run-time setting (all but ``TOPICJAX_DATA``, which only the shared-corpus
    loaders read, and the build-time ``TOPICJAX_NATIVE``); returns their values.  The first bad
    one raises its ``ValueError``."""
    return {"TOPICJAX_THREADS": threads(), "TOPICJAX_ESTEP": backend_setting("TOPICJAX_ESTEP"),
            "TOPICJAX_LIDA": backend_setting("TOPICJAX_LIDA"), "TOPICJAX_LIDA_MEMORY": memory_limit(),
            "TOPICJAX_BUCKETS": buckets(), "XLA_FLAGS device count": host_device_count(),
            "TOPICJAX_CACHE": cache_folder()}
