"""One parameter validation for every estimator and public function of the package.

A *validator* is a function ``check(value, name) -> value`` that returns the value (as a Python
int, float, tuple ...) or raises a ``ValueError`` of one shape everywhere::

    <name> must be <what is accepted>, got <the value given>

Estimators declare one validator per constructor parameter in ``_constraints`` (the common ones,
``n_components``, ``max_iter``, ``tol`` and ``random_state``, are declared once in
:mod:`topicjax.estimator`); :meth:`~topicjax.estimator.TopicModelBase._validate_params` runs them
all at the start of ``fit`` and ``fit_many``.  Public functions call the same validators on their
arguments.  The constructors below build validators for the usual cases:

>>> check = integer(1)
>>> check(3, "max_iter")
3
>>> check(0, "max_iter")
Traceback (most recent call last):
...
ValueError: max_iter must be an integer >= 1, got 0
>>> optional(number(0.0, low_open=True))(float("nan"), "label_weight")
Traceback (most recent call last):
...
ValueError: label_weight must be None or a finite number > 0.0, got nan
>>> one_of("em", "sgd")("adam", "solver")
Traceback (most recent call last):
...
ValueError: solver must be one of 'em', 'sgd', got 'adam'
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import numpy as np

__all__ = ["check_int", "check_number", "check_bool", "int_sequence", "integer", "number", "boolean", "one_of",
           "machine_memory", "refuse_size", "refuse_online_topics",
           "optional", "int_pair", "strings", "callable_or_none", "protocol", "mapping_of_numbers", "either"]


def _is_int(value) -> bool:
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, np.integer))


def _is_number(value) -> bool:
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating))


def _int_range(low, high) -> str:
    if low is None and high is None:
        return ""
    if high is None:
        return f" >= {low}"
    if low is None:
        return f" <= {high}"
    return f" in [{low}, {high}]"


def check_int(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]``; a ``ValueError`` in one shape otherwise."""
    if not _is_int(value):
        raise ValueError(f"{name} must be an integer{_int_range(low, high)}, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer{_int_range(low, high)}, got {value!r}")
    return int(value)


def _number_range(low, high, low_open) -> str:
    lo = "" if low is None else (f"> {low}" if low_open else f">= {low}")
    hi = "" if high is None else f"<= {high}"
    rng = " and ".join(x for x in (lo, hi) if x)
    return f" {rng}" if rng else ""


def check_number(value, name: str, low: float | None = None, high: float | None = None, *,
                 low_open: bool = False) -> float:
    """``value`` as a finite float in the range; a ``ValueError`` in one shape otherwise."""
    if not _is_number(value):
        raise ValueError(f"{name} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if (low is not None and (v < low or (low_open and v == low))) or (high is not None and v > high):
        raise ValueError(f"{name} must be a number{_number_range(low, high, low_open)}, got {value!r}")
    return v


def check_bool(value, name: str) -> bool:
    """``value`` as a bool (``True``/``False`` or a numpy bool; not 0/1 or strings)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def int_sequence(values, name: str, low: int) -> list[int]:
    """``values`` as a list of Python ints, each ``>= low`` (seeds, numbers of topics of a batch
    of models); a clear ``ValueError`` naming the first bad entry otherwise."""
    if isinstance(values, (str, bytes, Mapping)) or np.ndim(values) != 1:
        raise ValueError(f"{name} must be a one-dimensional sequence of integers, got {values!r}")
    kind = "a non-negative" if low == 0 else ("a positive" if low == 1 else f"an >= {low}")
    out = []
    for i, v in enumerate(values):
        if not _is_int(v) or v < low:
            raise ValueError(f"{name} must hold integers >= {low}: {name}[{i}] = {v!r} is not {kind} integer")
        out.append(int(v))
    return out


# ----------------------------------------------------------------------------- constructors
def integer(low: int | None = None, high: int | None = None):
    """An int in ``[low, high]``."""
    def check(value, name):
        return check_int(value, name, low, high)

    check.accepts = f"an integer{_int_range(low, high)}"
    return check


def number(low: float | None = None, high: float | None = None, *, low_open: bool = False):
    """A finite number in the range (``low_open``: ``> low``)."""
    def check(value, name):
        return check_number(value, name, low, high, low_open=low_open)

    check.accepts = f"a finite number{_number_range(low, high, low_open)}"
    return check


def boolean():
    """``True`` or ``False``."""
    def check(value, name):
        return check_bool(value, name)

    check.accepts = "True or False"
    return check


def one_of(*options):
    """One of the given values (compared with ``==``, types included: ``"1"`` is not ``1``)."""
    listed = ", ".join(repr(o) for o in options)

    def check(value, name):
        for o in options:
            if type(value) is type(o) and value == o:
                return value
        raise ValueError(f"{name} must be one of {listed}, got {value!r}")

    check.accepts = f"one of {listed}"
    return check


def _accepts(check) -> str:
    return getattr(check, "accepts", "a valid value")


def optional(inner):
    """``None`` or what ``inner`` accepts."""
    def check(value, name):
        if value is None:
            return None
        try:
            return inner(value, name)
        except ValueError:
            raise ValueError(f"{name} must be None or {_accepts(inner)}, got {value!r}") from None

    check.accepts = f"None or {_accepts(inner)}"
    return check


def either(*checks):
    """What any of ``checks`` accepts (the first that does)."""
    def check(value, name):
        for c in checks:
            try:
                return c(value, name)
            except ValueError:
                continue
        raise ValueError(f"{name} must be {' or '.join(_accepts(c) for c in checks)}, got {value!r}")

    check.accepts = " or ".join(_accepts(c) for c in checks)
    return check


def int_pair(low: int = 1):
    """Two ints ``>= low`` (a tuple or list of length 2), returned as a tuple."""
    what = f"a pair of integers >= {low}"

    def check(value, name):
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__") or len(value) != 2:
            raise ValueError(f"{name} must be {what}, got {value!r}")
        if not all(_is_int(v) and v >= low for v in value):
            raise ValueError(f"{name} must be {what}, got {value!r}")
        return tuple(int(v) for v in value)

    check.accepts = what
    return check


def strings(*, unique: bool = False, allow_int: bool = False):
    """A list or tuple of strings (``allow_int``: or ints, e.g. topic indices)."""
    what = "a list of " + ("strings or integers" if allow_int else "strings") + (", all different" if unique else "")

    def check(value, name):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple, np.ndarray)):
            raise ValueError(f"{name} must be {what}, got {value!r}")
        for v in value:
            if not (isinstance(v, str) or (allow_int and _is_int(v))):
                raise ValueError(f"{name} must be {what}, got {value!r}")
        if unique and len(set(value)) != len(value):
            raise ValueError(f"{name} must be {what}, got {value!r}")
        return tuple(value)

    check.accepts = what
    return check


def callable_or_none():
    """``None`` or a callable."""
    def check(value, name):
        if value is not None and not callable(value):
            raise ValueError(f"{name} must be None or a callable, got {value!r}")
        return value

    check.accepts = "None or a callable"
    return check


def protocol(what: str, *methods: str):
    """An object with callable attributes ``methods`` (e.g. an optax ``GradientTransformation``:
    ``init`` and ``update``), or ``None``."""
    def check(value, name):
        if value is None:
            return None
        if not all(callable(getattr(value, m, None)) for m in methods):
            raise ValueError(f"{name} must be None or {what} (with {', '.join(methods)}), got {value!r}")
        return value

    check.accepts = f"None or {what}"
    return check


def mapping_of_numbers(low: float = 0.0):
    """``None`` or a dict ``{str: finite number >= low}``."""
    what = f"None or a dict of names to finite numbers >= {low}"

    def check(value, name):
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ValueError(f"{name} must be {what}, got {value!r}")
        for k, v in value.items():
            if not isinstance(k, str) or not _is_number(v) or not math.isfinite(float(v)) or v < low:
                raise ValueError(f"{name} must be {what}, got {value!r} ({k!r}: {v!r})")
        return value

    check.accepts = what
    return check


# ----------------------------------------------------------------------------- sizes against memory
def _size(n: float) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{int(n)} bytes"


def _cgroup_limit() -> int | None:
    """The memory limit of the process's cgroup (a container's), ``None`` when there is none."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as fh:
                raw = fh.read().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < 1 << 60:  # cgroup v1 writes a huge number for "no limit"
            return int(raw)
    return None


def machine_memory() -> tuple[int, str]:
    """``(bytes, what)``: the memory the arrays of a fit live in -- the default device's memory on
    an accelerator (what its allocator may use), else the physical memory of the machine (or the
    limit of the process's container, when lower)."""
    import jax

    device = jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if stats.get("bytes_limit"):
            return int(stats["bytes_limit"]), f"the memory of {device.platform} device {device.id}"
    try:
        phys = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        phys = 0
    cg = _cgroup_limit()
    if cg is not None and (not phys or cg < phys):
        return cg, "the memory limit of this process's container"
    return (phys or 1 << 62), "the physical memory of this machine"


def refuse_size(name: str, value: int, per_unit: float, fixed: float = 0.0, *, what: str,
                limit: tuple[int, str] | None = None) -> None:
    """Refuse ``name=value`` before anything is allocated when the arrays it sizes cannot fit:
    ``fixed + per_unit * value`` bytes (``what`` says which arrays: they must be a lower bound of
    what the fit holds at once, so that no fit that would run is refused) against ``limit``
    (``(bytes, what)``; default :func:`machine_memory`).  A ``ValueError`` of this module's shape,
    ``<name> must be an integer <= <largest that fits> here, got <value>: ...``, naming the bytes
    needed and those available (the command line adds the option)."""
    need = fixed + per_unit * value
    have, where = machine_memory() if limit is None else limit
    if need <= have:
        return
    largest = int((have - fixed) // per_unit) if per_unit > 0 else 0
    head = (f"{name} must be an integer <= {largest:,} here, got {value!r}" if largest >= 1
            else f"{name} must be smaller here, got {value!r} (the rest of the fit alone needs {_size(fixed)})")
    raise ValueError(f"{head}: {what}, at least {_size(need)} in all, more than the {_size(have)} of {where}")


def refuse_online_topics(n_topics: int, n_words: int, batch_docs: int, *, name: str = "n_components",
                         limit: tuple[int, str] | None = None) -> None:
    """:func:`refuse_size` for the online algorithm (:mod:`topicjax.artm.online`): its state holds
    Φ, the running counts n_wt and the pending counts (W x T each), a batch's Θ (T x documents of
    a batch), and a step adds the expected counts of both, all float32."""
    refuse_size(name, int(n_topics), 4.0 * (4 * n_words + 2 * batch_docs), limit=limit,
                what=(f"with {int(n_topics):,} topics on {n_words:,} words and batches of {batch_docs:,} documents, "
                      "an online fit holds Φ, the counts n_wt and the pending counts (W x T each), the "
                      "batch's Θ (T x D) and a step's expected counts of both in float32"))
