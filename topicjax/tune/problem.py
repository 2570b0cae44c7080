"""A fit as a differentiable function of its coefficients.

:class:`Problem` holds what :meth:`ARTM.fit <topicjax.artm.ARTM.fit>` computes before its first
iteration (:meth:`~topicjax.artm.ARTM.fit_problem`: the device data, the bound regularizer, the
initial state, the step's config) with the E-step made differentiable to second order
(:func:`topicjax.tune.backend.differentiable`).  :class:`Target` names one number of the
regularizer to tune -- a coefficient, or a parameter of its schedule -- and
:func:`set_coefs` writes values into those leaves of the regularizer's pytree
(``eqx.tree_at``), so a fit is a pure function of a vector ``u`` of (log) coefficients:

    fit_at(problem, targets, u) = em.step ∘ ... ∘ em.step (problem.state)      (n_iter steps)

run by :func:`fit_at` as a ``lax.scan`` whose body is ``jax.checkpoint``-ed: the reverse pass keeps
only the ``n_iter`` states (Φ, Θ), O(n_iter (W T + T D)) numbers, and recomputes each step's
E-step while it goes back.  It is the same sequence of steps as ``ARTM.fit`` with ``tol=0``
(equal up to float round-off; tested).

>>> import jax.numpy as jnp, topicjax as tj
>>> from topicjax import regularizers as R
>>> from topicjax.tune.problem import Problem, fit_at, targets_from
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=30, seed=0)
>>> model = tj.ARTM(5, regularizers=[(R.smooth_phi(), 0.1)], max_iter=5, progress=False)
>>> problem = Problem.from_model(model, corpus)
>>> targets = targets_from(problem.reg, {"smooth_phi": (1e-3, 1.0)})
>>> fit_at(problem, targets, jnp.log(jnp.array([0.1]))).phi.shape
(25, 5)
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Mapping, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from topicjax.artm import algorithm as em
from topicjax.regularizers import Regularizer
from topicjax.regularizers.schedules import Constant, Step, Table, is_number
from topicjax.tune.backend import differentiable

__all__ = ["Problem", "Target", "targets_from", "set_coefs", "initial_values", "fit_at", "coefficient_fields"]


class Problem(eqx.Module):
    """A fit of ``n_iter`` EM iterations from ``state`` (see the module docstring).

    ``data`` is the differentiable device layout, ``reg`` the bound regularizer, ``aux`` the
    model's structure arrays, ``cfg`` the :class:`~topicjax.artm.algorithm.EMConfig`; ``n_word_rows``
    rows of Φ are words (the rest are class rows, ARTM Theorem 3).  A pytree: the arrays and the
    coefficients are traced arguments of compiled functions, the rest is static.
    """

    data: Any
    reg: Regularizer
    aux: Any
    state: em.EMState
    cfg: em.EMConfig = eqx.field(static=True)
    n_iter: int = eqx.field(static=True)
    n_word_rows: int = eqx.field(static=True)

    @classmethod
    def from_model(cls, model, X, y=None, *, dtype=None) -> "Problem":
        """The problem of ``model.fit(X, y)`` (an :class:`~topicjax.artm.ARTM` estimator), in
        ``dtype`` (default float32, the estimator's; float64 needs ``jax_enable_x64``)."""
        if not hasattr(model, "fit_problem"):
            raise TypeError(f"tuning needs an ARTM-family estimator (with fit_problem), got {type(model).__name__}")
        names = [t.name for t in model.regularizer().terms if t.coef.on_host and t.coef.with_history]
        if names:
            raise ValueError(f"regularizers {names} have schedules of the score history (evaluated on the host); "
                             "they cannot be differentiated: use a schedule of the iteration")
        if float(getattr(model, "tol", 0.0) or 0.0) > 0:
            warnings.warn(f"{type(model).__name__}.tol = {model.tol} is ignored: a differentiated fit runs exactly "
                          f"max_iter = {model.max_iter} iterations (set tol=0 for fits that match)", stacklevel=3)
        fp = model.fit_problem(X, y)
        # the binders (closures made per regularizer object) have done their work; without them
        # problems of equal structure share compiled code
        reg = Regularizer([dataclasses.replace(t, binder=None) for t in fp.reg.terms])
        problem = cls(differentiable(fp.data), reg, fp.aux, fp.state, fp.cfg, int(model.max_iter),
                      int(fp.structure.corpus.n_words))
        return problem if dtype is None else problem.cast(dtype)

    def cast(self, dtype) -> "Problem":
        """The floating arrays (counts, regularizer data, state) in ``dtype``."""
        dtype = jnp.dtype(dtype)
        if dtype == jnp.float64 and not jax.config.jax_enable_x64:
            raise ValueError("float64 needs jax.config.update('jax_enable_x64', True) first")

        def conv(x):
            if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating):
                return jnp.asarray(x, dtype)
            return x

        data = self.data._replace(count=self.data.count.astype(dtype))
        return eqx.tree_at(lambda p: (p.data, p.reg, p.state), self,
                           (data, self.reg.cast(dtype), jax.tree.map(conv, self.state)))


# ----------------------------------------------------------------------------- targets
class Target(NamedTuple):
    """One tuned number: leaf ``field`` of the coefficient (schedule) of term ``term``.

    ``log``: tuned as ``u = log(value)`` (the default: coefficients are positive and matter on
    a log scale); ``lower``/``upper``: bounds of the value (``u`` is projected onto them)."""

    name: str
    term: int
    field: str
    lower: float
    upper: float
    log: bool = True

    @property
    def key(self) -> "Target":
        """The target without its name and bounds: what compiled code depends on (a static
        argument), so that other bounds reuse it."""
        return Target("", self.term, self.field, 0.0, 0.0, self.log)

    @property
    def bounds_u(self) -> tuple[float, float]:
        """The bounds of ``u``."""
        if self.log:
            lo = -np.inf if self.lower <= 0 else float(np.log(self.lower))
            return lo, float(np.log(self.upper)) if np.isfinite(self.upper) else np.inf
        return float(self.lower), float(self.upper)


def coefficient_fields(coef) -> tuple[str, ...]:
    """The number-valued fields of a schedule that a :class:`Target` can name."""
    if isinstance(coef, (Table,)) or not isinstance(coef, eqx.Module):
        return ()
    out = []
    for k in coef.__dataclass_fields__:
        v = getattr(coef, k, None)
        if is_number(v) or (hasattr(v, "shape") and np.shape(v) == () and not callable(v)):
            out.append(k)
    return tuple(out)


def _default_field(coef) -> str | None:
    if isinstance(coef, (Constant, Step)):
        return "value"
    if "factor" in coefficient_fields(coef):  # a schedule multiplied by a number
        return "factor"
    return None


def targets_from(reg: Regularizer, spec) -> tuple[Target, ...]:
    """Targets from ``spec``: a mapping ``{"name": (lower, upper), "name.field": ...}`` (or a
    list of names, unbounded).

    ``name`` is a regularizer term's name (``reg.names``); ``field`` a number of its schedule
    (``value`` of a :class:`~topicjax.regularizers.schedules.Constant` or ``Step`` by default;
    ``first``/``last`` of a ``Linear`` ramp; any number-valued field).  A bound pair may be
    ``(lower, upper, "linear")`` to tune the value itself instead of its logarithm (a field that
    can be negative or zero).  Iteration thresholds enter through comparisons: the derivative
    with respect to ``Step.start`` is zero, and a ``Linear`` ramp's ``start``/``stop`` move the
    fit only through the iterations inside the ramp."""
    if isinstance(spec, Mapping):
        items = list(spec.items())
    elif isinstance(spec, (list, tuple)):
        items = [(s, None) for s in spec]
    else:
        raise TypeError(f"coefficients to tune must be a mapping name -> (lower, upper) or a list of names, got {spec!r}")
    if not items:
        raise ValueError("no coefficients to tune")
    names = list(reg.names)
    out, seen = [], set()
    for key, bounds in items:
        if not isinstance(key, str):
            raise TypeError(f"a tuned coefficient is named by a string 'regularizer' or 'regularizer.field', got {key!r}")
        base, _, field = key.partition(".")
        if base not in names:
            raise ValueError(f"tune: no regularizer named {base!r}; the model has {names}")
        i = names.index(base)
        coef = reg.terms[i].coef
        if coef.on_host:
            raise ValueError(f"tune: the coefficient of {base!r} is a Python function evaluated on the host "
                             f"({coef!r}; for schedules of the score history: not differentiable); tune a number "
                             "of a Constant, Step or Linear schedule instead")
        fields = coefficient_fields(coef)
        if not field:
            field = _default_field(coef)
            if field is None:
                raise ValueError(f"tune: the coefficient of {base!r} is {coef!r}; name one of its numbers as "
                                 f"'{base}.<field>' with field in {list(fields)}")
        if field not in fields:
            raise ValueError(f"tune: {key!r}: the coefficient {coef!r} of {base!r} has no number {field!r}; "
                             f"it has {list(fields)}")
        if (i, field) in seen:
            raise ValueError(f"tune: {key!r} is named twice")
        seen.add((i, field))
        log = True
        if bounds is None:
            lower, upper = 0.0, np.inf
        else:
            b = tuple(bounds)
            if len(b) == 3 and b[2] in ("log", "linear"):
                log, b = b[2] == "log", b[:2]
            if len(b) != 2 or not all(is_number(x) for x in b):
                raise ValueError(f"tune: bounds of {key!r} must be (lower, upper) numbers, got {bounds!r}")
            lower, upper = float(b[0]), float(b[1])
            if not lower < upper:
                raise ValueError(f"tune: bounds of {key!r}: lower {lower} must be below upper {upper}")
            if log and lower <= 0:
                raise ValueError(f"tune: {key!r} is tuned on a log scale; its lower bound must be > 0, got {lower} "
                                 "(or give (lower, upper, 'linear'))")
        out.append(Target(key, i, field, lower, upper, log))
    return tuple(out)


def initial_values(reg: Regularizer, targets) -> np.ndarray:
    """The current values of the targets, as ``u`` (log where tuned on a log scale), float64."""
    u = []
    for t in targets:
        v = float(np.asarray(getattr(reg.terms[t.term].coef, t.field)))
        if t.log and v <= 0:
            raise ValueError(f"tune: {t.name!r} is {v}; a coefficient tuned on a log scale must start > 0 "
                             "(give a starting value inside the bounds)")
        u.append(np.log(v) if t.log else v)
    return np.asarray(u, np.float64)


def set_coefs(reg: Regularizer, targets, u) -> Regularizer:
    """``reg`` with target ``k`` set to ``exp(u[k])`` (or ``u[k]`` for a linear-scale target):
    leaves replaced with ``eqx.tree_at``, so ``u`` may be traced."""
    u = jnp.asarray(u)
    for k, t in enumerate(targets):
        v = jnp.exp(u[k]) if t.log else u[k]
        reg = eqx.tree_at(lambda r, t=t: getattr(r.terms[t.term].coef, t.field), reg, v)
    return reg


def fit_at(problem: Problem, targets, u) -> em.EMState:
    """The state after ``problem.n_iter`` EM iterations with the targets set to ``u``: a
    ``lax.scan`` over :func:`topicjax.artm.algorithm.step` with a ``jax.checkpoint``-ed body
    (reverse-differentiable with memory O(n_iter) states)."""
    reg = set_coefs(problem.reg, targets, u)

    @jax.checkpoint
    def one(state):
        return em.step(state, problem.data, reg, problem.aux, problem.cfg)

    state, _ = jax.lax.scan(lambda s, _: (one(s), None), problem.state, None, length=problem.n_iter)
    return state
