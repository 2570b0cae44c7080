"""Hypergradients: the derivative of a validation objective with respect to the coefficients,
through a whole fit.

Write ``x = (Φ, Θ)``, ``F(x, u)`` for one regularized EM iteration (:func:`topicjax.artm.algorithm.step`,
ARTM eq. 14-16) with coefficients ``exp(u)``, ``x_K = F(x_{K-1}, u)`` for the fit from ``x_0``,
and ``f(x_K)`` for the objective (:mod:`topicjax.tune.objectives`).  Two ways to ``df/du``:

* :func:`unrolled` -- reverse mode through the ``K`` iterations (``jax.value_and_grad`` of
  :func:`topicjax.tune.problem.fit_at`, a ``lax.scan`` with a checkpointed step): the exact
  derivative of the fit that was run, schedules included (a Linear ramp's ``first`` matters
  through the early iterations), at the price of a reverse pass that recomputes every step
  (about 3-4 forward fits of time; memory: the ``K`` states).
* :func:`implicit` -- implicit differentiation at the fixed point ``x* = F(x*, u)``: with
  ``J = ∂F/∂x`` at ``x*``, ``dx*/du = (I - J)⁻¹ ∂F/∂u``, so ``df/du = λᵀ ∂F/∂u`` where the
  adjoint ``λ`` solves ``(I - J)ᵀ λ = ∂f/∂x``.  The system is solved iteratively with
  vector-Jacobian products of one EM iteration at ``x*`` (never forming ``J``): restarted GMRES
  (``solver="gmres"``, default) or the fixed-point iteration ``λ ← ∂f/∂x + Jᵀ λ``
  (``"neumann"``, which converges as fast as EM itself).  Its cost does not grow with ``K``:
  for long fits.  It is exact only at a fixed point: ``info["fixed_point_residual"]`` (the
  relative change ``|F(x_K) - x_K| / |x_K|``) says how far the fit is from one; at convergence
  the unrolled and implicit hypergradients agree (tested).  At the fixed point a schedule has
  reached its final value, so only the coefficients of the last iteration matter (a ramp's
  ``first`` has zero implicit derivative).  Regularizers that re-estimate their own data every
  pass (rate-controlled sparsing) have no fixed point in ``x`` alone: use ``"unrolled"``.

The positive part and clamp (:mod:`topicjax.core.mstep`): ``max(a, 0)`` has derivative 1 where
``a > 0`` and 0 elsewhere, so an entry that a sparsing coefficient zeroes has derivative zero
and the hypergradient stays finite (the derivative of a fit whose entry sits exactly at the
kink is the one-sided derivative from the zeroed side); a column with no positive entry is
zeros, with zero derivative. A document that sparsing empties (its θ column all zeros) has p =
0 for all its words; the E-step clamps p at ``EPS`` and gives those terms exactly zero
derivative (:func:`topicjax.core.estep.sliced_counts`), so it adds nothing to the hypergradient
instead of the NaN of ``n / EPS²`` overflowing in float32. The E-step is the pure-JAX kernel
whatever ``TOPICJAX_ESTEP`` selects (:mod:`topicjax.tune.backend`).

>>> import jax.numpy as jnp, topicjax as tj
>>> from topicjax import regularizers as R
>>> from topicjax.tune import Problem, targets_from, unrolled, objectives as O
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=60, seed=0)
>>> train, valid = corpus.train_test_split(20, seed=0)
>>> model = tj.ARTM(5, regularizers=[(R.smooth_phi(), 0.1)], max_iter=10, progress=False)
>>> problem = Problem.from_model(model, train)
>>> targets = targets_from(problem.reg, {"smooth_phi": (1e-3, 10.0)})
>>> objective = O.heldout_perplexity_loss(*valid.completion_split())
>>> value, parts, grad, state = unrolled(problem, objective, targets, jnp.log(jnp.array([0.1])))
>>> grad.shape
(1,)

Every entry point here traces its fit at full float32 matrix precision
(:func:`topicjax.core.numerics.full_precision`), as :func:`~topicjax.tune.tune` and ``ARTM.fit``
do: the same numbers on a GPU, and one compiled program for a direct call and the tuner's.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from topicjax.artm import algorithm as em
from topicjax.tune.backend import engine
from topicjax.tune.objectives import Objective
from topicjax.tune.problem import Problem, fit_at, set_coefs
from topicjax.core import numerics
from topicjax.core.compiled import jit

__all__ = ["unrolled", "implicit", "forward", "forward_many", "fit_state", "fixed_point_map", "SOLVERS"]

SOLVERS = ("gmres", "neumann")


def _keys(targets):
    return tuple(t.key for t in targets)


def _evaluate(problem: Problem, objective: Objective, state):
    return objective(state.phi[: problem.n_word_rows], state.theta)


def _unrolled_impl(problem, objective, targets, u):
    def f(u):
        state = fit_at(problem, targets, u)
        value, parts = _evaluate(problem, objective, state)
        return value, (parts, state)

    (value, (parts, state)), grad = jax.value_and_grad(f, has_aux=True)(u)
    return value, parts, grad, state


_unrolled_jit = jit(_unrolled_impl, static_argnames=("targets",))


@numerics.full_precision
def unrolled(problem: Problem, objective: Objective, targets, u):
    """``(value, parts, df/du, final state)`` by reverse mode through the unrolled fit."""
    return _unrolled_jit(problem, objective, _keys(targets), jnp.asarray(u, problem.state.phi.dtype))


def _forward_impl(problem, objective, targets, u):
    state = fit_at(problem, targets, u)
    value, parts = _evaluate(problem, objective, state)
    return value, parts, state


_forward_jit = jit(_forward_impl, static_argnames=("targets",))


@numerics.full_precision
def forward(problem: Problem, objective: Objective, targets, u):
    """``(value, parts, final state)``: the fit and its objective, without derivatives."""
    return _forward_jit(problem, objective, _keys(targets), jnp.asarray(u, problem.state.phi.dtype))


def _forward_many_impl(problem, objective, targets, us):
    def one(u):
        value, _, state = _forward_impl(problem, objective, targets, u)
        finite, present = em.health(state, problem.cfg.update_phi)
        return value, finite & present & jnp.isfinite(value)

    return jax.vmap(one)(us)


_forward_many_jit = jit(_forward_many_impl, static_argnames=("targets",))


@numerics.full_precision
def forward_many(problem: Problem, objective: Objective, targets, us):
    """``(values, ok)`` of the fits at the rows of ``us`` (P, n targets), in one compiled call
    without derivatives: the fits run side by side as one batch of models through the engine's
    E-step (the batched kernel of :func:`topicjax.core.estep.expected_counts`, as
    ``ARTM.fit_many``), not the differentiable one.  ``ok[i]`` is False where fit ``i``
    collapsed (every topic or document removed, ARTM Notes 1-2) or is not finite: its value
    means nothing."""
    problem = eqx.tree_at(lambda p: p.data, problem, engine(problem.data))
    return _forward_many_jit(problem, objective, _keys(targets), jnp.asarray(us, problem.state.phi.dtype))


def fixed_point_map(problem: Problem, targets, state):
    """``F(x, u)``: one EM iteration from ``x = (Φ, Θ)`` with the rest of ``state`` (masks of
    removed topics and documents, regularizer data) held as it is and the coefficients of the
    last iteration of the fit (iteration ``problem.n_iter``)."""
    base = state._replace(iteration=jnp.asarray(problem.n_iter - 1, state.iteration.dtype))

    def F(x, u):
        s = em.step(base._replace(phi=x[0], theta=x[1]), problem.data, set_coefs(problem.reg, targets, u),
                    problem.aux, problem.cfg)
        return s.phi, s.theta

    return F


def _tree_norm(t):
    return jnp.sqrt(sum(jnp.sum(jnp.square(a)) for a in jax.tree.leaves(t)))


def _implicit_impl(problem, objective, targets, u, state, solver, tol, maxiter, restart):
    F = fixed_point_map(problem, targets, state)
    x = (state.phi, state.theta)
    (value, parts), fx = jax.value_and_grad(
        lambda x: objective(x[0][: problem.n_word_rows], x[1]), has_aux=True)(x)
    Fx, vjp = jax.vjp(F, x, u)

    def jt(v):  # Jᵀ v
        return vjp(v)[0]

    def a_t(v):  # (I - J)ᵀ v
        return jax.tree.map(jnp.subtract, v, jt(v))

    if solver == "gmres":
        lam, _ = jax.scipy.sparse.linalg.gmres(a_t, fx, x0=fx, tol=tol, atol=0.0, restart=restart, maxiter=maxiter,
                                               solve_method="incremental")
    else:
        b_norm = _tree_norm(fx)

        def cond(c):
            k, _, change = c
            return (k < maxiter) & (change > tol * b_norm)

        def body(c):
            k, lam, _ = c
            new = jax.tree.map(jnp.add, fx, jt(lam))
            return k + 1, new, _tree_norm(jax.tree.map(jnp.subtract, new, lam))

        _, lam, _ = jax.lax.while_loop(cond, body, (jnp.zeros((), jnp.int32), fx, jnp.asarray(jnp.inf, fx[0].dtype)))
    grad = vjp(lam)[1]
    info = {
        "fixed_point_residual": _tree_norm(jax.tree.map(jnp.subtract, Fx, x)) / jnp.maximum(_tree_norm(x), 1e-30),
        "adjoint_residual": _tree_norm(jax.tree.map(jnp.subtract, a_t(lam), fx)) / jnp.maximum(_tree_norm(fx), 1e-30),
    }
    return value, parts, grad, info


_implicit_jit = jit(_implicit_impl, static_argnames=("targets", "solver", "maxiter", "restart"))


@numerics.full_precision
def implicit(problem: Problem, objective: Objective, targets, u, state=None, *, solver: str = "gmres",
             tol: float = 1e-6, maxiter: int = 200, restart: int = 30):
    """``(value, parts, df/du, info)`` by implicit differentiation at the end of the fit.

    ``state``: the fitted state (default: the fit is run first, :func:`forward`); ``solver``:
    ``"gmres"`` (restarted every ``restart`` vectors, at most ``maxiter`` restarts) or
    ``"neumann"`` (at most ``maxiter`` iterations); ``tol``: relative residual of the adjoint
    system.  ``info``: ``fixed_point_residual`` (how far the fit is from a fixed point) and
    ``adjoint_residual`` (how well the adjoint system was solved)."""
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    updating = [t.name for t in problem.reg.terms if t.update is not None]
    if updating:
        raise ValueError(f"implicit hypergradients need a fixed point of (Phi, Theta), but regularizers {updating} "
                         "re-estimate their data every pass; use method='unrolled'")
    targets = _keys(targets)
    u = jnp.asarray(u, problem.state.phi.dtype)
    if state is None:
        state = fit_state(problem, targets, u)
    return _implicit_jit(problem, objective, targets, u, state, solver, float(tol), int(maxiter), int(restart))


_fit_jit = jit(fit_at, static_argnames=("targets",))


@numerics.full_precision
def fit_state(problem: Problem, targets, u):
    """The fitted state (compiled :func:`~topicjax.tune.problem.fit_at`, no derivatives)."""
    return _fit_jit(problem, _keys(targets), jnp.asarray(u, problem.state.phi.dtype))
