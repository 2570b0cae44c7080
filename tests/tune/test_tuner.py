"""The tuner and the differentiable fit in float32: the fit equals ARTM.fit, hypergradients stay
finite where sparsing zeroes entries, tuning lowers the validation objective and returns a model
fitted with the best coefficients, and bad input gets clear errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import topicjax as tj
from topicjax import regularizers as R
from topicjax.core import estep, layout
from topicjax.regularizers.schedules import Linear
from topicjax.tune import Problem, forward, implicit, targets_from, tune, unrolled
from topicjax.tune.hypergrad import forward_many
from topicjax.tune.objectives import as_objective
from topicjax.tune import objectives as O
from topicjax.tune.backend import differentiable
from topicjax.tune.problem import initial_values

# one model structure and one set of targets for every test here: they share compiled code
BOX = {"smooth_phi": (1e-3, 1.0), "sparse_theta.last": (1e-3, 1.0), "decorrelate": (1e-1, 1e3)}


#: GMRES restarts of the implicit hypergradients here (see test_float32_hypergradient_finite_where_sparsing_zeroes)
IMPLICIT_MAXITER = 3

# the same regularizer objects in every model: ARTM.fit compiles once for all the tests here
SMOOTH, SPARSE, DECORRELATE = R.smooth_phi(), R.sparse_theta(), R.decorrelate()


def model():
    regs = [(SMOOTH, 0.01), (SPARSE, Linear(1, 8, 0.01, 0.2)), (DECORRELATE, 1.0)]
    return tj.ARTM(8, regularizers=regs, max_iter=15, progress=False, scores=())


@pytest.fixture(scope="module")
def objective(bars_split):
    _, valid, _ = bars_split
    return O.heldout_perplexity_loss(*valid.completion_split(seed=0))


def test_differentiable_estep_equals_engine_and_has_second_derivatives(bars_split):
    """The hypergradient's E-step gives the engine's counts, and the same second derivatives as
    the engine's E-step (values from the selected kernel, tangents from the XLA one) and as the
    unsliced kernel (an independent code path)."""
    train, _, _ = bars_split
    data = layout.prepare(train)
    key = jax.random.key(0)
    phi = jax.random.dirichlet(key, jnp.ones(train.n_words), (4,)).T
    theta = jnp.full((4, train.n_docs), 0.25)
    for a, b in zip(estep.expected_counts(phi, theta, data), differentiable(data).expected_counts(phi, theta)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)

    @jax.jit
    def second(d):
        return jax.grad(lambda p: jnp.sum(jax.grad(estep.log_likelihood)(p, theta, d) ** 2))(phi)

    hvp = second(differentiable(data))
    # the flat (unsliced) kernel is differentiable to second order too: an independent path
    np.testing.assert_allclose(np.asarray(hvp), np.asarray(second(data._replace(piece_doc=None))), rtol=2e-4)
    np.testing.assert_allclose(np.asarray(hvp), np.asarray(second(data)), rtol=2e-4)


def test_fit_equals_artm_fit(bars_split, objective):
    """The scanned, checkpointed fit is ARTM.fit (same steps, same seed) up to round-off."""
    train, _, _ = bars_split
    m = model()
    problem = Problem.from_model(m, train)
    targets = targets_from(problem.reg, BOX)
    state = unrolled(problem, objective, targets, jnp.asarray(initial_values(problem.reg, targets)))[3]
    m.fit(train)
    np.testing.assert_allclose(np.asarray(state.phi), m.phi_, atol=2e-6)
    np.testing.assert_allclose(np.asarray(state.theta), m.theta_, atol=2e-5)


def test_float32_hypergradient_finite_where_sparsing_zeroes(bars_split, objective):
    """In float32 the second derivatives of log at a zeroed entry (β/EPS² overflows) must not
    reach the result: the clamp's derivative there is a select, not a product."""
    train, _, _ = bars_split
    problem = Problem.from_model(model(), train)
    targets = targets_from(problem.reg, BOX)
    value, _, grad, state = unrolled(problem, objective, targets, jnp.asarray(initial_values(problem.reg, targets)))
    assert bool((state.theta == 0).any())
    assert np.isfinite(float(value)) and np.all(np.isfinite(np.asarray(grad)))
    # 3 GMRES restarts (90 Krylov vectors), as in test_tune_implicit_and_callback_stop (one compiled
    # program): this 15-iteration fit is no fixed point, so the default 200 never reach tol and
    # took 5 s of the -O0 compiled code; finiteness is what is checked here, accuracy in test_hypergrad
    _, _, g_imp, info = implicit(problem, objective, targets, jnp.asarray(initial_values(problem.reg, targets)), state,
                                 maxiter=IMPLICIT_MAXITER)
    assert np.all(np.isfinite(np.asarray(g_imp))) and np.isfinite(float(info["adjoint_residual"]))


def test_float32_hypergradient_finite_where_sparsing_empties_documents():
    """Strong sparsing of short documents empties whole θ columns: every word of such a document
    has p = 0, clamped at EPS, where the derivative of n / p overflows in float32 (n / EPS²).
    The hypergradient must stay finite (before the E-step guarded it, it was NaN here)."""
    corpus, _, _ = tj.datasets.make_bars(n_docs=100, doc_length=4, seed=0)
    train, valid = corpus.train_test_split(20, seed=0)
    m = tj.ARTM(8, regularizers=[(R.smooth_phi(), 0.01), (R.sparse_theta(), 0.5)], max_iter=10, progress=False,
                scores=())
    problem = Problem.from_model(m, train)
    targets = targets_from(problem.reg, {"smooth_phi": (1e-3, 1.0), "sparse_theta": (1e-3, 10.0)})
    objective = O.heldout_perplexity_loss(*valid.completion_split(seed=0))
    value, _, grad, state = unrolled(problem, objective, targets, jnp.log(jnp.asarray([0.01, 0.7], jnp.float32)))
    emptied = int((np.asarray(state.theta).sum(0) <= 0).sum())
    assert 0 < emptied < train.n_docs
    assert np.isfinite(float(value)) and np.all(np.isfinite(np.asarray(grad)))


def test_tune_lowers_objective_and_refits_best(bars_split, objective):
    """Gradient steps lower the validation objective; the history has the documented fields;
    coefficients stay in the box; the returned model is an ordinary fit with the best
    coefficients, whose objective is the best value of the history."""
    train, _, _ = bars_split
    seen = []
    result = tune(model(), train, objective, BOX, optimizer=optax.adam(0.3), n_steps=6, progress=False,
                  callback=seen.append)
    h = result.history
    assert len(h) == 6 and len(seen) == 6
    assert {"step", "objective", "log_perplexity", "coef/smooth_phi", "grad/decorrelate", "seconds"} <= set(h[0])
    assert result.best_value == min(r["objective"] for r in h)
    assert result.best_value < h[0]["objective"]
    for r in h:
        for name, (lo, hi) in BOX.items():
            assert lo * (1 - 1e-6) <= r[f"coef/{name}"] <= hi * (1 + 1e-6)
    assert result.coefs == pytest.approx({k: h[result.best_step][f"coef/{k}"] for k in BOX})
    fitted = result.model
    coefs = fitted.regularizer().coefs
    assert [float(coefs[0].value), float(coefs[1].last), float(coefs[2].value)] == pytest.approx(
        [result.coefs[k] for k in BOX])
    value, _ = jax.jit(lambda o, p, t: o(p, t))(objective, jnp.asarray(fitted.phi_), jnp.asarray(fitted.theta_))
    assert float(value) == pytest.approx(result.best_value, rel=1e-5)


def test_forward_many_equals_a_loop_of_fits(bars_split, objective):
    """The probe's batched fits (the engine's batched E-step) give the objective of each fit
    run alone through the differentiable path, and flag a collapsed fit."""
    train, _, _ = bars_split
    problem = Problem.from_model(model(), train)
    targets = targets_from(problem.reg, BOX)
    us = np.log([[0.01, 0.2, 1.0], [0.5, 0.01, 100.0], [0.001, 1.0, 0.1]])
    values, ok = forward_many(problem, objective, targets, us)
    assert np.all(np.asarray(ok))
    for u, v in zip(us, np.asarray(values)):
        assert float(v) == pytest.approx(float(forward(problem, objective, targets, u)[0]), rel=1e-5)
    # every document emptied by sparsing short documents: a collapsed fit, flagged
    corpus, _, _ = tj.datasets.make_bars(n_docs=40, doc_length=4, seed=0)
    short = tj.ARTM(8, regularizers=[(R.smooth_phi(), 0.01), (R.sparse_theta(), 0.5)], max_iter=10, progress=False,
                    scores=())
    problem = Problem.from_model(short, corpus)
    targets = targets_from(problem.reg, {"smooth_phi": (1e-3, 1.0), "sparse_theta": (1e-3, 10.0)})
    _, ok = forward_many(problem, as_objective(lambda p, t: jnp.sum(p)), targets, np.log([[0.01, 0.3], [0.01, 3.0]]))
    assert np.asarray(ok).tolist() == [True, False]


def test_probe_moves_a_stalled_tuner_to_a_better_point(bars_split, objective):
    """With no gradient progress (learning rate 0) the tuner stalls; after ``patience`` steps
    it fits ``probe`` values of each coefficient over its bounds around the best point and
    continues from the best of them when it beats the best so far."""
    train, _, _ = bars_split
    init = {"smooth_phi": 1.0, "sparse_theta.last": 1e-3, "decorrelate": 1e-1}  # a corner of the box
    result = tune(model(), train, objective, BOX, optimizer=optax.sgd(0.0), n_steps=4, init=init, progress=False,
                  refit=False, probe=5, patience=2)
    h = result.history
    probes = [r for r in h if "probe_fits" in r]
    assert [r["step"] for r in probes] == [2] and probes[0]["probe_fits"] == 15
    assert all(r["coef/smooth_phi"] == pytest.approx(1.0) for r in h[:3])
    assert probes[0]["probe_best"] < h[0]["objective"] == h[2]["objective"]
    # the next step starts from the probe's best point: one coefficient moved to a probed value
    moved = {k: h[3][f"coef/{k}"] for k in BOX}
    grid = {k: np.geomspace(*BOX[k], 5) for k in BOX}
    changed = [k for k in BOX if moved[k] != pytest.approx(init[k], rel=1e-5)]
    assert len(changed) == 1 and np.min(np.abs(grid[changed[0]] / moved[changed[0]] - 1)) < 1e-5
    assert h[3]["objective"] == pytest.approx(probes[0]["probe_best"], rel=1e-5)
    assert result.best_value == pytest.approx(probes[0]["probe_best"]) and result.best_value == h[-1]["best"]
    with pytest.raises(ValueError, match="probe must be 0"):
        tune(model(), train, objective, BOX, probe=1, progress=False)
    with pytest.raises(ValueError, match="probe needs finite bounds"):
        tune(model(), train, objective, ["smooth_phi"], probe=4, progress=False)


def test_tune_implicit_and_callback_stop(bars_split, objective):
    """Implicit hypergradients drive the tuner too (a Linear ramp's end among the targets);
    the callback stops it early."""
    train, _, _ = bars_split
    result = tune(model(), train, objective, BOX, method="implicit", n_steps=5, progress=False, refit=False,
                  callback=lambda rec: rec["step"] == 1, implicit_options={"maxiter": IMPLICIT_MAXITER})
    assert len(result.history) == 2 and result.model is None
    assert "fixed_point_residual" in result.history[0]
    assert result.history[1]["coef/sparse_theta.last"] != pytest.approx(0.2)


def test_bad_input_is_named(bars_split, objective):
    train, _, _ = bars_split
    m = model()
    with pytest.raises(ValueError, match=r"no regularizer named 'smooth'; the model has \['smooth_phi', 'sparse_theta', "):
        tune(m, train, objective, {"smooth": (0.1, 1.0)}, progress=False)
    with pytest.raises(ValueError, match="lower bound must be > 0"):
        tune(m, train, objective, {"smooth_phi": (0.0, 1.0)}, progress=False)
    with pytest.raises(ValueError, match="lower 2.0 must be below upper 1.0"):
        tune(m, train, objective, {"smooth_phi": (2.0, 1.0)}, progress=False)
    with pytest.raises(ValueError, match=r"has no number 'slope'; it has \['value'\]"):
        tune(m, train, objective, {"smooth_phi.slope": (0.1, 1.0)}, progress=False)
    with pytest.raises(ValueError, match="method must be one of"):
        tune(m, train, objective, {"smooth_phi": (0.1, 1.0)}, method="newton", progress=False)
    with pytest.raises(ValueError, match=r"init names \['decorrelate'\] that are not tuned"):
        tune(m, train, objective, {"smooth_phi": (0.1, 1.0)}, init={"decorrelate": 1.0}, progress=False)
    with pytest.raises(ValueError, match=r"name one of its numbers as 'sparse_theta.<field>' with field in "
                                         r"\['start', 'stop', 'first', 'last'\]"):
        tune(m, train, objective, ["sparse_theta"], progress=False)
    host = tj.ARTM(4, regularizers=[(R.sparse_theta(), lambda it, history: 0.1)], max_iter=3, progress=False)
    with pytest.raises(ValueError, match="evaluated on the host"):
        tune(host, train, objective, ["sparse_theta"], progress=False)
    both = tj.ARTM(4, regularizers=[(R.sparse_theta(), lambda it, history: 0.1), (R.smooth_phi(), 0.1)], max_iter=3,
                   progress=False)
    with pytest.raises(ValueError, match=r"regularizers \['sparse_theta'\] have schedules of the score history"):
        tune(both, train, objective, ["smooth_phi"], progress=False)
    other = tj.Corpus.from_dense(np.ones((4, 7), int))
    with pytest.raises(ValueError, match="built for 7 words, the model has 25"):
        tune(m, train, O.coherence_loss(other), ["smooth_phi"], progress=False)
