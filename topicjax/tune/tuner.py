"""Tune regularization coefficients by gradient descent on a validation objective.

:func:`tune` takes an ARTM estimator with its regularizers, a training corpus, an objective
(:mod:`topicjax.tune.objectives`), the coefficients to tune (by regularizer name, with bounds)
and an optax optimizer.  Every step fits the model with the current coefficients, measures the
objective and its hypergradient with respect to ``u = log(coefficient)``
(:mod:`topicjax.tune.hypergrad`: one compiled call, ``"unrolled"`` or ``"implicit"``), then takes
one optimizer step on ``u`` and projects it onto the bounds (projected gradient descent in
log space: a coefficient moves by factors, as a grid of powers of ten does).  Coefficients are
traced leaves of the regularizer, so nothing recompiles between steps.  Gradient steps find a
local optimum; with ``probe`` the tuner also looks along each coefficient over its whole bounds
whenever its steps stall (a batch of cheap forward fits) and moves to another basin when one
is better.

It returns a :class:`TuneResult`: the best coefficients seen, the estimator fitted with them
(an ordinary ``fit``, so it carries the usual history, scores and ``transform``), and the history
of the steps (objective and its parts, coefficients, gradients, seconds per step).

>>> import optax, topicjax as tj
>>> from topicjax import regularizers as R
>>> from topicjax.tune import heldout_perplexity_loss, tune
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=80, seed=0)
>>> train, valid = corpus.train_test_split(20, seed=0)
>>> model = tj.ARTM(10, regularizers=[(R.smooth_phi(), 0.01), (R.sparse_theta(), 0.01)], max_iter=15,
...                 progress=False, scores=())
>>> result = tune(model, train, heldout_perplexity_loss(*valid.completion_split(seed=0)),
...               {"smooth_phi": (1e-3, 1.0), "sparse_theta": (1e-3, 1.0)}, optimizer=optax.adam(0.3),
...               n_steps=4, progress=False)
>>> len(result.history), sorted(result.coefs)
(4, ['smooth_phi', 'sparse_theta'])
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from topicjax._sklearn_api import clone
from topicjax.artm import algorithm as em
from topicjax.core import numerics
from topicjax.core.compiled import jit
from topicjax.core.errors import NumericalError
from topicjax.tune import hypergrad
from topicjax.tune.objectives import as_objective
from topicjax.tune.problem import Problem, initial_values, targets_from

__all__ = ["tune", "TuneResult", "with_values", "default_optimizer", "METHODS"]

METHODS = ("unrolled", "implicit")

#: the fit's health check as one compiled program (eagerly, each of its reductions compiled one)
_health = jit(em.health, static_argnames=("update_phi",))


class TuneResult(NamedTuple):
    """What :func:`tune` returns.

    ``coefs``: ``{target name: value}`` at the best step; ``model``: the estimator fitted with
    them (``None`` with ``refit=False``); ``history``: one dict per step (``step``,
    ``objective``, ``<part>`` for each part of the objective, ``coef/<name>``, ``grad/<name>``
    (d objective / d log coefficient), ``best`` (the best value so far, probes included),
    ``seconds`` (the probe's fits included), after a probe ``probe_fits`` and ``probe_best``,
    and for ``"implicit"`` the ``fixed_point_residual``); ``best_step`` (the step whose fit, or
    after which the probe's fit, was best), ``best_value``."""

    coefs: dict
    model: object
    history: list
    best_step: int
    best_value: float


def with_values(reg, targets, values: dict):
    """``reg`` (bound or not) with the targets set to the numbers ``values[name]`` (host floats,
    so the result can be saved with its schedule specs)."""
    for t in targets:
        reg = eqx.tree_at(lambda r, t=t: getattr(r.terms[t.term].coef, t.field), reg, float(values[t.name]))
    return reg


def default_optimizer(n_steps: int, learning_rate: float = 0.3):
    """Adam on the log coefficients with a learning rate decaying from ``learning_rate`` to 5% of
    it on a cosine over ``n_steps``, and momentum ``b1 = 0.5`` (the usual 0.9 overshoots: a
    coefficient that should move by a factor of 2 swings past it for several steps).  A step
    moves each coefficient by a factor of up to ``exp(learning_rate)``."""
    import optax

    return optax.adam(optax.cosine_decay_schedule(learning_rate, max(int(n_steps), 1), alpha=0.05), b1=0.5)


def _project(u, lo, hi):
    return jnp.clip(u, lo, hi)


@numerics.full_precision
def tune(model, X, objective, coefs, *, y=None, optimizer=None, n_steps: int = 30, method: str = "unrolled",
         init: dict | None = None, dtype=None, progress: bool = True, callback: Callable | None = None,
         implicit_options: dict | None = None, refit: bool = True, probe: int = 0, patience: int = 2,
         probe_tol: float = 1e-5) -> TuneResult:
    """Tune coefficients of ``model``'s regularizers on ``objective`` (see the module docstring).

    ``model``: an :class:`~topicjax.artm.ARTM` estimator (its ``max_iter`` iterations -- exactly
    that many: ``tol`` must be 0 --, seed and regularizers define the fit); ``X`` (and ``y``): the training corpus (and labels);
    ``objective``: an :class:`~topicjax.tune.objectives.Objective` or ``f(phi, theta) ->
    scalar`` (minimised); ``coefs``: ``{"name": (lower, upper), "name.field": ...}``
    (:func:`~topicjax.tune.problem.targets_from`: log-scale bounds, schedule fields);
    ``optimizer``: an ``optax.GradientTransformation`` on ``u = log(coefficient)`` (default
    :func:`default_optimizer`); ``n_steps``: number of fits (and gradients); ``method``:
    ``"unrolled"`` or ``"implicit"`` (``implicit_options``: keywords of
    :func:`~topicjax.tune.hypergrad.implicit`); ``init``: starting values ``{name: value}``
    (default: the model's own coefficients, clipped into the bounds); ``dtype``: of the fit
    (default float32); ``callback(record) -> bool``: called after every step with its history
    record, True stops; ``refit``: fit the estimator with the best coefficients at the end.

    ``probe``: when the best value has improved by less than ``probe_tol`` times its size over the
    last ``patience`` steps (the steps have stalled or creep), fit ``probe``
    values of each tuned coefficient spread over its whole bounds (log-spaced), the others held
    at the best point, in one compiled call (:func:`~topicjax.tune.hypergrad.forward_many`, the
    engine's batched E-step: a fit costs a fraction of a hypergradient); if one of those fits is
    better than the best so far the tuner continues from it.  Gradient steps find the nearest
    local optimum; a validation objective can have several along one coefficient (the
    decorrelation of experiments/tune_vs_grid.py on 20 Newsgroups: a ridge between two basins
    with the best one at the upper bound), and the probe is how the tuner crosses to another
    basin.  0 (the default) never probes; probing needs finite bounds.
    """
    import optax
    from tqdm.auto import tqdm

    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if int(n_steps) < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}")
    if int(probe) < 0 or int(probe) == 1 or int(patience) < 1 or not float(probe_tol) >= 0:
        raise ValueError(f"probe must be 0 (none) or at least 2 values per coefficient, patience a positive integer "
                         f"and probe_tol >= 0, got probe={probe!r}, patience={patience!r}, probe_tol={probe_tol!r}")
    objective = as_objective(objective)
    if not hasattr(model, "regularizer"):
        raise TypeError(f"tune needs an ARTM-family estimator, got {type(model).__name__}")
    # names, fields and bounds are checked on the estimator's own regularizer first (the same
    # terms in the same order as the bound one), before any work on the device
    targets = targets_from(model.regularizer(), coefs)
    if init:
        unknown = set(init) - {t.name for t in targets}
        if unknown:
            raise ValueError(f"init names {sorted(unknown)} that are not tuned; tuned: {[t.name for t in targets]}")
    problem = Problem.from_model(model, X, y, dtype=dtype)
    objective.check(problem.n_word_rows, int(problem.state.theta.shape[1]))
    objective = objective.cast(problem.state.phi.dtype)
    objective.check_traceable(problem.state.phi[: problem.n_word_rows], problem.state.theta)
    lo = jnp.asarray([t.bounds_u[0] for t in targets], problem.state.phi.dtype)
    hi = jnp.asarray([t.bounds_u[1] for t in targets], problem.state.phi.dtype)
    u0 = initial_values(problem.reg, targets)
    if init:
        for k, t in enumerate(targets):
            if t.name in init:
                v = float(init[t.name])
                if t.log and v <= 0:
                    raise ValueError(f"init[{t.name!r}] = {v} must be > 0 (tuned on a log scale)")
                u0[k] = np.log(v) if t.log else v
    if probe and not bool(jnp.all(jnp.isfinite(lo) & jnp.isfinite(hi))):
        raise ValueError(f"probe needs finite bounds for every tuned coefficient; bounds: "
                         f"{ {t.name: (t.lower, t.upper) for t in targets} }")
    u = _project(jnp.asarray(u0, problem.state.phi.dtype), lo, hi)
    if optimizer is None:
        optimizer = default_optimizer(int(n_steps))
    opt_state = optimizer.init(u)
    opts = dict(implicit_options or {})

    history: list[dict] = []
    best_u, best_value, best_step = u, np.inf, -1
    bests, last_probe = [], -1  # best value after each step; the step of the last probe
    bar = tqdm(total=int(n_steps), desc="tune", disable=not progress, leave=False)
    try:
        for step in range(int(n_steps)):
            t0 = time.perf_counter()
            if method == "unrolled":
                value, parts, grad, state = hypergrad.unrolled(problem, objective, targets, u)
                info = {}
            else:
                state = hypergrad.fit_state(problem, targets, u)
                value, parts, grad, info = hypergrad.implicit(problem, objective, targets, u, state, **opts)
            value, grad = float(value), np.asarray(grad, np.float64)
            values = _values(targets, u)
            if not bool(_health(state, update_phi=problem.cfg.update_phi)[1]):
                raise NumericalError(f"tune: step {step}: the fit at coefficients {values} removes every topic or every "
                                     "document (ARTM Notes 1-2); narrow the bounds", iteration=step, reason="collapse")
            if not (np.isfinite(value) and np.all(np.isfinite(grad))):
                raise NumericalError(f"tune: step {step}: the objective or its gradient is not finite at coefficients "
                                     f"{values} (objective {value}); narrow the bounds", iteration=step,
                                     reason="nonfinite")
            if value < best_value:
                best_u, best_value, best_step = u, value, step
            bests.append(best_value)
            probed = {}
            if step < int(n_steps) - 1:
                updates, opt_state = optimizer.update(jnp.asarray(grad, u.dtype), opt_state, u)
                u = _project(optax.apply_updates(u, updates), lo, hi)
                if probe and step - last_probe > int(patience) and (
                        bests[-1 - int(patience)] - best_value <= float(probe_tol) * abs(best_value)):
                    points = _probe_points(best_u, lo, hi, int(probe))
                    vals, ok = hypergrad.forward_many(problem, objective, targets, points)
                    vals = np.where(np.asarray(ok), np.asarray(vals, np.float64), np.inf)
                    k = int(np.argmin(vals))
                    probed = {"probe_fits": len(points), "probe_best": float(vals[k])}
                    if vals[k] < best_value:  # another basin: continue from there
                        u = points[k]
                        best_u, best_value, best_step = u, float(vals[k]), step
                    last_probe = step
                u.block_until_ready()
            rec = {"step": step, "objective": value, "best": best_value, **probed,
                   **{k: float(v) for k, v in parts.items()},
                   **{f"coef/{k}": v for k, v in values.items()},
                   **{f"grad/{t.name}": float(g) for t, g in zip(targets, grad)},
                   **{k: float(v) for k, v in info.items()},
                   "seconds": time.perf_counter() - t0}
            history.append(rec)
            bar.update(1)
            bar.set_postfix(objective=f"{value:.6g}")
            if callback is not None and callback(rec):
                break
    finally:
        bar.close()
    best = _values(targets, best_u)
    fitted = None
    if refit:
        fitted = clone(model)
        fitted.set_params(regularizers=with_values(model.regularizer(), targets, best))
        fitted.fit(X, y)
    return TuneResult(best, fitted, history, best_step, best_value)


def _probe_points(u, lo, hi, n: int):
    """``n`` evenly spaced values of each coordinate over ``[lo, hi]`` with the others at ``u``:
    (number of coordinates x n, number of coordinates)."""
    axes = jnp.linspace(lo, hi, n)  # (n, k)
    k = u.shape[0]
    points = jnp.broadcast_to(u, (k, n, k))
    return points.at[jnp.arange(k), :, jnp.arange(k)].set(axes.T).reshape(k * n, k)


def _values(targets, u) -> dict:
    u = np.asarray(u, np.float64)
    return {t.name: float(np.exp(v) if t.log else v) for t, v in zip(targets, u)}
