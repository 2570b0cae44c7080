"""Hypergradients in float64 against central finite differences of the fit itself, and the
unrolled and implicit hypergradients against each other at convergence.

The reference is independent of the code under test: ``(f(u + h e_k) - f(u - h e_k)) / 2h`` of
the objective after a complete (forward-only) fit.  The problem has three regularizers --
smoothing of Φ, sparsing of Θ with a Linear ramp (its ``first`` and ``last`` tuned) and
decorrelation switched on by a Step schedule (its ``value`` tuned) -- and three objectives
(held-out perplexity, smooth coherence, classification), one compiled hypergradient for all of
them (the objective's weights are traced leaves).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import topicjax as tj
from topicjax import regularizers as R
from topicjax.regularizers.schedules import Linear, Step
from topicjax.tune import Problem, forward, implicit, targets_from, unrolled
from topicjax.tune import objectives as O
from topicjax.tune.problem import initial_values

TARGETS = {"smooth_phi": (1e-3, 10.0), "sparse_theta.first": (1e-3, 10.0), "sparse_theta.last": (1e-3, 10.0),
           "decorrelate": (1e-2, 1e3)}
PARTS = ("log_perplexity", "neg_npmi", "cross_entropy")


def regularizers(smooth=0.05, sparse=0.3, decorrelate=20.0):
    # decorrelation switched on at iteration 3 (a Step: its value is the tuned number)
    return [(R.smooth_phi(), smooth), (R.sparse_theta(), Linear(1, 10, 0.05, sparse)),
            (R.decorrelate(), Step(3, decorrelate))]


def make(train, n_iter, objective, **coefs):
    model = tj.ARTM(5, regularizers=regularizers(**coefs), max_iter=n_iter, progress=False, scores=())
    problem = Problem.from_model(model, train, dtype=jnp.float64)
    targets = targets_from(problem.reg, TARGETS)
    u = jnp.asarray(initial_values(problem.reg, targets))
    return problem, targets, u, objective.cast(jnp.float64)


@pytest.fixture(scope="module")
def short(x64, bars_split):
    """A 20-iteration fit and the three objectives."""
    train, valid, _ = bars_split
    observed, heldout = valid.completion_split(seed=0)
    objective = O.heldout_perplexity_loss(observed, heldout) + O.coherence_loss(train) + O.classification_loss(train, valid)
    assert objective.names == PARTS
    return make(train, 20, objective)


def central_differences(problem, objective, targets, u, h=1e-5):
    out = []
    for k in range(u.shape[0]):
        e = jnp.zeros_like(u).at[k].set(h)
        out.append((float(forward(problem, objective, targets, u + e)[0])
                    - float(forward(problem, objective, targets, u - e)[0])) / (2 * h))
    return np.asarray(out)


@pytest.mark.parametrize("part", PARTS)
def test_unrolled_hypergradient_equals_central_differences(short, part):
    """For each objective: d objective / d log(coefficient) of the 20-iteration fit for
    smoothing, both ends of a sparsing ramp and decorrelation agrees with central differences
    to a relative error below 1e-4; sparsing zeroes entries of Θ in this fit and the
    gradients stay finite (the positive part and the clamp have zero derivative there)."""
    problem, targets, u, objective = short
    objective = objective.reweighted([1.0 if n == part else 0.0 for n in PARTS])
    value, parts, grad, state = unrolled(problem, objective, targets, u)
    assert float(value) == pytest.approx(float(parts[part]), rel=1e-12)
    assert bool((state.theta == 0).any()), "the test needs entries zeroed by sparsing"
    grad = np.asarray(grad)
    assert np.all(np.isfinite(grad))
    fd = central_differences(problem, objective, targets, u)
    scale = np.max(np.abs(fd))
    assert scale > 0
    for k, t in enumerate(targets):
        # components far below the largest are compared at the largest one's scale (their
        # differences carry round-off of order 1e-16 |f| / h)
        denom = max(abs(fd[k]), 1e-3 * scale)
        assert abs(grad[k] - fd[k]) / denom < 1e-4, (part, t.name, grad[k], fd[k])
    # the objective does not depend on every coefficient equally, but on each of them
    assert np.all(np.abs(grad) > 0)


def test_hypergradient_of_weighted_sum_is_weighted_sum(short):
    """The objective's weights are leaves: the hypergradient of 2 A + 0.5 B - C is the same
    combination of the parts' hypergradients (one compiled function for all)."""
    problem, targets, u, objective = short
    grads = []
    for part in PARTS:
        grads.append(np.asarray(unrolled(problem, objective.reweighted([float(n == part) for n in PARTS]), targets, u)[2]))
    mixed = np.asarray(unrolled(problem, objective.reweighted([2.0, 0.5, -1.0]), targets, u)[2])
    np.testing.assert_allclose(mixed, 2 * grads[0] + 0.5 * grads[1] - grads[2], rtol=1e-10, atol=1e-14)


@pytest.fixture(scope="module")
def converged(x64, bars_split):
    """A fit run to its fixed point (1200 iterations; the coefficients are chosen so that EM
    converges at about 0.97 per iteration while 45% of Θ stays zeroed) with the held-out
    perplexity."""
    train, valid, _ = bars_split
    return make(train, 1200, O.heldout_perplexity_loss(*valid.completion_split(seed=0)), smooth=0.5, decorrelate=200.0)


def test_implicit_equals_unrolled_at_convergence(converged):
    """At the fixed point the implicit hypergradient (adjoint system by GMRES and by the
    Neumann iteration) equals reverse mode through all 1200 iterations; the ramp's ``first``,
    forgotten by then, has derivative 0 implicitly and a vanishing one unrolled."""
    problem, targets, u, objective = converged
    value, _, g_unrolled, state = unrolled(problem, objective, targets, u)
    assert float((state.theta == 0).mean()) > 0.2  # a fixed point with entries zeroed by sparsing
    g_unrolled = np.asarray(g_unrolled)
    first = [t.name for t in targets].index("sparse_theta.first")
    assert abs(g_unrolled[first]) < 1e-5 * np.max(np.abs(g_unrolled))
    for solver in ("gmres", "neumann"):
        v, _, g, info = implicit(problem, objective, targets, u, state, solver=solver, tol=1e-11, maxiter=3000)
        assert float(v) == pytest.approx(float(value), rel=1e-12)
        assert float(info["fixed_point_residual"]) < 1e-12
        assert float(info["adjoint_residual"]) < 1e-9
        np.testing.assert_allclose(np.asarray(g), g_unrolled, rtol=1e-6, atol=1e-9 * np.max(np.abs(g_unrolled)))
        assert float(np.asarray(g)[first]) == 0.0


def test_implicit_refuses_regularizers_that_update_their_data(x64, bars_split):
    train, _, _ = bars_split
    model = tj.ARTM(4, regularizers=[(R.sparse_theta(rate=0.1), 1.0)], max_iter=3, progress=False, scores=())
    problem = Problem.from_model(model, train, dtype=jnp.float64)
    targets = targets_from(problem.reg, ["sparse_theta"])
    with pytest.raises(ValueError, match=r"\['sparse_theta'\] re-estimate their data every pass; use method='unrolled'"):
        implicit(problem, O.coherence_loss(train), targets, jnp.zeros(1))
