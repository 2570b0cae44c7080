"""Coefficients of regularizers: constants and schedules ``tau(iteration)``, as pytrees.

A coefficient τ of ARTM's criterion ``L + Σ_i τ_i R_i`` (eq. 13) is a :class:`Schedule`: an
``equinox.Module`` whose numbers are *leaves* of the regularizer's pytree, so they are traced
arguments of the compiled step (changing them never recompiles, a grid of them can be vmapped,
and ``jax.grad`` differentiates a fit with respect to them).  Iterations count from 1.

* :class:`Constant` ``(value)``; a plain float becomes one.
* :class:`Step` ``(start, value, before=0)``: ``before`` until ``start``, then ``value``.
* :class:`Linear` ``(start, stop, first, last)``: a ramp, constant outside ``[start, stop]``.
* :class:`Table` ``(values)``: ``values[iteration - 1]`` (the last value after the table).
* a traceable function ``tau(iteration)`` (``jnp`` code) becomes :class:`Traced`;
* any other function ``tau(iteration)`` (Python control flow on the iteration) is evaluated on
  the host for every iteration of the fit before it starts and becomes a :class:`Table`;
* a function ``tau(iteration, history)`` of the score history recorded so far (a trajectory that
  reacts to the model) is :class:`OnHost`: the driver evaluates it before every iteration and
  puts the value into the pytree (the fit then syncs with the host every iteration).

>>> from topicjax.regularizers.schedules import Linear, as_schedule
>>> ramp = Linear(start=1, stop=11, first=0.0, last=1.0)
>>> float(ramp(6))
0.5
>>> as_schedule(0.3)
Constant(0.3)
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Schedule", "Constant", "Step", "Linear", "Table", "Traced", "OnHost", "as_schedule", "from_spec",
           "is_number", "check_values"]


def is_number(x) -> bool:
    """A real Python or numpy number (not a bool)."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _scalar(x):
    # numbers stay Python/numpy scalars (weakly typed leaves: they take the model's dtype)
    return float(x) if is_number(x) else x


class Schedule(eqx.Module):
    """A coefficient as a function of the iteration (1, 2, ...)."""

    #: evaluated on the host by the driver before every iteration (history-dependent)
    on_host = False

    def __call__(self, iteration):
        raise NotImplementedError

    def spec(self) -> dict | float | None:
        """JSON-able description for saved models (``None``: cannot be saved)."""
        return None

    def values(self, n_iter: int) -> np.ndarray:
        """The coefficients of iterations ``1 .. n_iter`` on the host (float64)."""
        its = jnp.arange(1, n_iter + 1)
        return np.asarray(jax.vmap(self.__call__)(its), np.float64).reshape(n_iter)


class Constant(Schedule):
    """``tau(it) = value`` at every iteration (what a plain number becomes)."""

    value: Any

    def __init__(self, value):
        self.value = _scalar(value)

    def __call__(self, iteration):
        return jnp.asarray(self.value)

    def spec(self):
        return float(self.value)

    def values(self, n_iter):
        return np.full(n_iter, float(self.value))

    def __repr__(self):
        return f"Constant({float(self.value):g})" if is_number(self.value) or np.ndim(self.value) == 0 else "Constant(...)"


class Step(Schedule):
    """``tau(it) = value if it >= start else before``."""

    start: Any
    value: Any
    before: Any

    def __init__(self, start, value, before=0.0):
        self.start, self.value, self.before = _scalar(start), _scalar(value), _scalar(before)

    def __call__(self, iteration):
        return jnp.where(jnp.asarray(iteration) >= self.start, self.value, self.before)

    def spec(self):
        return {"schedule": "Step", "start": float(self.start), "value": float(self.value), "before": float(self.before)}

    def values(self, n_iter):
        it = np.arange(1, n_iter + 1)
        return np.where(it >= float(self.start), float(self.value), float(self.before))

    def __repr__(self):
        return f"Step(start={float(self.start):g}, value={float(self.value):g}, before={float(self.before):g})"


class Linear(Schedule):
    """From ``first`` at iteration ``start`` linearly to ``last`` at ``stop`` (constant outside)."""

    start: Any
    stop: Any
    first: Any
    last: Any

    def __init__(self, start, stop, first, last):
        if is_number(start) and is_number(stop) and stop <= start:
            raise ValueError(f"Linear schedule: stop ({stop}) must be after start ({start})")
        self.start, self.stop, self.first, self.last = (_scalar(v) for v in (start, stop, first, last))

    def __call__(self, iteration):
        f = jnp.clip((jnp.asarray(iteration) - self.start) / (self.stop - self.start), 0.0, 1.0)
        return self.first + f * (self.last - self.first)

    def spec(self):
        return {"schedule": "Linear", "start": float(self.start), "stop": float(self.stop),
                "first": float(self.first), "last": float(self.last)}

    def values(self, n_iter):
        f = np.clip((np.arange(1, n_iter + 1) - float(self.start)) / (float(self.stop) - float(self.start)), 0.0, 1.0)
        return float(self.first) + f * (float(self.last) - float(self.first))

    def __repr__(self):
        return f"Linear({float(self.start):g}, {float(self.stop):g}, {float(self.first):g}, {float(self.last):g})"


class Table(Schedule):
    """``values[iteration - 1]``; after the table its last value."""

    values_: Any

    def __init__(self, values):
        v = np.asarray(values, np.float64).reshape(-1)
        if v.size == 0:
            raise ValueError("a Table schedule needs at least one value")
        self.values_ = v

    def __call__(self, iteration):
        v = jnp.asarray(self.values_)
        return v[jnp.clip(jnp.asarray(iteration) - 1, 0, v.shape[0] - 1)]

    def spec(self):
        return {"schedule": "Table", "values": [float(x) for x in np.asarray(self.values_)]}

    def values(self, n_iter):
        v = np.asarray(self.values_, np.float64)
        return v[np.clip(np.arange(n_iter), 0, v.size - 1)]

    def __repr__(self):
        return f"Table({np.asarray(self.values_).size} values)"


class Traced(Schedule):
    """A user function ``tau(iteration)`` written with ``jax.numpy`` (compiled into the fit)."""

    fn: Callable = eqx.field(static=True)

    def __call__(self, iteration):
        return jnp.asarray(self.fn(iteration))

    def __repr__(self):
        return f"Traced({getattr(self.fn, '__name__', self.fn)!r})"


class OnHost(Schedule):
    """A Python function evaluated by the driver on the host: ``tau(iteration, history)``
    (``with_history``) or a non-traceable ``tau(iteration)``; ``value`` holds the current value
    (a leaf, so updating it does not recompile).  A fit tabulates the second kind up front."""

    fn: Callable = eqx.field(static=True)
    with_history: bool = eqx.field(static=True, default=True)
    value: Any = 0.0
    on_host = True

    def __call__(self, iteration):
        return jnp.asarray(self.value)

    def evaluate(self, iteration: int, history) -> float:
        return _call_host(self.fn, iteration, history, self.with_history)

    def values(self, n_iter):
        if self.with_history:
            raise ValueError("a schedule of the score history has no values before the fit runs")
        return np.asarray([self.evaluate(i, None) for i in range(1, n_iter + 1)])

    def __repr__(self):
        return f"OnHost({getattr(self.fn, '__name__', self.fn)!r})"


def _n_required(fn) -> int:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return 1
    if any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values()):
        return 2
    return sum(1 for p in sig.parameters.values()
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


def _call_host(fn, iteration: int, history, with_history: bool) -> float:
    v = fn(iteration, history) if with_history else fn(iteration)
    if not (is_number(v) or (hasattr(v, "shape") and np.shape(v) == ())):
        raise ValueError(f"returned {v!r} at iteration {iteration}; expected a number")
    return float(v)


def as_schedule(tau, *, n_iter: int | None = None) -> Schedule:
    """A :class:`Schedule` from a number, a schedule, or a function (see the module docstring).

    A non-traceable ``tau(iteration)`` needs ``n_iter`` (it is tabulated for iterations
    ``1 .. n_iter``); without it, it is kept as :class:`OnHost` and tabulated when the fit knows
    its number of iterations (:meth:`Schedule` values are then checked up front).
    """
    if isinstance(tau, Schedule):
        return tau
    if is_number(tau) or (hasattr(tau, "shape") and np.shape(tau) == () and not callable(tau)):
        return Constant(tau)
    if not callable(tau):
        raise TypeError(f"a coefficient must be a number, a Schedule or a function tau(iteration), got {tau!r}")
    n = _n_required(tau)
    if n >= 2:
        return OnHost(tau)
    if n != 1:
        raise TypeError(f"a schedule must take the iteration (and optionally the history), "
                        f"{getattr(tau, '__name__', tau)!r} takes {n} arguments")
    try:
        out = jax.eval_shape(tau, jax.ShapeDtypeStruct((), jnp.int32))
        if getattr(out, "shape", None) == ():
            return Traced(tau)
    except Exception:  # noqa: BLE001 - Python control flow on the iteration: tabulate on the host
        pass
    if n_iter is not None:
        return Table([_call_host(tau, i, None, False) for i in range(1, n_iter + 1)])
    return OnHost(tau, with_history=False)


_SPECS = {"Step": Step, "Linear": Linear, "Table": lambda values: Table(values)}


def from_spec(spec) -> Schedule:
    """Rebuild a saved coefficient (:meth:`Schedule.spec`)."""
    if is_number(spec):
        return Constant(float(spec))
    if isinstance(spec, dict) and spec.get("schedule") in _SPECS:
        kw = {k: v for k, v in spec.items() if k != "schedule"}
        return _SPECS[spec["schedule"]](**kw)
    raise ValueError(f"cannot rebuild coefficient {spec!r}")


def check_values(values: np.ndarray, name: str, nonnegative: bool, first_iteration: int = 1) -> None:
    """A clear error naming the regularizer (and the iteration, for a schedule) for a NaN/inf or a
    negative coefficient of a regularizer that requires τ >= 0."""
    values = np.asarray(values, np.float64)
    constant = values.size <= 1 or bool(np.all(values == values[0]))

    def where(i):
        return "" if constant else f" at iteration {i + first_iteration}"

    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"regularizer {name!r}: coefficient {float(values[i])!r}{where(i)} is not finite")
    if nonnegative:
        neg = np.flatnonzero(values < 0)
        if neg.size:
            i = int(neg[0])
            raise ValueError(f"regularizer {name!r}: coefficient {float(values[i])!r}{where(i)} is negative; {name} "
                             "requires tau >= 0 (use the opposite regularizer, e.g. smooth_* instead of sparse_*)")
